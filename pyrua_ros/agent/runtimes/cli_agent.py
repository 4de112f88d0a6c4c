"""What the ``codex`` and ``claude`` runtimes share: a coding-agent CLI run as a child process that reaches the
robot only through the episode's MCP server, under the episode's wall-clock budget.

Unlike the ``openai`` runtime, the CLI runs its own loop (its own prompt, tool-call parsing and retries); the
episode hands it the prompt and the MCP server URL and waits. This module does the parts that are the same for
both (PYRUALEAN-CONTRACT.md 3.7, 4.3):

- **Environment.** An allow-list (``PATH HOME USER LOGNAME LANG LC_ALL TERM TMPDIR TZ XDG_CACHE_HOME``), the
  proxy variables, the variable named by ``--api-key-env`` and what the CLI itself needs; nothing else of this
  process's environment (no ROS variables, no other keys) reaches the CLI. Telemetry, error reporting and
  auto-update are switched off.
- **Network.** ``network="loopback"`` (the default): ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` point at
  ``proxy`` (default: a loopback port this process holds bound but never listens on, so a connection is
  refused at once) and ``NO_PROXY`` holds only the loopback names, so the CLI can reach the model server and
  the MCP server on 127.0.0.1 and nothing else; a ``--base-url`` whose host is not on loopback is refused.
  ``network="inherit"`` passes the user's proxy settings through (a remote model server).
- **MCP token.** The episode's MCP server refuses a request without its per-run bearer token; the CLI gets the
  token in ``PYRUALEAN_MCP_TOKEN`` and its MCP config names that variable (Codex ``bearer_token_env_var``,
  Claude Code a ``headers`` entry with ``${PYRUALEAN_MCP_TOKEN}``), so it is in no argv and no file.
- **Budget.** The process is the leader of its own process group; past the deadline it gets SIGINT, then
  SIGTERM, then SIGKILL (``kill_grace_s`` apart), the whole group each time. It also dies with this process
  (``setpriv --pdeathsig KILL``), so an episode killed by SIGKILL leaves no CLI behind.
- **finish ends the episode.** Once the toolkit recorded ``finish`` the CLI gets ``finish_grace_s`` to write
  its last message and exit, then it is stopped like an overrun one (recorded in the notes).
- **Planner retry.** A CLI that ended with errors before making any tool call is started again (at most
  ``attempts`` times, ``retry_sleep_s`` apart), sharing what is left of the budget, as the reference does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyrua_ros.agent.runtimes.base import LoopOutcome
from pyrua_ros.bringup.process import stop_process_groups
from pyrua_ros.records import bounded
from pyrua_ros.records.records import JsonlRecord
from pyrua_ros.settings.model import is_loopback_url, key_from_env

from .cli_sandbox import CliSandbox, loopback_port

if TYPE_CHECKING:
    from pyrua_ros.kernel.outcomes import KernelLimits

ENV_ALLOW = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ", "XDG_CACHE_HOME")
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
NETWORK_MODES = ("loopback", "inherit")
NPM_BIN = pathlib.Path(sys.prefix) / "npm" / "node_modules" / ".bin"   # where scripts/setup.sh installs the CLIs
MCP_TOKEN_ENV = "PYRUALEAN_MCP_TOKEN"   # the MCP server's per-run bearer token, in the CLI's environment only


def find_cli(name: str, explicit: str | None) -> str:
    """The executable to run: ``explicit`` (``--codex-bin`` / ``--claude-cli``, or its PYRUALEAN_* variable),
    else the pinned CLI scripts/setup.sh installed under ``.venv/npm``, else ``name`` on PATH."""
    candidates = [explicit] if explicit else [str(NPM_BIN / name), name]
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    where = explicit or f"{NPM_BIN / name} or {name} on PATH"
    raise FileNotFoundError(f"no {name} executable found ({where}); run scripts/setup.sh, which installs the "
                            f"pinned CLI, or pass its path")


class DeadPort:
    """A loopback TCP port bound by this process and never listened on: connecting to it is refused at once."""

    def __init__(self):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def close(self) -> None:
        self._sock.close()


@dataclasses.dataclass(frozen=True)
class CliSettings:
    """Settings shared by the CLI runtimes.

    - ``model``: model id; ``base_url`` / ``api_key_env``: the model server and the variable holding its key
      (never written anywhere); ``reasoning``: reasoning effort (Codex ``model_reasoning_effort``; Claude
      ``--effort``, ``none`` turns thinking off).
    - ``executable``: the CLI to run (``find_cli``); ``home``: the user's CODEX_HOME (None: a clean one inside the
      run directory; in the sandbox the CLI gets only its ``cli_sandbox.SEED_FILES``, in a folder of the run's own).
    - ``network``: ``loopback`` | ``inherit``; ``proxy``: the proxy URL under ``loopback`` (None: a dead port).
    - ``max_turns``: the episode's decision budget (Claude's own turn ceiling is ``max_turns + 5``).
    - ``kill_grace_s``: seconds between SIGINT, SIGTERM and SIGKILL; ``finish_grace_s``: time the CLI gets to
      exit after ``finish``; ``attempts`` / ``retry_sleep_s``: planner retries; ``tool_timeout_s``: how long
      the CLI waits for one MCP tool call (a cell runs up to ``--cell-timeout-s``).
    """

    model: str
    executable: str
    base_url: str | None = None
    api_key_env: str | None = None
    reasoning: str | None = None
    home: pathlib.Path | None = None
    network: str = "loopback"
    proxy: str | None = None
    max_turns: int | None = None
    kill_grace_s: float = 10.0
    finish_grace_s: float = 15.0
    attempts: int = 3
    retry_sleep_s: float = 15.0
    tool_timeout_s: float = 1800.0

    def __post_init__(self):
        if self.network not in NETWORK_MODES:
            raise ValueError(f"network must be one of {', '.join(NETWORK_MODES)}; got {self.network!r}")
        if self.network == "loopback" and self.base_url and not is_loopback_url(self.base_url):
            raise ValueError(f"--base-url {self.base_url} is not on loopback; the CLI runtimes reach only loopback "
                             "by default (pass --cli-network inherit to let the CLI use your proxy settings)")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1; got {self.attempts}")

    def api_key(self) -> str | None:
        """The key from ``api_key_env`` (None when no variable is named); ValueError naming an unset variable."""
        return key_from_env(self.api_key_env)


def base_environment(settings: CliSettings, proxy_url: str) -> dict[str, str]:
    """The allow-listed environment with the network rules applied (no runtime-specific variables yet)."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    if settings.network == "inherit":
        env.update({k: v for k, v in os.environ.items() if k in PROXY_VARS})
        upstream = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
        no_proxy = ",".join(p for p in (upstream, "localhost,127.0.0.1,::1") if p)
    else:
        env.update({k: proxy_url for k in PROXY_VARS})
        no_proxy = "127.0.0.1,localhost,::1"
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    key = settings.api_key()
    if key is not None:
        env[settings.api_key_env] = key
    return env


