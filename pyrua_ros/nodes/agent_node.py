"""Executable of the agent node ``agent``: one episode of the cell-writing loop over ROS 2, then exit.

Run by the launch file / pip runner (``pyrua-ros launch libero_sim ...``) next to a driver node that serves the
interfaces of config/interfaces.yaml. Its parameters (config/agent.yaml, names in
``pyrua_ros.bringup.graph.AGENT_PARAMETERS``) become a :class:`~pyrua_ros.agent.config.PlayConfig`; the episode
host does the rest (reset, prompt, loop, judge, run directory). Exit status 0 when the episode ran (whatever its
success), 2 on a boot error or an invalid parameter.
"""

from __future__ import annotations

import pathlib
import sys
import time

from pyrua_ros.driver.rosenv import node_preamble, rclpy_session


def declare_parameters(node) -> dict:
    """Declare every agent parameter with its default from the launch graph; return their values."""
    from rcl_interfaces.msg import ParameterDescriptor

    from pyrua_ros.bringup import graph

    values = {}
    for name in graph.AGENT_PARAMETERS:
        if name == "use_sim_time":
            continue
        arg = graph.ARGUMENTS_BY_NAME[name]
        default = arg.convert(arg.default)
        values[name] = node.declare_parameter(name, default, ParameterDescriptor(description=arg.description)).value
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


def main(args: list[str] | None = None) -> int:
    node_preamble()
    import rclpy

    from pyrua_ros.agent.config import ConfigError
    from pyrua_ros.agent.episode import play
    from pyrua_ros.agent.progress import ProgressView

    try:
        with rclpy_session(sys.argv if args is None else args):
            node = rclpy.create_node("agent")
            try:
                cfg = config_from_parameters(declare_parameters(node))
            except (ConfigError, ValueError) as exc:
                node.get_logger().error(f"invalid parameter: {exc}")
                return 2
            node.get_logger().info(f"episode {cfg.tag}: runtime {cfg.runtime}, arm {cfg.arm}, out {cfg.out}")
            progress = ProgressView(sys.stdout)
            result = play(cfg, progress=progress)
            progress.finish({"status": result.status, "environment_success": result.environment_success,
                             "tool_turns": result.tool_turns, "env_steps": result.env_steps,
                             "total_tokens": result.generation.total_tokens, "policy_wall_s": result.policy_wall_s,
                             "out": str(cfg.out)})
            node.destroy_node()
            return 2 if result.status in ("boot_error", "error") else 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
