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
- The driver ends the launch when it exits; so does the agent, and a non-zero agent exit makes the launch fail.
- Only node parameters given on the command line override the parameter files (``graph`` module docstring).
"""

import os
import sys
import tempfile

from launch import Condition, LaunchDescription, Substitution
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler, Shutdown
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from pyrua_ros.bringup import graph


def argument_values(context) -> dict:
    """The text of every graph argument in this launch."""
    return {arg.name: LaunchConfiguration(arg.name).perform(context) for arg in graph.ARGUMENTS}


def planned(context, key: str):
    """The PlannedNode of ``key`` for this launch's arguments, or None when the graph does not start it."""
    return next((n for n in graph.plan(argument_values(context)) if n.key == key), None)


class PlannedParameterFile(Substitution):
    """Path of the parameter file ``graph.plan`` gives a node (packaged, or ``driver_params``/``agent_params``)."""

    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def describe(self) -> str:
        return f"PlannedParameterFile({self.key})"

    def perform(self, context) -> str:
        return str(planned(context, self.key).params_file)


class PlannedOverrides(Substitution):
    """Path of a parameter file holding only the overrides ``graph.plan`` gives a node (arguments given on the
    command line, the agent's episode, use_sim_time)."""

    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def describe(self) -> str:
        return f"PlannedOverrides({self.key})"

    def perform(self, context) -> str:
        node = planned(context, self.key)
        with tempfile.NamedTemporaryFile("w", prefix=f"pyrua_ros_{self.key}_", suffix=".yaml", delete=False) as fh:
            fh.write(graph.overrides_yaml(node))
        return fh.name


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
    return []


def agent_exited(event, context):
    """End the launch with the agent; a failed episode fails the launch."""
    if event.returncode != 0:
        raise RuntimeError(f"the agent exited with status {event.returncode}; see its output and <out>/result.json")
    return [Shutdown(reason="the agent finished its episode")]


def node_action(spec: graph.NodeSpec) -> Node:
    parameters = [PlannedParameterFile(spec.key)] if spec.params_file else []
    parameters.append(PlannedOverrides(spec.key))
    options = {}
    if spec.shutdown_on_exit and spec.role != "agent":
        options["on_exit"] = Shutdown(reason=f"{spec.name} exited")
    arguments = ["-d", str(graph.config_dir() / graph.RVIZ_CONFIG)] if spec.key == "rviz" else []
    return Node(package=spec.package, executable=spec.executable, name=spec.name,
                namespace=LaunchConfiguration("namespace"), arguments=arguments, parameters=parameters,
                remappings=list(spec.remappings()), additional_env={"PYRUA_INTERFACES": InterfacesFile()},
                condition=Condition(predicate=lambda context, s=spec: planned(context, s.key) is not None),
                output="screen", **options)


def generate_launch_description() -> LaunchDescription:
    # An unset argument (a node parameter left to its parameter file, an optional setting) is the empty text,
    # so the empty text is one of its choices.
    declared = [DeclareLaunchArgument(arg.name, default_value=arg.launch_default, description=arg.description,
                                      choices=[*arg.choices, ""] if arg.choices and (arg.to or arg.optional) else
                                      list(arg.choices) or None)
                for arg in graph.ARGUMENTS]
    nodes = {spec.key: node_action(spec) for spec in graph.NODES}
    on_agent_exit = RegisterEventHandler(OnProcessExit(target_action=nodes[graph.AGENT_KEY], on_exit=agent_exited))
    return LaunchDescription([*declared, OpaqueFunction(function=check_before_starting), *nodes.values(),
                              on_agent_exit])
