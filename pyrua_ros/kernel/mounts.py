"""The sandbox's tmpfs mounts, beyond what bubblewrap can set: the number of inodes, and one workspace shared by
several sandboxes.

bubblewrap 0.8 mounts a tmpfs with ``size`` and ``mode`` only, and a tmpfs without ``nr_inodes`` takes as many
files as half the machine's memory pages: a million empty files grew the host's kernel memory (inodes and
dentries, outside every rlimit) by 1.26 GiB. :func:`limit_inodes` sets ``nr_inodes`` on a running sandbox's
mount from outside, with the new mount API (``fspick`` on ``/proc/PID/root/PATH``, then ``fsconfig``
reconfigure), which needs CAP_SYS_ADMIN over the mount: root only. The host calls it after the kernel reported
``ready`` (bubblewrap's mounts are all in place) and before any cell or file reaches the sandbox.

**A shared workspace** (root only). :func:`workspace_tmpfs` makes the episode's workspace a detached tmpfs
(``fsopen``/``fsconfig``/``fsmount``: size, ``nr_inodes``, mode and owner set at creation), mounted nowhere in
this machine's mount namespace; this process holds it by a file descriptor (:func:`open_root` reads it). Every
sandbox that shares it (the cell kernel, a coding-agent CLI) is started through :func:`attach_argv`: a small
single-threaded program that makes a private mount namespace of its own, attaches a clone of the tmpfs
(``open_tree(OPEN_TREE_CLONE)`` + ``move_mount``) over the workspace's path there, and executes bubblewrap, which
binds that path (``--bind``). So the kernel and the CLI write the same files, a restarted kernel finds its
workspace as it was, and the tmpfs is freed when the last sandbox and this process let go of it.
"""

from __future__ import annotations

import ctypes
import os

SYS_FSPICK, SYS_FSCONFIG = 433, 431        # the same number on x86_64 and aarch64
SYS_FSOPEN, SYS_FSMOUNT = 430, 432
FSPICK_CLOEXEC, FSPICK_NO_AUTOMOUNT = 0x1, 0x4
FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE, FSCONFIG_CMD_RECONFIGURE = 1, 6, 7
AT_FDCWD = -100

# Run as ``python -I -S -c ATTACH <mount fd> <path> <argv...>`` (single-threaded: a threaded process cannot
# enter a mount namespace of its own): attach a clone of the detached mount at <path> in a private mount
# namespace, then execute argv (bubblewrap). Numbers: unshare CLONE_NEWNS, MS_REC|MS_PRIVATE, open_tree 428
# (OPEN_TREE_CLONE|AT_EMPTY_PATH|OPEN_TREE_CLOEXEC), move_mount 429 (MOVE_MOUNT_F_EMPTY_PATH).
ATTACH = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def check(value, what):
    if value < 0:
        err = ctypes.get_errno()
        sys.exit(f"pyrua attach: {what}: {os.strerror(err)}")
    return value
fd, path = int(sys.argv[1]), sys.argv[2]
check(libc.unshare(0x20000), "unshare(CLONE_NEWNS)")
check(libc.mount(None, b"/", None, 0x4000 | 0x40000, None), "mount --make-rprivate /")
clone = check(libc.syscall(428, fd, b"", 0x1 | 0x1000 | 0x80000), "open_tree")
check(libc.syscall(429, clone, b"", -100, path.encode(), 0x4), "move_mount")
os.close(clone)
os.close(fd)
os.execv(sys.argv[3], sys.argv[3:])
"""


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def workspace_tmpfs(size_bytes: int, inodes: int, uid: int, mode: int = 0o700) -> int:
    """A detached tmpfs of ``size_bytes`` holding at most ``inodes`` files and folders, its root owned by
    ``uid``:``uid`` with ``mode``; returns the mount's file descriptor (close-on-exec; pass it to the sandboxes
    with :func:`attach_argv`). Root only: OSError where the Linux kernel refuses."""
    libc = _libc()

    def call(*args) -> int:
        value = libc.syscall(*args)
        if value < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"workspace tmpfs: {os.strerror(err)}")
        return value

    fs = call(ctypes.c_long(SYS_FSOPEN), b"tmpfs", ctypes.c_uint(1))   # FSOPEN_CLOEXEC
    try:
        for key, value in (("size", int(size_bytes)), ("nr_inodes", int(inodes)), ("mode", f"{mode:o}"),
                           ("uid", int(uid)), ("gid", int(uid))):
            call(ctypes.c_long(SYS_FSCONFIG), ctypes.c_int(fs), ctypes.c_uint(FSCONFIG_SET_STRING),
                 key.encode(), str(value).encode(), ctypes.c_int(0))
        call(ctypes.c_long(SYS_FSCONFIG), ctypes.c_int(fs), ctypes.c_uint(FSCONFIG_CMD_CREATE), None, None,
             ctypes.c_int(0))
        return call(ctypes.c_long(SYS_FSMOUNT), ctypes.c_int(fs), ctypes.c_uint(1), ctypes.c_uint(0))
    finally:
        os.close(fs)


def open_root(mount_fd: int) -> int:
    """A directory fd (``O_NOFOLLOW``) on the root of the detached mount ``mount_fd``."""
    return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=mount_fd)


def attach_argv(python: str, mount_fd: int, path: str) -> list[str]:
    """The prefix that starts a command (bubblewrap's argv follows, its executable an absolute path) with the
    detached mount ``mount_fd`` attached at ``path`` in a mount namespace of its own. The caller passes
    ``mount_fd`` to the child (``pass_fds``); ``path`` must be a folder on this machine."""
    return [python, "-I", "-S", "-c", ATTACH, str(mount_fd), path]


def limit_inodes(root: str, path: str, inodes: int) -> None:
    """Set ``nr_inodes=inodes`` on the tmpfs mounted at ``path`` as seen from ``root`` (``/proc/PID/root`` of a
    sandbox process). Raises OSError when the Linux kernel refuses (no new mount API, not root, not a mount
    point, or more files there already), and ValueError unless ``path`` then reports exactly that many inodes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    target = f"{root.rstrip('/')}/{path.lstrip('/')}"
    fd = libc.syscall(ctypes.c_long(SYS_FSPICK), ctypes.c_int(AT_FDCWD), target.encode(),
                      ctypes.c_uint(FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"fspick {path}: {os.strerror(err)}")
    try:
        for cmd, key, value in ((FSCONFIG_SET_STRING, b"nr_inodes", str(int(inodes)).encode()),
                                (FSCONFIG_CMD_RECONFIGURE, None, None)):
            if libc.syscall(ctypes.c_long(SYS_FSCONFIG), ctypes.c_int(fd), ctypes.c_uint(cmd), key, value,
                            ctypes.c_int(0)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"fsconfig {path} nr_inodes={inodes}: {os.strerror(err)}")
    finally:
        os.close(fd)
    found = os.statvfs(target).f_files
    if found != inodes:
        raise ValueError(f"{path} reports {found} inodes after nr_inodes={inodes} was set")
