"""``pyrualean`` / ``pyrua-ros``: the project's CLI, compatible with PyRUA-Lean's command lines.

Subcommands: ``play`` (one episode: starts the driver node, runs the agent loop, writes the run directory),
``run`` (single shot: a ``run(robo)`` file executed once, no model), ``generate`` (single-shot generation of a
``policy.py`` through the openai runtime), ``api`` / ``prompt`` (print the generated reference / prompt without a
simulator), ``summarize`` / ``compare`` (run records), ``launch`` (the pip-only launch runner). Every process this
CLI starts stays on one machine, so DDS discovery defaults to LOCALHOST when ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is
unset, and ``play`` picks a free ROS domain of its own when ``ROS_DOMAIN_ID`` is unset.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from pyrua_ros import __version__
from pyrua_ros.cli.args import add_cell_args, add_openai_args, env_setting

EXIT_BAD_INPUT = 2


def add_play_args(p: argparse.ArgumentParser) -> None:
    """The flags of ``play``: PyRUA-Lean's set that makes sense on ROS, the openai runtime's and the ROS ones."""
    p.add_argument("--arm", required=True, choices=["cells", "program"], help="tool surface: python cells or programs")
    add_cell_args(p)
    p.add_argument("--runtime", default=env_setting("RUNTIME", "replay"), choices=["openai", "replay"],
                   help="who writes the cells: openai (chat completions) or replay (default; no model server)")
    p.add_argument("--replay", type=pathlib.Path, default=None,
                   help="replay source: an earlier run directory or a run(robo) program file (default: the "
                        "packaged example program for the suite and task)")
    add_openai_args(p, base_url_required=False)
    p.add_argument("--openai-tool-choice", default=None, choices=["auto", "required", "none"], help="tool_choice")
    p.add_argument("--openai-request-timeout-s", type=float, default=600.0, help="hard timeout of one request [s]")
    p.add_argument("--openai-system-prompt", default=None,
                   help="optional system message (default none: the whole prompt is the first user message)")
    p.add_argument("--images", default="on-motion", choices=["on-motion", "on-demand", "none"],
                   help="camera images attached to tool results")
    p.add_argument("--feedback", default="rich", choices=["pure", "rich"], help="what a tool result carries")
    p.add_argument("--guides", action="store_true", help="copy the LIBERO guides into workspace/guides/")
    p.add_argument("--guides-dir", type=pathlib.Path, default=None, help="copy every *.md of this folder instead")
    p.add_argument("--max-turns", type=int, default=None, help="decision budget: python/run_program calls")
    p.add_argument("--max-programs", type=int, default=None, help="program arm: at most N run_program calls")
    p.add_argument("--budget-s", type=float, default=1200.0, help="wall-clock budget of the agent loop [s]")
    p.add_argument("--cell-timeout-s", type=float, default=300.0, help="wall-clock limit of one cell [s]")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def config_from_args(args: argparse.Namespace):
    """Build the PlayConfig (ConfigError on bad values) from parsed ``play`` arguments."""
    from pyrua_ros.agent.config import PlayConfig, parse_extra_body

    replay = args.replay
    if args.runtime == "replay" and replay is None:
        from pyrua_ros.examples import program_for

        replay = program_for(args.suite, args.task)
    return PlayConfig(
        out=args.out, task=args.task, suite=args.suite, seed=args.seed, arm=args.arm, robot=args.robot,
        runtime=args.runtime, replay=replay, model=args.model, reasoning=args.reasoning, base_url=args.base_url,
        api_key_env=args.api_key_env, openai_max_tokens=args.openai_max_tokens,
        openai_tool_choice=args.openai_tool_choice, openai_temperature=args.openai_temperature,
        openai_extra_body=parse_extra_body(args.openai_extra_body),
        openai_request_timeout_s=args.openai_request_timeout_s, openai_max_retries=args.openai_max_retries,
        system_prompt=args.openai_system_prompt, context_window=args.context_window,
        images=args.images, feedback=args.feedback, guides=args.guides or args.guides_dir is not None,
        guides_dir=args.guides_dir, max_turns=args.max_turns, max_programs=args.max_programs,
        budget_s=args.budget_s, max_episode_steps=args.max_episode_steps, primitives=args.primitives,
        vla_endpoint=args.vla_endpoint, sam3_endpoint=args.sam3_endpoint, cell_timeout_s=args.cell_timeout_s,
        driver=args.driver, clock=args.clock, video=args.video, record=args.record,
        cuda_device=args.cuda_device, rpent_root=args.rpent_root, libero_type=args.libero_type)


def prepare_ros_environment() -> None:
    """Loopback discovery by default and a domain of this episode's own (before rclpy is imported)."""
    from pyrua_ros.driver.rosenv import claim_domain_id, default_to_localhost

    default_to_localhost()
    if not os.environ.get("ROS_DOMAIN_ID"):
        os.environ["ROS_DOMAIN_ID"] = str(claim_domain_id())


def cmd_play(args: argparse.Namespace) -> int:
    from pyrua_ros.agent.config import ConfigError

    try:
        cfg = config_from_args(args)
    except (ConfigError, ValueError) as exc:
        print(f"pyrualean play: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    prepare_ros_environment()
    from pyrua_ros.agent.episode import play
    from pyrua_ros.agent.progress import ProgressView

    progress = None if args.quiet else ProgressView(sys.stderr)
    result = play(cfg, progress=progress)
    summary = {"arm": result.arm, "status": result.status, "reason": result.reason,
               "environment_success": result.environment_success, "tool_turns": result.tool_turns,
               "env_steps": result.env_steps, "total_tokens": result.generation.total_tokens,
               "policy_wall_s": result.policy_wall_s, "out": str(cfg.out)}
    if progress:
        progress.finish(summary)
    print(json.dumps(summary))
    return EXIT_BAD_INPUT if result.status in ("boot_error", "error") else 0


def cmd_launch(args: argparse.Namespace) -> int:
    from pyrua_ros.bringup.runner import main as runner_main

    return runner_main(args.launch_args)


def build_parser() -> argparse.ArgumentParser:
    from pyrua_ros.cli.commands_info import add_info_parsers
    from pyrua_ros.cli.commands_single import add_single_parsers
    from pyrua_ros.conformance.cli import add_parser as add_check_driver_parser

    parser = argparse.ArgumentParser(prog="pyrualean", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pyrua_ros {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    play = sub.add_parser("play", help="run one episode with the agent loop")
    add_play_args(play)
    play.set_defaults(func=cmd_play)
    launch = sub.add_parser("launch", help="start the node graph without ros2 launch (pip-only runner)")
    launch.add_argument("launch_args", nargs=argparse.REMAINDER, help="libero_sim key:=value ...")
    launch.set_defaults(func=cmd_launch)
    add_info_parsers(sub)
    add_single_parsers(sub)
    add_check_driver_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
