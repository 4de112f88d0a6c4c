"""Rotation helpers, in one place, done with transforms3d: the driver, the sim, the fake arm and ``robo`` all use
these (it sits at the package root, the lowest layer, so each of them may import it).

Quaternions here are (x, y, z, w), the order of ``geometry_msgs/Quaternion``, of LIBERO's robot state and of
robosuite's ``transform_utils``; transforms3d's own order is (w, x, y, z), so every call converts at this border
(:func:`xyzw_to_wxyz`). Angles are radians, matrices 3x3 numpy arrays that rotate column vectors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from transforms3d.euler import euler2mat
from transforms3d.quaternions import quat2axangle, quat2mat


def xyzw_to_wxyz(q_xyzw: Sequence[float]) -> np.ndarray:
    """transforms3d's (w, x, y, z) of an (x, y, z, w) quaternion."""
    x, y, z, w = (float(v) for v in q_xyzw)
    return np.array([w, x, y, z])


def rot_x(a: float) -> np.ndarray:
    """Rotation about x by ``a`` rad."""
    return euler2mat(a, 0.0, 0.0, "sxyz")


def rot_z(a: float) -> np.ndarray:
    """Rotation about z by ``a`` rad."""
    return euler2mat(0.0, 0.0, a, "sxyz")


def quat_to_matrix(q_xyzw: Sequence[float]) -> np.ndarray:
    """The rotation of an (x, y, z, w) quaternion; a non-unit one is normalised, the zero one is the identity."""
    return quat2mat(xyzw_to_wxyz(q_xyzw))


def quat_to_axis_angle(q_xyzw: Sequence[float]) -> np.ndarray:
    """Axis-angle vector (3,) rad of an (x, y, z, w) quaternion (the LIBERO state convention, robosuite's
    ``quat2axisangle``): the unit axis times the angle in [0, 2 pi]; zeros for no rotation."""
    axis, angle = quat2axangle(xyzw_to_wxyz(q_xyzw))
    return np.asarray(axis, dtype=np.float64) * angle if angle else np.zeros(3)


def wrap_angle(a: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def yaw_of(r: np.ndarray) -> float:
    """World yaw atan2(R10, R00) rad of a rotation matrix (PyRUA-Lean's ``State.eef_yaw`` convention)."""
    return math.atan2(r[1, 0], r[0, 0])


def pitch_of(r: np.ndarray) -> float:
    """Pitch atan2(R12, -R22) rad of a gripper rotation matrix: 0 = pointing down, +pi/2 along world +y
    (PyRUA-Lean's ``State.eef_pitch`` convention)."""
    return math.atan2(r[1, 2], -r[2, 2])
