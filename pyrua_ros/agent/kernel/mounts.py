"""Limits on the sandbox's tmpfs mounts that bubblewrap cannot set: the number of inodes.

bubblewrap 0.8 mounts a tmpfs with ``size`` and ``mode`` only, and a tmpfs without ``nr_inodes`` takes as many
files as half the machine's memory pages: a million empty files grew the host's kernel memory (inodes and
dentries, outside every rlimit) by 1.26 GiB. :func:`limit_inodes` sets ``nr_inodes`` on a running sandbox's
mount from outside, with the new mount API (``fspick`` on ``/proc/PID/root/PATH``, then ``fsconfig``
reconfigure), which needs CAP_SYS_ADMIN over the mount: root only. The host calls it after the kernel reported
``ready`` (bubblewrap's mounts are all in place) and before any cell or file reaches the sandbox.
"""

from __future__ import annotations

import ctypes
import os

SYS_FSPICK, SYS_FSCONFIG = 433, 431        # the same number on x86_64 and aarch64
FSPICK_CLOEXEC, FSPICK_NO_AUTOMOUNT = 0x1, 0x4
FSCONFIG_SET_STRING, FSCONFIG_CMD_RECONFIGURE = 1, 7
AT_FDCWD = -100


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
