"""The model runtimes of ``play --runtime``, declared once as data: one frozen :class:`RuntimeSpec` per runtime in
:data:`RUNTIMES`, which everything else reads (the ``--runtime`` choices and help, the flag checks of
:class:`~pyrua_ros.settings.config.PlayConfig`, the file-system checks of
:mod:`pyrua_ros.agent.run.validate`, the builders of :mod:`pyrua_ros.agent.runtimes` and the loop arm).

The table lives at the settings layer because the settings read it; the implementation each spec names
(``implementation``, a ``module:Class`` under ``pyrua_ros.agent.runtimes``) is imported only by that package.
**Adding a runtime** is one :meth:`RuntimeRegistry.add` call here plus its implementation module: a loop runtime's
class offers ``from_config(cfg, events, tools)``, a CLI runtime's class is a
:class:`~pyrua_ros.agent.runtimes.cli_agent.CliRuntime`; either may offer ``check_config(cfg)`` for the checks
that need the file system. ``test_runtime_registry`` sweeps every registered runtime.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pyrua_ros.settings.modes import ARMS
from pyrua_ros.sim_interfaces.registry import Registry

PACKAGE = "pyrua_ros.agent.runtimes"   # where every implementation lives


@dataclasses.dataclass(frozen=True)
class RuntimeSpec:
    """One runtime of ``--runtime``.

    - ``name``: the ``--runtime`` value; ``summary``: its words in the ``--runtime`` help.
    - ``implementation``: ``module:Class`` under :data:`PACKAGE`.
    - ``kind``: ``loop`` (answers :func:`pyrua_ros.agent.loop.loop.run_loop`'s requests) or ``cli`` (a coding-agent
      CLI that drives the arm through the episode's MCP server).
    - ``uses_model``: a model server makes the calls (False: no ``--base-url``, no sampling fields recorded, the
      calls are played back). A ``loop`` runtime that uses a model needs ``--base-url``; a ``cli`` one needs it on
      loopback under ``--cli-network loopback``.
    - ``arms``: the ``--arm`` values it can drive; ``arms_refusal``: the why of the refusal of the others.
    - ``note``: a line every episode of this runtime records in ``result.notes``.
    - ``binary`` / ``executable_setting`` / ``home_setting`` (``cli`` only): the executable's name (in the pinned
      npm folder or on PATH), the :class:`~pyrua_ros.settings.config.CliRuntimeSettings` field that names
      it explicitly, and the one naming the CLI's home folder (None: a clean one in the run directory).
    - ``default_reasoning``: the reasoning effort used when ``--reasoning`` is not given (None: not sent).
    """

    name: str
    summary: str
    implementation: str
    kind: Literal["loop", "cli"] = "loop"
    uses_model: bool = True
    arms: tuple[str, ...] = ARMS
    arms_refusal: str = ""
    note: str | None = None
    binary: str | None = None
    executable_setting: str | None = None
    home_setting: str | None = None
    default_reasoning: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("loop", "cli"):
            raise ValueError(f"runtime {self.name}: kind must be loop or cli; got {self.kind!r}")
        module, _, attribute = self.implementation.partition(":")
        if not module or not attribute:
            raise ValueError(f"runtime {self.name}: implementation must be module:Class; got {self.implementation!r}")
        if (self.kind == "cli") != (self.binary is not None and self.executable_setting is not None):
            raise ValueError(f"runtime {self.name}: a cli runtime, and only one, names its binary and "
                             "executable_setting")
        unknown = set(self.arms) - set(ARMS)
        if unknown or not self.arms:
            raise ValueError(f"runtime {self.name}: arms must be among {', '.join(ARMS)}; got {self.arms}")

    @property
    def module(self) -> str:
        """The implementation's dotted module name."""
        return f"{PACKAGE}.{self.implementation.partition(':')[0]}"

    @property
    def attribute(self) -> str:
        """The implementation's class name in :attr:`module`."""
        return self.implementation.partition(":")[2]

    @property
    def executable_flag(self) -> str | None:
        """The flag of :attr:`executable_setting` (``--codex-bin``)."""
        return f"--{self.executable_setting.replace('_', '-')}" if self.executable_setting else None


class RuntimeRegistry(Registry[RuntimeSpec]):
    """The registered :class:`RuntimeSpec` by name, in registration order (the order of the ``--runtime``
    choices); an unknown name's refusal lists the valid ones sorted."""

    def __init__(self) -> None:
        super().__init__("runtime", sort_valid=True)

    def names(self, *, kind: str | None = None, uses_model: bool | None = None) -> tuple[str, ...]:
        """The registered names, optionally only those of ``kind`` / ``uses_model``."""
        return tuple(s.name for s in self if (kind is None or s.kind == kind)
                     and (uses_model is None or s.uses_model == uses_model))


def spoken(names: tuple[str, ...] | list[str]) -> str:
    """``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


RUNTIMES = RuntimeRegistry()

RUNTIMES.add(RuntimeSpec("openai", "chat completions", "openai_runtime:OpenAIRuntime"))
RUNTIMES.add(RuntimeSpec("replay", "a recorded run or a run(robo) file; no model server",
                         "replay_runtime:ReplayRuntime", uses_model=False, arms=("cells", "program"),
                         arms_refusal="replay replays recorded cells or programs",
                         note="runtime replay: the cells come from a recording or program file, not a model"))
RUNTIMES.add(RuntimeSpec("codex", "Codex CLI over MCP", "codex_runtime:CodexRuntime", kind="cli", binary="codex",
                         executable_setting="codex_bin", home_setting="codex_home", default_reasoning="xhigh"))
RUNTIMES.add(RuntimeSpec("claude", "Claude Code over MCP", "claude_runtime:ClaudeRuntime", kind="cli",
                         binary="claude", executable_setting="claude_cli", default_reasoning="xhigh"))


def runtime_help() -> str:
    """The ``--runtime`` help: each runtime's summary, those without a model server first."""
    specs = sorted(RUNTIMES, key=lambda s: s.uses_model)
    return f"who makes the calls: {spoken([f'{s.name} ({s.summary})' for s in specs])}"


__all__ = ["PACKAGE", "RUNTIMES", "RuntimeRegistry", "RuntimeSpec", "runtime_help", "spoken"]
