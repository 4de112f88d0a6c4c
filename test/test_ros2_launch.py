"""``ros2 launch pyrua_ros libero_sim.launch.py`` itself, the real upstream launch and ros2cli (``.venv-launch/``,
built by scripts/setup.sh where ../shared/ros2-launch exists; skipped only where it does not).

The package is the checkout's (the editable install's ament index entries). Episodes run on the fake arm; where a
test must look at a running graph (``ros2 param``), the agent's model is a local chat server whose first reply waits
until the test has looked, so nothing depends on how fast the episode is. Every launch runs in a process group of
its own, is stopped by PID, and the tests check by process tree that nothing outlives it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest
import yaml

from pyrua_ros.bringup import graph
from pyrua_ros.testing import NodeProcess, spin_until
from pyrua_ros.testing.chat_server import ChatServer, Reply
from pyrua_ros.testing.processes import agent_running_its_kernel, alive, cmdline, descendants, press_ctrl_c
from pyrua_ros.testing.ros2_tools import require_tools

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAUNCH = ("ros2", "launch", "pyrua_ros", "libero_sim.launch.py")
EXAMPLE = (ROOT / "pyrua_ros" / "examples" / "fake_table_cube_on_plate.py").read_text()
QUIET = ("record:=false", "video:=false")
DIRECT = ("--no-daemon", "--spin-time", "2")    # no ROS 2 daemon left behind; time to discover the graph
LONG_PROGRAM = '''"""Moves back and forth for a long time: an episode to interrupt."""


def run(robo):
    for _ in range(400):
        robo.move_to([-0.20, 0.10, 1.10])
        robo.move_to([-0.20, -0.10, 1.10])
'''


@pytest.fixture(scope="module")
def tools():
    """The environment with ``ros2`` on PATH (this test process's loopback DDS settings included)."""
    return require_tools()


def ros2_launch(env: dict, *args: str, cwd=None, log=None) -> NodeProcess:
    """``ros2 launch pyrua_ros libero_sim.launch.py args...`` in a process group of its own."""
    return NodeProcess([*LAUNCH, *args], env=env, cwd=cwd, log_path=log)


def finish(launch: NodeProcess, timeout: float = 180.0) -> tuple[int, str]:
    """Wait for the launch to end by itself; the exit code and its output."""
    try:
        code = launch.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        launch.stop(5.0)
        raise AssertionError(f"the launch did not end within {timeout} s:\n{launch.output()[-4000:]}") from None
    return code, launch.output()


# What CPython prints when a KeyboardInterrupt reaches an interpreter inside threading's exit hook: the `ros2 launch`
# process itself, when a second Ctrl-C lands after launch has put Python's own SIGINT handler back and returned.
LAUNCHER_EXIT_INTERRUPT = "Exception ignored in: <module 'threading'"


def node_tracebacks(out: str) -> list[str]:
    """The tracebacks in a `ros2 launch` output, each as its text, less the launcher's own exit-hook interrupt.

    A traceback starts at a line holding "Traceback" and runs to the first line that is not indented after the
    prefix launch gave it (the exception line). One the launcher prints on its way out (LAUNCHER_EXIT_INTERRUPT) is
    upstream's and is left out only when it is exactly that: unprefixed, inside threading, ending in KeyboardInterrupt.
    """
    lines = out.splitlines()
    found = []
    for i, line in enumerate(lines):
        if "Traceback" not in line:
            continue
        prefix, end = line[:line.index("Traceback")], i + 1      # a node's lines carry launch's "[name-N] " prefix
        while end < len(lines) and lines[end].startswith((prefix + " ", prefix + "\t")):
            end += 1
        block = lines[max(i - 1, 0):end + 1]
        launcher_exit = (i > 0 and lines[i - 1].startswith(LAUNCHER_EXIT_INTERRUPT)
                         and line == "Traceback (most recent call last):"
                         and end < len(lines) and lines[end].strip() == "KeyboardInterrupt:"
                         and all("threading.py" in b for b in block if b.lstrip().startswith("File ")))
        if not launcher_exit:
            found.append("\n".join(block))
    return found


def solving_turns(obj: str, gate: threading.Event, done: threading.Event | None = None) -> list[Reply]:
    """A model that solves a fake_table task (``obj`` onto the plate) once ``gate`` is set, then finishes (once
    ``done`` is set, where given: until then the agent waits on its model, its episode still running)."""
    cell = EXAMPLE.replace("the red cube", obj) + "\nrun(robo)\n"
    return [Reply(tool_calls=(("python", {"code": cell}),), after=gate),
            Reply(tool_calls=(("finish", {"status": "success", "summary": "on the plate"}),), after=done)]


def ros2(env: dict, *args: str, timeout: float = 180.0, attempt_s: float = 45.0) -> str:
    """Run one ros2 verb to its end; its output (a failure shows it): :func:`ros2_answer` that must succeed."""
    done = ros2_answer(env, *args, timeout=timeout, attempt_s=attempt_s)
    assert done.returncode == 0, f"ros2 {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def ros2_answer(env: dict, *args: str, timeout: float = 180.0, attempt_s: float = 45.0):
    """Run one ros2 verb to its end; the finished process. Until ``timeout``, a verb asks again when it
    did not discover its node within its spin time (``--no-daemon``: a fresh DDS participant), and when it had no
    answer within ``attempt_s``: ``ros2 param get`` sends its one request and waits for the answer without a
    deadline, and a server that has not yet matched a fresh client's response reader drops that answer (the Fast
    DDS race that robo's own service calls resend for, driver/goal_client.call_answered)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done = subprocess.run(["ros2", *args], env=env, capture_output=True, text=True,
                                  timeout=max(1.0, min(attempt_s, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:   # subprocess.run has killed that attempt
            if time.monotonic() >= deadline:
                raise
            continue
        if done.returncode == 0 or "Node not found" not in done.stderr or time.monotonic() > deadline:
            return done


def test_print_and_show_arguments_list_every_node_and_argument(tools):
    """``ros2 launch -p`` prints one node action per graph node; ``-s`` every argument with its default."""
    printed = ros2(tools, "launch", "-p", *LAUNCH[2:])
    for spec in graph.NODES:
        assert f"ExecInPkg(pkg='{spec.package}', exec='{spec.executable}')" in printed, spec
    shown = ros2(tools, "launch", "-s", *LAUNCH[2:])
    for arg in graph.ARGUMENTS:
        assert f"'{arg.name}':" in shown, arg.name
    assert "(default: 'false')" in shown      # rviz


@pytest.mark.parametrize("argument, says", [
    ("robot:=gazebo", 'Argument "robot" provided value "gazebo" is not valid. Valid options are: '),
    ("task:=three", "task:='three' is not valid; expected an integer"),
    ("budget:=10", "unknown launch argument 'budget'; valid: "),
    ("rviz:=true", "rviz2 (rviz2) is not installed: it comes with a ROS 2 install; without one, launch with "
                   "rviz:=false"),
], ids=["bad-value", "bad-type", "unknown", "rviz-without-rviz2"])
def test_bad_arguments_and_rviz_without_rviz2_fail_before_anything_starts(tools, tmp_path, argument, says):
    launch = ros2_launch(tools, "robot:=fake", f"out:={tmp_path / 'run'}", argument)
    started: set[int] = set()
    assert spin_until(lambda: started.update(descendants(launch.pid)) or not launch.alive(), 60.0)
    code, out = finish(launch)
    assert code != 0 and says in out, out[-3000:]
    assert next(line for line in out.splitlines() if says in line).startswith("[ERROR] [launch")
    assert not started and not (tmp_path / "run").exists(), {p: cmdline(p) for p in started}


def param_get(env: dict, wanted: list[tuple[str, str]]) -> dict:
    """``ros2 param get <node> <name>`` for each (node, name) pair, run side by side: {(node, name): value}, the
    value read back from the line it prints (``Integer value is: 1``)."""
    with concurrent.futures.ThreadPoolExecutor(len(wanted)) as pool:
        lines = pool.map(lambda pair: ros2(env, "param", "get", *pair, *DIRECT).strip(), wanted)
    return {pair: yaml.safe_load(line.split(" value is: ", 1)[1]) for pair, line in zip(wanted, lines, strict=True)}


TWO_ROBOTS = '''"""Two robots composed the standard way, each an include of libero_sim: robot1 by its namespace:=
argument, robot2 under a pushed namespace."""
from launch import LaunchDescription
from launch.actions import GroupAction, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import PathJoinSubstitution
from launch_ros.actions import PushRosNamespace
from launch_ros.substitutions import FindPackageShare


def robot(pushed, arguments):
    source = PythonLaunchDescriptionSource(
        PathJoinSubstitution([FindPackageShare("pyrua_ros"), "launch", "libero_sim.launch.py"]))
    include = IncludeLaunchDescription(source, launch_arguments=arguments.items())
    return GroupAction([PushRosNamespace(pushed), include] if pushed else [include])


def generate_launch_description():
    return LaunchDescription([robot(None, ROBOT1), robot("robot2", ROBOT2)])
'''


def robot_nodes(pids: set[int], namespace: str) -> set[int]:
    """The node processes of ``pids`` launched under ``namespace`` (launch gives each ``-r __ns:=<namespace>``)."""
    return {pid for pid in pids if f"__ns:={namespace} " in cmdline(pid) + " "}


def test_two_namespaced_robots_in_one_launch_file_take_their_arguments_and_each_run_to_their_own_end(tools,
                                                                                                    tmp_path):
    """Two fake arms in one ROS domain, composed in one launch file as ``IncludeLaunchDescription(libero_sim)``
    twice (``/robot1`` by the ``namespace:=`` argument, ``/robot2`` in a ``GroupAction([PushRosNamespace(...),
    ...])``), each with its agent: ``ros2 param`` reads the launched values (``suite:=``/``task:=`` on both nodes of
    robot1; robot2's own agent parameter file and the episode of the driver's file); ``ros2 param dump`` of an
    agent holds every parameter it lists, with its value (an unset optional one as null), and ``ros2 param set``
    of a parameter the episode read at its start is refused with the reason; launch's own ``sigterm_timeout:=`` is
    accepted. Then each agent solves its own robot's task: robot1's episode ends and stops only robot1's driver
    while robot2's agent, still in its episode, waits on its model; the launch ends, with status 0, once both
    agents have. (Replaces a two-launch test and a composed-launch test that booted the same two graphs.)"""
    own = tmp_path / "agent.yaml"
    own.write_text("/**/agent:\n  ros__parameters:\n    budget_s: 300.0\n    cell_timeout_s: 120.0\n")
    gate, robot1_ended = threading.Event(), threading.Event()
    with ChatServer(solving_turns("the blue can", gate)) as model1, \
            ChatServer(solving_turns("the red cube", gate, robot1_ended)) as model2:
        common = {"robot": "fake", "runtime": "openai", "images": "none", "preflight": "false",
                  **dict(a.split(":=") for a in QUIET)}
        robots = {"ROBOT1": {**common, "namespace": "robot1", "suite": "fake_table", "task": "1",
                             "base_url": model1.base_url, "out": str(tmp_path / "r1")},
                  "ROBOT2": {**common, "agent_params": str(own), "base_url": model2.base_url,
                             "out": str(tmp_path / "r2")}}
        launch_file = tmp_path / "two_robots.launch.py"
        launch_file.write_text("".join(f"{k} = {v!r}\n" for k, v in robots.items()) + TWO_ROBOTS)
        temp = tmp_path / "tmp"     # the launch's temporary folder: its override files live there while it runs
        temp.mkdir()
        launch = NodeProcess(["ros2", "launch", str(launch_file), "sigterm_timeout:=20"],
                             env={**tools, "TMPDIR": str(temp)})
        tree: set[int] = set()
        try:
            # both agents have booted their episode and asked their model: the graph is up
            def asked():
                tree.update(descendants(launch.pid))
                return (model1.requests and model2.requests) or not launch.alive()
            assert spin_until(asked, 180.0), launch.output()[-4000:]
            assert launch.alive(), launch.output()[-4000:]
            overrides = list(temp.glob("pyrua_ros_launch_*/*.yaml"))    # a folder per inclusion of the file
            assert len(overrides) == 4, overrides                            # a file per node
            # one ros2 CLI process per value costs seconds of CPU each: a value of each kind of source
            got = param_get(tools, [("/robot1/agent", "task"), ("/robot1/sim", "task"), ("/robot1/agent", "budget_s"),
                                    ("/robot2/agent", "budget_s"), ("/robot2/agent", "task")])
            assert got == {("/robot1/agent", "task"): 1, ("/robot1/sim", "task"): 1,   # task:= on both nodes
                           ("/robot1/agent", "budget_s"): 1200.0,         # config/agent.yaml
                           ("/robot2/agent", "budget_s"): 300.0,          # robot2's own parameter file
                           ("/robot2/agent", "task"): 0}                   # the episode of config/fake_arm.yaml
            dumped = yaml.safe_load(ros2(tools, "param", "dump", "/robot1/agent", *DIRECT))
            values = dumped["/robot1/agent"]["ros__parameters"]     # dump lists the names, then gets them all
            assert {*graph.AGENT_PARAMETERS, "remap"} <= set(values), values
            assert (values["task"], values["budget_s"], values["vla_endpoint"]) == (1, 1200.0, None), values
            refused = ros2_answer(tools, "param", "set", "/robot1/agent", "budget_s", "10.0", *DIRECT)
            assert "Setting parameter failed: Trying to set a read-only parameter: budget_s" in refused.stderr, refused
            tree.update(descendants(launch.pid))
            nodes1, nodes2 = robot_nodes(tree, "/robot1"), robot_nodes(tree, "/robot2")
            assert len(nodes1) >= 2 and len(nodes2) >= 2, {p: cmdline(p) for p in tree}   # a driver and an agent
            gate.set()
            # robot1's agent finishes and its driver is stopped; robot2's agent, past its cell, waits on its model
            assert spin_until(lambda: tree.update(descendants(launch.pid)) or not alive(nodes1) or not launch.alive(),
                              180.0), launch.output()[-4000:]
            assert alive(nodes2) == nodes2 and launch.alive(), launch.output()[-4000:]
            robot1_ended.set()
            code, out = finish(launch)
        finally:
            gate.set()
            robot1_ended.set()
            if launch.alive():
                launch.stop(10.0)
    assert code == 0, out[-4000:]
    assert not list(temp.glob("pyrua_ros_*")), list(temp.iterdir())   # the launch took its files with it
    for run, task in (("r1", 1), ("r2", 0)):
        result = json.loads((tmp_path / run / "result.json").read_text())
        assert (result["suite"], result["task"], result["status"], result["environment_success"]) == \
            ("fake_table", task, "completed", True), result
    assert sum("process has finished cleanly" in line and "agent_node" in line for line in out.splitlines()) == 2
    assert not alive(tree), {p: cmdline(p) for p in alive(tree)}


def assert_complete_recording(run: pathlib.Path) -> None:
    """episode.mcap has its summary and index (an indexed reader reads it) and holds messages; episode.mp4 is a
    finished MP4 (its ``moov`` box is written last)."""
    from mcap.reader import make_reader

    with open(run / "episode.mcap", "rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None and summary.chunk_indexes and summary.statistics.message_count > 0, summary
        assert sum(1 for _ in reader.iter_messages()) == summary.statistics.message_count
    video = (run / "episode.mp4").read_bytes()
    assert b"ftyp" in video[:16] and b"moov" in video, len(video)


def recorded_so_far(mcap: pathlib.Path) -> dict[str, int]:
    """Messages per topic in the part of a still-growing episode.mcap written so far."""
    from mcap.records import Channel, Message
    from mcap.stream_reader import StreamReader

    topics, counts = {}, {}
    try:
        with open(mcap, "rb") as fh:
            for record in StreamReader(fh).records:
                if isinstance(record, Channel):
                    topics[record.id] = record.topic
                elif isinstance(record, Message):
                    topic = topics.get(record.channel_id, "")
                    counts[topic] = counts.get(topic, 0) + 1
    except Exception:   # the file ends mid-record while it is written (or does not exist yet)
        pass
    return counts


def every_camera_streamed(run: pathlib.Path) -> bool:
    """The agent has recorded frames of every camera stream: the video has something to show."""
    from pyrua_ros.wire.interfaces import load

    names, counts = load(), recorded_so_far(run / "episode.mcap")
    return all(counts.get("/" + names.driver.color(c).lstrip("/"), 0) >= 2 for c in names.robot.cameras)


@pytest.mark.parametrize("stop", ["ctrl-c", "ctrl-c-twice", "sigterm", "sigkill"])
def test_interrupts_leave_complete_records_and_no_process(tools, tmp_path, stop):
    """Ctrl-C once or twice, as a terminal sends it to every process group of the graph, or SIGTERM or SIGKILL to
    `ros2 launch` alone (launch then exits without stopping its processes; the nodes die with it): every process ends,
    the cell kernel included, and with recording and video on (the defaults) the episode still writes an indexed
    episode.mcap, a finished episode.mp4 and a result that says it was interrupted. Launch escalates to SIGTERM
    after its default 5 s, which the agent ignores while it writes (that SIGTERM used to abort it half-written);
    the SIGKILL is moved out to 30 s after the interrupt, since on an unloaded machine the records take 1-4 s but this
    machine's suite may run six test processes on two cores."""
    program = tmp_path / "long.py"
    program.write_text(LONG_PROGRAM)
    temp = tmp_path / "tmp"    # the launch's temporary folder (SIGTERM and SIGKILL give it no chance to clean up)
    temp.mkdir()
    launch = ros2_launch({**tools, "TMPDIR": str(temp)}, "robot:=fake", f"replay:={program}",
                         "max_episode_steps:=100000", f"out:={tmp_path / 'run'}", "sigkill_timeout:=25")
    try:
        agent = None

        def kernel_started():
            nonlocal agent
            agent = agent_running_its_kernel(launch.pid, tmp_path / "run")
            return (agent is not None and every_camera_streamed(tmp_path / "run")) or not launch.alive()

        # interrupted once the program runs and the camera streams have reached the agent (a loaded machine may
        # take seconds for the first frame; an episode interrupted before any frame has no video to write)
        assert spin_until(kernel_started, 180.0, period=0.5) and agent is not None, launch.output()[-3000:]
        if stop in ("sigterm", "sigkill"):
            tree = descendants(launch.pid) | {launch.pid}
            os.kill(launch.pid, signal.SIGTERM if stop == "sigterm" else signal.SIGKILL)
        else:
            tree = press_ctrl_c(launch.pid, agent, 2 if stop == "ctrl-c-twice" else 1)
        code, out = finish(launch, 120.0)
        assert spin_until(lambda: not alive(tree), 60.0), {p: cmdline(p) for p in alive(tree)}
    finally:
        if launch.alive():
            os.killpg(launch.pid, signal.SIGKILL)
    assert code != 0, out[-3000:]
    if stop.startswith("ctrl-c"):    # launch ran to its end and says why it failed (SIGTERM/SIGKILL end it at once)
        assert "the agent /agent exited with status 130; see its output" in out, out[-3000:]
        assert not list(temp.glob("pyrua_ros_launch_*")), list(temp.iterdir())   # and took its files with it
    # The interrupt ends every node cleanly, the driver's teardown too: no node prints a traceback or aborts, and
    # the agent ends by itself (a SIGTERM from launch's escalation is not its end).
    assert not node_tracebacks(out), out[-4000:]
    assert "terminate called" not in out, out[-4000:]
    assert not [line for line in out.splitlines() if "[agent_node-" in line and "exit code -" in line], out[-4000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "interrupted" and result["reason"] == "interrupted", result
    assert_complete_recording(tmp_path / "run")
