"""ros2 launch pyrua_ros libero_sim.launch.py [name:=value ...]: one episode (driver + agent, optional rviz).

The graph (arguments, nodes, parameters, remappings, conditions) is described once, in
``pyrua_ros.bringup.graph``; this file only turns that description into launch_ros actions. Every argument is
declared with its default, description and allowed values (``ros2 launch pyrua_ros libero_sim.launch.py -s``
lists them); an OpaqueFunction reads their values at launch time, asks ``graph.plan`` which nodes to start and
builds one ``Node`` each. The agent and the driver end the launch when they exit (``on_exit=Shutdown``).

The pip runner (``pyrua-ros launch libero_sim ...``) starts the same plan without launch_ros.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from pyrua_ros.bringup import graph


def node_action(planned: graph.PlannedNode) -> Node:
    """A launch_ros Node for one planned node: parameter file first, then the typed overrides."""
    parameters = []
    if planned.params_file is not None:
        parameters.append(str(planned.params_file))
    # Strings stay strings (launch would otherwise read "true" or "{}" as YAML); other types are already typed.
    overrides = {name: ParameterValue(value, value_type=str) if isinstance(value, str) else value
                 for name, value in planned.parameters.items()}
    if overrides:
        parameters.append(overrides)
    options = {}
    if planned.env:
        options["additional_env"] = dict(planned.env)
    if planned.shutdown_on_exit:
        options["on_exit"] = Shutdown(reason=f"{planned.name} exited")
    return Node(package=planned.package, executable=planned.executable, name=planned.name,
                arguments=list(planned.arguments), parameters=parameters, remappings=list(planned.remappings),
                output="screen", **options)


def launch_nodes(context, *args, **kwargs):
    """OpaqueFunction body: argument values of this launch -> graph.plan -> Node actions."""
    values = {arg.name: LaunchConfiguration(arg.name).perform(context) for arg in graph.ARGUMENTS}
    return [node_action(planned) for planned in graph.plan(values)]


def generate_launch_description() -> LaunchDescription:
    # An optional argument's empty default means "unset", so the empty text is one of its choices.
    declared = [DeclareLaunchArgument(arg.name, default_value=arg.default, description=arg.description,
                                      choices=[*arg.choices, *([""] if arg.optional else [])] if arg.choices else None)
                for arg in graph.ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=launch_nodes)])
