"""The libero_sim graph: launch file vs graph.py (launch_ros of a ROS 2 install, else of .venv-launch), the pip
runner's command lines and its supervision of real child processes, and the terminal progress view both of them
show."""

import asyncio
import importlib
import importlib.util
import io
import pathlib
import shutil
import sys
import threading
import types

import pytest
import yaml

from pyrua_ros.bringup import graph, runner
from pyrua_ros.testing.ros2_tools import extend_python_path, require_tools

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAUNCH_FILE = ROOT / "launch" / "libero_sim.launch.py"


def _by_key(values=None):
    return {n.key: n for n in graph.plan(values or {})}


def _params(argv):
    """``-p k:=v`` pairs of an argv, values read back the way rcl reads them (YAML)."""
    return {argv[i + 1].partition(":=")[0]: yaml.safe_load(argv[i + 1].partition(":=")[2])
            for i, a in enumerate(argv) if a == "-p"}


# --- the launch file, wherever launch_ros is importable -------------------------------------------------------

def _launch_module():
    if importlib.util.find_spec("launch_ros") is None:     # no ROS 2 install: the launch tooling of .venv-launch
        require_tools()
        extend_python_path()
    try:
        launch = importlib.import_module("launch")
        importlib.import_module("launch_ros")
    except ImportError as exc:
        pytest.skip(f"launch_ros is not importable here ({exc}); it exists on a ROS 2 install")
    if not hasattr(launch, "LaunchDescription"):
        pytest.skip("the importable 'launch' is not ROS launch (PyPI 'launch' 0.1.3 is an unrelated app)")
    spec = importlib.util.spec_from_file_location("libero_sim_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launch_file_declares_every_graph_argument():
    module = _launch_module()
    import launch.actions
    import launch.utilities

    ld = module.generate_launch_description()
    declared = [e for e in ld.entities if isinstance(e, launch.actions.DeclareLaunchArgument)]
    assert [d.name for d in declared] == [a.name for a in graph.ARGUMENTS]
    context = launch.LaunchContext()
    for d, arg in zip(declared, graph.ARGUMENTS, strict=True):
        assert launch.utilities.perform_substitutions(context, d.default_value) == arg.launch_default
        shown = d.description.removesuffix(f" Valid choices are: {d.choices}") if d.choices else d.description
        assert shown in (arg.description, arg.description + ".")   # launch appends the choices after a full stop


def test_launch_file_holds_one_static_node_per_graph_node():
    """Static Node actions (so ``ros2 launch -p`` lists them), each started exactly when graph.plan plans it."""
    module = _launch_module()
    from launch_ros.actions import Node

    import launch

    ld = module.generate_launch_description()
    nodes = [e for e in ld.entities if isinstance(e, Node)]
    assert [(n.node_package, n.node_executable) for n in nodes] == [(s.package, s.executable) for s in graph.NODES]
    for robot in ("sim", "fake", "external"):
        context = launch.LaunchContext()
        values = {a.name: a.launch_default for a in graph.ARGUMENTS} | {"robot": robot, "rviz": "true"}
        context.launch_configurations.update(values)
        started = [s.key for s, n in zip(graph.NODES, nodes) if n.condition.evaluate(context)]
        assert started == [p.key for p in graph.plan(values)]


def test_launch_waits_for_every_agent_and_fails_if_any_failed():
    """Two robots included in one launch: the first agent to exit (failed) stops only its robot; the last one to
    exit ends the launch, failing it with the failed agent's status (test_ros2_launch.py runs two for real)."""
    module = _launch_module()

    from launch.actions import EmitEvent, Shutdown

    import launch

    context = launch.LaunchContext()
    for _ in range(2):        # what check_before_starting does for each included robot
        module.agents(context)["running"] += 1
    robot = [object()]         # the robot's other node actions

    def exited(name, code):
        return types.SimpleNamespace(returncode=code, action=types.SimpleNamespace(node_name=name))

    def in_launch_loop(name, code, context):
        """agent_exited as launch calls it, inside its asyncio loop: the actions, and the errors the loop was told
        (launch's run loop counts each in its exit status)."""
        errors = []

        async def handle():
            asyncio.get_running_loop().set_exception_handler(lambda loop, error: errors.append(error["message"]))
            return module.agent_exited(exited(name, code), context, robot=robot)
        return asyncio.run(handle()), errors

    first, errors = in_launch_loop("/armA/agent", 1, context)
    assert [type(a) for a in first] == [EmitEvent] and errors == []    # armA's driver is stopped; no Shutdown yet
    last, errors = in_launch_loop("/armB/agent", 0, context)
    assert isinstance(last[-1], Shutdown)                               # the launch ends, as a failure
    assert len(errors) == 1 and errors[0].startswith("the agent /armA/agent exited with status 1"), errors
    context = launch.LaunchContext()
    module.agents(context)["running"] += 1
    last, errors = in_launch_loop("/agent", 0, context)
    assert isinstance(last[-1], Shutdown) and errors == []


# --- graph.py ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("robot, keys", [("sim", ["sim", "agent"]), ("fake", ["fake", "agent"]),
                                         ("external", ["agent"])])
