"""``LiberoRobot``: the PyRUA-Lean ``robo`` API for the LIBERO Franka arm, on a ``RobotBackend``.

The class docstring and the public members' docstrings ARE the API reference the model reads (the prompt is
generated from the live class with ``inspect``). Host-facing things live on :class:`~pyrua_ros.robo.host.RobotHost`.

Primitive sets: ``LiberoRobot(backend, primitives="full", vla=<policy client>)`` returns an instance of the
subclass that adds ``pi0_pick`` / ``pi0_doubled`` (its ``__name__`` is also ``LiberoRobot``). In ``"no-vla"`` mode,
or when no VLA client is given, the instance is a plain ``LiberoRobot``: the skills are not members of its class,
so ``inspect``/``dir`` on ``type(robo)`` (or on the instance) show no ``pi0_*``; calling ``robo.pi0_pick(...)``
anyway raises ``RuntimeError("pi0_pick is not available in this run (no-VLA primitive set)")`` and is ledgered.
Prompt generators: render ``type(robo)``, or ``robot_class(primitives)`` when there is no live robot.

Steps: ``State.step`` is the index of the recorded state (0 = initial scene, +1 after every motion call).
Images of a step are captured when that step is first viewed while it is the latest one.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from pyrua_ros.robo import perception, vla
from pyrua_ros.robo.backend import BackendRefused, BackendTimeout, EePose, RobotBackend
from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.robo.host import ArtifactNames, RobotHost, encode_png
from pyrua_ros.robo.ledger import Ledger, summarize
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
    quat_to_matrix,
)
from pyrua_ros.robo.segmenters import GroundTruthSegmenter, Segmenter, SegmentRequest

MAX_PLANAR_MOVE_M = 0.30
PI0_CHUNK_STEPS = vla.PI0_CHUNK_STEPS
GRIPPER_OPEN_WIDTH_M = 0.08
OSC_POS_SCALE_M = 0.05          # metres per unit OSC action (the sim maps a = v * dt / 0.05)
ORIENTATION_HOLD_GAIN = 0.5     # fraction of the orientation error corrected per step while holding
YAW_TOL_RAD = 0.02              # move_to with target_yaw also waits for the yaw to settle within this
PRIMITIVE_SETS = ("full", "no-vla")
RESOLUTIONS = ("high", "low")


# -- orientation helpers (pure) -----------------------------------------------------------------------------
def wrap_angle(a: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def rot_x(a: float) -> np.ndarray:
    """Rotation matrix about world x by ``a`` rad."""
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_z(a: float) -> np.ndarray:
    """Rotation matrix about world z by ``a`` rad."""
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def matrix(quat_xyzw) -> np.ndarray:
    """3x3 numpy rotation matrix of an (x, y, z, w) quaternion."""
    return np.array(quat_to_matrix(tuple(float(v) for v in quat_xyzw)))


def rotation_vector(r: np.ndarray) -> np.ndarray:
    """Axis-angle vector (3,) rad of a rotation matrix (the rotation that ``r`` applies)."""
    cos = float(np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0))
    angle = math.acos(cos)
    axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle < 1e-9:
        return np.zeros(3)
    if math.pi - angle < 1e-6:  # 180 degrees: axis from the symmetric part
        axis = np.sqrt(np.clip((np.diag(r) + 1.0) / 2.0, 0.0, None))
        i = int(np.argmax(axis))
        axis = np.array([r[i, 0] + r[0, i], r[i, 1] + r[1, i], r[i, 2] + r[2, i]]) / (2.0 * axis[i] * 1.0)
        axis[i] = math.sqrt(max(0.0, (r[i, i] + 1.0) / 2.0)) * 1.0
        return axis / np.linalg.norm(axis) * angle
    return axis / (2.0 * math.sin(angle)) * angle


def yaw_of(r: np.ndarray) -> float:
    """World yaw atan2(R10, R00) rad (the ``State.eef_yaw`` convention)."""
    return math.atan2(r[1, 0], r[0, 0])


def pitch_of(r: np.ndarray) -> float:
    """Pitch atan2(R12, -R22) rad: 0 = pointing down, +pi/2 along world +y (the ``State.eef_pitch`` convention)."""
    return math.atan2(r[1, 2], -r[2, 2])


def _clip(v: float, limit: float) -> float:
    return max(-limit, min(limit, v))


def _vec3(name: str, xyz: Any) -> np.ndarray:
    try:
        values = [float(v) for v in xyz]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 3 finite numbers [x, y, z] in metres, got {xyz!r}") from None
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ValueError(f"{name} must be 3 finite numbers [x, y, z] in metres, got {xyz!r}")
    return np.array(values)


def _gripper_value(g: Any) -> float:
    try:
        value = float(g)
    except (TypeError, ValueError):
        raise ValueError(f"gripper must be a number in [-1, 1] (OPEN=-1.0, CLOSE=1.0), got {g!r}") from None
    if not (math.isfinite(value) and -1.0 <= value <= 1.0):
        raise ValueError(f"gripper must be in [-1, 1] (OPEN=-1.0, CLOSE=1.0), got {g!r}")
    return value


def _positive(name: str, value: Any, *, integer: bool = False) -> Any:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


def _optional_angle(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite angle in rad or None, got {value!r}")
    return float(value)


def _t3(v) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


def _ledger_refusals(tool: str) -> Callable:
    """Ledger a ValueError raised by argument checks before the call reached the robot (ok False, not stateful).
    Calls that got further ledger themselves."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(self: LiberoRobot, *args: Any, **kwargs: Any) -> Any:
            started, n = time.time(), len(self._ledger)
            try:
                return fn(self, *args, **kwargs)
            except ValueError as exc:
                if len(self._ledger) == n:
                    self._ledger.append(tool=tool, kwargs={**kwargs, **({"args": list(args)} if args else {})},
                                        started_at=started, elapsed_s=time.time() - started, ok=False,
                                        stateful=False, error=f"ValueError: {exc}")
                raise
        return call
    return wrap


def artifact_names() -> ArtifactNames:
    """The LIBERO artifact names (colour, world maps, depth) for a RobotHost."""
    return ArtifactNames(images=dict(LiberoRobot.IMAGE_ARTIFACTS), world_maps=dict(LiberoRobot.WORLD_MAP_ARTIFACTS),
                         depths=dict(LiberoRobot.DEPTH_ARTIFACTS))


