"""Executable of the agent node ``agent``: one episode of the cell-writing loop over ROS 2, then exit.

Run by the launch file / pip runner (``pyrua-ros launch libero_sim ...``) next to a driver node that serves the
interfaces of config/interfaces.yaml. Its parameters are the launch settings of the settings schema
(:class:`~pyrua_ros.settings.config.PlayConfig`, scopes ``episode`` and ``agent``), declared from it with their
defaults and descriptions (config/agent.yaml is generated from the same schema). The parameters become a PlayConfig
(driver ``external``: the launch started the driver), the same checks as ``pyrualean play`` run before anything
else, and the episode host does the rest.

Parameters tell the truth: every one is read once, before the episode, so every one is declared read-only
(``ros2 param set`` is refused with the reason; the parameter files and ``-p`` overrides still set them at start),
and every one has a value ``ros2 param get``/``dump`` can read. An optional setting left unset is declared with no
value (``PARAMETER_NOT_SET``, dumped as ``null``) and dynamic typing, since a typed parameter without a value makes
rclpy answer a GetParameters request naming it with nothing at all; a value given for it is checked against the
setting's type here (a bad one is refused with the setting's name).

Exit status: the table of :mod:`pyrua_ros.cli.exit_codes` (0 when the episode ran to its end).

One node per process role: robo's ROS clients run on this very node (its namespace, remappings and parameters
hold for them, and ``ros2 param get /agent task`` answers while the episode runs). The ``remap`` parameter
(``from:=to`` pairs, a graph argument outside the settings schema) is applied to every node of the process.

Interrupts: the first SIGINT (or SIGTERM) interrupts the episode, which still stops its kernel and writes its
records and ``result.json`` (exit 130, 143); further SIGINTs and SIGTERMs while it cleans up and the node is torn
down are ignored, so a double Ctrl-C or launch's escalation cannot leave a process or a half-written record behind.
"""

from __future__ import annotations

import dataclasses
import pathlib
import signal
import sys

from pyrua_ros.agent.run.episode import play
from pyrua_ros.agent.run.interrupts import FirstSignalInterrupts
from pyrua_ros.agent.run.progress import PlainProgress
from pyrua_ros.agent.run.validate import prepare_play
from pyrua_ros.bringup import graph
from pyrua_ros.cli import exit_codes
from pyrua_ros.settings import schema
from pyrua_ros.settings.config import PlayConfig
from pyrua_ros.settings.schema import SettingError
from pyrua_ros.sim_interfaces.drivers import EXTERNAL
from pyrua_ros.wire.rosenv import node_preamble, rclpy_session

NODE_SCOPES = ("episode", "agent")


def node_leaves():
    """The schema settings this node declares as parameters."""

    return [leaf for leaf in schema.leaves(PlayConfig) if leaf.spec.launch and leaf.spec.scope in NODE_SCOPES]


def parameters_yaml() -> str:
    """config/agent.yaml: this node's parameters with their schema defaults (scripts/generate_config.py writes it)."""

    header = ("Parameters of the agent node (node name `agent`, in any namespace), generated from the settings\n"
              "schema (pyrua_ros/settings/config.py) by scripts/generate_config.py: "
              "edit the schema, not this file.\n"
              "Launch arguments of the same names override them only when given; optional settings are commented\n"
              "out (unset). The episode fields apply with robot:=external: with a driver the launch hands the agent\n"
              "the episode of the driver's parameter file (config/sim.yaml, config/fake_arm.yaml) unless\n"
              "suite/task/seed are given.")
    return schema.yaml_text(PlayConfig, "/**/agent", scopes=NODE_SCOPES, header=header)


READ_ONLY_REASON = "read once when the episode starts"   # shown by ``ros2 param describe``


def descriptor(description: str, *, dynamic: bool = False):
    """A read-only ParameterDescriptor (``ros2 param set`` is refused: the episode read the value at its start)."""
    from rcl_interfaces.msg import ParameterDescriptor

    return ParameterDescriptor(description=description, read_only=True, dynamic_typing=dynamic,
                               additional_constraints=READ_ONLY_REASON)


def declare_parameters(node) -> dict:
    """Declare every agent parameter, read-only (default and description from the schema; an optional setting
    without a default dynamically typed and without a value); return their values (None for an optional parameter
    nobody set; JSON objects and paths as their text)."""
    values = {}
    for leaf in node_leaves():
        if leaf.default is None:
            node.declare_parameter(leaf.name, None, descriptor(leaf.spec.help, dynamic=True))
        else:
            node.declare_parameter(leaf.name, leaf.text(leaf.default) if leaf.kind in ("path", "json")
                                   else leaf.default, descriptor(leaf.spec.help))
        values[leaf.name] = node.get_parameter(leaf.name).value
    return values


