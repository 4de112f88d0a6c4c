"""A cgroup v2 of its own for each kernel process, where this machine delegates one: memory, CPU and process count
bounded by the Linux kernel for the sandbox as a whole (``memory.max``, ``cpu.max``, ``pids.max``).

``KernelCgroup.create(limits)`` makes ``pyrua-kernel-<pid>-<n>`` under this process's own cgroup v2 when that
cgroup's ``cgroup.subtree_control`` offers the ``memory``, ``cpu`` and ``pids`` controllers (or can be made to:
a delegated sub-tree, or root) and returns None otherwise; then the kernel is bounded by its rlimits only
(``isolation.isolate``: address space, CPU seconds, no fork), and :func:`fallback_reason` says why, for result.json.
The host moves the bubblewrap process, the sandbox's init and the kernel's Python into the group once they
exist (before the first cell) and removes the group when the kernel has ended.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path

CONTROLLERS = ("memory", "cpu", "pids")
CPU_PERIOD_US = 100_000
_serial = itertools.count(1)


def v2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (None when it is not)."""
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return Path(left.split()[4])
    except OSError:
        pass
    return None


def own_v2_group() -> Path | None:
    """This process's cgroup v2 folder (None without a cgroup v2 hierarchy)."""
    root = v2_root()
    if root is None:
        return None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return root / line[3:].lstrip("/")
    return None


def _enabled(group: Path) -> set[str]:
    try:
        return set((group / "cgroup.subtree_control").read_text().split())
    except OSError:
        return set()


def fallback_reason() -> str | None:
    """Why no kernel cgroup can be made here (one line), or None when one can."""
    group = own_v2_group()
    if group is None:
        return "no cgroup v2 hierarchy is mounted"
    missing = [c for c in CONTROLLERS if c not in _enabled(group)]
    if missing:
        with contextlib.suppress(OSError):
            (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
        missing = [c for c in CONTROLLERS if c not in _enabled(group)]
    if missing:
        return (f"this process's cgroup ({group}) does not delegate the {', '.join(missing)} controller(s) to "
                "groups below it")
    if not os.access(group, os.W_OK):
        return f"this process cannot create a group in {group}"
    return None


def rlimits_only(cpu_s: int, memory_bytes: int) -> str:
    """The line result.json states for a process bounded by rlimits alone (the kernel without a cgroup, a
    coding-agent CLI's sandbox)."""
    return (f"CPU and memory bounded by rlimits only (RLIMIT_CPU {int(cpu_s)} s, "
            f"RLIMIT_AS {int(memory_bytes) // 2**20} MiB)")


class KernelCgroup:
    """One kernel's cgroup: ``path``, and ``description`` (one line for result.json)."""

    def __init__(self, path: Path, memory_bytes: int, cpus: float, processes: int):
        self.path = path
        self.description = (f"cgroup v2 {path.name}: memory.max {memory_bytes // 2**20} MiB, cpu.max {cpus:g} "
                            f"CPU, pids.max {processes}")

    @classmethod
    def create(cls, memory_bytes: int, cpus: float, processes: int) -> KernelCgroup | None:
        """A new group with these limits, or None where this machine has no delegated cgroup v2."""
        if fallback_reason() is not None:
            return None
        group = own_v2_group()
        path = group / f"pyrua-kernel-{os.getpid()}-{next(_serial)}"
        try:
            path.mkdir()
            (path / "memory.max").write_text(str(int(memory_bytes)))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            (path / "cpu.max").write_text(f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            (path / "pids.max").write_text(str(int(processes)))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, memory_bytes, cpus, processes)

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the group."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """Remove the group once its processes have ended (a few tries: the last exit is asynchronous)."""

        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
