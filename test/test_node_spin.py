"""Ctrl-C ends a driver node with status 0 wherever it lands, and a real fault still ends it with an error (a native
crash with the Python stack it came from).

The bug this pins: SIGINT that landed in robosuite's OSC step, inside numba-compiled code, came out of the realtime
control callback as ``SystemError: CPUDispatcher(...) returned a result with an exception set`` (the KeyboardInterrupt
as its cause) before the signal had shut the ROS context down, and the node exited with status 1 (seen in CI under
load: ``test_realtime_mode_holds_the_last_twist_then_stops``). The node here runs the real ``spin_node`` body every
driver executable shares, with a timer callback that wraps an interrupt as numba does. The interrupt comes from
``_thread.interrupt_main`` inside the callback: Python's SIGINT handling without rclpy's, so the ROS context is still
up when the error leaves the callback, as it was in CI (rclpy shuts it down from a thread of its own, late under load).
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

import pytest

from pyrua_ros.testing import NodeProcess

ROOT = pathlib.Path(__file__).resolve().parents[1]

NODE = '''
import _thread, gc, sys, time
from pyrua_ros.nodes.spin import spin_node

def make():
    from rclpy.node import Node

    print("collector while building:", gc.isenabled(), flush=True)

    class Busy(Node):
        def __init__(self):
            super().__init__("busy")
            self.ticks = 0
            self.create_timer(0.001, self.tick)

        def tick(self):
            self.ticks += 1
            if self.ticks == 3:
                print("collector while spinning:", gc.isenabled(), flush=True)
                print("ticking", flush=True)
            if sys.argv[1] == "fault" and self.ticks == 5:
                raise SystemError("a fault of the callback itself")
            try:
                if self.ticks == 5:
                    _thread.interrupt_main()   # Ctrl-C, as Python sees it; rclpy has not seen it
                t = time.monotonic()
                while time.monotonic() - t < 0.05:   # as compiled code busy in a control step
                    pass
            except KeyboardInterrupt as exc:
                raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from exc

    return Busy()

sys.exit(spin_node(make, []))
'''


def _run_to_its_end(mode: str) -> tuple[int | None, str]:
    """Start the node in ``mode``, let it end by itself (60 s at most, then it is stopped): its exit code and output."""
    node = NodeProcess([sys.executable, "-c", NODE, mode], cwd=ROOT)
    try:
        assert node.wait_for_output("ticking", 60), node.output()[-3000:]
        node.proc.wait(60)
    finally:
        rc = node.stop()
    return rc, node.output()


@pytest.fixture(scope="module")
def interrupted():
    """Exit code and output of one node run to its end in ``interrupt`` mode (two tests read it)."""
    return _run_to_its_end("interrupt")


def test_ctrl_c_inside_compiled_code_that_wraps_the_interrupt_is_a_clean_exit(interrupted):
    rc, output = interrupted
    assert rc == 0, f"exit code {rc}:\n" + output[-3000:]
    assert "Traceback" not in output


def test_a_node_is_built_with_the_garbage_collector_paused_and_spins_with_it_on(interrupted):
    """What a node makes at its start lives as long as it, so collecting meanwhile is wasted; a node left without
    the collector would never free a reference cycle."""
    rc, output = interrupted
    assert rc == 0, output[-3000:]
    assert "collector while building: False" in output, output[-3000:]
    assert "collector while spinning: True" in output, output[-3000:]


def test_a_fault_of_a_callback_still_ends_the_node_with_its_traceback():
    rc, output = _run_to_its_end("fault")
    assert rc == 1, output[-3000:]
    assert "SystemError: a fault of the callback itself" in output


def test_a_node_that_crashes_natively_says_which_python_code_it_was_in():
    """A segfault in compiled code (MuJoCo, EGL, DDS, numba) under a node prints every thread's Python stack before
    the process dies of it, so the crash can be placed (the node preamble enables faulthandler)."""
    crash = ("from pyrua_ros.wire.rosenv import node_preamble\nnode_preamble()\n"
             "def tearing_down_the_renderer():\n    import ctypes\n    ctypes.string_at(0)\n"
             "tearing_down_the_renderer()\n")
    done = subprocess.run([sys.executable, "-c", crash], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGSEGV, done
    assert "Fatal Python error: Segmentation fault" in done.stderr, done.stderr
    assert 'in tearing_down_the_renderer' in done.stderr, done.stderr
