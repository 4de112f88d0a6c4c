"""The loopback rule: every test process and every node it starts runs with LOCALHOST discovery and its own domain.

A node started the way the tests start nodes (``pyrua_ros.testing.NodeProcess``) must carry the harness's
environment, and a pyrua_ros node must refuse to start in the test environment when the variable is missing.
"""

import os
import pathlib
import runpy
import sys
import time

import pytest

from pyrua_ros.testing import NodeProcess, spin_until

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = pathlib.Path(__file__).resolve().parent.parent
NODES = runpy.run_path(str(ROOT / "setup.py"), run_name="pyrua_ros_setup")["NODES"]

PROBE = """
from pyrua_ros.wire.rosenv import node_preamble
node_preamble()
import rclpy, time
rclpy.init()
node = rclpy.create_node("harness_probe")
print("probe up", flush=True)
try:
    while rclpy.ok():
        rclpy.spin_once(node, timeout_sec=0.1)
except KeyboardInterrupt:
    pass
node.destroy_node()
rclpy.try_shutdown()
"""


def _environ_of(pid: int) -> dict[str, str]:
    raw = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_test_process_is_on_loopback_with_own_domain():
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert 0 < int(os.environ["ROS_DOMAIN_ID"]) < 233
    assert "ROS_LOCALHOST_ONLY" not in os.environ
    assert os.environ["PYRUA_REQUIRE_LOOPBACK"] == "1"


def test_started_node_carries_the_loopback_environment(ros_client):
    probe = NodeProcess([sys.executable, "-c", PROBE])
    try:
        assert probe.wait_for_output("probe up", 30), probe.output()
        env = _environ_of(probe.pid)
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
        assert env["ROS_DOMAIN_ID"] == os.environ["ROS_DOMAIN_ID"]
        # Discovered on this test's own domain, over loopback.
        assert spin_until(lambda: "harness_probe" in ros_client.node.get_node_names(), 15)
    finally:
        assert probe.stop() is not None


@pytest.mark.parametrize("node", NODES)
def test_node_refuses_to_start_without_localhost_discovery(node):
    env = dict(os.environ)
    del env["ROS_AUTOMATIC_DISCOVERY_RANGE"]
    proc = NodeProcess.module(f"pyrua_ros.nodes.{node}", env=env)
    try:
        assert spin_until(lambda: not proc.alive(), 60), f"{node} started without LOCALHOST discovery"
    finally:
        code = proc.stop()
    assert code == 3, proc.output()
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE" in proc.output()


@pytest.mark.parametrize("node", NODES)
def test_node_wrapper_is_installed_where_ros2_run_looks(node):
    prefix = pathlib.Path(sys.prefix)
    wrapper = prefix / "lib" / "pyrua_ros" / node
    assert wrapper.exists() and os.access(wrapper, os.X_OK), f"{wrapper} missing: run scripts/setup.sh"


def test_claim_skips_a_domain_an_orphan_still_runs_on(monkeypatch, tmp_path):
    """A node whose claiming process died keeps answering on its domain; the next claim must not land there."""
    import subprocess

    from pyrua_ros.wire import rosenv

    monkeypatch.setattr(rosenv, "DOMAIN_LOCK_DIR", tmp_path)            # every lock free: only /proc decides
    monkeypatch.setattr(rosenv, "_held_locks", [])
    start = rosenv.DOMAIN_RANGE[os.getpid() % len(rosenv.DOMAIN_RANGE)]  # the id a claim tries first
    orphan = subprocess.Popen(["sleep", "30"], env={**os.environ, "ROS_DOMAIN_ID": str(start)})
    try:
        # Popen returns once exec is past its point of no return, which is before the kernel records where the new
        # image's environment lies: until then /proc/<pid>/environ reads empty. An orphan that matters has long
        # passed that point; wait for this one to pass it too.
        environ = pathlib.Path(f"/proc/{orphan.pid}/environ")
        deadline = time.monotonic() + 10
        while not environ.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        busy = rosenv.domains_in_use()
        assert start in busy, (start, orphan.pid, sorted(busy))
        claimed = rosenv.claim_domain_id()
        assert claimed != start and claimed in rosenv.DOMAIN_RANGE, (claimed, start, sorted(busy))
    finally:
        orphan.kill()
        orphan.wait()
        for fh in rosenv._held_locks:
            fh.close()


def _ignored_signals(status: str) -> set[int]:
    """The signal numbers a /proc/<pid>/status text lists as ignored (its SigIgn mask)."""
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    return {n for n in range(1, 65) if mask & (1 << (n - 1))}


def test_children_start_with_interrupts_that_act_even_under_a_background_suite(tmp_path):
    """A child of a test process starts with SIGINT and SIGQUIT at their defaults, so a test's interrupt reaches it,
    even when the suite itself was started as a background job (which ignores both, inherited across exec): shown
    by a shell that ignores SIGINT the way a background job does and starts pytest's own interpreter on the harness's
    rule, and by this process's own children."""
    import signal
    import subprocess

    child = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, check=True)
    assert not _ignored_signals(child.stdout) & {signal.SIGINT, signal.SIGQUIT}
    background = subprocess.run(
        ["sh", "-c", 'trap "" INT QUIT; exec "$0" -c "$1"', sys.executable,
         "import runpy, sys, subprocess; sys.path.insert(0, 'test'); runpy.run_path('test/conftest.py'); "
         "print(subprocess.run(['cat', '/proc/self/status'], capture_output=True, text=True).stdout)"],
        cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "TMPDIR": str(tmp_path)})   # (the ROS home the harness makes there goes with tmp_path)
    assert not _ignored_signals(background.stdout) & {signal.SIGINT, signal.SIGQUIT}, background.stdout


def test_a_pid_that_another_process_took_over_no_longer_counts_as_alive():
    """PIDs recycle within a suite run: a graph's PID snapshot must not report another test's process, which
    happened for a Ctrl-C test (a kernel started by a test on another worker held a PID of its tree). Reuse is
    simulated by a start time that differs from the one descendants() remembered."""
    import subprocess

    from pyrua_ros.testing import processes

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in processes.descendants(os.getpid())
        assert processes.alive({child.pid}) == {child.pid}
        processes._STARTS[child.pid] += 1        # as if the PID had been recycled since it was seen
        assert processes.alive({child.pid}) == set()
        assert child.pid in processes.descendants(os.getpid()) and processes.alive({child.pid}) == {child.pid}
    finally:
        child.kill()
        child.wait()
    assert processes.alive({child.pid}) == set()
