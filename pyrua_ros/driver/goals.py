"""The two action goals of the driver surface, one control step at a time, in plain Python (no rclpy).

Behaviour follows ros2_controllers, written down once here and in :mod:`pyrua_ros.driver.core`:

- **GripperCommand** (gripper_action_controller): the goal's ``position`` [m] becomes the finger-gap target and stays
  so after the goal ends. The goal succeeds with ``reached_goal`` once the gap is within ``goal_tolerance_m`` of the
  target; when the gap stops changing (less than ``stall_motion_m`` over ``stall_steps`` steps) short of the target
  it has stalled, which succeeds with ``stalled`` when ``allow_stalling`` (a grasp closes on the object and stalls)
  and aborts otherwise; a goal still moving after ``max_steps`` steps aborts.
- **FollowJointTrajectory** (joint_trajectory_controller): a goal is validated before it is accepted (joint names
  from the arm, positions per point, strictly increasing ``time_from_start``, finite values) and rejected otherwise.
  The trajectory starts now from the current posture (``header.stamp`` is not waited for), is interpolated linearly
  and sampled once per control step; joints not named hold. Tolerances are control_msgs' ``JointTolerance``
  convention: ``position > 0`` is the tolerance, ``0`` takes the default, ``< 0`` means not checked. A path
  tolerance violated during execution aborts with ``PATH_TOLERANCE_VIOLATED``; the goal tolerance is checked once
  the last point's time has passed and may take up to ``goal_time_tolerance`` (the goal's, else the default) more
  before it aborts with ``GOAL_TOLERANCE_VIOLATED``.

A runner says how the goal ends with an :class:`Outcome`; field dicts use the control_msgs field names, so the ROS
node fills the action's Result/Feedback from them without knowing the rules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

# control_msgs/action/FollowJointTrajectory result codes
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP = 0, -1, -2, -3
PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = -4, -5

SUCCEEDED, ABORTED, CANCELED = "succeeded", "aborted", "canceled"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a goal ended: ``status`` (succeeded | aborted | canceled), the Result ``fields``, a one-line ``message``."""

    status: str
    fields: dict
    message: str


@dataclasses.dataclass(frozen=True)
class GripperSettings:
    """gripper_action_controller's parameters, in control steps: ``goal_tolerance_m`` [m], ``stall_steps`` and
    ``stall_motion_m`` [m] (the stall detector), ``allow_stalling``, ``max_steps`` (a deadline the real controller
    leaves to its client)."""

    goal_tolerance_m: float = 0.004
    stall_steps: int = 3
    stall_motion_m: float = 1e-4
    allow_stalling: bool = True
    max_steps: int = 40


@dataclasses.dataclass(frozen=True)
class TrajectorySettings:
    """Defaults of joint_trajectory_controller's constraints: ``goal_tolerance_rad`` for joints whose goal gives 0,
    ``goal_time_s`` after the last point for a goal whose ``goal_time_tolerance`` is 0."""

    goal_tolerance_rad: float = 0.05
    goal_time_s: float = 0.5


class GripperGoal:
    """One GripperCommand goal; call :meth:`after_step` with the gap after every control step."""

    kind = "gripper"

    def __init__(self, target_m: float, settings: GripperSettings):
        self.target = float(target_m)
        self.settings = settings
        self.gaps: list[float] = []

    def _flags(self, gap: float) -> tuple[bool, bool]:
        s = self.settings
        reached = abs(gap - self.target) <= s.goal_tolerance_m
        recent = self.gaps[-(s.stall_steps + 1):]
        stalled = (not reached and len(recent) > s.stall_steps
                   and max(recent) - min(recent) < s.stall_motion_m)
        return reached, stalled

    def fields(self, gap: float) -> dict:
        """GripperCommand Result / Feedback fields for the gap ``gap`` [m]."""
        reached, stalled = self._flags(gap)
        return {"position": float(gap), "effort": 0.0, "stalled": stalled, "reached_goal": reached}

    def after_step(self, gap: float) -> Outcome | None:
        self.gaps.append(float(gap))
        f = self.fields(gap)
        if f["reached_goal"]:
            return Outcome(SUCCEEDED, f, f"reached {gap:.4f} m (target {self.target:.4f} m)")
        if f["stalled"]:
            status = SUCCEEDED if self.settings.allow_stalling else ABORTED
            return Outcome(status, f, f"stalled at {gap:.4f} m (target {self.target:.4f} m)")
        if len(self.gaps) >= self.settings.max_steps:
            return Outcome(ABORTED, f, f"gap {gap:.4f} m still short of {self.target:.4f} m after "
                                       f"{len(self.gaps)} steps")
        return None

    def stopped(self, status: str, why: str, gap: float) -> Outcome:
        return Outcome(status, self.fields(gap), why)


