"""The package as a ROS 2 user builds and runs it: ``colcon build`` (colcon-core, colcon-ros) in a workspace, then
``ros2 pkg``, ``ros2 run`` and ``ros2 launch`` from ``install/``, with ``ros2 action list -t`` and ``ros2 topic hz``
looking at a running episode.

One colcon build per module (a copy of the checkout's sources in ``<ws>/src/pyrua_ros``); the tools are the real
upstream ones of ``.venv-launch/`` (skipped only where ../shared/ros2-launch is absent). Every process is started in
a group of its own, stopped by PID, and checked gone by process tree.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from pyrua_ros.testing import NodeProcess, spin_until
from pyrua_ros.testing.processes import age_s, alive, cmdline, descendants, dump_node_stacks
from pyrua_ros.testing.ros2_tools import ENV_SCRIPT, daemons, require_tools, stop_daemon
from pyrua_ros.wire.interfaces import load

ROOT = pathlib.Path(__file__).resolve().parents[1]
NODES = ("sim_node", "agent_node", "fake_arm_node")
QUIET = ("-p", "record:=false", "-p", "video:=false")
NAMES = load()
HZ_WINDOW = 10     # messages ros2 topic hz averages over


def full_window_rate(text: str) -> float | None:
    """The rate of the first ``ros2 topic hz`` report averaged over a full window, or None."""
    for report in text.split("average rate:")[1:]:
        if f"window: {HZ_WINDOW}" in report:
            return float(report.split()[0])
    return None


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """``colcon build`` of a copy of this checkout in a fresh workspace: (the workspace, the environment of
    ``source .venv-launch/env.sh && source install/setup.sh``)."""
    tools = require_tools()
    ws = tmp_path_factory.mktemp("ws")
    shutil.copytree(ROOT, ws / "src" / "pyrua_ros", ignore=shutil.ignore_patterns(
        ".*", "build", "install", "log", "runs", "__pycache__", "*.egg-info"))
    built = subprocess.run(["colcon", "build", "--base-paths", "src"], cwd=ws, env=tools, capture_output=True,
                           text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    sourced = subprocess.run(["bash", "-c", f'source "{ENV_SCRIPT}" && source install/setup.sh && env -0'], cwd=ws,
                             env=tools, capture_output=True, check=True)
    env = dict(item.partition("=")[::2] for item in sourced.stdout.decode().split("\0") if "=" in item)
    return ws, env


def watch(tree: dict[int, set[str]], *procs: NodeProcess) -> None:
    """Add every process now under ``procs`` to ``tree`` with its command line, read while it runs (a node's
    wrapper script execs python: a PID may show both)."""
    for pid in set().union(*(descendants(n.pid) for n in procs)):
        line = cmdline(pid)
        if line:
            tree.setdefault(pid, set()).add(line)


def lines(tree: dict[int, set[str]]) -> list[str]:
    return [line for seen in tree.values() for line in seen]


def ros2(env: dict, *args: str, timeout: float = 60.0) -> str:
    done = subprocess.run(["ros2", *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"ros2 {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_colcon_installs_the_package_where_ros2_finds_it(workspace):
    ws, env = workspace
    prefix = ws / "install" / "pyrua_ros"
    assert ros2(env, "pkg", "prefix", "pyrua_ros").strip() == str(prefix)
    executables = ros2(env, "pkg", "executables", "pyrua_ros").split("\n")
    assert {f"pyrua_ros {n}" for n in NODES} <= set(executables), executables
    where = subprocess.run([sys.executable, "-c", "import pyrua_ros; print(pyrua_ros.__file__)"], env=env,
                           cwd=ws, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(prefix / "lib")), where          # the installed package, not the checkout
    assert (prefix / "share" / "pyrua_ros" / "launch" / "libero_sim.launch.py").is_file()


def test_ros2_run_starts_the_fake_arm_and_an_agent(workspace, tmp_path):
    """``ros2 run pyrua_ros <node>``: the fake arm and an agent finish an episode; Ctrl-C ends the fake arm cleanly.

    ``ros2 run`` and ``ros2 launch`` start the same executables of ``lib/pyrua_ros`` (both find them through the
    ament index, as ``ros2 pkg executables`` lists them above): the sim node's one comes up and serves a whole
    episode in test_ros2_launch_from_install_runs_the_sim_and_the_fake_arm (this test booted a LIBERO sim of its
    own for that only, and its Ctrl-C exit is test_sim_node.py's)."""
    ws, env = workspace
    config = ws / "install" / "pyrua_ros" / "share" / "pyrua_ros" / "config"
    run = ("ros2", "run", "pyrua_ros")
    fake = NodeProcess([*run, "fake_arm_node", "--ros-args", "-r", "__ns:=/run_fake", "--params-file",
                        str(config / "fake_arm.yaml")], env=env, cwd=tmp_path)
    agent = NodeProcess([*run, "agent_node", "--ros-args", "-r", "__ns:=/run_fake", "--params-file",
                         str(config / "agent.yaml"), "-p", "suite:=fake_table", "-p", f"out:={tmp_path / 'run'}",
                         *QUIET], env=env, cwd=tmp_path)
    procs = (fake, agent)
    tree: dict[int, set[str]] = {}      # every process under the two ros2 run, with its command line
    try:
        assert spin_until(lambda: watch(tree, *procs) or not agent.alive(), 180.0), agent.output()[-3000:]
        assert agent.proc.returncode == 0, agent.output()[-3000:] + fake.output()[-2000:]
        assert fake.alive()
    finally:
        codes = [p.stop(10.0) for p in procs]
    assert codes[0] == 0, fake.output()[-2000:]     # Ctrl-C is a clean exit
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert (result["suite"], result["status"], result["environment_success"]) == ("fake_table", "completed", True)
    for node in ("fake_arm_node", "agent_node"):     # each ros2 run started its node's executable (python -m)
        assert any(f"-m pyrua_ros.nodes.{node} --ros-args" in line for line in lines(tree)), (node, tree)
    assert not alive(tree), {p: cmdline(p) for p in alive(tree)}


def test_ros2_launch_from_install_runs_the_sim_and_the_fake_arm(workspace, tmp_path):
    """From ``install/``: the sim with every default (root namespace) next to the fake arm under ``/robot2``; while
    the sim's episode runs, ``ros2 topic hz /ee_pose`` measures a rate and ``ros2 action list -t`` shows its
    actions with their types. Both episodes succeed and nothing is left running."""
    ws, env = workspace
    domain = env["ROS_DOMAIN_ID"]
    launch = ("ros2", "launch", "pyrua_ros", "libero_sim.launch.py")
    sim = NodeProcess([*launch], env=env, cwd=tmp_path)
    fake = NodeProcess([*launch, "robot:=fake", "namespace:=robot2", f"out:={tmp_path / 'fake'}", "record:=false",
                        "video:=false"], env=env, cwd=tmp_path)
    hz = NodeProcess(["ros2", "topic", "hz", "--window", str(HZ_WINDOW), "/" + NAMES.driver.ee_pose], env=env,
                     cwd=tmp_path)
    tree: dict[int, set[str]] = {}
    try:
        def measured():   # a rate over a full window of messages (the first reports cover one or two)
            watch(tree, sim, fake)
            return full_window_rate(hz.output()) is not None or not (sim.alive() and hz.alive())
        assert spin_until(measured, 300.0), hz.output()[-2000:] + sim.output()[-3000:]
        assert sim.alive(), sim.output()[-4000:]                  # measured during the episode
        assert full_window_rate(hz.output()) > 1.0, hz.output()
        expected = [f"/{NAMES.driver.follow_joint_trajectory} [control_msgs/action/FollowJointTrajectory]",
                    f"/{NAMES.driver.gripper_command} [control_msgs/action/GripperCommand]"]
        actions = ""

        def listed():   # the graph as discovery has it so far: asked again until it holds both actions
            nonlocal actions
            actions = ros2(env, "action", "list", "-t")
            return all(line in actions for line in expected) or not sim.alive()
        assert spin_until(listed, 60.0, period=1.0), actions
        assert all(line in actions for line in expected), actions
    finally:
        hz.stop(5.0)
        stop_daemon(env)
        stopped_at = time.monotonic()
    try:
        if not spin_until(lambda: watch(tree, sim, fake) or not (sim.alive() or fake.alive()), 400.0):
            dump_node_stacks(descendants(sim.pid) | descendants(fake.pid))   # where each node of a hung launch waits
            raise AssertionError(f"still running after 400 s: sim launch {sim.alive()}, fake launch {fake.alive()}"
                                 f"\n--- sim:\n{sim.output()[-6000:]}\n--- fake:\n{fake.output()[-3000:]}")
        assert sim.proc.returncode == 0, sim.output()[-4000:]
        assert fake.proc.returncode == 0, fake.output()[-4000:]
    finally:
        sim.stop(10.0)
        fake.stop(10.0)
    share = ws / "install" / "pyrua_ros" / "share" / "pyrua_ros" / "config"
    for node, params in (("sim_node", "sim.yaml"), ("fake_arm_node", "fake_arm.yaml"), ("agent_node", "agent.yaml")):
        assert any(f"-m pyrua_ros.nodes.{node} " in line and f"--params-file {share / params}" in line
                   for line in lines(tree)), (node, tree)          # the installed package's files
    runs = list((tmp_path / "runs").iterdir())                 # the default out: runs/<suite>_t<task>_s<seed>_<time>
    for result_file in (runs[0] / "result.json", tmp_path / "fake" / "result.json"):
        result = json.loads(result_file.read_text())
        assert result["status"] == "completed" and result["environment_success"], result
    assert len(runs) == 1 and (runs[0] / "episode.mcap").is_file()        # record:=true by default
    assert not alive(tree), {p: cmdline(p) for p in alive(tree)}
    since_stop = time.monotonic() - stopped_at
    assert not daemons(domain), {p: f"started {age_s(p):.1f} s ago, daemon stop {since_stop:.1f} s ago: {cmdline(p)}"
                                 for p in daemons(domain)}
