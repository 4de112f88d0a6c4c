"""The start of a private Ray instance: where its time goes, and what it costs in wall and CPU seconds.

Each trial is a fresh process that does what ``pyrualean eval --backend ray --workers 2`` does before its first
episode and after its last: ``RayEngine.start()`` (a private instance on loopback, then two episode actors, each
importing the package and claiming its ROS domain; no driver boots) and ``RayEngine.close()``. Printed per trial:

- ``start_s`` (``ray_init_s`` + ``actors_start_s`` of the engine, what the progress view reports) and ``close_s``;
- the phases of the start, from the first line each Ray process writes to its log in the session folder (seconds
  after ``start()`` began): ``gcs`` (GCS server), ``dashboard`` (the head's dashboard process, which the start waits
  for), ``monitor`` (the autoscaler's), ``raylet``, ``dashboard_agent`` and ``runtime_env_agent`` (the raylet waits
  for the first), ``raylet_ready``, ``log_monitor``, ``workers`` (the raylet prestarts one per CPU; the last one
  up), ``driver`` (this process joined);
- ``cpu_s``: CPU seconds of the trial's whole process tree, Ray's processes included (this script is a child
  subreaper: whatever the trial leaves behind is reaped here and counted; the raylet's children, the workers, whose
  CPU the raylet's ignored SIGCHLD keeps out of any rusage, are sampled from /proc), and ``wall_s`` of the trial;
- with ``--idle S``: ``idle_cpu_s``, the CPU seconds the instance's processes (and this driver) use in S seconds of
  idling between the start and the close, by process name (``idle_cpu_by_process``, from /proc): Ray's own cost
  while episodes run beside it.

Configurations alternate trial by trial (the machine is shared and its load drifts; the 1-minute load average
before each trial is printed): the working tree, and with ``--baseline-rev REV`` that git revision of the package.
Usage::

    .venv/bin/python benchmarks/ray_start.py [--repeats 3] [--idle S] [--baseline-rev REV] [--json FILE]

The last line printed is JSON with every figure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from process_tree import UnaccountedChildren, become_subreaper, reap_all  # noqa: E402

#: phase name -> (log file name pattern, regular expression of the line, or None: the file's first line)
PHASES = {
    "gcs": (r"gcs_server\.out", None),
    "dashboard": (r"dashboard\.log", None),
    "monitor": (r"monitor\.log", None),
    "raylet": (r"raylet\.out", None),
    "dashboard_agent": (r"dashboard_agent\.log", None),
    "runtime_env_agent": (r"runtime_env_agent\.log", None),
    "raylet_ready": (r"raylet\.out", r"Raylet of id .* started"),
    "log_monitor": (r"log_monitor\.log", None),
    "driver": (r"python-core-driver-.*\.log", None),
}
STAMP = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def _stamp(line: str) -> float | None:
    match = STAMP.match(line)
    if match is None:
        return None
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()   # (local time, as Ray)


def _first(path: pathlib.Path, pattern: str | None) -> float | None:
    with open(path, errors="replace") as lines:
        for line in lines:
            if pattern is None or re.search(pattern, line):
                found = _stamp(line)
                if found is not None:
                    return found
    return None


def log_phases(logs: pathlib.Path, t0: float) -> dict[str, float]:
    """Seconds after ``t0`` (wall clock) at which each phase's process first logged (the phases of the module
    docstring; a process that did not run is left out)."""
    phases: dict[str, float] = {}
    files = sorted(logs.iterdir()) if logs.is_dir() else []
    for name, (file_pattern, line_pattern) in PHASES.items():
        stamps = [s for f in files if re.fullmatch(file_pattern, f.name) for s in [_first(f, line_pattern)] if s]
        if stamps:
            phases[name] = round(min(stamps) - t0, 2)
    workers = [s for f in files if f.name.startswith("python-core-worker-") for s in [_first(f, None)] if s]
    if workers:
        phases["workers"] = round(max(workers) - t0, 2)
    return phases


def process_cpu() -> dict[tuple[int, str], float]:
    """CPU seconds so far of this process and every descendant, by (PID, process name), from /proc."""
    from pyrua_ros.testing.processes import descendants

    found = {}
    for pid in descendants(os.getpid()) | {os.getpid()}:
        try:
            fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            name = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        found[(pid, name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime
    return found


def idle_cpu(seconds: float) -> dict:
    """What the started instance (and this driver) spends in ``seconds`` of doing nothing."""
    before = process_cpu()
    time.sleep(seconds)
    by_name: dict[str, float] = {}
    for (pid, name), cpu in process_cpu().items():
        by_name[name] = by_name.get(name, 0.0) + cpu - before.get((pid, name), 0.0)
    return {"idle_s": seconds, "idle_cpu_s": round(sum(by_name.values()), 2),
            "idle_cpu_by_process": {k: round(v, 2) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])}}


def trial(idle_s: float = 0.0) -> dict:
    """One start and close of a private instance with two episode actors (in this process), ``idle_s`` seconds
    apart (their CPU measured)."""
    from pyrua_ros.evaluation.ray_engine import RayEngine

    with tempfile.TemporaryDirectory(prefix="pyrua_ray_start_") as out:
        engine = RayEngine(2, pathlib.Path(out))
        t0 = time.time()
        engine.start()
        phases = log_phases(engine.temp_dir / "session_latest" / "logs", t0) if engine.temp_dir else {}
        idle = idle_cpu(idle_s) if idle_s > 0 else {}
        engine.close(interrupted=False)
    t = engine.timings
    return {"start_s": round(t["ray_init_s"] + t["actors_start_s"], 2), **t, "phases": phases, **idle}


def run_trial(code: pathlib.Path | None, idle_s: float = 0.0) -> dict:
    from pyrua_ros.testing import env_with_code

    load = os.getloadavg()[0]
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    unaccounted = UnaccountedChildren().start()   # the raylet's children (the actors) count in no rusage
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--trial", "--idle", str(idle_s)],
                          check=False,
                          cwd=code or ROOT,
                          capture_output=True, text=True, env=env_with_code(code))
    wall = time.monotonic() - t0
    unaccounted.stop()
    all_reaped, reaped = reap_all()
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"trial exited {proc.returncode}: {proc.stderr[-3000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime) + unaccounted.total_s(reaped)
    return {**row, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_1min": round(load, 2),
            "all_reaped": all_reaped}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-rev", default=None, help="also run every trial with this git revision")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="also write the figures here")
    parser.add_argument("--idle", type=float, default=0.0, metavar="S",
                        help="also idle S seconds between start and close, measuring the CPU Ray spends")
    parser.add_argument("--trial", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if args.trial:
        print(json.dumps(trial(args.idle)))
        return 0
    become_subreaper()
    from pyrua_ros.testing import checkout_revision

    baseline = checkout_revision(args.baseline_rev, ROOT) if args.baseline_rev else None
    configs = ([("baseline", baseline)] if baseline is not None else []) + [("tree", None)]
    rows = []
    for repeat in range(args.repeats):
        for label, code in configs if repeat % 2 == 0 else configs[::-1]:
            row = {"config": label, **run_trial(code, args.idle)}
            rows.append(row)
            phases = " ".join(f"{k} {v:.1f}" for k, v in sorted(row["phases"].items(), key=lambda kv: kv[1]))
            print(f"{label:8s} start {row['start_s']:5.1f} s (init {row['ray_init_s']:4.1f} + actors "
                  f"{row['actors_start_s']:4.1f}), close {row['close_s']:4.1f} s, trial wall {row['wall_s']:5.1f} s, "
                  f"CPU {row['cpu_s']:5.1f} s, load {row['load_1min']:.1f} | {phases}", flush=True)
            if "idle_cpu_s" in row:
                print(f"         idle {row['idle_s']:.0f} s: {row['idle_cpu_s']:.2f} CPU s "
                      f"({', '.join(f'{k} {v}' for k, v in row['idle_cpu_by_process'].items())})", flush=True)
    summary = {"cpus": os.cpu_count(), "baseline_rev": args.baseline_rev, "runs": rows}
    for label, _code in configs:
        mine = [r for r in rows if r["config"] == label]
        summary[label] = {key: round(statistics.median(r[key] for r in mine), 2)
                          for key in ("start_s", "ray_init_s", "actors_start_s", "close_s", "wall_s", "cpu_s")}
        print(f"{label:8s} median: " + ", ".join(f"{k} {v}" for k, v in summary[label].items()))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