class CliProcess:
    """One run of a CLI: started in its own process group, stdout lines handed to ``on_line`` from a reader
    thread, stderr to a file. ``wait(deadline, finished)`` returns ``exited`` | ``timeout`` | ``finished``."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: pathlib.Path, stdin: bytes,
                 stderr_path: pathlib.Path, on_line: Callable[[str], None], pass_fds: tuple[int, ...] = ()):
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        self.argv = argv
        self._stderr = open(stderr_path, "ab")
        self.proc = subprocess.Popen([*prefix, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, cwd=cwd, env=env, start_new_session=True,
                                     pass_fds=pass_fds)
        self._on_line = on_line
        self._reader = threading.Thread(target=self._read, name="cli-stdout", daemon=True)
        self._reader.start()
        try:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass   # the CLI died at once; its exit status says why

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                self._on_line(line)

    def wait(self, deadline: float, finished: Callable[[], bool], finish_grace_s: float) -> str:
        finish_seen = None
        while self.proc.poll() is None:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if finished():
                finish_seen = finish_seen or now
                if now - finish_seen >= finish_grace_s:
                    return "finished"
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=min(0.2, max(0.01, deadline - now)))
        return "exited"

    def stop(self, grace_s: float) -> None:
        """SIGINT, SIGTERM, SIGKILL to the whole process group, ``grace_s`` apart (helpers the CLI left behind in
        its group are killed even when the CLI itself has exited), and a wait (at most 10 s) until the group is
        gone; then the reader is joined."""
        stop_process_groups([self.proc], sigint_grace_s=grace_s, sigterm_grace_s=grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.poll()
        until = time.monotonic() + 10.0   # a sandbox's processes die with its PID namespace, a moment later
        with contextlib.suppress(ProcessLookupError, PermissionError):
            while time.monotonic() < until:
                os.killpg(self.proc.pid, 0)
                time.sleep(0.05)
        self._reader.join(timeout=5.0)
        self._stderr.close()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode


class EventLog:
    """The runtime's event file (``<runtime>_events.jsonl``): one JSON object per line, each with ``t`` (seconds
    since the runtime started); image data is replaced by its size (``data_bytes``)."""

    def __init__(self, path: pathlib.Path | None, t0: float):
        self.path = path
        self._t0 = t0
        self._record = JsonlRecord(path) if path is not None else None

    def write(self, event: dict) -> None:
        if self._record is not None:
            self._record.append({"t": round(time.monotonic() - self._t0, 3), **strip_image_data(event)})

    def close(self) -> None:
        if self._record is not None:
            self._record.close()


def strip_image_data(value):
    """A copy of a JSON value with every base64 image payload replaced by ``data_bytes`` (its decoded size)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "data" and isinstance(item, str) and len(item) > 256 and (
                    value.get("type") in ("image", "base64") or "mime_type" in value or "media_type" in value):
                out["data_bytes"] = len(item) * 3 // 4
            else:
                out[key] = strip_image_data(item)
        return out
    if isinstance(value, list):
        return [strip_image_data(v) for v in value]
    return value


