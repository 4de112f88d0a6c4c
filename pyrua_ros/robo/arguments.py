"""Argument checks of the ``robo`` verbs: what is refused with ``ValueError`` before anything reaches the robot.

Every check returns the value in the form the implementation uses (floats, ints, a numpy vector) or raises a
``ValueError`` whose message names the argument, what it must be and what was given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_PLANAR_MOVE_M = 0.30      # the longest x/y move one motion call may make (PyRUA-Lean's limit)
RESOLUTIONS = ("high", "low")


def xyz(name: str, value: Any) -> np.ndarray:
    """Three finite numbers [x, y, z] (m) as a float vector."""
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 3 finite numbers [x, y, z] in metres, got {value!r}") from None
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ValueError(f"{name} must be 3 finite numbers [x, y, z] in metres, got {value!r}")
    return np.array(values)


def gripper(value: Any) -> float:
    """A gripper command in [-1, 1] (OPEN = -1.0, CLOSE = 1.0)."""
    try:
        g = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"gripper must be a number in [-1, 1] (OPEN=-1.0, CLOSE=1.0), got {value!r}") from None
    if not (math.isfinite(g) and -1.0 <= g <= 1.0):
        raise ValueError(f"gripper must be in [-1, 1] (OPEN=-1.0, CLOSE=1.0), got {value!r}")
    return g


def positive(name: str, value: Any, *, integer: bool = False) -> Any:
    """A finite number > 0 (an integer one when ``integer``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


def optional_angle(name: str, value: Any) -> float | None:
    """None, or a finite angle in rad."""
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite angle in rad or None, got {value!r}")
    return float(value)


def one_of_angles(tool: str, axis: str, target: Any, delta: Any) -> tuple[float | None, float | None]:
    """Exactly one of ``target_<axis>`` / ``delta_<axis>`` (rad)."""
    target, delta = optional_angle(f"target_{axis}", target), optional_angle(f"delta_{axis}", delta)
    if (target is None) == (delta is None):
        raise ValueError(f"{tool} needs exactly one of target_{axis} or delta_{axis} (rad)")
    return target, delta


def camera(value: Any, cameras: Sequence[str]) -> str:
    """One of the robot's cameras."""
    if value not in cameras:
        raise ValueError(f"camera must be one of {', '.join(cameras)}, got {value!r}")
    return value


def view(cam: Any, resolution: Any, cameras: Sequence[str]) -> tuple[str, str]:
    """A (camera, resolution) pair."""
    camera(cam, cameras)
    if resolution not in RESOLUTIONS:
        raise ValueError(f"resolution must be one of {', '.join(RESOLUTIONS)}, got {resolution!r}")
    return cam, resolution


def pixel(point: Any, size: int, name: str) -> tuple[int, int]:
    """(row, col) integer pixels inside a ``size`` x ``size`` image."""
    if not (isinstance(point, list | tuple) and len(point) == 2
            and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in point)):
        raise ValueError(f"{name} must be (row, col) integer pixels of the {size}x{size} image, got {point!r}")
    r, c = int(point[0]), int(point[1])
    if not (0 <= r < size and 0 <= c < size):
        raise ValueError(f"{name} ({r}, {c}) is outside the {size}x{size} image")
    return r, c


def pixel_range(name: str, value: Any) -> tuple[int, int]:
    """A (start, stop) pair of integer pixels."""
    if not (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int | np.integer) for v in value)):
        raise ValueError(f"{name} must be (start, stop) integer pixels, got {value!r}")
    return int(value[0]), int(value[1])


def min_score(value: Any) -> float:
    """A score cut-off in [0, 1]."""
    if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"min_score must be a number in [0, 1], got {value!r}")
    return float(value)


def planar_move(target: np.ndarray, eef: Sequence[float]) -> None:
    """Refuse a target more than MAX_PLANAR_MOVE_M away in x/y from the gripper."""
    eef = np.asarray(eef, dtype=float)
    planar = float(np.linalg.norm(target[:2] - eef[:2]))
    if planar > MAX_PLANAR_MOVE_M + 1e-6:
        raise ValueError(f"planar move of {planar:.3f} m exceeds {MAX_PLANAR_MOVE_M:.2f} m from the current "
                         f"gripper position {[round(float(v), 3) for v in eef]}; split into waypoints")


def vla_prompt(value: Any) -> str:
    """A non-empty instruction for the VLA."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"prompt must be a non-empty string, got {value!r}")
    return value


def finite(name: str, value: Any, unit: str) -> float:
    """A finite number."""
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number ({unit}), got {value!r}")
    return float(value)
