"""The agent-process side of the cell kernel: ``Kernel`` runs model-written cells and programs in a child process.

The child (``worker.py``) gets a manifest of the real robo's public members and nothing else: every robo call
arrives here as a frame, is checked against the manifest (unknown or private names are refused, whatever the
child sends), runs on the real object in this process, and its value or exception goes back. Threading: none;
``run_cell`` / ``run_program`` block the calling thread, and every wait on the child has a deadline (the cell's
wall-clock ``timeout_s``, then ``KernelLimits.interrupt_grace_s`` after SIGINT, then SIGKILL and a restart).
A child that dies (segfault, kill, out of memory, CPU-time limit) gives an outcome that says so, and the next
cell runs in a fresh child, with ``notice`` telling the model its namespace was lost.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import signal
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyrua_ros.agent.kernel import policy, protocol

RESTART_NOTICE = "the kernel was restarted; the namespace (variables, functions, imports) was lost"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
# The child starts with -I (no env vars, no cwd on sys.path: a workspace file cannot shadow a module) and -S (no
# site processing: the venv's .pth hooks re-exec with LD_LIBRARY_PATH and set AMENT_PREFIX_PATH, which the child
# must not have); the bootstrap adds the package root first and this interpreter's site-packages last.
_BOOT = ("import sys; sys.path.insert(0, {root!r}); sys.path.extend({site_dirs!r}); import runpy; "
         "runpy.run_module('pyrua_ros.agent.kernel.worker', run_name='__main__', alter_sys=True)")


@dataclasses.dataclass(frozen=True)
class KernelLimits:
    """Limits of one kernel child. ``memory_bytes``: RLIMIT_AS (address space, bytes). ``cpu_s``: RLIMIT_CPU,
    CPU seconds over the life of one child (exceeding it kills the child; the next cell gets a fresh one).
    ``file_size_bytes``: RLIMIT_FSIZE (largest file a write may make). ``open_files``: RLIMIT_NOFILE.
    ``interrupt_grace_s``: after a cell's timeout the child gets SIGINT, and is killed if the cell has not
    stopped this many seconds later. ``start_timeout_s``: deadline for a child to start. ``max_images`` /
    ``max_image_bytes``: ``display()`` images kept per cell, and the largest PNG accepted. ``landlock``: confine
    the child's filesystem access with Landlock where the Linux kernel offers it."""

    memory_bytes: int = 4 * 2**30
    cpu_s: int = 1800
    file_size_bytes: int = 256 * 2**20
    open_files: int = 256
    interrupt_grace_s: float = 2.0
    start_timeout_s: float = 60.0
    max_images: int = 32
    max_image_bytes: int = 16 * 2**20
    landlock: bool = True

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "cpu_s", "file_size_bytes", "open_files", "max_images", "max_image_bytes"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"KernelLimits.{name} must be positive, got {getattr(self, name)!r}")
        if self.interrupt_grace_s <= 0 or self.start_timeout_s <= 0:
            raise ValueError("KernelLimits.interrupt_grace_s and start_timeout_s must be positive")


