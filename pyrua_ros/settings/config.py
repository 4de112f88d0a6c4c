"""The settings schema: one frozen dataclass tree per command, every user-facing setting declared once.

Sections (each a frozen dataclass that validates its own values on construction, with messages that name the flag
and its valid values):

- :class:`EpisodeSettings` — which episode on which robot stack (the reference's "cell args": robot, suite, task,
  seed, step budget, primitive set, VLA / segmentation services) plus the driver and its clock;
- :class:`AgentSettings` — the agent loop of ``play`` (arm, runtime, replay source, images, feedback, guides,
  budgets);
- :class:`~pyrua_ros.settings.model.ModelSettings` — the model server and sampling (nested as is: the
  runtime reads the very object the CLI built);
- :class:`CliRuntimeSettings` — the coding-agent CLIs of ``--runtime codex|claude`` (executables, CODEX_HOME,
  network rule);
- :class:`ServeSettings` — ``pyrua-ros mcp``'s transport and port;
- :class:`OutputSettings` — the run directory and what is written and shown;
- :class:`SandboxSettings` — the cell kernel's OS boundary (``play`` and ``run``: both run model code in it);
- :class:`CompatSettings` — flags of PyRUA-Lean's command line: recorded; only ``--cuda-device`` (the GPU of a
  ``--vla-server-cmd`` server) and ``--rpent-root`` (its guides, with ``--guides``) act on a ROS backend.

Trees: :class:`PlayConfig` (``play``, the agent node, the launch), :class:`McpConfig` (``pyrua-ros mcp``),
:class:`RunConfig` (single-shot ``run``) and :class:`GenerateConfig` (single-shot ``generate``).
``pyrua_ros.settings.schema`` generates the CLI flags, launch arguments, node parameters and ``config/agent.yaml``
from them, so **adding a setting is one ``setting(...)`` field here** (plus the code that uses it). Checks that
need the file system, the suite table or the network live in :mod:`pyrua_ros.agent.run.validate`; nothing here touches
either.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
from typing import Any

from pyrua_ros.settings.model import ModelSettings, is_loopback_url
from pyrua_ros.settings.modes import (
    ARMS,
    BLAS_KERNELS,
    CLOCK_MODES,
    FEEDBACK_MODES,
    IMAGE_POLICIES,
    MCP_RUNTIME,
    PRIMITIVE_SETS,
    PROGRESS_MODES,
    ROBOTS,
)
from pyrua_ros.settings.runtimes import RUNTIMES, runtime_help, spoken
from pyrua_ros.settings.schema import SettingError, setting
from pyrua_ros.sim_interfaces.drivers import DRIVERS, driver_help

REFERENCE_ROOT_ENV = "PYRUALEAN_REFERENCE_ROOT"   # where --reference-root is read from when unset

ConfigError = SettingError   # the name the rest of the code (and eval) catches


def _variable(section: type, field: str) -> str:
    """The environment variable a setting of ``section`` is read from (its first)."""
    return next(f.metadata["setting"].env[0] for f in dataclasses.fields(section) if f.name == field)


def _choice(flag: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise SettingError(f"{flag} must be one of {', '.join(map(str, choices))}; got {value!r}")


MAX_SECONDS = 30 * 86400.0   # [s] the longest budget, timeout or wait a setting may give (timers refuse far larger)
MAX_COUNT = 2**31 - 1        # the largest count (steps, turns, MiB) a setting may give


def _at_least(flag: str, value: Any, low: float, *, strict: bool = False, high: float | None = None) -> None:
    """SettingError unless ``value`` (None passes) is a finite number ``> low`` (``strict``) or ``>= low``, and at
    most ``high`` (default: MAX_SECONDS for a float, MAX_COUNT for an int). NaN passes every comparison, so it is
    refused first by name."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise SettingError(f"{flag} must be a finite number; got {value!r}")
    if value <= low if strict else value < low:
        raise SettingError(f"{flag} must be {'>' if strict else '>='} {low:g}; got {value!r}")
    high = high if high is not None else (MAX_SECONDS if isinstance(value, float) else MAX_COUNT)
    if value > high:
        raise SettingError(f"{flag} must be at most {high:g}; got {value!r}" if isinstance(high, float)
                           else f"{flag} must be at most {high}; got {value!r}")


