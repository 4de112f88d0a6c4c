"""Interrupts as one outcome: the first SIGINT, SIGTERM or SIGHUP raises KeyboardInterrupt, later ones are ignored.

A terminal's Ctrl-C reaches every process group of a graph, ``timeout -s INT`` signals a process and then its group,
``ros2 launch`` escalates to SIGTERM after 5 s, and users press Ctrl-C twice: one process may see two or three
signals within a millisecond. Only the first may raise: a second KeyboardInterrupt would land in the ``finally``
that writes the records, or between catching the first one and recording it, and leave a run directory that says
something other than what happened. Signals the process ignores (a job started with ``nohup`` or by a script's
``&``) stay ignored.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class FirstSignalInterrupts:
    """A signal handler: the first signal raises ``KeyboardInterrupt("signal N")``; once ``done`` (an interrupt
    was raised, or the caller began its shutdown) signals are reported on stderr as ignored while ``doing``."""

    def __init__(self, doing: str = "stopping"):
        self.doing = doing
        self.done = False       # later signals are ignored
        self.fired = False      # this handler raised the interrupt

    def __call__(self, signum, _frame) -> None:
        if self.done:
            print(f"signal {signum} while {self.doing}: ignored", file=sys.stderr, flush=True)
            return
        self.done = self.fired = True
        raise KeyboardInterrupt(f"signal {signum}")

    @contextlib.contextmanager
    def installed(self, signals=SIGNALS) -> Iterator[FirstSignalInterrupts]:
        """Handle ``signals`` (those not ignored) inside the block, in the main thread (elsewhere: nothing changes);
        the previous handlers come back after it. An outer handler of this kind learns of an interrupt raised
        here, so the interrupt that ended an inner scope is not followed by a second one in the outer scope."""
        old = {}
        with contextlib.suppress(ValueError):   # only the main thread may install handlers
            for s in signals:
                if signal.getsignal(s) is not signal.SIG_IGN:
                    old[s] = signal.signal(s, self)
        try:
            yield self
        finally:
            self.done = True
            for s, handler in old.items():
                if self.fired and isinstance(handler, FirstSignalInterrupts):
                    handler.done = handler.fired = True
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(s, handler)
