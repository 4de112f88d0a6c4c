"""The driver conformance suite (``pyrua-ros check-driver``) as pytest, over both of our drivers: the LIBERO sim
node and the kinematic fake arm, each a real node process over loopback DDS. One suite run per driver, on a freshly
started node; one test per check, so a failure names the interface and the property. The fake arm's run is this
module's fixture; the sim node's runs in test_sim_node.py on that module's node before any other test there uses it
(one LIBERO boot fewer), through :func:`run_checks` and :func:`assert_conforms`. A deliberately broken driver (the
fake arm with its e-stop and static TF wired elsewhere) must fail, with rows that say what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyrua_ros.conformance import checks, report
from pyrua_ros.conformance.probe import Probe
from pyrua_ros.testing import NodeProcess, spin_until

DRIVERS = {
    "sim": ("pyrua_ros.nodes.sim_node", "config/sim.yaml", "sim node ready", 240.0),
    "fake": ("pyrua_ros.nodes.fake_arm_node", "config/fake_arm.yaml", "fake arm ready", 60.0),
}
# the fake arm's 300-step episode is too short for the cancel check (the suite would skip it); the sim has 10000
ROOMY_EPISODE = {"sim": (), "fake": ("-p", "max_episode_steps:=20000")}
CHECK_NAMES = [c.__name__.removeprefix("check_") for c in checks.CHECKS]


def start_driver(kind: str, *extra: str) -> NodeProcess:
    module, params, ready, timeout = DRIVERS[kind]
    node = NodeProcess.module(module, "--ros-args", "--params-file", params, *extra)
    assert node.wait_for_output(ready, timeout), node.output()[-3000:]
    return node


def run_checks() -> dict[str, list[report.Row]]:
    """Every check, through a probe of its own, against the driver serving this domain; rows by check name."""
    probe = Probe()
    try:
        by_check = {name: checks.run_one(check, probe, skip_sim=False) for check, name in zip(checks.CHECKS,
                                                                                                 CHECK_NAMES)}
    finally:
        probe.close()
    print(report.table([r for rows in by_check.values() for r in rows]))
    return by_check


def run_suite(kind: str, *extra: str) -> dict[str, list[report.Row]]:
    """Start the driver, run every check through a probe, stop the driver; rows by check name."""
    node = start_driver(kind, *extra)
    try:
        by_check = run_checks()
        assert node.alive(), node.output()[-3000:]
    finally:
        code = node.stop()
    assert code == 0, node.output()[-3000:]
    return by_check


def assert_conforms(kind: str, by_check: dict[str, list[report.Row]], check: str) -> None:
    """The rows of ``check``: some, none failed, none skipped (every check ran); presence also with no INFO row
    (every interface robo uses is served by both drivers; only rviz extras are optional)."""
    rows = by_check[check]
    assert rows, f"{check} produced no row"
    bad = [r for r in rows if r.failed]
    assert not bad, f"{kind} driver:\n" + report.table(rows)
    if check == "presence":
        assert not [r for r in rows if r.verdict == report.INFO], report.table(rows)
    assert not [r for r in rows if r.verdict == report.SKIP], report.table(rows)


@pytest.fixture(scope="module")
def suite():
    return run_suite("fake", *ROOMY_EPISODE["fake"])


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_the_fake_arm_conforms(suite, check):
    assert_conforms("fake", suite, check)


def test_a_broken_driver_fails_with_rows_that_say_what_is_wrong():
    """The fake arm with its e-stop subscription and /tf_static remapped away: the kit must say exactly that. Its
    300-step episode is too short for the cancel check, which says so instead of racing the episode's end."""
    by_check = run_suite("fake", "-r", "estop:=estop_unwired", "-r", "tf_static:=tf_static_elsewhere")
    failed = {(r.interface, r.check): r.detail for rows in by_check.values() for r in rows if r.failed}
    skipped = {(r.interface, r.check): r.detail for rows in by_check.values() for r in rows if r.verdict == report.SKIP}
    cancels = [("arm_controller/follow_joint_trajectory", "cancel stops the arm"),
               ("cartesian_controller/move_to_target", "cancel ends the move")]
    assert list(skipped) == cancels, skipped
    assert all("control steps left in the episode" in skipped[c] for c in cancels), skipped
    assert failed[("estop", "present")] == "no subscriber on /estop"
    assert failed[("estop", "latch holds the arm")].startswith("moved ")
    assert "not connected to 'world'" in failed[("TF", "world -> base")]
    assert failed[("tf_static", "present")] == "no publisher on /tf_static"
    assert not [k for k in failed if k[0] not in ("estop", "tf_static", "TF")], failed   # nothing else blamed


def test_an_episode_that_is_over_is_named_instead_of_blamed_on_the_driver():
    """A one-step episode, ended before the kit starts: the driver rightly refuses all motion. Every check that
    moves the arm says the episode is over and how to go on, instead of "moved 0.0 mm" rows; the sim interfaces'
    reset still runs."""
    node = start_driver("fake", "-p", "max_episode_steps:=1")
    probe = Probe()
    try:
        # the step that ends the episode, resent until its status arrives (the first twist may go out before the
        # driver's subscription matched), so every check below sees the episode over, however loaded the machine
        def over() -> bool:
            probe.twist((0.0, 0.0, 0.0))
            return (probe.episode_status() or {}).get("truncated") is True

        assert spin_until(over, 60.0, period=0.2), probe.episode_status()
        rows = checks.run(probe)
    finally:
        probe.close()
        node.stop()
    print(report.table(rows))
    for check in checks.MOVES_THE_ARM:
        name = check.__name__.removeprefix("check_")
        got = [r for r in rows if r.interface == name and r.check not in ("present", "type", "QoS")]
        assert [(r.check, r.verdict) for r in got] == [("ran", report.FAIL)], got
        assert "episode is over (truncated at step 1 of 1)" in got[0].detail and "/reset" in got[0].detail, got
    assert [r.verdict for r in rows if r.check == "reset"] == [report.PASS], rows
    assert len([r for r in rows if r.failed]) == len(checks.MOVES_THE_ARM), report.table(rows)   # nothing else


def test_check_driver_cli_says_in_one_line_that_nothing_answers():
    """Nobody serving the interfaces: one line names the domain and namespace and how to start one of our drivers
    alone; exit 1, no table of failures, no traceback."""
    out = subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", "check-driver", "--namespace", "nobody_here",
                          "--skip-sim-interfaces"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and out.stdout == "", out.stdout + out.stderr
    domain = os.environ.get("ROS_DOMAIN_ID") or "0"
    assert f"nothing answers on ROS_DOMAIN_ID {domain} in namespace '/nobody_here'" in lines[0]
    assert "python -m pyrua_ros.nodes.fake_arm_node --ros-args -r __ns:=/nobody_here" in lines[0]
    assert "pyrua_ros.nodes.sim_node" in lines[0]


def test_a_long_remedy_is_never_cut():
    remedy = "x" * 150 + " (run the driver with max_episode_steps >= 40)"
    assert remedy in report.table([report.skipped("/reset", "episode end", remedy)])
