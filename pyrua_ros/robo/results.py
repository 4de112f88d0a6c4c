"""The frozen result dataclasses every ``robo`` call returns (PyRUA-Lean contract section 2.6).

Plain Python values only (tuples of floats, ints, bools, strings, dicts) so they cross the kernel boundary
as JSON. Positions are world-frame metres, angles radians, quaternions (x, y, z, w).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def quat_to_matrix(quat_xyzw: tuple[float, float, float, float]) -> tuple[tuple[float, ...], ...]:
    """Rotation matrix (row-major 3x3 tuples) of a unit quaternion (x, y, z, w); normalises a non-unit one."""
    x, y, z, w = (float(v) for v in quat_xyzw)
    n = math.sqrt(x * x + y * y + z * z + w * w) or 1.0
    x, y, z, w = x / n, y / n, z / n, w / n
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)),
    )


@dataclasses.dataclass(frozen=True)
class State:
    """Robot state at a recorded step. ``step``: index of the recorded state (0 = initial scene, +1 after every
    motion call). ``task``: the benchmark instruction. ``eef_pos``: gripper (grip site) position (x, y, z) m.
    ``eef_quat``: its orientation (x, y, z, w). ``gripper_qpos``: the two finger joints (m).
    ``gripper_opening``: finger gap |q0| + |q1| m (~0.08 open, ~0.0 closed on nothing, ~0.01-0.05 holding).
    ``object_names``: movable objects (e.g. ``akita_black_bowl_1``; no poses). ``terminated``: the task
    predicate fired (success). ``truncated``: the simulator step budget is spent."""

    step: int
    task: str
    eef_pos: tuple[float, float, float]
    eef_quat: tuple[float, float, float, float]
    gripper_qpos: tuple[float, float]
    gripper_opening: float
    object_names: tuple[str, ...]
    terminated: bool
    truncated: bool

    @property
    def eef_yaw(self) -> float:
        """World yaw of the gripper in rad, atan2(R10, R00) (the angle ``rotate_wrist`` servos)."""
        r = quat_to_matrix(self.eef_quat)
        return math.atan2(r[1][0], r[0][0])

    @property
    def eef_pitch(self) -> float:
        """Tilt of the gripper in rad, atan2(R12, -R22): 0 = pointing straight down, +pi/2 along world +y."""
        r = quat_to_matrix(self.eef_quat)
        return math.atan2(r[1][2], -r[2][2])


@dataclasses.dataclass(frozen=True)
class Move:
    """Outcome of ``move_to``. ``target_xyz`` m, ``final_eef_pos`` m, ``final_dist_m`` (distance left),
    ``reached`` (final_dist_m <= tol; False = stopped short, e.g. stalled or out of steps, not an error),
    ``steps_used`` / ``max_steps`` sim steps, ``terminated`` (task success), ``truncated`` (step budget spent)."""

    target_xyz: tuple[float, float, float]
    final_eef_pos: tuple[float, float, float]
    final_dist_m: float
    reached: bool
    steps_used: int
    max_steps: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class MovePose:
    """Outcome of ``move_pose``. ``final_eef_pos`` m, ``final_dist_m`` m, ``final_pitch`` rad, ``reached``
    (position only: final_dist_m <= tol), ``steps_used``, ``terminated``, ``truncated``."""

    final_eef_pos: tuple[float, float, float]
    final_dist_m: float
    final_pitch: float
    reached: bool
    steps_used: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Rotation:
    """Outcome of ``rotate_wrist`` (yaw) or ``rotate_pitch`` (pitch), angles in rad: ``start``, ``target``,
    ``final``, ``final_err`` (target - final, wrapped to [-pi, pi]), ``reached`` (abs(final_err) <= tol),
    ``steps_used``, ``terminated``, ``truncated``."""

    start: float
    target: float
    final: float
    final_err: float
    reached: bool
    steps_used: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Gripper:
    """Outcome of ``set_gripper``: ``gripper`` command now held (-1 open .. +1 closed), ``steps`` sim steps used,
    ``terminated``, ``truncated``."""

    gripper: float
    steps: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Release:
    """Outcome of ``release``: ``steps_used``, finger gap m at the start / largest / end
    (``start_gripper_opening``, ``peak_gripper_opening``, ``final_gripper_opening``), ``terminated``, ``truncated``."""

    steps_used: int
    start_gripper_opening: float
    peak_gripper_opening: float
    final_gripper_opening: float
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Pick:
    """Outcome of ``pi0_pick``. ``success``: the lift heuristic fired (descended, closed on something, rose) —
    a hint, verify with ``state()``/images. ``chunks_used`` / ``max_chunks`` action chunks (5 sim steps each),
    ``peak_lift_m`` (highest rise above the lowest point), ``min_gripper_opening`` / ``final_gripper_opening`` m,
    ``terminated``, ``truncated``, ``diagnostics`` (dict of extra measurements)."""

    success: bool
    chunks_used: int
    max_chunks: int
    peak_lift_m: float
    min_gripper_opening: float
    final_gripper_opening: float
    terminated: bool
    truncated: bool
    diagnostics: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Contact:
    """Outcome of ``pi0_doubled``: ``success`` mirrors the task predicate only, ``chunks_used`` / ``max_chunks``,
    ``terminated``, ``truncated``."""

    success: bool
    chunks_used: int
    max_chunks: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Segment:
    """Outcome of ``segment``. ``found`` False = nothing matched (a result, not an error). ``world_xyz``: median
    world point (m) of the visible surface of the mask (None if not found / no depth). ``score``: match
    confidence 0-1. ``box``: (row_min, col_min, row_max, col_max) of the mask in the high-res image.
    ``camera``, ``step``, ``overlay_artifact`` (artifact name of a PNG showing the mask), ``error`` (why
    nothing was found or why world_xyz is missing)."""

    found: bool
    world_xyz: tuple[float, float, float] | None
    score: float | None
    box: tuple[int, int, int, int] | None
    camera: str
    step: int
    overlay_artifact: str | None
    error: str | None


@dataclasses.dataclass(frozen=True)
class BackProjection:
    """Outcome of ``back_project``: ``world_xyz`` m of the surface seen at ``pixel`` (row, col) of ``camera`` at
    ``resolution``, ``step``, ``image_size`` (h, w)."""

    world_xyz: tuple[float, float, float]
    pixel: tuple[int, int]
    camera: str
    resolution: str
    step: int
    image_size: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class RegionCenter:
    """Outcome of ``region_center``: ``center_xyz`` (midpoint of the window's world x/y extent, median z) m,
    ``median_xyz`` m, ``n_valid`` pixels used, ``camera``, ``step``."""

    center_xyz: tuple[float, float, float]
    median_xyz: tuple[float, float, float]
    n_valid: int
    camera: str
    step: int


RESULT_TYPES: tuple[type, ...] = (
    State, Move, MovePose, Rotation, Gripper, Release, Pick, Contact, Segment, BackProjection, RegionCenter,
)
