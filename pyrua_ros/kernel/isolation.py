"""The limits the kernel child puts on itself before any policy code runs (:func:`isolate`).

Called once by ``worker.main`` after the ``init`` frame, in the child: resource limits (RLIMIT_AS, RLIMIT_CPU for
the life of the process, RLIMIT_FSIZE with SIGXFSZ ignored so a too-big write fails with EFBIG, RLIMIT_NOFILE,
RLIMIT_CORE=0, RLIMIT_NPROC=0: no fork, no threads); Landlock where the Linux kernel has it (writes only in the
workspace, reads only in the Python installation, the system library dirs and the workspace, no TCP, no signals
or abstract sockets outside) with no_new_privs; every capability dropped (as root, RLIMIT_NPROC only binds
without CAP_SYS_RESOURCE/CAP_SYS_ADMIN); undumpable (no ptrace, no /proc/PID/mem or environ for a process of the
same uid); the seccomp allow-list of :mod:`.seccomp` without ``execve``. Each step reports what took effect and
never raises: the report goes to result.json.

The OS boundary around the child (namespaces, mounts, the filter with ``execve``) is :mod:`.sandbox`'s; this is
defence in depth inside it, and the only boundary with ``--unsafe-sandbox``.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import struct
import sys
from pathlib import Path
from typing import Any

from pyrua_ros.kernel import seccomp

_LL_FS_BITS = (13, 14, 15, 15, 16, 16, 16)  # number of filesystem access bits known at Landlock ABI 1..7
_LL_READ = (1 << 2) | (1 << 3)               # READ_FILE | READ_DIR
_LL_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)


def _landlock(workspace: str) -> str:
    """Confine this process with Landlock; returns a one-line report (never raises)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        if abi < 1:
            return f"unavailable ({os.strerror(ctypes.get_errno())})"
        fs = (1 << _LL_FS_BITS[min(abi, 7) - 1]) - 1
        size = 8 if abi < 4 else 16 if abi < 6 else 24  # ruleset attr grew with ABI 4 (net) and 6 (scopes)
        attr = struct.pack("=QQQ", fs, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)[:size]
        attr_buf = ctypes.create_string_buffer(attr, len(attr))
        ruleset = libc.syscall(444, attr_buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
        if ruleset < 0:
            return f"unavailable (create_ruleset: {os.strerror(ctypes.get_errno())})"
        reads = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", "/bin",
                 "/etc/ld.so.cache", "/etc/localtime", "/sys/devices/system/cpu", f"/proc/{os.getpid()}",
                 "/dev/urandom", "/dev/null"}
        package_root = str(Path(os.path.abspath(__file__)).parents[2])   # pyrua_ros is imported already: not granted
        reads |= {p for p in sys.path if p and p != package_root and os.path.isdir(p)}
        rules = [(os.path.realpath(p), _LL_READ) for p in reads] + [(workspace, fs)]
        for path, access in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            rights = access if os.path.isdir(path) else access & _LL_FILE_RIGHTS
            rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & fs, pfd), 12)
            libc.syscall(445, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0))
            os.close(pfd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return f"unavailable (no_new_privs: {os.strerror(ctypes.get_errno())})"
        if libc.syscall(446, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable (restrict_self: {os.strerror(ctypes.get_errno())})"
        os.close(ruleset)
        scope = ", no signals or abstract sockets outside" if abi >= 6 else ""
        return f"abi {abi}: writes in the workspace only, reads in python and system dirs, no tcp{scope}"
    except (OSError, AttributeError) as exc:
        return f"unavailable ({exc})"


def _drop_capabilities() -> str:
    with open("/proc/self/status") as fh:
        eff = next((line.split()[1] for line in fh if line.startswith("CapEff:")), "0")
    if int(eff, 16) == 0:
        return "none held"
    libc = ctypes.CDLL(None, use_errno=True)
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)
    data = ctypes.create_string_buffer(24)
    if libc.capset(header, data) != 0:
        return f"could not drop ({os.strerror(ctypes.get_errno())})"
    return "all dropped"


def isolate(workspace: str, limits: dict) -> dict:
    """Apply the resource limits, Landlock and the capability drop; returns what took effect."""

    report: dict[str, Any] = {}
    wanted = {
        "RLIMIT_AS": limits.get("memory_bytes"), "RLIMIT_CPU": limits.get("cpu_s"),
        "RLIMIT_FSIZE": limits.get("file_size_bytes"), "RLIMIT_NOFILE": limits.get("open_files"),
        "RLIMIT_CORE": 0, "RLIMIT_NPROC": limits.get("processes", 0),
    }
    for name, value in wanted.items():
        if value is None:
            continue
        try:
            resource.setrlimit(getattr(resource, name), (int(value), int(value)))
            report[name] = int(value)
        except (ValueError, OSError) as exc:
            report[name] = f"not set ({exc})"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    report["landlock"] = _landlock(workspace) if limits.get("landlock", True) else "disabled"
    report["capabilities"] = _drop_capabilities()
    report["dumpable"] = _undumpable()
    report["seccomp"] = _filter() if limits.get("seccomp", True) else "disabled"
    return report


def _undumpable() -> int | str:
    """PR_SET_DUMPABLE 0; returns the flag as the Linux kernel then reports it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(seccomp.PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"not set ({os.strerror(ctypes.get_errno())})"
    return libc.prctl(3, 0, 0, 0, 0)   # PR_GET_DUMPABLE


def _filter() -> str:
    try:
        seccomp.install(seccomp.program(exec_allowed=False))
    except (OSError, ValueError) as exc:
        return f"not installed ({exc})"
    return "allow-list without execve"
