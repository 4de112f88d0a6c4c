"""The libero_sim graph: launch file vs graph.py (where launch_ros exists), the pip runner's command lines and
its supervision of real child processes, and the terminal progress view both of them show."""

import importlib
import importlib.util
import io
import pathlib
import shutil
import sys
import threading

import pytest
import yaml

from pyrua_ros.bringup import graph, runner

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
        assert launch.utilities.perform_substitutions(context, d.default_value) == arg.default
        assert d.description == arg.description


@pytest.mark.parametrize("robot", ["sim", "fake", "external"])
def test_launch_file_starts_the_planned_nodes(robot):
    module = _launch_module()
    import launch.utilities

    context = launch.LaunchContext()
    values = {a.name: a.default for a in graph.ARGUMENTS} | {"robot": robot, "rviz": "true"}
    context.launch_configurations.update(values)

    def text(x):
        return x if isinstance(x, str) else launch.utilities.perform_substitutions(context, x)

    nodes = module.launch_nodes(context)
    planned = graph.plan(values)
    assert [(text(n.node_package), text(n.node_executable)) for n in nodes] == \
        [(p.package, p.executable) for p in planned]


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


def test_episode_arguments_reach_sim_and_agent():
    nodes = _by_key({"suite": "libero_goal_swap", "task": "3", "seed": "7", "clock_mode": "realtime"})
    for key in ("sim", "agent"):
        assert {k: nodes[key].parameters[k] for k in ("suite", "task", "seed")} == \
            {"suite": "libero_goal_swap", "task": 3, "seed": 7}
    assert nodes["sim"].parameters["clock_mode"] == "realtime"
    assert "clock_mode" not in nodes["agent"].parameters
    assert "use_sim_time" not in nodes["sim"].parameters      # the sim is the clock


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
    data = yaml.safe_load((graph.config_dir() / "agent.yaml").read_text())
    params = data["agent"]["ros__parameters"]
    defaults = _by_key({})["agent"].parameters
    assert {k: params[k] for k in defaults if k != "use_sim_time"} == \
        {k: v for k, v in defaults.items() if k != "use_sim_time"}
    assert set(params) <= set(graph.AGENT_PARAMETERS)


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
    assert "out" not in _params(agent)                        # unset optional settings are not passed
    assert agent[-2:] == ["-r", "/ee_pose:=/franka_robot_state_broadcaster/current_pose"]
    assert _params(sim) == nodes["sim"].parameters


def test_rcl_reads_the_runner_arguments_back_with_their_types():
    """The params file and every -p override reach a real rclpy node with the planned value and type."""
    import rclpy

    agent = _by_key({"model": "true", "openai_extra_body": '{"top_p": 0.95}', "task": "3", "out": ""})["agent"]
    context = rclpy.Context()
    rclpy.init(args=["agent_node", *runner.ros_arguments(agent)], context=context)
    try:
        node = rclpy.create_node("unnamed", context=context, automatically_declare_parameters_from_overrides=True)
        got = {k: node.get_parameter(k).value for k in agent.parameters}
        assert node.get_name() == "agent"
        assert got == agent.parameters
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in agent.parameters.items()}
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

    agent = dataclasses.replace(_by_key({})["agent"], params_file=tmp_path / "nope.yaml")
    with pytest.raises(runner.LaunchError, match=r"nope\.yaml .* does not exist"):
        runner.command(agent)
    rviz = _by_key({"rviz": "true"})["rviz"]
    assert rviz.arguments == ("-d", str(graph.config_dir() / graph.RVIZ_CONFIG))
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(runner.LaunchError, match="rviz:=false"):
        runner.node_executable(rviz)


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
