"""``episode.mp4``: the episode as a video worth watching, at real-time speed.

Frames come from the camera streams the driver publishes (rendered only while someone subscribes, at its
``camera_rate_hz`` of sim time), so the video costs no renders beyond the recording's own; the episode adds the
step-0 card view and one final capture, so the first and last states are always in it. Each video frame shows the
cameras side by side (agentview, then wrist, in the order of ``config/interfaces.yaml``) under an overlay band:
the task, then ``step``, ``turn``, sim time and the success state of that moment.

Timing: the frame rate is the camera rate in sim time (the median gap between frame stamps), and frames are laid
on that clock from the first stamp to the last, a missing frame repeating the one before, so one second of video
is one second of simulated robot time. The final state is held for :data:`HOLD_S`. Encoding: H.264, yuv420p,
``+faststart`` (the index first, so a browser streams it), with the ffmpeg binary imageio-ffmpeg ships.
"""

from __future__ import annotations

import bisect
import itertools
import json
import pathlib
import threading

import numpy as np

from pyrua_ros import cputime
from pyrua_ros.wire.convert import image_to_numpy, stamp_to_seconds
from pyrua_ros.wire.interfaces import Interfaces, load

MAX_FRAMES = 8000          # per camera (256x256x3 = 192 KiB each)
HOLD_S = 1.0               # the final state is held this long [s]
BAND_PX = 40               # overlay band height [px]
DEFAULT_FPS = 2.0          # when fewer than two stamps arrived (the sim's default camera rate)


def frame_rate(stamps: list[float], default: float = DEFAULT_FPS) -> float:
    """Frames per second of sim time: 1 / median gap between distinct stamps (``default`` with fewer than 2)."""
    unique = sorted(set(round(s, 6) for s in stamps))
    gaps = [b - a for a, b in itertools.pairwise(unique) if b - a > 1e-6]
    if not gaps:
        return default
    return round(1.0 / float(np.median(gaps)), 3)


