"""``episode.mp4``: the agentview camera stream of an episode, as a video.

Frames come from the camera color topic the driver publishes (rendered only while someone subscribes, at the
driver's throttled ``camera_rate_hz``), so the video costs no renders beyond the recording's own. Frames are
kept in memory as uint8 arrays (256x256x3 = 192 KiB each; a 10,000-step episode at 2 Hz of sim time is about
1,000 frames) and encoded with the ffmpeg binary that imageio-ffmpeg ships.
"""

from __future__ import annotations

import pathlib
import threading

import numpy as np

from pyrua_ros.driver.interfaces import Interfaces, load

MAX_FRAMES = 4000


class EpisodeVideo:
    """Collects frames of one camera stream on ``node``; :meth:`write` encodes them to an mp4 file."""

    def __init__(self, node, camera: str = "agentview", *, names: Interfaces | None = None, fps: int = 10):
        from sensor_msgs.msg import Image

        from pyrua_ros.driver import qos

        names = names or load()
        self.fps = fps
        self.frames: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._last_stamp: tuple[int, int] | None = None
        self._node = node
        self._sub = node.create_subscription(Image, names.driver.color(camera), self._on_image, qos.STREAM)

    def _on_image(self, msg) -> None:
        from pyrua_ros.driver.convert import image_to_numpy

        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        with self._lock:
            if stamp == self._last_stamp:   # a lockstep driver re-publishes the same frame while the model thinks
                return
            self._last_stamp = stamp
            if len(self.frames) < MAX_FRAMES:
                self.frames.append(np.ascontiguousarray(image_to_numpy(msg)[..., :3]))

    def write(self, path: str | pathlib.Path) -> int:
        """Encode the frames to ``path`` (H.264, yuv420p); returns the frame count (0: no file written)."""
        import imageio_ffmpeg

        with self._lock:
            frames = list(self.frames)
        if not frames:
            return 0
        h, w = frames[0].shape[:2]
        writer = imageio_ffmpeg.write_frames(str(path), (w, h), fps=self.fps, codec="libx264",
                                             pix_fmt_out="yuv420p", macro_block_size=1,
                                             ffmpeg_log_level="error")
        writer.send(None)
        for frame in frames:
            if frame.shape[:2] == (h, w):
                writer.send(np.ascontiguousarray(frame))
        writer.close()
        return len(frames)

    def close(self) -> None:
        self._node.destroy_subscription(self._sub)
