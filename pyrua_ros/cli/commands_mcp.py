"""``pyrua-ros mcp``: serve one episode's tools to any MCP client, over stdio or streamable HTTP on loopback.

The robot is booted as ``play`` boots it (``--driver sim`` starts the LIBERO sim node, ``fake`` the kinematic
arm, ``external`` uses drivers already running), with the same checks before boot, sandbox, budgets and run
directory; the client is the agent. stdio (the default) serves the process's own stdin/stdout, so an MCP client
can launch it as a command; ``--transport http`` prints ``{"mcp_url": "http://127.0.0.1:<port>/mcp", "mcp_token":
"<token>"}`` on stderr (the URL, not the token, also goes to ``<out>/mcp.json``) and serves until SIGINT/SIGTERM;
every HTTP request must carry ``Authorization: Bearer <token>`` (401 otherwise), a token drawn for this run only.
Either way the episode also ends on
``finish`` or when ``--budget-s`` runs out, and result.json says how. The flags are generated from the settings
schema (:class:`~pyrua_ros.settings.config.McpConfig`).
"""

from __future__ import annotations

import argparse
import json
import sys

from pyrua_ros.agent.run.validate import prepare_play
from pyrua_ros.cli import exit_codes
from pyrua_ros.cli.args import add_settings, settings_from_args
from pyrua_ros.cli.common import episode_summary, prepare_ros_environment, refuse
from pyrua_ros.settings.config import McpConfig
from pyrua_ros.settings.schema import SettingError


def add_mcp_parser(subparsers, formatter_class=None) -> None:
    p = subparsers.add_parser("mcp", help="serve one episode's tools to an MCP client (stdio or HTTP)",
                              description="Boot one episode as play does and serve its tools (python, run_program "
                                          "or one per robo primitive, and finish) to an MCP client.",
                              epilog=exit_codes.help_epilog(),
                              **({"formatter_class": formatter_class} if formatter_class else {}))
    add_settings(p, McpConfig)
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from pyrua_ros.agent.run.progress import make_progress

    try:
        cfg = settings_from_args(McpConfig, args)
        cfg, rundir = prepare_play(cfg, warn=lambda text: print(f"pyrua-ros mcp: {text}", file=sys.stderr))
    except SettingError as exc:
        return refuse("mcp", str(exc))
    if rundir.action == "keep":
        print(f"pyrua-ros mcp: --resume: {cfg.out} already holds an episode that ran to its end; kept, nothing "
              "served", file=sys.stderr)
        data = rundir.result or {}
        return exit_codes.for_result(data.get("status", "error"), data.get("reason"))
    prepare_ros_environment()
    from pyrua_ros.agent.run.mcp_episode import serve

    progress = make_progress(cfg.output.progress)
    result = serve(cfg, progress=progress)
    code = exit_codes.for_result(result.status, result.reason)
    summary = episode_summary(result, cfg.out, code)
    if progress is not None:
        progress.finish(summary)
    print(json.dumps(summary), file=sys.stderr)   # stdout may be the MCP wire
    return code