def test_robot_argument_picks_the_driver(robot, keys):
    planned = graph.plan({"robot": robot})
    assert [n.key for n in planned] == keys
    assert [n.name for n in planned] == [{"sim": "sim", "fake": "sim", "agent": "agent"}[k] for k in keys]
    agent = planned[-1]
    assert agent.is_agent and agent.shutdown_on_exit
    assert agent.parameters["use_sim_time"] is (robot != "external")
    assert all(n.shutdown_on_exit for n in planned)


def test_unset_arguments_leave_the_parameter_files_in_charge():
    """Nothing the command line did not give reaches a node as an override, except what the graph decides: the
    agent resets the driver to the episode of the driver's own parameter file."""
    nodes = _by_key({})
    assert nodes["sim"].parameters == {}
    assert nodes["sim"].params_files == (graph.config_dir() / "sim.yaml",)
    sim_file = graph.node_parameters(nodes["sim"].params_files[0], "sim")
    assert nodes["agent"].parameters == {"use_sim_time": True} | {k: sim_file[k] for k in
                                                                  ("suite", "task", "seed", "max_episode_steps")}
    fake = _by_key({"robot": "fake"})
    assert fake["agent"].parameters["suite"] == "fake_table" and fake["fake"].parameters == {}
    external = _by_key({"robot": "external"})["agent"]
    assert external.parameters == {"use_sim_time": False}      # config/agent.yaml decides the episode


def test_given_arguments_reach_driver_and_agent():
    nodes = _by_key({"suite": "libero_goal_swap", "task": "3", "seed": "7", "clock_mode": "realtime"})
    for key in ("sim", "agent"):
        assert {k: nodes[key].parameters[k] for k in ("suite", "task", "seed")} == \
            {"suite": "libero_goal_swap", "task": 3, "seed": 7}
    assert nodes["sim"].parameters["clock_mode"] == "realtime"
    assert "clock_mode" not in nodes["agent"].parameters
    assert "use_sim_time" not in nodes["sim"].parameters      # the sim is the clock
    fake = _by_key({"robot": "fake", "task": "1"})
    assert fake["fake"].parameters == {"task": 1} and fake["agent"].parameters["suite"] == "fake_table"


def test_namespace_and_parameter_files_arguments(tmp_path):
    own = tmp_path / "my_sim.yaml"
    own.write_text("/**/sim:\n  ros__parameters:\n    suite: libero_goal\n    task: 3\n")
    nodes = _by_key({"namespace": "robot1", "driver_params": str(own), "rviz": "true"})
    assert {n.namespace for n in nodes.values()} == {"/robot1"}
    assert nodes["sim"].params_files == (graph.config_dir() / "sim.yaml", own)
    assert nodes["agent"].parameters["task"] == 3
    assert ("/clock", "clock") in nodes["agent"].remappings
    assert {("/tf", "tf"), ("/tf_static", "tf_static")} <= set(nodes["rviz"].remappings)
    assert runner.ros_arguments(nodes["sim"])[3:5] == ["-r", "__ns:=/robot1"]
    with pytest.raises(ValueError, match="namespace:='1robot' is not valid"):
        graph.plan({"namespace": "1robot"})


