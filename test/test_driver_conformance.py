"""Every registered driver, swept: the registry's declarations hold (unit), and each driver we start, started as
users start it (``python -m <its module>`` with its parameter file, ready at its ready line), passes the driver
conformance suite (``pyrua-ros check-driver``) and serves the scene it declares. A new driver is one registration in
:data:`pyrua_ros.sim_interfaces.drivers.DRIVERS` and is swept here without a new test.

One node per driver, for the conformance run and the scene check together, started and stopped by the module's
:func:`sweep` fixture before the next starts (one ROS domain per test process); one test per check, so a failure
names the driver, the interface and the property. The kit itself is tested on the fake arm, the quickest to start: a
deliberately broken driver (its e-stop and static TF wired elsewhere) must fail with rows that say what is wrong, and
an episode that is over is named instead of blamed on the driver."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
from rigs.nodes import ROOT, driver_params, start

from pyrua_ros.bringup import graph
from pyrua_ros.conformance import checks, report
from pyrua_ros.conformance.probe import Probe
from pyrua_ros.settings.config import PlayConfig
from pyrua_ros.settings.schema import leaves
from pyrua_ros.sim_interfaces.drivers import DRIVERS, EXTERNAL, DriverRegistry, DriverSpec
from pyrua_ros.sim_interfaces.episodes import check_episode
from pyrua_ros.testing import spin_until

# a roomy episode for the kit: the cancel checks need control steps left after the others (the fake arm's own
# 300-step episode is too short; the sim's 10000 would do)
ROOMY_EPISODE = ("-p", "max_episode_steps:=20000")
CHECK_NAMES = [c.__name__.removeprefix("check_") for c in checks.CHECKS]
WAIT = 60.0   # [s] a latched message to a new subscription: discovery, slow beside busy loops
NOWHERE = "no_such_suite"


# ----- the registry's declarations (unit) -----

@pytest.mark.unit
def test_the_driver_flag_offers_exactly_the_registered_drivers():
    (driver,) = [leaf for leaf in leaves(PlayConfig) if leaf.path == ("episode", "driver")]
    assert driver.choices == DRIVERS.names() == ("sim", "fake", "external") and driver.default == "sim"
    assert all(f"{spec.name} ({spec.summary})" in driver.spec.help for spec in DRIVERS)
    assert graph.ARGUMENTS_BY_NAME["robot"].choices == DRIVERS.names()


@pytest.mark.unit
@pytest.mark.parametrize("spec", DRIVERS.nodes(), ids=lambda s: s.name)
def test_every_driver_we_start_is_whole(spec):
    """Its node module and parameter file exist, and its executable is installed from the module alone; its
    parameter file's episode is one it declares; the launch plans its node, with that file, for robot:=<name>; the
    episode check knows its suites."""
    assert importlib.util.find_spec(spec.module) is not None, spec.module
    # what ros2 run and launch_ros start: the wrapper setup.py writes for every nodes/*_node.py module
    wrapper = pathlib.Path(sys.prefix) / "lib" / "pyrua_ros" / spec.executable
    assert f"-m {spec.module} " in wrapper.read_text() and os.access(wrapper, os.X_OK), wrapper
    params = graph.node_parameters(ROOT / "config" / spec.params_file, graph.DRIVER_NODE_NAME)
    assert params["suite"] in spec.suites and 0 <= params["task"] < spec.suites[params["suite"]], params
    (node,) = [n for n in graph.plan({"robot": spec.name}) if not n.is_agent]
    assert (node.key, node.executable, node.name) == (spec.name, spec.executable, graph.DRIVER_NODE_NAME)
    assert node.params_files == (graph.config_dir() / spec.params_file,)
    for suite, tasks in spec.suites.items():
        check_episode(suite, tasks - 1, 0, spec.name)
        with pytest.raises(ValueError, match=rf"valid tasks are 0\.\.{tasks - 1}"):
            check_episode(suite, tasks, 0, spec.name)
    with pytest.raises(ValueError, match=f"unknown suite '{NOWHERE}' for --driver {spec.name}.*valid suites: "
                                         f"{', '.join(spec.suites)}$"):
        check_episode(NOWHERE, 0, 0, spec.name)


@pytest.mark.unit
def test_a_driver_we_do_not_start_plans_no_node_and_leaves_the_suites_to_it():
    assert not EXTERNAL.starts_node and [n.key for n in graph.plan({"robot": EXTERNAL.name})] == ["agent"]
    check_episode(NOWHERE, 99, 0, EXTERNAL.name)
    assert graph.resolve({"robot": EXTERNAL.name})["use_sim_time"] is False
    assert all(graph.resolve({"robot": d.name})["use_sim_time"] for d in DRIVERS.nodes())


@pytest.mark.unit
def test_a_registration_that_is_not_whole_is_refused():
    registry = DriverRegistry()
    a = registry.add(DriverSpec("a", "one", executable="a_node", params_file="a.yaml", label="a arm",
                                suites={"a_table": 1}))
    assert (a.module, a.ready, registry.default, registry.nodes()) == ("pyrua_ros.nodes.a_node", "a arm ready", a,
                                                                        (a,))
    with pytest.raises(ValueError, match="name 'a' is registered twice"):
        registry.add(DriverSpec("a", "again"))
    with pytest.raises(ValueError, match="executable 'a_node' is registered twice"):
        registry.add(dataclasses.replace(a, name="b", label="b arm"))
    with pytest.raises(ValueError, match="names its executable, params_file, label and suites"):
        DriverSpec("c", "a node without a parameter file", executable="c_node", label="c", suites={"c": 1})
    with pytest.raises(ValueError, match="every suite has at least one task"):
        DriverSpec("d", "an empty suite", executable="d_node", params_file="d.yaml", label="d", suites={"d": 0})
    with pytest.raises(ValueError, match=r"its executable's name ends in _node .*got 'e_driver'"):
        DriverSpec("e", "no wrapper would be installed", executable="e_driver", params_file="e.yaml", label="e",
                   suites={"e": 1})
    with pytest.raises(ValueError, match="unknown driver 'z'; valid drivers: a"):
        registry["z"]


# ----- every driver we start, running -----

@dataclasses.dataclass(frozen=True)
class Swept:
    """What one driver's node gave the sweep: the conformance rows by check, then the scene it served."""

    spec: DriverSpec
    rows: dict[str, list[report.Row]]
    params: dict          # its parameter file's values
    status: dict          # the episode status of a reset to them
    truth: set[str]       # the names of its ground-truth markers
    last_task: object     # the answer to setting the last task the suite declares
    past_last_task: object
    unknown_suite: object


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


