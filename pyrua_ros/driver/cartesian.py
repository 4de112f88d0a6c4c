"""The driver's Cartesian goal (the ``MoveToTarget`` action): PyRUA-Lean's servo law
(:mod:`pyrua_ros.wire.move_law`, the one robo's twist loop runs too) stepped by the driver, so it commands bit for
bit the twists robo's own loop publishes: ``move_to``'s law (position only, the action's defaults), or with the
angle fields the law of ``move_pose``, ``rotate_wrist`` / ``rotate_pitch`` and ``move_to`` with ``target_yaw``.

:class:`CartesianGoal` is a runner of :mod:`pyrua_ros.driver.core` like the goals of :mod:`pyrua_ros.driver.goals`:
per tick :meth:`CartesianGoal.next_twist` gives the step's twist (None: converged, the goal succeeds), after the
step :meth:`CartesianGoal.after_step` ends it once ``max_steps`` iterations are counted. Iterations count as the
reference counts them: a move that converged counts its final check, one more than the steps it ran. Field dicts
use the action's field names (``pyrua_ros_msgs/action/MoveToTarget``), so the node fills Result and Feedback from
them. Plain Python, no rclpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pyrua_ros.driver.goals import ABORTED, CANCELED, SUCCEEDED, Outcome
from pyrua_ros.wire.move_law import ServoLaw, osc_twist


def validate(target: Sequence[float], gripper_m: float, *, tol: float, step_clip: float, action_scale: float,
             linear_scale: float, max_steps: int, position: bool = True, pitch: float | None = None,
             yaw: float | None = None, pitch_step: float = 1.0, yaw_step: float = 1.0, ori_tol: float = math.inf,
             angular_scale: float = 1.0) -> str:
    """Why a MoveToTarget goal cannot run ('' when it can); the arguments are :class:`CartesianGoal`'s."""
    if len(target) != 3 or not all(math.isfinite(v) for v in target):
        return f"target must be 3 finite numbers [m], got {list(target)!r}"
    if not math.isfinite(gripper_m):
        return f"gripper_position {gripper_m!r} is not finite"
    if not (math.isfinite(tol) and tol >= 0):
        return f"tolerance must be finite and >= 0 m, got {tol!r}"
    for name, value in (("step_clip", step_clip), ("action_scale", action_scale), ("linear_scale", linear_scale)):
        if not (math.isfinite(value) and value > 0):
            return f"{name} must be finite and > 0, got {value!r}"
    if max_steps < 1:
        return f"max_steps must be >= 1, got {max_steps!r}"
    if not (ori_tol >= 0 and not math.isnan(ori_tol)):
        return f"orientation_tolerance must be >= 0 rad, got {ori_tol!r}"
    angles = [(name, angle, step) for name, angle, step in (("pitch", pitch, pitch_step), ("yaw", yaw, yaw_step))
              if angle is not None]
    for name, angle, step in angles:
        if not math.isfinite(angle):
            return f"target_{name} must be finite [rad], got {angle!r}"
        if not (math.isfinite(step) and step > 0):
            return f"{name}_step must be finite and > 0 rad, got {step!r}"
    if angles and not (math.isfinite(angular_scale) and angular_scale > 0):
        return f"angular_scale must be finite and > 0, got {angular_scale!r}"
    return ""


def arguments(law: ServoLaw, *, linear_scale: float, angular_scale: float, max_steps: int) -> dict:
    """The keyword arguments of :class:`CartesianGoal` (but ``dt``) that run ``law`` on a driver whose unit action
    moves ``linear_scale`` [m] and ``angular_scale`` [rad] per control step: what a MoveToTarget goal of robo's
    carries (the driver core's callers in this process use it)."""
    return {"tol": law.tol, "step_clip": law.step_clip, "action_scale": law.action_scale,
            "linear_scale": float(linear_scale), "max_steps": int(max_steps), "position": law.target is not None,
            "pitch": law.pitch, "yaw": law.yaw, "pitch_step": law.pitch_step, "yaw_step": law.yaw_step,
            "ori_tol": law.ori_tol, "angular_scale": float(angular_scale)}