@pytest.mark.parametrize("robot, packaged", [("sim", "sim.yaml"), ("fake", "fake_arm.yaml")])
def test_a_partial_parameter_file_changes_only_what_it_sets(tmp_path, robot, packaged):
    """A driver file that sets only the seed and a speed: the driver loads the packaged file first, then this one,
    and the agent resets it to the packaged file's task and suite with that seed (the task comes from one place:
    the driver's files); the runner passes both files in that order."""
    own = tmp_path / "my_driver.yaml"
    own.write_text("/**/sim:\n  ros__parameters:\n    seed: 4\n    max_linear_speed: 0.5\n")
    nodes = _by_key({"robot": robot, "driver_params": str(own)})
    driver = nodes["sim" if robot == "sim" else "fake"]
    shipped = graph.node_parameters(graph.config_dir() / packaged, "sim")
    assert driver.params_files == (graph.config_dir() / packaged, own) and driver.parameters == {}
    args = runner.ros_arguments(driver)
    assert [args[i + 1] for i, a in enumerate(args) if a == "--params-file"] == [str(p) for p in driver.params_files]
    assert graph.files_parameters(driver.params_files, "sim") == shipped | {"seed": 4, "max_linear_speed": 0.5}
    episode = {k: nodes["agent"].parameters[k] for k in ("suite", "task", "seed", "max_episode_steps")}
    assert episode == {"suite": shipped["suite"], "task": shipped["task"], "seed": 4,
                       "max_episode_steps": shipped["max_episode_steps"]}
    assert graph.agent_episode(nodes.values()) == episode
    partial_agent = tmp_path / "my_agent.yaml"
    partial_agent.write_text("/**/agent:\n  ros__parameters:\n    budget_s: 60.0\n")
    agent = _by_key({"robot": robot, "agent_params": str(partial_agent)})["agent"]
    assert agent.params_files == (graph.config_dir() / "agent.yaml", partial_agent)
    assert graph.agent_episode([agent]) == graph.agent_episode(_by_key({"robot": robot}).values())


def test_bad_values_name_what_is_valid():
    with pytest.raises(ValueError, match="choose one of sim, fake, external"):
        graph.plan({"robot": "gazebo"})
    with pytest.raises(ValueError, match="expected an integer"):
        graph.plan({"task": "three"})
    with pytest.raises(ValueError, match="expected a JSON object"):
        graph.plan({"openai_extra_body": "[1, 2]"})
    with pytest.raises(ValueError, match=r"valid: .*budget_s"):
        graph.parse_launch_args(["budget:=10"])
    with pytest.raises(ValueError, match="not name:=value"):
        graph.parse_launch_args(["task=3"])
    with pytest.raises(ValueError, match="not from:=to"):
        graph.plan({"remap": "/ee_pose"})


def test_agent_yaml_holds_every_agent_parameter_with_the_graph_default():
    params = graph.node_parameters(graph.config_dir() / "agent.yaml", "agent")
    declared = [name for name in graph.AGENT_PARAMETERS if name not in ("use_sim_time", "remap")]
    defaults = {name: graph.ARGUMENTS_BY_NAME[name].typed_default() for name in declared}
    # every agent parameter with a default is in the file with that default; unset optionals are not
    assert {k: params[k] for k in defaults if defaults[k] is not None} == \
        {k: v for k, v in defaults.items() if v is not None}
    assert set(params) <= set(graph.AGENT_PARAMETERS)


