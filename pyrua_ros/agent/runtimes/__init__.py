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
    """Build the runtime a :class:`~pyrua_ros.agent.config.PlayConfig` asks for (``cfg.agent.runtime``), logging
    to the ``events`` sink. The openai runtime gets ``cfg.model`` as is (the schema's ModelSettings); the replay
    runtime the source :func:`pyrua_ros.agent.validate.replay_source` resolves."""
    agent = cfg.agent
    runtime_class(agent.runtime)   # validates the name
    if agent.runtime == "replay":
        from pyrua_ros.agent.validate import replay_source

        return create("replay", source=replay_source(agent, cfg.episode), arm=agent.arm, event_sink=events)
    from .tools import tool_specs

    tools = tool_specs(agent.arm, agent.feedback, agent.images, agent.max_programs)
    return create("openai", settings=cfg.model, tools=tools, event_sink=events)