class EpisodeVideo:
    """Collects camera frames and the episode timeline on ``node``; :meth:`write` encodes ``episode.mp4``.

    ``node=None`` subscribes to nothing (frames and states come through :meth:`add_frame` / :meth:`add_state`).
    """

    def __init__(self, node=None, *, task: str = "", names: Interfaces | None = None):
        names = names or load()
        self.task = task
        self.cameras = tuple(names.robot.cameras)
        self.frames: dict[str, list[tuple[float, np.ndarray]]] = {c: [] for c in self.cameras}
        self.timeline: list[tuple[float, int, bool]] = []     # (sim_time, step, success) from the episode status
        self.turns: list[tuple[float, int]] = []               # (sim_time when the turn began, turn)
        self._lock = threading.Lock()
        self._last_stream: dict[str, float] = {}   # camera -> stamp of its latest stream frame
        self._stream_stamps: dict[str, list[float]] = {}   # camera -> stamps of its stream frames, as they came
        self._node = node
        self._subs = []
        if node is not None:
            from sensor_msgs.msg import Image
            from std_msgs.msg import String

            from pyrua_ros.wire import qos

            self._subs = [node.create_subscription(Image, names.driver.color(c), self._on_image(c), qos.STREAM)
                          for c in self.cameras]
            self._subs.append(node.create_subscription(String, names.sim.episode_status, self._on_status,
                                                       qos.LATCHED))

    # ------------------------------------------------------------------ inputs
    def _on_image(self, camera: str):
        def callback(msg) -> None:
            with cputime.section("video: stream frames"):
                receive(msg)

        def receive(msg) -> None:
            stamp = stamp_to_seconds(msg.header.stamp)
            with self._lock:
                if self._last_stream.get(camera) == stamp:   # a lockstep driver re-publishes the same frame while
                    return                                  # the model thinks
                self._last_stream[camera] = stamp
                self._stream_stamps.setdefault(camera, []).append(stamp)
            self.add_frame(camera, stamp, image_to_numpy(msg)[..., :3])
        return callback

    def _on_status(self, msg) -> None:
        try:
            data = json.loads(msg.data)
            self.add_state(float(data["sim_time"]), int(data["step"]), bool(data["success"]))
        except (ValueError, KeyError, TypeError):
            return

    def add_state(self, sim_time: float, step: int, success: bool) -> None:
        """The episode's step and success at ``sim_time`` [s] (from the episode status)."""
        with self._lock:
            self.timeline.append((sim_time, step, success))

    @property
    def frame_count(self) -> int:
        """Frames collected so far, every camera together."""
        with self._lock:
            return sum(map(len, self.frames.values()))

    def streams_reach(self, sim_time: float) -> bool | None:
        """Whether every camera's stream has delivered its last frame up to ``sim_time`` [s]: its latest frame is
        less than one stream period (the smallest spacing of its frames so far) before it. None while a stream has
        too few frames to tell its period."""
        with self._lock:
            stamps = {c: sorted(set(s)) for c, s in self._stream_stamps.items()}
        if not stamps or any(len(s) < 2 for s in stamps.values()):
            return None
        return all(sim_time - s[-1] < min(b - a for a, b in itertools.pairwise(s)) + 1e-6 for s in stamps.values())

    def add_frame(self, camera: str, stamp: float, rgb: np.ndarray) -> None:
        """One frame of ``camera`` at sim time ``stamp`` [s] (streams, the card view, the final capture)."""
        with self._lock:
            frames = self.frames.setdefault(camera, [])
            if len(frames) < MAX_FRAMES:
                frames.append((float(stamp), np.ascontiguousarray(rgb, dtype=np.uint8)))

    def note_turn(self, turn: int) -> None:
        """Turn ``turn`` begins now (at the latest sim time known)."""
        with self._lock:
            now = self.timeline[-1][0] if self.timeline else 0.0
            self.turns.append((now, int(turn)))

    # ------------------------------------------------------------------ composition
    def _size(self) -> tuple[int, int]:
        """(height, width) of one camera tile: the most common stream frame size."""
        shapes = [f.shape[:2] for frames in self.frames.values() for _s, f in frames]
        h, w = (int(v) for v in max(set(shapes), key=shapes.count))
        return h + h % 2, w + w % 2

    def _latest(self, camera: str, t: float, tile: tuple[int, int]) -> np.ndarray:
        frames = self.frames.get(camera) or []
        stamps = [s for s, _f in frames]
        i = bisect.bisect_right(stamps, t + 1e-6) - 1
        if i < 0:
            i = 0 if frames else -1
        if i < 0:
            return np.zeros((*tile, 3), np.uint8)
        return _fit(frames[i][1], tile)

    def _state_at(self, t: float) -> tuple[int | None, bool, int | None]:
        steps = [s for s, _st, _ok in self.timeline]
        i = bisect.bisect_right(steps, t + 1e-6) - 1
        step, success = (self.timeline[i][1], self.timeline[i][2]) if i >= 0 else (None, False)
        starts = [s for s, _n in self.turns]
        j = bisect.bisect_right(starts, t + 1e-6) - 1
        return step, success, (self.turns[j][1] if j >= 0 else None)

    def _clock(self) -> tuple[float, float, float] | None:
        """(first stamp, last stamp, frames per second) of the video, None without frames (lock held)."""
        for frames in self.frames.values():
            frames.sort(key=lambda f: f[0])
        stamps = sorted(s for frames in self.frames.values() for s, _f in frames)
        if not stamps:
            return None
        fps = frame_rate([s for s, _f in self.frames[self.cameras[0]]] if self.frames[self.cameras[0]] else stamps)
        return stamps[0], stamps[-1], fps

    def index(self) -> dict:
        """When things happen in the video (``episode_video.json``, read by the episode viewer): ``fps``, the sim
        times of its first and last frame [s], ``hold_s``, and ``turns`` ``[{turn, sim_time, video_s}]`` (when each
        turn began, in seconds of video); empty without frames."""
        with self._lock:
            clock = self._clock()
            if clock is None:
                return {}
            t0, t1, fps = clock
            turns = [{"turn": n, "sim_time": round(s, 6), "video_s": round(max(0.0, s - t0), 3)}
                     for s, n in sorted(self.turns)]
        return {"fps": fps, "start_sim_time": round(t0, 6), "end_sim_time": round(t1, 6), "hold_s": HOLD_S,
                "turns": turns}

    def compose(self, *, success: bool | None = None) -> tuple[list[np.ndarray], float]:
        """The video frames and their rate: real-time frames from the first stamp to the last, then the final
        state held for :data:`HOLD_S` (its overlay shows ``success`` when given)."""
        with self._lock:
            self.timeline.sort()
            clock = self._clock()
            if clock is None:
                return [], DEFAULT_FPS
            stamps = (clock[0], clock[1])
            fps = clock[2]
            tile = self._size()
            t0, t1 = stamps[0], stamps[-1]
            n = int(np.floor((t1 - t0) * fps + 1e-6)) + 1
            out = []
            for k in range(n):
                t = t0 + k / fps
                if k == n - 1:
                    t = t1   # the last frame shows the final state
                out.append(self._frame(t, tile, success=None))
            final = self._frame(t1, tile, success=success)
            out[-1] = final
            out.extend([final] * round(HOLD_S * fps))
            return out, fps

    def _frame(self, t: float, tile: tuple[int, int], *, success: bool | None) -> np.ndarray:
        import cv2

        images = np.concatenate([self._latest(c, t, tile) for c in self.cameras], axis=1)
        step, now_success, turn = self._state_at(t)
        if success is not None:
            now_success = success
        band = np.full((BAND_PX, images.shape[1], 3), 24, np.uint8)
        font = cv2.FONT_HERSHEY_SIMPLEX
        task = self.task if len(self.task) <= 80 else self.task[:77] + "..."
        cv2.putText(band, task, (6, 15), font, 0.42, (235, 235, 235), 1, cv2.LINE_AA)
        info = (f"step {step if step is not None else '-'}  turn {turn if turn is not None else '-'}  "
                f"t {t:6.2f}s")
        cv2.putText(band, info, (6, 33), font, 0.42, (200, 200, 200), 1, cv2.LINE_AA)
        label, color = ("SUCCESS", (60, 220, 90)) if now_success else ("running" if success is None else "no success",
                                                                       (200, 200, 200) if success is None
                                                                       else (230, 90, 60))
        (w, _h), _ = cv2.getTextSize(label, font, 0.5, 1)
        cv2.putText(band, label, (images.shape[1] - w - 8, 33), font, 0.5, color, 1, cv2.LINE_AA)
        return np.ascontiguousarray(np.concatenate([band, images], axis=0))

    def write(self, path: str | pathlib.Path, *, success: bool | None = None) -> int:
        """Encode to ``path`` (H.264, yuv420p, faststart); returns the frame count (0: no frame, no file)."""
        import imageio_ffmpeg

        with cputime.section("video: compose"):
            frames, fps = self.compose(success=success)
        if not frames:
            return 0
        h, w = frames[0].shape[:2]
        with cputime.section("video: encode (this process)"), cputime.children("video: encode (ffmpeg)"):
            writer = imageio_ffmpeg.write_frames(str(path), (w, h), fps=fps, codec="libx264",
                                                 pix_fmt_out="yuv420p", macro_block_size=1,
                                                 ffmpeg_log_level="error", output_params=["-movflags", "+faststart"])
            writer.send(None)
            for frame in frames:
                writer.send(frame)
            writer.close()
        return len(frames)

    def close(self) -> None:
        for sub in self._subs:
            self._node.destroy_subscription(sub)


def _fit(rgb: np.ndarray, tile: tuple[int, int]) -> np.ndarray:
    if rgb.shape[:2] == tile:
        return rgb
    import cv2

    return cv2.resize(rgb, (tile[1], tile[0]), interpolation=cv2.INTER_AREA)
