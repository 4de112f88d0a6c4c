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

Its parts: :mod:`.process` (the child's start and end), :mod:`.mirror` (the workspace and its copy in the run
directory), :mod:`.outcomes` (limits, outcomes, start errors), :mod:`.manifest` (what the child learns of the robo),
:mod:`.frames` (the schema of the child's frames), :mod:`.images` (``display()`` images), :mod:`.child` (how the
child boots, finding it and describing its exit), :mod:`.isolation` (the limits the child puts on itself).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyrua_ros.kernel import policy, protocol
from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.kernel.frames import clean_done, frame_problem
from pyrua_ros.kernel.images import accept_image
from pyrua_ros.kernel.manifest import build_manifest, describe_error, encodable
from pyrua_ros.kernel.mirror import WorkspaceMirror
from pyrua_ros.kernel.outcomes import CellOutcome, KernelLimits, ProgramOutcome
from pyrua_ros.kernel.process import KernelProcess
from pyrua_ros.records.text import safe_text

RESTART_NOTICE = "the kernel was restarted; the namespace (variables, functions, imports) was lost"
MAX_EVENTS = 100


class Kernel:
    """Runs model-written cells (persistent namespace) and programs (fresh namespace) in a sandboxed child.

    ``target``: the real robo object (stays in this process). ``workspace``: the run directory's workspace
    (created if missing; cell and program sources are saved there, and under bubblewrap the kernel's own
    workspace is copied back there after every job). ``dynamic_methods``: see :func:`build_manifest`.
    ``sandbox``: ``"bwrap"`` (the OS boundary; refuses to start where it cannot be set up) or ``"unsafe"``
    (the CLI's ``--unsafe-sandbox``). ``deadline_hook(deadline)``: called with the job's deadline
    (``time.monotonic()`` seconds) before each robo call is served and with None after, so the robot's waits
    end at the cell's deadline. Use as a context manager or call ``close()``.

    The session is this class (the jobs, their frames, the robo calls, what is believed of the child); the
    child's start and end are :class:`.KernelProcess`'s (``process``), the workspace copies
    :class:`.WorkspaceMirror`'s (``mirror``)."""

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
        self.events: list[str] = []
        self._job = 0
        self._finished: str | None = None
        self.mirror = WorkspaceMirror(self.workspace, self.limits, self._event)
        try:
            self.process = KernelProcess(self.workspace, self.limits, sandbox=sandbox, manifest=self.manifest,
                                         mirror=self.mirror, event=self._event)
            try:
                self.process.start()
            except BaseException:
                self.process.close()
                raise
        except BaseException:
            self.mirror.close()
            raise

    # -- lifecycle (the process's) --------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Process id (in this PID namespace) of the current kernel process, the Python that runs cells."""
        return self.process.pid

    @property
    def uid(self) -> int | None:
        """The uid the kernel runs as, seen from outside (as root: this episode's own, kept across restarts)."""
        return self.process.uid

    @property
    def shared_workspace(self) -> tuple[int, int] | None:
        """See :attr:`.KernelProcess.shared_workspace`."""
        return self.process.shared_workspace

    @property
    def description(self) -> str:
        """The boundary the current child runs in, in words (for result.json)."""
        return self.process.description

    @property
    def isolation(self) -> dict[str, Any]:
        """What the child's :func:`.isolation.isolate` reported taking effect."""
        return self.process.isolation

    @property
    def starts(self) -> int:
        return self.process.starts

    @property
    def start_times_s(self) -> list[float]:
        return self.process.start_times_s

    def restart(self) -> None:
        """Replace the child with a fresh one (the namespace is lost; the workspace is kept)."""
        self.process.stop(kill=False)
        self.process.start()

    def close(self) -> None:
        """Stop the child and copy its workspace back; the kernel cannot be used afterwards."""
        try:
            self.process.close()
        finally:
            self.mirror.close()

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the workspace (the mirror's) -----------------------------------------------------------------
    @property
    def mirrored(self) -> bool:
        return self.mirror.mirrored

    @property
    def import_host_files(self) -> bool:
        """See :attr:`.WorkspaceMirror.import_host_files`."""
        return self.mirror.import_host_files

    @import_host_files.setter
    def import_host_files(self, value: bool) -> None:
        self.mirror.import_host_files = value

    def sync_workspace(self) -> wsfiles.CopyReport | None:
        return self.mirror.sync()

    def import_workspace(self) -> wsfiles.CopyReport | None:
        return self.mirror.import_host()

    def put_file(self, name: str, data: bytes) -> None:
        self.mirror.put_file(name, data)

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
        self.mirror.import_host()
        self.cells += 1
        filename = f"cell_{self.cells:03d}.py"
        self.mirror.save_record(filename, code)
        try:
            flags = policy.audit_source(code, self.workspace)
            blocked = policy.blocked_names(code)
        except policy.UncheckableSource as exc:
            return CellOutcome(cell=self.cells, exception=str(exc), refused=True)
        if blocked:
            return CellOutcome(cell=self.cells, exception=policy.refusal_text(blocked, "cell"), refused=True,
                               sandbox_flags=flags)
        syntax = policy.syntax_error(code, filename)
        if syntax is not None:   # never reaches the kernel, as the reference parses before it executes
            return CellOutcome(cell=self.cells, exception=syntax, refused=True, sandbox_flags=flags)
        t0 = time.monotonic()
        done, images, ending, stderr_extra = self._exchange({"op": "cell", "code": code, "filename": filename},
                                                            timeout_s)
        elapsed = round(time.monotonic() - t0, 2)
        restarted = ending[0] in ("killed", "died")
        common = {"cell": self.cells, "elapsed_s": elapsed, "images": images, "sandbox_flags": flags,
                  "restarted": restarted, "notice": RESTART_NOTICE if restarted else None}
        stderr_extra += self.mirror.space_note()
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
        self.mirror.import_host()
        if path is not None:
            code, filename = self.mirror.read_program(path)
            self.programs += 1
        else:
            code = safe_text(code)
            self.programs += 1
            filename = f"program_{self.programs:02d}.py"
            self.mirror.save_record(filename, code)
        base = {"program": self.programs, "file": filename, "code": code}
        try:
            base["sandbox_flags"] = policy.audit_source(code, self.workspace)
            blocked = policy.blocked_names(code)
        except policy.UncheckableSource as exc:
            return ProgramOutcome(status="error", exception=str(exc), refused=True, **base)
        if blocked:
            return ProgramOutcome(status="error", exception=policy.refusal_text(blocked, "program"), refused=True,
                                  **base)
        t0 = time.monotonic()
        done, images, ending, stderr_extra = self._exchange({"op": "program", "code": code, "filename": filename},
                                                            timeout_s)
        restarted = ending[0] in ("killed", "died")
        base.update(elapsed_s=round(time.monotonic() - t0, 2), images=images, restarted=restarted,
                    notice=RESTART_NOTICE if restarted else None)
        stderr_extra += self.mirror.space_note()
        if done is None:
            status = "timeout" if ending[0] == "killed" else "error"
            return ProgramOutcome(status=status, reason="timeout" if status == "timeout" else None,
                                  exception=ending[1], stderr=stderr_extra, **base)
        status, exception, reason = done.get("status") or "error", done.get("exception"), done.get("reason")
        if status == "finished":
            reason = self._believed_finish(reason)
            if reason is None:
                status, exception = "error", "EpisodeFinished was raised by the program itself, not by robo"
        if done.get("interrupted") and ending[0] == "interrupted":
            status, reason = "timeout", "timeout"   # the reference's run_policy: status and reason "timeout"
            exception = f"TimeoutError: the program ran past its {timeout_s:g} s limit and was interrupted\n" + (
                exception or "")
        return ProgramOutcome(status=status, reason=reason, exception=exception, stdout=done.get("stdout", ""),
                              stderr=done.get("stderr", "") + stderr_extra, loaded=not done.get("load_failed"),
                              **base)

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
        if self.process.popen is None:
            raise RuntimeError("the kernel is closed")
        job = self._job = secrets.randbits(48)   # unpredictable: a frame cannot be forged for a job not yet sent
        self._finished = None
        images: list[bytes] = []
        refused_images: list[str] = []
        interrupted = False
        deadline = time.monotonic() + timeout_s
        self._job_deadline = deadline
        try:
            self.process.send({**message, "id": job})
            while True:
                try:
                    msg = self.process.reader.read(deadline)
                except protocol.FrameRejected as exc:
                    self._event(f"job {job}: discarded a frame: {exc}")
                    continue
                if msg is None:
                    if not interrupted:
                        interrupted = True
                        self.process.interrupt()
                        deadline = time.monotonic() + self.limits.interrupt_grace_s
                        continue
                    detail = self.process.stop(kill=True)
                    self.process.start()
                    return None, images, ("killed", (
                        f"TimeoutError: the code ran past its {timeout_s:g} s limit and did not stop when "
                        f"interrupted; the kernel process was killed ({detail.split(';')[0]})")), ""
                problem = frame_problem(msg, job)
                if problem:
                    self._event(f"job {job}: discarded a frame: {problem}")
                    continue
                op = msg["op"]
                if op == "done":
                    self.mirror.sync()
                    return (clean_done(msg), images, ("interrupted" if interrupted else "done", ""),
                            "".join(f"\n[display() image refused: {why}]" for why in refused_images))
                if op in ("call", "get"):
                    self.process.send({**self._serve(msg), "id": job})
                elif len(images) + len(refused_images) < self.limits.max_images:
                    png, why = (None, "sent after the time limit; not decoded") if (
                        time.monotonic() > self._job_deadline) else accept_image(msg["png"],
                                                                                 self.limits.max_image_bytes)
                    if png is not None:
                        images.append(png)
                    else:
                        refused_images.append(why)
        except (OSError, protocol.ProtocolError) as exc:
            detail = self.process.stop(kill=True)
            self.process.start()
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
        if not encodable(value):
            return {"op": "reply", "error": {"type": "TypeError", "text": (
                f"robo.{name} returned a {type(value).__name__}, which cannot cross the kernel boundary")}}
        return {"op": "reply", "value": value}
