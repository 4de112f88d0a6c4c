"""Executable of the agent node ``agent``: one episode of the cell-writing loop over ROS 2, then exit.

Run by the launch file / pip runner (``pyrua-ros launch libero_sim ...``) next to a driver node that serves the
interfaces of config/interfaces.yaml. Its parameters (config/agent.yaml, names in
``pyrua_ros.bringup.graph.AGENT_PARAMETERS``) become a :class:`~pyrua_ros.agent.config.PlayConfig`; the episode
host does the rest (reset, prompt, loop, judge, run directory).

One node per process role: robo's ROS clients run on this very node (its namespace, remappings and parameters
hold for them, and ``ros2 param get /agent task`` answers while the episode runs). The ``remap`` parameter
(``from:=to`` pairs) is applied to this node's names.

Exit status: 0 when the episode ran (whatever its success), 2 on a boot error, an error or an invalid parameter,
130 when interrupted. The first SIGINT interrupts the episode, which still stops its kernel and writes
``result.json``; further SIGINTs while it cleans up are ignored, so a double Ctrl-C cannot leave a process behind.
"""

from __future__ import annotations

import pathlib
import signal
import sys
import time

from pyrua_ros.driver.rosenv import node_preamble

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 2, 130


def declare_parameters(node) -> dict:
    """Declare every agent parameter with its default from the launch graph; return their values."""
    from rcl_interfaces.msg import ParameterDescriptor

    from pyrua_ros.bringup import graph

    values = {}
    for name in graph.AGENT_PARAMETERS:
        if name == "use_sim_time":
            continue
        arg = graph.ARGUMENTS_BY_NAME[name]
        values[name] = node.declare_parameter(name, arg.typed_default(),
                                              ParameterDescriptor(description=arg.description)).value
    return values


def config_from_parameters(values: dict):
    """PlayConfig from agent parameter values (the launch started the driver, so ``driver="external"``)."""
    from pyrua_ros.agent.config import PlayConfig, parse_extra_body

    out = values["out"] or f"runs/{values['suite']}_{values['task']}_{values['seed']}_{time.strftime('%Y%m%d-%H%M%S')}"
    replay = pathlib.Path(values["replay_path"]) if values["replay_path"] else None
    if values["runtime"] == "replay" and replay is None:
        from pyrua_ros.examples import program_for

        replay = program_for(values["suite"], values["task"])
    return PlayConfig(
        out=pathlib.Path(out), suite=values["suite"], task=int(values["task"]), seed=int(values["seed"]),
        max_episode_steps=int(values["max_episode_steps"]), arm=values["arm"], runtime=values["runtime"],
        replay=replay, model=values["model"] or "DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B",
        reasoning=values["reasoning"] or None, base_url=values["base_url"] or None,
        api_key_env=values["api_key_env"] or None, openai_max_tokens=int(values["openai_max_tokens"]),
        openai_tool_choice=values["openai_tool_choice"], openai_temperature=float(values["openai_temperature"]),
        openai_extra_body=parse_extra_body(values["openai_extra_body"]), images=values["images"],
        feedback=values["feedback"], guides=bool(values["guides"]), vla_endpoint=values["vla_endpoint"] or None,
        max_turns=int(values["max_turns"]) or None, budget_s=float(values["budget_s"]),
        record=bool(values["record"]), driver="external")


class _FirstInterruptOnly:
    """SIGINT handler: the first one raises KeyboardInterrupt, later ones are reported and ignored."""

    def __init__(self):
        self.count = 0

    def __call__(self, signum, _frame):
        self.count += 1
        if self.count == 1:
            raise KeyboardInterrupt(f"signal {signum}")
        print(f"[agent] signal {signum} again: already stopping the episode", file=sys.stderr, flush=True)


def _make_node(rclpy):
    """The ``agent`` node, with its ``remap`` parameter applied (the node is made again when it sets remaps)."""
    from pyrua_ros.bringup import graph

    node = rclpy.create_node("agent")
    remap = node.declare_parameter("remap", graph.ARGUMENTS_BY_NAME["remap"].typed_default()).value
    pairs = graph.parse_remaps(remap)
    if not pairs:
        node.undeclare_parameter("remap")
        return node
    node.destroy_node()
    cli_args = ["--ros-args", *(arg for src, dst in pairs for arg in ("-r", f"{src}:={dst}"))]
    return rclpy.create_node("agent", cli_args=cli_args)


def main(args: list[str] | None = None) -> int:
    node_preamble()
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from pyrua_ros.agent.config import ConfigError

    interrupts = _FirstInterruptOnly()
    signal.signal(signal.SIGINT, interrupts)
    # rclpy's own handler would shut the context down on SIGINT, taking robo's clients away while the episode
    # still cleans up; the episode handles the interrupt itself.
    rclpy.init(args=sys.argv if args is None else args, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    try:
        node = _make_node(rclpy)
        try:
            cfg = config_from_parameters(declare_parameters(node))
        except (ConfigError, ValueError) as exc:
            node.get_logger().error(f"invalid parameter: {exc}")
            return EXIT_FAILED
        return _run(node, cfg, interrupts)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # nothing interrupts the teardown
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def _run(node, cfg, interrupts: _FirstInterruptOnly) -> int:
    from pyrua_ros.agent.episode import play
    from pyrua_ros.agent.progress import ProgressView

    node.get_logger().info(f"episode {cfg.tag}: runtime {cfg.runtime}, arm {cfg.arm}, out {cfg.out}")
    progress = ProgressView(sys.stdout)
    result = play(cfg, progress=progress, node=node)
    progress.finish({"status": result.status, "environment_success": result.environment_success,
                     "tool_turns": result.tool_turns, "env_steps": result.env_steps,
                     "total_tokens": result.generation.total_tokens, "policy_wall_s": result.policy_wall_s,
                     "out": str(cfg.out)})
    if interrupts.count:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if result.status in ("boot_error", "error") else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
