"""Model runtimes of the agent loop: ``openai`` (chat completions) and ``replay`` (an earlier run or a program).

``create(name, **kwargs)`` builds one by name; implementations are imported lazily, so importing this package
does not import the ``openai`` client. The seam and records live in :mod:`.base`.
"""

from __future__ import annotations

import importlib

from .base import ModelResponse, Runtime, RuntimeFailure, ToolCall, Usage, UsageTotals

RUNTIMES = {
    "openai": ("pyrua_ros.agent.runtimes.openai_runtime", "OpenAIRuntime"),
    "replay": ("pyrua_ros.agent.runtimes.replay_runtime", "ReplayRuntime"),
}

__all__ = ["RUNTIMES", "ModelResponse", "Runtime", "RuntimeFailure", "ToolCall", "Usage", "UsageTotals",
           "create", "make_runtime", "runtime_class"]


def runtime_class(name: str) -> type:
    """The class registered as ``name``; ValueError listing the valid names otherwise."""
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}; valid runtimes: {', '.join(sorted(RUNTIMES))}")
    module, attribute = RUNTIMES[name]
    return getattr(importlib.import_module(module), attribute)


def create(name: str, **kwargs) -> Runtime:
    """Build runtime ``name``: ``openai`` takes (settings, tools, event_sink), ``replay`` (source, arm, event_sink)."""
    return runtime_class(name)(**kwargs)


def make_runtime(cfg, events=None) -> Runtime:
    """Build the runtime an episode config asks for (``cfg.runtime``), logging to the ``events`` sink.

    Reads the ``AgentConfig`` fields ``runtime``, ``arm``, ``feedback``, ``images``, ``max_programs``, ``replay``,
    ``model``, ``base_url``, ``api_key_env``, ``openai_max_tokens``, ``openai_tool_choice``,
    ``openai_temperature``, ``openai_extra_body``, ``openai_request_timeout_s``, ``context_window``,
    ``system_prompt`` and ``openai_max_retries`` (PlayConfig).
    """
    runtime_class(cfg.runtime)   # validates the name
    if cfg.runtime == "replay":
        if cfg.replay is None:
            raise ValueError("--runtime replay needs --replay (a run directory or a .py file defining run(robo))")
        return create("replay", source=cfg.replay, arm=cfg.arm, event_sink=events)
    from .settings import ModelSettings
    from .tools import tool_specs

    optional = {}
    if cfg.openai_max_retries is not None:
        optional["max_retries"] = cfg.openai_max_retries
    settings = ModelSettings(model=cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                             max_tokens=cfg.openai_max_tokens, tool_choice=cfg.openai_tool_choice,
                             temperature=cfg.openai_temperature, extra_body=cfg.openai_extra_body,
                             system_prompt=cfg.system_prompt,
                             request_timeout_s=cfg.openai_request_timeout_s, context_window=cfg.context_window,
                             **optional)
    tools = tool_specs(cfg.arm, cfg.feedback, cfg.images, cfg.max_programs)
    return create("openai", settings=settings, tools=tools, event_sink=events)
