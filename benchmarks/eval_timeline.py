"""Where the wall time and CPU of ``pyrualean eval --workers 1`` go outside its episodes: a timeline per process.

Runs eval_throughput's ``local1`` configuration (libero_goal tasks 1 and 8, seeds 0 and 1, one worker, recording
and video on) with ``PYRUA_CPU_METER`` set (:mod:`pyrua_ros.cputime`: every pyrua_ros process writes its record
when it exits, with its start and exit time and its marks), and prints, from the command's start (the coordinator
process's own start) to its exit, every mark of the coordinator, the worker and the sim node (Python imports,
worker start, the sim node's boot steps, the host's ROS backend, each episode's phases, the shutdown of each
process) with the seconds since the previous mark of the same process and that process's CPU meanwhile. Then a
summary of three windows: **start-up** (command start until the first episode's agent phase), **episodes** (until
the last episode's records were written) and **shutdown** (until the command exited), each with its wall time and
the CPU each process spent in it (interpolated between the process's marks: a mark is taken seldom enough that
this is exact at the window edges only where a mark falls there).

Usage::

    .venv/bin/python benchmarks/eval_timeline.py [--baseline-rev REV] [--repeat N] [--keep DIR] [--json FILE]

With ``--baseline-rev`` every run alternates the baseline revision (it must have the marks: this file's commit or
later) and the working tree, ``--repeat`` times, so a loaded machine's drift hits both alike; the 1-minute load
average is printed before and after each run. The last line printed is JSON with every figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pyrua_ros.cputime import ENV as METER_ENV  # noqa: E402

ROLES = {"cli-eval": "eval", "worker": "worker", "sim_node": "sim node"}


def _load(folder: pathlib.Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def points(record: dict) -> list[tuple[float, str, float]]:
    """(monotonic t, event, process CPU s) of one record: its start, its marks, its exit."""
    out = []
    if record.get("started_t") is not None:
        out.append((record["started_t"], "process start", 0.0))
    out += [(m["t"], m["name"], m["process_cpu_s"]) for m in record["marks"]]
    if record.get("exited_t") is not None:
        out.append((record["exited_t"], "exit", record["process_cpu_s"]))
    return sorted(out)


def cpu_at(pts: list[tuple[float, str, float]], t: float) -> float:
    """The process's CPU at ``t``, linear between its marks (0 before its start, all of it after its exit)."""
    if not pts or t <= pts[0][0]:
        return 0.0
    for (t0, _n0, c0), (t1, _n1, c1) in itertools.pairwise(pts):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
    return pts[-1][2]


def timeline(records: list[dict]) -> dict:
    """The timeline rows and the three windows of one run's records."""
    procs = [(ROLES.get(r["role"], r["role"]), points(r)) for r in records if r["role"] in ROLES]
    cli = next(p for name, p in procs if name == "eval")
    t0 = cli[0][0]
    rows = []
    for name, pts in procs:
        prev_t, prev_cpu = None, 0.0
        for t, event, cpu in pts:
            rows.append({"t": round(t - t0, 3), "process": name, "event": event,
                         "since_prev_s": None if prev_t is None else round(t - prev_t, 3),
                         "cpu_since_prev_s": round(cpu - prev_cpu, 3)})
            prev_t, prev_cpu = t, cpu
    rows.sort(key=lambda r: r["t"])
    worker = next((p for name, p in procs if name == "worker"), [])
    agents = [t for t, e, _c in worker if e == "phase:agent"]
    ends = [t for t, e, _c in worker if e in ("episode:start", "worker: closing")]
    first_agent = agents[0] if agents else t0
    last_records_end = max((t for t in ends if agents and t > agents[-1]), default=first_agent)
    end = cli[-1][0]
    windows = {}
    for label, a, b in (("start-up", t0, first_agent), ("episodes", first_agent, last_records_end),
                        ("shutdown", last_records_end, end)):
        cpu = {name: round(cpu_at(pts, b) - cpu_at(pts, a), 2) for name, pts in procs}
        windows[label] = {"wall_s": round(b - a, 2), "cpu_s": cpu, "cpu_s_all": round(sum(cpu.values()), 2)}
    return {"rows": rows, "windows": windows, "wall_s": round(end - t0, 2), "episodes": len(agents)}


