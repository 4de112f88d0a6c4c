"""The seam between ``LiberoRobot`` and a robot: the ``RobotBackend`` protocol and the small records it returns.

``LiberoRobot`` (pure Python) only talks to an object with these methods. ``ros_backend.RosBackend`` implements
it with rclpy clients of the driver surface and the sim interfaces; the tests use a small in-process kinematic
double. Every method blocks until its answer is there (or its deadline passes) and returns plain numpy / Python
values. Units: metres, radians, seconds, world frame (x/y span the table, z up); quaternions are (x, y, z, w).

Errors: a backend raises :class:`BackendRefused` when the driver refuses a command (episode over, e-stop,
cancelled), :class:`BackendTimeout` when an answer does not arrive within its deadline, and lets ``ValueError``
through for bad arguments (unknown camera, resolution). ``LiberoRobot`` turns these into ``EpisodeFinished`` /
``ToolError``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # written by the sim-interfaces layer; robo only reads its attributes
    from pyrua_ros.sim_interfaces.status import EpisodeStatus


class BackendRefused(RuntimeError):
    """The driver refused a command. ``reason``: "terminated", "truncated", "estop", "cancelled" or "refused"."""

    def __init__(self, message: str, reason: str = "refused") -> None:
        super().__init__(message)
        self.reason = reason


class BackendTimeout(RuntimeError):
    """An answer did not arrive within its deadline (message names the interface and the deadline in s)."""


class BackendDeadline(BackendTimeout):
    """The deadline the host set for the running call (the cell's time limit or the episode's wall budget)
    passed: motion was stopped (goals cancelled, a zero twist in realtime) and the call ends."""


@dataclasses.dataclass(frozen=True)
class EePose:
    """End-effector (grip site) pose in the world frame: ``pos`` (3,) m, ``quat_xyzw`` (4,), ``stamp`` s (sim time)."""

    pos: np.ndarray
    quat_xyzw: np.ndarray
    stamp: float


@dataclasses.dataclass(frozen=True)
class JointSnapshot:
    """Latest joint state: ``names``, ``positions`` (rad or m for fingers), ``velocities`` (rad/s or m/s)."""

    names: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray


@dataclasses.dataclass(frozen=True)
class GripperOutcome:
    """Result of one GripperCommand goal: final finger gap ``position`` m, ``effort``, ``stalled``,
    ``reached_goal``, and ``steps`` = control steps the goal used."""

    position: float
    effort: float
    stalled: bool
    reached_goal: bool
    steps: int


@dataclasses.dataclass(frozen=True)
class MoveOutcome:
    """Result of one ``MoveToTarget`` goal (a servo verb's loop run by the driver): ``iterations`` as the reference
    counts them, ``final_pos`` (3,) m and ``final_quat`` (x, y, z, w) after the last step, ``step`` = the driver's
    control step at the end."""

    iterations: int
    final_pos: np.ndarray
    final_quat: np.ndarray
    step: int


@dataclasses.dataclass(frozen=True)
class CaptureFrame:
    """One rendered camera frame: ``color`` (H, W, 3) uint8 RGB upright, ``depth`` (H, W) float32 m along the
    optical axis (0 where invalid), ``K`` (3, 3) intrinsics, ``T_world_optical`` (4, 4) pose of the optical frame
    (x right, y down, z forward) in the world, ``stamp`` s, ``env_step`` = control step it shows, ``depth_near`` /
    ``depth_far`` the depth camera's measuring range in m when the driver reports it."""

    camera: str
    resolution: str
    color: np.ndarray
    depth: np.ndarray
    K: np.ndarray
    T_world_optical: np.ndarray
    stamp: float
    env_step: int
    depth_near: float | None = None
    depth_far: float | None = None


@dataclasses.dataclass(frozen=True)
class SegmentationFrame:
    """Instance segmentation of one camera: ``ids`` (H, W) int32 (0 = nothing), ``labels`` {id: object, fixture or
    part name}, ``stamp`` s. ``camera``/``resolution`` name the view (same pixels as the CaptureFrame)."""

    ids: np.ndarray
    labels: dict[int, str]
    stamp: float
    camera: str = ""
    resolution: str = ""


@runtime_checkable
class RobotBackend(Protocol):
    """What ``LiberoRobot`` needs from a robot. Implementations: ``ros_backend.RosBackend``, test doubles.

    ``control_period_s``: seconds of one control step (0.05 for LIBERO). ``cameras``: camera names
    (``("agentview", "wrist")``). ``resolutions``: {"high": 1024, "low": 256} image sizes in pixels.
    ``osc_action_scale``: [m, rad] of motion per control step that one unit of an OSC action commands on this
    driver (LIBERO's OSC: 0.05 m, 0.5 rad); robo sends ``action * scale / control_period_s`` as the twist.
    """

    control_period_s: float
    cameras: tuple[str, ...]
    resolutions: dict[str, int]
    osc_action_scale: tuple[float, float]

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> EpisodeStatus:
        """Select the episode and reset the simulator to its official init state; returns the new status."""
        ...

    def status(self) -> EpisodeStatus:
        """Latest episode status (step, success, terminated, truncated, estop, gripper_opening, ...)."""
        ...

    def ee_pose(self) -> EePose:
        """Latest end-effector pose."""
        ...

    def joints(self) -> JointSnapshot:
        """Latest joint state (arm and finger joints)."""
        ...

    def gripper_opening(self) -> float:
        """Latest finger gap |q0| + |q1| in m (~0.08 open)."""
        ...

    def servo(self, linear: np.ndarray, angular: np.ndarray) -> EePose:
        """Execute exactly one control step of a twist (m/s, rad/s, world frame); block until the resulting
        /ee_pose arrives and return it. Raises BackendRefused when the driver refuses the twist."""
        ...

    def gripper(self, position_m: float, max_effort: float = 0.0) -> GripperOutcome:
        """Send a GripperCommand goal (finger gap in m, 0.08 = open, 0 = closed) and wait for its result."""
        ...

    def capture(self, camera: str, resolution: str, env_step: int | None = None) -> CaptureFrame:
        """Render ``camera`` at ``resolution`` ("high" or "low") now, or as the scene was at control step
        ``env_step`` (a simulator can; a driver that cannot raises BackendRefused), with depth and geometry."""
        ...

    def segmentation(self, camera: str, resolution: str, env_step: int | None = None) -> SegmentationFrame:
        """Render the instance segmentation of ``camera`` now (or at control step ``env_step``), with the label
        map."""
        ...

    def cancel(self) -> None:
        """Cancel whatever is in flight (goals, servo); later motion may be refused until reset."""
        ...

    # Optional: ``state_trace`` (a :class:`~pyrua_ros.sim_interfaces.state_digest.StateTrace` fed with every episode
    # status), whose summary result.json records as ``state_digest``.
    # Optional: ``move_to_target(law, gripper_m, *, max_steps) -> MoveOutcome | None``: the loop of a servo verb
    # (a :class:`~pyrua_ros.wire.move_law.ServoLaw`) run by the driver as one goal, the finger-gap target
    # ``gripper_m`` [m] carried from its start; None when the driver has none (robo then streams ``servo`` twists).
    # Ends normally when the episode ends mid-move; raises BackendRefused for an e-stop, a cancel or a rejected
    # goal, as ``servo`` does.
    # Optional: ``set_deadline(deadline: float | None)`` (``time.monotonic()`` seconds). While set, every wait
    # ends by then, and motion past it raises BackendDeadline after stopping the arm. ``RobotHost.set_deadline``
    # calls it when the backend has it.

    def close(self) -> None:
        """Release every resource (executor thread, node, subscriptions). Idempotent."""
        ...