class LiberoRobot:
    """A simulated Franka Panda arm in the LIBERO benchmark, driven through ROS 2.

    Conventions:
    - World frame: x/y span the table, z up; metres and radians. In the kitchen scenes the table top is at
      z ~0.90 and the gripper home is about (-0.21, 0, 1.17); living-room scenes ~0.68; the floor scene
      (libero_object) has the floor at z ~0.0 and home about (-0.15, 0, 0.26). +y is the robot's left (it
      appears on the right of the agentview image). The arm starts at home, gripper open, pointing down.
    - Motion calls block until done and return a typed result; nothing is queued. Every motion call takes a
      ``gripper`` value in [-1, +1] (``OPEN = -1.0``, ``CLOSE = 1.0``) that is held for the entire motion:
      carrying an object with the default -1 opens the gripper and drops it.
    - A single move may travel at most 0.30 m in x/y; split longer paths into waypoints.
    - Cameras: ``agentview`` (fixed, looks at the table from the front) and ``wrist`` (on the gripper). Images
      are ``high`` 1024x1024 or ``low`` 256x256, pixels (row, col) with row 0 at the top. Object poses are never
      given: locate objects with ``segment``, ``back_project``, ``region_center`` or ``world_map``.
    - The fingers close along world y. The grip site cannot go more than ~4 cm below the top of the object
      being grasped (the hand lands on it).
    - Once the task succeeds (``terminated``) or the simulator step budget is spent (``truncated``), motion
      calls raise ``EpisodeFinished``; read-only calls keep working.
    """

    OPEN = -1.0
    CLOSE = 1.0

    NAME: ClassVar[str] = "libero"
    CAMERAS: ClassVar[tuple[str, ...]] = ("agentview", "wrist")
    IMAGE_ARTIFACTS: ClassVar[dict[tuple[str, str], str]] = {
        ("agentview", "high"): "agentview_high.png", ("agentview", "low"): "agentview.png",
        ("wrist", "high"): "wrist_high.png", ("wrist", "low"): "wrist.png",
    }
    WORLD_MAP_ARTIFACTS: ClassVar[dict[tuple[str, str], str]] = {
        ("agentview", "high"): "agentview_world_high.npz", ("agentview", "low"): "agentview_world.npz",
        ("wrist", "high"): "wrist_world_high.npz", ("wrist", "low"): "wrist_world.npz",
    }
    DEPTH_ARTIFACTS: ClassVar[dict[tuple[str, str], str]] = {
        ("agentview", "high"): "agentview_depth.npz", ("agentview", "low"): "agentview_depth_low.npz",
        ("wrist", "high"): "wrist_depth.npz", ("wrist", "low"): "wrist_depth_low.npz",
    }
    ON_MOTION_IMAGES: ClassVar[tuple[str, ...]] = ("agentview_high.png", "wrist_high.png")
    SHOW_RESOLUTION: ClassVar[str] = "high"
    SEGMENT_RESOLUTION: ClassVar[str] = "high"
    STATEFUL_TOOLS: ClassVar[frozenset[str]] = frozenset({
        "move_to", "move_pose", "rotate_wrist", "rotate_pitch", "set_gripper", "release", "pi0_pick", "pi0_doubled",
    })
    VLA_PRIMITIVES: ClassVar[tuple[str, ...]] = ("pi0_pick", "pi0_doubled")
    STATE_TOOL: ClassVar[str] = "view_env_state"
    RESULT_TYPES: ClassVar[tuple[type, ...]] = RESULT_TYPES

    def __new__(cls, backend: RobotBackend, *, primitives: str = "full", vla: Any = None, **_: Any) -> LiberoRobot:
        if primitives not in PRIMITIVE_SETS:
            raise ValueError(f"primitives must be one of {', '.join(PRIMITIVE_SETS)}, got {primitives!r}")
        chosen = _LiberoRobotWithVla if cls is LiberoRobot and primitives == "full" and vla is not None else cls
        return super().__new__(chosen)

    def __init__(self, backend: RobotBackend, *, ledger: Ledger | None = None, primitives: str = "full",
                 segmenter: Segmenter | None = None, vla: Any = None, host: RobotHost | None = None) -> None:
        self._backend = backend
        self._host = host if host is not None else RobotHost(backend, artifact_names(), ledger=ledger)
        if host is not None and ledger is not None and host.ledger is not ledger:
            raise ValueError("ledger and host.ledger must be the same object")
        self._host.attach(self, self._current_state)
        self._ledger = self._host.ledger
        self._primitives = "full" if isinstance(self, _LiberoRobotWithVla) else "no-vla"
        self._segmenter = segmenter if segmenter is not None else GroundTruthSegmenter()
        self._vla = vla
        self._gripper_cmd = self.OPEN
        self._latched: dict[str, bool] = {"terminated": False, "truncated": False}
        self._segment_count = 0

    # -- no-VLA shadow ------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in LiberoRobot.VLA_PRIMITIVES:
            def unavailable(*args: Any, **kwargs: Any) -> Any:
                started = time.time()
                msg = f"{name} is not available in this run (no-VLA primitive set)"
                self._ledger.append(tool=name, kwargs={**kwargs, **({"args": list(args)} if args else {})},
                                    started_at=started, elapsed_s=time.time() - started, ok=False, stateful=False,
                                    error=f"RuntimeError: {msg}")
                raise RuntimeError(msg)
            return unavailable
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- observation ----------------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        """The benchmark task instruction (authoritative), e.g. "put the black bowl on the plate"."""
        return self._current_state().task

    @property
    def done(self) -> bool:
        """True once the task predicate has fired (sticky; checked on every access). A spent step budget shows
        as ``state().truncated`` instead."""
        if not self._latched["terminated"]:
            self._latch(self._backend.status())
        return self._latched["terminated"]

    @_ledger_refusals("view_env_state")
    def state(self, step: int = -1) -> State:
        """Robot state at a recorded step: -1 = latest, 0 = initial scene (a new step is recorded after every
        motion call). Gives eef position/orientation, gripper opening, object names, terminated/truncated."""
        return self._readonly("view_env_state", {"step": step}, lambda: self._state_at(step))

    @_ledger_refusals("image")
    def image(self, camera: str = "agentview", *, resolution: str = "high", step: int = -1) -> np.ndarray:
        """RGB image (H, W, 3) uint8 of ``camera`` at ``step`` (-1 = latest). ``high`` = 1024x1024, ``low`` =
        256x256; pixel (row, col), row 0 at the top, col 0 at the left."""
        self._check_view(camera, resolution)
        return self._readonly("image", {"camera": camera, "resolution": resolution, "step": step},
                              lambda: self._host.artifacts.color("image", camera, resolution, step).copy())

    @_ledger_refusals("world_map")
    def world_map(self, camera: str = "agentview", *, resolution: str = "high", step: int = -1) -> np.ndarray:
        """World [x, y, z] in metres of the surface seen at every pixel, float (H, W, 3), same pixels as
        ``image``; zeros where there is no valid depth (sky, far background)."""
        self._check_view(camera, resolution)
        return self._readonly("world_map", {"camera": camera, "resolution": resolution, "step": step},
                              lambda: self._host.artifacts.world("world_map", camera, resolution, step).copy())

    @_ledger_refusals("show")
    def show(self, camera: str = "agentview") -> None:
        """Attach the latest image of ``camera`` (1024x1024) to this turn's result (once per camera per turn).
        Only needed when images are attached on demand."""
        self._check_camera(camera)

        def request() -> None:
            self._host.show_queue.request(camera)

        self._readonly("show", {"camera": camera}, request)

    @_ledger_refusals("artifact")
    def artifact(self, name: str, *, step: int = -1) -> bytes:
        """Raw bytes of a recorded artifact at ``step``: images ``agentview_high.png``, ``agentview.png``,
        ``wrist_high.png``, ``wrist.png``; world maps ``agentview_world_high.npz`` (array ``array``, (H, W, 3) m);
        depth ``agentview_depth.npz`` (1024x1024 m, ``*_depth_low.npz`` for 256); a segment's ``overlay_artifact``
        and its ``.json`` twin (see ``segment``)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be an artifact file name such as 'agentview_high.png', got {name!r}")
        return self._readonly("artifact", {"name": name, "step": step},
                              lambda: self._host.artifacts.get("artifact", name, step=step))

    @_ledger_refusals("view_camera_meta")
    def camera_meta(self, camera: str = "agentview", *, step: int = -1) -> dict:
        """Camera geometry at ``step`` for the high-res image: ``K`` (3x3 pixel intrinsics), ``T_world_optical``
        (4x4 pose of the optical frame in the world; x right, y down, z forward), ``position`` (m),
        ``image_size`` [h, w], ``resolution``, ``camera``, ``step``. Use it to project world points into pixels."""
        self._check_camera(camera)

        def meta() -> dict:
            k, t, _ = self._host.artifacts.geometry("view_camera_meta", camera, "high", step)
            h = w = int(self._backend.resolutions["high"])
            return {"camera": camera, "step": self._host.artifacts.resolve_step(step), "resolution": "high",
                    "image_size": [h, w], "K": k.tolist(), "T_world_optical": t.tolist(),
                    "position": t[:3, 3].tolist()}

        return self._readonly("view_camera_meta", {"camera": camera, "step": step}, meta)

    # -- perception -----------------------------------------------------------------------------------------
    @_ledger_refusals("segment")
    def segment(self, prompt: str | None = None, *, camera: str = "agentview", point: tuple[int, int] | None = None,
                min_score: float = 0.2, step: int = -1) -> Segment:
        """Find one object in a recorded image and locate it in the world.

        Give a short prompt (colour + shape + relation: "the black bowl on the stove", "the cream cheese box",
        "plate", "wine bottle", "stove burner", "top drawer handle") and/or a pixel ``point`` (row, col) of the
        1024x1024 image of ``camera``. Colour + shape phrases score ~0.7 or more; brand nouns alone may score
        low (~0.05); ``min_score`` (0-1) is the cut-off. Use the ``wrist`` camera once 15-20 cm above a target.
        ``found=False`` (with ``error``) is a result, not an exception.

        ``world_xyz`` is the median world point (m) of the visible surface of the mask. It is biased toward
        what the camera sees: bowls/ramekins ~2 cm behind their centre in x (inner far wall), bottles/cans
        +1.3..2.7 cm in x (front face), basket +7 cm, cabinets +4..8 cm; y is good to <1 cm. A better centre is
        in the overlay's JSON twin: ``json.loads(robo.artifact(seg.overlay_artifact.replace(".png", ".json"),
        step=seg.step))`` has ``box_center_xyz`` (centre of the 2nd-98th percentile box of the surface,
        within 1-5 mm for bowls, plates, boxes), ``xyz_min``/``xyz_max``, ``top_z`` (98th percentile z),
        ``n_pixels``, ``label`` and ``instances`` (every similar object: label, score, world_xyz, box_center_xyz).
        """
        self._check_camera(camera)
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"prompt must be a string or None, got {prompt!r}")
        if (prompt is None or not prompt.strip()) and point is None:
            raise ValueError("segment needs a prompt (e.g. 'the black bowl') or a point (row, col)")
        size = int(self._backend.resolutions[self.SEGMENT_RESOLUTION])
        pixel = None
        if point is not None:
            pixel = self._pixel(point, size, "point")
        if not isinstance(min_score, int | float) or not 0.0 <= float(min_score) <= 1.0:
            raise ValueError(f"min_score must be a number in [0, 1], got {min_score!r}")
        kwargs: dict[str, Any] = {"camera": camera, "step": step, "min_score": min_score}
        if prompt is not None:
            kwargs["prompt"] = prompt
        if point is not None:
            kwargs["point"] = list(pixel)
        return self._readonly("segment", kwargs, lambda: self._segment(prompt, camera, pixel, float(min_score), step))

    @_ledger_refusals("back_project")
    def back_project(self, row: int, col: int, *, camera: str = "agentview", resolution: str = "high",
                     step: int = -1) -> BackProjection:
        """World point (m) of the surface seen at pixel (row, col) of ``camera``'s image at ``resolution``
        (row 0 top). ToolError when the pixel is outside the image or has no valid depth."""
        self._check_view(camera, resolution)

        def run() -> BackProjection:
            wmap = self._host.artifacts.world("back_project", camera, resolution, step)
            h, w = wmap.shape[:2]
            if not (isinstance(row, int | np.integer) and isinstance(col, int | np.integer)
                    and 0 <= row < h and 0 <= col < w):
                raise ToolError("back_project", f"pixel ({row}, {col}) is outside the {h}x{w} {camera} image")
            p = wmap[int(row), int(col)]
            if not (np.all(np.isfinite(p)) and np.any(p != 0)):
                raise ToolError("back_project", f"no valid depth at pixel ({row}, {col}) of {camera}")
            return BackProjection(world_xyz=_t3(p), pixel=(int(row), int(col)), camera=camera, resolution=resolution,
                                  step=self._host.artifacts.resolve_step(step), image_size=(h, w))

        return self._readonly("back_project", {"row": row, "col": col, "camera": camera, "resolution": resolution,
                                               "step": step}, run)

    @_ledger_refusals("back_project")
    def region_center(self, row_range: tuple[int, int], col_range: tuple[int, int], *, camera: str = "agentview",
                      resolution: str = "high", z_min: float | None = None, z_max: float | None = None,
                      step: int = -1) -> RegionCenter:
        """Centre of the surface inside a pixel window: rows ``row_range = (start, stop)``, cols ``col_range``
        (stop excluded, clipped to the image), keeping only world points with z in [z_min, z_max] m when given
        (e.g. ``z_min = table_z + 0.01`` drops the table). ``center_xyz`` = midpoint of the points' world x/y
        extent with their median z (less biased by the visible rim than the median); ``median_xyz`` too.
        ToolError for an empty window or fewer than 3 valid pixels."""
        self._check_view(camera, resolution)
        for name, rng in (("row_range", row_range), ("col_range", col_range)):
            if not (isinstance(rng, list | tuple) and len(rng) == 2
                    and all(isinstance(v, int | np.integer) for v in rng)):
                raise ValueError(f"{name} must be (start, stop) integer pixels, got {rng!r}")
        kwargs = {"row_range": list(row_range), "col_range": list(col_range), "camera": camera,
                  "resolution": resolution, "z_min": z_min, "z_max": z_max, "step": step}

        def run() -> RegionCenter:
            wmap = self._host.artifacts.world("back_project", camera, resolution, step)
            try:
                centre, med, n = perception.region_center(wmap, tuple(row_range), tuple(col_range),
                                                          z_min=z_min, z_max=z_max)
            except ValueError as exc:
                raise ToolError("back_project", str(exc)) from None
            return RegionCenter(center_xyz=centre, median_xyz=med, n_valid=n, camera=camera,
                                step=self._host.artifacts.resolve_step(step))

        return self._readonly("back_project", kwargs, run)

    # -- scripted motion ------------------------------------------------------------------------------------
    @_ledger_refusals("move_to")
    def move_to(self, xyz: list[float], gripper: float = -1.0, *, tol: float = 0.012, step_clip: float = 0.025,
                max_steps: int = 80, target_yaw: float | None = None, yaw_step_clip: float = 0.10,
                action_scale: float = 0.05) -> Move:
        """Servo the gripper to world ``xyz`` (m) in a straight line, holding its orientation (pointing down).

        ``gripper`` is held for the whole motion (-1 open, +1 closed: carry with +1). Stops when within
        ``tol`` m, after ``max_steps`` simulator steps, or when the episode ends. ``step_clip`` caps travel per
        step (m): 0.025 empty or with a box, 0.015 with cans, 0.012 with tall bottles / for fine approaches;
        ~2-2.5 cm per step, so 0.1 m takes 20-25 steps. ``target_yaw`` (rad, world z) also turns the wrist, at
        most ``yaw_step_clip`` rad per step. Leave ``action_scale`` at 0.05. At most 0.30 m in x/y per call
        (ValueError: split into waypoints). Descents end 5-8 mm above the target; lifting a load stops ~1 cm
        short. A stalled servo returns normally with ``reached=False``.
        """
        target = _vec3("xyz", xyz)
        g = _gripper_value(gripper)
        tol, step_clip = _positive("tol", tol), _positive("step_clip", step_clip)
        max_steps = _positive("max_steps", max_steps, integer=True)
        target_yaw = _optional_angle("target_yaw", target_yaw)
        yaw_step_clip, action_scale = _positive("yaw_step_clip", yaw_step_clip), _positive("action_scale", action_scale)
        self._check_planar(target)
        kwargs = {"xyz": target.tolist(), "gripper": g, "tol": tol, "step_clip": step_clip, "max_steps": max_steps,
                  "target_yaw": target_yaw, "yaw_step_clip": yaw_step_clip, "action_scale": action_scale}

        def run() -> Move:
            steps = self._hold_gripper("move_to", g)
            r_ref = matrix(self._backend.ee_pose().quat_xyzw)

            def twist(pose: EePose) -> tuple[np.ndarray, np.ndarray]:
                r = matrix(pose.quat_xyzw)
                ref = r_ref
                if target_yaw is not None:
                    yaw = yaw_of(r)
                    want = yaw + _clip(wrap_angle(target_yaw - yaw), yaw_step_clip)
                    ref = rot_z(want - yaw_of(r_ref)) @ r_ref
                return (self._linear(target - pose.pos, step_clip, action_scale),
                        self._hold_orientation(ref, r, yaw_full=target_yaw is not None))

            def arrived(pose: EePose) -> bool:
                if np.linalg.norm(target - pose.pos) > tol:
                    return False
                return target_yaw is None or abs(wrap_angle(target_yaw - yaw_of(matrix(pose.quat_xyzw)))) <= YAW_TOL_RAD

            pose, steps = self._servo_loop("move_to", twist, arrived, max_steps, steps)
            dist = float(np.linalg.norm(target - pose.pos))
            term, trunc = self._flags()
            return Move(target_xyz=_t3(target), final_eef_pos=_t3(pose.pos), final_dist_m=dist, reached=dist <= tol,
                        steps_used=steps, max_steps=max_steps, terminated=term, truncated=trunc)

        return self._stateful("move_to", kwargs, run)

    @_ledger_refusals("move_pose")
    def move_pose(self, xyz: list[float], *, target_pitch: float | None = None, target_yaw: float | None = None,
                  gripper: float = -1.0, step_clip: float = 0.02, pitch_step: float = 0.08, yaw_step: float = 0.08,
                  tol: float = 0.012, ori_tol: float = 0.05, max_steps: int = 150,
                  action_scale: float = 0.05) -> MovePose:
        """Move to ``xyz`` (m) while tilting to ``target_pitch`` and/or turning to ``target_yaw`` (rad), co-varying
        position and orientation. Use it for recessed or low targets (cabinet fronts, microwave cavities) where
        ``move_to`` pointing straight down hits a singularity. Pitch 0 = pointing down, +pi/2 = pointing along
        world +y; None keeps the current angle. Per step at most ``step_clip`` m, ``pitch_step`` and
        ``yaw_step`` rad. Stops when within ``tol`` m and ``ori_tol`` rad, after ``max_steps``, or at episode
        end. ``reached`` is position-only. Same 0.30 m x/y limit as ``move_to``; ``gripper`` held throughout."""
        target = _vec3("xyz", xyz)
        g = _gripper_value(gripper)
        target_pitch = _optional_angle("target_pitch", target_pitch)
        target_yaw = _optional_angle("target_yaw", target_yaw)
        step_clip, pitch_step, yaw_step = (_positive("step_clip", step_clip), _positive("pitch_step", pitch_step),
                                           _positive("yaw_step", yaw_step))
        tol, ori_tol = _positive("tol", tol), _positive("ori_tol", ori_tol)
        max_steps = _positive("max_steps", max_steps, integer=True)
        action_scale = _positive("action_scale", action_scale)
        self._check_planar(target)
        kwargs = {"xyz": target.tolist(), "target_pitch": target_pitch, "target_yaw": target_yaw, "gripper": g,
                  "step_clip": step_clip, "pitch_step": pitch_step, "yaw_step": yaw_step, "tol": tol,
                  "ori_tol": ori_tol, "max_steps": max_steps, "action_scale": action_scale}

        def run() -> MovePose:
            steps = self._hold_gripper("move_pose", g)
            r0 = matrix(self._backend.ee_pose().quat_xyzw)
            pitch_goal = pitch_of(r0) if target_pitch is None else target_pitch
            yaw_goal = yaw_of(r0) if target_yaw is None else target_yaw

            def twist(pose: EePose) -> tuple[np.ndarray, np.ndarray]:
                return (self._linear(target - pose.pos, step_clip, action_scale),
                        self._steer(matrix(pose.quat_xyzw), pitch_goal, yaw_goal, pitch_clip=pitch_step,
                                    yaw_clip=yaw_step, r_start=r0))

            def arrived(pose: EePose) -> bool:
                r = matrix(pose.quat_xyzw)
                return (np.linalg.norm(target - pose.pos) <= tol
                        and abs(wrap_angle(pitch_goal - pitch_of(r))) <= ori_tol
                        and abs(wrap_angle(yaw_goal - yaw_of(r))) <= ori_tol)

            pose, steps = self._servo_loop("move_pose", twist, arrived, max_steps, steps)
            dist = float(np.linalg.norm(target - pose.pos))
            term, trunc = self._flags()
            return MovePose(final_eef_pos=_t3(pose.pos), final_dist_m=dist,
                            final_pitch=pitch_of(matrix(pose.quat_xyzw)), reached=dist <= tol, steps_used=steps,
                            terminated=term, truncated=trunc)

        return self._stateful("move_pose", kwargs, run)

    @_ledger_refusals("rotate_wrist")
    def rotate_wrist(self, *, target_yaw: float | None = None, delta_yaw: float | None = None, gripper: float = 1.0,
                     max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Turn the gripper about world z to ``target_yaw`` or by ``delta_yaw`` (rad; give exactly one), keeping
        its position. ``gripper`` defaults to +1 (keep holding). At most ``step_clip`` rad per step; ``reached``
        when abs(final_err) <= ``tol`` rad. Yaw is ``State.eef_yaw``."""
        return self._rotate("rotate_wrist", "yaw", target_yaw, delta_yaw, gripper=gripper, max_steps=max_steps,
                            tol=tol, step_clip=step_clip)

    @_ledger_refusals("rotate_pitch")
    def rotate_pitch(self, *, target_pitch: float | None = None, delta_pitch: float | None = None,
                     gripper: float = 1.0, max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Tilt the gripper about world x to ``target_pitch`` or by ``delta_pitch`` (rad; give exactly one),
        keeping position and yaw. Pitch 0 = pointing straight down, +pi/2 points along world +y, -pi/2 along -y.
        ``gripper`` defaults to +1 (keep holding); at most ``step_clip`` rad per step; ``reached`` when
        abs(final_err) <= ``tol``. Pitch is ``State.eef_pitch``."""
        return self._rotate("rotate_pitch", "pitch", target_pitch, delta_pitch, gripper=gripper, max_steps=max_steps,
                            tol=tol, step_clip=step_clip)

    @_ledger_refusals("set_gripper")
    def set_gripper(self, gripper: float, steps: int = 5) -> Gripper:
        """Hold the arm still and drive the gripper to ``gripper`` (-1 open .. +1 closed) for ``steps`` simulator
        steps (more if the fingers are still moving). After a grasp use ``set_gripper(+1, steps=8)`` (12 for a
        bowl rim); use <= 5 for soft cans. The value is then held by later motion calls that pass it."""
        g = _gripper_value(gripper)
        steps = _positive("steps", steps, integer=True)

        def run() -> Gripper:
            used = self._send_gripper("set_gripper", g)
            _, used = self._hold_position("set_gripper", steps, used)
            term, trunc = self._flags()
            return Gripper(gripper=g, steps=used, terminated=term, truncated=trunc)

        return self._stateful("set_gripper", {"gripper": g, "steps": steps}, run)

    @_ledger_refusals("release")
    def release(self, max_steps: int = 20) -> Release:
        """Open the gripper in place and hold for up to ``max_steps`` simulator steps; returns as soon as the task
        predicate fires (success). Lower the object to just above its target first (e.g. plate z + 0.05)."""
        max_steps = _positive("max_steps", max_steps, integer=True)

        def run() -> Release:
            start = float(self._backend.gripper_opening())
            peak = [start]
            used = self._send_gripper("release", self.OPEN)
            peak[0] = max(peak[0], float(self._backend.gripper_opening()))

            def stop(_: EePose) -> bool:
                peak[0] = max(peak[0], float(self._backend.gripper_opening()))
                return bool(getattr(self._backend.status(), "success", False))

            _, used = self._hold_position("release", max_steps, used, stop=stop)
            final = float(self._backend.gripper_opening())
            term, trunc = self._flags()
            return Release(steps_used=used, start_gripper_opening=start, peak_gripper_opening=max(peak[0], final),
                           final_gripper_opening=final, terminated=term, truncated=trunc)

        return self._stateful("release", {"max_steps": max_steps}, run)

    # == internals ==========================================================================================
    def _readonly(self, tool: str, kwargs: dict[str, Any], fn: Callable[[], Any]) -> Any:
        started = time.time()
        try:
            result = fn()
        except BaseException as exc:
            self._ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started,
                                ok=False, stateful=False, error=f"{type(exc).__name__}: {exc}")
            if isinstance(exc, BackendTimeout | BackendRefused | ConnectionError):
                raise ToolError(tool, str(exc)) from exc
            raise
        self._ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started, ok=True,
                            stateful=False, summary=summarize(tool, result))
        return result

    def _stateful(self, tool: str, kwargs: dict[str, Any], fn: Callable[[], Any]) -> Any:
        """Guard, run one motion, record the new state and the ledger entry (env_steps from the status step)."""
        started = time.time()
        step0 = int(getattr(self._backend.status(), "step", 0))
        dispatched = False
        try:
            self._guard()
            dispatched = True
            result = fn()
        except BaseException as exc:
            if dispatched:
                self._record_state()
            self._ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started,
                                ok=False, stateful=dispatched, env_steps=self._env_step() - step0,
                                error=f"{type(exc).__name__}: {exc}")
            if isinstance(exc, BackendTimeout):
                raise ToolError(tool, str(exc)) from exc
            raise
        self._record_state()
        self._ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started, ok=True,
                            stateful=True, env_steps=self._env_step() - step0, summary=summarize(tool, result))
        return result

    def _env_step(self) -> int:
        return int(getattr(self._backend.status(), "step", 0))

    def _latch(self, status: Any) -> None:
        if getattr(status, "terminated", False) or getattr(status, "success", False):
            self._latched["terminated"] = True
        if getattr(status, "truncated", False):
            self._latched["truncated"] = True

    def _flags(self) -> tuple[bool, bool]:
        self._latch(self._backend.status())
        return self._latched["terminated"], self._latched["truncated"]

    def _guard(self) -> None:
        """EpisodeFinished before dispatch when the host stopped the episode or it terminated / truncated."""
        reason = self._host.stop_reason
        if reason is not None:
            raise EpisodeFinished(reason)
        term, trunc = self._flags()
        if term:
            raise EpisodeFinished("terminated", "episode finished: terminated (the task succeeded); call finish")
        if trunc:
            raise EpisodeFinished("truncated", "episode finished: truncated (simulator step budget spent)")

    def _build_state(self, step: int) -> State:
        status = self._backend.status()
        self._latch(status)
        pose = self._backend.ee_pose()
        joints = self._backend.joints()
        fingers = [float(p) for n, p in zip(joints.names, joints.positions) if "finger" in n]
        qpos = [*fingers, 0.0, 0.0][:2]
        opening = abs(qpos[0]) + abs(qpos[1]) if fingers else float(self._backend.gripper_opening())
        return State(step=step, task=str(getattr(status, "task_language", "")), eef_pos=_t3(pose.pos),
                     eef_quat=tuple(float(v) for v in pose.quat_xyzw), gripper_qpos=(qpos[0], qpos[1]),
                     gripper_opening=float(opening), object_names=tuple(getattr(status, "object_names", ()) or ()),
                     terminated=self._latched["terminated"], truncated=self._latched["truncated"])

    def _current_state(self) -> State:
        state = self._host.latest_state
        if state is None:
            state = self._build_state(0)
            self._host.record_state(state)
        return state

    def _record_state(self) -> None:
        self._current_state()
        self._host.record_state(self._build_state(len(self._host.states)))

    def _state_at(self, step: int) -> State:
        latest = self._current_state()
        if step == -1:
            return latest
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= latest.step:
            raise ValueError(f"step must be -1 (latest) or 0..{latest.step}, got {step!r}")
        return self._host.states[step]

    def _check_camera(self, camera: str) -> None:
        if camera not in self.CAMERAS:
            raise ValueError(f"camera must be one of {', '.join(self.CAMERAS)}, got {camera!r}")

    def _check_view(self, camera: str, resolution: str) -> None:
        self._check_camera(camera)
        if resolution not in RESOLUTIONS:
            raise ValueError(f"resolution must be one of {', '.join(RESOLUTIONS)}, got {resolution!r}")

    @staticmethod
    def _pixel(point: Any, size: int, name: str) -> tuple[int, int]:
        if not (isinstance(point, list | tuple) and len(point) == 2
                and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in point)):
            raise ValueError(f"{name} must be (row, col) integer pixels of the {size}x{size} image, got {point!r}")
        r, c = int(point[0]), int(point[1])
        if not (0 <= r < size and 0 <= c < size):
            raise ValueError(f"{name} ({r}, {c}) is outside the {size}x{size} image")
        return r, c

    def _check_planar(self, target: np.ndarray) -> None:
        eef = np.asarray(self._current_state().eef_pos)
        planar = float(np.linalg.norm(target[:2] - eef[:2]))
        if planar > MAX_PLANAR_MOVE_M + 1e-6:
            raise ValueError(f"planar move of {planar:.3f} m exceeds {MAX_PLANAR_MOVE_M:.2f} m from the current "
                             f"gripper position {[round(float(v), 3) for v in eef]}; split into waypoints")

    # -- servo building blocks --------------------------------------------------------------------------------
    def _linear(self, delta: np.ndarray, step_clip: float, action_scale: float) -> np.ndarray:
        norm = float(np.linalg.norm(delta))
        if norm > step_clip:
            delta = delta * (step_clip / norm)
        return delta * (OSC_POS_SCALE_M / action_scale) / self._backend.control_period_s

    def _hold_orientation(self, r_ref: np.ndarray, r: np.ndarray, *, yaw_full: bool = False) -> np.ndarray:
        err = rotation_vector(r_ref @ r.T)
        omega = ORIENTATION_HOLD_GAIN * err
        if yaw_full:
            omega[2] = err[2]
        return omega / self._backend.control_period_s

    def _steer(self, r: np.ndarray, pitch_goal: float, yaw_goal: float, *, pitch_clip: float, yaw_clip: float,
               r_start: np.ndarray) -> np.ndarray:
        """Angular velocity: pitch about world x and yaw about world z toward their goals (clipped per step), the
        sideways tilt (about world y) held at its start value."""
        dt = self._backend.control_period_s
        wx = _clip(wrap_angle(pitch_goal - pitch_of(r)), pitch_clip)
        wz = _clip(wrap_angle(yaw_goal - yaw_of(r)), yaw_clip)
        wy = 0.0
        if abs(r[2, 2]) > 0.2 and abs(r_start[2, 2]) > 0.2:
            roll, roll0 = math.atan2(-r[0, 2], -r[2, 2]), math.atan2(-r_start[0, 2], -r_start[2, 2])
            wy = ORIENTATION_HOLD_GAIN * wrap_angle(roll0 - roll)
        return np.array([wx, wy, wz]) / dt

    def _check_stop(self) -> None:
        reason = self._host.stop_reason
        if reason is not None:
            raise EpisodeFinished(reason)

    def _servo_step(self, tool: str, linear: np.ndarray, angular: np.ndarray) -> EePose | None:
        """One twist; None when the driver refused because the episode ended (the loop then stops)."""
        self._check_stop()
        try:
            return self._backend.servo(np.asarray(linear, float), np.asarray(angular, float))
        except BackendRefused as exc:
            return self._refused(tool, exc)

    def _refused(self, tool: str, exc: BackendRefused) -> None:
        self._check_stop()
        if exc.reason in ("terminated", "truncated"):
            self._latched[exc.reason] = True
            return None
        if exc.reason == "cancelled":
            raise EpisodeFinished("cancelled", f"{tool}: {exc}") from exc
        raise ToolError(tool, f"driver refused: {exc}") from exc

    def _servo_loop(self, tool: str, twist: Callable[[EePose], tuple[np.ndarray, np.ndarray]],
                    arrived: Callable[[EePose], bool], max_steps: int, steps: int) -> tuple[EePose, int]:
        pose = self._backend.ee_pose()
        while steps < max_steps and not arrived(pose):
            linear, angular = twist(pose)
            new = self._servo_step(tool, linear, angular)
            if new is None:
                break
            pose, steps = new, steps + 1
            term, trunc = self._flags()
            if term or trunc:
                break
        return pose, steps

    def _hold_position(self, tool: str, steps: int, used: int,
                       stop: Callable[[EePose], bool] | None = None) -> tuple[EePose, int]:
        pose0 = self._backend.ee_pose()
        r0 = matrix(pose0.quat_xyzw)

        def twist(pose: EePose) -> tuple[np.ndarray, np.ndarray]:
            return self._linear(pose0.pos - pose.pos, 0.01, OSC_POS_SCALE_M), self._hold_orientation(
                r0, matrix(pose.quat_xyzw))

        return self._servo_loop(tool, twist, stop or (lambda _: False), steps, used)

    def _send_gripper(self, tool: str, g: float) -> int:
        """Send a GripperCommand goal for command ``g``; returns the control steps it used."""
        self._check_stop()
        step0 = self._env_step()
        try:
            outcome = self._backend.gripper((1.0 - g) / 2.0 * GRIPPER_OPEN_WIDTH_M)
        except BackendRefused as exc:
            # a goal the driver aborted because the episode ended mid-goal (e.g. release fired the task check)
            # still used the steps it ran: count them, so steps_used agrees with the ledger's env_steps
            self._refused(tool, exc)
            return max(0, self._env_step() - step0)
        self._gripper_cmd = g
        return int(outcome.steps)

    def _hold_gripper(self, tool: str, g: float) -> int:
        return self._send_gripper(tool, g) if g != self._gripper_cmd else 0

    def _rotate(self, tool: str, axis: str, target: float | None, delta: float | None, *, gripper: float,
                max_steps: int, tol: float, step_clip: float) -> Rotation:
        target, delta = _optional_angle(f"target_{axis}", target), _optional_angle(f"delta_{axis}", delta)
        if (target is None) == (delta is None):
            raise ValueError(f"{tool} needs exactly one of target_{axis} or delta_{axis} (rad)")
        g = _gripper_value(gripper)
        max_steps = _positive("max_steps", max_steps, integer=True)
        tol, step_clip = _positive("tol", tol), _positive("step_clip", step_clip)
        kwargs = {f"target_{axis}": target, f"delta_{axis}": delta, "gripper": g, "max_steps": max_steps,
                  "tol": tol, "step_clip": step_clip}
        measure = yaw_of if axis == "yaw" else pitch_of

        def run() -> Rotation:
            steps = self._hold_gripper(tool, g)
            pose0 = self._backend.ee_pose()
            r0 = matrix(pose0.quat_xyzw)
            start = measure(r0)
            goal = wrap_angle(target if target is not None else start + delta)
            pitch_goal = goal if axis == "pitch" else pitch_of(r0)
            yaw_goal = goal if axis == "yaw" else yaw_of(r0)
            clips = (step_clip, 0.10) if axis == "pitch" else (0.10, step_clip)

            def twist(pose: EePose) -> tuple[np.ndarray, np.ndarray]:
                return (self._linear(pose0.pos - pose.pos, 0.01, OSC_POS_SCALE_M),
                        self._steer(matrix(pose.quat_xyzw), pitch_goal, yaw_goal, pitch_clip=clips[0],
                                    yaw_clip=clips[1], r_start=r0))

            def arrived(pose: EePose) -> bool:
                return abs(wrap_angle(goal - measure(matrix(pose.quat_xyzw)))) <= tol

            pose, steps = self._servo_loop(tool, twist, arrived, max_steps, steps)
            final = measure(matrix(pose.quat_xyzw))
            err = wrap_angle(goal - final)
            term, trunc = self._flags()
            return Rotation(start=start, target=goal, final=final, final_err=err, reached=abs(err) <= tol,
                            steps_used=steps, terminated=term, truncated=trunc)

        return self._stateful(tool, kwargs, run)

    # -- segment ----------------------------------------------------------------------------------------------
    def _segment(self, prompt: str | None, camera: str, pixel: tuple[int, int] | None, min_score: float,
                 step: int) -> Segment:
        store = self._host.artifacts
        res = self.SEGMENT_RESOLUTION
        color = store.color("segment", camera, res, step)
        world = store.world("segment", camera, res, step)
        seg = store.segmentation("segment", camera, res, step) if self._segmenter.needs_segmentation else None
        step = store.resolve_step(step)
        answer = self._segmenter.segment(SegmentRequest(camera=camera, resolution=res, color=color, prompt=prompt,
                                                        point=pixel, min_score=min_score, world=world,
                                                        segmentation=seg))
        if not answer.found or answer.mask is None:
            return Segment(found=False, world_xyz=None, score=answer.score, box=None, camera=camera, step=step,
                           overlay_artifact=None, error=answer.error or "not found")
        stats = perception.surface_stats(world, answer.mask)
        self._segment_count += 1
        name = f"segment_{self._segment_count:03d}_{camera}.png"
        store.put(step, name, encode_png(_overlay(color, answer.mask)))
        extras: dict[str, Any] = {"label": answer.label, "score": answer.score, "n_pixels": 0, "instances": []}
        if stats is not None:
            extras.update(median_xyz=list(stats.median), box_center_xyz=list(stats.box_center),
                          xyz_min=list(stats.xyz_min), xyz_max=list(stats.xyz_max), top_z=stats.top_z,
                          n_pixels=stats.n_pixels)
        for cand in answer.instances:
            cs = perception.surface_stats(world, cand.mask)
            extras["instances"].append({"label": cand.label, "score": cand.score,
                                        "world_xyz": None if cs is None else list(cs.median),
                                        "box_center_xyz": None if cs is None else list(cs.box_center)})
        store.put(step, name.replace(".png", ".json"), json.dumps(extras).encode())
        return Segment(found=True, world_xyz=None if stats is None else stats.median, score=answer.score,
                       box=perception.mask_box(answer.mask), camera=camera, step=step, overlay_artifact=name,
                       error=None if stats is not None else "no valid depth under the mask")


def _overlay(color: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The image with the mask tinted green and the rest dimmed."""
    out = (color.astype(np.float32) * 0.6).astype(np.uint8)
    tint = np.array([40, 220, 60], dtype=np.float32)
    out[mask] = (color[mask].astype(np.float32) * 0.45 + tint * 0.55).astype(np.uint8)
    return out


class _LiberoRobotWithVla(LiberoRobot):
    """A simulated Franka Panda arm in the LIBERO benchmark, driven through ROS 2, with a frozen Pi0.5 VLA."""

    __doc__ = LiberoRobot.__doc__ + """
    - Frozen VLA skills (Pi0.5): ``pi0_pick`` grasps and lifts, ``pi0_doubled`` does other contact (knobs,
      buttons, drawers, doors, pushes). One chunk = 5 simulator steps. Pre-position 15-20 cm above the target
      and give a short prompt naming the object.
    """

    @_ledger_refusals("pi0_pick")
    def pi0_pick(self, prompt: str, *, max_chunks: int = 24, lift_thresh: float = 0.05,
                 gripper_closed_thresh: float = 0.06, gripper_open_thresh: float = 0.0,
                 descent_thresh: float = 0.10) -> Pick:
        """Closed-loop grasp by the Pi0.5 VLA for up to ``max_chunks`` action chunks (5 steps each). Stops early
        once the gripper descended by ``descent_thresh`` m, closed with an opening in
        [``gripper_open_thresh``, ``gripper_closed_thresh``) m and rose by ``lift_thresh`` m: ``success`` is that
        heuristic (a hint; verify with ``state()`` and images). Pre-position 15-20 cm above the object, use a
        short prompt ("pick up the black bowl") and ~20 chunks; ``lift_thresh=0.08`` for slippery tall bottles;
        ``lift_thresh=999, gripper_closed_thresh=0`` turns it into a generic contact skill."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"prompt must be a non-empty string, got {prompt!r}")
        max_chunks = _positive("max_chunks", max_chunks, integer=True)
        for name, value in (("lift_thresh", lift_thresh), ("gripper_closed_thresh", gripper_closed_thresh),
                            ("gripper_open_thresh", gripper_open_thresh), ("descent_thresh", descent_thresh)):
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number (m), got {value!r}")
        kwargs = {"prompt": prompt, "max_chunks": max_chunks, "lift_thresh": lift_thresh,
                  "gripper_closed_thresh": gripper_closed_thresh, "gripper_open_thresh": gripper_open_thresh,
                  "descent_thresh": descent_thresh}

        def run() -> Pick:
            monitor = vla.PickMonitor(lift_thresh, gripper_closed_thresh, gripper_open_thresh, descent_thresh)
            pose = self._backend.ee_pose()
            monitor.update(float(pose.pos[2]), float(self._backend.gripper_opening()))
            picked, chunks, steps = False, 0, 0
            while chunks < max_chunks and not picked:
                actions = self._pi0_chunk("pi0_pick", prompt)
                chunks += 1
                for action in actions:
                    new, used = self._pi0_action("pi0_pick", action)
                    steps += used
                    if new is None:
                        break
                    if monitor.update(float(new.pos[2]), float(self._backend.gripper_opening())):
                        picked = True
                        break
                if any(self._flags()) or new is None:
                    break
            term, trunc = self._flags()
            final_open = float(self._backend.gripper_opening())
            return Pick(success=picked, chunks_used=chunks, max_chunks=max_chunks, peak_lift_m=monitor.peak_lift_m,
                        min_gripper_opening=min(monitor.min_opening, final_open), final_gripper_opening=final_open,
                        terminated=term, truncated=trunc,
                        diagnostics={"descended": monitor.descended, "z_start": monitor.z_start,
                                     "z_min": monitor.z_min, "steps": steps})

        return self._stateful("pi0_pick", kwargs, run)

    @_ledger_refusals("pi0_doubled")
    def pi0_doubled(self, prompt: str, *, max_chunks: int = 20) -> Contact:
        """Non-pick contact skill by the Pi0.5 VLA (turn a knob, press a button, open/close a drawer or door,
        short pushes) for up to ``max_chunks`` chunks (5 steps each), stopping when the task predicate fires.
        ``success`` mirrors the task predicate only. Pre-position near the part and give a short prompt."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"prompt must be a non-empty string, got {prompt!r}")
        max_chunks = _positive("max_chunks", max_chunks, integer=True)

        def run() -> Contact:
            chunks = 0
            while chunks < max_chunks:
                actions = self._pi0_chunk("pi0_doubled", prompt)
                chunks += 1
                new = None
                for action in actions:
                    new, _ = self._pi0_action("pi0_doubled", action)
                    if new is None or any(self._flags()):
                        break
                if new is None or any(self._flags()):
                    break
            term, trunc = self._flags()
            success = bool(getattr(self._backend.status(), "success", False))
            return Contact(success=success, chunks_used=chunks, max_chunks=max_chunks, terminated=term,
                           truncated=trunc)

        return self._stateful("pi0_doubled", {"prompt": prompt, "max_chunks": max_chunks}, run)

    def _pi0_chunk(self, tool: str, prompt: str) -> np.ndarray:
        self._check_stop()
        agent = self._backend.capture("agentview", "low").color
        wrist = self._backend.capture("wrist", "low").color
        pose = self._backend.ee_pose()
        joints = self._backend.joints()
        qpos = ([float(p) for n, p in zip(joints.names, joints.positions) if "finger" in n] + [0.0, 0.0])[:2]
        obs = vla.libero_observation(agent, wrist, pose.pos, pose.quat_xyzw, qpos, prompt=prompt)
        try:
            return vla.chunk_actions(self._vla.infer(obs))
        except (ValueError, ConnectionError, OSError, RuntimeError) as exc:
            raise ToolError(tool, f"VLA policy server: {exc}") from exc

    def _pi0_action(self, tool: str, action: np.ndarray) -> tuple[EePose | None, int]:
        """Execute one 7-D OSC action: gripper goal when its sign changes, then one twist step."""
        used = 0
        g = 1.0 if action[6] > 0 else -1.0
        if g != self._gripper_cmd:
            used += self._send_gripper(tool, g)
        dt = self._backend.control_period_s
        new = self._servo_step(tool, action[:3] * vla.OSC_POS_SCALE_M / dt, action[3:6] * vla.OSC_ROT_SCALE_RAD / dt)
        return new, used + (new is not None)


_LiberoRobotWithVla.__name__ = "LiberoRobot"
_LiberoRobotWithVla.__qualname__ = "LiberoRobot"


def robot_class(primitives: str = "full") -> type[LiberoRobot]:
    """The class whose members make up the reference for a primitive set ("full" includes the VLA skills)."""
    if primitives not in PRIMITIVE_SETS:
        raise ValueError(f"primitives must be one of {', '.join(PRIMITIVE_SETS)}, got {primitives!r}")
    return _LiberoRobotWithVla if primitives == "full" else LiberoRobot