@dataclasses.dataclass(frozen=True)
class EpisodeSettings:
    """Which episode, on which robot stack: what boots the robot (``play``, ``run``, ``eval``)."""

    task: int = setting(0, help="task index within the suite (0-based)", scope="episode", cli_required=True)
    suite: str = setting("libero_goal", help="LIBERO / LIBERO-PRO suite, e.g. libero_goal_swap ("
                         + "; ".join(f"{', '.join(d.suites)} for --driver {d.name}" for d in DRIVERS.nodes()
                                     if d is not DRIVERS.default) + ")", scope="episode")
    seed: int = setting(0, help="episode seed, >= 0 (official init state = seed modulo the suite's count)",
                        scope="episode")
    max_episode_steps: int = setting(10000, help="simulator step budget [control steps]", scope="episode")
    robot: str = setting("libero", help="robot API given to the agent", choices=ROBOTS, launch=False,
                         name="robot_api")   # "robot" is the launch's driver choice
    driver: str = setting(DRIVERS.default.name, help=driver_help(), choices=DRIVERS.names(), name="robot",
                          scope="graph")
    clock: str = setting("lockstep", help="driver clock: lockstep (one control step per command) or realtime "
                                          "(20 Hz wall clock, last command held)", choices=CLOCK_MODES,
                         name="clock_mode", scope="driver")
    video_fps: float | None = setting(None, help="the driver's camera stream rate, so the frame rate of episode.mp4 "
                                                 "[frames per second of sim time]: 20 = one frame per control step "
                                                 "(more renders and a larger episode.mcap; docs/MEASURED.md)",
                                      unset="the driver's camera_rate_hz (2)", name="camera_rate_hz", scope="driver",
                                      metavar="FPS")
    blas_kernel: str = setting("native", help="BLAS kernel of the driver's physics: native (the CPU's own; state "
                                              "digests compare only between machines of one CPU family) or haswell "
                                              "(OPENBLAS_CORETYPE=Haswell, which every x86-64 AVX2 CPU runs: "
                                              "digests compare across Intel and AMD machines)", choices=BLAS_KERNELS,
                               scope="graph")
    primitives: str = setting("full", help="primitive set: full (what the seed model was trained with; needs a "
                                           "VLA policy server, --vla-endpoint or --vla-server-cmd: without one the "
                                           "episode says so and runs no-vla) or no-vla", choices=PRIMITIVE_SETS,
                              env="PYRUALEAN_PRIMITIVES")
    vla_endpoint: str | None = setting(None, help="host:port of an openpi-compatible VLA policy server",
                                       unset="no VLA skills", metavar="HOST:PORT")
    vla_server_cmd: str | None = setting(None, help="command that starts an openpi-compatible VLA policy server "
                                                    "({port} is replaced by its port): started on --cuda-device, "
                                                    "waited for, stopped with the episode",
                                         unset="none (use --vla-endpoint)", metavar="CMD")
    vla_server_timeout_s: float = setting(600.0, help="how long to wait for --vla-server-cmd to answer [s]")
    sam3_endpoint: str | None = setting(None, help="host:port or URL of an HTTP segmentation service",
                                        unset="the simulator's ground truth", metavar="HOST:PORT")

    def __post_init__(self) -> None:
        _choice("--robot", self.robot, ROBOTS)
        _choice("--driver", self.driver, DRIVERS.names())
        _choice("--clock", self.clock, CLOCK_MODES)
        _choice("--blas-kernel", self.blas_kernel, BLAS_KERNELS)
        _choice("--primitives", self.primitives, PRIMITIVE_SETS)
        _at_least("--task", self.task, 0)
        _at_least("--seed", self.seed, 0)
        _at_least("--max-episode-steps", self.max_episode_steps, 1)
        if self.video_fps is not None:
            _at_least("--video-fps", self.video_fps, 0, strict=True)
        _at_least("--vla-server-timeout-s", self.vla_server_timeout_s, 0, strict=True)
        if self.vla_server_cmd and self.primitives == "no-vla":
            raise SettingError("--vla-server-cmd starts a VLA policy server for the full primitive set; "
                               "--primitives no-vla would never use it")

    @property
    def primitive_set(self) -> str:
        """The primitive set that runs: ``full`` needs a VLA server; without one the reference's no-vla set runs."""
        return self.primitives if (self.vla_endpoint or self.vla_server_cmd) else "no-vla"

    @property
    def vla_fallback(self) -> str | None:
        """Why the full primitive set was asked for but the no-VLA set runs (said loudly: the seed model was
        trained with the full set), or None."""
        if self.primitives == "full" and self.primitive_set == "no-vla":
            return ("--primitives full needs a VLA policy server (--vla-endpoint HOST:PORT or --vla-server-cmd CMD); "
                    "none was given, so this episode runs the no-VLA primitive set (no pi0_pick / pi0_doubled) - "
                    "the seed model was trained with the full set")
        return None

    @property
    def tag(self) -> str:
        """``goal_t8_s0``-style short name of the episode (suite without ``libero_``)."""
        return f"{self.suite.removeprefix('libero_')}_t{self.task}_s{self.seed}"


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    """The agent loop of ``play``: who writes the cells, what it sees, and its budgets."""

    arm: str = setting("cells", help="tool surface: python cells (python tool), programs (run_program tool) or "
                                     "tools (one tool per robo primitive)", choices=ARMS, cli_required=True)
    runtime: str = setting("replay", help=runtime_help(), choices=RUNTIMES.names(), env="PYRUALEAN_RUNTIME")
    replay: pathlib.Path | None = setting(None, help="replay source: an earlier run directory, a tool_turns.json or "
                                                     "a .py file defining run(robo)",
                                          unset="the packaged example program of the suite and task", metavar="PATH")
    images: str = setting("on-motion", help="camera images attached to tool results", choices=IMAGE_POLICIES)
    feedback: str = setting("rich", help="what a tool result carries: pure (only what the code produced) or rich "
                                         "(plus primitive calls, motion, steps, state)", choices=FEEDBACK_MODES)
    guides: bool = setting(False, help="copy the robot's guides into workspace/guides/ and mention them")
    guides_dir: pathlib.Path | None = setting(None, help="copy every *.md of this folder as the guides; it must "
                                                         "hold the three the guides note names (implies --guides)",
                                              unset="the packaged LIBERO guides",
                                              metavar="DIR")
    max_turns: int | None = setting(None, help="decision budget: python/run_program calls, or robot tool calls on "
                                               "the tools arm (finish not counted)", unset="unbounded")
    max_programs: int | None = setting(None, help="program arm: at most N run_program calls", unset="unbounded")
    budget_s: float = setting(1200.0, help="wall-clock budget of the agent loop [s], model time included")
    cell_timeout_s: float = setting(300.0, help="wall-clock limit of one cell [s]")
    reference_root: pathlib.Path | None = setting(None, help="a PyRUA-Lean checkout or installed pyrualean package: "
                                                             "the prompt's docstrings, contract and knowledge come "
                                                             "from its files (parsed, not imported)",
                                                  env=REFERENCE_ROOT_ENV, unset="our own text",
                                                  metavar="DIR")

    RUNTIME_CHOICES = RUNTIMES.names()   # class attribute, not a field: what --runtime may be

    def __post_init__(self) -> None:
        _choice("--arm", self.arm, ARMS)
        _choice("--runtime", self.runtime, self.RUNTIME_CHOICES)
        _choice("--images", self.images, IMAGE_POLICIES)
        _choice("--feedback", self.feedback, FEEDBACK_MODES)
        _at_least("--budget-s", self.budget_s, 0, strict=True)
        _at_least("--cell-timeout-s", self.cell_timeout_s, 0, strict=True)
        _at_least("--max-turns", self.max_turns, 1)
        _at_least("--max-programs", self.max_programs, 1)
        if self.max_programs is not None and self.arm != "program":
            raise SettingError(f"--max-programs applies to --arm program only (got --arm {self.arm})")

    @property
    def uses_guides(self) -> bool:
        return self.guides or self.guides_dir is not None

    @property
    def budget_mode(self) -> str:
        return "calls" if self.max_turns is not None else "wall"


