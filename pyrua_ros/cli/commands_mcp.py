"""``pyrua-ros mcp``: serve one episode's tools to any MCP client, over stdio or streamable HTTP on loopback.

The robot is booted as ``play`` boots it (``--driver sim`` starts the LIBERO sim node, ``fake`` the kinematic
arm, ``external`` uses drivers already running), with the same sandbox, budgets and run directory; the client
is the agent. stdio (the default) serves the process's own stdin/stdout, so an MCP client can launch it as a
command; ``--transport http`` prints ``{"mcp_url": "http://127.0.0.1:<port>/mcp"}`` on stderr (and writes it to
``<out>/mcp.json``) and serves until SIGINT/SIGTERM. Either way the episode also ends on ``finish`` or when
``--budget-s`` runs out, and result.json says how.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from pyrua_ros.cli.args import add_cell_args

EXIT_BAD_INPUT = 2


def add_mcp_parser(subparsers) -> None:
    p = subparsers.add_parser("mcp", help="serve one episode's tools to an MCP client (stdio or HTTP)")
    p.add_argument("--arm", default="cells", choices=["cells", "program", "tools"],
                   help="tools served: python cells (default), run_program, or one tool per robo primitive")
    add_cell_args(p)
    p.add_argument("--transport", default="stdio", choices=["stdio", "http"], help="MCP transport (default stdio)")
    p.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (default: a free one)")
    p.add_argument("--images", default="on-motion", choices=["on-motion", "on-demand", "none"],
                   help="camera images attached to tool results")
    p.add_argument("--feedback", default="rich", choices=["pure", "rich"], help="what a tool result carries")
    p.add_argument("--guides", action="store_true", help="copy the LIBERO guides into workspace/guides/")
    p.add_argument("--max-turns", type=int, default=None, help="decision budget: tool calls (finish excluded)")
    p.add_argument("--max-programs", type=int, default=None, help="program arm: at most N run_program calls")
    p.add_argument("--budget-s", type=float, default=3600.0, help="wall-clock budget of the episode [s]")
    p.add_argument("--cell-timeout-s", type=float, default=300.0, help="wall-clock limit of one cell [s]")
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from pyrua_ros.agent.config import ConfigError, PlayConfig
    from pyrua_ros.cli.main import prepare_ros_environment

    try:
        cfg = PlayConfig(out=pathlib.Path(args.out), task=args.task, suite=args.suite, seed=args.seed, arm=args.arm,
                         robot=args.robot, runtime="mcp", images=args.images, feedback=args.feedback,
                         guides=args.guides, max_turns=args.max_turns, max_programs=args.max_programs,
                         budget_s=args.budget_s, max_episode_steps=args.max_episode_steps,
                         primitives=args.primitives, vla_endpoint=args.vla_endpoint,
                         sam3_endpoint=args.sam3_endpoint, cell_timeout_s=args.cell_timeout_s, driver=args.driver,
                         clock=args.clock, video=args.video, record=args.record, cuda_device=args.cuda_device,
                         rpent_root=args.rpent_root, libero_type=args.libero_type)
    except (ConfigError, ValueError) as exc:
        print(f"pyrua-ros mcp: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    prepare_ros_environment()
    from pyrua_ros.agent.mcp_episode import serve

    result = serve(cfg, transport=args.transport, port=args.port)
    print(json.dumps({"status": result.status, "reason": result.reason,
                      "environment_success": result.environment_success, "tool_turns": result.tool_turns,
                      "out": str(cfg.out)}), file=sys.stderr)
    return EXIT_BAD_INPUT if result.status in ("boot_error", "error") else 0
