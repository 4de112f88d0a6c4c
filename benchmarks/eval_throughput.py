"""Evaluation throughput: episodes per hour of ``pyrualean eval`` with 1 vs 2 local workers, and local vs Ray.

The same instance set (by default libero_goal tasks 1 and 8, seeds 0 and 1: four LIBERO episodes of the packaged
replay programs, video and MCAP recording on, as users run them) is evaluated, in one run of this script, by:

- ``local1``: ``--workers 1`` (one sim node, reset between the four episodes);
- ``local2``: ``--workers 2`` (two sim nodes on two ROS domains, two episodes at once);
- ``ray2``:   ``--backend ray --workers 2`` (a private Ray instance on loopback, two episode actors).

A worker that slows as it goes (state that grows with every episode it ran: subscriptions, caches) shows in
``drift``: the policy time per control step of the last quarter of the episodes (by ``created_at``) against the
first quarter, given with eight episodes or more (e.g. ``--driver fake --suite fake_table --task 0 --seed 0-31
--configs local1``); per step, so that a set whose long task runs first does not read as a speed-up. Its memory
shows in ``worker_memory``: the local workers' resident memory once a quarter of their life had passed, at the
end, and at most (``benchmarks/worker_memory.py``; Ray's actors are not sampled).

Each configuration writes a fresh evaluation directory; its wall time is the whole command (boot of the workers
and nodes included), and episodes/hour = episodes / wall. The ratios ``local2 / local1`` (goal >= 1.7 on a 2-core
machine) and ``ray2 / local2`` are what to compare: absolute figures move with the machine's load, which is
sampled (1-minute load average, before and after each configuration) and reported next to them, with the CPU
seconds the process tree used per episode (Ray's workers, whose CPU the raylet's ignored SIGCHLD keeps out of any
rusage, sampled from /proc) and the cores it kept busy (``cpu_s / wall``): on a machine others
load, a worker gets a share of the cores, so ``cores_busy`` says how much of the 2x the configuration could reach.
Usage::

    .venv/bin/python benchmarks/eval_throughput.py [--suite libero_goal --task 1,8 --seed 0-1]
        [--driver sim|fake] [--configs local1,local2,ray2] [--json FILE] [--baseline-rev REV]

With ``--baseline-rev`` every configuration also runs with that git revision of the package (``baseline-<name>``
rows, alternating with the working tree's), for before/after figures from one run.

The last line printed is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from process_tree import UnaccountedChildren  # noqa: E402
from worker_memory import WorkerMemory  # noqa: E402

CONFIGS = {
    "local1": ["--workers", "1"],
    "local2": ["--workers", "2"],
    "ray2": ["--backend", "ray", "--workers", "2"],
}


def run_config(name: str, instance_args: list[str], out: pathlib.Path, code: pathlib.Path | None = None) -> dict:
    """One configuration's eval run (with the package of ``code``, another checkout, when given)."""
    from pyrua_ros.testing import env_with_code

    cmd = [sys.executable, "-m", "pyrua_ros.cli.main", "eval", "--arm", "cells", *instance_args, "--out", str(out),
           "--progress", "off", "--json", *CONFIGS[name]]
    load_before = os.getloadavg()[0]
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    unaccounted = UnaccountedChildren().start()   # Ray's workers: the raylet's children count in no rusage
    memory = WorkerMemory().start()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, check=False, cwd=code or ROOT, capture_output=True, text=True, env=env_with_code(code))
    wall = time.monotonic() - t0
    unaccounted.stop()
    memory.stop()
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the whole local process tree (every level reaps its children), plus Ray's workers, sampled
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime) + unaccounted.total_s()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: eval exited {proc.returncode}: {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    episodes = report["episodes"]
    slots = int(CONFIGS[name][CONFIGS[name].index("--workers") + 1])
    records = [json.loads(path.read_text()) for path in out.glob("*/*/*/result.json")]   # one per episode
    return {"config": name, "episodes": episodes, "wall_s": round(wall, 1),
            "episodes_per_hour": round(episodes / wall * 3600, 1),
            "successes": report["overall"]["successes"], "infra_failures": report["overall"]["infra_failures"],
            "mean_episode_wall_s": report["overall"]["mean_wall_time_s"],
            "cpu_s": round(cpu, 1), "cpu_s_per_episode": round(cpu / max(1, episodes), 1),
            "cores_busy": round(cpu / wall, 2),
            "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2),
            "breakdown": breakdown(out, records, wall, slots), "drift": drift(records),
            "worker_memory": memory.summary()}


def drift(records: list[dict]) -> dict[str, float] | None:
    """Policy time per control step [ms] (``policy_wall_s`` / ``env_steps``, summed over a quarter's episodes) of
    the first and the last quarter of the episodes in the order they were made, and last / first; None with fewer
    than eight episodes (a quarter of one or two says nothing). ``records``: the episodes' result.json."""
    timed = sorted((r["created_at"], r["policy_wall_s"], r["env_steps"]) for r in records
                   if r.get("created_at") and r.get("policy_wall_s") is not None and r.get("env_steps"))
    if len(timed) < 8:
        return None
    quarter = len(timed) // 4

    def ms_per_step(part) -> float:
        return 1000 * sum(p for _, p, _ in part) / sum(n for _, _, n in part)

    first, last = ms_per_step(timed[:quarter]), ms_per_step(timed[-quarter:])
    return {"policy_ms_per_step_first_quarter": round(first, 2), "policy_ms_per_step_last_quarter": round(last, 2),
            "last_over_first": round(last / first, 3)}


def breakdown(out: pathlib.Path, records: list[dict], wall: float, slots: int) -> dict[str, float]:
    """Where a configuration's wall time went (seconds): ``engine_start`` (Ray: the private instance and the
    episode actors; local workers start in the background), ``first_boot`` (the mean ``startup_s`` of each worker's
    first episode, its driver's boot included: the ``slots`` largest), ``episodes`` (the episodes' own wall time
    over the workers: what the workers were busy with, first boots included), ``close`` (the engine's end: drivers
    stopped, Ray's processes ended) and ``rest`` (the command's own start, waits between episodes, the report)."""
    run = json.loads((out / "eval.json").read_text())["runs"][-1]
    timings = run.get("engine_timings") or {}
    startups = [record.get("startup_s") or 0.0 for record in records]
    walls = [record.get("total_wall_s") or 0.0 for record in records]
    first = sorted(startups, reverse=True)[:slots]
    parts = {"engine_start": timings.get("ray_init_s", 0.0) + timings.get("actors_start_s", 0.0),
             "first_boot": sum(first) / max(1, len(first)), "episodes": sum(walls) / max(1, slots),
             "close": timings.get("close_s", 0.0)}
    parts["rest"] = wall - parts["engine_start"] - parts["episodes"] - parts["close"]
    return {key: round(value, 1) for key, value in parts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="libero_goal")
    parser.add_argument("--task", default="1,8")
    parser.add_argument("--seed", default="0-1")
    parser.add_argument("--driver", default="sim", choices=["sim", "fake"])
    parser.add_argument("--configs", default="local1,local2,ray2", help="comma list of " + ", ".join(CONFIGS))
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write the figures here")
    parser.add_argument("--baseline-rev", default=None, help="also run every configuration with this git revision")
    parser.add_argument("--keep", type=pathlib.Path, default=None,
                        help="keep each configuration's evaluation directory under this folder (default: a "
                             "temporary folder, removed)")
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    instance_args = ["--suite", args.suite, "--task", args.task, "--seed", args.seed, "--driver", args.driver]
    rows = []
    with tempfile.TemporaryDirectory(prefix="pyrua_eval_bench_") as tmp:
        folder = args.keep or pathlib.Path(tmp)
        from pyrua_ros.testing import checkout_revision

        baseline = checkout_revision(args.baseline_rev, ROOT) if args.baseline_rev else None
        runs = [(name, None) for name in args.configs.split(",")]
        if baseline is not None:
            runs = [run for name, _ in runs for run in ((f"baseline-{name}", baseline), (name, None))]
        for label, code in runs:
            name = label.removeprefix("baseline-")
            row = {**run_config(name, instance_args, folder / label, code), "config": label}
            rows.append(row)
            print(f"{label:16s} {row['episodes']} episodes in {row['wall_s']:7.1f} s = {row['episodes_per_hour']:7.1f} "
                  f"episodes/h, {row['cpu_s_per_episode']} CPU s/episode on {row['cores_busy']} cores "
                  f"({row['successes']} successes, {row['infra_failures']} infra; load "
                  f"{row['load_1min_before']} -> {row['load_1min_after']})", flush=True)
            print(f"{'':16s} breakdown: " + ", ".join(f"{k} {v} s" for k, v in row["breakdown"].items()), flush=True)
            if row["drift"]:
                d = row["drift"]
                print(f"{'':16s} drift: policy {d['policy_ms_per_step_first_quarter']} ms per control step in the "
                      f"first quarter of the episodes, {d['policy_ms_per_step_last_quarter']} in the last "
                      f"({d['last_over_first']}x)", flush=True)
            if row["worker_memory"]:
                m = row["worker_memory"]
                print(f"{'':16s} worker memory: {m['rss_mb_at_quarter']} MB resident a quarter in, "
                      f"{m['rss_mb_last']} MB at the end, {m['rss_mb_max']} MB at most", flush=True)
    by = {r["config"]: r for r in rows}
    summary = {"cpus": os.cpu_count(), "instances": instance_args, "runs": rows}
    if "local1" in by and "local2" in by:
        summary["speedup_2_workers"] = round(by["local2"]["episodes_per_hour"] / by["local1"]["episodes_per_hour"], 3)
        print(f"2 workers / 1 worker: {summary['speedup_2_workers']:.2f}x (goal >= 1.7x on 2 cores, issue 31)")
    if "baseline-local1" in by and "baseline-local2" in by:
        summary["baseline_speedup_2_workers"] = round(by["baseline-local2"]["episodes_per_hour"]
                                                      / by["baseline-local1"]["episodes_per_hour"], 3)
        print(f"baseline {args.baseline_rev}: 2 workers / 1 worker: {summary['baseline_speedup_2_workers']:.2f}x")
    if "local2" in by and "ray2" in by:
        summary["ray_vs_local"] = round(by["ray2"]["episodes_per_hour"] / by["local2"]["episodes_per_hour"], 3)
        print(f"Ray (2 actors) / local (2 workers): {summary['ray_vs_local']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
