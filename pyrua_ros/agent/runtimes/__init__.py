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
    """Build the loop runtime a :class:`~pyrua_ros.agent.settings.config.PlayConfig` asks for (``cfg.agent.runtime``),
    logging to the ``events`` sink. The openai runtime gets ``cfg.model`` as is (the schema's ModelSettings) and
    ``tools`` (``ArmToolkit.tool_specs()``; default: the code arm's own specs); the replay runtime the source
    :func:`pyrua_ros.agent.runtimes.replay_runtime.replay_source` resolves."""
    agent = cfg.agent
    runtime_class(agent.runtime)   # validates the name
    if agent.runtime == "replay":
        from .replay_runtime import replay_source

        return create("replay", source=replay_source(agent, cfg.episode), arm=agent.arm, event_sink=events)
    from .tools import tool_specs

    if tools is None:
        tools = tool_specs(agent.arm, agent.feedback, agent.images, agent.max_programs)
    return create("openai", settings=cfg.model, tools=tools, event_sink=events)


def cli_reasoning(cfg) -> str | None:
    """The reasoning effort a runtime uses: ``--reasoning``, or ``xhigh`` for the CLI runtimes (the reference's
    default); ``None`` for the others (not sent)."""
    if cfg.model.reasoning:
        return cfg.model.reasoning
    return DEFAULT_CLI_REASONING if cfg.agent.runtime in CLI_RUNTIMES else None


def make_cli_runtime(cfg, *, out_dir, workspace, tool_names: list[str], kernel=None):
    """Build the ``codex`` / ``claude`` runtime of a :class:`~pyrua_ros.agent.settings.config.PlayConfig`
    (``cfg.agent.runtime``), its events going to ``<out_dir>/<runtime>_events.jsonl``. ``tool_names``: the MCP
    tools the CLI may call (the arm's); ``kernel``: the episode's cell kernel, whose workspace the CLI's sandbox
    shares (None on the tools arm); ``--unsafe-sandbox`` runs the CLI outside any sandbox too."""
    import pathlib

    from .cli_agent import CliSettings, find_cli

    agent, model, cli = cfg.agent, cfg.model, cfg.cli
    if agent.runtime not in CLI_RUNTIMES:
        raise ValueError(f"unknown CLI runtime {agent.runtime!r}; valid: {', '.join(CLI_RUNTIMES)}")
    module, attribute = CLI_RUNTIMES[agent.runtime]
    cls = getattr(importlib.import_module(module), attribute)
    executable = find_cli(agent.runtime, cli.codex_bin if agent.runtime == "codex" else cli.claude_cli)
    settings = CliSettings(model=model.model, executable=executable, base_url=model.base_url,
                           api_key_env=model.api_key_env, reasoning=cli_reasoning(cfg),
                           home=cli.codex_home if agent.runtime == "codex" else None, network=cli.cli_network,
                           proxy=cli.cli_proxy, max_turns=agent.max_turns,
                           tool_timeout_s=max(agent.cell_timeout_s, agent.budget_s) + 60.0)
    extra = {"tool_names": tool_names} if agent.runtime == "claude" else {}
    out_dir = pathlib.Path(out_dir)
    if kernel is not None and kernel.shared_workspace is None and cfg.sandbox.isolation == "bwrap":
        kernel.import_host_files = True   # the CLI writes the run directory's workspace/ (cli_sandbox)
    return cls(settings, out_dir=out_dir, workspace=workspace,
               events_path=out_dir / f"{agent.runtime}_events.jsonl", isolation=cfg.sandbox.isolation,
               shared_workspace=kernel.shared_workspace if kernel is not None else None,
               limits=kernel.limits if kernel is not None else None, **extra)
