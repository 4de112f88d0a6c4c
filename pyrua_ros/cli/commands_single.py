"""The single-shot CLI subcommands: ``generate`` (one chat completion -> ``policy.py``) and ``run`` (``run(robo)``
executed once on the booted robot, no model).

``add_single_parsers(subparsers)`` registers both on the main parser's subparsers (flags generated from the
settings schema: PYRUALEAN-CONTRACT.md 4.2 "Other subcommands" plus the openai runtime's ``--openai-*`` flags).
``generate`` prints ``{policy, policy_lines, wall_s, input_tokens, output_tokens}`` and exits 4 (planner error)
when the server failed or the answer held no fenced python block (``generation.json`` then says why). ``run``
prints ``{status, reason, environment_success, calls, env_steps, policy_wall_s, exit_code, out}``; a program that
raised is a measured outcome (exit 0), its timeout is the budget code (5), a boot error 3 (see
:mod:`pyrua_ros.cli.exit_codes`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from typing import Any

from pyrua_ros.agent.run.validate import (
    check_episode,
    check_input_path,
    check_model_server,
    check_run_directory,
    check_sandbox,
    check_vla_server_cmd,
    claim_run_directory,
)
from pyrua_ros.cli import exit_codes
from pyrua_ros.cli.args import add_settings, settings_from_args
from pyrua_ros.cli.common import prepare_ros_environment, stamp_provenance
from pyrua_ros.settings.config import GenerateConfig, RunConfig
from pyrua_ros.settings.schema import SettingError


def _fail(command: str, message: str) -> int:
    print(f"pyrualean {command}: error: {message}", file=sys.stderr)
    return exit_codes.BAD_INPUT


def cmd_generate(args: argparse.Namespace) -> int:
    """``generate --card PATH --out DIR ...``: one completion, the largest python block -> ``DIR/policy.py``."""
    from pyrua_ros.agent.run.single_shot import generate

    try:
        cfg = settings_from_args(GenerateConfig, args)
        g = cfg.generate
        check_input_path("--card", g.card, kind="any")
        check_run_directory("--out", g.out, overwrite=g.overwrite, resume=None)
        if cfg.model.preflight:
            for line in check_model_server(cfg.model):
                print(f"pyrualean generate: warning: {line}", file=sys.stderr)
        claim_run_directory("--out", g.out, overwrite=g.overwrite, resume=None)
    except SettingError as exc:
        return _fail("generate", str(exc))
    try:
        record = generate(cfg)
    except (OSError, ValueError) as exc:   # unreadable card or card images
        return _fail("generate", f"{type(exc).__name__}: {exc}")
    print(json.dumps({"policy": record.policy, "policy_lines": record.policy_lines, "wall_s": record.wall_s,
                      "input_tokens": record.input_tokens, "output_tokens": record.output_tokens}))
    if record.error:
        print(f"pyrualean generate: {record.error} (recorded in {pathlib.Path(g.out) / 'generation.json'})",
              file=sys.stderr)
        return exit_codes.PLANNER_ERROR
    return exit_codes.OK


def cmd_run(args: argparse.Namespace) -> int:
    """``run --policy PATH [--timeout-s] [--generation]`` + cell args."""

    from pyrua_ros.agent.run.episode import default_out
    from pyrua_ros.agent.run.progress import make_progress

    try:
        cfg = settings_from_args(RunConfig, args)
        e, o = cfg.episode, cfg.output
        check_episode(e.suite, e.task, e.seed, e.driver)
        check_sandbox(cfg.sandbox)
        check_vla_server_cmd(e.vla_server_cmd)
        check_input_path("--policy", cfg.single.policy, suffixes=(".py",))
        check_input_path("--generation", cfg.single.generation)
        out = pathlib.Path(cfg.out or default_out(e, "single"))
        check_run_directory("--out", out, overwrite=o.overwrite, resume=o.resume)
        rundir = claim_run_directory("--out", out, overwrite=o.overwrite, resume=o.resume)
    except SettingError as exc:
        return _fail("run", str(exc))
    if rundir.action == "keep":
        data = rundir.result or {}
        print(f"pyrualean run: --resume: {out} already holds a finished run; kept", file=sys.stderr)
        print(json.dumps({k: data.get(k) for k in ("status", "reason", "environment_success", "calls", "env_steps",
                                                    "policy_wall_s")} | {"out": str(out)}))
        return exit_codes.for_result(data.get("status", "error"), data.get("reason"))
    cfg = dataclasses.replace(cfg, output=dataclasses.replace(o, out=out))

    prepare_ros_environment()
    from pyrua_ros.agent.run.single_shot import run_policy

    progress = make_progress(o.progress)
    result = run_policy(cfg, progress=progress)

    stamp_provenance("run", out, None)
    code = exit_codes.for_result(result.status, result.reason)
    if progress is not None:
        progress.finish({"status": result.status, "reason": result.reason,
                         "environment_success": result.environment_success, "env_steps": result.env_steps,
                         "total_wall_s": result.total_wall_s, "startup_s": result.startup_s, "exit_code": code,
                         "out": str(out)})
    print(json.dumps({"status": result.status, "reason": result.reason,
                      "environment_success": result.environment_success, "calls": result.calls,
                      "env_steps": result.env_steps, "policy_wall_s": result.policy_wall_s, "exit_code": code,
                      "out": str(out)}))
    return code


def add_single_parsers(subparsers: Any) -> None:
    """Register ``generate`` and ``run`` on an ``add_subparsers()`` object (flags from the settings schema)."""

    gen = subparsers.add_parser("generate", help="single shot: one chat completion writes policy.py (no tools)")
    add_settings(gen, GenerateConfig)
    gen.set_defaults(func=cmd_generate)

    run = subparsers.add_parser("run", help="single shot: run a policy.py once on the robot (no model)")
    add_settings(run, RunConfig)
    run.set_defaults(func=cmd_run)
