"""What a video at the control rate costs: ``--video-fps 20`` against the default camera rate, one episode each.

Run: ``.venv/bin/python benchmarks/video_rate.py`` from the repository root (it sets the loopback DDS environment
itself, with its own domain id). Each configuration is ``pyrualean run --policy <packaged program>`` (default:
libero_goal task 8) as a user runs it: a fresh sim node in lockstep, the sandboxed kernel, recording and video on.

- ``default``: the driver's camera rate (``camera_rate_hz``, 2 Hz of sim time);
- ``fps20``: ``--video-fps 20``, one stream frame per control step;
- with ``--baseline-rev REV``, ``baseline_fps20``: ``--video-fps 20`` with that revision of the package (before
  the lockstep sim waited for its renderer, frames it could not keep up with were dropped).

Per configuration: the CPU seconds of the whole process tree (the run, its sim node and kernel: every level reaps
its children), the wall time, the control steps, and what the streams delivered: distinct stream frames per camera
in ``episode.mcap`` against the frames the rate asks for (one per ``1/fps`` of sim time from the first frame, the
first included), the video's frame rate and frame count, and the sizes of ``episode.mcap`` / ``episode.mp4``. The
configurations run one after the other; the machine's 1-minute load is reported beside each, since absolute figures
move with it (compare the CPU ratio of one run).

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

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyrua_ros.testing import apply_loopback_environment, checkout_revision, env_with_code  # noqa: E402

apply_loopback_environment()

from pyrua_ros.examples import EXAMPLES  # noqa: E402

CONFIGS = {"default": [], "fps20": ["--video-fps", "20"]}


def stream_stamps(mcap: pathlib.Path) -> dict[str, list[float]]:
    """``{camera color topic: sorted distinct header stamps [s]}`` of the camera streams recorded in ``mcap``."""
    from mcap.reader import make_reader

    from pyrua_ros.records.recorder import _cdr_time_ns
    from pyrua_ros.wire.interfaces import load

    names = load()
    topics = {names.driver.color(cam) for cam in names.robot.cameras}
    stamps: dict[str, set[float]] = {}
    with mcap.open("rb") as f:
        for _schema, channel, message in make_reader(f).iter_messages():
            topic = channel.topic.lstrip("/")
            if topic in topics:
                stamps.setdefault(topic, set()).add(round(_cdr_time_ns(message.data) * 1e-9, 6))
    return {topic: sorted(s) for topic, s in stamps.items()}


def run_episode(name: str, program: pathlib.Path, out: pathlib.Path, *, suite: str, task: int, extra: list[str],
                code: pathlib.Path | None = None) -> dict:
    """One ``pyrualean run`` of ``program``; its figures (see the module docstring)."""
    import imageio_ffmpeg

    cmd = [sys.executable, "-m", "pyrua_ros.cli.main", "run", "--policy", str(program), "--suite", suite,
           "--task", str(task), "--out", str(out), *extra]
    load_before = os.getloadavg()[0]
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=code or ROOT, capture_output=True, text=True, check=False, env=env_with_code(code))
    wall = time.monotonic() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    if not (out / "result.json").exists():
        raise SystemExit(f"{name}: {' '.join(cmd)} wrote no result.json (exit {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}")
    result = json.loads((out / "result.json").read_text())
    index = json.loads((out / "episode_video.json").read_text()) if (out / "episode_video.json").exists() else {}
    fps = float(index.get("fps") or 0.0)
    streams = stream_stamps(out / "episode.mcap") if (out / "episode.mcap").exists() else {}
    frames = {topic: len(s) for topic, s in streams.items()}
    asked = {topic: round((s[-1] - s[0]) * fps) + 1 if s and fps else 0 for topic, s in streams.items()}
    mp4 = out / "episode.mp4"
    video_frames = imageio_ffmpeg.count_frames_and_secs(str(mp4))[0] if mp4.exists() else 0
    return {"config": name, "status": result["status"], "success": result["environment_success"],
            "steps": result["env_steps_total"], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "policy_s": result["policy_wall_s"], "stream_frames": frames, "frames_asked": asked,
            "video_fps": fps, "video_frames": video_frames,
            "mcap_mb": round((out / "episode.mcap").stat().st_size / 1e6, 2) if (out / "episode.mcap").exists() else 0,
            "mp4_kb": round(mp4.stat().st_size / 1e3, 1) if mp4.exists() else 0,
            "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="libero_goal:8", help="SUITE:TASK of a packaged example program")
    parser.add_argument("--configs", default="default,fps20", help="comma list of " + ", ".join(CONFIGS))
    parser.add_argument("--baseline-rev", default=None,
                        help="also run --video-fps 20 with this git revision of the package (baseline_fps20)")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="keep the run directories here")
    args = parser.parse_args(argv)
    suite, _, task = args.program.partition(":")
    program = EXAMPLES[(suite, int(task))]
    runs = [(name, CONFIGS[name], None) for name in args.configs.split(",")]
    if args.baseline_rev:
        runs.append(("baseline_fps20", CONFIGS["fps20"], checkout_revision(args.baseline_rev, ROOT)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="pyrua_video_rate_") as tmp:
        folder = args.out or pathlib.Path(tmp)
        for name, extra, code in runs:
            row = run_episode(name, program, folder / name, suite=suite, task=int(task), extra=extra, code=code)
            rows.append(row)
            print(f"{name:15s} {row['status']} success={row['success']} {row['steps']} steps: CPU {row['cpu_s']} s, "
                  f"wall {row['wall_s']} s; stream frames {row['stream_frames']} of {row['frames_asked']} asked; "
                  f"video {row['video_frames']} frames at {row['video_fps']} fps; mcap {row['mcap_mb']} MB, mp4 "
                  f"{row['mp4_kb']} kB (load {row['load_1min_before']} -> {row['load_1min_after']})", flush=True)
    by = {r["config"]: r for r in rows}
    summary = {"cpus": os.cpu_count(), "program": args.program, "baseline_rev": args.baseline_rev, "runs": rows}
    if "default" in by and "fps20" in by:
        summary["cpu_ratio_fps20"] = round(by["fps20"]["cpu_s"] / by["default"]["cpu_s"], 3)
        print(f"--video-fps 20 / default: {summary['cpu_ratio_fps20']:.2f}x the CPU of the episode")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
