"""The kernel's workspace and the run directory's copy of it: :class:`WorkspaceMirror`.

Without bubblewrap the kernel works in the run directory's ``workspace/`` itself and there is nothing to mirror.
Under bubblewrap it writes its own workspace (a tmpfs the agent process reaches by a directory fd), and this
process copies it into the run directory after every job and when the kernel stops, so the run directory holds
what the kernel wrote, which the kernel itself can never reach. Every copy goes through ``workspace.py``
(directory fds, no link followed, regular files and folders only, bounded in entries, depth and bytes); the
cell and program sources this process saved there (:meth:`WorkspaceMirror.save_record`) are never overwritten
by a copy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.kernel.outcomes import KernelLimits
from pyrua_ros.records.text import safe_text

FULL_BELOW_BYTES = 64 * 1024   # a workspace with less free space than this is reported full to the model
PROGRAM_BYTES = 4 * 2**20   # largest program file run_program(path=...) reads


class WorkspaceMirror:
    """The run directory's workspace (``host_fd``) and the kernel's (``kernel_fd``: the same fd without
    bubblewrap, None while no kernel runs). ``event(text)`` records what went wrong for ``Kernel.events``."""

    def __init__(self, workspace: Path, limits: KernelLimits, event: Callable[[str], None]) -> None:
        self.workspace = workspace
        self.limits = limits
        self._event = event
        self.host_fd: int | None = wsfiles.open_dir(workspace)
        self.kernel_fd: int | None = None
        self.owner: int | None = None       # the uid the kernel's files belong to (as root), else None
        # True when a coding-agent CLI writes the run directory's workspace/ (its sandbox cannot share the kernel's
        # tmpfs: not root): what it wrote there is copied into the kernel's tmpfs before each job
        self.import_host_files = False
        self._records: set[str] = set()     # top-level names this process wrote (never overwritten by a copy)
        self._seen: dict[str, tuple] = {}   # copy cache: files already mirrored
        self._seen_in: dict[str, tuple] = {}   # the same, the other way (import)
        self._copy_note: str | None = None
        self._import_note: str | None = None

    @property
    def mirrored(self) -> bool:
        """True when the kernel writes its own workspace (a tmpfs) and the run directory holds a copy."""
        return self.kernel_fd is not None and self.kernel_fd != self.host_fd

    def attach(self, kernel_fd: int, *, restore: bool) -> None:
        """A kernel started with its workspace at ``kernel_fd``; with ``restore``, what the run directory holds
        is copied into it first (what fits: a workspace that was full before a restart may not fit again)."""
        self.kernel_fd = kernel_fd
        if not (restore and self.mirrored):
            return
        try:
            wsfiles.copy_tree(self.host_fd, self.kernel_fd, owner=self.owner,
                              limits=wsfiles.CopyLimits(bytes=self.limits.workspace_bytes))
        except OSError as exc:
            self._event(f"the new kernel's workspace could not be restored whole: {exc.strerror or exc}")

    def detach(self) -> None:
        """The kernel stopped: copy its workspace back (the tmpfs lives on while this process holds its fd)."""
        if self.mirrored:
            self.sync()
            os.close(self.kernel_fd)
        self.kernel_fd = None

    def close(self) -> None:
        if self.host_fd is not None:
            os.close(self.host_fd)
            self.host_fd = None

    def sync(self) -> wsfiles.CopyReport | None:
        """Copy the kernel's workspace into the run directory (regular files and folders only, no link
        followed; the host's own cell/program files kept). A no-op without bubblewrap (same folder)."""
        if not self.mirrored:
            return None
        limits = wsfiles.CopyLimits(bytes=self.limits.workspace_bytes,
                                    reserve_bytes=self.limits.record_reserve_bytes)
        try:
            written: dict[str, tuple] = {}
            report = wsfiles.copy_tree(self.kernel_fd, self.host_fd, protect=self._records, delete_extra=True,
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

    def import_host(self) -> wsfiles.CopyReport | None:
        """Copy what changed in the run directory's workspace (a coding-agent CLI's files) into the kernel's tmpfs,
        with the same bounded copier as the way back (regular files and folders only, no link followed, at most
        ``CopyLimits.entries`` entries, 32 levels, the workspace's size in bytes; the host's cell files left
        alone; nothing deleted). Done before each job when :attr:`import_host_files`; a no-op otherwise."""
        self._import_note = None
        if not (self.import_host_files and self.mirrored):
            return None
        written: dict[str, tuple] = {}
        try:
            report = wsfiles.copy_tree(self.host_fd, self.kernel_fd, protect=self._records, owner=self.owner,
                                       seen=self._seen_in, limits=wsfiles.CopyLimits(bytes=self.limits.workspace_bytes),
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

    def space_note(self) -> str:
        """A line for the model after a job: the workspace is full (writes fail with ENOSPC), or part of it was
        not kept in the run directory; empty otherwise."""
        notes = []
        if self.kernel_fd is not None:
            with contextlib.suppress(OSError):
                if wsfiles.free_bytes(self.kernel_fd) < FULL_BELOW_BYTES:
                    notes.append(f"[the workspace is full ({self.limits.workspace_bytes // 2**20} MiB): writing "
                                 f"a file fails with OSError ENOSPC until files are deleted]")
        if self._copy_note:
            notes.append(self._copy_note)
        if self._import_note:
            notes.append(self._import_note)
        return "".join(f"\n{note}" for note in notes)

    def put_file(self, name: str, data: bytes) -> None:
        """Place a file (one name) in the kernel's workspace and the run directory's copy (guides, test data)."""
        wsfiles.write_file(self.host_fd, name, data)
        if self.mirrored:
            wsfiles.write_file(self.kernel_fd, name, data, owner=self.owner)

    def save_record(self, name: str, code: str) -> None:
        """Save a cell/program source as ``name``: in the run directory always (whatever the kernel put there is
        replaced, never followed), in the kernel's own workspace when that is a separate place and the name is
        free or a regular file."""
        data = safe_text(code).encode("utf-8")
        self._records.add(name)
        try:
            wsfiles.write_file(self.host_fd, name, data)
        except OSError as exc:   # the run directory's disk is full: the source is still in the transcript
            self._event(f"{name} could not be saved in the run directory: {exc.strerror or exc}")
        if self.mirrored:
            try:
                wsfiles.write_file(self.kernel_fd, name, data, owner=self.owner, replace=False)
            except OSError as exc:   # e.g. the kernel filled its workspace: the record in the run dir is what counts
                self._event(f"{name} could not be placed in the kernel's workspace: {exc.strerror}")

    def read_program(self, path: str) -> tuple[str, str]:
        """(source, workspace-relative name) of a program file in the kernel's workspace, read from the fd that
        was checked (no link followed, regular files only)."""
        try:
            data = wsfiles.read_file(self.kernel_fd, str(path), PROGRAM_BYTES)
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
