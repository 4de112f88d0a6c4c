"""The ``ArmModel`` seam: what the driver core steps. Implemented by the LIBERO-PRO episode (``sim/arm.py``) and the
kinematic fake (``fake_arm/arm.py``); a real arm has no model (its own drivers serve the interfaces).

Plain Python + numpy, no rclpy. Units: metres, radians, seconds; poses in the world frame, quaternions (x, y, z, w).
A model knows nothing about goals, e-stop, safety limits, clocks or ROS: :class:`pyrua_ros.driver.core.DriverCore`
decides *what* to step and the model only steps it. Every ``step_*`` call is exactly one control step
(``control_period_s``) and returns the :class:`ModelStep` after it.

The gripper is commanded the way ``control_msgs/GripperCommand`` commands it: a finger-gap target [m] (0 = closed,
``gripper_open_width_m`` of interfaces.yaml = open), held by the model until the next command; each model turns it
into its own actuator command (LIBERO: the OSC gripper action -1..+1; the fake: a finger-gap set point).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import numpy as np


@dataclasses.dataclass(frozen=True)
class ModelEpisode:
    """The episode a reset chose. ``task_language``: the instruction; ``object_names``: the movable objects;
    ``max_episode_steps``: control steps after which the episode is truncated."""

    suite: str
    task: int
    seed: int
    task_language: str
    object_names: tuple[str, ...]
    max_episode_steps: int


@dataclasses.dataclass(frozen=True)
class ModelStep:
    """State after a control step (``step`` 0 right after reset). ``success`` is the benchmark's own check, latched;
    ``truncated``: ``step >= max_episode_steps`` without success."""

    step: int
    success: bool
    truncated: bool

    @property
    def over(self) -> bool:
        return self.success or self.truncated


@dataclasses.dataclass(frozen=True)
class CameraImage:
    """One rendered view, the true upright pinhole image, ``size`` x ``size`` px. ``color``: uint8 (H, W, 3) RGB;
    ``depth``: float32 (H, W) metres along the optical axis (0 = nothing hit); a stream frame holds only the kinds
    asked for (the other is None). ``K``: 3x3 intrinsics of this image. The optical frame's pose is in the model's
    TF tree (:meth:`ArmModel.transforms`) under ``frames.camera_optical`` of interfaces.yaml. ``depth_range``:
    the renderer's clip planes (near, far) [m], between which depth is measured; None when the model has none.
    A capture reply carries it as ``depth_near`` / ``depth_far``."""

    color: np.ndarray | None
    depth: np.ndarray | None
    K: np.ndarray
    size: int
    depth_range: tuple[float, float] | None = None


@dataclasses.dataclass(frozen=True)
class TruthObject:
    """Ground truth of one object, for rviz markers only (never for the agent). ``shape``: ``sphere``, ``box`` or
    ``cylinder``; ``size``: full extents [m] (x, y, z); ``color``: RGB in 0..1."""

    name: str
    position: tuple[float, float, float]
    quat_xyzw: tuple[float, float, float, float]
    shape: str = "sphere"
    size: tuple[float, float, float] = (0.03, 0.03, 0.03)
    color: tuple[float, float, float] = (0.1, 0.8, 0.3)


class ArmModel(Protocol):
    """A steppable arm with cameras. Not thread-safe: the driver core calls it from one thread."""

    control_period_s: float
    """Duration of one control step [s]."""

    def validate_episode(self, suite: str, task: int, seed: int, max_episode_steps: int) -> None:
        """Raise ValueError, naming the valid values, if the episode cannot be reset to."""

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> ModelEpisode:
        """Reset to the benchmark episode (ValueError as :meth:`validate_episode`)."""

    def step_twist(self, v: np.ndarray, w: np.ndarray, gripper_gap_m: float) -> ModelStep:
        """One control step following the world twist ``v`` [m/s], ``w`` [rad/s] (already safety-filtered);
        zero twist holds the arm. ``gripper_gap_m`` is the finger-gap target."""

    def step_joints(self, q_target: np.ndarray, gripper_gap_m: float) -> ModelStep:
        """One control step driving the arm joints toward ``q_target`` [rad] (the arm joints of interfaces.yaml,
        in order)."""

    def last_step(self) -> ModelStep:
        """The state after the latest step or reset."""

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """End-effector position (3,) [m] and orientation (x, y, z, w) in the world frame."""

    def ee_pose_at(self, q_arm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """End-effector position and orientation (as :meth:`ee_pose`) if the arm joints were at ``q_arm`` [rad]
        (forward kinematics; nothing moves): how the safety filter judges a joint set point."""

    def joint_state(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Names (arm joints, then finger joints), positions [rad | m], velocities [rad/s | m/s]."""

    def gripper_opening(self) -> float:
        """The finger gap now [m]."""

    def physics_state(self) -> np.ndarray:
        """The whole simulated state now as float64 numbers (LIBERO: MuJoCo ``qpos`` of the scene; the fake: joint
        positions, finger gap and object poses): what the episode status's ``state_digest`` chains, step by step."""

    def transforms(self, *, moving_only: bool = False) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        """(parent, child, translation [m], quat xyzw) of every frame of the robot and its cameras;
        ``moving_only`` leaves out :meth:`static_frames` (what ``/tf`` after each step needs)."""

    def static_frames(self) -> set[str]:
        """Child frames of :meth:`transforms` that never move relative to their parent (``/tf_static``)."""

    def capture(self, camera: str, size: int) -> CameraImage:
        """Render ``camera`` now, ``size`` x ``size`` pixels (ValueError naming the cameras for an unknown one)."""

    def stream(self, requests: dict[str, set[str]], size: int,
               deliver: Callable[[dict[str, CameraImage]], None]) -> None:
        """A best-effort stream frame of the current state: ``{camera: kinds}`` (``color`` and/or ``depth``).
        ``deliver({camera: image})`` may run later and in another thread (LIBERO renders in a render thread of
        its own, off the control path); a frame the model cannot keep up with may be dropped, or (LIBERO in
        lockstep) this call waits until the model can take it."""

    def segmentation(self, camera: str, size: int) -> tuple[np.ndarray, dict[int, str]]:
        """Instance ids (int32 (H, W), 0 = nothing) of ``camera`` now, and id -> object or fixture name."""

    def ground_truth(self) -> list[TruthObject]:
        """Object poses, for people watching in rviz."""

    def urdf(self) -> str:
        """URDF of the robot (joint and link names as in :meth:`joint_state` and :meth:`transforms`)."""

    def close(self) -> None:
        """Free resources (safe to call twice)."""
