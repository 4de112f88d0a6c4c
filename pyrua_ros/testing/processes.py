"""Process trees from /proc, for tests that check a launch leaves no process behind."""

from __future__ import annotations

import os
import pathlib
import signal
import time


def descendants(pid: int) -> set[int]:
    """PIDs of every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pids) -> set[int]:
    """The PIDs of ``pids`` that still run (zombies count as ended)."""
    out = set()
    for pid in pids:
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            out.add(pid)
    return out


def age_s(pid: int) -> float:
    """Seconds since ``pid`` started (from /proc; NaN once it ended)."""
    import math
    import os

    try:
        start_ticks = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(pathlib.Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return math.nan
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def cmdline(pid: int) -> str:
    """The command line of ``pid``, arguments separated by spaces ('' once it ended)."""
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def dump_node_stacks(pids, settle_s: float = 2.0) -> list[int]:
    """Ask every pyrua_ros node among ``pids`` to print its threads' stacks (SIGUSR1: see
    :func:`pyrua_ros.driver.rosenv.dump_stacks_on_sigusr1`), so a test that gives up on a hung launch shows where
    each node waits. Only node processes are signalled: SIGUSR1 ends a process that did not ask for it. Returns the
    PIDs signalled, after ``settle_s`` for the dumps to reach the output."""
    signalled = []
    for pid in alive(pids):
        if "pyrua_ros.nodes." in cmdline(pid):
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                continue
            signalled.append(pid)
    if signalled:
        time.sleep(settle_s)
    return signalled
