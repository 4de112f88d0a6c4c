"""ros2 launch pyrua_ros libero_sim.launch.py [name:=value ...]: one episode (driver + agent, optional rviz).

The graph (arguments, nodes, parameters, remappings, conditions) is described once, in
``pyrua_ros.bringup.graph``; this file only turns that description into launch actions. Every argument is declared
with its default, description and allowed values (``-s`` lists them); every node of ``graph.NODES`` is a static
``launch_ros`` ``Node`` (``-p`` prints them all) whose condition, parameter file and parameter overrides are
resolved by ``graph.plan`` from the argument values at launch time, so this launch and the pip runner
(``pyrua-ros launch libero_sim ...``) start the same processes with the same parameters.

- Before any node starts, the arguments and the executables of the planned nodes are checked: a bad value, an
  argument this file does not declare (when it is the launch file named on the command line; an including launch
  file may have arguments of its own), or ``rviz:=true`` without rviz2 fails at once, with nothing started.
- Each robot runs to its own end: when its agent exits, its driver (and rviz) are stopped; when its driver exits
  first, its agent is stopped. Only when every agent of the launch has exited (every robot that a launch file
  including this one several times, e.g. under ``PushRosNamespace``, started) does the launch shut down, and it
  fails if any agent exited non-zero. One robot finishing never stops another.
- Every node gets ``PYRUA_PARENT_PID`` (this ``ros2 launch`` process): it dies with the launch even when the
  launch is ended by SIGTERM or SIGKILL, which upstream launch does not pass on to its processes.
- ``sigterm_timeout``/``sigkill_timeout`` are launch's own escalation times (declared here with launch's defaults,
  so ``sigterm_timeout:=20`` is accepted and shown by ``-s``).
- Only node parameters given on the command line override the parameter files (``graph`` module docstring).
"""

import asyncio
import atexit
import functools
import os
import shutil
import sys
import tempfile

from launch import Condition, LaunchDescription, Substitution
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessExit
from launch.events.process import ShutdownProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from pyrua_ros.bringup import graph
from pyrua_ros.wire.rosenv import PARENT_PID_VAR

#: key of the launch-wide record of agents (context globals, shared by every inclusion of this file)
AGENTS = "pyrua_ros_agents"


def argument_values(context) -> dict:
    """The text of every graph argument in this launch."""
    return {arg.name: LaunchConfiguration(arg.name).perform(context) for arg in graph.ARGUMENTS}


def planned(context, key: str):
    """The PlannedNode of ``key`` for this launch's arguments, or None when the graph does not start it."""
    return next((n for n in graph.plan(argument_values(context)) if n.key == key), None)


class PlannedParameterFile(Substitution):
    """Path of the ``index``-th parameter file ``graph.plan`` gives a node (the packaged one, then
    ``driver_params``/``agent_params``); an index it does not have is the packaged file again (loading a file
    twice changes nothing)."""

    def __init__(self, key: str, index: int):
        super().__init__()
        self.key, self.index = key, index

    def describe(self) -> str:
        return f"PlannedParameterFile({self.key}, {self.index})"

    def perform(self, context) -> str:
        files = planned(context, self.key).params_files
        return str(files[self.index] if self.index < len(files) else files[0])


class PlannedOverrides(Substitution):
    """Path of a parameter file holding only the overrides ``graph.plan`` gives a node (arguments given on the
    command line, the agent's episode, use_sim_time), in :func:`overrides_folder`."""

    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def describe(self) -> str:
        return f"PlannedOverrides({self.key})"

    def perform(self, context) -> str:
        node = planned(context, self.key)
        with tempfile.NamedTemporaryFile("w", prefix=f"{self.key}_", suffix=".yaml", dir=overrides_folder(),
                                         delete=False) as fh:
            fh.write(graph.overrides_yaml(node))
        return fh.name