def config_from_parameters(values: dict):
    """PlayConfig from agent parameter values (the launch started the driver, so ``driver="external"``)."""
    leaves = {leaf.name: leaf for leaf in schema.leaves(PlayConfig)}
    typed = {}
    for name, value in values.items():
        if value is None or name not in leaves:   # unset, or a graph parameter such as use_sim_time
            continue
        leaf = leaves[name]
        # paths and JSON arrive as text; an optional setting is dynamically typed, so its value is checked here
        parse = (leaf.kind in ("path", "json") and isinstance(value, str)) or leaf.default is None
        typed[name] = leaf.parse(value) if parse else value
    cfg = schema.build(PlayConfig, typed)
    return dataclasses.replace(cfg, episode=dataclasses.replace(cfg.episode, driver=EXTERNAL.name))


def may_set_remap(argv: list[str]) -> bool:
    """Whether ``argv`` may set the ``remap`` parameter: a token or a ``--params-file`` that mentions it (an
    unreadable file counts: rcl then says what is wrong with it)."""
    for i, arg in enumerate(argv):
        if "remap" in arg:
            return True
        if arg == "--params-file" and i + 1 < len(argv):
            try:
                if "remap" in pathlib.Path(argv[i + 1]).read_text(errors="replace"):
                    return True
            except OSError:
                return True
    return False


def remap_arguments(argv: list[str]) -> list[str]:
    """The node's ``remap`` parameter (its parameter file or an override in ``argv``) as global ``-r`` arguments,
    so the remappings hold for every node of this process (robo's state node included). Read on a short-lived
    probe node in a context of its own, only when ``argv`` may set it (:func:`may_set_remap`): a probe is a DDS
    participant made and destroyed at once, and destroying it crashed the agent once at its start in CI
    (SIGSEGV in ``rclpy.Node.destroy_node``), while most agents have no remap to read."""
    if not may_set_remap(argv):
        return []
    import rclpy
    from rclpy.signals import SignalHandlerOptions


    context = rclpy.Context()
    rclpy.init(args=argv, context=context, signal_handler_options=SignalHandlerOptions.NO)
    try:
        probe = rclpy.create_node("agent", context=context, start_parameter_services=False, enable_rosout=False)
        try:
            text = probe.declare_parameter("remap", graph.ARGUMENTS_BY_NAME["remap"].typed_default()).value
        finally:
            probe.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    pairs = graph.parse_remaps(text)
    return ["--ros-args", *graph.remap_arguments(pairs)] if pairs else []


def main(args: list[str] | None = None) -> int:
    node_preamble()
    import rclpy
    from rclpy.signals import SignalHandlerOptions


    signal.signal(signal.SIGINT, FirstSignalInterrupts("the agent stops its episode"))
    node = None
    argv = list(sys.argv if args is None else args)
    try:
        try:
            argv += remap_arguments(argv)
        except ValueError as exc:
            print(f"[agent] invalid parameter remap: {exc}", file=sys.stderr, flush=True)
            return exit_codes.BAD_INPUT
        # rclpy's own SIGINT handler would shut the context down, taking robo's clients away while the episode
        # still cleans up; the episode handles the interrupt itself.
        with rclpy_session(argv, signal_handler_options=SignalHandlerOptions.NO):
            try:
                node = rclpy.create_node("agent")
                node.declare_parameter("remap", "", descriptor("agent remappings (applied at start: read-only)"))
                progress = PlainProgress(sys.stdout)
                try:
                    cfg, _rundir = prepare_play(config_from_parameters(declare_parameters(node)),
                                                warn=node.get_logger().warning)
                except (SettingError, ValueError) as exc:
                    node.get_logger().error(f"invalid parameter: {exc}")
                    return exit_codes.BAD_INPUT
                node.get_logger().info(f"episode {cfg.episode.tag}: runtime {cfg.agent.runtime}, arm "
                                       f"{cfg.agent.arm}, out {cfg.out}")
                result = play(cfg, progress=progress, node=node)
                code = exit_codes.for_result(result.status, result.reason)
                progress.finish({"status": result.status, "reason": result.reason,
                                 "environment_success": result.environment_success,
                                 "tool_turns": result.tool_turns, "env_steps": result.env_steps,
                                 "total_tokens": result.generation.total_tokens,
                                 "total_wall_s": result.total_wall_s, "startup_s": result.startup_s,
                                 "exit_code": code, "out": str(cfg.out)})
                return code
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):   # nothing interrupts the teardown (launch's
                    signal.signal(sig, signal.SIG_IGN)        # escalation ends in SIGKILL if it hangs)
                if node is not None:
                    node.destroy_node()
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
