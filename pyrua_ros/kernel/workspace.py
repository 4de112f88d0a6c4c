"""File access to a directory the kernel can write, without ever following a link or opening a non-regular file.

The kernel's workspace is hostile ground: a cell may put a symlink, a FIFO or a directory where the host expects
a file, and swap it between a check and a use. Everything here works relative to directory file descriptors:
each path component is opened with ``O_NOFOLLOW`` (so a link is an error, never followed), a file is opened with
``O_NONBLOCK`` (a FIFO cannot hang the host) and checked with ``fstat`` on the descriptor that is then read (so
what was checked is what is read). Sizes and entry counts are bounded.

Used by ``host.Kernel`` to save ``cell_NNN.py`` / ``program_NN.py``, to read a ``run_program(path=...)`` file, to
seed a new sandbox's workspace tmpfs from the run directory and to copy it back after every cell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import secrets
import stat
from collections.abc import Iterable

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20


class UnsafePath(ValueError):
    """A workspace path that is absolute, climbs out (``..``), passes a link or names something that is not a
    regular file."""


def open_dir(path: str | os.PathLike) -> int:
    """A directory fd for ``path`` (the last component must not be a link)."""
    return os.open(path, _DIR_FLAGS)


def _parts(rel: str) -> list[str]:
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise UnsafePath(f"not a workspace path: {rel!r}")
    if rel.startswith("/"):
        raise UnsafePath(f"path must be relative to the workspace; got {rel!r}")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise UnsafePath(f"path must stay inside the workspace; got {rel!r}")
    return parts


def read_file(dir_fd: int, rel: str, limit: int) -> bytes:
    """The bytes of the regular file ``rel`` under ``dir_fd``: no component may be a link; at most ``limit`` bytes
    (a larger file is an error). The fd that was checked is the fd that is read."""
    parts = _parts(rel)
    fds: list[int] = []
    try:
        current = dir_fd
        for name in parts[:-1]:
            try:
                current = os.open(name, _DIR_FLAGS, dir_fd=current)
            except OSError as exc:
                raise UnsafePath(f"{rel}: {name!r} is not a folder of the workspace ({exc.strerror})") from None
            fds.append(current)
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=current)
        except OSError as exc:
            why = "a link" if exc.errno == 40 else exc.strerror
            raise UnsafePath(f"{rel}: cannot open ({why})") from None
        fds.append(fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"{rel}: not a regular file")
        if info.st_size > limit:
            raise UnsafePath(f"{rel}: {info.st_size} bytes is over the {limit} byte limit")
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise UnsafePath(f"{rel}: grew past the {limit} byte limit while it was read")
        return bytes(data)
    finally:
        for fd in fds:
            os.close(fd)


REMOVE_OPEN_DEPTH = 16        # folders held open at once while removing; deeper ones are moved up first
REMOVE_MAX_ENTRIES = 200_000  # entries one removal deletes at most (it raises past that, the rest is left)
TMP_PREFIX = ".pyrua-tmp-"    # temporary names of write_file: short whatever the file's name (never copied)


def remove_entry(dir_fd: int, name: str, max_entries: int = REMOVE_MAX_ENTRIES) -> None:
    """Remove the entry ``name`` whatever it is (a folder with everything in it), never following a link and
    without recursion: at most ``REMOVE_OPEN_DEPTH`` folders are open at once, and a folder deeper than that is
    first renamed into ``dir_fd`` under a temporary name, then removed in its turn, so a folder of any depth is
    removed. Raises ``OSError`` (``E2BIG``) after ``max_entries`` entries (a hostile tree of millions of files
    is not the host's to delete entry by entry)."""
    pending, count = [name], 0
    while pending:
        top = pending.pop()
        try:
            info = os.stat(top, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(top, dir_fd=dir_fd)
            continue
        stack = [(dir_fd, top, os.open(top, _DIR_FLAGS, dir_fd=dir_fd), [])]   # (parent fd, name, own fd, batch)
        try:
            while stack:
                parent, own_name, fd, batch = stack[-1]
                if not batch:
                    batch.extend(_entries(fd))
                    if not batch:   # empty: remove it and go back up
                        stack.pop()
                        os.close(fd)
                        os.rmdir(own_name, dir_fd=parent)
                        continue
                entry_name, is_dir = batch.pop()
                count += 1
                if count > max_entries:
                    raise OSError(errno.E2BIG, f"more than {max_entries} entries to remove under {name!r}")
                if not is_dir:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry_name, dir_fd=fd)
                elif len(stack) < REMOVE_OPEN_DEPTH:
                    with contextlib.suppress(FileNotFoundError):
                        stack.append((fd, entry_name, os.open(entry_name, _DIR_FLAGS, dir_fd=fd), []))
                else:
                    moved = f"{TMP_PREFIX}{secrets.token_hex(8)}"
                    os.rename(entry_name, moved, src_dir_fd=fd, dst_dir_fd=dir_fd)
                    pending.append(moved)
        finally:
            for _parent, _name, fd, _batch in stack:
                os.close(fd)


def _entries(dir_fd: int, batch: int = 1024) -> list[tuple[str, bool]]:
    """Up to ``batch`` entries of the folder ``dir_fd`` as (name, is a folder, links not followed); [] when it
    is empty."""
    found = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            try:
                found.append((entry.name, entry.is_dir(follow_symlinks=False)))
            except OSError:
                found.append((entry.name, False))
            if len(found) >= batch:
                break
    return found


def write_file(dir_fd: int, name: str, data: bytes, *, owner: int | None = None, replace: bool = True) -> bool:
    """Write ``data`` as the regular file ``name`` (one component) in ``dir_fd``, atomically (a temporary file
    created with ``O_EXCL`` then renamed over the name). Whatever was there (a link, a FIFO, a folder) is
    replaced when ``replace``; otherwise a non-regular entry is left alone and False returned. ``owner``: uid/gid
    to give the file (the sandbox user, when the host is root)."""
    if "/" in name or name in ("", ".", ".."):
        raise UnsafePath(f"not a file name: {name!r}")
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if not replace:
            return False
        remove_entry(dir_fd, name)
    tmp = f"{TMP_PREFIX}{secrets.token_hex(8)}"   # (a name of its own: never one a cell made, never too long)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if owner is not None:
                os.fchown(fd, owner, owner)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return True


@dataclasses.dataclass
class CopyReport:
    """What one :func:`copy_tree` did: files copied, unchanged, entries skipped (links, FIFOs, sockets, devices,
    over a limit) with a few example names, and bytes copied."""

    copied: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    bytes: int = 0
    examples: list[str] = dataclasses.field(default_factory=list)

    def skip(self, rel: str, why: str) -> None:
        self.skipped += 1
        if len(self.examples) < 5:
            self.examples.append(f"{rel} ({why})")


@dataclasses.dataclass
class CopyLimits:
    """Bounds of one copy: ``entries`` (files and folders), ``bytes`` in all, ``depth`` of folders, and
    ``reserve_bytes``: free space the destination's file system keeps after every file copied (a file that
    would leave less is skipped), so a full workspace never takes the room the host's own records need."""

    entries: int = 10_000
    bytes: int = 512 * 2**20
    depth: int = 32
    reserve_bytes: int = 0


def free_bytes(dir_fd: int) -> int:
    """Bytes an unprivileged writer may still add to the file system of ``dir_fd``."""
    info = os.fstatvfs(dir_fd)
    return info.f_bavail * info.f_frsize


def copy_tree(src_fd: int, dst_fd: int, *, protect: Iterable[str] = (), delete_extra: bool = False,
              owner: int | None = None, limits: CopyLimits | None = None,
              seen: dict[str, tuple] | None = None, written: dict[str, tuple] | None = None) -> CopyReport:
    """Make ``dst_fd``'s tree hold ``src_fd``'s regular files and folders (links and special files are skipped,
    never followed). ``protect``: top-level names of ``dst`` that are never touched (the host's own records).
    ``delete_extra``: remove what ``dst`` has and ``src`` does not. ``owner``: uid/gid for what is created.
    ``seen``: a cache {relative path: file identity} kept between calls, so unchanged files are not copied
    again. ``written``: filled with {relative path: identity in ``dst``} of every file written (the ``seen`` of a
    copy the other way, which then knows those files unchanged)."""
    copier = _Copier(frozenset(protect), delete_extra, owner, limits or CopyLimits(),
                     seen if seen is not None else {}, written=written)
    copier.copy_dir(src_fd, dst_fd, "", 0)
    return copier.report


class _Copier:
    """One :func:`copy_tree` run: its options, its running totals and its report."""

    def __init__(self, protected: frozenset[str], delete_extra: bool, owner: int | None, limits: CopyLimits,
                 cache: dict[str, tuple], *, written: dict[str, tuple] | None = None) -> None:
        self.protected, self.delete_extra, self.owner, self.limits = protected, delete_extra, owner, limits
        self.cache = cache
        self.written = written
        self.report = CopyReport()
        self.entries = 0
        self.bytes = 0
        self.full = False   # the entry limit was reached: the rest of the source was not listed

    def copy_dir(self, src_fd: int, dst_fd: int, prefix: str, depth: int) -> None:
        if self.full:
            return
        present: set[str] = set()
        listing = []
        with os.scandir(src_fd) as entries:   # (read only as far as the entry limit: a folder of a million files
            for entry in entries:             # costs no more than one of ten thousand)
                if (not prefix and entry.name in self.protected) or entry.name.startswith(TMP_PREFIX):
                    continue
                if self.entries >= self.limits.entries:
                    self.full = True
                    self.report.skip(f"{prefix}{entry.name}", f"over {self.limits.entries} entries: the rest of "
                                                                "the workspace was not looked at")
                    break
                self.entries += 1
                listing.append(entry)
        for entry in listing:
            name, rel = entry.name, f"{prefix}{entry.name}"
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                present.add(name)
                if depth + 1 > self.limits.depth:
                    self.report.skip(rel, f"deeper than {self.limits.depth} folders")
                    continue
                self.copy_subdir(src_fd, dst_fd, name, rel, depth)
            elif stat.S_ISREG(info.st_mode):
                present.add(name)
                self.copy_file(src_fd, dst_fd, name, rel)
            else:
                self.report.skip(rel, "a link" if stat.S_ISLNK(info.st_mode) else "not a regular file")
        if self.delete_extra and not self.full:   # (what was not looked at is not known to be gone)
            for entry in list(os.scandir(dst_fd)):
                if entry.name in present or (not prefix and entry.name in self.protected):
                    continue
                remove_entry(dst_fd, entry.name)
                self.cache.pop(f"{prefix}{entry.name}", None)
                self.report.removed += 1

    def open_source(self, src_fd: int, name: str, rel: str, flags: int) -> int | None:
        """An fd for the entry ``name`` of the source (never through a link), or None (skipped, reported)."""
        try:
            return os.open(name, flags, dir_fd=src_fd)
        except OSError as exc:
            self.report.skip(rel, exc.strerror or "cannot open")
            return None

    def copy_subdir(self, src_fd: int, dst_fd: int, name: str, rel: str, depth: int) -> None:
        sub_src = self.open_source(src_fd, name, rel, _DIR_FLAGS)
        if sub_src is None:
            return
        try:
            if not _is_dir(dst_fd, name):
                remove_entry(dst_fd, name)
                os.mkdir(name, 0o755, dir_fd=dst_fd)
                if self.owner is not None:
                    os.chown(name, self.owner, self.owner, dir_fd=dst_fd, follow_symlinks=False)
            sub_dst = os.open(name, _DIR_FLAGS, dir_fd=dst_fd)
            try:
                self.copy_dir(sub_src, sub_dst, f"{rel}/", depth + 1)
            finally:
                os.close(sub_dst)
        finally:
            os.close(sub_src)

    def copy_file(self, src_fd: int, dst_fd: int, name: str, rel: str) -> None:
        fd = self.open_source(src_fd, name, rel, _READ_FLAGS)
        if fd is None:
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self.report.skip(rel, "not a regular file")
                return
            identity = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            if self.cache.get(rel) == identity and _is_regular(dst_fd, name):
                self.report.unchanged += 1
                return
            data = bytearray()
            while chunk := os.read(fd, _CHUNK):
                data += chunk
                if self.bytes + len(data) > self.limits.bytes:
                    self.report.skip(rel, f"over the {self.limits.bytes} byte copy limit")
                    return
        finally:
            os.close(fd)
        if self.limits.reserve_bytes and free_bytes(dst_fd) - len(data) < self.limits.reserve_bytes:
            self.report.skip(rel, f"would leave less than {self.limits.reserve_bytes // 2**20} MiB free for the "
                                  "run's records")
            return
        try:
            write_file(dst_fd, name, bytes(data), owner=self.owner)
        except OSError as exc:   # (this one file: the copy goes on)
            self.report.skip(rel, exc.strerror or str(exc))
            return
        self.bytes += len(data)
        self.report.bytes += len(data)
        self.report.copied += 1
        self.cache[rel] = identity
        if self.written is not None:
            with contextlib.suppress(OSError):
                done = os.stat(name, dir_fd=dst_fd, follow_symlinks=False)
                self.written[rel] = (done.st_ino, done.st_size, done.st_mtime_ns, done.st_ctime_ns)


def _is_dir(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _is_regular(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
