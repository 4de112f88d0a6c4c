"""Message <-> numpy conversions of the driver surface (images, poses, transforms, camera info).

Images: ``rgb8`` (H x W x 3 uint8), ``32FC1`` (H x W float32, metres) and ``32SC1`` (H x W int32 ids). ``msg.data``
is filled with ``array('B')``: assigning ``bytes`` or a list goes through rosidl's per-element check, which is very
slow for large images. Quaternions are ``(x, y, z, w)`` everywhere, as in ROS messages.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from pyrua_ros.rotations import quat_to_matrix  # re-exported: the driver's modules import it from here

_ENCODINGS = {  # ROS encoding -> (numpy dtype, channels)
    "rgb8": (np.uint8, 3),
    "mono8": (np.uint8, 1),
    "32FC1": (np.float32, 1),
    "32SC1": (np.int32, 1),
    "16UC1": (np.uint16, 1),
}


def _encoding_for(img: np.ndarray) -> str:
    if img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3:
        return "rgb8"
    if img.ndim == 2 and img.dtype == np.float32:
        return "32FC1"
    if img.ndim == 2 and img.dtype == np.int32:
        return "32SC1"
    if img.ndim == 2 and img.dtype == np.uint8:
        return "mono8"
    raise ValueError(f"no image encoding for dtype {img.dtype} shape {img.shape}; supported: "
                     "HxWx3 uint8 (rgb8), HxW float32 (32FC1), HxW int32 (32SC1), HxW uint8 (mono8)")


def image_msg(img: np.ndarray, stamp, frame_id: str, encoding: str | None = None):
    """Build a ``sensor_msgs/Image`` from an array (encoding chosen from dtype/shape unless given)."""
    from sensor_msgs.msg import Image

    encoding = encoding or _encoding_for(img)
    dtype, channels = _ENCODINGS[encoding]
    img = np.ascontiguousarray(img, dtype=dtype)
    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(img.shape[0]), int(img.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = msg.width * channels * np.dtype(dtype).itemsize
    msg.data = array("B", img.tobytes())
    return msg


def image_to_numpy(msg) -> np.ndarray:
    """View a ``sensor_msgs/Image`` as an array (H x W x 3 for rgb8, H x W otherwise); raises on unknown encodings."""
    if msg.encoding not in _ENCODINGS:
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; supported: {sorted(_ENCODINGS)}")
    dtype, channels = _ENCODINGS[msg.encoding]
    flat = np.frombuffer(memoryview(msg.data), dtype=np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<"))
    shape = (msg.height, msg.width, channels) if channels > 1 else (msg.height, msg.width)
    return flat.reshape(shape)


def camera_info_msg(K: np.ndarray, width: int, height: int, stamp, frame_id: str):
    """``sensor_msgs/CameraInfo`` of an ideal pinhole camera with intrinsics ``K`` (3x3, pixels), no distortion."""
    from sensor_msgs.msg import CameraInfo

    K = np.asarray(K, dtype=float).reshape(3, 3)
    msg = CameraInfo()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.width, msg.height = int(width), int(height)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = [float(v) for v in K.ravel()]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    P = np.zeros((3, 4))
    P[:, :3] = K
    msg.p = [float(v) for v in P.ravel()]
    return msg


def camera_info_to_K(msg) -> np.ndarray:
    """Intrinsics ``K`` (3x3, pixels) of a ``sensor_msgs/CameraInfo``."""
    return np.asarray(msg.k, dtype=float).reshape(3, 3)


def pose_msg(pos: Sequence[float], quat_xyzw: Sequence[float]):
    """``geometry_msgs/Pose`` from a position [m] and an (x, y, z, w) quaternion."""
    from geometry_msgs.msg import Pose

    p = Pose()
    p.position.x, p.position.y, p.position.z = (float(v) for v in pos)
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = (float(v) for v in quat_xyzw)
    return p


def pose_stamped_msg(pos, quat_xyzw, stamp, frame_id: str):
    from geometry_msgs.msg import PoseStamped

    msg = PoseStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.pose = pose_msg(pos, quat_xyzw)
    return msg


def pose_to_numpy(pose) -> tuple[np.ndarray, np.ndarray]:
    """(position [m], quaternion xyzw) of a ``geometry_msgs/Pose``."""
    return (np.array([pose.position.x, pose.position.y, pose.position.z]),
            np.array([pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w]))


def transform_stamped_msg(parent: str, child: str, t, q_xyzw, stamp):
    """``geometry_msgs/TransformStamped`` placing ``child`` in ``parent`` (translation [m], rotation xyzw)."""
    from geometry_msgs.msg import TransformStamped

    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    tr = msg.transform.translation
    tr.x, tr.y, tr.z = (float(v) for v in t)
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = (float(v) for v in q_xyzw)
    return msg


def transform_to_matrix(transform) -> np.ndarray:
    """4x4 homogeneous matrix of a ``geometry_msgs/Transform``."""
    t, r = transform.translation, transform.rotation
    T = np.eye(4)
    T[:3, :3] = quat_to_matrix((r.x, r.y, r.z, r.w))
    T[:3, 3] = (t.x, t.y, t.z)
    return T


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """(x, y, z, w) unit quaternion of a 3x3 rotation matrix, w >= 0 (normalised, so a slightly non-orthogonal
    matrix still gives a unit quaternion)."""
    R = np.asarray(R, dtype=float)
    tr = np.trace(R)
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(max(1e-12, 1.0 + R[i, i] - R[j, j] - R[k, k]))
        q = [0.0, 0.0, 0.0, (R[k, j] - R[j, k]) / s]
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
    q = np.asarray(q)
    q /= np.linalg.norm(q)
    return q if q[3] >= 0 else -q


def time_msg(seconds: float):
    """``builtin_interfaces/Time`` of a time in seconds (sim time is small and positive)."""
    from builtin_interfaces.msg import Time

    sec = int(np.floor(seconds))
    return Time(sec=sec, nanosec=min(round((seconds - sec) * 1e9), 999_999_999))


def stamp_to_seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9
