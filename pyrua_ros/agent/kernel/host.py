"""The agent-process side of the cell kernel: ``Kernel`` runs model-written cells and programs in a child process.

The child (``worker.py``) runs under the OS boundary of ``sandbox.py`` (bubblewrap: its own network, PID and mount
namespaces, an unprivileged user, a read-only view, the workspace tmpfs as its only writable place) and gets a
manifest of the real robo's public members and nothing else. Every byte it sends is treated as hostile:

- **frames**: every job carries a random request id; a frame with another id (stale, or forged by a cell that wrote to
  the pipe itself) is discarded and logged in ``events``; each op has a strict schema (keys, types, sizes), the
  reader refuses frames over ``KernelLimits.max_frame_bytes`` or nested deeper than ``protocol.MAX_DEPTH``, and
  every string is made safe (``records.safe_text``) before anything else sees it;
- **robo calls** are checked against the manifest (unknown or private names are refused, whatever the child
  sends), run on the real object in this process under the job's deadline (``deadline_hook``), and their value or
  exception goes back;
- **outcomes**: ``episode_finished`` is reported only when this process raised ``EpisodeFinished`` to the child
  during the job; the child's claim alone is ignored;
- **files**: the workspace is read and written only through ``workspace.py`` (directory fds, ``O_NOFOLLOW``,
  ``fstat`` of the opened fd); under bubblewrap the run directory's ``workspace/`` is a copy made by this process
  after every job, which the kernel cannot reach.

Threading: none; ``run_cell`` / ``run_program`` block the calling thread, and every wait on the child has a
deadline (the job's wall-clock ``timeout_s``, then ``KernelLimits.interrupt_grace_s`` after SIGINT, then SIGKILL
and a restart). A child that dies (segfault, kill, out of memory, CPU-time limit) gives an outcome that says so,
and the next cell runs in a fresh child, with ``notice`` telling the model its namespace was lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import secrets
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyrua_ros.agent.kernel import cgroup, policy, protocol, sandbox
from pyrua_ros.agent.kernel import workspace as wsfiles
from pyrua_ros.agent.records.text import safe_text

RESTART_NOTICE = "the kernel was restarted; the namespace (variables, functions, imports) was lost"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The child starts with -I (no env vars, no cwd on sys.path: a workspace file cannot shadow a module) and -S (no
# site processing: the venv's .pth hooks re-exec with LD_LIBRARY_PATH and set AMENT_PREFIX_PATH, which the child
# must not have); the bootstrap puts the kernel's sources first and the allowed packages after them.
_BOOT = ("import sys; sys.path[:0] = {paths!r}; import runpy; "
         "runpy.run_module('pyrua_ros.agent.kernel.worker', run_name='__main__', alter_sys=True)")
MAX_EVENTS = 100
FULL_BELOW_BYTES = 64 * 1024   # a workspace with less free space than this is reported full to the model
PROGRAM_BYTES = 4 * 2**20   # largest program file run_program(path=...) reads


@dataclasses.dataclass(frozen=True)
class KernelLimits:
    """Limits of one kernel child. ``memory_bytes``: RLIMIT_AS (address space, bytes). ``cpu_s``: RLIMIT_CPU,
    CPU seconds over the life of one child (exceeding it kills the child; the next cell gets a fresh one).
    ``file_size_bytes``: RLIMIT_FSIZE (largest file a write may make). ``open_files``: RLIMIT_NOFILE.
    ``processes``: RLIMIT_NPROC (0 = no fork and no threads; None = not set, the PID namespace alone contains
    what the kernel starts). ``workspace_bytes``: size of the workspace tmpfs (the kernel's whole writable
    space besides a 16 MiB /tmp). ``interrupt_grace_s``: after a cell's timeout the child gets SIGINT, and is
    killed if the cell has not stopped this many seconds later. ``start_timeout_s``: deadline for a child to
    start. ``max_images`` / ``max_image_bytes``: ``display()`` images kept per cell, and the largest PNG accepted.
    ``max_frame_bytes``: largest frame accepted from the child. ``landlock``: confine the child's filesystem
    access with Landlock where the Linux kernel offers it (defence in depth under bubblewrap).
    ``cpus``: CPUs the kernel may use at once, and ``memory_bytes`` its memory, where a cgroup v2 can be made
    (``cgroup.py``; rlimits only otherwise, said in ``description``). ``record_reserve_bytes``: free space the
    copy of the workspace always leaves on the run directory's file system, for the host's own records (files
    that would take it are not copied, and the model is told)."""

    memory_bytes: int = 4 * 2**30
    cpu_s: int = 1800
    file_size_bytes: int = 256 * 2**20
    open_files: int = 256
    processes: int | None = 0
    workspace_bytes: int = 256 * 2**20
    interrupt_grace_s: float = 2.0
    start_timeout_s: float = 60.0
    max_images: int = 32
    max_image_bytes: int = 16 * 2**20
    max_frame_bytes: int = 64 * 2**20
    landlock: bool = True
    record_reserve_bytes: int = 32 * 2**20
    cpus: float = 1.0

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "cpu_s", "file_size_bytes", "open_files", "workspace_bytes", "max_images",
                     "max_image_bytes", "max_frame_bytes"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"KernelLimits.{name} must be positive, got {getattr(self, name)!r}")
        if self.processes is not None and self.processes < 0:
            raise ValueError(f"KernelLimits.processes must be >= 0 or None, got {self.processes!r}")
        if self.interrupt_grace_s <= 0 or self.start_timeout_s <= 0:
            raise ValueError("KernelLimits.interrupt_grace_s and start_timeout_s must be positive")


@dataclasses.dataclass(frozen=True)
class CellOutcome:
    """What one cell did. ``cell``: 1-based index (source saved as ``workspace/cell_NNN.py``). ``stdout`` /
    ``stderr``: captured text, trimmed to first 4000 + last 4000 chars. ``value``: repr of a non-None trailing
    expression (first + last 2000 chars) or None. ``exception``: traceback text (first + last 2000 chars),
    ``"SystemExit: ..."``, the sandbox refusal, or a timeout / kernel-death message; None if the cell ran through.
    ``episode_finished``: the ``EpisodeFinished`` reason (only when the host raised it during this cell), or None.
    ``elapsed_s``: wall clock, 0.01 s. ``images``: PNG bytes from ``display()``, in order (``display_0``,
    ``display_1`` ...). ``sandbox_flags``: static audit flags. ``refused``: the cell named a blocked name and was
    not run. ``restarted``: the kernel child was replaced after this cell (its namespace is gone). ``notice``: text for
    the model when ``restarted``. All text is safe to write (no lone surrogates)."""

    cell: int
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    exception: str | None = None
    episode_finished: str | None = None
    elapsed_s: float = 0.0
    images: list[bytes] = dataclasses.field(default_factory=list)
    sandbox_flags: list[str] = dataclasses.field(default_factory=list)
    refused: bool = False
    restarted: bool = False
    notice: str | None = None


@dataclasses.dataclass(frozen=True)
class ProgramOutcome:
    """What one ``run_program`` did (contract 3.4, program arm). ``program``: 1-based index. ``file``: workspace
    file that was run (``program_NN.py`` for code). ``code``: the source that was run (read once, from the same
    fd that was checked). ``status``: ``completed`` (run returned), ``finished`` (``EpisodeFinished``; ``reason``
    set), ``error`` (``exception`` set), ``timeout`` (ran past ``timeout_s``). Other fields as in
    ``CellOutcome``."""

    program: int
    file: str
    status: str
    reason: str | None = None
    exception: str | None = None
    stdout: str = ""
    stderr: str = ""
    elapsed_s: float = 0.0
    images: list[bytes] = dataclasses.field(default_factory=list)
    sandbox_flags: list[str] = dataclasses.field(default_factory=list)
    refused: bool = False
    restarted: bool = False
    notice: str | None = None
    code: str = ""


# ---------------------------------------------------------------------------------------------- manifest


def _encodable(value: Any) -> bool:
    try:
        protocol.encode_frame({"v": value})
    except (TypeError, ValueError):
        return False
    return True


def build_manifest(target: Any, dynamic_methods: tuple[str, ...] = ()) -> dict:
    """Public members of ``target``: methods (signature parameters + docstring), properties (read live) and
    uppercase constants (copied). Anything starting with ``_`` is left out.

    ``dynamic_methods``: names the target answers only through ``__getattr__`` (robo's no-VLA shadows, which
    raise a RuntimeError saying the skill is not available and are ledgered); they are listed as methods taking
    ``(*args, **kwargs)`` so a call reaches the target and gets its own answer, not an AttributeError."""
    members = []
    listed = set(dir(target))
    for name in dynamic_methods:
        if name not in listed and not name.startswith("_"):
            members.append({"name": name, "kind": "method", "doc": None, "params": [
                {"name": "args", "kind": "VAR_POSITIONAL"}, {"name": "kwargs", "kind": "VAR_KEYWORD"}]})
    for name in sorted(dir(target)):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(target, name)
        if isinstance(static, property):
            members.append({"name": name, "kind": "property", "doc": inspect.getdoc(static)})
            continue
        value = getattr(target, name)
        if callable(value) and not isinstance(value, type):
            params = []
            try:
                signature = inspect.signature(value)
            except (TypeError, ValueError):
                signature = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                                               inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])
            for p in signature.parameters.values():
                entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
                if p.annotation is not inspect.Parameter.empty:
                    entry["annotation"] = p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(
                        p.annotation)
                if p.default is not inspect.Parameter.empty:
                    if _encodable(p.default):
                        entry["default"] = p.default
                    else:
                        entry["default_repr"] = repr(p.default)
                params.append(entry)
            entry = {"name": name, "kind": "method", "doc": inspect.getdoc(value), "params": params}
            if signature.return_annotation is not inspect.Signature.empty:
                ret = signature.return_annotation
                entry["returns"] = ret if isinstance(ret, str) else inspect.formatannotation(ret)
            members.append(entry)
        elif name.isupper():
            if _encodable(value):
                members.append({"name": name, "kind": "constant", "value": value})
        elif not isinstance(value, type):
            members.append({"name": name, "kind": "property", "doc": None})
    return {"class": type(target).__name__, "doc": inspect.getdoc(type(target)), "members": members}


def describe_error(exc: BaseException) -> dict:
    """The wire form of an exception raised by the real robo (rebuilt by ``proxy.rebuild_error``)."""
    names = [c.__name__ for c in type(exc).__mro__]
    kind = next((n for n in ("EpisodeFinished", "ToolError") if n in names), type(exc).__name__)
    error: dict[str, Any] = {"type": kind, "text": str(exc)}
    if kind == "ToolError":
        payload = getattr(exc, "payload", None)
        error.update(tool=str(getattr(exc, "tool", "")), message=str(getattr(exc, "message", "")),
                     payload=payload if _encodable(payload) else repr(payload))
    elif kind == "EpisodeFinished":
        error["reason"] = str(getattr(exc, "reason", "unknown"))
    elif _encodable(list(exc.args)):
        error["args"] = list(exc.args)
    return error


def _host_results(name: str, fields: dict) -> Any:
    """Result dataclasses the child sends back (e.g. as an argument) become the real class when known."""
    try:
        from pyrua_ros.robo.results import RESULT_TYPES
    except ImportError:
        return fields
    cls = next((c for c in RESULT_TYPES if c.__name__ == name), None)
    return cls(**fields) if cls is not None else fields


def child_environment(workspace: Path) -> dict[str, str]:
    """The child's whole environment: no ROS_*, AMENT_*, API keys or PYTHONPATH; one BLAS/OpenMP thread."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "TMPDIR": str(workspace), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8"}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS"):
        env[var] = "1"
    return env


