"""Flags shared by several subcommands, defined once: the cell/driver flags (``play``, ``run``) and the
OpenAI-compatible server flags (``play``, ``generate``)."""

from __future__ import annotations

import argparse
import os
import pathlib


def env_setting(name: str, default: str | None = None) -> str | None:
    """``PYRUALEAN_<NAME>`` from the environment (an empty value counts as unset), else ``default``."""
    value = os.environ.get(f"PYRUALEAN_{name}")
    return value if value not in (None, "") else default


def add_cell_args(p: argparse.ArgumentParser) -> None:
    """Which episode and which driver: the flags that boot the robot."""
    p.add_argument("--robot", default="libero", choices=["libero"], help="robot adapter")
    p.add_argument("--suite", default="libero_goal",
                   help="LIBERO / LIBERO-PRO suite, e.g. libero_goal_swap (fake_table for --driver fake)")
    p.add_argument("--task", type=int, required=True, help="task index within the suite")
    p.add_argument("--seed", type=int, default=0, help="episode seed (official init state = seed modulo 50)")
    p.add_argument("--out", required=True, type=pathlib.Path, help="run directory")
    p.add_argument("--max-episode-steps", type=int, default=10000, help="simulator step budget")
    p.add_argument("--primitives", default=env_setting("PRIMITIVES", "full"), choices=["full", "no-vla"],
                   help="primitive set (full needs --vla-endpoint; without one the VLA skills are absent)")
    p.add_argument("--vla-endpoint", default=None, help="host:port of an openpi-compatible policy server")
    p.add_argument("--sam3-endpoint", default=None,
                   help="host:port or URL of an HTTP segmentation service (default: the simulator's ground truth)")
    p.add_argument("--driver", default="sim", choices=["sim", "fake", "external"],
                   help="start the LIBERO sim node, the kinematic fake arm, or nothing (drivers already running)")
    p.add_argument("--clock", default="lockstep", choices=["lockstep", "realtime"], help="sim clock mode")
    p.add_argument("--no-video", dest="video", action="store_false", help="do not write episode.mp4")
    p.add_argument("--no-record", dest="record", action="store_false", help="do not write episode.mcap")
    # Accepted for command-line compatibility with PyRUA-Lean; recorded, meaningless for a ROS backend.
    p.add_argument("--cuda-device", default=None, help="accepted and recorded (no meaning for a ROS backend)")
    p.add_argument("--rpent-root", default=os.environ.get("RPENT_ROOT") or os.environ.get("RPENT_REPO_ROOT"),
                   help="accepted and recorded (RPENT_ROOT); no meaning for a ROS backend")
    p.add_argument("--libero-type", default="pro", help="accepted and recorded")
    p.add_argument("--python", default=None, help="accepted for compatibility; the episode runs in this interpreter")


def add_openai_args(p: argparse.ArgumentParser, *, base_url_required: bool) -> None:
    """The OpenAI-compatible server and sampling flags."""
    p.add_argument("--base-url", required=base_url_required, default=None,
                   help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:30000/v1")
    p.add_argument("--api-key-env", default=None, help="name of the environment variable that holds the API key")
    p.add_argument("--model", default="DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B", help="model id sent to the server")
    p.add_argument("--reasoning", default=None,
                   help="reasoning effort: codex model_reasoning_effort, claude --effort (none: thinking off); "
                        "openai records it (send it via --openai-extra-body)")
    p.add_argument("--openai-max-tokens", type=int, default=None, help="max_tokens per response")
    p.add_argument("--openai-temperature", type=float, default=None, help="sampling temperature")
    p.add_argument("--openai-extra-body", default=None, help="JSON object merged into every request body")
    p.add_argument("--openai-max-retries", type=int, default=None,
                   help="retries on connection errors, timeouts, 429 and 5xx (exponential backoff; default 5)")
    p.add_argument("--context-window", type=int, default=65536, help="tokens the server accepts per request")


def add_cli_runtime_args(p: argparse.ArgumentParser) -> None:
    """The flags of the Codex and Claude Code runtimes (PyRUA-Lean's names and variables)."""
    p.add_argument("--codex-bin", default=env_setting("CODEX_BIN"),
                   help="Codex executable (default $PYRUALEAN_CODEX_BIN, else the pinned one setup installed, else "
                        "codex on PATH)")
    p.add_argument("--codex-home", type=pathlib.Path, default=env_setting("CODEX_HOME"),
                   help="CODEX_HOME for the agent (default $PYRUALEAN_CODEX_HOME, else a clean <out>/codex_home)")
    p.add_argument("--claude-cli", default=env_setting("CLAUDE_CLI"),
                   help="claude executable (default $PYRUALEAN_CLAUDE_CLI, else the pinned one setup installed, else "
                        "claude on PATH)")
    p.add_argument("--cli-network", default="loopback", choices=["loopback", "inherit"],
                   help="loopback (default): the CLI's proxy variables point at a dead loopback port so it reaches "
                        "only 127.0.0.1; inherit: your proxy settings (a remote model server)")
    p.add_argument("--cli-proxy", default=None, help="proxy URL for the CLI under --cli-network loopback "
                                                     "(default: a dead loopback port)")
