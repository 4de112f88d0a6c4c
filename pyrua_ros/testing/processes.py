"""Process trees from /proc, for tests that check a launch leaves no process behind."""

from __future__ import annotations

import math
import os
import pathlib
import signal
import time

# PIDs are recycled within one suite run (pid_max is 32768 on these machines and every thread takes one), so a PID
# recorded when a test started a graph may name another test's process a minute later. Every PID that
# descendants() reports is remembered with its start time (clock ticks after boot), and alive() counts a
# remembered PID only while the same process holds it.
_STARTS: dict[int, int] = {}


def _stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state, ppid, ..., starttime at index 19), or None.

    One open and one read, no buffered file object: tests poll process trees every few tens of milliseconds for
    minutes, and a scan of /proc reads this for every process of the machine."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = data.rpartition(b")")[2].decode(errors="replace").split()
    return fields if len(fields) > 19 else None


def descendants(pid: int) -> set[int]:
    """PIDs of every live descendant of ``pid`` (from /proc), each remembered with its start time."""
    children: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat(name)
        if fields is None:
            continue
        children.setdefault(int(fields[1]), []).append((int(name), int(fields[19])))
    out, todo = set(), [pid]
    while todo:
        for child, start in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                _STARTS[child] = start
                todo.append(child)
    return out


def alive(pids) -> set[int]:
    """The PIDs of ``pids`` that still run (zombies count as ended; so does a PID that descendants() saw and that
    another process holds now)."""
    out = set()
    for pid in pids:
        fields = _stat(pid)
        if fields is None or fields[0] == "Z":
            continue
        if pid in _STARTS and int(fields[19]) != _STARTS[pid]:
            continue
        out.add(pid)
    return out


def age_s(pid: int) -> float:
    """Seconds since ``pid`` started (from /proc; NaN once it ended)."""
    fields = _stat(pid)
    if fields is None:
        return math.nan
    try:
        start_ticks = int(fields[19])
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


def naming(text: str) -> set[int]:
    """PIDs of the live processes whose command line holds ``text`` (a run directory, say): what a process tree
    taken earlier misses, such as a process started after it or one whose parent died."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit() and text in cmdline(int(name)):
            state = _stat(name)
            if state is not None and state[0] != "Z":
                found.add(int(name))
    return found


def dump_node_stacks(pids, settle_s: float = 2.0) -> list[int]:
    """Ask every pyrua_ros node among ``pids`` to print its threads' stacks (SIGUSR1: see
    :func:`pyrua_ros.wire.rosenv.dump_stacks_when_stuck_or_crashed`), so a test that gives up on a hung launch shows
    where each node waits. Only node processes are signalled: SIGUSR1 ends a process that did not ask for it. Returns
    the PIDs signalled, after ``settle_s`` for the dumps to reach the output."""
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


AGENT_NODE = "pyrua_ros.nodes.agent_node"


def agent_running_its_kernel(root: int, run_dir: pathlib.Path) -> int | None:
    """PID of the agent node under ``root`` once its cell kernel runs (the bwrap sandbox or the isolated
    ``-I -B -S`` interpreter among the agent's descendants), else None. Only once ``run_dir`` has its first
    result.json: before that, a bwrap under the agent is the sandbox's own startup probe, not the kernel."""
    if not (run_dir / "result.json").exists():
        return None
    agent = next((p for p in descendants(root) if AGENT_NODE in cmdline(p)), None)
    if agent is None:
        return None
    kernel = next((p for p in descendants(agent) if " -I -B -S " in cmdline(p) or "bwrap" in cmdline(p)), None)
    return agent if kernel is not None else None


def press_ctrl_c(root: int, agent: int, presses: int, gap_s: float = 0.3) -> set[int]:
    """Ctrl-C ``presses`` times, as a terminal sends it: SIGINT to every process group of the graph under ``root``
    except the sessions the agent started itself (its kernel's bwrap and interpreter run in sessions of their own,
    which no terminal reaches; the agent must stop them). Returns the graph's PIDs, to check that all of them end."""
    tree = descendants(root) | {root}
    groups = set()
    for pid in alive(tree - descendants(agent)):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            continue
    for _ in range(presses):
        for group in groups:
            try:
                os.killpg(group, signal.SIGINT)
            except ProcessLookupError:
                pass
        time.sleep(gap_s)
    return tree
