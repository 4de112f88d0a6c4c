"""``LiberoRobot``: the PyRUA-Lean ``robo`` API for the LIBERO Franka arm, on a ``RobotBackend``.

This file holds the model-facing verbs: the class docstring and the public members' docstrings ARE the API
reference the model reads (the prompt is generated from the live class with ``inspect``). Each verb checks its
arguments (``arguments``), then runs its body through ``CallRunner`` (guard, ledger, recorded states) on the
Cartesian servo (``servo``), the perception helpers (``observe``) or the VLA loops (``vla_skills``).
Host-facing things live on :class:`~pyrua_ros.robo.host.RobotHost`.

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

from typing import Any, ClassVar

import numpy as np

from pyrua_ros.robo import arguments as check
from pyrua_ros.robo import observe, vla
from pyrua_ros.robo.arguments import MAX_PLANAR_MOVE_M, RESOLUTIONS
from pyrua_ros.robo.backend import RobotBackend
from pyrua_ros.robo.calls import CallRunner, ledger_refusals
from pyrua_ros.robo.host import ArtifactNames, RobotHost
from pyrua_ros.robo.ledger import Ledger
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
from pyrua_ros.robo.segmenters import GroundTruthSegmenter, Segmenter
from pyrua_ros.robo.servo import CartesianServo
from pyrua_ros.robo.vla_skills import VlaSkills

__all__ = ["MAX_PLANAR_MOVE_M", "PI0_CHUNK_STEPS", "PRIMITIVE_SETS", "RESOLUTIONS", "LiberoRobot", "artifact_names",
           "robot_class"]

PI0_CHUNK_STEPS = vla.PI0_CHUNK_STEPS
PRIMITIVE_SETS = ("full", "no-vla")


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
        self._calls = CallRunner(backend, self._host)
        self._host.attach(self, self._calls.current_state)
        self._ledger = self._host.ledger
        self._primitives = "full" if isinstance(self, _LiberoRobotWithVla) else "no-vla"
        self._segmenter = segmenter if segmenter is not None else GroundTruthSegmenter()
        self._servo = CartesianServo(backend, self._calls)
        self._vla = VlaSkills(self._servo, self._calls, vla) if vla is not None else None
        self._segment_count = 0

    # -- no-VLA shadow ------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in LiberoRobot.VLA_PRIMITIVES:
            def unavailable(*args: Any, **kwargs: Any) -> Any:
                self._calls.unavailable(name, args, kwargs,
                                        f"{name} is not available in this run (no-VLA primitive set)")
            return unavailable
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- observation ----------------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        """The benchmark task instruction (authoritative), e.g. "put the black bowl on the plate"."""
        return self._calls.current_state().task

    @property
    def done(self) -> bool:
        """True once the task predicate has fired (sticky; checked on every access). A spent step budget shows
        as ``state().truncated`` instead."""
        return self._calls.done

    @ledger_refusals("view_env_state")
    def state(self, step: int = -1) -> State:
        """Robot state at a recorded step: -1 = latest, 0 = initial scene (a new step is recorded after every
        motion call). Gives eef position/orientation, gripper opening, object names, terminated/truncated."""
        step = check.as_int(step)
        return self._calls.readonly("view_env_state", {"step": step}, lambda: self._calls.state_at(step))

    @ledger_refusals("image")
    def image(self, camera: str = "agentview", *, resolution: str = "high", step: int = -1) -> np.ndarray:
        """RGB image (H, W, 3) uint8 of ``camera`` at ``step`` (-1 = latest). ``high`` = 1024x1024, ``low`` =
        256x256; pixel (row, col), row 0 at the top, col 0 at the left."""
        check.view(camera, resolution, self.CAMERAS)
        step = check.as_int(step)
        return self._calls.readonly("image", {"camera": camera, "resolution": resolution, "step": step},
                                    lambda: self._host.artifacts.color("image", camera, resolution, step).copy())

    @ledger_refusals("world_map")
    def world_map(self, camera: str = "agentview", *, resolution: str = "high", step: int = -1) -> np.ndarray:
        """World [x, y, z] in metres of the surface seen at every pixel, float (H, W, 3), same pixels as
        ``image``; zeros where there is no valid depth (sky, far background)."""
        check.view(camera, resolution, self.CAMERAS)
        step = check.as_int(step)
        return self._calls.readonly("world_map", {"camera": camera, "resolution": resolution, "step": step},
                                    lambda: self._host.artifacts.world("world_map", camera, resolution, step).copy())

    @ledger_refusals("show")
    def show(self, camera: str = "agentview") -> None:
        """Attach the latest image of ``camera`` (1024x1024) to this turn's result (once per camera per turn).
        Only needed when images are attached on demand."""
        check.camera(camera, self.CAMERAS)
        self._calls.readonly("show", {"camera": camera}, lambda: self._host.show_queue.request(camera))

    @ledger_refusals("artifact")
    def artifact(self, name: str, *, step: int = -1) -> bytes:
        """Raw bytes of a recorded artifact at ``step``: images ``agentview_high.png``, ``agentview.png``,
        ``wrist_high.png``, ``wrist.png``; world maps ``agentview_world_high.npz`` (array ``array``, (H, W, 3) m);
        depth ``agentview_depth.npz`` (1024x1024 m, ``*_depth_low.npz`` for 256); a segment's ``overlay_artifact``
        and its ``.json`` twin (see ``segment``)."""
        name, step = str(name), check.as_int(step)
        return self._calls.readonly("artifact", {"name": name, "step": step},
                                    lambda: self._host.artifacts.get("artifact", name, step=step))

    @ledger_refusals("view_camera_meta")
    def camera_meta(self, camera: str = "agentview", *, step: int = -1) -> dict:
        """Camera geometry at ``step`` for the high-res image: ``K`` (3x3 pixel intrinsics), ``T_world_optical``
        (4x4 pose of the optical frame in the world; x right, y down, z forward), ``position`` (m),
        ``image_size`` [h, w], ``resolution``, ``camera``, ``step``. Use it to project world points into pixels."""
        step = check.as_int(step)
        return self._calls.readonly("view_camera_meta", {"camera": camera, "step": step},
                                    lambda: observe.camera_meta(self._host.artifacts, camera, step, self.CAMERAS))

    # -- perception -----------------------------------------------------------------------------------------
    @ledger_refusals("segment")
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
        step, score = check.as_int(step), check.as_float(min_score)
        kwargs: dict[str, Any] = {"camera": camera, "step": step, "min_score": score}
        if prompt is not None:
            prompt = kwargs["prompt"] = str(prompt)
        pixel = None
        if point is not None:
            pixel = (check.as_int(point[0]), check.as_int(point[1]))
            kwargs["point"] = list(pixel)

        def run() -> Segment:
            self._segment_count += 1
            return observe.segment(self._host.artifacts, self._segmenter, prompt=prompt, camera=camera,
                                   resolution=self.SEGMENT_RESOLUTION, pixel=pixel, min_score=score, step=step,
                                   index=self._segment_count, cameras=self.CAMERAS)

        return self._calls.readonly("segment", kwargs, run)

    @ledger_refusals("back_project")
    def back_project(self, row: int, col: int, *, camera: str = "agentview", resolution: str = "high",
                     step: int = -1) -> BackProjection:
        """World point (m) of the surface seen at pixel (row, col) of ``camera``'s image at ``resolution``
        (row 0 top). ToolError when the pixel is outside the image or has no valid depth."""
        row, col, step = check.as_int(row), check.as_int(col), check.as_int(step)
        return self._calls.readonly(
            "back_project", {"row": row, "col": col, "camera": camera, "resolution": resolution, "step": step},
            lambda: observe.back_project(self._host.artifacts, row, col, camera=camera, resolution=resolution,
                                         step=step, cameras=self.CAMERAS))

    @ledger_refusals("back_project")
    def region_center(self, row_range: tuple[int, int], col_range: tuple[int, int], *, camera: str = "agentview",
                      resolution: str = "high", z_min: float | None = None, z_max: float | None = None,
                      step: int = -1) -> RegionCenter:
        """Centre of the surface inside a pixel window: rows ``row_range = (start, stop)``, cols ``col_range``
        (stop excluded, clipped to the image), keeping only world points with z in [z_min, z_max] m when given
        (e.g. ``z_min = table_z + 0.01`` drops the table). ``center_xyz`` = midpoint of the points' world x/y
        extent with their median z (less biased by the visible rim than the median); ``median_xyz`` too.
        ToolError for an empty window or fewer than 3 valid pixels."""
        rows = (check.as_int(row_range[0]), check.as_int(row_range[1]))
        cols = (check.as_int(col_range[0]), check.as_int(col_range[1]))
        step, z_min, z_max = check.as_int(step), check.optional_float(z_min), check.optional_float(z_max)
        kwargs: dict[str, Any] = {"row_range": list(rows), "col_range": list(cols), "camera": camera,
                                  "resolution": resolution, "step": step}
        kwargs.update({k: v for k, v in (("z_min", z_min), ("z_max", z_max)) if v is not None})
        return self._calls.readonly(
            "back_project", kwargs,
            lambda: observe.region_center(self._host.artifacts, rows, cols, camera=camera, resolution=resolution,
                                          z_min=z_min, z_max=z_max, step=step, cameras=self.CAMERAS))

    # -- scripted motion ------------------------------------------------------------------------------------
    @ledger_refusals("move_to")
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
        target = check.xyz("xyz", xyz)
        check.planar_move(target, self._calls.current_state().eef_pos)
        g = check.gripper(gripper)
        tol, step_clip, max_steps = check.as_float(tol), check.as_float(step_clip), check.as_int(max_steps)
        action_scale = check.as_float(action_scale)
        kwargs: dict[str, Any] = {"xyz": target.tolist(), "gripper": g, "tol": tol, "step_clip": step_clip,
                                  "max_steps": max_steps, "action_scale": action_scale}
        if target_yaw is not None:
            target_yaw = kwargs["target_yaw"] = check.as_float(target_yaw)
            yaw_step_clip = kwargs["yaw_step_clip"] = check.as_float(yaw_step_clip)
        return self._calls.stateful("move_to", kwargs, lambda: self._servo.move_to(
            target, g, tol=tol, step_clip=step_clip, max_steps=max_steps, target_yaw=target_yaw,
            yaw_step_clip=yaw_step_clip, action_scale=action_scale))

    @ledger_refusals("move_pose")
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
        target = check.xyz("xyz", xyz)
        check.planar_move(target, self._calls.current_state().eef_pos)
        g = check.gripper(gripper)
        step_clip, pitch_step = check.as_float(step_clip), check.as_float(pitch_step)
        yaw_step = check.as_float(yaw_step)
        tol, ori_tol, max_steps = check.as_float(tol), check.as_float(ori_tol), check.as_int(max_steps)
        action_scale = check.as_float(action_scale)
        target_pitch, target_yaw = check.optional_float(target_pitch), check.optional_float(target_yaw)
        kwargs: dict[str, Any] = {"xyz": target.tolist(), "gripper": g, "step_clip": step_clip,
                                  "pitch_step": pitch_step, "yaw_step": yaw_step, "tol": tol, "ori_tol": ori_tol,
                                  "max_steps": max_steps, "action_scale": action_scale}
        kwargs.update({k: v for k, v in (("target_pitch", target_pitch), ("target_yaw", target_yaw)) if v is not None})
        return self._calls.stateful("move_pose", kwargs, lambda: self._servo.move_pose(
            target, g, target_pitch=target_pitch, target_yaw=target_yaw, step_clip=step_clip, pitch_step=pitch_step,
            yaw_step=yaw_step, tol=tol, ori_tol=ori_tol, max_steps=max_steps, action_scale=action_scale))

    @ledger_refusals("rotate_wrist")
    def rotate_wrist(self, *, target_yaw: float | None = None, delta_yaw: float | None = None, gripper: float = 1.0,
                     max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Turn the gripper about world z to ``target_yaw`` or by ``delta_yaw`` (rad; give exactly one), keeping
        its position. ``gripper`` defaults to +1 (keep holding). At most ``step_clip`` rad per step; ``reached``
        when abs(final_err) <= ``tol`` rad. Yaw is ``State.eef_yaw``."""
        return self._rotate("rotate_wrist", "yaw", target_yaw, delta_yaw, gripper=gripper, max_steps=max_steps, tol=tol,
                            step_clip=step_clip)

    @ledger_refusals("rotate_pitch")
    def rotate_pitch(self, *, target_pitch: float | None = None, delta_pitch: float | None = None,
                     gripper: float = 1.0, max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Tilt the gripper about world x to ``target_pitch`` or by ``delta_pitch`` (rad; give exactly one),
        keeping position and yaw. Pitch 0 = pointing straight down, +pi/2 points along world +y, -pi/2 along -y.
        ``gripper`` defaults to +1 (keep holding); at most ``step_clip`` rad per step; ``reached`` when
        abs(final_err) <= ``tol``. Pitch is ``State.eef_pitch``."""
        return self._rotate("rotate_pitch", "pitch", target_pitch, delta_pitch, gripper=gripper, max_steps=max_steps,
                            tol=tol, step_clip=step_clip)

    def _rotate(self, tool: str, axis: str, target: Any, delta: Any, *, gripper: Any, max_steps: Any, tol: Any,
                step_clip: Any) -> Rotation:
        target, delta = check.one_of(tool, axis, target, delta)
        g = check.gripper(gripper)
        max_steps, tol, step_clip = check.as_int(max_steps), check.as_float(tol), check.as_float(step_clip)
        kwargs: dict[str, Any] = {"gripper": g, "max_steps": max_steps, "tol": tol, "step_clip": step_clip}
        if target is not None:
            kwargs[f"target_{axis}"] = target
        else:
            kwargs[f"delta_{axis}"] = delta
        return self._calls.stateful(tool, kwargs, lambda: self._servo.rotate(
            tool, axis, target, delta, g, max_steps=max_steps, tol=tol, step_clip=step_clip))

    @ledger_refusals("set_gripper")
    def set_gripper(self, gripper: float, steps: int = 5) -> Gripper:
        """Hold the arm still and drive the gripper to ``gripper`` (-1 open .. +1 closed) for ``steps`` simulator
        steps (more if the fingers are still moving). After a grasp use ``set_gripper(+1, steps=8)`` (12 for a
        bowl rim); use <= 5 for soft cans. The value is then held by later motion calls that pass it."""
        g = check.gripper(gripper)
        steps = check.as_int(steps)
        return self._calls.stateful("set_gripper", {"gripper": g, "steps": steps},
                                    lambda: self._servo.set_gripper(g, steps))

    @ledger_refusals("release")
    def release(self, max_steps: int = 20) -> Release:
        """Open the gripper in place and hold for up to ``max_steps`` simulator steps; returns as soon as the task
        predicate fires (success). Lower the object to just above its target first (e.g. plate z + 0.05)."""
        max_steps = check.as_int(max_steps)
        return self._calls.stateful("release", {"max_steps": max_steps}, lambda: self._servo.release(max_steps))


class _LiberoRobotWithVla(LiberoRobot):
    """A simulated Franka Panda arm in the LIBERO benchmark, driven through ROS 2, with a frozen Pi0.5 VLA."""

    __doc__ = LiberoRobot.__doc__ + """
    - Frozen VLA skills (Pi0.5): ``pi0_pick`` grasps and lifts, ``pi0_doubled`` does other contact (knobs,
      buttons, drawers, doors, pushes). One chunk = 5 simulator steps. Pre-position 15-20 cm above the target
      and give a short prompt naming the object.
    """

    @ledger_refusals("pi0_pick")
    def pi0_pick(self, prompt: str, *, max_chunks: int = 24, lift_thresh: float = 0.05,
                 gripper_closed_thresh: float = 0.06, gripper_open_thresh: float = 0.0,
                 descent_thresh: float = 0.10) -> Pick:
        """Closed-loop grasp by the Pi0.5 VLA for up to ``max_chunks`` action chunks (5 steps each). Stops early
        once the gripper descended by ``descent_thresh`` m, closed with an opening in
        [``gripper_open_thresh``, ``gripper_closed_thresh``) m and rose by ``lift_thresh`` m: ``success`` is that
        heuristic (a hint; verify with ``state()`` and images). Pre-position 15-20 cm above the object, use a
        short prompt ("pick up the black bowl") and ~20 chunks; ``lift_thresh=0.08`` for slippery tall bottles;
        ``lift_thresh=999, gripper_closed_thresh=0`` turns it into a generic contact skill."""
        prompt, max_chunks = str(prompt), check.as_int(max_chunks)
        lift_thresh, descent_thresh = check.as_float(lift_thresh), check.as_float(descent_thresh)
        gripper_closed_thresh = check.as_float(gripper_closed_thresh)
        gripper_open_thresh = check.as_float(gripper_open_thresh)
        kwargs = {"prompt": prompt, "max_chunks": max_chunks, "lift_thresh": lift_thresh,
                  "gripper_closed_thresh": gripper_closed_thresh, "gripper_open_thresh": gripper_open_thresh,
                  "descent_thresh": descent_thresh}
        return self._calls.stateful("pi0_pick", kwargs, lambda: self._vla.pick(
            prompt, max_chunks=max_chunks, lift_thresh=lift_thresh, gripper_closed_thresh=gripper_closed_thresh,
            gripper_open_thresh=gripper_open_thresh, descent_thresh=descent_thresh))

    @ledger_refusals("pi0_doubled")
    def pi0_doubled(self, prompt: str, *, max_chunks: int = 20) -> Contact:
        """Non-pick contact skill by the Pi0.5 VLA (turn a knob, press a button, open/close a drawer or door,
        short pushes) for up to ``max_chunks`` chunks (5 steps each), stopping when the task predicate fires.
        ``success`` mirrors the task predicate only. Pre-position near the part and give a short prompt."""
        prompt, max_chunks = str(prompt), check.as_int(max_chunks)
        return self._calls.stateful("pi0_doubled", {"prompt": prompt, "max_chunks": max_chunks},
                                    lambda: self._vla.contact(prompt, max_chunks=max_chunks))


_LiberoRobotWithVla.__name__ = "LiberoRobot"
_LiberoRobotWithVla.__qualname__ = "LiberoRobot"


def robot_class(primitives: str = "full") -> type[LiberoRobot]:
    """The class whose members make up the reference for a primitive set ("full" includes the VLA skills)."""
    if primitives not in PRIMITIVE_SETS:
        raise ValueError(f"primitives must be one of {', '.join(PRIMITIVE_SETS)}, got {primitives!r}")
    return _LiberoRobotWithVla if primitives == "full" else LiberoRobot