@dataclasses.dataclass(frozen=True)
class CliRuntimeSettings:
    """The coding-agent CLIs of ``--runtime codex|claude`` (PyRUA-Lean's flags and variables, plus the network
    rule): which executable runs, Codex's home, and what the CLI may reach."""

    codex_bin: str | None = setting(None, help="Codex executable", env="PYRUALEAN_CODEX_BIN",
                                    unset="the pinned one scripts/setup.sh installed, else codex on PATH",
                                    metavar="PATH")
    codex_home: pathlib.Path | None = setting(None, help="CODEX_HOME of the Codex agent: in the CLI sandbox only its "
                                              "config.toml and auth.json are given to Codex (readable by the model's "
                                              "tools); used as it is under --unsafe-sandbox",
                                              env="PYRUALEAN_CODEX_HOME", unset="a clean <out>/codex_home",
                                              metavar="DIR")
    claude_cli: str | None = setting(None, help="Claude Code executable", env="PYRUALEAN_CLAUDE_CLI",
                                     unset="the pinned one scripts/setup.sh installed, else claude on PATH",
                                     metavar="PATH")
    cli_network: str = setting("loopback", help="what the CLI may reach: loopback (its proxy variables point at a "
                                                "dead loopback port, so only 127.0.0.1 answers) or inherit (your "
                                                "proxy settings; a remote model server)",
                               choices=("loopback", "inherit"))
    cli_proxy: str | None = setting(None, help="proxy URL given to the CLI under --cli-network loopback",
                                    unset="a dead loopback port", metavar="URL")

    def __post_init__(self) -> None:
        _choice("--cli-network", self.cli_network, ("loopback", "inherit"))


