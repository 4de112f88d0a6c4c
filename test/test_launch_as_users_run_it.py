"""The graph launched the way users launch it, through the pip runner (the tested stand-in for ``ros2 launch``):
two namespaced robots on one ROS domain, parameters read back over ROS like ``ros2 param get``, and process
lifetimes (a double Ctrl-C and a failing launch leave no process behind, checked by process tree)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys

from pyrua_ros.testing import spin_until
from pyrua_ros.testing.processes import agent_running_its_kernel, alive, cmdline, descendants, naming, press_ctrl_c

ROOT = pathlib.Path(__file__).resolve().parents[1]
# no bag and no video where a test looks at neither (the interrupted launch below keeps its video on)
QUIET = ("record:=false", "video:=false")
LONG_PROGRAM = '''"""Moves back and forth for a long time: an episode to interrupt."""


def run(robo):
    for _ in range(400):
        robo.move_to([-0.20, 0.10, 1.10])
        robo.move_to([-0.20, -0.10, 1.10])
'''


def launch(*args: str, cwd=ROOT, env=None) -> subprocess.Popen:
    """``pyrua-ros launch libero_sim args...`` in a process group of its own (as a terminal's foreground job)."""
    return subprocess.Popen([sys.executable, "-m", "pyrua_ros.cli.main", "launch", "libero_sim", *args], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 240.0) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"the launch did not end within {timeout} s:\n{out[-4000:]}") from None
    return proc.returncode, out


def get_parameters(client, node: str, names: list[str], timeout: float = 60.0) -> dict:
    """What ``ros2 param get <node> <name>`` answers, through rcl_interfaces/srv/GetParameters."""
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    resp = client.call(GetParameters, f"{node}/get_parameters", GetParameters.Request(names=names), timeout)
    return {n: parameter_value_to_python(v) for n, v in zip(names, resp.values)}


def _after_a_pause(example: pathlib.Path, pause_s: float) -> str:
    """The packaged example program ``example``, its ``run`` preceded by ``pause_s`` seconds of sleep."""
    return (f"{example.read_text()}\n\n_solve = run\n\n\ndef run(robo):\n    import time\n\n"
            f"    time.sleep({pause_s})\n    _solve(robo)\n")


def test_two_namespaced_robots_each_with_its_agent_complete_their_episodes(ros_client, tmp_path):
    """Two fake arms in one ROS domain, each with its agent under its namespace (robot1 with its own seed): each
    agent drives only its own robot, and each node's parameters (the params files', or the overrides) answer like
    ``ros2 param get``. (The LIBERO sim under a launch: test_runner_rviz.py and test_colcon_install.py.)

    Each agent replays the packaged program after a pause: a fake-arm episode ends its graph about 2 s after it
    starts, which lost the race against reading the four nodes' parameters on a quiet machine."""
    from pyrua_ros.examples import EXAMPLES

    program = tmp_path / "paused.py"
    program.write_text(_after_a_pause(EXAMPLES[("fake_table", 0)], 10.0))
    robot1 = launch("robot:=fake", "namespace:=robot1", "seed:=2", f"replay:={program}", f"out:={tmp_path / 'r1'}",
                    *QUIET)
    robot2 = launch("robot:=fake", "namespace:=robot2", f"replay:={program}", f"out:={tmp_path / 'r2'}", *QUIET)
    try:
        got2 = get_parameters(ros_client, "/robot2/agent", ["suite", "task", "max_episode_steps", "budget_s"])
        assert got2 == {"suite": "fake_table", "task": 0, "max_episode_steps": 300, "budget_s": 1200.0}
        assert get_parameters(ros_client, "/robot2/sim", ["suite", "clock_mode"]) == \
            {"suite": "fake_table", "clock_mode": "lockstep"}
        assert get_parameters(ros_client, "/robot1/sim", ["suite", "seed"]) == {"suite": "fake_table", "seed": 2}
        assert get_parameters(ros_client, "/robot1/agent", ["seed", "runtime", "use_sim_time"]) == \
            {"seed": 2, "runtime": "replay", "use_sim_time": True}
        nodes = ros_client.node.get_node_names_and_namespaces()
        agents = sorted(ns for name, ns in nodes if name == "agent")
        assert set(agents) <= {"/robot1", "/robot2"} and len(agents) == len(set(agents)), nodes  # one per robot
        code1, out1 = finish(robot1)
        code2, out2 = finish(robot2)
    finally:
        for proc in (robot1, robot2):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(60)
    assert code1 == 0, out1[-4000:]
    assert code2 == 0, out2[-4000:]
    for run, seed in (("r1", 2), ("r2", 0)):
        result = json.loads((tmp_path / run / "result.json").read_text())
        assert (result["suite"], result["seed"], result["status"], result["environment_success"]) == \
            ("fake_table", seed, "completed", True)


