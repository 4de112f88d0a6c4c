"""The LIBERO-PRO episode as an :class:`~pyrua_ros.driver.model.ArmModel` for the driver core (no rclpy).

Commands are LIBERO's own action (OSC_POSE delta, 20 Hz), mapped the way the benchmark's policies use it:

- twist -> ``a[0:3] = v * dt / 0.05`` and ``a[3:6] = w * dt / 0.5``, each component clipped to [-1, 1] by LIBERO
  (1.0 = 5 cm or 0.5 rad per control step);
- finger-gap target [m] -> the OSC gripper action ``g = clip(1 - 2 * gap / open_width, -1, 1)`` (0.08 m = open =
  -1, 0 = close = +1), sent with every step so a target set by a goal keeps acting while the arm moves;
- joint targets -> robosuite's joint-position controller, swapped in for as long as joint steps come
  (:mod:`pyrua_ros.sim.joint_control`); the next twist step swaps OSC back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pyrua_ros.driver.model import CameraImage, ModelEpisode, ModelStep, TruthObject
from pyrua_ros.sim import suites
from pyrua_ros.sim.env import LiberoEpisode

OSC_POS_SCALE_M = 0.05      # LIBERO OSC_POSE: action 1.0 = 5 cm per control step
OSC_ROT_SCALE_RAD = 0.5     # action 1.0 = 0.5 rad per control step


class LiberoArm:
    """ArmModel over one :class:`~pyrua_ros.sim.env.LiberoEpisode` (built lazily by the first reset)."""

    DEFAULT_EPISODE = ("libero_goal", 8, 0, 10000)   # suite, task, seed, max_episode_steps: a task with a program

    def __init__(self, *, stream_resolution: int, gripper_open_m: float, control_period_s: float,
                 stream_backlog: int = 16, stream_wait: bool = False, render_nice: int = 10,
                 lean_step: bool = True):
        """``stream_wait``: a stream frame waits for room in a full render backlog instead of dropping the oldest
        (a lockstep driver: every frame of the camera rate is rendered)."""
        self.episode = LiberoEpisode(stream_resolution=stream_resolution, stream_backlog=stream_backlog,
                                     stream_wait=stream_wait, render_nice=render_nice, lean_step=lean_step)
        self.gripper_open_m = float(gripper_open_m)
        self.control_period_s = float(control_period_s)

    def validate_episode(self, suite: str, task: int, seed: int, max_episode_steps: int) -> None:
        suites.validate_episode(suite, task, seed)

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> ModelEpisode:
        info = self.episode.reset(suite, task, seed, max_episode_steps)
        self.control_period_s = float(self.episode.control_period)
        return info

    def _gripper_action(self, gap_m: float) -> float:
        return float(np.clip(1.0 - 2.0 * gap_m / self.gripper_open_m, -1.0, 1.0))

    def step_twist(self, v: np.ndarray, w: np.ndarray, gripper_gap_m: float) -> ModelStep:
        a = np.empty(7)
        a[0:3] = np.clip(np.asarray(v, dtype=float) * self.control_period_s / OSC_POS_SCALE_M, -1.0, 1.0)
        a[3:6] = np.clip(np.asarray(w, dtype=float) * self.control_period_s / OSC_ROT_SCALE_RAD, -1.0, 1.0)
        a[6] = self._gripper_action(gripper_gap_m)
        self.episode.step(a)
        return self.last_step()

    def step_joints(self, q_target: np.ndarray, gripper_gap_m: float) -> ModelStep:
        self.episode.step_joints(q_target, self._gripper_action(gripper_gap_m))
        return self.last_step()

    def last_step(self) -> ModelStep:
        s = self.episode.last_step()
        return ModelStep(s.step, bool(s.success), bool(s.truncated))

    def ee_pose(self):
        return self.episode.eef_pose()

    def ee_pose_at(self, q_arm):
        return self.episode.eef_pose_at(q_arm)

    def physics_state(self) -> np.ndarray:
        return self.episode.physics_state()

    def joint_state(self):
        return self.episode.joint_state()

    def gripper_opening(self) -> float:
        return self.episode.gripper_opening()

    def transforms(self, *, moving_only: bool = False):
        return self.episode.link_transforms(moving_only=moving_only)

    def static_frames(self) -> set[str]:
        return self.episode.static_frames()

    @staticmethod
    def _image(cap) -> CameraImage:
        return CameraImage(cap.color, cap.depth, cap.K, cap.width, depth_range=(cap.depth_near, cap.depth_far))

    def capture(self, camera: str, size: int) -> CameraImage:
        return self._image(self.episode.capture(camera, size))

    def capture_past(self, camera: str, size: int, step: int) -> tuple[CameraImage, np.ndarray]:
        """Render ``camera`` as the scene was after control ``step`` of this episode (from the episode's record of
        every step), and the camera's pose T_world_optical then (the wrist camera moved since; that TF may be gone
        from a client's buffer). ValueError for a step that is not ``0..last``."""
        cap = self.episode.capture(camera, size, step=step)
        return self._image(cap), cap.T_world_optical

    def stream(self, requests: dict[str, set[str]], size: int,
               deliver: Callable[[dict[str, CameraImage]], None]) -> None:
        """Queued for the episode's render thread at its stream resolution (``size`` is that resolution); with
        ``stream_wait`` a full backlog makes this call wait rather than drop a frame."""
        self.episode.stream(requests, lambda caps: deliver({c.camera: self._image(c) for c in caps}))

    def segmentation(self, camera: str, size: int, step: int | None = None):
        """As :meth:`ArmModel.segmentation`; ``step``: a past control step of this episode instead of now."""
        return self.episode.segmentation(camera, size, step=step)

    def ground_truth(self) -> list[TruthObject]:
        return [TruthObject(name, tuple(map(float, pos)), tuple(map(float, quat)))
                for name, (pos, quat) in sorted(self.episode.object_poses().items())]

    def urdf(self) -> str:
        return self.episode.urdf()

    def close(self) -> None:
        self.episode.close()