def print_timeline(label: str, result: dict) -> None:
    print(f"\n## {label}: {result['episodes']} episodes, {result['wall_s']} s from the command's start to its exit "
          f"(load {result['load_1min_before']} -> {result['load_1min_after']})")
    print("|      t [s] | process  | event                          | since prev [s] | CPU since prev [s] |")
    print("|-----------:|----------|--------------------------------|---------------:|-------------------:|")
    for r in result["rows"]:
        since = "" if r["since_prev_s"] is None else f"{r['since_prev_s']:.2f}"
        print(f"| {r['t']:10.2f} | {r['process']:8s} | {r['event'][:30]:30s} | {since:>14s} | "
              f"{r['cpu_since_prev_s']:18.2f} |")
    for name, w in result["windows"].items():
        per = ", ".join(f"{p} {c:.2f}" for p, c in w["cpu_s"].items())
        print(f"{name:9s} {w['wall_s']:7.2f} s wall, {w['cpu_s_all']:6.2f} CPU s ({per})")


def run_once(label: str, folder: pathlib.Path, instance_args: list[str], code: pathlib.Path | None) -> dict:
    import eval_throughput

    meter = folder / "meter"
    meter.mkdir(parents=True, exist_ok=True)
    os.environ[METER_ENV] = str(meter)
    try:
        row = eval_throughput.run_config("local1", instance_args, folder / "eval", code)
    finally:
        os.environ.pop(METER_ENV, None)
    result = timeline(_load(meter))
    result.update(config=label, eval=row, load_1min_before=row["load_1min_before"],
                  load_1min_after=row["load_1min_after"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="libero_goal")
    parser.add_argument("--task", default="1,8")
    parser.add_argument("--seed", default="0-1")
    parser.add_argument("--baseline-rev", default=None, help="alternate with this git revision of the package")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (alternating with the baseline)")
    parser.add_argument("--keep", type=pathlib.Path, default=None, help="keep run directories and records here")
    parser.add_argument("--json", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    instance_args = ["--suite", args.suite, "--task", args.task, "--seed", args.seed, "--driver", "sim"]
    from pyrua_ros.testing import checkout_revision

    baseline = checkout_revision(args.baseline_rev, ROOT) if args.baseline_rev else None
    runs = []
    for i in range(args.repeat):
        if baseline is not None:
            runs.append((f"baseline-{i}", baseline))
        runs.append((f"local1-{i}", None))
    out = []
    with tempfile.TemporaryDirectory(prefix="pyrua_eval_timeline_") as tmp:
        folder = args.keep or pathlib.Path(tmp)
        for label, code in runs:
            result = run_once(label, folder / label, instance_args, code)
            print_timeline(label if code is None else f"{label} ({args.baseline_rev})", result)
            out.append(result)
    summary = {"cpus": os.cpu_count(), "runs": [{k: v for k, v in r.items() if k != "rows"} for r in out]}
    for kind in ("baseline", "local1"):
        mine = [r for r in out if r["config"].startswith(kind)]
        if mine:
            line = ", ".join(f"{w} {sum(r['windows'][w]['wall_s'] for r in mine) / len(mine):.1f} s / "
                             f"{sum(r['windows'][w]['cpu_s_all'] for r in mine) / len(mine):.1f} CPU s"
                             for w in ("start-up", "episodes", "shutdown"))
            print(f"{kind}: mean of {len(mine)}: wall {sum(r['wall_s'] for r in mine) / len(mine):.1f} s; {line}")
    if args.json:
        args.json.write_text(json.dumps({**summary, "rows": {r["config"]: r["rows"] for r in out}}, indent=2))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
