"""The frozen result dataclasses every ``robo`` call returns (PyRUA-Lean contract section 2.6).

Plain Python values only (tuples of floats, ints, bools, strings, dicts) so they cross the kernel boundary
as JSON. Positions are world-frame metres, angles radians, quaternions (x, y, z, w).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def quat_to_matrix(quat_xyzw: tuple[float, float, float, float]) -> tuple[tuple[float, ...], ...]:
    """Rotation matrix (row-major 3x3 tuples) of a unit quaternion (x, y, z, w); normalises a non-unit one.

    The kernel's cell process imports this module with nothing else of the package and no numpy (its sandbox
    lets it read only ``sandbox.KERNEL_SOURCES``), so this is the closed form in plain Python; everywhere else
    :func:`pyrua_ros.rotations.quat_to_matrix` is used, and test_rotations holds the two together."""
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
    """The robot's state at one recorded step.

    step: index of the recorded step (0 = initial scene).
    task: the benchmark's task instruction (authoritative).
    eef_pos: gripper position [x, y, z] in the world frame, m.
    eef_quat: gripper orientation quaternion [x, y, z, w].
    gripper_qpos: the two finger joint positions.
    gripper_opening: finger gap |q0| + |q1|: ~0.08 fully open, ~0.0 closed on nothing,
        ~0.01-0.05 closed on an object.
    object_names: names of the movable objects (no poses).
    terminated: the benchmark's success predicate has fired.
    truncated: the simulator step budget is spent.
    """

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
        """World yaw of the gripper in rad (what rotate_wrist turns)."""
        r = quat_to_matrix(self.eef_quat)
        return math.atan2(r[1][0], r[0][0])

    @property
    def eef_pitch(self) -> float:
        """Gripper tilt in rad, 0 = pointing straight down (what rotate_pitch tilts)."""
        r = quat_to_matrix(self.eef_quat)
        return math.atan2(r[1][2], -r[2][2])


@dataclasses.dataclass(frozen=True)
class Move:
    """Outcome of ``move_to``.

    target_xyz: the commanded target; final_eef_pos: where the gripper stopped;
    final_dist_m: the distance between them (m).
    reached: ``final_dist_m <= tol``. False: the servo stalled (IK limit, contact or step
        budget); re-plan instead of assuming you arrived.
    steps_used / max_steps: servo iterations used / the simulator step budget.
    terminated / truncated: episode flags after the move.
    """

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
    """Outcome of ``move_pose``.

    reached: position within ``tol`` (orientation is not judged).
    final_pitch: gripper pitch after the move, rad.
    """

    final_eef_pos: tuple[float, float, float]
    final_dist_m: float
    final_pitch: float
    reached: bool
    steps_used: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Rotation:
    """Outcome of ``rotate_wrist`` / ``rotate_pitch``; angles in rad.

    reached: ``abs(final_err) <= tol``.
    """

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
    """Outcome of ``set_gripper``: the command held and for how many steps."""

    gripper: float
    steps: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Release:
    """Outcome of ``release``.

    peak_gripper_opening: the widest finger gap seen while opening.
    terminated: True when letting go satisfied the task predicate.
    """

    steps_used: int
    start_gripper_opening: float
    peak_gripper_opening: float
    final_gripper_opening: float
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Pick:
    """Outcome of ``pi0_pick``.

    success: the VLA's lift heuristic fired (descended, then rose by ``lift_thresh`` with
        the fingers closed on something): a hint, not proof; confirm with
        ``state().gripper_opening`` and the wrist image.
    chunks_used / max_chunks: action chunks used / allowed.
    peak_lift_m: how far the gripper rose above its lowest point.
    min_gripper_opening / final_gripper_opening: finger gap statistics.
    terminated: the task predicate fired during the pick.
    diagnostics: the heuristic's raw numbers.
    """

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
    """Outcome of ``pi0_doubled``.

    success: mirrors ``terminated`` only. For an intermediate contact (knob, drawer, door)
        False does not mean the contact failed; look at the state or an image.
    """

    success: bool
    chunks_used: int
    max_chunks: int
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Segment:
    """Outcome of ``segment``.

    found: a mask scoring at least ``min_score`` was found.
    world_xyz: median world point of the mask's visible surface (m), or None when not
        found or without valid depth.
    score: match confidence in [0, 1].
    box: the mask's bounding box (row_min, col_min, row_max, col_max), or None.
    overlay_artifact: name of the saved overlay image (``artifact()`` loads it).
    error: why nothing was found, or None.
    """

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
    """Outcome of ``back_project``: the world point under one pixel."""

    world_xyz: tuple[float, float, float]
    pixel: tuple[int, int]
    camera: str
    resolution: str
    step: int
    image_size: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class RegionCenter:
    """Outcome of ``region_center``.

    center_xyz: midpoint of the region's world x/y extent, with median z.
    median_xyz: per-axis median of the same pixels.
    n_valid: pixels left after the depth and z-band filters.
    """

    center_xyz: tuple[float, float, float]
    median_xyz: tuple[float, float, float]
    n_valid: int
    camera: str
    step: int


RESULT_TYPES: tuple[type, ...] = (
    State, Move, MovePose, Rotation, Gripper, Release, Pick, Contact, Segment, BackProjection, RegionCenter,
)
