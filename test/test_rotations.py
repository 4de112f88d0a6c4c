"""The one set of rotation helpers (pyrua_ros.rotations, transforms3d underneath) follows robosuite's conventions,
the ones LIBERO's state and its VLA training data use: quaternions (x, y, z, w), matrices that rotate column
vectors, axis-angle as robosuite's ``quat2axisangle``. A helper that took transforms3d's (w, x, y, z) order at face
value fails here."""

import math

import numpy as np
import pytest
import robosuite.utils.transform_utils as robosuite

from pyrua_ros import rotations
from pyrua_ros.robo.results import quat_to_matrix as plain_quat_to_matrix

pytestmark = pytest.mark.unit

QUATS = np.random.default_rng(7).normal(size=(200, 4))   # (x, y, z, w), not normalised


def test_quaternions_are_read_x_y_z_w_as_robosuite_reads_them():
    half = math.pi / 8   # a quarter turn about x, written (x, y, z, w)
    np.testing.assert_allclose(rotations.quat_to_matrix((math.sin(2 * half), 0, 0, math.cos(2 * half))),
                               rotations.rot_x(math.pi / 2), atol=1e-15)
    for q in QUATS:
        unit = q / np.linalg.norm(q)
        np.testing.assert_allclose(rotations.quat_to_matrix(q), robosuite.quat2mat(unit), atol=1e-6)   # float32
        # the kernel's plain-Python copy (no numpy in the cell process) agrees to rounding
        np.testing.assert_allclose(rotations.quat_to_matrix(q), np.array(plain_quat_to_matrix(tuple(q))),
                                   atol=1e-15)


def test_axis_angle_is_robosuites_quat2axisangle():
    for q in QUATS:
        unit = q / np.linalg.norm(q)
        np.testing.assert_allclose(rotations.quat_to_axis_angle(q), robosuite.quat2axisangle(unit), atol=1e-9)
    assert not rotations.quat_to_axis_angle((0.0, 0.0, 0.0, 1.0)).any()


@pytest.mark.parametrize("angle", [-3.0, -math.pi / 2, 0.0, 0.3, math.pi / 4, 2.5])
def test_rot_x_and_rot_z_are_robosuites_rotation_matrices(angle):
    np.testing.assert_allclose(rotations.rot_x(angle), robosuite.rotation_matrix(angle, [1, 0, 0])[:3, :3],
                               atol=1e-12)
    np.testing.assert_allclose(rotations.rot_z(angle), robosuite.rotation_matrix(angle, [0, 0, 1])[:3, :3],
                               atol=1e-12)
    c, s = math.cos(angle), math.sin(angle)   # and bit for bit the closed form the trajectories were made with
    assert np.array_equal(rotations.rot_z(angle), np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]))