def test_double_ctrl_c_leaves_no_process_kernel_included(tmp_path):
    """Ctrl-C twice, as a terminal sends it to every process group of the graph: every process ends, the kernel
    worker included, and the episode still writes a result that says it was interrupted."""
    program = tmp_path / "long.py"
    program.write_text(LONG_PROGRAM)
    proc = launch("robot:=fake", f"replay:={program}", "max_episode_steps:=100000", f"out:={tmp_path / 'run'}",
                  "record:=false")
    try:
        agent = None

        def kernel_started():
            nonlocal agent
            agent = agent_running_its_kernel(proc.pid, tmp_path / "run")
            return agent is not None or proc.poll() is not None

        assert spin_until(kernel_started, 180.0) and agent is not None, proc.stdout.read()[-3000:]
        tree = press_ctrl_c(proc.pid, agent, 2)
        code, out = finish(proc, 120.0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert spin_until(lambda: not alive(tree), 30.0), {p: cmdline(p) for p in alive(tree)}
    # and none started after the tree was taken: a kernel started again between the two presses left its inner
    # bubblewrap asleep for good once (its command line names the run directory)
    assert spin_until(lambda: not naming(str(tmp_path)), 30.0), {p: cmdline(p) for p in naming(str(tmp_path))}
    assert code != 0, out[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "interrupted" and result["reason"] == "interrupted", result


def test_a_failing_agent_fails_the_launch_and_stops_the_driver(tmp_path):
    proc = launch("robot:=fake", f"replay:={tmp_path / 'missing.py'}", f"out:={tmp_path / 'run'}")
    tree = set()

    def track():
        tree.update(descendants(proc.pid))
        return proc.poll() is not None

    assert spin_until(track, 180.0)
    code, out = finish(proc)
    assert code == 2, out[-3000:]
    assert len(tree) >= 2 and not alive(tree), {p: cmdline(p) for p in alive(tree)}


def test_rviz_without_rviz2_fails_before_starting_anything(tmp_path):
    env = dict(os.environ, PATH=str(pathlib.Path(sys.executable).parent))   # no rviz2 there
    proc = launch("robot:=fake", "rviz:=true", f"out:={tmp_path / 'run'}", env=env)
    seen = set()
    assert spin_until(lambda: seen.update(descendants(proc.pid)) or proc.poll() is not None, 60.0)
    code, out = finish(proc)
    assert code == 2 and "rviz2 (rviz2) is not installed" in out and "rviz:=false" in out
    assert not seen and not (tmp_path / "run").exists()     # nothing was started


def test_installed_layout_runs_the_fake_arm_graph(tmp_path):
    """A non-editable install (site-packages + share/ + lib/, no source tree) runs ``robot:=fake`` to success."""
    prefix = tmp_path / "prefix"
    # --ignore-installed: pip would otherwise uninstall the editable pyrua_ros of this venv first
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--ignore-installed", "--no-cache-dir", "--prefix", str(prefix), str(ROOT)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-3000:]
    site = next(prefix.glob("lib/python3*/site-packages"))
    assert (prefix / "share" / "pyrua_ros" / "config" / "fake_arm.yaml").is_file()
    assert not (site.parent / "config").exists()             # no source-tree config next to the package
    env = dict(os.environ, PYTHONPATH=str(site), AMENT_PREFIX_PATH=str(prefix))
    check = subprocess.run([sys.executable, "-c", "import pyrua_ros, sys; print(pyrua_ros.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True)
    assert check.stdout.strip().startswith(str(site)), check
    proc = launch("robot:=fake", f"out:={tmp_path / 'run'}", *QUIET, cwd=tmp_path, env=env)
    code, out = finish(proc)
    assert code == 0, out[-4000:]
    assert str(prefix / "share" / "pyrua_ros" / "config" / "fake_arm.yaml") in out   # the installed params file
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "completed" and result["environment_success"], result