@dataclasses.dataclass(frozen=True)
class OutputSettings:
    """The run directory and what is written and shown."""

    out: pathlib.Path | None = setting(None, help="run directory; must not exist or be empty unless --overwrite "
                                                  "or --resume", unset="runs/<suite>_t<task>_s<seed>_<time>",
                                       metavar="DIR")
    overwrite: bool = setting(False, help="a non-empty --out is moved aside to OUT.prev-<time> first")
    resume: bool = setting(False, help="if --out holds an episode that ran to its end, keep it and exit with its "
                                       "status; otherwise move the unfinished one aside and run again")
    video: bool = setting(True, help="write episode.mp4 (agentview and wrist side by side, real-time speed)")
    record: bool = setting(True, help="write episode.mcap (every topic of the episode)")
    progress: str = setting("auto", help="terminal progress: auto (rich on a terminal, plain lines otherwise), "
                                         "rich, plain or off", choices=PROGRESS_MODES, launch=False)

    def __post_init__(self) -> None:
        _choice("--progress", self.progress, PROGRESS_MODES)
        if self.overwrite and self.resume:
            raise SettingError("--overwrite and --resume exclude each other: --overwrite moves an earlier run aside "
                               "and runs again, --resume keeps a finished one")


@dataclasses.dataclass(frozen=True)
class SandboxSettings:
    """The cell kernel's boundary (docs/SANDBOX.md): bubblewrap namespaces, an unprivileged user, a size-limited
    workspace. Where bubblewrap cannot be set up the run is refused before boot unless ``--unsafe-sandbox``."""

    unsafe_sandbox: bool = setting(False, help="run cells in a plain child process without the bubblewrap boundary "
                                               "(only where it cannot be set up; recorded in result.json's notes)")
    workspace_mib: int = setting(256, help="size limit of the cell workspace, the kernel's only writable place "
                                           "[MiB]")

    def __post_init__(self) -> None:
        _at_least("--workspace-mib", self.workspace_mib, 1)

    @property
    def isolation(self) -> str:
        """The kernel's ``sandbox`` argument: ``bwrap`` or ``unsafe``."""
        return "unsafe" if self.unsafe_sandbox else "bwrap"


@dataclasses.dataclass(frozen=True)
class CompatSettings:
    """Flags of PyRUA-Lean's command line, accepted and recorded; on a ROS backend only ``cuda_device`` (with
    ``--vla-server-cmd``) and ``rpent_root`` (with ``--guides``) act."""

    cuda_device: str | None = setting(None, help="GPU of the --vla-server-cmd server (CUDA_VISIBLE_DEVICES); "
                                                 "otherwise recorded only",
                                      launch=False)
    rpent_root: str | None = setting(None, help="RPent checkout: --guides copies its robots/libero/guides when it "
                                                "has them; otherwise recorded only",
                                     env=("RPENT_ROOT", "RPENT_REPO_ROOT"), launch=False)
    libero_type: str = setting("pro", help="LIBERO flavour (recorded)", launch=False)
    python: str | None = setting(None, help="interpreter for the episode (accepted; the episode runs in this one)",
                                 launch=False)


