"""Ending child processes we started: by their own process group (their PID), escalating signals.

Every child that pyrua_ros starts (driver nodes, the launch graph's nodes, test nodes) is the leader of its own
process group (``start_new_session=True``), so it and only its descendants are ended, by PID, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable

SIGINT_GRACE_S = 10.0
SIGTERM_GRACE_S = 5.0


def stop_process_groups(procs: Iterable[subprocess.Popen], *, sigint_grace_s: float = SIGINT_GRACE_S,
                        sigterm_grace_s: float = SIGTERM_GRACE_S) -> None:
    """SIGINT (a clean ROS shutdown), then SIGTERM, then SIGKILL to the group of each process still alive,
    waiting up to the grace period after each signal for all of them together."""
    procs = list(procs)
    for sig, grace in ((signal.SIGINT, sigint_grace_s), (signal.SIGTERM, sigterm_grace_s),
                       (signal.SIGKILL, sigterm_grace_s)):
        alive = [p for p in procs if p.poll() is None]
        if not alive:
            return
        for proc in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace
        for proc in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
