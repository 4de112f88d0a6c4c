"""The PyRUA-Lean ``robo`` API (``LiberoRobot``) on a small ``RobotBackend`` protocol.

Pure Python except ``ros_backend`` (rclpy). ``results`` and ``errors`` are imported by the sandboxed kernel, so
this package imports nothing heavy at import time.
"""

from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.robo.results import (
    RESULT_TYPES,
    BackProjection,
    Contact,
    Gripper,
    Move,
    MovePose,
    Pick,
    RegionCenter,
    Release,
    Rotation,
    Segment,
    State,
)

__all__ = [
    "RESULT_TYPES", "BackProjection", "Contact", "EpisodeFinished", "Gripper", "Move", "MovePose", "Pick",
    "RegionCenter", "Release", "Rotation", "Segment", "State", "ToolError",
]
