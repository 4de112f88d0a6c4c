"""The driver's Cartesian goal (the ``MoveToTarget`` action): PyRUA-Lean's ``move_to`` step law
(:mod:`pyrua_ros.wire.move_law`, the one robo's twist loop runs too) stepped by the driver, so it commands bit for
bit the twists robo's own loop publishes.

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
from pyrua_ros.wire.move_law import move_action, osc_twist


def validate(target: Sequence[float], gripper_m: float, *, tol: float, step_clip: float, action_scale: float,
             linear_scale: float, max_steps: int) -> str:
    """Why a MoveToTarget goal cannot run ('' when it can)."""
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
    return ""


class CartesianGoal:
    """One MoveToTarget goal: ``target`` [m] with the law's ``tol``, ``step_clip``, ``action_scale`` [m],
    ``linear_scale`` [m per step per unit action] and ``max_steps``, on a driver with control period ``dt`` [s]."""

    kind = "cartesian"

    def __init__(self, target: Sequence[float], *, tol: float, step_clip: float, action_scale: float,
                 linear_scale: float, max_steps: int, dt: float):
        self.target = np.array([float(v) for v in target])
        self.tol, self.step_clip, self.action_scale = float(tol), float(step_clip), float(action_scale)
        self.scale = (float(linear_scale), 1.0)     # no rotation: the angular scale never multiplies a non-zero
        self.max_steps, self.dt = int(max_steps), float(dt)
        self.iterations = 0
        self.linear = np.zeros(3)
        self.position = np.zeros(3)

    def next_twist(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Count one iteration at position ``pos``: the twist of its step, or None when converged."""
        self.iterations += 1
        self.position = np.asarray(pos, dtype=float)
        a = move_action(self.target, self.position, self.tol, self.step_clip, self.action_scale)
        if a is None:
            return None
        v, w = osc_twist(a, self.scale, self.dt)
        self.linear = v
        return v, w

    def converged(self, step: int) -> Outcome:
        return Outcome(SUCCEEDED, self.result(step), f"within {self.tol} m after {self.iterations} iterations")

    def result(self, step: int) -> dict:
        return {"iterations": self.iterations, "final_position": [float(x) for x in self.position],
                "step": int(step), "message": ""}

    def fields(self, pos_step: tuple[np.ndarray, int]) -> dict:
        """Feedback fields after a step: ``pos_step`` = (position [m], control step)."""
        pos, step = pos_step
        return {"iteration": self.iterations, "step": int(step), "position": [float(x) for x in pos],
                "distance": float(np.linalg.norm(self.target - np.asarray(pos, dtype=float))),
                "linear": [float(x) for x in self.linear]}

    def after_step(self, pos_step: tuple[np.ndarray, int]) -> Outcome | None:
        pos, step = pos_step
        self.position = np.asarray(pos, dtype=float)
        if self.iterations >= self.max_steps:
            return Outcome(SUCCEEDED, self.result(step), f"max_steps {self.max_steps} iterations used")
        return None

    def stopped(self, status: str, why: str, step: int) -> Outcome:
        """Ended from outside (cancel, e-stop, episode end, preemption, reset): the iterations so far."""
        fields = {**self.result(step), "message": why}
        return Outcome(status if status in (ABORTED, CANCELED) else ABORTED, fields, why)
