"""Where an episode's CPU goes: the sim node, the agent process, the kernel, the encoder and DDS, measured.

Runs, with ``PYRUA_CPU_METER`` set (:mod:`pyrua_ros.cputime`: every pyrua_ros process writes what it measured
when it exits), one or both of:

- ``play``: ``pyrualean play --arm cells`` of the packaged replay program (default libero_goal task 8), as a user
  runs it: a fresh sim node, the sandboxed kernel, recording and video on;
- ``eval``: ``pyrualean eval --arm cells --workers 1`` of eval_throughput.py's instance set (libero_goal tasks 1
  and 8, seeds 0 and 1), one worker and its one sim node for all episodes (the command of
  ``eval_throughput.run_config``).

and prints, per configuration, a table of CPU seconds per episode and milliseconds per control step by process and
bucket: the sim node (boot until ready, env builds and resets, physics, each render by camera and purpose, stream
delivery, the rest of the ROS node, DDS threads), the agent process (process start, robo calls, images, prompt,
kernel start, records, video, rclpy executors, DDS threads, the rest), the kernel process, the video encoder, the
eval coordinator. Renders are the render thread's CPU plus the GL rasteriser threads' (Mesa llvmpipe) meanwhile;
a render request's purpose is the phase the episode process was in when it was asked for (``card`` at boot,
``on-motion / robo views`` while the agent runs, ``video final frame`` at shutdown); a stream job renders the
frame every stream subscriber gets (episode.mp4 and the episode.mcap image topics take the same message), and its
CPU is split evenly over the cameras it draws. ``not metered`` is the CPU the whole process tree used
(``RUSAGE_CHILDREN``) that no record holds (bwrap, processes that left no record).

Usage::

    .venv/bin/python benchmarks/episode_cpu.py [--configs play,eval] [--busy] [--json FILE]
        [--suite libero_goal --task 8] [--eval-task 1,8 --eval-seed 0-1]

``--busy`` runs every configuration beside one busy loop per core. The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import hashlib
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pyrua_ros.cputime import ENV as METER_ENV  # noqa: E402

PURPOSES = {"boot": "card", "reset": "card", "card": "card", "prompt": "on-motion / robo views",
            "agent": "on-motion / robo views", "shutdown": "video final frame"}


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_play(suite: str, task: int, out: pathlib.Path, code: pathlib.Path | None = None) -> dict:
    """One ``play`` episode of the packaged program (with the package of ``code``, another checkout, when given);
    returns wall, the process tree's CPU and the run dirs."""
    from pyrua_ros.testing import env_with_code

    cmd = [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--arm", "cells", "--suite", suite, "--task",
           str(task), "--out", str(out / "run"), "--progress", "off"]
    cpu0, t0 = _children_cpu_s(), time.monotonic()
    proc = subprocess.run(cmd, cwd=code or ROOT, capture_output=True, text=True, check=False, env=env_with_code(code))
    wall, cpu = time.monotonic() - t0, _children_cpu_s() - cpu0
    if not (out / "run" / "result.json").exists():
        raise SystemExit(f"play wrote no result.json (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return {"command": " ".join(cmd[1:]), "wall_s": wall, "cpu_s": cpu, "run_dirs": [out / "run"]}


def run_eval(instance_args: list[str], out: pathlib.Path, code: pathlib.Path | None = None) -> dict:
    """eval_throughput's ``local1`` configuration; returns wall, the process tree's CPU and the run dirs."""
    import eval_throughput

    row = eval_throughput.run_config("local1", instance_args, out / "eval", code)
    runs = [p.parent for p in (out / "eval").rglob("result.json") if ".eval" not in p.parts]
    command = " ".join(["pyrua_ros.cli.main", "eval", "--arm", "cells", *instance_args, "--workers", "1"])
    return {"command": command, "wall_s": row["wall_s"], "cpu_s": row["cpu_s"], "run_dirs": runs, "eval": row}


# ---------------------------------------------------------------------------------------------- identity
IDENTITY_TOPICS = ("/ee_pose", "/joint_states", "/sim/capture/")   # deterministic in lockstep: state and captures


def fingerprint(run_dir: pathlib.Path) -> dict:
    """What must not change when a cut saves CPU: the driver's per-step state digests, the prompt, the card images
    and the captures the model saw (in episode.mcap, with the robot state messages: the set of their payloads)."""

    from mcap.reader import make_reader

    result = json.loads((run_dir / "result.json").read_text())
    card = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted((run_dir / "card").glob("*.png"))}
    payloads: dict[str, set[str]] = {}
    with contextlib.suppress(OSError), open(run_dir / "episode.mcap", "rb") as f:
        for _schema, channel, message in make_reader(f).iter_messages():
            if channel.topic.startswith(IDENTITY_TOPICS) and not channel.topic.endswith("camera_info"):
                payloads.setdefault(channel.topic, set()).add(hashlib.sha256(message.data).hexdigest())
    recorded = hashlib.sha256(json.dumps({k: sorted(v) for k, v in sorted(payloads.items())}).encode()).hexdigest()
    return {"instance": f"{result['suite']}:{result['task']}:{result['seed']}",
            "state_digest": (result.get("state_digest") or {}).get("final"),
            "steps": result.get("env_steps_total"), "success": result.get("environment_success"),
            "prompt_sha256": (result.get("prompt") or {}).get("sha256", "")[:16], "card": card,
            "recorded_state_and_captures": recorded[:16]}


