"""The resident memory of an evaluation's local worker processes over a run, sampled from ``/proc``.

A worker that keeps something of every episode it ran grows without bound over a long evaluation; one that frees
each episode holds about one episode's memory however many it runs. :class:`WorkerMemory` samples the RSS of every
``python -m pyrua_ros.evaluation.worker`` process of this machine every ``period_s`` while it runs (start it just
before the evaluation, which must be the only one running); ``summary()`` gives, in MB, the RSS once a quarter of a
worker's sampled life had passed, its last sample and its largest, the worst worker's of each.
"""

from __future__ import annotations

import os

from process_tree import PeriodicSampler

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
WORKER_MODULE = b"pyrua_ros.evaluation.worker"


class WorkerMemory(PeriodicSampler):
    def __init__(self, period_s: float = 0.5):
        super().__init__(period_s, "worker-memory")
        self.series: dict[int, list[float]] = {}   # pid -> RSS samples [MB]

    def _sample(self) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if WORKER_MODULE not in f.read():
                        continue
                with open(f"/proc/{entry}/statm") as f:
                    rss = int(f.read().split()[1]) * PAGE_MB
            except (OSError, IndexError, ValueError):   # gone meanwhile
                continue
            self.series.setdefault(int(entry), []).append(rss)

    def summary(self) -> dict[str, float] | None:
        """``rss_mb_at_quarter``, ``rss_mb_last``, ``rss_mb_max`` (the largest over the workers), or None when no
        worker was seen for four samples."""
        lives = [s for s in self.series.values() if len(s) >= 4]
        if not lives:
            return None
        return {"rss_mb_at_quarter": round(max(s[len(s) // 4] for s in lives)),
                "rss_mb_last": round(max(s[-1] for s in lives)), "rss_mb_max": round(max(max(s) for s in lives))}
