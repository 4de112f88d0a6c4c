"""Model runtimes: ``openai`` (chat completions) and ``replay`` (an earlier run or a program) answer the agent
loop's requests; ``codex`` and ``claude`` run a coding-agent CLI that drives the arm through the episode's MCP
server (:mod:`.cli_agent`).

Each runtime is declared once, as a :class:`~pyrua_ros.settings.runtimes.RuntimeSpec` in
:data:`~pyrua_ros.settings.runtimes.RUNTIMES`; this package builds and checks them from their specs alone.
``create(name, **kwargs)`` builds a loop runtime by name, :func:`make_runtime` / :func:`make_cli_runtime` the one
a config asks for, :func:`check_config` runs its own file-system checks; implementations are imported lazily, so
importing this package does not import the ``openai`` client. The seam and records live in :mod:`.base`.
"""

from __future__ import annotations

import importlib
import pathlib

from pyrua_ros.settings.runtimes import RUNTIMES, RuntimeSpec

from .base import ModelResponse, Runtime, RuntimeFailure, ToolCall, Usage, UsageTotals

__all__ = ["RUNTIMES", "ModelResponse", "Runtime", "RuntimeFailure", "ToolCall", "Usage", "UsageTotals",
           "check_config", "cli_reasoning", "create", "implementation", "make_cli_runtime", "make_runtime",
           "runtime_class"]


def implementation(spec: RuntimeSpec) -> type:
    """The class ``spec`` names (imported on first use)."""
    return getattr(importlib.import_module(spec.module), spec.attribute)


def runtime_class(name: str) -> type:
    """The class of loop runtime ``name``; ValueError listing the valid names otherwise."""
    loops = RUNTIMES.names(kind="loop")
    if name not in loops:
        raise ValueError(f"unknown runtime {name!r}; valid runtimes: {', '.join(sorted(loops))}")
    return implementation(RUNTIMES[name])


def create(name: str, **kwargs) -> Runtime:
    """Build runtime ``name``: ``openai`` takes (settings, tools, event_sink), ``replay`` (source, arm, event_sink)."""
    return runtime_class(name)(**kwargs)


def make_runtime(cfg, events=None, tools: list[dict] | None = None) -> Runtime:
    """Build the loop runtime a :class:`~pyrua_ros.settings.config.PlayConfig` asks for (``cfg.agent.runtime``),
    logging to the ``events`` sink, by its class's ``from_config(cfg, events, tools)``; ``tools``: the toolkit's
    function specs (``ArmToolkit.tool_specs()``; None: the code arm's own)."""
    return runtime_class(cfg.agent.runtime).from_config(cfg, events, tools)


def check_config(cfg) -> None:
    """The checks ``cfg.agent.runtime``'s class makes of a config before boot (its ``check_config``, if any;
    :class:`~pyrua_ros.settings.schema.SettingError` on a refusal)."""
    check = getattr(implementation(RUNTIMES[cfg.agent.runtime]), "check_config", None)
    if check is not None:
        check(cfg)


def cli_reasoning(cfg) -> str | None:
    """The reasoning effort a runtime uses: ``--reasoning``, or its spec's default (``xhigh`` for the CLI
    runtimes, the reference's default); ``None``: not sent."""
    if cfg.model.reasoning:
        return cfg.model.reasoning
    return RUNTIMES[cfg.agent.runtime].default_reasoning if cfg.agent.runtime in RUNTIMES else None


def make_cli_runtime(cfg, *, out_dir, workspace, tool_names: list[str], kernel=None):
    """Build the CLI runtime of a :class:`~pyrua_ros.settings.config.PlayConfig` (``cfg.agent.runtime``),
    its events going to ``<out_dir>/<runtime>_events.jsonl``. ``tool_names``: the MCP tools the CLI may call (the
    arm's; given to a class whose ``wants_tool_names`` is set); ``kernel``: the episode's cell kernel, whose
    workspace the CLI's sandbox shares (None on the tools arm); ``--unsafe-sandbox`` runs the CLI outside any
    sandbox too."""
    from .cli_agent import CliSettings, find_cli  # noqa: PLC0415 (the registry: a runtime loads when chosen)

    agent, model, cli = cfg.agent, cfg.model, cfg.cli
    spec = RUNTIMES[agent.runtime]
    if spec.kind != "cli":
        raise ValueError(f"unknown CLI runtime {agent.runtime!r}; valid: {', '.join(RUNTIMES.names(kind='cli'))}")
    cls = implementation(spec)
    executable = find_cli(spec.binary, getattr(cli, spec.executable_setting))
    settings = CliSettings(model=model.model, executable=executable, base_url=model.base_url,
                           api_key_env=model.api_key_env, reasoning=cli_reasoning(cfg),
                           home=getattr(cli, spec.home_setting) if spec.home_setting else None,
                           network=cli.cli_network, proxy=cli.cli_proxy, max_turns=agent.max_turns,
                           tool_timeout_s=max(agent.cell_timeout_s, agent.budget_s) + 60.0)
    extra = {"tool_names": tool_names} if cls.wants_tool_names else {}
    out_dir = pathlib.Path(out_dir)
    if kernel is not None and kernel.shared_workspace is None and cfg.sandbox.isolation == "bwrap":
        kernel.import_host_files = True   # the CLI writes the run directory's workspace/ (cli_sandbox)
    return cls(settings, out_dir=out_dir, workspace=workspace,
               events_path=out_dir / f"{agent.runtime}_events.jsonl", isolation=cfg.sandbox.isolation,
               shared_workspace=kernel.shared_workspace if kernel is not None else None,
               limits=kernel.limits if kernel is not None else None, **extra)
