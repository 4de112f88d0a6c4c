"""Camera geometry of the LIBERO (MuJoCo) cameras, for the upright images the sim publishes.

Pure numpy, no MuJoCo import: the functions take the numbers MuJoCo gives (``cam_xpos``, ``cam_xmat``,
``cam_fovy``, the z-buffer, ``vis.map`` clip planes) and return what ROS wants.

Conventions, worked out once here so nobody else has to:

- MuJoCo reads pixels bottom-up (OpenGL): row 0 of the raw buffer is the *bottom* of the view. A MuJoCo camera
  looks along its -z axis with +y up and +x right.
- The published image is the **true upright pinhole view**: the raw buffer with its rows flipped, ``raw[::-1]``.
  In the agentview camera world +y (the robot's left, the stove side of the kitchen) appears on the *right*, as
  PyRUA-Lean's LIBERO facts state, and ``K`` is an ordinary pinhole matrix (fx > 0) that rviz and any ROS
  consumer can use. LIBERO's own policy-input convention, ``raw[::-1, ::-1]``, is that view mirrored left-right;
  a client that feeds a LIBERO-trained policy (``robo/vla.py``) mirrors the columns itself.
- The optical frame is the right-handed REP-103 frame of the camera (z forward, x right, y down), so the usual
  pinhole formulas hold: ``x = (col - cx) * z / fx``, ``y = (row - cy) * z / fy``, ``col = cx + fx * x / z``.
"""

from __future__ import annotations

import math

import numpy as np

# Rotation from a MuJoCo camera frame (x right, y up, looking along -z) to the REP-103 optical frame
# (x right, y down, z forward): flip y and z.
MUJOCO_TO_OPTICAL = np.diag([1.0, -1.0, -1.0])


def upright(raw: np.ndarray) -> np.ndarray:
    """The true upright view from a raw bottom-up MuJoCo buffer: rows flipped, contiguous copy."""
    return np.ascontiguousarray(raw[::-1])


def focal_length_px(fovy_deg: float, height: int) -> float:
    """Focal length in pixels of a MuJoCo camera with vertical field of view ``fovy_deg`` rendered ``height`` tall."""
    return 0.5 * height / math.tan(math.radians(fovy_deg) / 2.0)


def intrinsics(fovy_deg: float, width: int, height: int) -> np.ndarray:
    """3x3 K (float64, pixels) of the upright image (an ordinary pinhole: fx = fy > 0).

    Pixel centres sit at integer coordinates (ROS CameraInfo convention), so the principal point of an
    image rendered with MuJoCo's centred projection is ((width - 1) / 2, (height - 1) / 2).
    """
    f = focal_length_px(fovy_deg, height)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def optical_pose(cam_xpos: np.ndarray, cam_xmat: np.ndarray) -> np.ndarray:
    """4x4 T_world_optical (REP-103 optical frame) of a MuJoCo camera from its world position and 3x3 xmat."""
    T = np.eye(4)
    T[:3, :3] = np.asarray(cam_xmat, dtype=np.float64).reshape(3, 3) @ MUJOCO_TO_OPTICAL
    T[:3, 3] = np.asarray(cam_xpos, dtype=np.float64)
    return T


def linear_depth(zbuffer: np.ndarray, near: float, far: float) -> np.ndarray:
    """Metric depth along the optical axis [m] (float32) from a MuJoCo z-buffer in [0, 1]; 0 where nothing was hit.

    ``near``/``far`` are the clip distances in metres (``model.vis.map.znear/zfar * model.stat.extent``).
    """
    d = np.asarray(zbuffer, dtype=np.float64)
    depth = near / (1.0 - d * (1.0 - near / far))
    depth[(d >= 1.0) | ~np.isfinite(depth)] = 0.0
    return depth.astype(np.float32)


def back_project(rows: np.ndarray, cols: np.ndarray, depth: np.ndarray, K: np.ndarray, T_world_optical: np.ndarray
                 ) -> np.ndarray:
    """World points (N, 3) [m] of pixels (row, col) with depth [m] along the optical axis, through K and T."""
    z = np.asarray(depth, dtype=np.float64)
    x = (np.asarray(cols, dtype=np.float64) - K[0, 2]) * z / K[0, 0]
    y = (np.asarray(rows, dtype=np.float64) - K[1, 2]) * z / K[1, 1]
    pts = np.stack([x, y, z], axis=-1)
    return pts @ T_world_optical[:3, :3].T + T_world_optical[:3, 3]


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    """MuJoCo quaternion order (w, x, y, z) to ROS order (x, y, z, w)."""
    q = np.asarray(q, dtype=np.float64)
    return np.array([q[1], q[2], q[3], q[0]])