@dataclasses.dataclass(frozen=True)
class CellOutcome:
    """What one cell did. ``cell``: 1-based index (source saved as ``workspace/cell_NNN.py``). ``stdout`` /
    ``stderr``: captured text, trimmed to first 4000 + last 4000 chars. ``value``: repr of a non-None trailing
    expression (<= 4000 chars) or None. ``exception``: traceback text (last 4000 chars), ``"SystemExit: ..."``,
    the sandbox refusal, or a timeout / kernel-death message; None if the cell ran through. ``episode_finished``:
    the ``EpisodeFinished`` reason, or None. ``elapsed_s``: wall clock, 0.01 s. ``images``: PNG bytes from
    ``display()``, in order (``display_0``, ``display_1`` ...). ``sandbox_flags``: static audit flags.
    ``refused``: the cell named a blocked name and was not run. ``restarted``: the kernel child was replaced
    after this cell (its namespace is gone). ``notice``: text for the model when ``restarted``."""

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
    file that was run (``program_NN.py`` for code). ``status``: ``completed`` (run returned), ``finished``
    (``EpisodeFinished``; ``reason`` set), ``error`` (``exception`` set), ``timeout`` (ran past ``timeout_s``).
    Other fields as in ``CellOutcome``."""

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


# ---------------------------------------------------------------------------------------------- kernel


class KernelStartError(RuntimeError):
    """The kernel child could not be started (infrastructure, not the model's fault)."""


class Kernel:
    """Runs model-written cells (persistent namespace) and programs (fresh namespace) in a sandboxed child.

    ``target``: the real robo object (stays in this process). ``workspace``: the directory cells run in
    (created if missing; cell and program sources are saved there). ``dynamic_methods``: see
    :func:`build_manifest`. Use as a context manager or call ``close()``."""

    def __init__(self, target: Any, workspace: Path, *, limits: KernelLimits | None = None,
                 dynamic_methods: tuple[str, ...] = ()) -> None:
        self.target = target
        self.limits = limits or KernelLimits()
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.manifest = build_manifest(target, dynamic_methods)
        kinds = {m["name"]: m["kind"] for m in self.manifest["members"]}
        self._methods = {n for n, k in kinds.items() if k == "method"}
        self._properties = {n for n, k in kinds.items() if k == "property"}
        self.cells = 0
        self.programs = 0
        self.isolation: dict[str, Any] = {}
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._reader: protocol.FrameReader | None = None
        self._start()

    # -- lifecycle ----------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Process id of the current child (None when closed)."""
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        self._log = tempfile.TemporaryFile(prefix="pyrua-kernel-", suffix=".log")
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-S", "-c", _BOOT.format(root=_PACKAGE_ROOT, site_dirs=_site_dirs())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, cwd=self.workspace,
            env=child_environment(self.workspace), start_new_session=True, close_fds=True, bufsize=0)
        self._reader = protocol.FrameReader(self._proc.stdout.fileno(), _host_results)
        limits = {"memory_bytes": self.limits.memory_bytes, "cpu_s": self.limits.cpu_s,
                  "file_size_bytes": self.limits.file_size_bytes, "open_files": self.limits.open_files,
                  "landlock": self.limits.landlock}
        try:
            protocol.write_frame(self._proc.stdin.fileno(), {"op": "init", "manifest": self.manifest,
                                                             "workspace": str(self.workspace), "limits": limits})
            ready = self._reader.read(time.monotonic() + self.limits.start_timeout_s)
        except (OSError, protocol.ProtocolError):
            ready = None
        if not ready or ready.get("op") != "ready":
            detail = self._stop(kill=True)
            raise KernelStartError(f"the kernel process did not start within {self.limits.start_timeout_s:g} s "
                                   f"({detail})")
        self.isolation = ready.get("isolation", {})

    def _stop(self, *, kill: bool) -> str:
        """End the child (politely unless ``kill``); returns how it ended plus the tail of its log."""
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
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            rc = proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            rc = None
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        detail = _describe_exit(rc)
        if self._log is not None:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - 1500))
            tail = self._log.read().decode(errors="replace").strip()
            self._log.close()
            self._log = None
            if tail:
                detail += f"; its last output: {tail[-1500:]}"
        return detail

    def restart(self) -> None:
        """Replace the child with a fresh one (the namespace is lost)."""
        self._stop(kill=False)
        self._start()

    def close(self) -> None:
        """Stop the child; the kernel cannot be used afterwards."""
        self._stop(kill=False)

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cells and programs -------------------------------------------------------------------------
    def run_cell(self, code: str, timeout_s: float) -> CellOutcome:
        """Run one cell in the persistent namespace, for at most ``timeout_s`` seconds of wall clock."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.cells += 1
        filename = f"cell_{self.cells:03d}.py"
        (self.workspace / filename).write_text(code)
        flags = policy.audit_source(code, self.workspace)
        blocked = policy.blocked_names(code)
        if blocked:
            return CellOutcome(cell=self.cells, exception=policy.refusal_text(blocked, "cell"), refused=True,
                               sandbox_flags=flags)
        t0 = time.monotonic()
        done, images, ending = self._exchange({"op": "cell", "code": code, "filename": filename}, timeout_s)
        elapsed = round(time.monotonic() - t0, 2)
        restarted = ending[0] in ("killed", "died")
        common = {"cell": self.cells, "elapsed_s": elapsed, "images": images, "sandbox_flags": flags,
                  "restarted": restarted, "notice": RESTART_NOTICE if restarted else None}
        if done is None:
            return CellOutcome(exception=ending[1], **common)
        exception = done.get("exception")
        if done.get("interrupted") and ending[0] == "interrupted":
            exception = (f"TimeoutError: the cell ran past its {timeout_s:g} s limit and was interrupted; "
                         f"the namespace was kept\n{exception or ''}")
        return CellOutcome(stdout=done.get("stdout", ""), stderr=done.get("stderr", ""), value=done.get("value"),
                           exception=exception, episode_finished=done.get("episode_finished"), **common)

    def run_program(self, code: str | None = None, path: str | None = None, *, timeout_s: float) -> ProgramOutcome:
        """Run a complete program defining ``run(robo)`` in a fresh namespace: pass its source (saved as
        ``program_NN.py``) or a workspace-relative ``.py`` path. ``run(robo)`` is called once."""
        if (code is None) == (path is None):
            raise ValueError("run_program needs exactly one of code (the program source) or path "
                             "(a workspace-relative .py file)")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        if path is not None:
            real = (self.workspace / path).resolve()
            if real != self.workspace and self.workspace not in real.parents:
                raise ValueError(f"path must be inside the workspace ({self.workspace}); got {path!r}")
            if not real.is_file():
                raise ValueError(f"no such file in workspace: {path}")
            code, filename = real.read_text(), str(real.relative_to(self.workspace))
            self.programs += 1
        else:
            self.programs += 1
            filename = f"program_{self.programs:02d}.py"
            (self.workspace / filename).write_text(code)
        flags = policy.audit_source(code, self.workspace)
        blocked = policy.blocked_names(code)
        base = {"program": self.programs, "file": filename, "sandbox_flags": flags}
        if blocked:
            return ProgramOutcome(status="error", exception=policy.refusal_text(blocked, "program"), refused=True,
                                  **base)
        t0 = time.monotonic()
        done, images, ending = self._exchange({"op": "program", "code": code, "filename": filename}, timeout_s)
        restarted = ending[0] in ("killed", "died")
        base.update(elapsed_s=round(time.monotonic() - t0, 2), images=images, restarted=restarted,
                    notice=RESTART_NOTICE if restarted else None)
        if done is None:
            status = "timeout" if ending[0] == "killed" else "error"
            return ProgramOutcome(status=status, exception=ending[1], **base)
        status, exception = done.get("status", "error"), done.get("exception")
        if done.get("interrupted") and ending[0] == "interrupted":
            status = "timeout"
            exception = f"TimeoutError: the program ran past its {timeout_s:g} s limit and was interrupted\n" + (
                exception or "")
        return ProgramOutcome(status=status, reason=done.get("reason"), exception=exception,
                              stdout=done.get("stdout", ""), stderr=done.get("stderr", ""), **base)

    # -- the exchange with the child ----------------------------------------------------------------
    def _exchange(self, message: dict, timeout_s: float) -> tuple[dict | None, list[bytes], tuple[str, str]]:
        """Send one job and serve the child until it reports ``done``; returns (done message or None, images,
        (ending, text)) with ending ``done`` | ``interrupted`` | ``killed`` | ``died``. Restarts a dead child."""
        if self._proc is None:
            raise RuntimeError("the kernel is closed")
        images: list[bytes] = []
        interrupted = False
        deadline = time.monotonic() + timeout_s
        try:
            protocol.write_frame(self._proc.stdin.fileno(), message)
            while True:
                msg = self._reader.read(deadline)
                if msg is None:
                    if not interrupted:
                        interrupted = True
                        os.kill(self._proc.pid, signal.SIGINT)
                        deadline = time.monotonic() + self.limits.interrupt_grace_s
                        continue
                    detail = self._stop(kill=True)
                    self._start()
                    return None, images, ("killed", (
                        f"TimeoutError: the code ran past its {timeout_s:g} s limit and did not stop when "
                        f"interrupted; the kernel process was killed ({detail.split(';')[0]})"))
                op = msg.get("op")
                if op == "done":
                    return msg, images, ("interrupted" if interrupted else "done", "")
                if op in ("call", "get"):
                    protocol.write_frame(self._proc.stdin.fileno(), self._serve(msg))
                elif op == "display":
                    png = msg.get("png")
                    if (isinstance(png, bytes) and png.startswith(PNG_SIGNATURE)
                            and len(png) <= self.limits.max_image_bytes and len(images) < self.limits.max_images):
                        images.append(png)
                else:
                    raise protocol.ProtocolError(f"unexpected message {op!r} from the kernel process")
        except (OSError, protocol.ProtocolError) as exc:
            detail = self._stop(kill=True)
            self._start()
            what = "died" if isinstance(exc, OSError | protocol.PeerClosed) else f"broke the protocol ({exc})"
            return None, images, ("died", f"KernelDied: the kernel process {what}: {detail}")

    def _serve(self, msg: dict) -> dict:
        """Run one robo call from the child on the real target; only names in the manifest are served."""
        name, op = msg.get("name"), msg.get("op")
        args, kwargs = msg.get("args", []), msg.get("kwargs", {})
        try:
            if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(
                    isinstance(k, str) for k in kwargs):
                raise TypeError("malformed call arguments")
            if op == "call" and name in self._methods:
                value = getattr(self.target, name)(*args, **kwargs)
            elif op == "get" and name in self._properties:
                value = getattr(self.target, name)
            else:
                raise AttributeError(f"robo has no public member {name!r}")
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:
            return {"op": "reply", "error": describe_error(exc)}
        if not _encodable(value):
            return {"op": "reply", "error": {"type": "TypeError", "text": (
                f"robo.{name} returned a {type(value).__name__}, which cannot cross the kernel boundary")}}
        return {"op": "reply", "value": value}


def _site_dirs() -> list[str]:
    """This interpreter's site-packages directories (where numpy, PIL, cv2 ... are installed)."""
    return [p for p in site.getsitepackages() if os.path.isdir(p)]


def _describe_exit(rc: int | None) -> str:
    if rc is None:
        return "did not exit"
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        why = {"SIGXCPU": " (CPU-time limit)", "SIGKILL": " (killed)", "SIGSEGV": " (segmentation fault)"}
        return f"ended by {sig}{why.get(sig, '')}"
    return f"exited with status {rc}"
