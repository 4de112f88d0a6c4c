"""The CPU of a benchmark's whole process tree: orphans re-parented to the benchmark (a child subreaper) and reaped
there count in its ``RUSAGE_CHILDREN``; the children of Ray's raylet, which ignores SIGCHLD, count nowhere and are
sampled from ``/proc`` instead (:class:`UnaccountedChildren`)."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def become_subreaper() -> None:
    """Orphaned descendants of this process's children become this process's children (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_all(timeout_s: float = 30.0) -> tuple[bool, set[int]]:
    """Wait for every child and orphaned descendant: whether all ended within the timeout, and the pids reaped."""
    deadline = time.monotonic() + timeout_s
    reaped: set[int] = set()
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True, reaped
        if pid == 0:
            time.sleep(0.05)
        else:
            reaped.add(pid)
    return False, reaped


class PeriodicSampler:
    """Calls ``_sample()`` every ``period_s`` [s] in a daemon thread, from ``start()`` (which returns the sampler)
    until ``stop()``."""

    def __init__(self, period_s: float, name: str):
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def _sample(self) -> None:
        raise NotImplementedError


class UnaccountedChildren(PeriodicSampler):
    """The CPU of processes whose CPU no ``RUSAGE_CHILDREN`` of ours ever gets: everything below a descendant that
    ignores SIGCHLD (Ray's raylet does: the kernel reaps its children without adding their CPU to any parent).
    Each such process's own CPU is sampled from ``/proc`` every ``period_s`` while running; what one spends after
    its last sample is missed. ``total_s()`` after ``stop()``."""

    def __init__(self, period_s: float = 0.2):
        super().__init__(period_s, "unaccounted-children")
        self._last: dict[int, float] = {}
        self._parents: dict[int, int] = {}

    def total_s(self, reaped: set[int] = frozenset()) -> float:
        """The sampled CPU [s], without the processes in ``reaped`` (:func:`reap_all`) and those below them: an
        orphan that outlived the raylet and was reaped by this subreaper counts in ``RUSAGE_CHILDREN`` already,
        with the CPU of the children it reaped."""
        def counted_by_reaping(pid: int | None) -> bool:
            for _ in range(64):
                if pid is None:
                    return False
                if pid in reaped:
                    return True
                pid = self._parents.get(pid)
            return False

        return sum(cpu for pid, cpu in self._last.items() if not counted_by_reaping(pid))

    def _sample(self) -> None:
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        ignoring: set[int] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                with open(f"/proc/{entry}/status") as f:
                    ignored = int(f.read().split("SigIgn:")[1].split()[0], 16)
            except (OSError, IndexError, ValueError):
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            pid = int(entry)
            parents[pid] = int(fields[1])
            cpu[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS   # its own utime + stime
            if ignored & (1 << (signal.SIGCHLD - 1)):
                ignoring.add(pid)
        me = os.getpid()

        def below_an_ignoring_one_of_ours(pid: int) -> bool:
            under = False
            for _ in range(64):
                pid = parents.get(pid, 0)
                if pid == me:
                    return under
                if pid <= 1:
                    return False
                under = under or pid in ignoring
            return False

        for pid, parent in parents.items():
            if below_an_ignoring_one_of_ours(pid):
                self._last[pid], self._parents[pid] = cpu[pid], parent