# ---------------------------------------------------------------------------------------------- the table
def _load(folder: pathlib.Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def _after(record: dict, mark: str, name: str) -> float:
    """Section ``name``'s CPU after the first mark ``mark`` of ``record`` (all of it when there is no such mark)."""
    total = record["sections"].get(name, {}).get("cpu_s", 0.0) + record["external"].get(name, {}).get("cpu_s", 0.0)
    before = next((m["sections"].get(name, 0.0) for m in record["marks"] if m["name"] == mark), 0.0)
    return total - before


def _dds_threads(record: dict) -> float:
    return sum(g["cpu_s"] for name, g in record["thread_groups"].items() if name.startswith("dds."))


def _phase_at(marks: list[tuple[float, str]], t: float) -> str:
    i = bisect.bisect_right([m[0] for m in marks], t) - 1
    return marks[i][1] if i >= 0 else "before the first episode"


def breakdown(records: list[dict], episodes: int, steps: int, total_cpu_s: float) -> list[tuple[str, str, float]]:
    """(process, bucket, CPU s in all) rows of the metered records of one configuration."""
    rows: list[tuple[str, str, float]] = []
    agents = [r for r in records if r["role"] in ("cli-play", "worker")]
    sims = [r for r in records if r["role"] == "sim_node"]
    others = [r for r in records if r not in agents and r not in sims]
    phase_marks = sorted((m["t"], m["name"].split(":", 1)[1]) for r in agents for m in r["marks"]
                         if m["name"].startswith("phase:") or m["name"] == "episode:end")
    for sim in sims:
        names = next((m["names"] for m in sim["marks"] if m["name"] == "cameras"), {})
        ready = next((m for m in sim["marks"] if m["name"] == "ready"), {"process_cpu_s": 0.0, "sections": {},
                                                                         "t": 0.0})
        rows.append(("sim node", "boot until ready (imports, env build, first reset)", ready["process_cpu_s"]))
        charged = 0.0
        for name in ("sim: env build", "sim: reset", "sim: physics", "stream frame delivery (publish)"):
            cpu = _after(sim, "ready", name)
            charged += cpu
            rows.append(("sim node", name.removeprefix("sim: "), cpu))
        renders: dict[str, float] = {}
        for ev in sim["events"]:
            if ev["t"] < ready["t"] or not ev["section"].startswith("render "):
                continue
            _render, kind, jobs = ev["section"].split(" ", 2)
            parts = jobs.split(",")
            for part in parts:
                cam, px, kinds = part.split(":")
                cam = names.get(cam, f"camera {cam}")
                if kind == "stream":
                    purpose = "stream (video + MCAP image topics)"
                else:
                    phase = _phase_at(phase_marks, ev["t"])
                    purpose = PURPOSES.get(phase, f"between episodes ({phase})")
                key = f"render {cam} {px}px {kinds}: {purpose}"
                renders[key] = renders.get(key, 0.0) + ev["cpu_s"] / len(parts)
        for key in sorted(renders):
            rows.append(("sim node", key, renders[key]))
            charged += renders[key]
        dds = _dds_threads(sim)
        rows.append(("sim node", "DDS threads (Fast DDS, whole life)", dds))
        rest = sim["process_cpu_s"] - ready["process_cpu_s"] - charged - dds
        rows.append(("sim node", "ROS node: executor, state topics, services, render thread rest", rest))
    for agent in agents:
        start = next((m["process_cpu_s"] for m in agent["marks"] if m["name"] == "episode:start"), 0.0)
        rows.append(("agent process", "process start, imports (until the first episode)", start))
        sections = {**{k: v["cpu_s"] for k, v in agent["sections"].items()}}
        external = {k: v["cpu_s"] for k, v in agent["external"].items()}
        groups = {
            "robo: motion calls": ["robo: motion calls"],
            "robo: read-only calls (views, state)": ["robo: read-only calls"],
            "images: PNG / npz encode and decode": ["images: PNG encode", "images: PNG decode", "images: npz encode"],
            "prompt": ["prompt"],
            "kernel start (this process)": ["kernel start (this process)"],
            "records: episode.mcap": ["records: episode.mcap"],
            "records: agent topics, calls.jsonl, run files": ["records: agent topics", "episode: shutdown calls",
                                                              "episode: shutdown recorder",
                                                              "episode: shutdown publisher",
                                                              "episode: shutdown agent"],
            "video: stream frames, compose, encode (this process)": ["video: stream frames", "video: compose",
                                                                     "video: encode (this process)",
                                                                     "episode: shutdown video"],
            "episode orchestration (boot, reset wait, card, agent start, stream flush, host)": [
                "episode: boot (reset, recorder, card)", "episode: agent start (prompt, kernel, runtime)",
                "episode: shutdown streams", "episode: shutdown host"],
        }
        charged = start
        for label, names in groups.items():
            cpu = sum(sections.get(n, 0.0) for n in names)
            charged += cpu
            rows.append(("agent process", label, cpu))
        executors = sum(v for k, v in sections.items() if k.startswith("rclpy executor: "))
        rows.append(("agent process", "DDS: rclpy executors (receive, deserialize, dispatch)", executors))
        dds = _dds_threads(agent)
        rows.append(("agent process", "DDS threads (Fast DDS)", dds))
        charged += executors + dds
        rows.append(("agent process", "cell loop, runtime, rest", agent["process_cpu_s"] - charged))
        rows.append(("kernel process", "start (sandbox, interpreter until ready)",
                     external.get("kernel process: start", 0.0)))
        rows.append(("kernel process", "cells", external.get("kernel process: cells", 0.0)))
        rows.append(("video encoder", "ffmpeg (libx264)", external.get("video: encode (ffmpeg)", 0.0)))
    for other in others:
        rows.append((other["role"], "whole process", other["process_cpu_s"]))
    metered = sum(cpu for _p, _b, cpu in rows)
    rows.append(("-", "not metered (bwrap, processes without a record)", total_cpu_s - metered))
    return rows


def print_table(name: str, result: dict) -> None:
    """The table of one measured configuration (:func:`measure`'s result), Markdown."""
    rows = [(r["process"], r["bucket"], r["cpu_s"]) for r in result["rows"]]
    episodes, steps, total = result["episodes"], result["steps"], result["cpu_s"]
    command, busy = result["command"], result["busy"]
    print(f"\n## {name}: {episodes} episode(s), {steps} control steps, {total:.1f} CPU s in all "
          f"({total / max(1, episodes):.2f} CPU s/episode){' beside one busy loop per core' if busy else ''}")
    print(f"command: {command}")
    print("| process | bucket | CPU s/episode | ms/control step | share |\n|---|---|---:|---:|---:|")
    for proc, bucket, cpu in rows:
        print(f"| {proc} | {bucket} | {cpu / max(1, episodes):.3f} | {1e3 * cpu / max(1, steps):.1f} | "
              f"{100 * cpu / max(1e-9, total):.1f}% |")


def print_comparison(name: str, before: dict, after: dict) -> None:
    """One Markdown table of a configuration measured with the baseline revision and with the working tree."""
    def per(result: dict) -> dict[tuple[str, str], tuple[float, float]]:
        e, s = max(1, result["episodes"]), max(1, result["steps"])
        return {(r["process"], r["bucket"]): (r["cpu_s"] / e, 1e3 * r["cpu_s"] / s) for r in result["rows"]}

    b, a = per(before), per(after)
    keys = list(dict.fromkeys([*b, *a]))
    print(f"\n## {name}: before ({before['config']}) / after, CPU s per episode and ms per control step")
    print("| process | bucket | before s/ep | before ms/step | after s/ep | after ms/step |")
    print("|---|---|---:|---:|---:|---:|")
    for key in keys:
        (bs, bm), (as_, am) = b.get(key, (0.0, 0.0)), a.get(key, (0.0, 0.0))
        print(f"| {key[0]} | {key[1]} | {bs:.3f} | {bm:.1f} | {as_:.3f} | {am:.1f} |")
    for label, r in (("before", before), ("after", after)):
        print(f"| {label}: total | {r['episodes']} episode(s), {r['steps']} steps, {r['successes']} successes, load "
              f"{r['load_1min_before']} -> {r['load_1min_after']} | {r['cpu_s_per_episode']:.2f} | "
              f"{1e3 * r['cpu_s'] / max(1, r['steps']):.1f} | | |")


def measure(name: str, args, folder: pathlib.Path, code: pathlib.Path | None = None) -> dict:
    meter = folder / "meter"
    meter.mkdir(parents=True, exist_ok=True)
    os.environ[METER_ENV] = str(meter)
    try:
        if name == "play":
            run = run_play(args.suite, args.task, folder, code)
        else:
            run = run_eval(["--suite", args.suite, "--task", args.eval_task, "--seed", args.eval_seed,
                            "--driver", "sim"], folder, code)
    finally:
        os.environ.pop(METER_ENV, None)
    results = [json.loads((d / "result.json").read_text()) for d in run["run_dirs"]]
    episodes = len(results)
    steps = sum(int(r.get("env_steps_total") or 0) for r in results)
    rows = breakdown(_load(meter), episodes, steps, run["cpu_s"])
    return {"config": name, "command": run["command"], "episodes": episodes, "steps": steps,
            "wall_s": round(run["wall_s"], 1), "cpu_s": round(run["cpu_s"], 2),
            "cpu_s_per_episode": round(run["cpu_s"] / max(1, episodes), 2),
            "successes": sum(bool(r.get("environment_success")) for r in results),
            "fingerprints": sorted((fingerprint(d) for d in run["run_dirs"]), key=lambda f: f["instance"]),
            "rows": [{"process": p, "bucket": b, "cpu_s": round(c, 3)} for p, b, c in rows]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="play,eval")
    parser.add_argument("--suite", default="libero_goal")
    parser.add_argument("--task", type=int, default=8, help="the play episode's task")
    parser.add_argument("--eval-task", default="1,8")
    parser.add_argument("--eval-seed", default="0-1")
    parser.add_argument("--busy", action="store_true", help="beside one busy loop per core")
    parser.add_argument("--json", type=pathlib.Path, default=None)
    parser.add_argument("--baseline-rev", default=None,
                        help="also measure every configuration with this git revision of the package (before/after "
                             "from one run; the revision must have pyrua_ros/cputime.py)")
    parser.add_argument("--from-json", type=pathlib.Path, default=None,
                        help="measure nothing: print the before/after tables of an earlier --json file")
    parser.add_argument("--keep", type=pathlib.Path, default=None, help="keep run directories and records here")
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if args.from_json is not None:
        by = {r["config"]: r for r in json.loads(args.from_json.read_text())["runs"]}
        for name in args.configs.split(","):
            if f"baseline-{name}" in by and name in by:
                print_comparison(name, by[f"baseline-{name}"], by[name])
        return 0
    from pyrua_ros.testing import busy_loops, checkout_revision

    baseline = checkout_revision(args.baseline_rev, ROOT) if args.baseline_rev else None
    runs = [(name, None) for name in args.configs.split(",")]
    if baseline is not None:
        runs = [run for name, _ in runs for run in ((f"baseline-{name}", baseline), (name, None))]
    out = []
    with tempfile.TemporaryDirectory(prefix="pyrua_episode_cpu_") as tmp:
        folder = args.keep or pathlib.Path(tmp)
        for label, code in runs:
            name = label.removeprefix("baseline-")
            load0 = os.getloadavg()[0]
            with busy_loops() if args.busy else contextlib.nullcontext():
                result = measure(name, args, folder / label, code)
            name = label if code is None else f"{label} ({args.baseline_rev})"
            result.update(config=label, busy=args.busy, load_1min_before=round(load0, 2),
                          load_1min_after=round(os.getloadavg()[0], 2))
            print_table(name, result)
            print(f"wall {result['wall_s']} s, {result['successes']}/{result['episodes']} successes, load "
                  f"{result['load_1min_before']} -> {result['load_1min_after']}", flush=True)
            out.append(result)
    summary = {"cpus": os.cpu_count(), "runs": out}
    by = {r["config"]: r for r in out}
    for name in args.configs.split(","):
        if f"baseline-{name}" in by and name in by:
            same = by[f"baseline-{name}"]["fingerprints"] == by[name]["fingerprints"]
            summary[f"identical_{name}"] = same
            print(f"{name}: state digests, prompt, card images, recorded state and captures identical to the "
                  f"baseline: {same}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