@functools.cache
def overrides_folder() -> str:
    """A private folder (``$TMPDIR/pyrua_ros_launch_*``, mode 0700; one per inclusion of this file) for the override
    files, removed when the ``ros2 launch`` process exits: its nodes read their files as they start, and launch
    outlives them. (Each launch used to leave one file per node in the temporary folder; a launch ended by SIGKILL
    still leaves its folder.)"""
    folder = tempfile.mkdtemp(prefix="pyrua_ros_launch_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


class InterfacesFile(Substitution):
    """The ``interfaces`` argument as an absolute path (PYRUA_INTERFACES), or empty."""

    def describe(self) -> str:
        return "InterfacesFile()"

    def perform(self, context) -> str:
        node = next(iter(graph.plan(argument_values(context))))
        return node.env.get("PYRUA_INTERFACES", "")


#: arguments ``ros2 launch`` itself adds for its --launch-prefix options
ROS2_LAUNCH_ARGUMENTS = ("launch-prefix", "launch-prefix-filter")


def launched_directly(context) -> bool:
    """Whether this is the launch file the command line names (``ros2 launch pyrua_ros libero_sim.launch.py``),
    not one included by another launch file."""
    return os.path.basename(__file__) in {os.path.basename(a) for a in sys.argv[1:]}


def check_before_starting(context, *args, **kwargs):
    """OpaqueFunction body, before every node: fail the launch, starting nothing, on an unknown argument, a bad
    value or a missing executable."""
    if launched_directly(context):
        graph.parse_launch_args(a for a in context.argv if a.partition(":=")[0] not in ROS2_LAUNCH_ARGUMENTS)
    missing = graph.missing_executables(graph.plan(argument_values(context)))
    if missing:
        raise RuntimeError("; ".join(missing))
    agents(context)["running"] += 1    # this robot's agent starts (every robot is counted before any episode ends)
    return []


def agents(context) -> dict:
    """The launch-wide record of agents: ``running`` (started, not yet exited) and ``failed`` (their messages)."""
    record = context.get_locals_as_dict().get(AGENTS)
    if record is None:
        record = {"running": 0, "failed": []}
        context.extend_globals({AGENTS: record})
    return record


def stop(actions) -> list:
    """Events that stop the processes of ``actions`` that still run (SIGINT, then launch's escalation)."""
    return [EmitEvent(event=ShutdownProcess(process_matcher=lambda proc, a=a: proc is a)) for a in actions]


def agent_exited(event, context, *, robot):
    """One robot's agent exited: stop the rest of that robot; once every agent of the launch has exited, end the
    launch, failing it if any agent exited non-zero."""
    record = agents(context)
    record["running"] -= 1
    if event.returncode != 0:
        record["failed"].append(f"the agent {event.action.node_name} exited with status {event.returncode}")
    if record["running"] > 0:
        return stop(robot)
    if record["failed"]:
        fail_launch("; ".join(record["failed"]) + "; see its output and <out>/result.json")
    return [*stop(robot), Shutdown(reason="every agent finished its episode")]


def fail_launch(message: str) -> None:
    """Make ``ros2 launch`` exit non-zero once it has shut down, printing ``message``: reported to the asyncio
    loop's exception handler, which launch's run loop sets to count every error it reports in the exit status.

    Not by raising from the event handler: launch's "Caught exception in launch" path skips the rest of that event's
    handlers and can leave launch waiting forever with every process ended (ros2/launch#112; seen here once in
    about ten runs of a double Ctrl-C, launch still up 120 s after both nodes had exited).
    """
    asyncio.get_running_loop().call_exception_handler({"message": message})


def driver_exited(event, context, *, robot):
    """A robot's driver exited: stop the rest of that robot (its agent's episode ends as interrupted)."""
    return stop(robot)


def node_action(spec: graph.NodeSpec) -> Node:
    parameters = [PlannedParameterFile(spec.key, 0), PlannedParameterFile(spec.key, 1)] if spec.params_file else []
    parameters.append(PlannedOverrides(spec.key))
    arguments = ["-d", str(graph.config_dir() / graph.RVIZ_CONFIG)] if spec.key == "rviz" else []
    # PYRUA_PARENT_PID: this launch file runs inside the `ros2 launch` process, the nodes' parent
    return Node(package=spec.package, executable=spec.executable, name=spec.name,
                namespace=LaunchConfiguration("namespace"), arguments=arguments, parameters=parameters,
                remappings=list(spec.remappings()),
                additional_env={"PYRUA_INTERFACES": InterfacesFile(), PARENT_PID_VAR: str(os.getpid())},
                condition=Condition(predicate=lambda context, s=spec: planned(context, s.key) is not None),
                output="screen")


def generate_launch_description() -> LaunchDescription:
    # An unset argument (a node parameter left to its parameter file, an optional setting) is the empty text,
    # so the empty text is one of its choices.
    declared = [DeclareLaunchArgument(arg.name, default_value=arg.launch_default, description=arg.description,
                                      choices=[*arg.choices, ""] if arg.choices and (arg.to or arg.optional) else
                                      list(arg.choices) or None)
                for arg in graph.ARGUMENTS]
    nodes = {spec.key: node_action(spec) for spec in graph.NODES}
    agent = nodes[graph.AGENT_KEY]
    others = [n for key, n in nodes.items() if key != graph.AGENT_KEY]
    drivers = [nodes[s.key] for s in graph.NODES if s.role == "driver" and s.shutdown_on_exit]
    handlers = [
        RegisterEventHandler(OnProcessExit(target_action=agent, on_exit=lambda event, context:
                                           agent_exited(event, context, robot=others))),
        RegisterEventHandler(OnProcessExit(target_action=lambda proc: proc in drivers, on_exit=lambda event, context:
                                           driver_exited(event, context, robot=[agent, *others]))),
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=check_before_starting), *nodes.values(),
                              *handlers])