@pytest.mark.parametrize("file, node", [("sim.yaml", "sim"), ("fake_arm.yaml", "sim"), ("agent.yaml", "agent")])
def test_parameter_files_apply_to_their_node_in_any_namespace(file, node):
    """``/**/<node>`` keys: rcl gives the file's values to the node under /robot1 as well as at the root."""
    import rclpy

    expected = graph.node_parameters(graph.config_dir() / file, node)
    for namespace in ("/", "/robot1"):
        context = rclpy.Context()
        rclpy.init(args=["x", "--ros-args", "-r", f"__ns:={namespace}", "--params-file",
                         str(graph.config_dir() / file)], context=context)
        try:
            n = rclpy.create_node(node, context=context, automatically_declare_parameters_from_overrides=True)
            got = {k: n.get_parameter(k).value for k in expected}
            assert got == expected and n.get_namespace() == namespace
            n.destroy_node()
        finally:
            rclpy.shutdown(context=context)


def test_the_agent_reads_its_remap_parameter_only_where_its_arguments_may_set_it(tmp_path, monkeypatch):
    """``remap`` from ``-p`` or a parameter file becomes global ``-r`` arguments, read on a real probe node; without
    a mention of it in the arguments or their files no probe node is made (the default is no remapping)."""
    import rclpy

    from pyrua_ros.nodes import agent_node

    packaged = ["agent_node", "--ros-args", "-r", "__node:=agent", "--params-file",
                str(graph.config_dir() / "agent.yaml")]
    own = tmp_path / "agent.yaml"
    own.write_text("/**/agent:\n  ros__parameters:\n    remap: /ee_pose:=/arm/pose\n")
    made = []
    create_node = rclpy.create_node
    monkeypatch.setattr(rclpy, "create_node", lambda *a, **k: made.append(a) or create_node(*a, **k))
    assert agent_node.remap_arguments(packaged) == [] and made == []
    assert agent_node.remap_arguments([*packaged, "-p", "remap:=/ee_pose:=/arm/pose,/tf:=/arm/tf"]) == \
        ["--ros-args", "-r", "/ee_pose:=/arm/pose", "-r", "/tf:=/arm/tf"]
    assert agent_node.remap_arguments([*packaged, "--params-file", str(own)]) == \
        ["--ros-args", "-r", "/ee_pose:=/arm/pose"]
    assert len(made) == 2


# --- the pip runner's command lines -----------------------------------------------------------------------------

def test_runner_arguments_match_the_plan():
    nodes = _by_key({"task": "3", "model": "true", "openai_extra_body": '{"top_p": 0.95}',
                     "remap": "/ee_pose:=/franka_robot_state_broadcaster/current_pose"})
    sim = runner.ros_arguments(nodes["sim"])
    assert sim[:5] == ["--ros-args", "-r", "__node:=sim", "--params-file", str(graph.config_dir() / "sim.yaml")]
    agent = runner.ros_arguments(nodes["agent"])
    assert _params(agent) == nodes["agent"].parameters
    assert _params(agent)["model"] == "true"                  # a string stays a string through YAML
    assert _params(agent)["openai_extra_body"] == '{"top_p": 0.95}'
    assert _params(agent)["remap"] == "/ee_pose:=/franka_robot_state_broadcaster/current_pose"
    assert "out" not in _params(agent)                        # unset: config/agent.yaml decides
    assert agent[-2:] == ["-r", "/clock:=clock"]
    assert _params(sim) == nodes["sim"].parameters == {"task": 3}