class CartesianGoal:
    """One MoveToTarget goal: ``target`` [m] with the law's ``tol``, ``step_clip``, ``action_scale`` [m],
    ``linear_scale`` [m per step per unit action] and ``max_steps``, on a driver with control period ``dt`` [s].
    ``position`` False drops the position term; ``pitch`` / ``yaw`` [rad] (None: not servoed) with their per-step
    caps ``pitch_step`` / ``yaw_step`` [rad], the angle tolerance ``ori_tol`` [rad] (``inf``: the angles do not
    count toward convergence) and ``angular_scale`` [rad per step per unit action]. No position and no angle with
    ``ori_tol`` 0 is a hold (:data:`~pyrua_ros.wire.move_law.HOLD`): zero twists until ``max_steps``."""

    kind = "cartesian"

    def __init__(self, target: Sequence[float], *, tol: float, step_clip: float, action_scale: float,
                 linear_scale: float, max_steps: int, dt: float, position: bool = True, pitch: float | None = None,
                 yaw: float | None = None, pitch_step: float = 1.0, yaw_step: float = 1.0, ori_tol: float = math.inf,
                 angular_scale: float = 1.0):
        self.target = np.array([float(v) for v in target])
        self.law = ServoLaw(self.target if position else None, float(tol), step_clip=float(step_clip),
                            action_scale=float(action_scale), pitch=pitch, yaw=yaw, pitch_step=float(pitch_step),
                            yaw_step=float(yaw_step), ori_tol=float(ori_tol))
        self.scale = (float(linear_scale), float(angular_scale))
        self.max_steps, self.dt = int(max_steps), float(dt)
        self.iterations = 0
        self.linear = np.zeros(3)
        self.angular = np.zeros(3)
        self.position = np.zeros(3)
        self.orientation = np.array([0.0, 0.0, 0.0, 1.0])

    def next_twist(self, pos: np.ndarray, quat_xyzw: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
        """Count one iteration at the pose (``pos`` [m], ``quat_xyzw``): the twist of its step, or None when
        converged."""
        self.iterations += 1
        self.position = np.asarray(pos, dtype=float)
        self.orientation = np.asarray(quat_xyzw, dtype=float)
        a = self.law.action(self.position, self.orientation)
        if a is None:
            return None
        v, w = osc_twist(a, self.scale, self.dt)
        self.linear, self.angular = v, w
        return v, w

    def converged(self, step: int) -> Outcome:
        return Outcome(SUCCEEDED, self.result(step), f"within tolerance after {self.iterations} iterations")

    def result(self, step: int) -> dict:
        return {"iterations": self.iterations, "final_position": [float(x) for x in self.position],
                "final_orientation": [float(x) for x in self.orientation], "step": int(step), "message": ""}

    def fields(self, seen: tuple[np.ndarray, np.ndarray, int]) -> dict:
        """Feedback fields after a step: ``seen`` = (position [m], orientation (x, y, z, w), control step)."""
        pos, _quat, step = seen
        return {"iteration": self.iterations, "step": int(step), "position": [float(x) for x in pos],
                "distance": float(np.linalg.norm(self.target - np.asarray(pos, dtype=float))),
                "linear": [float(x) for x in self.linear], "angular": [float(x) for x in self.angular]}

    def after_step(self, seen: tuple[np.ndarray, np.ndarray, int]) -> Outcome | None:
        pos, quat, step = seen
        self.position = np.asarray(pos, dtype=float)
        self.orientation = np.asarray(quat, dtype=float)
        if self.iterations >= self.max_steps:
            return Outcome(SUCCEEDED, self.result(step), f"max_steps {self.max_steps} iterations used")
        return None

    def stopped(self, status: str, why: str, step: int) -> Outcome:
        """Ended from outside (cancel, e-stop, episode end, preemption, reset): the iterations so far."""
        fields = {**self.result(step), "message": why}
        return Outcome(status if status in (ABORTED, CANCELED) else ABORTED, fields, why)