# ---------------------------------------------------------------------------------------------- frames

_TEXT_KEYS = ("stdout", "stderr", "value", "exception", "episode_finished", "status", "reason")
_DONE_KEYS = frozenset(("op", "id", "interrupted", *_TEXT_KEYS))
_CALL_KEYS = frozenset(("op", "id", "name", "args", "kwargs"))
_PROGRAM_STATUSES = ("completed", "finished", "error")


def frame_problem(msg: dict, job: int) -> str | None:
    """Why ``msg`` (a decoded frame from the child during job ``job``) must be discarded, or None when it is a
    well-formed frame of this job."""
    op = msg.get("op")
    if op not in ("done", "call", "get", "display"):
        return f"unknown op {str(op)[:40]!r}"
    frame_id = msg.get("id")
    if not isinstance(frame_id, int) or isinstance(frame_id, bool) or frame_id != job:
        return f"{op} frame of job {str(frame_id)[:20]} arrived during job {job} (stale or forged)"
    if op == "done":
        extra = set(msg) - _DONE_KEYS
        if extra:
            return f"done frame with unknown keys {sorted(map(str, extra))[:5]}"
        for key in _TEXT_KEYS:
            if msg.get(key) is not None and not isinstance(msg[key], str):
                return f"done frame: {key} is a {type(msg[key]).__name__}, not text"
        if not isinstance(msg.get("interrupted", False), bool):
            return "done frame: interrupted is not a bool"
        if msg.get("status") is not None and msg["status"] not in _PROGRAM_STATUSES:
            return f"done frame: unknown status {msg['status'][:40]!r}"
        return None
    if op in ("call", "get"):
        extra = set(msg) - _CALL_KEYS
        if extra:
            return f"{op} frame with unknown keys {sorted(map(str, extra))[:5]}"
        name = msg.get("name")
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 100:
            return f"{op} frame names no method: {str(name)[:40]!r}"
        if not isinstance(msg.get("args", []), list) or not isinstance(msg.get("kwargs", {}), dict):
            return f"{op} frame: malformed arguments"
        return None
    if set(msg) - {"op", "id", "png"} or not isinstance(msg.get("png"), bytes):
        return "display frame without image bytes"
    return None