def test_rcl_reads_the_runner_arguments_back_with_their_types():
    """The params file and every -p override reach a real rclpy node with the planned value and type."""
    import rclpy

    agent = _by_key({"model": "true", "openai_extra_body": '{"top_p": 0.95}', "task": "3", "out": "x"})["agent"]
    context = rclpy.Context()
    rclpy.init(args=["agent_node", *runner.ros_arguments(agent)], context=context)
    try:
        node = rclpy.create_node("unnamed", context=context, automatically_declare_parameters_from_overrides=True)
        got = {k: node.get_parameter(k).value for k in agent.parameters}
        assert node.get_name() == "agent"
        assert got == agent.parameters
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in agent.parameters.items()}
        assert node.get_parameter("budget_s").value == 1200.0     # from config/agent.yaml
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_runner_finds_installed_wrappers_else_runs_the_module(tmp_path):
    agent = _by_key({})["agent"]
    fallback = runner.node_executable(agent, prefix=tmp_path)
    assert fallback == [sys.executable, "-m", "pyrua_ros.nodes.agent_node"]
    wrapper = tmp_path / "lib" / "pyrua_ros" / "agent_node"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text("#!/bin/sh\n")
    wrapper.chmod(0o755)
    assert runner.node_executable(agent, prefix=tmp_path) == [str(wrapper)]
    full = runner.command(agent, prefix=tmp_path)
    assert full[0] == str(wrapper) and full[1:4] == ["--ros-args", "-r", "__node:=agent"]


def test_runner_refuses_missing_parameter_files_and_rviz_without_ros(tmp_path, monkeypatch):
    import dataclasses

    agent = dataclasses.replace(_by_key({})["agent"], params_files=(tmp_path / "nope.yaml",))
    with pytest.raises(runner.LaunchError, match=r"nope\.yaml .* does not exist"):
        runner.command(agent)
    rviz = _by_key({"rviz": "true"})["rviz"]
    assert rviz.arguments == ("-d", str(graph.config_dir() / graph.RVIZ_CONFIG))
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(runner.LaunchError, match="rviz:=false"):
        runner.node_executable(rviz)
    assert graph.missing_executables(graph.plan({"rviz": "true"})) == [
        "rviz2 (rviz2) is not installed: it comes with a ROS 2 install; without one, launch with rviz:=false"]


def test_runner_main_prints_commands_and_rejects_bad_arguments(capsys):
    assert runner.main(["libero_sim", "--print", "robot:=external", "budget_s:=60"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "__node:=agent" in lines[0] and "budget_s:=60.0" in lines[0]
    assert runner.main(["libero_sim", "robot:=gazebo"]) == 2
    assert "choose one of sim, fake, external" in capsys.readouterr().err


# --- the runner supervising real child processes ----------------------------------------------------------------

SLEEPER = "import time\nprint('up', flush=True)\nwhile True: time.sleep(0.05)\n"
STUBBORN = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('up', flush=True)\n"
            "while True: time.sleep(0.05)\n")


def _py(code):
    return (sys.executable, "-c", code)


def _run(kids, **kw):
    out = io.StringIO()
    r = runner.Runner(kids, env=kw.pop("env", None), out=out)
    code = r.run()
    return code, out.getvalue(), r


def test_agent_exit_code_is_the_launch_exit_code_and_the_driver_is_stopped():
    code, out, r = _run([runner.Child("sim", _py(SLEEPER)),
                         runner.Child("agent", _py("import time; time.sleep(0.5); print('hello'); raise "
                                                   "SystemExit(3)"), is_agent=True)])
    assert code == 3 and r.ended_by == "agent"
    assert "[agent] hello" in out and "[sim  ] up" in out
    assert all(p.poll() is not None for p in r._procs.values())


def test_driver_exit_ends_the_launch_and_fails_it():
    code, _out, r = _run([runner.Child("sim", _py("import time; time.sleep(0.3); raise SystemExit(0)")),
                         runner.Child("agent", _py(SLEEPER), is_agent=True)])
    assert r.ended_by == "sim"
    assert code == 130          # the agent died of the SIGINT the runner sent it


def test_stop_request_escalates_to_sigterm_for_a_child_ignoring_sigint(monkeypatch):
    monkeypatch.setattr(runner, "SIGINT_GRACE_S", 0.5)
    kids = [runner.Child("sim", _py(STUBBORN)), runner.Child("agent", _py(SLEEPER), is_agent=True)]
    r = runner.Runner(kids, out=io.StringIO())
    threading.Timer(1.5, r.request_stop).start()     # what Ctrl-C does
    code = r.run()
    assert r.ended_by == "signal" and code == 130
    assert r._procs["sim"].returncode == -15         # SIGTERM after the SIGINT grace
