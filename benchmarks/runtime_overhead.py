"""What each model runtime costs per turn on top of the robot: openai vs codex vs claude, same script, one run.

The same scripted episode (``--turns`` small cells on the kinematic fake arm, then ``finish``) is played by each
runtime against its own scripted model server on loopback (chat completions, Responses, Messages), so the model
answers at once and what is left is the runtime: the ``openai`` loop in this process, or a whole coding-agent
CLI (its own loop, its MCP client, the episode's MCP server). Per episode: ``policy_wall_s`` (the agent loop),
the time inside robo calls (the ledger), and ``overhead_s_per_turn = (policy_wall_s - robo time) / turns``;
the ratios are against ``openai``. These machines are noisy: compare ratios within one run. Usage::

    .venv/bin/python benchmarks/runtime_overhead.py [--turns 6] [--runtimes openai,codex,claude]

The last line is JSON with one entry per runtime and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CELLS = [
    "s = robo.state()\nprint(s.step, [round(v, 3) for v in s.eef_pos])",
    "x, y, z = robo.state().eef_pos\nm = robo.move_to([x + 0.02, y, z], robo.OPEN)\nprint(m.reached)",
    "x, y, z = robo.state().eef_pos\nm = robo.move_to([x - 0.02, y, z], robo.OPEN)\nprint(m.reached)",
]


def script_for(runtime: str, turns: int) -> tuple[object, list]:
    """The scripted server class and script of one runtime: ``turns`` cells, finish, a closing text."""
    cells = [CELLS[i % len(CELLS)] for i in range(turns)]
    finish = {"status": "stuck", "summary": "benchmark over"}
    if runtime == "openai":
        from pyrua_ros.testing.chat_server import ChatServer, Reply

        return ChatServer, [*(Reply(tool_calls=(("python", {"code": c}),)) for c in cells),
                            Reply(tool_calls=(("finish", finish),))]
    from pyrua_ros.testing.scripted_model import Turn

    if runtime == "codex":
        from pyrua_ros.testing.responses_server import ResponsesServer as server
    else:
        from pyrua_ros.testing.messages_server import MessagesServer as server
    return server, [*(Turn(calls=(("python", {"code": c}),)) for c in cells), Turn(calls=(("finish", finish),)),
                    Turn(text="done")]


def run(runtime: str, turns: int, folder: pathlib.Path) -> dict:
    server_cls, script = script_for(runtime, turns)
    out = folder / runtime
    with server_cls(script) as server:
        base = server.base_url
        proc = subprocess.run(
            [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", "cells", "--suite",
             "fake_table", "--task", "0", "--driver", "fake", "--no-video", "--no-record", "--progress", "off",
             "--runtime", runtime, "--base-url", base, "--feedback", "pure", "--images", "none"],
            capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=600, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{runtime}: play failed: {proc.stderr[-2000:]}")
    result = json.loads((out / "result.json").read_text())
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    robo_s = sum(c["elapsed_s"] or 0.0 for c in calls)
    entry = {"runtime": runtime, "status": result["status"], "tool_turns": result["tool_turns"],
             "startup_s": result["startup_s"], "policy_wall_s": result["policy_wall_s"],
             "robo_s": round(robo_s, 3), "total_tokens": result["generation"]["total_tokens"],
             "overhead_s_per_turn": round((result["policy_wall_s"] - robo_s) / max(1, result["tool_turns"]), 3)}
    print(f"{runtime:>7}: {entry['tool_turns']} turns, policy {entry['policy_wall_s']:.1f} s, robo "
          f"{entry['robo_s']:.1f} s, overhead {entry['overhead_s_per_turn']:.3f} s/turn, startup "
          f"{entry['startup_s']:.1f} s", file=sys.stderr, flush=True)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6, help="python cells per episode (default 6)")
    parser.add_argument("--runtimes", default="openai,codex,claude", help="comma-separated runtimes to measure")
    args = parser.parse_args(argv)
    from pyrua_ros.cli.common import prepare_ros_environment

    prepare_ros_environment()
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    with tempfile.TemporaryDirectory(prefix="runtime-overhead-") as tmp:
        entries = {r: run(r, args.turns, pathlib.Path(tmp)) for r in runtimes}
    base = entries.get("openai", {}).get("overhead_s_per_turn")
    ratios = {r: round(e["overhead_s_per_turn"] / base, 1) for r, e in entries.items() if base}
    print(json.dumps({"turns": args.turns, "runtimes": entries, "overhead_ratio_vs_openai": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
