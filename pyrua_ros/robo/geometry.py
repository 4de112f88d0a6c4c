"""Orientation arithmetic of the robo servos (pure numpy): angles, rotation matrices, yaw and pitch.

Conventions (PyRUA-Lean's ``State``): quaternions are (x, y, z, w); ``yaw_of`` is the world yaw atan2(R10, R00)
that ``rotate_wrist`` servos; ``pitch_of`` is atan2(R12, -R22), 0 when the gripper points straight down and
+pi/2 when it points along world +y (what ``rotate_pitch`` servos).
"""

from __future__ import annotations

import math

import numpy as np

from pyrua_ros.rotations import quat_to_matrix


def wrap_angle(a: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def clip(value: float, limit: float) -> float:
    """``value`` limited to [-limit, limit]."""
    return max(-limit, min(limit, value))


def matrix(quat_xyzw) -> np.ndarray:
    """3x3 numpy rotation matrix of an (x, y, z, w) quaternion."""
    return quat_to_matrix(quat_xyzw)


def rotation_vector(r: np.ndarray) -> np.ndarray:
    """Axis-angle vector (3,) rad of a rotation matrix (the rotation that ``r`` applies)."""
    cos = float(np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0))
    angle = math.acos(cos)
    if angle < 1e-9:
        return np.zeros(3)
    if math.pi - angle < 1e-6:  # 180 degrees: the axis from the symmetric part
        diag = np.sqrt(np.clip((np.diag(r) + 1.0) / 2.0, 0.0, None))
        i = int(np.argmax(diag))
        axis = np.array([r[i, 0] + r[0, i], r[i, 1] + r[1, i], r[i, 2] + r[2, i]]) / (2.0 * diag[i])
        axis[i] = diag[i]
        return axis / np.linalg.norm(axis) * angle
    axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return axis / (2.0 * math.sin(angle)) * angle


def yaw_of(r: np.ndarray) -> float:
    """World yaw atan2(R10, R00) rad (the ``State.eef_yaw`` convention)."""
    return math.atan2(r[1, 0], r[0, 0])


def pitch_of(r: np.ndarray) -> float:
    """Pitch atan2(R12, -R22) rad: 0 = pointing down, +pi/2 along world +y (the ``State.eef_pitch`` convention)."""
    return math.atan2(r[1, 2], -r[2, 2])
