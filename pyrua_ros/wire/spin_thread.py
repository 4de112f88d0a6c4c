"""Spinning a client's executor in a background thread without letting one bad callback stop it.

``executor.spin()`` returns for good when a callback raises, and a client whose spin thread ended waits out every
deadline afterwards with nothing on the wire to show why. A test client or a probe creates and destroys
subscriptions and clients while the executor waits on them, and under load rclpy can then raise from inside
``spin_once`` (a handle destroyed between wait and take). :func:`spin_until_shutdown` reports such an error on
stderr and keeps spinning until the executor or its context is shut down.
"""

from __future__ import annotations

import sys


def spin_until_shutdown(executor, context, *, name: str = "executor", period_s: float = 0.1) -> None:
    """Spin ``executor`` until it or ``context`` shuts down; a callback's exception is printed, not fatal."""
    from rclpy.executors import ExternalShutdownException, ShutdownException

    reported: set[str] = set()
    # the loop condition of rclpy's own Executor.spin (Jazzy and Kilted): spin_once swallows its ShutdownException
    while context.ok() and not getattr(executor, "_is_shutdown", False):
        try:
            executor.spin_once(timeout_sec=period_s)
        except (ExternalShutdownException, ShutdownException):
            return
        except Exception as exc:   # reported, and the thread lives on
            if not context.ok():
                return
            what = f"{type(exc).__name__}: {exc}"
            if what not in reported:   # once per distinct error: a recurring one must not flood the log
                reported.add(what)
                print(f"{name}: a callback failed and spinning goes on: {what}", file=sys.stderr, flush=True)
