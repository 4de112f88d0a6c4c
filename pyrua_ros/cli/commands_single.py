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
import pathlib
import sys
from typing import Any

from pyrua_ros.cli.args import add_cell_args, add_openai_args, env_setting

EXIT_FAILED = 2


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
                             openai_max_retries=5 if args.openai_max_retries is None else args.openai_max_retries,
                             context_window=args.context_window)
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
                      cuda_device=args.cuda_device, rpent_root=args.rpent_root, libero_type=args.libero_type,
                      unsafe_sandbox=args.unsafe_sandbox)
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
    gen.add_argument("--budget-s", type=float, default=1200.0, help="run budget stated in the prompt [s]")
    gen.add_argument("--timeout-s", type=float, default=3600.0, help="hard limit of the generation [s]")
    gen.add_argument("--transfer", action="store_true", help="card images show one example layout only")
    gen.add_argument("--primitives", default=env_setting("PRIMITIVES", "full"), choices=["full", "no-vla"],
                     help="primitive set the prompt documents (default $PYRUALEAN_PRIMITIVES or full)")
    add_openai_args(gen, base_url_required=True)
    gen.set_defaults(func=cmd_generate)

    run = subparsers.add_parser("run", help="single shot: run a policy.py once on the robot (no model)")
    run.add_argument("--policy", required=True, type=pathlib.Path, help="file defining run(robo)")
    run.add_argument("--timeout-s", type=float, default=1200.0, help="wall-clock watchdog of run(robo) [s]")
    run.add_argument("--generation", type=pathlib.Path, default=None,
                     help="generation.json to attach (default: the one next to the policy)")
    add_cell_args(run)
    run.set_defaults(func=cmd_run)
