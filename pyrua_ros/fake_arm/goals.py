"""Goal runners of the fake arm's two actions, one control step per :meth:`tick` (no rclpy import here).

The node owns the timer that calls ``tick(episode)``; a runner returns ``None`` while running and a
:class:`Outcome` when it ends. Trajectory validation follows control_msgs' error codes (values below).
"""

from __future__ import annotations

import dataclasses

import numpy as np

SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = 0, -1, -2, -4, -5
REACHED_TOL_M = 0.004        # gripper: |gap - target| below this is reached_goal [m]
STALL_STEPS = 3              # gripper: this many steps without change is stalled
MAX_GRIPPER_STEPS = 40
DEFAULT_GOAL_TOL_RAD = 0.01


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a goal ended: ``status`` is ``succeeded`` or ``aborted``; ``fields`` fill the action result."""

    status: str
    fields: dict


class GripperRun:
    """Moves the finger gap toward ``target_m`` with the arm held, until reached, stalled or 40 steps."""

    def __init__(self, target_m: float):
        self.target = float(target_m)
        self.steps = 0
        self.still = 0

    def tick(self, episode) -> Outcome | None:
        if self.steps == 0:
            episode.set_gripper_target(self.target)
        before = episode.opening
        episode.step_hold()
        self.steps += 1
        self.still = self.still + 1 if abs(episode.opening - before) < 1e-6 else 0
        reached = abs(episode.opening - episode.target_opening) < REACHED_TOL_M
        stalled = self.still >= STALL_STEPS and not reached
        if reached or stalled or self.steps >= MAX_GRIPPER_STEPS:
            return Outcome("succeeded", self.feedback(episode) | {"reached_goal": reached, "stalled": stalled})
        return None

    def feedback(self, episode) -> dict:
        reached = abs(episode.opening - episode.target_opening) < REACHED_TOL_M
        return {"position": float(episode.opening), "effort": 0.0, "stalled": self.still >= STALL_STEPS and not reached,
                "reached_goal": reached}


def validate_trajectory(names: list[str], points: list[tuple[float, list[float]]], arm_joints: tuple[str, ...]
                        ) -> tuple[int, str]:
    """Return (error_code, error_string); ``SUCCESSFUL`` when the goal can run. ``points`` are (time [s], positions)."""
    unknown = [n for n in names if n not in arm_joints]
    if not names or unknown or len(set(names)) != len(names):
        return INVALID_JOINTS, (f"joint names {list(names)} must be distinct members of {list(arm_joints)}"
                                + (f"; unknown: {unknown}" if unknown else ""))
    if not points:
        return INVALID_GOAL, "trajectory has no points"
    last = -1.0
    for k, (t, pos) in enumerate(points):
        if len(pos) != len(names):
            return INVALID_GOAL, f"point {k} has {len(pos)} positions for {len(names)} joints"
        if not np.all(np.isfinite(pos)):
            return INVALID_GOAL, f"point {k} has non-finite positions"
        if t <= last:
            return INVALID_GOAL, f"point {k} time_from_start {t:.3f} s is not after the previous ({last:.3f} s)"
        last = t
    return SUCCESSFUL, ""


class TrajectoryRun:
    """Joint interpolation from the current posture through time-stamped points, one step per control period."""

    def __init__(self, names: list[str], points: list[tuple[float, list[float]]], arm_joints: tuple[str, ...], *,
                 q_start: np.ndarray, dt: float, tolerances: dict[str, float]):
        self.index = [arm_joints.index(n) for n in names]
        self.names = list(names)
        self.dt = dt
        self.times = np.array([0.0] + [t for t, _ in points])
        q0 = np.asarray(q_start, dtype=float)
        self.path = np.array([q0[self.index]] + [list(p) for _, p in points])
        self.full = q0.copy()
        self.steps = int(np.ceil(self.times[-1] / dt - 1e-9))
        self.k = 0
        self.tol = np.array([tolerances.get(n, 0.0) or DEFAULT_GOAL_TOL_RAD for n in names])
        self.desired = self.path[0]

    def tick(self, episode) -> Outcome | None:
        self.k += 1
        t = min(self.k * self.dt, self.times[-1])
        self.desired = np.array([np.interp(t, self.times, self.path[:, j]) for j in range(len(self.index))])
        q = self.full.copy()
        q[self.index] = self.desired
        episode.step_joints(q)
        if self.k < self.steps:
            return None
        err = np.abs(episode.q[self.index] - self.path[-1])
        bad = [f"{n}: |error| {e:.4f} rad > {tol}" for n, e, tol in zip(self.names, err, self.tol) if e > tol]
        if bad:
            return Outcome("aborted", {"error_code": GOAL_TOLERANCE_VIOLATED,
                                       "error_string": "final position outside goal tolerance (joint limits?): "
                                                       + "; ".join(bad)})
        return Outcome("succeeded", {"error_code": SUCCESSFUL, "error_string": ""})
