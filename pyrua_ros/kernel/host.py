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

Its parts: :mod:`.outcomes` (limits, outcomes, start errors), :mod:`.manifest` (what the child learns of the
robo), :mod:`.frames` (the schema of the child's frames), :mod:`.images` (``display()`` images), :mod:`.child`
(starting, finding and describing the child process).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyrua_ros import cputime
from pyrua_ros.kernel import cgroup, mounts, policy, protocol, seccomp
from pyrua_ros.kernel import sandbox as sandbox_mod
from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.kernel.child import BOOT, child_environment, describe_exit, only_child, read_bwrap_info
from pyrua_ros.kernel.frames import clean_done, frame_problem
from pyrua_ros.kernel.images import accept_image
from pyrua_ros.kernel.manifest import build_manifest, describe_error, encodable, host_results
from pyrua_ros.kernel.outcomes import (
    CellOutcome,
    KernelLimits,
    KernelStartError,
    ProgramOutcome,
    SandboxUnavailable,
)
from pyrua_ros.records.text import safe_text

RESTART_NOTICE = "the kernel was restarted; the namespace (variables, functions, imports) was lost"
MAX_EVENTS = 100
FULL_BELOW_BYTES = 64 * 1024   # a workspace with less free space than this is reported full to the model
PROGRAM_BYTES = 4 * 2**20   # largest program file run_program(path=...) reads


def _filter_fd() -> int:
    """A pipe's read end holding the kernel's seccomp filter (what ``bwrap --seccomp FD`` reads)."""
    program = seccomp.program()
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, program)   # a few KiB: the pipe takes it whole
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd


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
        self._mount_fd: int | None = None   # the episode's shared workspace tmpfs (root; mounts.workspace_tmpfs)
        self._records: set[str] = set()     # top-level names this process wrote (never overwritten by a copy)
        self._seen: dict[str, tuple] = {}   # copy cache: files already mirrored
        self._seen_in: dict[str, tuple] = {}   # the same, the other way (import_host_files)
        # True when a coding-agent CLI writes the run directory's workspace/ (its sandbox cannot share the kernel's
        # tmpfs: not root): what it wrote there is copied into the kernel's tmpfs before each job
        self.import_host_files = False
        try:
            if sandbox == "bwrap" and os.geteuid() == 0:
                self._uid = sandbox_mod.episode_uid()
                try:
                    self._mount_fd = mounts.workspace_tmpfs(self.limits.workspace_bytes, self.limits.workspace_inodes,
                                                            self._uid)
                except OSError as exc:   # an older Linux: a tmpfs of the kernel's own, shared with nothing
                    self._event(f"the workspace cannot be a shared tmpfs here ({exc}); the kernel mounts its own")
            self._start()
        except BaseException:
            os.close(self._host_fd)
            if self._mount_fd is not None:
                os.close(self._mount_fd)
            raise

    # -- lifecycle ----------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Process id (in this PID namespace) of the current kernel process, the Python that runs cells."""
        return self._pid if self._proc is not None else None

    @property
    def uid(self) -> int | None:
        """The uid the kernel runs as, seen from outside (as root: this episode's own, kept across restarts)."""
        return self._uid

    @property
    def shared_workspace(self) -> tuple[int, int] | None:
        """(mount fd, uid) of the workspace tmpfs a coding-agent CLI's sandbox attaches to share the kernel's
        files (:mod:`pyrua_ros.agent.runtimes.cli_sandbox`); None where the kernel's workspace is its own."""
        if self._mount_fd is None or self._uid is None:
            return None
        return self._mount_fd, self._uid

    @property
    def mirrored(self) -> bool:
        """True when the kernel writes its own workspace (a tmpfs) and the run directory holds a copy."""
        return self._ws_fd is not None and self._ws_fd != self._host_fd

    def _start(self) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.limits.start_timeout_s
        self._log = tempfile.TemporaryFile(prefix="pyrua-kernel-", suffix=".log")
        info_r, info_w = os.pipe() if self.sandbox == "bwrap" else (None, None)
        filter_fd = None
        try:
            try:
                filter_fd = _filter_fd() if self.sandbox == "bwrap" else None
                launch = sandbox_mod.plan(self.workspace, workspace_bytes=self.limits.workspace_bytes,
                                          isolation=self.sandbox, uid=self._uid, info_fd=info_w, seccomp_fd=filter_fd,
                                          workspace_mount=self._mount_fd)
            except (sandbox_mod.SandboxUnavailable, ValueError) as exc:
                raise SandboxUnavailable(str(exc)) from None
            self.description = launch.description
            self._uid = launch.uid
            argv = [*launch.argv, "-c", BOOT.format(paths=launch.sys_path)]
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                cwd=self.workspace if self.sandbox == "unsafe" else "/", env=child_environment(self.workspace),
                start_new_session=True, close_fds=True,
                pass_fds=tuple(fd for fd in (info_w, filter_fd, self._mount_fd) if fd is not None), bufsize=0)
        finally:
            for fd in (info_w, filter_fd):
                if fd is not None:
                    os.close(fd)
        self._reader = protocol.FrameReader(self._proc.stdout.fileno(), host_results,
                                            max_frame_bytes=self.limits.max_frame_bytes, text_filter=safe_text)
        limits = {"memory_bytes": self.limits.memory_bytes, "cpu_s": self.limits.cpu_s, "seccomp": True,
                  "file_size_bytes": self.limits.file_size_bytes, "open_files": self.limits.open_files,
                  "processes": self.limits.processes, "landlock": self.limits.landlock}
        ready, sandbox_pid = None, None
        try:
            if info_r is not None:
                sandbox_pid = read_bwrap_info(info_r, deadline)
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
            self._pid = only_child(sandbox_pid)
            files = self._limit_files(f"/proc/{sandbox_pid}/root")   # before any file or cell reaches it
            self.description += (f"; memory outside RLIMIT_AS: memfd and SysV shared memory refused, files in "
                                 f"the {self.limits.workspace_bytes // 2**20} MiB workspace and "
                                 f"{sandbox_mod.TMP_BYTES // 2**20} MiB /tmp tmpfs, {files}")
            owner = self._uid if os.geteuid() == 0 else None
            if self._mount_fd is not None:   # the episode's tmpfs: it outlives a kernel, so restore it only once
                self._ws_fd = mounts.open_root(self._mount_fd)
                restore = self.starts == 0
            else:
                self._ws_fd = wsfiles.open_dir(f"/proc/{sandbox_pid}/root{self.workspace}")
                restore = True
                if owner is not None:
                    os.fchown(self._ws_fd, owner, owner)
            try:   # a workspace that was full before a restart may not fit again: what fits is restored
                if restore:
                    wsfiles.copy_tree(self._host_fd, self._ws_fd, owner=owner,
                                      limits=wsfiles.CopyLimits(bytes=self.limits.workspace_bytes))
            except OSError as exc:
                self._event(f"the new kernel's workspace could not be restored whole: {exc.strerror or exc}")
        self._bound({self._proc.pid, sandbox_pid, self._pid} - {None})
        if cputime.enabled():   # the sandbox and the kernel's Python until it answered ready
            self._start_cpu_s = cputime.tree_cpu_s(self._proc.pid)
            cputime.add("kernel process: start", self._start_cpu_s)
        self.starts += 1
        self.start_times_s.append(round(time.monotonic() - t0, 4))

    def _limit_files(self, root: str) -> str:
        """Cap the inodes of the sandbox's tmpfs mounts (``mounts.limit_inodes``; root only); says what holds."""
        if os.geteuid() != 0:
            return "their file count not capped (setting nr_inodes needs root)"
        try:
            if self._mount_fd is None:   # (a shared workspace got its nr_inodes when it was made)
                mounts.limit_inodes(root, str(self.workspace), self.limits.workspace_inodes)
            mounts.limit_inodes(root, "/tmp", sandbox_mod.TMP_INODES)
        except (OSError, ValueError) as exc:
            self._event(f"the sandbox's file count could not be capped: {exc}")
            return f"their file count not capped ({exc})"
        return f"at most {self.limits.workspace_inodes} and {sandbox_mod.TMP_INODES} files"

    _cgroup: cgroup.KernelCgroup | None = None
    _start_cpu_s = 0.0

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
            f"{cgroup.rlimits_only(self.limits.cpu_s, self.limits.memory_bytes)}: no cgroup, "
            f"{cgroup.fallback_reason() or 'not created'}")
        self.description = f"{self.description}; {bound}"   # (set afresh from the launch at every start)

    def _stop(self, *, kill: bool) -> str:
        """End the child (politely unless ``kill``); copy its workspace back; returns how it ended plus the
        tail of its log."""
        proc, self._proc = self._proc, None
        if proc is None:
            return "not running"
        if cputime.enabled():   # what the kernel process tree spent since it was ready: the cells
            cputime.add("kernel process: cells", max(0.0, cputime.tree_cpu_s(proc.pid) - self._start_cpu_s))
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
        detail = describe_exit(rc, bwrap=self.sandbox == "bwrap")
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
            if self._mount_fd is not None:
                os.close(self._mount_fd)
                self._mount_fd = None

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
            written: dict[str, tuple] = {}
            report = wsfiles.copy_tree(self._ws_fd, self._host_fd, protect=self._records, delete_extra=True,
                                         seen=self._seen, limits=limits, written=written)
            self._seen_in.update(written)   # (the run directory's copies of these are not news for the kernel)
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
    _import_note: str | None = None

    def import_workspace(self) -> wsfiles.CopyReport | None:
        """Copy what changed in the run directory's workspace (a coding-agent CLI's files) into the kernel's tmpfs,
        with the same bounded copier as the way back (regular files and folders only, no link followed, at most
        ``CopyLimits.entries`` entries, 32 levels, the workspace's size in bytes; the host's cell files left
        alone; nothing deleted). Done before each job when :attr:`import_host_files`; a no-op otherwise."""
        self._import_note = None
        if not (self.import_host_files and self.mirrored):
            return None
        written: dict[str, tuple] = {}
        try:
            report = wsfiles.copy_tree(self._host_fd, self._ws_fd, protect=self._records,
                                         owner=self._uid if os.geteuid() == 0 else None, seen=self._seen_in,
                                         limits=wsfiles.CopyLimits(bytes=self.limits.workspace_bytes),
                                         written=written)
        except OSError as exc:
            self._event(f"copying the run directory's workspace into the kernel failed: {exc}")
            self._import_note = f"[the CLI's files could not all reach the kernel: {exc.strerror or exc}]"
            return None
        finally:
            self._seen.update(written)   # (the kernel's copies of these need not be copied back)
        if report.skipped:
            self._event(f"workspace import skipped {report.skipped} entr{'y' if report.skipped == 1 else 'ies'}: "
                        f"{', '.join(report.examples)}")
            self._import_note = (f"[{report.skipped} entr{'y' if report.skipped == 1 else 'ies'} of the workspace "
                                 f"the CLI wrote did not reach the kernel: {', '.join(report.examples[:3])}]")
        return report

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
        if self._import_note:
            notes.append(self._import_note)
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
        self.import_workspace()
        self.cells += 1
        filename = f"cell_{self.cells:03d}.py"
        self._save_record(filename, code)
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
        self.import_workspace()
        if path is not None:
            code, filename = self._read_program(path)
            self.programs += 1
        else:
            code = safe_text(code)
            self.programs += 1
            filename = f"program_{self.programs:02d}.py"
            self._save_record(filename, code)
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
        stderr_extra += self._space_note()
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
                    return (clean_done(msg), images, ("interrupted" if interrupted else "done", ""),
                            "".join(f"\n[display() image refused: {why}]" for why in refused_images))
                if op in ("call", "get"):
                    protocol.write_frame(self._proc.stdin.fileno(), {**self._serve(msg), "id": job})
                elif len(images) + len(refused_images) < self.limits.max_images:
                    png, why = (None, "sent after the time limit; not decoded") if (
                        time.monotonic() > self._job_deadline) else accept_image(msg["png"],
                                                                                 self.limits.max_image_bytes)
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
        if not encodable(value):
            return {"op": "reply", "error": {"type": "TypeError", "text": (
                f"robo.{name} returned a {type(value).__name__}, which cannot cross the kernel boundary")}}
        return {"op": "reply", "value": value}