def _clean_done(msg: dict) -> dict:
    """A validated done frame with its text trimmed to the contract's sizes."""
    out = dict(msg)
    for key in ("stdout", "stderr"):
        text = out.get(key) or ""   # the kernel trims already (head + marker + tail); a forged frame may not
        out[key] = text if len(text) <= policy.STREAM_HEAD + policy.STREAM_TAIL + 64 else policy.trim_middle(text)
    value = out.get("value")
    if value is not None and len(value) > policy.VALUE_CHARS + 64:   # the kernel keeps head + marker + tail
        out["value"] = policy.trim_middle(value, policy.VALUE_CHARS // 2, policy.VALUE_CHARS // 2)
    if out.get("exception") is not None:
        out["exception"] = out["exception"][-(policy.TRACEBACK_CHARS + 400):]
    for key in ("episode_finished", "reason"):
        if out.get(key) is not None:
            out[key] = out[key][:200]
    return out


IMAGE_MAX_PIXELS = 4096 * 4096   # decoded size limit of a display() image
IMAGE_MAX_SIDE = 1024            # images are down-scaled to this longest side before they reach the model


def accept_image(data: bytes, max_bytes: int) -> tuple[bytes | None, str | None]:
    """(PNG bytes ready for the model, None) for a real PNG or JPEG of at most ``IMAGE_MAX_PIXELS`` pixels
    (down-scaled to ``IMAGE_MAX_SIDE``), or (None, why it was refused)."""
    if len(data) > max_bytes:
        return None, f"{len(data)} bytes is over the {max_bytes} byte limit"
    if not data.startswith((PNG_SIGNATURE, b"\xff\xd8\xff")):
        return None, "not a PNG or JPEG image"
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format not in ("PNG", "JPEG"):
                return None, f"format {img.format} is not PNG or JPEG"
            width, height = img.size
            if width * height > IMAGE_MAX_PIXELS or width <= 0 or height <= 0:
                return None, f"{width}x{height} pixels is over the {IMAGE_MAX_PIXELS} pixel limit"
            img.load()
            rgb = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
    except Exception as exc:  # a broken or hostile file: refused, never fatal
        return None, f"cannot be decoded ({type(exc).__name__})"
    if max(width, height) > IMAGE_MAX_SIDE:
        rgb.thumbnail((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue(), None


# ---------------------------------------------------------------------------------------------- kernel


class KernelStartError(RuntimeError):
    """The kernel child could not be started (infrastructure, not the model's fault)."""


class SandboxUnavailable(KernelStartError, sandbox.SandboxUnavailable):
    """Isolation was asked for and cannot be set up on this machine (one line says why and what to do)."""


class Kernel:
    """Runs model-written cells (persistent namespace) and programs (fresh namespace) in a sandboxed child.

    ``target``: the real robo object (stays in this process). ``workspace``: the run directory's workspace
    (created if missing; cell and program sources are saved there, and under bubblewrap the kernel's own
    workspace is copied back there after every job). ``dynamic_methods``: see :func:`build_manifest`.
    ``sandbox``: ``"bwrap"`` (the OS boundary; refuses to start where it cannot be set up) or ``"unsafe"``
    (the CLI's ``--unsafe-sandbox``). ``deadline_hook(deadline)``: called with the job's deadline
    (``time.monotonic()`` seconds) before each robo call is served and with None after, so the robot's waits
    end at the cell's deadline. Use as a context manager or call ``close()``."""

    def __init__(self, target: Any, workspace: Path, *, limits: KernelLimits | None = None,
                 dynamic_methods: tuple[str, ...] = (), sandbox: str = "bwrap",
                 deadline_hook: Callable[[float | None], None] | None = None) -> None:
        self.target = target
        self.limits = limits or KernelLimits()
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.sandbox = sandbox
        self.deadline_hook = deadline_hook
        self.manifest = build_manifest(target, dynamic_methods)
        kinds = {m["name"]: m["kind"] for m in self.manifest["members"]}
        self._methods = {n for n, k in kinds.items() if k == "method"}
        self._properties = {n for n, k in kinds.items() if k == "property"}
        self.cells = 0
        self.programs = 0
        self.starts = 0
        self.start_times_s: list[float] = []
        self.isolation: dict[str, Any] = {}
        self.description = ""
        self.events: list[str] = []
        self._job = 0
        self._finished: str | None = None
        self._proc: subprocess.Popen | None = None
        self._pid: int | None = None
        self._uid: int | None = None
        self._log = None
        self._reader: protocol.FrameReader | None = None
        self._host_fd = wsfiles.open_dir(self.workspace)
        self._ws_fd: int | None = None
        self._records: set[str] = set()     # top-level names this process wrote (never overwritten by a copy)
        self._seen: dict[str, tuple] = {}   # copy cache: files already mirrored
        try:
            self._start()
        except BaseException:
            os.close(self._host_fd)
            raise

    # -- lifecycle ----------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Process id (in this PID namespace) of the current kernel process, the Python that runs cells."""
        return self._pid if self._proc is not None else None

    @property
    def mirrored(self) -> bool:
        """True when the kernel writes its own workspace (a tmpfs) and the run directory holds a copy."""
        return self._ws_fd is not None and self._ws_fd != self._host_fd

    def _start(self) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.limits.start_timeout_s
        self._log = tempfile.TemporaryFile(prefix="pyrua-kernel-", suffix=".log")
        info_r, info_w = os.pipe() if self.sandbox == "bwrap" else (None, None)
        try:
            try:
                launch = sandbox.plan(self.workspace, workspace_bytes=self.limits.workspace_bytes,
                                      isolation=self.sandbox, info_fd=info_w)
            except sandbox.SandboxUnavailable as exc:
                raise SandboxUnavailable(str(exc)) from None
            self.description = launch.description
            self._uid = launch.uid
            argv = [*launch.argv, "-c", _BOOT.format(paths=launch.sys_path)]
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                cwd=self.workspace if self.sandbox == "unsafe" else "/", env=child_environment(self.workspace),
                start_new_session=True, close_fds=True, pass_fds=(info_w,) if info_w is not None else (), bufsize=0)
        finally:
            if info_w is not None:
                os.close(info_w)
        self._reader = protocol.FrameReader(self._proc.stdout.fileno(), _host_results,
                                            max_frame_bytes=self.limits.max_frame_bytes, text_filter=safe_text)
        limits = {"memory_bytes": self.limits.memory_bytes, "cpu_s": self.limits.cpu_s,
                  "file_size_bytes": self.limits.file_size_bytes, "open_files": self.limits.open_files,
                  "processes": self.limits.processes, "landlock": self.limits.landlock}
        ready, sandbox_pid = None, None
        try:
            if info_r is not None:
                sandbox_pid = _read_bwrap_info(info_r, deadline)
            protocol.write_frame(self._proc.stdin.fileno(), {"op": "init", "manifest": self.manifest,
                                                             "workspace": str(self.workspace), "limits": limits})
            ready = self._reader.read(deadline)
        except (OSError, ValueError, protocol.ProtocolError):
            ready = None
        finally:
            if info_r is not None:
                os.close(info_r)
        if not ready or ready.get("op") != "ready" or not isinstance(ready.get("isolation"), dict):
            detail = self._stop(kill=True)
            if self.sandbox == "bwrap" and "bwrap:" in detail:
                line = detail[detail.index("bwrap:"):].splitlines()[0]
                raise SandboxUnavailable(f"the cell sandbox could not be set up here ({line}); pass "
                                         f"--unsafe-sandbox to run cells without it")
            raise KernelStartError(f"the kernel process did not start within {self.limits.start_timeout_s:g} s "
                                   f"({detail})")
        self.isolation = ready["isolation"]
        if sandbox_pid is None:
            self._pid, self._ws_fd = self._proc.pid, self._host_fd
        else:
            self._pid = _only_child(sandbox_pid)
            self._ws_fd = wsfiles.open_dir(f"/proc/{sandbox_pid}/root{self.workspace}")
            owner = self._uid if os.geteuid() == 0 else None
            if owner is not None:
                os.fchown(self._ws_fd, owner, owner)
            try:   # a workspace that was full before a restart may not fit again: what fits is restored
                wsfiles.copy_tree(self._host_fd, self._ws_fd, owner=owner,
                                  limits=wsfiles.CopyLimits(bytes=self.limits.workspace_bytes))
            except OSError as exc:
                self._event(f"the new kernel's workspace could not be restored whole: {exc.strerror or exc}")
        self._bound({self._proc.pid, sandbox_pid, self._pid} - {None})
        self.starts += 1
        self.start_times_s.append(round(time.monotonic() - t0, 4))

    _cgroup: cgroup.KernelCgroup | None = None

    def _bound(self, pids: set[int]) -> None:
        """Put the kernel's processes in a cgroup of their own (memory, CPU, process count) where the machine
        delegates one; otherwise say in ``description`` that rlimits alone bound them."""
        group = cgroup.KernelCgroup.create(self.limits.memory_bytes, self.limits.cpus, 64)
        if group is not None:
            try:
                for pid in sorted(pids):
                    group.add(pid)
            except OSError as exc:
                self._event(f"the kernel could not be put in its cgroup: {exc}")
                group = None
        self._cgroup = group
        bound = group.description if group is not None else (
            f"CPU and memory bounded by rlimits only (RLIMIT_CPU {self.limits.cpu_s} s, RLIMIT_AS "
            f"{self.limits.memory_bytes // 2**20} MiB): no cgroup, {cgroup.fallback_reason() or 'not created'}")
        self.description = f"{self.description}; {bound}"   # (set afresh from the launch at every start)

    def _stop(self, *, kill: bool) -> str:
        """End the child (politely unless ``kill``); copy its workspace back; returns how it ended plus the
        tail of its log."""
        proc, self._proc = self._proc, None
        if proc is None:
            return "not running"
        if not kill:
            try:
                protocol.write_frame(proc.stdin.fileno(), {"op": "shutdown"})
                proc.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            rc = proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            rc = None
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self.mirrored:
            self.sync_workspace()   # the tmpfs lives on while this process holds its fd
            os.close(self._ws_fd)
        self._ws_fd = None
        detail = _describe_exit(rc, bwrap=self.sandbox == "bwrap")
        if self._log is not None:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - 1500))
            tail = safe_text(self._log.read().decode(errors="replace").strip())
            self._log.close()
            self._log = None
            if tail:
                detail += f"; its last output: {tail[-1500:]}"
        return detail

    def restart(self) -> None:
        """Replace the child with a fresh one (the namespace is lost; the workspace is kept)."""
        self._stop(kill=False)
        self._start()

    def close(self) -> None:
        """Stop the child and copy its workspace back; the kernel cannot be used afterwards."""
        try:
            self._stop(kill=False)
        finally:
            if self._host_fd is not None:
                os.close(self._host_fd)
                self._host_fd = None

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the workspace ------------------------------------------------------------------------------
    def sync_workspace(self) -> wsfiles.CopyReport | None:
        """Copy the kernel's workspace into the run directory (regular files and folders only, no link
        followed; the host's own cell/program files kept). A no-op without bubblewrap (same folder)."""
        if not self.mirrored:
            return None
        limits = wsfiles.CopyLimits(bytes=self.limits.workspace_bytes,
                                    reserve_bytes=self.limits.record_reserve_bytes)
        try:
            report = wsfiles.copy_tree(self._ws_fd, self._host_fd, protect=self._records, delete_extra=True,
                                         seen=self._seen, limits=limits)
        except OSError as exc:
            self._event(f"copying the workspace back failed: {exc}")
            self._copy_note = f"[the run directory's copy of the workspace is incomplete: {exc.strerror or exc}]"
            return None
        self._copy_note = None
        if report.skipped:
            self._event(f"workspace copy skipped {report.skipped} entr{'y' if report.skipped == 1 else 'ies'}: "
                        f"{', '.join(report.examples)}")
            self._copy_note = (f"[{report.skipped} workspace entr{'y was' if report.skipped == 1 else 'ies were'} "
                               f"not kept in the run directory: {', '.join(report.examples[:3])}]")
        return report

    _copy_note: str | None = None

    def _space_note(self) -> str:
        """A line for the model after a job: the workspace is full (writes fail with ENOSPC), or part of it was
        not kept in the run directory; empty otherwise."""
        notes = []
        if self._ws_fd is not None:
            with contextlib.suppress(OSError):
                if wsfiles.free_bytes(self._ws_fd) < FULL_BELOW_BYTES:
                    notes.append(f"[the workspace is full ({self.limits.workspace_bytes // 2**20} MiB): writing "
                                 f"a file fails with OSError ENOSPC until files are deleted]")
        if self._copy_note:
            notes.append(self._copy_note)
        return "".join(f"\n{note}" for note in notes)

    def put_file(self, name: str, data: bytes) -> None:
        """Place a file (one name) in the kernel's workspace and the run directory's copy (guides, test data)."""
        wsfiles.write_file(self._host_fd, name, data)
        if self.mirrored:
            wsfiles.write_file(self._ws_fd, name, data, owner=self._uid if os.geteuid() == 0 else None)

    def _save_record(self, name: str, code: str) -> None:
        """Save a cell/program source as ``name``: in the run directory always (whatever the kernel put there is
        replaced, never followed), in the kernel's own workspace when that is a separate place and the name is
        free or a regular file."""
        data = safe_text(code).encode("utf-8")
        self._records.add(name)
        try:
            wsfiles.write_file(self._host_fd, name, data)
        except OSError as exc:   # the run directory's disk is full: the source is still in the transcript
            self._event(f"{name} could not be saved in the run directory: {exc.strerror or exc}")
        if self.mirrored:
            try:
                wsfiles.write_file(self._ws_fd, name, data, owner=self._uid if os.geteuid() == 0 else None,
                                     replace=False)
            except OSError as exc:   # e.g. the kernel filled its workspace: the record in the run dir is what counts
                self._event(f"{name} could not be placed in the kernel's workspace: {exc.strerror}")

    def _event(self, text: str) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(safe_text(text)[:500])

    # -- cells and programs -------------------------------------------------------------------------
    def run_cell(self, code: str, timeout_s: float) -> CellOutcome:
        """Run one cell in the persistent namespace, for at most ``timeout_s`` seconds of wall clock."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        code = safe_text(code)
        self.cells += 1
        filename = f"cell_{self.cells:03d}.py"
        self._save_record(filename, code)
        flags = policy.audit_source(code, self.workspace)
        blocked = policy.blocked_names(code)
        if blocked:
            return CellOutcome(cell=self.cells, exception=policy.refusal_text(blocked, "cell"), refused=True,
                               sandbox_flags=flags)
        t0 = time.monotonic()
        done, images, ending, stderr_extra = self._exchange({"op": "cell", "code": code, "filename": filename},
                                                            timeout_s)
        elapsed = round(time.monotonic() - t0, 2)
        restarted = ending[0] in ("killed", "died")
        common = {"cell": self.cells, "elapsed_s": elapsed, "images": images, "sandbox_flags": flags,
                  "restarted": restarted, "notice": RESTART_NOTICE if restarted else None}
        stderr_extra += self._space_note()
        if done is None:
            return CellOutcome(exception=ending[1], stderr=stderr_extra, **common)
        exception = done.get("exception")
        if done.get("interrupted") and ending[0] == "interrupted":
            exception = (f"TimeoutError: the cell ran past its {timeout_s:g} s limit and was interrupted; "
                         f"the namespace was kept\n{exception or ''}")
        return CellOutcome(stdout=done.get("stdout", ""), stderr=done.get("stderr", "") + stderr_extra,
                           value=done.get("value"), exception=exception,
                           episode_finished=self._believed_finish(done.get("episode_finished")), **common)

    def run_program(self, code: str | None = None, path: str | None = None, *, timeout_s: float) -> ProgramOutcome:
        """Run a complete program defining ``run(robo)`` in a fresh namespace: pass its source (saved as
        ``program_NN.py``) or a workspace-relative path (read once, never through a link). ``run(robo)`` is
        called once."""
        if (code is None) == (path is None):
            raise ValueError("run_program needs exactly one of code (the program source) or path "
                             "(a workspace-relative .py file)")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        if path is not None:
            code, filename = self._read_program(path)
            self.programs += 1
        else:
            code = safe_text(code)
            self.programs += 1
            filename = f"program_{self.programs:02d}.py"
            self._save_record(filename, code)
        flags = policy.audit_source(code, self.workspace)
        blocked = policy.blocked_names(code)
        base = {"program": self.programs, "file": filename, "sandbox_flags": flags, "code": code}
        if blocked:
            return ProgramOutcome(status="error", exception=policy.refusal_text(blocked, "program"), refused=True,
                                  **base)
        t0 = time.monotonic()
        done, images, ending, stderr_extra = self._exchange({"op": "program", "code": code, "filename": filename},
                                                            timeout_s)
        restarted = ending[0] in ("killed", "died")
        base.update(elapsed_s=round(time.monotonic() - t0, 2), images=images, restarted=restarted,
                    notice=RESTART_NOTICE if restarted else None)
        stderr_extra += self._space_note()
        if done is None:
            status = "timeout" if ending[0] == "killed" else "error"
            return ProgramOutcome(status=status, exception=ending[1], stderr=stderr_extra, **base)
        status, exception, reason = done.get("status") or "error", done.get("exception"), done.get("reason")
        if status == "finished":
            reason = self._believed_finish(reason)
            if reason is None:
                status, exception = "error", "EpisodeFinished was raised by the program itself, not by robo"
        if done.get("interrupted") and ending[0] == "interrupted":
            status = "timeout"
            exception = f"TimeoutError: the program ran past its {timeout_s:g} s limit and was interrupted\n" + (
                exception or "")
        return ProgramOutcome(status=status, reason=reason, exception=exception, stdout=done.get("stdout", ""),
                              stderr=done.get("stderr", "") + stderr_extra, **base)

    def _read_program(self, path: str) -> tuple[str, str]:
        """(source, workspace-relative name) of a program file in the kernel's workspace, read from the fd that
        was checked (no link followed, regular files only)."""
        try:
            data = wsfiles.read_file(self._ws_fd, str(path), PROGRAM_BYTES)
        except wsfiles.UnsafePath as exc:
            text = str(exc)
            if "No such file" in text:
                raise ValueError(f"no such file in workspace: {path}") from None
            raise ValueError(f"path must be inside the workspace ({self.workspace}) and name a regular file; "
                             f"{text}") from None
        try:
            code = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not UTF-8 text") from None
        return code, "/".join(p for p in str(path).split("/") if p not in ("", "."))

    def _believed_finish(self, claimed: str | None) -> str | None:
        """The EpisodeFinished reason to report: only one this process raised to the child during the job."""
        if claimed is None:
            return None
        if self._finished is None:
            self._event(f"the kernel reported EpisodeFinished({claimed[:40]!r}) that robo never raised; ignored")
            return None
        return self._finished

    # -- the exchange with the child ----------------------------------------------------------------
    def _exchange(self, message: dict, timeout_s: float) -> tuple[dict | None, list[bytes], tuple[str, str], str]:
        """Send one job and serve the child until it reports ``done``; returns (validated done message or None,
        images, (ending, text), notes for stderr) with ending ``done`` | ``interrupted`` | ``killed`` | ``died``.
        Restarts a dead child. The workspace is copied back afterwards."""
        if self._proc is None:
            raise RuntimeError("the kernel is closed")
        job = self._job = secrets.randbits(48)   # unpredictable: a frame cannot be forged for a job not yet sent
        self._finished = None
        images: list[bytes] = []
        refused_images: list[str] = []
        interrupted = False
        deadline = time.monotonic() + timeout_s
        self._job_deadline = deadline
        try:
            protocol.write_frame(self._proc.stdin.fileno(), {**message, "id": job})
            while True:
                try:
                    msg = self._reader.read(deadline)
                except protocol.FrameRejected as exc:
                    self._event(f"job {job}: discarded a frame: {exc}")
                    continue
                if msg is None:
                    if not interrupted:
                        interrupted = True
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(self._pid, signal.SIGINT)
                        deadline = time.monotonic() + self.limits.interrupt_grace_s
                        continue
                    detail = self._stop(kill=True)
                    self._start()
                    return None, images, ("killed", (
                        f"TimeoutError: the code ran past its {timeout_s:g} s limit and did not stop when "
                        f"interrupted; the kernel process was killed ({detail.split(';')[0]})")), ""
                problem = frame_problem(msg, job)
                if problem:
                    self._event(f"job {job}: discarded a frame: {problem}")
                    continue
                op = msg["op"]
                if op == "done":
                    self.sync_workspace()
                    return (_clean_done(msg), images, ("interrupted" if interrupted else "done", ""),
                            "".join(f"\n[display() image refused: {why}]" for why in refused_images))
                if op in ("call", "get"):
                    protocol.write_frame(self._proc.stdin.fileno(), {**self._serve(msg), "id": job})
                elif len(images) + len(refused_images) < self.limits.max_images:
                    png, why = accept_image(msg["png"], self.limits.max_image_bytes)
                    if png is not None:
                        images.append(png)
                    else:
                        refused_images.append(why)
        except (OSError, protocol.ProtocolError) as exc:
            detail = self._stop(kill=True)
            self._start()
            what = "died" if isinstance(exc, OSError | protocol.PeerClosed) else f"broke the protocol ({exc})"
            return None, images, ("died", f"KernelDied: the kernel process {what}: {detail}"), ""
        finally:
            self._job_deadline = None

    _job_deadline: float | None = None

    def _serve(self, msg: dict) -> dict:
        """Run one robo call from the child on the real target under the job's deadline; only names in the
        manifest are served."""
        name, op = msg.get("name"), msg.get("op")
        args, kwargs = msg.get("args", []), msg.get("kwargs", {})
        hook = self.deadline_hook if self._job_deadline is not None else None
        try:
            if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(
                    isinstance(k, str) for k in kwargs):
                raise TypeError("malformed call arguments")
            if hook is not None:
                hook(self._job_deadline)
            try:
                if op == "call" and name in self._methods:
                    value = getattr(self.target, name)(*args, **kwargs)
                elif op == "get" and name in self._properties:
                    value = getattr(self.target, name)
                else:
                    raise AttributeError(f"robo has no public member {name!r}")
            finally:
                if hook is not None:
                    hook(None)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:
            error = describe_error(exc)
            if error["type"] == "EpisodeFinished":
                self._finished = error.get("reason") or "unknown"
            return {"op": "reply", "error": error}
        if not _encodable(value):
            return {"op": "reply", "error": {"type": "TypeError", "text": (
                f"robo.{name} returned a {type(value).__name__}, which cannot cross the kernel boundary")}}
        return {"op": "reply", "value": value}


def _read_bwrap_info(fd: int, deadline: float) -> int:
    """The sandbox's child pid from bubblewrap's ``--info-fd`` JSON."""
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            return int(json.loads(data)["child-pid"])
    raise ValueError(f"bubblewrap reported no child pid ({data[:200]!r})")


def _only_child(pid: int) -> int:
    """The one child of the sandbox's init process (the kernel's Python)."""
    for _ in range(100):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise ValueError(f"the sandbox process {pid} has no child")


def _describe_exit(rc: int | None, *, bwrap: bool = False) -> str:
    """How the kernel process ended; under bubblewrap a status of 128 + N means the kernel died of signal N."""
    if rc is None:
        return "did not exit"
    if bwrap and 128 < rc < 128 + 65:
        rc = -(rc - 128)
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        why = {"SIGXCPU": " (CPU-time limit)", "SIGKILL": " (killed)", "SIGSEGV": " (segmentation fault)"}
        return f"ended by {sig}{why.get(sig, '')}"
    return f"exited with status {rc}"
