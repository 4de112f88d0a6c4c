"""Argument handling of the ``robo`` verbs, split the way PyRUA-Lean splits it.

Library side (before anything is sent to the robot): the few checks the reference makes itself raise
``ValueError`` (``xyz`` shape, the gripper range, the 0.30 m planar refusal, exactly one rotation argument, an
unknown camera/resolution for ``image``/``world_map``/``show``). Everything else is cast the way the reference
casts it, ``int(row)``, ``int(step)``, ``float(tol)``, so floats, numpy scalars and one-element numpy arrays
work (``robo.back_project(*np.median(pixels, 0))``); a value that cannot be cast raises what ``int()``/``float()``
raise.

Robot side (``require``, ``view_on_robot``, ...): values the reference passes through to its backend are judged
where the call executes and refused with a ``ToolError`` the policy can read (a non-positive ``step_clip``, a step
that is not recorded, a pixel outside the image, ``segment`` with neither prompt nor point).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pyrua_ros.robo.errors import ToolError

MAX_PLANAR_MOVE_M = 0.30      # the longest x/y move one motion call may make (PyRUA-Lean's limit)
RESOLUTIONS = ("high", "low")


def _scalar(value: Any) -> Any:
    """A one-element numpy array as its element (``int(np.array([3]))`` is deprecated in numpy)."""
    if isinstance(value, np.ndarray) and value.size == 1:
        return value.reshape(-1)[0]
    return value


def as_int(value: Any) -> int:
    """``int(value)`` as the reference casts pixels, steps and counts (truncates 3.7 to 3)."""
    return int(_scalar(value))


def as_float(value: Any) -> float:
    """``float(value)`` as the reference casts tolerances, clips and scores."""
    return float(_scalar(value))


def optional_float(value: Any) -> float | None:
    """None stays None, anything else is ``float(value)``."""
    return None if value is None else as_float(value)


# -- library side: ValueError ---------------------------------------------------------------------------------
def xyz(name: str, value: Any) -> np.ndarray:
    """Three finite numbers [x, y, z] (m) as a float vector."""
    try:
        values = [float(_scalar(v)) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 3 finite numbers [x, y, z] in metres, got {value!r}") from None
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ValueError(f"{name} must be 3 finite numbers [x, y, z] in metres, got {value!r}")
    return np.array(values)


def gripper(value: Any) -> float:
    """A gripper command in [-1, 1] (OPEN = -1.0, CLOSE = 1.0)."""
    try:
        g = as_float(value)
    except (TypeError, ValueError):
        raise ValueError(f"gripper must be a number in [-1, 1] (OPEN=-1.0, CLOSE=1.0), got {value!r}") from None
    if not -1.0 <= g <= 1.0:
        raise ValueError(f"gripper must be in [-1, 1] (OPEN=-1.0, CLOSE=1.0), got {value!r}")
    return g


def one_of(tool: str, axis: str, target: Any, delta: Any) -> tuple[float | None, float | None]:
    """Exactly one of ``target_<axis>`` / ``delta_<axis>`` (rad), cast to float."""
    if (target is None) == (delta is None):
        raise ValueError(f"{tool} needs exactly one of target_{axis} or delta_{axis} (rad)")
    return optional_float(target), optional_float(delta)


def view(cam: Any, resolution: Any, cameras: Sequence[str]) -> tuple[str, str]:
    """A (camera, resolution) pair of a recorded image (``image`` / ``world_map``)."""
    if cam not in cameras or resolution not in RESOLUTIONS:
        raise ValueError(f"camera must be one of {', '.join(cameras)} and resolution one of "
                         f"{', '.join(RESOLUTIONS)}; got camera={cam!r}, resolution={resolution!r}")
    return cam, resolution


def camera(value: Any, cameras: Sequence[str]) -> str:
    """One of the robot's cameras (``show``)."""
    if value not in cameras:
        raise ValueError(f"camera must be one of {', '.join(cameras)}, got {value!r}")
    return value


def planar_move(target: np.ndarray, eef: Sequence[float]) -> None:
    """Refuse a target more than MAX_PLANAR_MOVE_M away in x/y from the gripper."""
    eef = np.asarray(eef, dtype=float)
    planar = float(np.linalg.norm(target[:2] - eef[:2]))
    if planar > MAX_PLANAR_MOVE_M + 1e-6:
        raise ValueError(f"planar move of {planar:.3f} m exceeds {MAX_PLANAR_MOVE_M:.2f} m from the current "
                         f"gripper position {[round(float(v), 3) for v in eef]}; split into waypoints")


# -- robot side: ToolError ------------------------------------------------------------------------------------
def require(tool: str, ok: bool, message: str) -> None:
    """ToolError(tool, message) unless ``ok``."""
    if not ok:
        raise ToolError(tool, message)


def view_on_robot(tool: str, cam: str, resolution: str, cameras: Sequence[str]) -> None:
    """ToolError for a camera or resolution the robot does not have (a value the reference passes through)."""
    require(tool, cam in cameras, f"unknown camera {cam!r}; cameras: {', '.join(cameras)}")
    require(tool, resolution in RESOLUTIONS, f"unknown resolution {resolution!r}; resolutions: "
                                             f"{', '.join(RESOLUTIONS)}")


def positive(tool: str, name: str, value: float, unit: str) -> float:
    """A finite number > 0 (a per-step clip, an action scale)."""
    require(tool, math.isfinite(value) and value > 0, f"{name} must be a finite number > 0 ({unit}), got {value!r}")
    return value


def tolerance(tool: str, name: str, value: float, unit: str) -> float:
    """A finite number >= 0."""
    require(tool, math.isfinite(value) and value >= 0, f"{name} must be a finite number >= 0 ({unit}), got {value!r}")
    return value


def count(tool: str, name: str, value: int) -> int:
    """A step or chunk budget >= 1."""
    require(tool, value >= 1, f"{name} must be at least 1; got {value}: nothing was executed")
    return value


def finite(tool: str, name: str, value: float | None, unit: str) -> float | None:
    """None or a finite number."""
    require(tool, value is None or math.isfinite(value), f"{name} must be a finite number ({unit}), got {value!r}")
    return value