def validate_trajectory(names: Sequence[str], points: Sequence[tuple[float, Sequence[float], Sequence[float]]],
                        arm_joints: Sequence[str]) -> tuple[int, str]:
    """``(SUCCESSFUL, "")`` when the goal can run, else ``(error_code, reason)``. ``points`` are
    ``(time_from_start [s], positions, velocities)``."""
    names = list(names)
    unknown = [n for n in names if n not in arm_joints]
    if not names or unknown or len(set(names)) != len(names):
        return INVALID_JOINTS, (f"joint_names {names} must be distinct names from the arm joints {list(arm_joints)}"
                                + (f"; unknown: {unknown}" if unknown else ""))
    if not points:
        return INVALID_GOAL, "trajectory has no points"
    last = -math.inf
    for i, (t, pos, vel) in enumerate(points):
        if len(pos) != len(names):
            return INVALID_GOAL, f"point {i} has {len(pos)} positions for {len(names)} joint_names"
        if vel and len(vel) != len(names):
            return INVALID_GOAL, f"point {i} has {len(vel)} velocities for {len(names)} joint_names"
        if not all(math.isfinite(v) for v in pos):
            return INVALID_GOAL, f"point {i} has non-finite positions"
        if not math.isfinite(t) or t <= last or t < 0:
            return INVALID_GOAL, f"point {i} time_from_start {t:.3f} s is not after the previous point"
        last = t
    return SUCCESSFUL, ""


def _tolerances(names: Sequence[str], given: dict[str, float], default: float | None) -> np.ndarray:
    """Per-joint tolerance [rad] by the JointTolerance convention; ``inf`` = not checked."""
    out = []
    for n in names:
        value = float(given.get(n, 0.0))
        if value < 0 or (value == 0 and default is None):
            out.append(math.inf)
        else:
            out.append(value if value > 0 else default)
    return np.array(out)


class TrajectoryGoal:
    """One FollowJointTrajectory goal over the arm joints ``arm_joints`` from posture ``q_start`` [rad].

    Per control step: :meth:`setpoint` gives the 7-joint target of the next step, :meth:`after_step` judges the
    posture reached. ``goal_tolerances`` / ``path_tolerances``: joint name -> ``JointTolerance.position``.
    """

    kind = "trajectory"

    def __init__(self, names: Sequence[str], points: Sequence[tuple[float, Sequence[float], Sequence[float]]],
                 arm_joints: Sequence[str], q_start: np.ndarray, *, dt: float, settings: TrajectorySettings,
                 goal_tolerances: dict[str, float] | None = None, path_tolerances: dict[str, float] | None = None,
                 goal_time_tolerance_s: float = 0.0):
        self.names = list(names)
        self.index = [list(arm_joints).index(n) for n in self.names]
        self.dt = dt
        self.q_hold = np.asarray(q_start, dtype=float).copy()
        self.times = np.array([0.0] + [float(t) for t, _, _ in points])
        self.path = np.array([self.q_hold[self.index]] + [list(map(float, p)) for _, p, _ in points])
        self.goal_tol = _tolerances(self.names, goal_tolerances or {}, settings.goal_tolerance_rad)
        self.path_tol = _tolerances(self.names, path_tolerances or {}, None)
        goal_time = goal_time_tolerance_s if goal_time_tolerance_s > 0 else settings.goal_time_s
        self.n = max(1, math.ceil(self.times[-1] / dt - 1e-9))
        self.n_max = self.n + max(0, math.ceil(goal_time / dt - 1e-9))
        self.k = 0
        self.desired = self.path[0].copy()

    def setpoint(self) -> np.ndarray:
        """Advance one control period and return the 7-joint target [rad] for the next step."""
        self.k += 1
        t = min(self.k, self.n) * self.dt
        self.desired = np.array([np.interp(t, self.times, self.path[:, j]) for j in range(len(self.names))])
        q = self.q_hold.copy()
        q[self.index] = self.desired
        return q

    def fields(self, q_arm: np.ndarray) -> dict:
        """FollowJointTrajectory Feedback fields (without the header) for the arm posture ``q_arm``."""
        actual = np.asarray(q_arm, dtype=float)[self.index]
        return {"joint_names": list(self.names), "desired": [float(x) for x in self.desired],
                "actual": [float(x) for x in actual], "error": [float(x) for x in self.desired - actual]}

    def after_step(self, q_arm: np.ndarray) -> Outcome | None:
        actual = np.asarray(q_arm, dtype=float)[self.index]
        path_err = np.abs(self.desired - actual)
        if self.k <= self.n and np.any(path_err > self.path_tol):
            return Outcome(ABORTED, {"error_code": PATH_TOLERANCE_VIOLATED,
                                     "error_string": "path tolerance violated: " + self._describe(path_err,
                                                                                                  self.path_tol)},
                           "path tolerance violated")
        if self.k < self.n:
            return None
        final_err = np.abs(self.path[-1] - actual)
        if np.all(final_err <= self.goal_tol):
            return Outcome(SUCCEEDED, {"error_code": SUCCESSFUL, "error_string": ""},
                           f"reached the last point after {self.k} steps")
        if self.k < self.n_max:
            return None
        return Outcome(ABORTED, {"error_code": GOAL_TOLERANCE_VIOLATED,
                                 "error_string": "final joint error beyond tolerance: "
                                                 + self._describe(final_err, self.goal_tol)},
                       "goal tolerance violated")

    def _describe(self, err: np.ndarray, tol: np.ndarray) -> str:
        return ", ".join(f"{n}: {e:.4f} rad (tolerance {t:g})" for n, e, t in zip(self.names, err, tol) if e > t)

    def stopped(self, status: str, why: str, q_arm: np.ndarray | None = None) -> Outcome:
        """Result of a goal ended from outside: canceled (``SUCCESSFUL``, as joint_trajectory_controller reports a
        cancel) or aborted by preemption, e-stop, reset or episode end (``INVALID_GOAL``: it can no longer run)."""
        code = SUCCESSFUL if status == CANCELED else INVALID_GOAL
        return Outcome(status, {"error_code": code, "error_string": f"{why} after {self.k} of {self.n} steps"}, why)