def boot_options(episode: EpisodeSettings, compat: CompatSettings, **extra: Any) -> dict[str, Any]:
    """What result.host.boot_options records of how the robot side was booted, plus the command's ``extra``."""
    return {"driver": episode.driver, "clock": episode.clock, "vla_endpoint": episode.vla_endpoint,
            "vla_server_cmd": episode.vla_server_cmd, "sam3_endpoint": episode.sam3_endpoint,
            "libero_type": compat.libero_type, **extra}


@dataclasses.dataclass(frozen=True)
class PlayConfig:
    """One ``pyrualean play`` episode (also the agent node's parameters and the launch's agent arguments)."""

    episode: EpisodeSettings = EpisodeSettings()
    agent: AgentSettings = AgentSettings()
    model: ModelSettings = ModelSettings()
    cli: CliRuntimeSettings = CliRuntimeSettings()
    output: OutputSettings = OutputSettings()
    sandbox: SandboxSettings = SandboxSettings()
    compat: CompatSettings = CompatSettings()

    def __post_init__(self) -> None:
        """Flag combinations that would silently do nothing are refused, naming what they need (the checks
        that need the file system, e.g. that a CLI executable exists, are
        :func:`pyrua_ros.agent.run.validate.check_play`'s)."""
        agent, model, spec = self.agent, self.model, RUNTIMES[self.agent.runtime]
        model_runtimes = f"--runtime {spoken(RUNTIMES.names(uses_model=True))}"
        if spec.kind == "loop" and spec.uses_model and not model.base_url:
            raise SettingError(f"--runtime {spec.name} needs --base-url (an OpenAI-compatible chat-completions "
                               "endpoint, e.g. http://127.0.0.1:30000/v1)")
        if agent.replay is not None and agent.runtime != "replay":
            raise SettingError(f"--replay applies to --runtime replay only (got --runtime {agent.runtime})")
        if not spec.uses_model and model.base_url:
            raise SettingError(f"--base-url applies to a model runtime ({model_runtimes}); the "
                               f"{spec.name} runtime needs no model server")
        for own in RUNTIMES:
            if own.executable_setting is None:
                continue
            value = getattr(self.cli, own.executable_setting)
            variable = _variable(CliRuntimeSettings, own.executable_setting)
            # given for another runtime it would run nothing; the same value from its variable is a default only
            if value is not None and agent.runtime != own.name and value != os.environ.get(variable):
                raise SettingError(f"{own.executable_flag} applies to --runtime {own.name} only (got --runtime "
                                   f"{agent.runtime}); drop it or pass --runtime {own.name}")
        if agent.arm not in spec.arms:
            needs = (f"needs a model runtime ({model_runtimes})" if not spec.uses_model
                     else f"is not open to --runtime {spec.name}")
            raise SettingError(f"--arm {agent.arm} {needs}; {spec.arms_refusal}")
        if spec.kind == "cli" and self.cli.cli_network == "loopback":
            if not model.base_url:
                raise SettingError(f"--runtime {agent.runtime} needs --base-url on loopback (the CLI reaches only "
                                   "127.0.0.1 by default); pass --cli-network inherit to use the vendor's API")
            if not is_loopback_url(model.base_url):
                raise SettingError(f"--base-url {model.base_url} is not on loopback; the CLI runtimes reach only "
                                   "loopback by default (pass --cli-network inherit to allow it)")

    @property
    def out(self) -> pathlib.Path | None:
        return self.output.out

    def boot_options(self) -> dict[str, Any]:
        """Settings recorded under result.host.boot_options."""
        return boot_options(self.episode, self.compat, cell_timeout_s=self.agent.cell_timeout_s)


TRANSPORTS = ("stdio", "http")


