"""Start, spin and stop one node process: the body every driver executable shares.

Written for every supported distro: ``rclpy_session`` rather than ``with rclpy.init(...)``, which Jazzy's rclpy
(7.1.6) does not support. Ctrl-C and an external shutdown are a normal exit (status 0), even when
they interrupt a callback, and even when compiled code in that callback turned the KeyboardInterrupt into an error
of its own; the node is closed (``close()`` frees its model) and destroyed before the context shuts down.
Only the first interrupt is raised; every later one is dropped: a terminal's Ctrl-C reaches a node twice under
``ros2 launch`` (once from the terminal, once forwarded by launch), and the second must not break the teardown with
a traceback, wherever it lands (:class:`FirstInterruptOnly`).

The node is built with Python's cyclic garbage collector paused (:func:`collector_paused`): what a node makes at its
start (its modules: rclpy, robosuite, LIBERO; its scene) lives as long as the node, so the collections its
allocations would trigger meanwhile scan it for nothing. A LIBERO sim node's start (until "ready") takes 0.15-0.3
CPU s less, of about 3 (docs/MEASURED.md).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
from collections.abc import Callable

from pyrua_ros import cputime
from pyrua_ros.bringup.process import interrupt_in
from pyrua_ros.wire.rosenv import node_preamble, rclpy_session


class FirstInterruptOnly:
    """Python's SIGINT handler while a node lives: the first interrupt raises KeyboardInterrupt, later ones are
    dropped.

    Installed before ``rclpy.init``, so rclpy's own handler (which shuts the context down) chains to it; setting a
    handler after init would replace rclpy's. Dropping in the handler leaves no window: ignoring SIGINT in the
    teardown's ``finally`` left one between the first interrupt being raised and that line (CI: a second Ctrl-C
    landed there, the node printed a KeyboardInterrupt traceback and exited -2).
    """

    def __init__(self) -> None:
        self.interrupted = False

    def __call__(self, signum, frame) -> None:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off within the block, and on again after it (if it was on before)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def spin_node(make_node: Callable[[], object], args: list[str] | None = None) -> int:
    """Run ``make_node()`` (called inside :func:`~pyrua_ros.wire.rosenv.rclpy_session`) in a
    SingleThreadedExecutor until shutdown."""
    node_preamble()
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    cputime.mark("node: rclpy imported")
    # kept after the node ends too: the process is exiting, and a late Ctrl-C must not break that either
    signal.signal(signal.SIGINT, FirstInterruptOnly())
    with rclpy_session(sys.argv if args is None else args):
        node = executor = None
        try:
            with collector_paused():
                node = make_node()
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        except Exception as exc:
            if rclpy.ok() and interrupt_in(exc) is None:
                raise
            # Ctrl-C shut the context down while a callback was publishing (a realtime driver is almost always
            # inside its control step), or interrupted compiled code that wrapped the KeyboardInterrupt in its own
            # error (numba, inside robosuite's OSC step, raises SystemError "returned a result with an exception
            # set" from it): the callback's error is that Ctrl-C, a normal exit.
        finally:
            cputime.mark("node: stopping")
            if executor is not None:
                executor.shutdown()
            if node is not None:
                close = getattr(node, "close", None)
                if close is not None:
                    close()
                node.destroy_node()
    return 0
