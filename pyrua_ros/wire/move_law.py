"""PyRUA-Lean's servo law, written once: robo's twist loop (:mod:`pyrua_ros.robo.servo`) and the driver's Cartesian
goal (:mod:`pyrua_ros.driver.cartesian`) both run it, so it sits below both.

The law (PYRUALEAN-CONTRACT.md 2.4 and 3.9): each iteration reads the end-effector pose and stops when it is within
tolerance; else the OSC action is, per position axis, ``clip(clip(target - position, -step_clip, step_clip) /
action_scale, -1, 1)`` (a diagonal move is not slowed to the straight-line norm) and, per servoed angle (world x:
pitch, world z: yaw), ``clip(clip(error, -angle_step, angle_step) / 0.10, -1, 1)``, nothing else (a zero rotation
action keeps the orientation, as OSC does); one control step runs it as the twist ``action * scale / dt``.

One :class:`ServoLaw` covers the verbs that servo: ``move_to`` (position; with ``target_yaw`` its yaw rides along
without counting toward convergence), ``move_pose`` (position, optional pitch and yaw, all of them converging),
``rotate_wrist`` / ``rotate_pitch`` (one angle, no position term), ``set_gripper``'s hold (:data:`HOLD`: nothing,
never converged). :meth:`ServoLaw.action` and :func:`osc_twist` are
that arithmetic, so a move stepped by the driver commands bit for bit the twists robo's own loop publishes. Plain
numpy, no rclpy.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pyrua_ros.rotations import pitch_of, quat_to_matrix, wrap_angle, yaw_of

ROT_ACTION_RAD = 0.10           # the reference's rotation command: action = clipped error / 0.10 rad
PITCH, YAW = 0, 2               # index of the world axis in an angular action


def rot_action(err: float, step_clip: float) -> float:
    """The reference's rotation action for an angle error (rad): clipped per step, scaled by 0.10 rad, in [-1, 1]."""
    return float(np.clip(np.clip(err, -step_clip, step_clip) / ROT_ACTION_RAD, -1.0, 1.0))


@dataclasses.dataclass(frozen=True)
class ServoLaw:
    """One servo verb's law. ``target`` (3,) [m] world position, None for no position term (the rotate verbs);
    ``tol`` [m], ``step_clip`` [m per step], ``action_scale`` [m per unit action]; ``pitch`` / ``yaw`` [rad] the
    angles servoed (None: that angle is left alone), ``pitch_step`` / ``yaw_step`` [rad per step] their caps;
    ``ori_tol`` [rad] the angle tolerance (``math.inf``: the angles do not count toward convergence, as in
    ``move_to`` with ``target_yaw``)."""

    target: np.ndarray | None
    tol: float
    step_clip: float = 1.0
    action_scale: float = 1.0
    pitch: float | None = None
    yaw: float | None = None
    pitch_step: float = 1.0
    yaw_step: float = 1.0
    ori_tol: float = math.inf

    def action(self, pos: np.ndarray, quat_xyzw) -> np.ndarray | None:
        """The 6-D OSC action of one iteration at the pose (``pos`` (3,) [m], ``quat_xyzw``), or None when it
        converged: the position within ``tol`` (or no position term) and each angle error under ``ori_tol`` (an
        angle not servoed counts as error 0)."""
        near, diff = True, None
        if self.target is not None:
            diff = self.target - pos
            near = float(np.linalg.norm(diff)) < self.tol
        p_err = y_err = 0.0
        if self.pitch is not None or self.yaw is not None:
            r = quat_to_matrix(quat_xyzw)
            p_err = 0.0 if self.pitch is None else wrap_angle(self.pitch - pitch_of(r))
            y_err = 0.0 if self.yaw is None else wrap_angle(self.yaw - yaw_of(r))
        if near and abs(p_err) < self.ori_tol and abs(y_err) < self.ori_tol:
            return None
        a = np.zeros(6)
        if diff is not None:
            a[:3] = np.clip(np.clip(diff, -self.step_clip, self.step_clip) / self.action_scale, -1.0, 1.0)
        if self.pitch is not None:
            a[3 + PITCH] = rot_action(p_err, self.pitch_step)
        if self.yaw is not None:
            a[3 + YAW] = rot_action(y_err, self.yaw_step)
        return a


# set_gripper's hold: no position term, no angle, nothing under a tolerance of 0, so it never converges: zero actions
# (the arm holds, the gripper target rides along) until its max_steps
HOLD = ServoLaw(None, 0.0, ori_tol=0.0)


def osc_twist(action: np.ndarray, scale: tuple[float, float], dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(linear [m/s], angular [rad/s]) twist of a 6-D OSC action on a driver whose unit action moves ``scale`` =
    (m, rad) per control step of ``dt`` s; the action is clipped to [-1, 1] first."""
    a = np.clip(np.asarray(action, dtype=float), -1.0, 1.0)
    linear_m, angular_rad = scale
    return a[:3] * linear_m / dt, a[3:6] * angular_rad / dt
