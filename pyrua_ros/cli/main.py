"""pyrualean / pyrua-ros: the project's CLI, compatible with PyRUA-Lean's command lines.

Subcommands: ``play`` (one episode: starts the driver node, runs the agent loop, writes the run directory),
``run`` (single shot: a ``run(robo)`` file executed once, no model), ``generate`` (single-shot generation of a
``policy.py`` through the openai runtime), ``api`` / ``prompt`` (print the generated reference / prompt without a
simulator), ``summarize`` / ``compare`` (run records), ``launch`` (the pip-only launch runner), ``mcp`` (serve one
episode's tools to any MCP client). The flags of ``play``, ``mcp``, ``run`` and ``generate`` are generated from
the settings schema (``pyrua_ros.settings.config``). Every bad input is refused before anything boots,
with one line and exit code 2. Every process this CLI starts stays on one machine, so DDS discovery defaults to
LOCALHOST when ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is unset, and an episode picks a free ROS domain of its own when
``ROS_DOMAIN_ID`` is unset.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from pyrua_ros import __version__
from pyrua_ros.cli import exit_codes
from pyrua_ros.cli.args import add_settings, settings_from_args
from pyrua_ros.cli.common import episode_summary, prepare_ros_environment, refuse, stamp_provenance
from pyrua_ros.settings.runtimes import RUNTIMES
from pyrua_ros.settings.schema import SettingError
from pyrua_ros.sim_interfaces import blas
from pyrua_ros.wire.rosenv import dump_stacks_when_stuck_or_crashed

DESCRIPTION = "Run PyRUA-Lean robot agents on ROS 2 (PyRUA-Lean-compatible command lines)."


def cmd_play(args: argparse.Namespace) -> int:
    from pyrua_ros.agent.run.progress import make_progress
    from pyrua_ros.agent.run.validate import prepare_play
    from pyrua_ros.settings.config import PlayConfig

    try:
        cfg = settings_from_args(PlayConfig, args)
    except SettingError as exc:
        return refuse("play", str(exc))
    progress = make_progress(cfg.output.progress)

    def warn(text: str) -> None:
        print(f"pyrualean play: {text}", file=sys.stderr)

    try:
        cfg, rundir = prepare_play(cfg, warn=warn, progress=progress)
    except SettingError as exc:
        if progress is not None:
            progress.close()
        return refuse("play", str(exc))
    if rundir.action == "keep":
        data = rundir.result or {}
        code = exit_codes.for_result(data.get("status", "error"), data.get("reason"))
        warn(f"--resume: {cfg.out} already holds an episode that ran to its end (status {data.get('status')}); "
             "kept, nothing run")
        if progress is not None:
            progress.close()
        print(json.dumps({k: data.get(k) for k in ("arm", "status", "reason", "environment_success", "tool_turns",
                                                    "env_steps", "policy_wall_s")} | {"exit_code": code,
                                                                                      "out": str(cfg.out)}))
        return code
    prepare_ros_environment()
    from pyrua_ros.agent.loop.arms import LoopAgent
    from pyrua_ros.agent.run.episode import Episode

    episode = Episode(cfg.episode, LoopAgent(cfg), out=cfg.out, output=cfg.output, compat=cfg.compat,
                      progress=progress)
    result = episode.run()
    stamp_provenance("play", cfg.out, cfg.model.sampling_fields() if RUNTIMES[cfg.agent.runtime].uses_model else None)
    code = exit_codes.for_result(result.status, result.reason, interrupted_by=episode.interrupted_by)
    summary = episode_summary(result, cfg.out, code)
    if progress is not None:
        progress.finish(summary)
    elif code != exit_codes.OK:
        print(f"pyrualean play: {result.status}: {result.reason}", file=sys.stderr)
    print(json.dumps(summary))
    return code


def cmd_launch(args: argparse.Namespace) -> int:
    from pyrua_ros.bringup.runner import main as runner_main

    return runner_main(args.launch_args)


def _launch_epilog() -> str:
    from pyrua_ros.bringup.runner import arguments_text

    return "launch arguments of libero_sim (name:=value):\n" + arguments_text()


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout (exit codes, launch arguments) and wraps flag help normally."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line (no usage dump) and exit code 2."""

    def error(self, message: str):
        self.exit(exit_codes.BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from pyrua_ros.cli.commands_info import add_info_parsers
    from pyrua_ros.cli.commands_mcp import add_mcp_parser
    from pyrua_ros.cli.commands_single import add_single_parsers
    from pyrua_ros.conformance.cli import add_parser as add_check_driver_parser
    from pyrua_ros.settings.config import PlayConfig

    parser = OneLineParser(prog="pyrualean", description=DESCRIPTION, epilog=exit_codes.help_epilog(),
                                     formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"pyrua_ros {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    play = sub.add_parser("play", help="run one episode with the agent loop", formatter_class=_Formatter,
                          description="Run one episode: start the driver node, boot robo, run the agent loop, judge "
                                      "with the benchmark's success check, write the run directory.",
                          epilog=exit_codes.help_epilog())
    add_settings(play, PlayConfig)
    play.set_defaults(func=cmd_play)
    launch = sub.add_parser("launch", help="start the node graph without ros2 launch (pip-only runner)",
                            formatter_class=_Formatter, epilog=_launch_epilog(),
                            description="Start the libero_sim graph (driver + agent, optional rviz) without ros2 "
                                        "launch: pyrualean launch libero_sim [name:=value ...] [--print] [-s].")
    launch.add_argument("launch_args", nargs=argparse.REMAINDER, metavar="libero_sim [name:=value ...]",
                        help="the launch and its arguments (listed below)")
    launch.set_defaults(func=cmd_launch)
    add_info_parsers(sub)
    add_single_parsers(sub)
    add_check_driver_parser(sub)
    add_mcp_parser(sub, formatter_class=_Formatter)
    from pyrua_ros.cli.commands_eval import add_eval_parser

    add_eval_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    blas.one_thread()   # this process and every node, worker and launch it starts
    dump_stacks_when_stuck_or_crashed()
    try:
        parser = build_parser()
    except SettingError as exc:   # a PYRUALEAN_* environment variable with a bad value
        return refuse("", str(exc))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:   # outside an episode (checks, booting nothing yet): one line, no traceback
        print(f"pyrualean {args.command}: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