@dataclasses.dataclass(frozen=True)
class McpAgentSettings(AgentSettings):
    """:class:`AgentSettings` of ``pyrua-ros mcp``: the MCP client is the agent, so ``runtime`` is ``mcp`` and
    there is no replay source (both internal fields here, offered by no front end)."""

    RUNTIME_CHOICES = (MCP_RUNTIME,)
    runtime: str = MCP_RUNTIME
    replay: pathlib.Path | None = None


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """How ``pyrua-ros mcp`` serves the episode's tools."""

    transport: str = setting("stdio", help="MCP transport: stdio (this process's stdin/stdout, for a client that "
                                           "launches it as a command) or http (streamable HTTP on 127.0.0.1)",
                             choices=TRANSPORTS, launch=False)
    port: int = setting(0, help="HTTP port on 127.0.0.1 (0: a free one)", launch=False)

    def __post_init__(self) -> None:
        _choice("--transport", self.transport, TRANSPORTS)
        if not 0 <= self.port <= 65535:
            raise SettingError(f"--port must be 0-65535; got {self.port}")


@dataclasses.dataclass(frozen=True)
class McpConfig:
    """One ``pyrua-ros mcp`` episode: booted as ``play`` boots it, its tools served to an outside MCP client."""

    episode: EpisodeSettings = EpisodeSettings()
    agent: McpAgentSettings = McpAgentSettings()
    serve: ServeSettings = ServeSettings()
    output: OutputSettings = OutputSettings()
    sandbox: SandboxSettings = SandboxSettings()
    compat: CompatSettings = CompatSettings()

    @property
    def out(self) -> pathlib.Path | None:
        return self.output.out

    def boot_options(self) -> dict[str, Any]:
        return boot_options(self.episode, self.compat, cell_timeout_s=self.agent.cell_timeout_s,
                            transport=self.serve.transport)


@dataclasses.dataclass(frozen=True)
class SingleShotSettings:
    """``pyrualean run``: the program to run once and its watchdog."""

    policy: pathlib.Path = setting(help="file defining run(robo)", metavar="PATH")
    timeout_s: float = setting(1200.0, help="wall-clock watchdog of run(robo) [s]")
    generation: pathlib.Path | None = setting(None, help="generation.json to attach",
                                              unset="the one next to the policy, if any", metavar="PATH")

    def __post_init__(self) -> None:
        _at_least("--timeout-s", self.timeout_s, 0, strict=True)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One ``pyrualean run``: ``run(robo)`` once on the booted robot, no model."""

    single: SingleShotSettings
    episode: EpisodeSettings = EpisodeSettings()
    output: OutputSettings = OutputSettings()
    sandbox: SandboxSettings = SandboxSettings()
    compat: CompatSettings = CompatSettings()

    @property
    def out(self) -> pathlib.Path | None:
        return self.output.out

    @property
    def timeout_s(self) -> float:
        return self.single.timeout_s

    def boot_options(self) -> dict[str, Any]:
        return boot_options(self.episode, self.compat)


@dataclasses.dataclass(frozen=True)
class GenerateSettings:
    """``pyrualean generate``: which card, where to write, what the prompt states."""

    card: pathlib.Path = setting(help="card.json (file or run directory)", metavar="PATH")
    out: pathlib.Path = setting(help="output directory (policy.py, prompt.txt, response.md, generation.json); must "
                                     "not exist or be empty unless --overwrite", metavar="DIR")
    overwrite: bool = setting(False, help="a non-empty --out is moved aside to OUT.prev-<time> first")
    budget_s: float = setting(1200.0, help="the run's wall-clock budget stated in the prompt [s]")
    timeout_s: float = setting(3600.0, help="hard limit of the whole generation, all attempts [s]")
    transfer: bool = setting(False, help="the card images show one example layout only")
    primitives: str = setting("full", help="primitive set the prompt documents", choices=PRIMITIVE_SETS,
                              env="PYRUALEAN_PRIMITIVES")

    def __post_init__(self) -> None:
        _choice("--primitives", self.primitives, PRIMITIVE_SETS)
        _at_least("--budget-s", self.budget_s, 0, strict=True)
        _at_least("--timeout-s", self.timeout_s, 0, strict=True)


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    """One ``pyrualean generate``: one chat completion writes ``policy.py``."""

    generate: GenerateSettings
    model: ModelSettings = ModelSettings()

    def __post_init__(self) -> None:
        if not self.model.base_url:
            raise SettingError("generate needs --base-url (an OpenAI-compatible chat-completions endpoint, "
                               "e.g. http://127.0.0.1:30000/v1)")
