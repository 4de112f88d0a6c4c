"""Ending processes: children we started, by their own process group (their PID), escalating signals; our own,
without the interpreter's teardown; and telling an interrupt from an error on the way.

Every child that pyrua_ros starts (driver nodes, the launch graph's nodes, test nodes) is the leader of its own
process group (``start_new_session=True``), so it and only its descendants are ended, by PID, never by name.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from typing import NoReturn

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


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` once its main function closed everything it owns, as a normal exit does
    (its other non-daemon threads joined, the ``atexit`` handlers run: logging, the CPU meter, coverage; the
    standard streams flushed), but without the interpreter's teardown of the objects still alive. For a sim node
    or an evaluation worker that teardown frees a LIBERO scene, its GL context and the ROS client libraries one
    object at a time: about 1 s of a stopping driver (several under load) that nobody waits for usefully and
    that writes nothing."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def interrupt_in(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt behind ``exc``: itself, one in its chain of causes and contexts, or one in an exception
    group on the way; None when there is none. Compiled code that a Ctrl-C interrupts may raise an error of its own
    from it (numba, inside robosuite's controller: ``SystemError: CPUDispatcher(...) returned a result with an
    exception set``), and task groups gather it into an exception group: that error is the interrupt, not a fault."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return e
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        stack.extend((e.__cause__, e.__context__))
    return None
