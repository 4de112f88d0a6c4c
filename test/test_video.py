"""episode.mp4: real-time speed (fps = camera rate in sim time), cameras side by side under an overlay, the final
state held a second, H.264 yuv420p with faststart; checked on synthetic frames and on a real episode."""

import json
import pathlib
import subprocess
import sys

import imageio_ffmpeg
import numpy as np

from pyrua_ros.records.video import BAND_PX, HOLD_S, EpisodeVideo, frame_rate

ROOT = pathlib.Path(__file__).resolve().parents[1]
DT = 0.05   # control period [s]


def probe(path: pathlib.Path) -> dict:
    """fps, size, frame count, codec and pixel format as ffmpeg reads them back, and whether moov precedes mdat."""
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    frames = [np.frombuffer(f, np.uint8).reshape(meta["size"][1], meta["size"][0], 3) for f in reader]
    info = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True,
                          text=True).stderr
    data = path.read_bytes()
    return {"fps": meta["fps"], "size": tuple(meta["size"]), "frames": frames, "h264": "h264" in info,
            "yuv420p": "yuv420p" in info, "faststart": data.find(b"moov") < data.find(b"mdat")}


def test_frames_are_laid_on_sim_time_with_gaps_filled_and_the_end_held(tmp_path):
    video = EpisodeVideo(task="put the bowl on the plate")
    # a 2 Hz stream over 3 s of sim time, one frame missing (t=1.5), wrist at the same stamps
    stamps = [0.0, 0.5, 1.0, 2.0, 2.5, 3.0]
    for k, t in enumerate(stamps):
        for i, camera in enumerate(video.cameras):
            video.add_frame(camera, t, np.full((64, 64, 3), 20 * k + i, np.uint8))
    for step in range(61):
        video.add_state(step * DT, step, step >= 58)
    video.note_turn(1)
    assert frame_rate(stamps) == 2.0
    path = tmp_path / "episode.mp4"
    count = video.write(path, success=True)
    expected = int(3.0 * 2.0) + 1 + round(HOLD_S * 2.0)     # real time from first to last stamp, then the hold
    assert count == expected
    info = probe(path)
    assert info["fps"] == 2.0 and info["size"] == (2 * 64, 64 + BAND_PX) and len(info["frames"]) == expected
    assert info["h264"] and info["yuv420p"] and info["faststart"]
    # the missing t=1.5 frame repeats the t=1.0 one; the last frames hold the final state
    f = info["frames"]
    assert abs(int(f[3][BAND_PX + 32, 16, 0]) - int(f[2][BAND_PX + 32, 16, 0])) <= 3
    assert np.abs(f[-1].astype(int) - f[-3].astype(int)).mean() < 1.0


def test_a_real_episode_video_matches_its_steps(tmp_path):
    """Replay on the fake arm: the video lasts the episode's sim time (steps x 0.05 s) plus the held second."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", "play", "--arm", "cells", "--suite",
                           "fake_table", "--task", "0", "--driver", "fake", "--out", str(out), "--no-record",
                           "--progress", "off"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    info = probe(out / "episode.mp4")
    fps = info["fps"]
    assert fps == 2.0                                        # the fake arm's camera rate in sim time
    steps = result["env_steps_total"]
    assert steps > 0
    duration = len(info["frames"]) / fps
    assert abs(duration - (steps * DT + HOLD_S)) <= 1.0 / fps + 1e-6
    assert info["size"] == (2 * 256, 256 + BAND_PX) and info["h264"] and info["yuv420p"] and info["faststart"]
    # the overlay band is drawn (text pixels) and the final frame differs from the first (the cube moved)
    first, last = info["frames"][0].astype(int), info["frames"][-1].astype(int)
    assert (first[:BAND_PX] > 150).any()
    assert np.abs(first[BAND_PX:] - last[BAND_PX:]).mean() > 1.0
