"""Model runtimes: ``openai`` (chat completions) and ``replay`` (an earlier run or a program) answer the agent
loop's requests; ``codex`` and ``claude`` run a coding-agent CLI that drives the arm through the episode's MCP
server (:mod:`.cli_agent`).

``create(name, **kwargs)`` builds a loop runtime by name, ``make_cli_runtime`` a CLI one; implementations are
imported lazily, so importing this package does not import the ``openai`` client. The seam and records live in
:mod:`.base`.
"""

from __future__ import annotations

import importlib

from .base import ModelResponse, Runtime, RuntimeFailure, ToolCall, Usage, UsageTotals

RUNTIMES = {
    "openai": ("pyrua_ros.agent.runtimes.openai_runtime", "OpenAIRuntime"),
    "replay": ("pyrua_ros.agent.runtimes.replay_runtime", "ReplayRuntime"),
}

CLI_RUNTIMES = {
    "codex": ("pyrua_ros.agent.runtimes.codex_runtime", "CodexRuntime"),
    "claude": ("pyrua_ros.agent.runtimes.claude_runtime", "ClaudeRuntime"),
}
DEFAULT_CLI_REASONING = "xhigh"   # the reference's --reasoning default for both CLIs

__all__ = ["CLI_RUNTIMES", "RUNTIMES", "ModelResponse", "Runtime", "RuntimeFailure", "ToolCall", "Usage",
           "UsageTotals", "cli_reasoning", "create", "make_cli_runtime", "make_runtime", "runtime_class"]


def runtime_class(name: str) -> type:
    """The class registered as ``name``; ValueError listing the valid names otherwise."""
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}; valid runtimes: {', '.join(sorted(RUNTIMES))}")
    module, attribute = RUNTIMES[name]
    return getattr(importlib.import_module(module), attribute)


def create(name: str, **kwargs) -> Runtime:
    """Build runtime ``name``: ``openai`` takes (settings, tools, event_sink), ``replay`` (source, arm, event_sink)."""
    return runtime_class(name)(**kwargs)


def make_runtime(cfg, events=None, tools: list[dict] | None = None) -> Runtime:
    """Build the runtime an episode config asks for (``cfg.runtime``), logging to the ``events`` sink.

    ``tools``: the function specs to offer (``ArmToolkit.tool_specs()``; default: the code arm's own specs).

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
    if tools is None:
        tools = tool_specs(cfg.arm, cfg.feedback, cfg.images, cfg.max_programs)
    return create("openai", settings=settings, tools=tools, event_sink=events)


def cli_reasoning(cfg) -> str | None:
    """The reasoning effort a runtime uses: ``--reasoning``, or ``xhigh`` for the CLI runtimes (the reference's
    default); ``None`` for the others (not sent)."""
    if cfg.reasoning:
        return cfg.reasoning
    return DEFAULT_CLI_REASONING if cfg.runtime in CLI_RUNTIMES else None


def make_cli_runtime(cfg, *, out_dir, workspace, tool_names: list[str]):
    """Build the ``codex`` / ``claude`` runtime of an episode config (``cfg.runtime``), its events going to
    ``<out_dir>/<runtime>_events.jsonl``. ``tool_names``: the MCP tools the CLI may call (the arm's)."""
    import importlib
    import pathlib

    from .cli_agent import CliSettings, find_cli

    if cfg.runtime not in CLI_RUNTIMES:
        raise ValueError(f"unknown CLI runtime {cfg.runtime!r}; valid: {', '.join(CLI_RUNTIMES)}")
    module, attribute = CLI_RUNTIMES[cfg.runtime]
    cls = getattr(importlib.import_module(module), attribute)
    explicit = cfg.codex_bin if cfg.runtime == "codex" else cfg.claude_cli
    settings = CliSettings(model=cfg.model, executable=find_cli(cfg.runtime, explicit), base_url=cfg.base_url,
                           api_key_env=cfg.api_key_env, reasoning=cli_reasoning(cfg),
                           home=cfg.codex_home if cfg.runtime == "codex" else None, network=cfg.cli_network,
                           proxy=cfg.cli_proxy, max_turns=cfg.max_turns,
                           tool_timeout_s=max(cfg.cell_timeout_s, cfg.budget_s) + 60.0)
    extra = {"tool_names": tool_names} if cfg.runtime == "claude" else {}
    out_dir = pathlib.Path(out_dir)
    return cls(settings, out_dir=out_dir, workspace=workspace, events_path=out_dir / f"{cfg.runtime}_events.jsonl",
               **extra)
