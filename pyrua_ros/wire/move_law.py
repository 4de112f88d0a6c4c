"""PyRUA-Lean's ``move_to`` step law, written once: robo's twist loop (:mod:`pyrua_ros.robo.servo`) and the
driver's Cartesian goal (:mod:`pyrua_ros.driver.cartesian`) both run it, so it sits below both.

The law (PYRUALEAN-CONTRACT.md 2.4): each iteration reads the end-effector position and stops when
``|target - position| < tolerance``; else the OSC action is, per axis,
``clip(clip(target - position, -step_clip, step_clip) / action_scale, -1, 1)`` (a diagonal move is not slowed to the
straight-line norm) with no rotation, and one control step runs it as the twist ``action * scale / dt``.
:func:`move_action` and :func:`osc_twist` are that arithmetic, so a move stepped by the driver commands bit for bit
the twists robo's own loop publishes. Plain numpy, no rclpy.
"""

from __future__ import annotations

import numpy as np


def move_action(target: np.ndarray, pos: np.ndarray, tol: float, step_clip: float,
                action_scale: float) -> np.ndarray | None:
    """The 6-D OSC action (position per axis, zero rotation) of one ``move_to`` iteration at ``pos``, or None when
    within ``tol`` of ``target`` (converged)."""
    diff = target - pos
    if float(np.linalg.norm(diff)) < tol:
        return None
    a = np.zeros(6)
    a[:3] = np.clip(np.clip(diff, -step_clip, step_clip) / action_scale, -1.0, 1.0)
    return a


def osc_twist(action: np.ndarray, scale: tuple[float, float], dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(linear [m/s], angular [rad/s]) twist of a 6-D OSC action on a driver whose unit action moves ``scale`` =
    (m, rad) per control step of ``dt`` s; the action is clipped to [-1, 1] first."""
    a = np.clip(np.asarray(action, dtype=float), -1.0, 1.0)
    linear_m, angular_rad = scale
    return a[:3] * linear_m / dt, a[3:6] * angular_rad / dt