class CliRuntime:
    """Base of the CLI runtimes: the attempt loop, budget, finish and retry rules around one CLI.

    Subclasses set ``name`` and implement ``command(prompt, images, mcp_url, proxy_url, mcp_token) -> (argv, env,
    stdin)`` (``mcp_token``: the MCP server's bearer token or None; put it only in the environment),
    ``on_event(event)`` (one parsed JSON line of the CLI's stdout), ``attempt_failed()`` (the CLI reported an
    error), ``tool_calls_in_attempt()``, ``usage_totals()`` and ``audit()``; ``last_message`` is the CLI's final
    assistant text.
    """

    name = "cli"
    wants_tool_names = False   # True: the constructor takes tool_names (the MCP tools the CLI may call)

    def __init__(self, settings: CliSettings, *, out_dir: pathlib.Path, workspace: pathlib.Path,
                 events_path: pathlib.Path | None = None, isolation: str = "bwrap",
                 shared_workspace: tuple[int, int] | None = None, limits: KernelLimits | None = None):
        self.settings = settings
        self.limits = limits                     # the kernel's KernelLimits (None: the defaults), bounding the CLI
        self.isolation = isolation               # "bwrap": the CLI runs in cli_sandbox; "unsafe": as it is
        self.shared_workspace = shared_workspace  # Kernel.shared_workspace: the kernel's tmpfs and uid
        self.out = pathlib.Path(out_dir)
        self.workspace = pathlib.Path(workspace)
        self.notes: list[str] = []
        self.attempts = 0
        self.returncode: int | None = None
        self.last_message = ""
        self.stopped: str | None = None   # "timeout" | "finished" when this side ended the CLI
        self._t0 = time.monotonic()
        self.events = EventLog(events_path, self._t0)

    # -- what subclasses provide ---------------------------------------------------------------------------
    def command(self, prompt: str, images: list[pathlib.Path], mcp_url: str, proxy_url: str,
                mcp_token: str | None = None) -> tuple[list[str], dict[str, str], bytes]:
        raise NotImplementedError

    def on_event(self, event: dict) -> None:
        raise NotImplementedError

    def attempt_failed(self) -> bool:
        raise NotImplementedError

    def tool_calls_in_attempt(self) -> int:
        raise NotImplementedError

    def start_attempt(self) -> None:
        """Reset per-attempt counters (called before each start)."""

    def usage_totals(self) -> dict:
        raise NotImplementedError

    def audit(self) -> dict:
        raise NotImplementedError

    @property
    def config_home(self) -> pathlib.Path:
        """The CLI's own config folder (CODEX_HOME / CLAUDE_CONFIG_DIR), read-write in its sandbox."""
        raise NotImplementedError

    @property
    def isolated(self) -> bool:
        """True when the CLI runs inside :mod:`.cli_sandbox`."""
        return self.isolation == "bwrap"

    def _sandbox(self, mcp_url: str, proxy: str):
        """The CLI's :class:`~.cli_sandbox.CliSandbox` for this episode (None under ``--unsafe-sandbox``)."""
        if not self.isolated:
            return None

        ports = [p for p in (loopback_port(u) for u in (self.settings.base_url, mcp_url, proxy)) if p]
        user_home = pathlib.Path(self.settings.home) if self.settings.home is not None else None
        sandbox = CliSandbox(workspace=self.workspace, shared=self.shared_workspace, home=self.config_home,
                             own_home=self.config_home != user_home, executable=self.settings.executable,
                             ports=ports, network=self.settings.network, limits=self.limits, seed=user_home)
        self.notes.append(sandbox.description())
        return sandbox

    def ceiling_hit(self) -> str | None:
        """A reason when the CLI stopped at its own turn ceiling (Claude), else None."""
        return None

    # -- the run -------------------------------------------------------------------------------------------
    def _line(self, line: str) -> None:
        try:   # (bounded: the model's tool input arrives inside these events, as deep as it made it)
            event = bounded.loads(line, finite=False)
        except ValueError:
            event = {"type": "non_json_output", "text": line[:2000]}
        if not isinstance(event, dict):
            event = {"type": "non_json_output", "text": line[:2000]}
        self.events.write(event)
        self.on_event(event)

    def transcript(self) -> list[dict]:
        """The CLI's own events are its transcript (``<runtime>_events.jsonl``); nothing else is kept."""
        return [{"runtime": self.name, "events": str(self.events.path) if self.events.path else None}]

    def run_episode(self, prompt: str, images: list[pathlib.Path], mcp_url: str, deadline: float, *,
                    finished: Callable[[], bool], mcp_token: str | None = None):
        """Run the CLI until it exits, the deadline passes, or ``finished()`` held for ``finish_grace_s``;
        returns a :class:`~pyrua_ros.agent.runtimes.base.LoopOutcome`. ``mcp_token``: the bearer token of the MCP server
        at ``mcp_url`` (:attr:`ArmMcpServer.token`)."""
        status, reason = "completed", None
        dead = DeadPort() if self.settings.network == "loopback" and self.settings.proxy is None else None
        proxy = self.settings.proxy or (dead.url if dead is not None else "")
        sandbox = None
        try:
            sandbox = self._sandbox(mcp_url, proxy)
            while True:
                self.attempts += 1
                self.start_attempt()
                argv, env, stdin = self.command(prompt, images, mcp_url, proxy, mcp_token)
                self.events.write({"type": "pyrua.start", "attempt": self.attempts, "argv": argv})
                wrapped = sandbox.wrap(argv) if sandbox is not None else None
                if wrapped is not None:   # no host HOME inside: the sandbox's private /tmp
                    env.update(HOME="/tmp", TMPDIR="/tmp")
                try:
                    proc = CliProcess(wrapped.argv if wrapped else argv, env=env, cwd=self.workspace, stdin=stdin,
                                      stderr_path=self.out / f"{self.name}_stderr.txt", on_line=self._line,
                                      pass_fds=wrapped.pass_fds if wrapped else ())
                finally:
                    for fd in wrapped.owned if wrapped else ():
                        os.close(fd)
                self.events.write({"type": "pyrua.started", "attempt": self.attempts, "pid": proc.proc.pid})
                ending = proc.wait(deadline, finished, self.settings.finish_grace_s)
                proc.stop(self.settings.kill_grace_s if ending != "exited" else 0.5)
                self.returncode = None if ending == "timeout" else proc.returncode
                self.events.write({"type": "pyrua.end", "attempt": self.attempts, "ending": ending,
                                   "returncode": proc.returncode})
                if ending == "timeout":
                    self.stopped = "timeout"
                    status, reason = "timeout", "timeout"
                    break
                if ending == "finished":
                    self.stopped = "finished"
                    self.notes.append(f"{self.name} was stopped {self.settings.finish_grace_s:g} s after the episode "
                                      "ended (finish or call budget) because it had not exited by itself")
                    break
                if proc.returncode not in (0, None):
                    self.notes.append(f"{self.name} exited {proc.returncode}")
                ceiling = self.ceiling_hit()
                if ceiling:
                    status, reason = "call_budget", ceiling
                    break
                if self.attempt_failed():
                    self.notes.append(f"{self.name} reported errors; see {self.name}_events.jsonl and "
                                      f"{self.name}_stderr.txt")
                    retry = (self.tool_calls_in_attempt() == 0 and self.attempts < self.settings.attempts
                             and deadline - time.monotonic() > self.settings.retry_sleep_s + 1.0)
                    if retry:
                        self.notes.append(f"attempt {self.attempts}: planner failed before any tool call; retrying")
                        time.sleep(self.settings.retry_sleep_s)
                        continue
                    if not finished():
                        status, reason = "planner_error", "provider error mid-episode"
                break
        finally:
            if dead is not None:
                dead.close()
            if sandbox is not None:
                sandbox.close()
                self.notes.extend(sandbox.notes)
        return LoopOutcome(status, reason, notes=tuple(self.notes),
                           requests=int(self.usage_totals().get("requests") or 0), last_message=self.last_message)

    def close(self) -> None:
        self.events.close()
