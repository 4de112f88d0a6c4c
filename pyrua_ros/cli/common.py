"""What the subcommands (and ``pyrua-ros eval``) share: refusing bad input with one line and exit code 2, the ROS
environment of an episode (loopback discovery, a domain of its own), and the JSON line an episode prints."""

from __future__ import annotations

import os
import sys

from pyrua_ros.cli import exit_codes
from pyrua_ros.wire.rosenv import claim_domain_id, default_to_localhost


def refuse(command: str, message: str) -> int:
    """One line on stderr, exit code 2 (bad input: nothing booted)."""
    print(f"pyrualean {command}: error: {message}", file=sys.stderr)
    return exit_codes.BAD_INPUT


def prepare_ros_environment() -> None:
    """Loopback discovery by default and a domain of this episode's own (before rclpy is imported)."""

    default_to_localhost()
    if not os.environ.get("ROS_DOMAIN_ID"):
        os.environ["ROS_DOMAIN_ID"] = str(claim_domain_id())


def stamp_provenance(command: str, out, sampling: dict | None) -> None:
    """Record in ``out/result.json`` how this run was made (argv, version, commit, dirty tree, sampling); a failure
    is one line on stderr (the episode's record stands)."""
    from pyrua_ros.records.provenance import provenance, stamp_result

    why = stamp_result(out, provenance(sys.argv[1:], sampling))
    if why is not None:
        print(f"pyrualean {command}: {why}", file=sys.stderr)


def episode_summary(result, out, code: int) -> dict:
    """The JSON line ``play`` prints on stdout (the reference's keys plus ours)."""
    return {"arm": result.arm, "status": result.status, "reason": result.reason,
            "environment_success": result.environment_success, "tool_turns": result.tool_turns,
            "env_steps": result.env_steps, "total_tokens": result.generation.total_tokens,
            "policy_wall_s": result.policy_wall_s, "startup_s": result.startup_s,
            "total_wall_s": result.total_wall_s, "exit_code": code, "out": str(out)}
