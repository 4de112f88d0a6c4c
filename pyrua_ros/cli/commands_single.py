"""The single-shot CLI subcommands: ``generate`` (one chat completion -> ``policy.py``) and ``run`` (``run(robo)``
executed once on the booted robot, no model).

``add_single_parsers(subparsers)`` registers both on the main parser's subparsers (flags per PYRUALEAN-CONTRACT.md
4.2 "Other subcommands", plus the openai runtime's ``--openai-*`` flags). ``generate`` prints
``{policy, policy_lines, wall_s, input_tokens, output_tokens}`` and exits 2 when the server failed or the answer
held no fenced python block (``generation.json`` then says why). ``run`` prints ``{status, reason,
environment_success, calls, env_steps, policy_wall_s}`` and exits 2 on ``boot_error`` or when the host was killed
before it finished; a program that raised or timed out is a measured outcome (exit 0).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from typing import Any

EXIT_FAILED = 2


def _primitives_default() -> str:
    return os.environ.get("PYRUALEAN_PRIMITIVES") or "full"


def _add_openai_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:30000/v1")
    p.add_argument("--api-key-env", default=None, help="name of the environment variable that holds the API key")
    p.add_argument("--openai-max-tokens", type=int, default=None, help="max_tokens of the one response")
    p.add_argument("--openai-temperature", type=float, default=None, help="sampling temperature")
    p.add_argument("--openai-extra-body", default=None, help="JSON object merged into the request body")
    p.add_argument("--openai-max-retries", type=int, default=5,
                   help="retries on connection errors, 429 and 5xx (exponential backoff from 1 s; default 5)")
    p.add_argument("--context-window", type=int, default=65536, help="tokens the server accepts per request")


def add_cell_args(p: argparse.ArgumentParser) -> None:
    """The cell and driver flags of ``run`` (the subset of ``play``'s that boots the robot)."""
    p.add_argument("--robot", default="libero", choices=["libero"], help="robot adapter")
    p.add_argument("--suite", default="libero_goal", help="LIBERO / LIBERO-PRO suite (fake_table for --driver fake)")
    p.add_argument("--task", type=int, required=True, help="task index within the suite")
    p.add_argument("--seed", type=int, default=0, help="episode seed (official init state = seed modulo 50)")
    p.add_argument("--out", required=True, type=pathlib.Path, help="run directory")
    p.add_argument("--max-episode-steps", type=int, default=10000, help="simulator step budget")
    p.add_argument("--primitives", default=_primitives_default(), choices=["full", "no-vla"],
                   help="primitive set (full needs --vla-endpoint; without one the VLA skills are absent)")
    p.add_argument("--vla-endpoint", default=None, help="host:port of an openpi-compatible policy server")
    p.add_argument("--sam3-endpoint", default=None, help="http://host:port of an HTTP segmentation service")
    p.add_argument("--driver", default="sim", choices=["sim", "fake", "external"],
                   help="start the LIBERO sim node, the kinematic fake arm, or nothing (drivers already running)")
    p.add_argument("--clock", default="lockstep", choices=["lockstep", "realtime"], help="sim clock mode")
    p.add_argument("--no-video", dest="video", action="store_false", help="do not write episode.mp4")
    p.add_argument("--no-record", dest="record", action="store_false", help="do not write episode.mcap")
    p.add_argument("--cuda-device", default=None, help="accepted and recorded (no meaning for a ROS backend)")
    p.add_argument("--rpent-root", default=os.environ.get("RPENT_ROOT") or os.environ.get("RPENT_REPO_ROOT"),
                   help="accepted and recorded (RPENT_ROOT); no meaning for a ROS backend")
    p.add_argument("--libero-type", default="pro", help="accepted and recorded")
    p.add_argument("--python", default=None, help="accepted for compatibility; the run uses this interpreter")


def _fail(command: str, message: str) -> int:
    print(f"pyrualean {command}: error: {message}", file=sys.stderr)
    return EXIT_FAILED


def cmd_generate(args: argparse.Namespace) -> int:
    """``generate --card PATH --out DIR ...``: one completion, the largest python block -> ``DIR/policy.py``."""
    from pyrua_ros.agent.config import ConfigError, parse_extra_body
    from pyrua_ros.agent.single_shot import GenerateConfig, generate

    try:
        cfg = GenerateConfig(card=args.card, out=args.out, base_url=args.base_url, model=args.model,
                             reasoning=args.reasoning, budget_s=args.budget_s, timeout_s=args.timeout_s,
                             transfer=args.transfer, api_key_env=args.api_key_env, primitives=args.primitives,
                             openai_max_tokens=args.openai_max_tokens, openai_temperature=args.openai_temperature,
                             openai_extra_body=parse_extra_body(args.openai_extra_body),
                             openai_max_retries=args.openai_max_retries, context_window=args.context_window)
    except (ConfigError, ValueError) as exc:
        return _fail("generate", str(exc))
    try:
        record = generate(cfg)
    except (OSError, ValueError) as exc:   # unreadable card or card images, bad settings
        return _fail("generate", f"{type(exc).__name__}: {exc}")
    print(json.dumps({"policy": record.policy, "policy_lines": record.policy_lines, "wall_s": record.wall_s,
                      "input_tokens": record.input_tokens, "output_tokens": record.output_tokens}))
    if record.error:
        return _fail("generate", f"{record.error} (recorded in {pathlib.Path(args.out) / 'generation.json'})")
    return 0


def run_config_from_args(args: argparse.Namespace):
    """The RunConfig of parsed ``run`` arguments (ConfigError / ValueError on bad values)."""
    from pyrua_ros.agent.config import PlayConfig
    from pyrua_ros.agent.single_shot import RunConfig

    if args.timeout_s <= 0:
        raise ValueError(f"--timeout-s must be positive; got {args.timeout_s}")
    play = PlayConfig(out=args.out, task=args.task, suite=args.suite, seed=args.seed, arm="program",
                      robot=args.robot, budget_s=args.timeout_s, max_episode_steps=args.max_episode_steps,
                      primitives=args.primitives, vla_endpoint=args.vla_endpoint, sam3_endpoint=args.sam3_endpoint,
                      driver=args.driver, clock=args.clock, video=args.video, record=args.record,
                      cuda_device=args.cuda_device, rpent_root=args.rpent_root, libero_type=args.libero_type)
    return RunConfig(policy=args.policy, play=play, generation=args.generation)


def cmd_run(args: argparse.Namespace) -> int:
    """``run --policy PATH [--timeout-s] [--generation]`` + cell args."""
    from pyrua_ros.agent.config import ConfigError

    try:
        cfg = run_config_from_args(args)
    except (ConfigError, ValueError) as exc:
        return _fail("run", str(exc))
    from pyrua_ros.cli.main import prepare_ros_environment

    prepare_ros_environment()
    from pyrua_ros.agent.single_shot import run_policy

    result = run_policy(cfg)
    print(json.dumps({"status": result.status, "reason": result.reason,
                      "environment_success": result.environment_success, "calls": result.calls,
                      "env_steps": result.env_steps, "policy_wall_s": result.policy_wall_s, "out": str(args.out)}))
    killed = (result.reason or "").startswith("killed")
    return EXIT_FAILED if result.status == "boot_error" or killed else 0


def add_single_parsers(subparsers: Any) -> None:
    """Register ``generate`` and ``run`` on an ``add_subparsers()`` object."""
    gen = subparsers.add_parser("generate", help="single shot: one chat completion writes policy.py (no tools)")
    gen.add_argument("--card", required=True, type=pathlib.Path, help="card.json (file or run directory)")
    gen.add_argument("--out", required=True, type=pathlib.Path, help="output directory")
    gen.add_argument("--model", default="DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B", help="model id sent to the server")
    gen.add_argument("--reasoning", default=None, help="reasoning effort (recorded; send it via --openai-extra-body)")
    gen.add_argument("--budget-s", type=float, default=1200.0, help="run budget stated in the prompt [s]")
    gen.add_argument("--timeout-s", type=float, default=3600.0, help="hard limit of the generation [s]")
    gen.add_argument("--transfer", action="store_true", help="card images show one example layout only")
    gen.add_argument("--primitives", default=_primitives_default(), choices=["full", "no-vla"],
                     help="primitive set the prompt documents (default $PYRUALEAN_PRIMITIVES or full)")
    _add_openai_args(gen)
    gen.set_defaults(func=cmd_generate)

    run = subparsers.add_parser("run", help="single shot: run a policy.py once on the robot (no model)")
    run.add_argument("--policy", required=True, type=pathlib.Path, help="file defining run(robo)")
    run.add_argument("--timeout-s", type=float, default=1200.0, help="wall-clock watchdog of run(robo) [s]")
    run.add_argument("--generation", type=pathlib.Path, default=None,
                     help="generation.json to attach (default: the one next to the policy)")
    add_cell_args(run)
    run.set_defaults(func=cmd_run)