def observe_scene(spec: DriverSpec) -> dict:
    """Reset the driver to its parameter file's episode and read the scene it serves; then ask it for the last
    task its suite declares, one past it and a suite nobody serves (parameter sets only: nothing is rebuilt)."""
    from rcl_interfaces.srv import SetParametersAtomically
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger
    from visualization_msgs.msg import MarkerArray

    from pyrua_ros.testing import RosClient
    from pyrua_ros.wire import qos
    from pyrua_ros.wire.interfaces import load

    sim = load().sim
    client = RosClient(f"sweep_{spec.name}")
    try:
        reset = client.call(Trigger, sim.reset, timeout=120.0)
        assert reset.success, reset.message
        status = json.loads(reset.message)
        truth = client.latest(MarkerArray, sim.ground_truth, WAIT, qos.LATCHED)

        def set_params(**values):
            request = SetParametersAtomically.Request(
                parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
            return client.call(SetParametersAtomically, f"{sim.node}/set_parameters_atomically", request,
                               WAIT).result

        tasks = spec.suites.get(status["suite"], 0)
        answers = {"last_task": set_params(task=tasks - 1), "past_last_task": set_params(task=tasks),
                   "unknown_suite": set_params(suite=NOWHERE)}
        assert set_params(suite=status["suite"], task=status["task"]).successful
        return {"status": status, "truth": {m.text for m in truth.markers if m.text}, **answers}
    finally:
        client.close()


@pytest.fixture(scope="module", params=driver_params())
def sweep(request) -> Swept:
    """One registered driver's node, started as users start it (its parameter file, a roomy episode for the kit):
    the conformance suite on the fresh node, then the scene check; the node is stopped and must exit cleanly."""
    spec = request.param
    node = start(spec, *ROOMY_EPISODE)
    try:
        rows = run_checks()
        scene = observe_scene(spec)
        assert node.alive(), node.output()[-3000:]
    finally:
        code = node.stop()
    assert code == 0, f"{spec.module} exit code {code}:\n" + node.output()[-3000:]
    params = graph.node_parameters(ROOT / "config" / spec.params_file, graph.DRIVER_NODE_NAME)
    return Swept(spec=spec, rows=rows, params=params, **scene)


def assert_conforms(kind: str, by_check: dict[str, list[report.Row]], check: str) -> None:
    """The rows of ``check``: some, none failed, none skipped (every check ran); presence also with no INFO row
    (every interface robo uses is served by every driver; only rviz extras are optional)."""
    rows = by_check[check]
    assert rows, f"{check} produced no row"
    bad = [r for r in rows if r.failed]
    assert not bad, f"{kind} driver:\n" + report.table(rows)
    if check == "presence":
        assert not [r for r in rows if r.verdict == report.INFO], report.table(rows)
    assert not [r for r in rows if r.verdict == report.SKIP], report.table(rows)


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_every_driver_conforms(sweep, check):
    assert_conforms(sweep.spec.name, sweep.rows, check)


def test_every_driver_serves_the_scene_it_declares(sweep):
    """Reset to its parameter file's episode: a suite and task it declares, the file's seed, a scene with objects
    whose ground truth it publishes; the last task the suite declares is accepted, the one past it and an unknown
    suite are refused with the valid values, as the checks before boot refuse them."""
    spec, status, params = sweep.spec, sweep.status, sweep.params
    assert (status["suite"], status["task"], status["seed"], status["step"]) == \
        (params["suite"], params["task"], params["seed"], 0), status
    assert status["suite"] in spec.suites and status["task"] < spec.suites[status["suite"]]
    assert status["task_language"] and status["object_names"], status
    assert sweep.truth == set(status["object_names"]), (sweep.truth, status["object_names"])
    assert sweep.last_task.successful, sweep.last_task.reason
    tasks = spec.suites[status["suite"]]
    assert not sweep.past_last_task.successful and f"valid tasks are 0..{tasks - 1}" in sweep.past_last_task.reason
    assert not sweep.unknown_suite.successful and f"unknown suite '{NOWHERE}'" in sweep.unknown_suite.reason
    assert status["suite"] in sweep.unknown_suite.reason, sweep.unknown_suite.reason


# ----- the kit itself, on the fake arm -----

def run_suite(*extra: str) -> dict[str, list[report.Row]]:
    """Start the fake arm, run every check through a probe, stop it; rows by check name."""
    node = start(DRIVERS["fake"], *extra)
    try:
        by_check = run_checks()
        assert node.alive(), node.output()[-3000:]
    finally:
        code = node.stop()
    assert code == 0, node.output()[-3000:]
    return by_check


def test_a_broken_driver_fails_with_rows_that_say_what_is_wrong():
    """The fake arm with its e-stop subscription and /tf_static remapped away: the kit must say exactly that. Its
    300-step episode is too short for the cancel check, which says so instead of racing the episode's end."""
    by_check = run_suite("-r", "estop:=estop_unwired", "-r", "tf_static:=tf_static_elsewhere")
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
    node = start(DRIVERS["fake"], "-p", "max_episode_steps:=1")
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
