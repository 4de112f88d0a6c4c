"""The agent loop's own time per turn, model time excluded, over a replayed episode.

A run directory of ``--cells`` small cells (state reads, short moves, a segment, a show) is generated, then
replayed through ``pyrualean play --runtime replay`` (the real loop, kernel, robo, ROS backend and driver) in two
configurations in the same run, since these machines are noisy: ``lean`` (``--feedback pure --images none``) and
``full`` (``--feedback rich --images on-motion``, which captures two 1024x1024 images after every moving turn).

Per turn, ``overhead = turn wall time - time inside robo calls`` (the ledger's ``elapsed_s``); with the replay
runtime the model time is zero. That is the cost of the kernel round trips, the tool result, feedback, images,
records and progress. Usage::

    .venv/bin/python benchmarks/turn_overhead.py [--cells 20] [--driver fake|sim]

The last line is JSON: ``turns``, ``overhead_s_per_turn`` (lean), ``overhead_s_per_turn_full``, ``ratio``
(full / lean) and the wall times.

It also measures what the kernel's isolation costs, with and without bubblewrap in the same run (``kernel``):
start and restart time of a kernel process, the round trip of an empty cell, and the per-call proxy overhead
of a robo call (a trivial method, so the time is the kernel boundary's own). ``--kernel-only`` runs only that.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CELLS = [
    "s = robo.state()\nprint(s.step, [round(v, 3) for v in s.eef_pos])",
    "x, y, z = robo.state().eef_pos\nm = robo.move_to([x + 0.02, y, z], robo.OPEN)\nprint(m.reached)",
    "x, y, z = robo.state().eef_pos\nm = robo.move_to([x - 0.02, y, z], robo.OPEN)\nprint(m.reached)",
    "robo.show('agentview')\nprint(robo.task)",
    "import numpy as np\nprint(float(np.mean(robo.image('agentview', resolution='low'))))",
]


def make_recording(folder: pathlib.Path, n: int) -> pathlib.Path:
    """A run directory whose workspace holds ``n`` cells (what the replay runtime reads)."""
    ws = folder / "workspace"
    ws.mkdir(parents=True)
    for i in range(n):
        (ws / f"cell_{i + 1:03d}.py").write_text(CELLS[i % len(CELLS)])
    (folder / "result.json").write_text(json.dumps({"finish": {"status": "stuck", "summary": "benchmark"}}))
    return folder


def run(recording: pathlib.Path, out: pathlib.Path, *, driver: str, suite: str, task: int, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--arm", "cells", "--suite", suite, "--task",
           str(task), "--driver", driver, "--runtime", "replay", "--replay", str(recording), "--out", str(out),
           "--no-video", "--no-record", "--progress", "off", *extra]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    turns = [t for t in json.loads((out / "tool_turns.json").read_text()) if t["tool"] == "python"]
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    turn_s = sum(t["elapsed_s"] for t in turns)
    robo_s = sum(c["elapsed_s"] for c in calls)
    result = json.loads((out / "result.json").read_text())
    return {"turns": len(turns), "turn_s": round(turn_s, 3), "robo_s": round(robo_s, 3),
            "overhead_s_per_turn": round((turn_s - robo_s) / max(1, len(turns)), 4),
            "policy_wall_s": result["policy_wall_s"], "status": result["status"]}


class _Target:
    """A robo stand-in whose one method costs nothing: what is measured is the kernel boundary."""

    def ping(self, value: int = 0) -> int:
        """Return ``value``."""
        return value


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def kernel_costs(sandbox: str, *, restarts: int = 5, calls: int = 500) -> dict:
    """Start/restart time, empty-cell round trip and per-call overhead of one kernel in ``sandbox`` mode."""

    from pyrua_ros.kernel import Kernel

    with tempfile.TemporaryDirectory(prefix="pyrua_kernel_bench_") as ws:
        t0 = time.monotonic()
        kernel = Kernel(_Target(), pathlib.Path(ws), sandbox=sandbox)
        first = time.monotonic() - t0
        try:
            for _ in range(restarts):
                kernel.restart()
            empty = []
            for _ in range(20):
                t = time.monotonic()
                kernel.run_cell("pass", 10)
                empty.append(time.monotonic() - t)
            per_call = []
            for _ in range(3):
                t = time.monotonic()
                out = kernel.run_cell(f"for i in range({calls}):\n    robo.ping(i)", 60)
                assert out.exception is None, out.exception
                per_call.append((time.monotonic() - t - _median(empty)) / calls)
        finally:
            kernel.close()
    return {"sandbox": sandbox, "first_start_s": round(first, 3),
            "start_s": round(_median(kernel.start_times_s[1:]), 3),
            "empty_cell_s": round(_median(empty), 4), "per_call_us": round(_median(per_call) * 1e6, 1)}


def kernel_section() -> dict:
    """Kernel costs without isolation (``unsafe``: a plain child process) and with bubblewrap, in one run."""
    plain, bwrap = kernel_costs("unsafe"), kernel_costs("bwrap")
    print(f"kernel, plain process:   {plain}")
    print(f"kernel, bubblewrap:      {bwrap}")
    return {"plain": plain, "bwrap": bwrap,
            "start_ratio": round(bwrap["start_s"] / max(1e-9, plain["start_s"]), 2),
            "per_call_ratio": round(bwrap["per_call_us"] / max(1e-9, plain["per_call_us"]), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=20)
    ap.add_argument("--driver", default="fake", choices=["fake", "sim"])
    ap.add_argument("--kernel-only", action="store_true", help="measure only the kernel's isolation costs")
    args = ap.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    kernel = kernel_section()
    if args.kernel_only:
        print(json.dumps({"kernel": kernel}))
        return 0
    suite, task = ("fake_table", 0) if args.driver == "fake" else ("libero_goal", 8)
    with tempfile.TemporaryDirectory(prefix="pyrua_turn_overhead_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        recording = make_recording(tmp / "recording", args.cells)
        where = {"driver": args.driver, "suite": suite, "task": task}
        lean = run(recording, tmp / "lean", **where, extra=["--feedback", "pure", "--images", "none"])
        full = run(recording, tmp / "full", **where, extra=["--feedback", "rich", "--images", "on-motion"])
    print(f"lean (pure, no images):  {lean}")
    print(f"full (rich, on-motion):  {full}")
    summary = {"turns": lean["turns"], "overhead_s_per_turn": lean["overhead_s_per_turn"],
               "overhead_s_per_turn_full": full["overhead_s_per_turn"],
               "ratio": round(full["overhead_s_per_turn"] / max(1e-9, lean["overhead_s_per_turn"]), 2),
               "policy_wall_s": lean["policy_wall_s"], "policy_wall_s_full": full["policy_wall_s"],
               "driver": args.driver, "kernel": kernel}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
