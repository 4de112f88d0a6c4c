"""The kernel's child process from start to end: :class:`KernelProcess`.

It starts the child under the OS boundary of ``sandbox.py`` (bubblewrap with the seccomp filter of ``seccomp.py``,
or ``--unsafe-sandbox``), sends it the ``init`` frame and waits (bounded by ``KernelLimits.start_timeout_s``) for
its ``ready`` with the report of :func:`.isolation.isolate`; caps the sandbox's tmpfs inodes, puts its processes in
a cgroup where the machine delegates one, and attaches the kernel's workspace to the :class:`.WorkspaceMirror`.
It ends the child politely (a ``shutdown`` frame, 2 s), then SIGKILLs what is left of its process group, and says
how it ended with the tail of its log. What runs in the child, and the frames of a job, are ``host.Kernel``'s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyrua_ros import cputime
from pyrua_ros.kernel import cgroup, mounts, protocol, seccomp
from pyrua_ros.kernel import sandbox as sandbox_mod
from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.kernel.child import BOOT, child_environment, describe_exit, only_child, read_bwrap_info
from pyrua_ros.kernel.manifest import host_results
from pyrua_ros.kernel.mirror import WorkspaceMirror
from pyrua_ros.kernel.outcomes import KernelLimits, KernelStartError, SandboxUnavailable
from pyrua_ros.records.text import safe_text


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


class KernelProcess:
    """One kernel child at a time for one episode: ``start()``, ``stop(kill=...)``, ``close()``.

    ``manifest``: what the child learns of the robo (sent in its ``init`` frame). ``sandbox``: ``"bwrap"`` or
    ``"unsafe"``. ``event(text)`` records what went wrong for ``Kernel.events``. As root under bubblewrap the
    episode gets a uid of its own and a workspace tmpfs both outlive a restart (a coding-agent CLI's sandbox can
    share it: :attr:`shared_workspace`)."""

    def __init__(self, workspace: Path, limits: KernelLimits, *, sandbox: str, manifest: dict,
                 mirror: WorkspaceMirror, event: Callable[[str], None]) -> None:
        self.workspace, self.limits, self.sandbox, self.manifest = workspace, limits, sandbox, manifest
        self.mirror = mirror
        self._event = event
        self.popen: subprocess.Popen | None = None   # bwrap (or, unsafe, the kernel's Python) itself
        self.reader: protocol.FrameReader | None = None
        self.starts = 0
        self.start_times_s: list[float] = []
        self.isolation: dict = {}
        self.description = ""
        self.cgroup: cgroup.KernelCgroup | None = None
        self.uid: int | None = None
        self.mount_fd: int | None = None   # the episode's shared workspace tmpfs (root; mounts.workspace_tmpfs)
        self._pid: int | None = None
        self._log = None
        self._start_cpu_s = 0.0
        if sandbox == "bwrap" and os.geteuid() == 0:
            self.uid = sandbox_mod.episode_uid()
            try:
                self.mount_fd = mounts.workspace_tmpfs(limits.workspace_bytes, limits.workspace_inodes, self.uid)
            except OSError as exc:   # an older Linux: a tmpfs of the kernel's own, shared with nothing
                event(f"the workspace cannot be a shared tmpfs here ({exc}); the kernel mounts its own")

    @property
    def pid(self) -> int | None:
        """Process id (in this PID namespace) of the current kernel process, the Python that runs cells."""
        return self._pid if self.popen is not None else None

    @property
    def shared_workspace(self) -> tuple[int, int] | None:
        """(mount fd, uid) of the workspace tmpfs a coding-agent CLI's sandbox attaches to share the kernel's
        files (:mod:`pyrua_ros.agent.runtimes.cli_sandbox`); None where the kernel's workspace is its own."""
        if self.mount_fd is None or self.uid is None:
            return None
        return self.mount_fd, self.uid

    def send(self, message: dict) -> None:
        protocol.write_frame(self.popen.stdin.fileno(), message)

    def interrupt(self) -> None:
        """SIGINT to the kernel's Python (a job ran past its time)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGINT)

    def start(self) -> None:
        """Start a child and wait for its ``ready``; raises :class:`KernelStartError` (or
        :class:`SandboxUnavailable`, with the words the user needs) when it cannot."""
        t0 = time.monotonic()
        deadline = t0 + self.limits.start_timeout_s
        self._log = tempfile.TemporaryFile(prefix="pyrua-kernel-", suffix=".log")
        info_r, info_w = os.pipe() if self.sandbox == "bwrap" else (None, None)
        filter_fd = None
        try:
            try:
                filter_fd = _filter_fd() if self.sandbox == "bwrap" else None
                launch = sandbox_mod.plan(self.workspace, workspace_bytes=self.limits.workspace_bytes,
                                          isolation=self.sandbox, uid=self.uid, info_fd=info_w, seccomp_fd=filter_fd,
                                          workspace_mount=self.mount_fd)
            except (sandbox_mod.SandboxUnavailable, ValueError) as exc:
                raise SandboxUnavailable(str(exc)) from None
            self.description = launch.description
            self.uid = launch.uid
            argv = [*launch.argv, "-c", BOOT.format(paths=launch.sys_path)]
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                cwd=self.workspace if self.sandbox == "unsafe" else "/", env=child_environment(self.workspace),
                start_new_session=True, close_fds=True,
                pass_fds=tuple(fd for fd in (info_w, filter_fd, self.mount_fd) if fd is not None), bufsize=0)
        finally:
            for fd in (info_w, filter_fd):
                if fd is not None:
                    os.close(fd)
        self.reader = protocol.FrameReader(self.popen.stdout.fileno(), host_results,
                                           max_frame_bytes=self.limits.max_frame_bytes, text_filter=safe_text)
        limits = {"memory_bytes": self.limits.memory_bytes, "cpu_s": self.limits.cpu_s, "seccomp": True,
                  "file_size_bytes": self.limits.file_size_bytes, "open_files": self.limits.open_files,
                  "processes": self.limits.processes, "landlock": self.limits.landlock}
        ready, sandbox_pid = None, None
        try:
            if info_r is not None:
                sandbox_pid = read_bwrap_info(info_r, deadline)
            self.send({"op": "init", "manifest": self.manifest, "workspace": str(self.workspace), "limits": limits})
            ready = self.reader.read(deadline)
        except (OSError, ValueError, protocol.ProtocolError):
            ready = None
        finally:
            if info_r is not None:
                os.close(info_r)
        if not ready or ready.get("op") != "ready" or not isinstance(ready.get("isolation"), dict):
            detail = self.stop(kill=True)
            if self.sandbox == "bwrap" and "bwrap:" in detail:
                line = detail[detail.index("bwrap:"):].splitlines()[0]
                raise SandboxUnavailable(f"the cell sandbox could not be set up here ({line}); pass "
                                         f"--unsafe-sandbox to run cells without it")
            raise KernelStartError(f"the kernel process did not start within {self.limits.start_timeout_s:g} s "
                                   f"({detail})")
        self.isolation = ready["isolation"]
        if sandbox_pid is None:
            self._pid = self.popen.pid
            self.mirror.attach(self.mirror.host_fd, restore=False)
        else:
            self._pid = only_child(sandbox_pid)
            self._attach_workspace(sandbox_pid)
        self._bound({self.popen.pid, sandbox_pid, self._pid} - {None})
        if cputime.enabled():   # the sandbox and the kernel's Python until it answered ready
            self._start_cpu_s = cputime.tree_cpu_s(self.popen.pid)
            cputime.add("kernel process: start", self._start_cpu_s)
        self.starts += 1
        self.start_times_s.append(round(time.monotonic() - t0, 4))

    def _attach_workspace(self, sandbox_pid: int) -> None:
        """Cap the sandbox's tmpfs files and hand the kernel's workspace to the mirror, restored from the run
        directory (the episode's shared tmpfs outlives a kernel, so it is restored only at the first start)."""
        files = self._limit_files(f"/proc/{sandbox_pid}/root")   # before any file or cell reaches it
        self.description += (f"; memory outside RLIMIT_AS: memfd and SysV shared memory refused, files in "
                             f"the {self.limits.workspace_bytes // 2**20} MiB workspace and "
                             f"{sandbox_mod.TMP_BYTES // 2**20} MiB /tmp tmpfs, {files}")
        owner = self.uid if os.geteuid() == 0 else None
        self.mirror.owner = owner
        if self.mount_fd is not None:
            self.mirror.attach(mounts.open_root(self.mount_fd), restore=self.starts == 0)
            return
        kernel_fd = wsfiles.open_dir(f"/proc/{sandbox_pid}/root{self.workspace}")
        if owner is not None:
            os.fchown(kernel_fd, owner, owner)
        self.mirror.attach(kernel_fd, restore=True)

    def _limit_files(self, root: str) -> str:
        """Cap the inodes of the sandbox's tmpfs mounts (``mounts.limit_inodes``; root only); says what holds."""
        if os.geteuid() != 0:
            return "their file count not capped (setting nr_inodes needs root)"
        try:
            if self.mount_fd is None:   # (a shared workspace got its nr_inodes when it was made)
                mounts.limit_inodes(root, str(self.workspace), self.limits.workspace_inodes)
            mounts.limit_inodes(root, "/tmp", sandbox_mod.TMP_INODES)
        except (OSError, ValueError) as exc:
            self._event(f"the sandbox's file count could not be capped: {exc}")
            return f"their file count not capped ({exc})"
        return f"at most {self.limits.workspace_inodes} and {sandbox_mod.TMP_INODES} files"

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
        self.cgroup = group
        bound = group.description if group is not None else (
            f"{cgroup.rlimits_only(self.limits.cpu_s, self.limits.memory_bytes)}: no cgroup, "
            f"{cgroup.fallback_reason() or 'not created'}")
        self.description = f"{self.description}; {bound}"   # (set afresh from the launch at every start)

    def stop(self, *, kill: bool) -> str:
        """End the child (politely unless ``kill``); copy its workspace back; returns how it ended plus the
        tail of its log."""
        proc, self.popen = self.popen, None
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
        # The whole group, even when its leader has exited: bubblewrap's inner process (the init of the sandbox's PID
        # namespace) outlives the outer one when a Ctrl-C to every process group ends the outer bwrap during their
        # start handshake; as a namespace init it ignores that SIGINT and would wait for the handshake forever. (A
        # leader reaped just above cannot have had its id reused since: PIDs come round only after pid_max more.)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            rc = proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            rc = None
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        self.mirror.detach()
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

    def close(self) -> None:
        """Stop the child (politely) and give back the episode's workspace tmpfs."""
        try:
            self.stop(kill=False)
        finally:
            if self.mount_fd is not None:
                os.close(self.mount_fd)
                self.mount_fd = None
