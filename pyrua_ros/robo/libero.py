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

from pyrua_ros.robo import arguments as check
from pyrua_ros.robo import observe, vla
from pyrua_ros.robo.arguments import MAX_PLANAR_MOVE_M, RESOLUTIONS
from pyrua_ros.robo.artifacts import ArtifactNames
from pyrua_ros.robo.backend import RobotBackend
from pyrua_ros.robo.calls import CallRunner, ledger_refusals
from pyrua_ros.robo.host import RobotHost
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
    """A LIBERO tabletop Franka arm with a two-finger gripper, driven through ROS 2.

    World frame: x/y across the table, z up; metres and radians. The arm starts at a home
    pose above the table, gripper open and pointing down. Motion calls block until the
    motion ends and return a typed result saying what actually happened; nothing is queued.

    Gripper commands are floats: ``OPEN`` (-1) opens, ``CLOSE`` (+1) closes and keeps
    holding. Every motion call takes a ``gripper`` value that is held for the whole
    motion, so carrying an object with the default ``gripper=-1`` drops it.

    Two cameras: a fixed ``agentview`` (the global layout) and a ``wrist`` camera (close
    range). Object poses are never given; get world coordinates from the recorded images
    with ``segment`` / ``back_project``.
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
        """The benchmark's task instruction (authoritative), e.g. ``"put the bowl on the plate"``."""
        return self._calls.current_state().task

    @property
    def done(self) -> bool:
        """True once the benchmark's success predicate has fired (sticky)."""
        return self._calls.done

    @ledger_refusals("view_env_state")
    def state(self, step: int = -1) -> State:
        """Read the robot state recorded at a step.

        Args:
            step: ``-1`` is the latest, ``0`` the initial scene; every motion call records
                a new step.
        Returns:
            State: gripper position and orientation, finger opening, object names and the
            episode flags.
        """
        step = check.as_int(step)
        return self._calls.readonly("view_env_state", {"step": step}, lambda: self._calls.state_at(step))

    @ledger_refusals("image")
    def image(self, camera: str = "agentview", *, resolution: str = "high", step: int = -1) -> Any:
        """Load a recorded camera image as a ``numpy`` uint8 array (H, W, 3), RGB.

        Args:
            camera: ``"agentview"`` (fixed global view: which object is where) or ``"wrist"``
                (on the gripper: close-range geometry).
            resolution: ``"high"`` (1024x1024) or ``"low"`` (256x256). Pixels are (row, col),
                row 0 at the top, col 0 at the left; give ``back_project`` the same resolution.
            step: recorded step, ``-1`` = latest.
        """
        check.view(camera, resolution, self.CAMERAS)
        step = check.as_int(step)
        return self._calls.readonly("image", {"camera": camera, "resolution": resolution, "step": step},
                                    lambda: self._host.artifacts.color("image", camera, resolution, step).copy())

    @ledger_refusals("world_map")
    def world_map(self, camera: str = "agentview", *, resolution: str = "high", step: int = -1) -> Any:
        """Load the world coordinates seen at every pixel of a recorded image.

        Returns a ``numpy`` float array (H, W, 3): ``world_map[row, col]`` is the [x, y, z] of
        the surface seen there (zeros where depth is invalid). ``back_project`` reads the same
        map; load it to reason about many pixels at once.
        """
        check.view(camera, resolution, self.CAMERAS)
        step = check.as_int(step)
        return self._calls.readonly("world_map", {"camera": camera, "resolution": resolution, "step": step},
                                    lambda: self._host.artifacts.world("world_map", camera, resolution, step).copy())

    @ledger_refusals("show")
    def show(self, camera: str = "agentview") -> None:
        """Attach the current image of ``camera`` to this turn's feedback.

        Images are not sent back by themselves: call ``show("agentview")`` or ``show("wrist")``
        when you need to see the scene before writing the next turn. Each image costs tokens;
        look when a decision depends on it.
        """
        check.camera(camera, self.CAMERAS)
        self._calls.readonly("show", {"camera": camera}, lambda: self._host.show_queue.request(camera))

    @ledger_refusals("artifact")
    def artifact(self, name: str, *, step: int = -1) -> bytes:
        """Return the raw bytes of a recorded artifact (advanced).

        Names include ``agentview_high.png``, ``wrist_high.png``, ``agentview_depth.npz``, a
        segment's ``overlay_artifact`` and its ``.json`` twin (surface statistics).
        """
        name, step = str(name), check.as_int(step)
        return self._calls.readonly("artifact", {"name": name, "step": step},
                                    lambda: self._host.artifacts.get("artifact", name, step=step))

    @ledger_refusals("view_camera_meta")
    def camera_meta(self, camera: str = "agentview", *, step: int = -1) -> dict[str, Any]:
        """Return the calibration of ``camera`` (high-res image) as a dict.

        ``intrinsic_K`` (3x3 pixel intrinsics), ``extrinsic_cam2world`` (4x4 camera pose in the
        world: x right, y down, z along the view), ``depth_near`` / ``depth_far`` (m), ``height``
        and ``width``; ``K`` and ``T_world_optical`` repeat the two matrices.
        """
        step = check.as_int(step)
        return self._calls.readonly("view_camera_meta", {"camera": camera, "step": step},
                                    lambda: observe.camera_meta(self._host.artifacts, camera, step, self.CAMERAS))

    # -- perception -----------------------------------------------------------------------------------------
    @ledger_refusals("segment")
    def segment(self, prompt: str | None = None, *, camera: str = "agentview", point: tuple[int, int] | None = None,
                min_score: float = 0.2, step: int = -1) -> Segment:
        """Find an object on a recorded image and return its world position.

        Give ``prompt`` (a short visual description) or ``point`` (a pixel (row, col) on the
        object in the high-resolution image). The mask is projected through the world map:
        ``world_xyz`` is the median of the object's visible *surface*, so use its x/y as the
        target and take z from the object's resting height. Parts are found by name too:
        ``"stove burner"``, ``"top drawer handle"``, ``"microwave door"``.

        Args:
            prompt: colour + shape + relation, e.g. ``"the black bowl on the stove"``. Brand or
                internal names (``"akita"``, ``"alphabet soup"``) score ~0.05, colour + shape ~0.7.
            camera: ``"agentview"`` to identify, ``"wrist"`` to refine once the gripper is
                15-20 cm above the target.
            point: instead of ``prompt``, a pixel on the object.
            min_score: masks scoring below this are rejected.
            step: recorded step whose image is used (``-1`` = latest).
        Returns:
            Segment; check ``found`` before using ``world_xyz`` (nothing found is a result).
        """
        step, score = check.as_int(step), check.as_float(min_score)
        kwargs: dict[str, Any] = {"camera": camera, "step": step, "min_score": score}
        if prompt is not None:
            prompt = kwargs["prompt"] = str(prompt)
        pixel = None
        if point is not None:
            pixel = (check.as_int(point[0]), check.as_int(point[1]))
            kwargs["point"] = list(pixel)

        notes: list[str] = []   # the ground truth behind the answer: for the ledger (operators), not the model

        def run() -> Segment:
            self._segment_count += 1
            return observe.segment(self._host.artifacts, self._segmenter, prompt=prompt, camera=camera,
                                   resolution=self.SEGMENT_RESOLUTION, pixel=pixel, min_score=score, step=step,
                                   index=self._segment_count, cameras=self.CAMERAS, notes=notes)

        return self._calls.readonly("segment", kwargs, run, note=lambda: "; ".join(notes) or None)

    @ledger_refusals("back_project")
    def back_project(self, row: int, col: int, *, camera: str = "agentview", resolution: str = "high",
                     step: int = -1) -> BackProjection:
        """Return the world [x, y, z] of the surface seen at pixel ``(row, col)``.

        The pixel must come from the same camera and resolution (``image(camera,
        resolution=...)``). Sample several pixels well inside an object's top surface and take
        the median; pixels on rims, edges or the gap to the table hit the background.

        Raises:
            ToolError: pixel out of bounds, or no valid depth at that pixel.
        """
        row, col, step = check.as_int(row), check.as_int(col), check.as_int(step)
        return self._calls.readonly(
            "back_project", {"row": row, "col": col, "camera": camera, "resolution": resolution, "step": step},
            lambda: observe.back_project(self._host.artifacts, row, col, camera=camera, resolution=resolution,
                                         step=step, cameras=self.CAMERAS))

    @ledger_refusals("back_project")
    def region_center(self, row_range: tuple[int, int], col_range: tuple[int, int], *, camera: str = "agentview",
                      resolution: str = "high", z_min: float | None = None, z_max: float | None = None,
                      step: int = -1) -> RegionCenter:
        """Return the world centre of a pixel window (e.g. the inside of a container).

        Rows ``row_range`` = (start, stop), cols ``col_range``. The centre is the midpoint of
        the window's world x/y extent (a median leans toward a rim) with median z; ``z_min`` /
        ``z_max`` keep only pixels in a world-z band (e.g. a basket floor).

        Raises:
            ToolError: empty window or too few valid pixels.
        """
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
        """Servo the gripper to a world position, holding its orientation.

        Args:
            xyz: target [x, y, z] (m). One call moves at most 0.30 m in x/y; a longer one
                raises ValueError: split it into 2-3 waypoints at carrying height.
            gripper: -1 open, +1 closed; held for the whole motion.
            tol: stop when this close (m).
            step_clip: travel cap per step and axis (m): 0.025 empty or with a box, 0.015 with
                a can, 0.012 with a tall bottle or for a fine approach.
            max_steps: simulator step budget.
            target_yaw: optional world yaw (rad) turned to on the way, ``yaw_step_clip`` per step.
            action_scale: OSC action scale; keep the default.
        Returns:
            Move; check ``reached``: a servo that stalls returns normally.
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
        """Servo the position and the gripper pitch/yaw together.

        Use it where ``move_to`` stops short of a low or recessed target (cabinet fronts,
        microwave cavities): tilting while moving passes the singularity that a fixed
        pointing-down servo meets. ``gripper`` defaults to open; pass ``+1`` when holding.
        """
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
        """Turn the gripper about world z, keeping its position.

        Give exactly one of ``target_yaw`` (absolute) or ``delta_yaw`` (relative), in rad;
        ``state().eef_yaw`` is the current yaw. ``gripper`` defaults to +1 (keep holding).
        """
        return self._rotate("rotate_wrist", "yaw", target_yaw, delta_yaw, gripper=gripper, max_steps=max_steps, tol=tol,
                            step_clip=step_clip)

    @ledger_refusals("rotate_pitch")
    def rotate_pitch(self, *, target_pitch: float | None = None, delta_pitch: float | None = None,
                     gripper: float = 1.0, max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.10) -> Rotation:
        """Tilt the gripper about world x, keeping position and yaw.

        Pitch 0 points straight down, +pi/2 along world +y, -pi/2 along -y. Use it before
        entering an opening that faces along y. Give exactly one of ``target_pitch`` or
        ``delta_pitch`` (rad).
        """
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
        """Hold the pose and drive the gripper to ``gripper`` for ``steps`` simulator steps.

        ``set_gripper(+1, steps=8)`` right after a grasp firms it before carrying (``steps<=5``
        for a can that dents).
        """
        g = check.gripper(gripper)
        steps = check.as_int(steps)
        return self._calls.stateful("set_gripper", {"gripper": g, "steps": steps},
                                    lambda: self._servo.set_gripper(g, steps))

    @ledger_refusals("release")
    def release(self, max_steps: int = 20) -> Release:
        """Open the gripper in place for up to ``max_steps`` steps and let go.

        Returns as soon as the task predicate fires (``terminated``), so a good placement
        usually ends the episode here.
        """
        max_steps = check.as_int(max_steps)
        return self._calls.stateful("release", {"max_steps": max_steps}, lambda: self._servo.release(max_steps))


class _LiberoRobotWithVla(LiberoRobot):
    __doc__ = LiberoRobot.__doc__   # the same robot; the VLA skills document themselves

    @ledger_refusals("pi0_pick")
    def pi0_pick(self, prompt: str, *, max_chunks: int = 24, lift_thresh: float = 0.05,
                 gripper_closed_thresh: float = 0.06, gripper_open_thresh: float = 0.0,
                 descent_thresh: float = 0.10) -> Pick:
        """Let the frozen Pi0.5 VLA grasp, in closed loop.

        It runs ``prompt`` for up to ``max_chunks`` action chunks (5 simulator steps each) and
        stops early once the gripper has descended by ``descent_thresh``, closed on something
        (opening in ``[gripper_open_thresh, gripper_closed_thresh)``) and risen by
        ``lift_thresh``. Pre-position the gripper above the target, keep the prompt short
        (``"pick up the red mug"``), use about 20 chunks, then script the carry and the
        release yourself.

        Returns:
            Pick; ``success`` is a heuristic: check ``state().gripper_opening`` and the wrist
            image before carrying.
        """
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
        """Let the frozen Pi0.5 VLA do a contact skill that is not a pick.

        Knobs, buttons, drawers, doors, short pushes (``"turn on the stove"``, ``"open the top
        drawer"``), for up to ``max_chunks`` chunks or until the task predicate fires.
        ``success`` only mirrors that predicate; look at the state or an image to judge an
        intermediate step.
        """
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


def libero_host(backend: RobotBackend, *, primitives: str = "full", ledger: Ledger | None = None,
                segmenter: Any = None, vla: Any = None) -> RobotHost:
    """Build a LiberoRobot on ``backend`` and return its host handle (``host.robo`` is the robot)."""
    host = RobotHost(backend, artifact_names(), ledger=ledger)
    host.robo = LiberoRobot(backend, ledger=host.ledger, primitives=primitives, segmenter=segmenter, vla=vla,
                            host=host)
    return host
