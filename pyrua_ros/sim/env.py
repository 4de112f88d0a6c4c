"""One LIBERO / LIBERO-PRO episode at a time, in plain Python (no rclpy): the core the sim node wires to ROS.

:class:`LiberoEpisode` owns a LIBERO ``OffScreenRenderEnv`` and exposes what a ROS driver needs: reset to a
benchmark episode, one control step (OSC delta pose, or joint position), robot state, the frame tree, on-demand
camera captures (color + depth + intrinsics + optical pose) and instance segmentation, and the success latch.

Design points:

- The env is built once per (suite, task) with ``hard_reset=False`` (0.2 s resets instead of 2 s), without
  robosuite's offscreen renderer and with ``use_camera_obs=False``: ``step()`` never renders. Every image comes
  from a :class:`~pyrua_ros.sim.render.Renderer` (its own thread and GL context, rendering copies of the state,
  same pixels as robosuite's renderer): :meth:`LiberoEpisode.capture` and :meth:`LiberoEpisode.segmentation`
  synchronously, :meth:`LiberoEpisode.stream` queued (dropping frames rather than delaying a step, or with
  ``stream_wait`` waiting for room so that none is dropped). The renderer draws each view at most once per scene:
  captures, segmentation and stream frames of one state share its passes. Rendering costs about 150 ms of CPU per
  camera on llvmpipe (the scene's 565k mesh vertices, twice with the floor's reflection), ten control steps.
- A control step is the lean step of :mod:`pyrua_ros.sim.stepper` (the same controller and physics without the
  observation dict, bit-identical to ``env.step``); ``LiberoEpisode(lean_step=False)`` runs the stock
  ``env.step`` instead (benchmarks compare the two).
- A reset is the reference host's (RPent's env server: RLinf's ``LiberoEnv`` with ``seed=K``, ``seed_offset=0`` and
  the fixed reset id of init state ``K % n``): ``env.seed(seed)`` (``np.random.seed``: LIBERO re-samples fixture
  positions from numpy's global RNG, so fixtures move between seeds there too), ``env.reset()``,
  ``set_init_state(init_states[seed % n])``, then :data:`SETTLE_STEPS` (15) zero-motion steps with the gripper
  opening. The settle steps are not counted in ``step``. RPent resets hard (the model reloaded) and this env soft;
  the fixtures and the settled state are the same (``test_sim_env.py`` pins them).
- ``success`` is LIBERO's own check (``env.check_success()``), evaluated after every control step and latched;
  ``terminated == success``; ``truncated`` once ``step >= max_episode_steps``. Stepping after either raises
  :class:`EpisodeOver`.
- Everything is in robosuite's world frame, metres, radians, quaternions (x, y, z, w).
- Same (suite, task, seed) and the same actions give identical states (MuJoCo is deterministic on one thread;
  the gripper's accumulated command, which a soft reset keeps, is cleared on reset).
- After every step the kinematics are recomputed (``mj_forward``), so poses, TF and joint states agree exactly;
  LIBERO's own observations of the same step are one 2 ms physics substep older.

Set ``MUJOCO_GL`` before anything imports robosuite; this module defaults it to ``egl`` on first use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import numbers
import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from pyrua_ros import cputime
from pyrua_ros.driver.model import ModelEpisode
from pyrua_ros.sim import cameras, parts, render, suites, urdf
from pyrua_ros.sim.joint_control import JointPositionMode
from pyrua_ros.sim.stepper import LeanStep
from pyrua_ros.wire import interfaces
from pyrua_ros.wire.convert import matrix_to_quat

SETTLE_STEPS = 15            # zero-motion steps after set_init_state, as RPent's LIBERO env (RLinf LiberoEnv.reset)
SETTLE_ACTION = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])   # hold pose, open the gripper
MAX_RESOLUTION = 2048        # largest square capture [px]
RENDER_TIMEOUT_S = 120.0     # longest wait for a synchronous render (a loaded 2-core machine takes ~1 s)


class EpisodeOver(RuntimeError):
    """A motion was asked for after the episode terminated (success) or was truncated; reset first."""


# The episode chosen by the last reset, in the driver model's type (both drivers report the same record):
# ``task_language`` is the BDDL instruction (``env.language_instruction``, the perturbed one in PRO ``_lan`` /
# ``_task`` suites); ``object_names`` the movable objects; ``max_episode_steps`` the truncation limit [steps].
EpisodeInfo = ModelEpisode


@dataclasses.dataclass(frozen=True)
class StepInfo:
    """State of the episode after a control step (or after reset: ``step`` 0).

    ``step``: control steps since reset; ``sim_time``: ``step * control_period`` [s] since reset;
    ``success``: LIBERO's success check, latched once true; ``terminated``: equals ``success``;
    ``truncated``: ``step >= max_episode_steps`` without success.
    """

    step: int
    sim_time: float
    success: bool
    terminated: bool
    truncated: bool


@dataclasses.dataclass(frozen=True)
class Capture:
    """One rendered camera view: the true upright pinhole view (see :mod:`pyrua_ros.sim.cameras`).

    ``color``: uint8 (H, W, 3) RGB; ``depth``: float32 (H, W) metres along the optical axis, 0 where nothing was
    hit (a stream frame holds only what was asked for; the other is None); ``K``: 3x3 float64 pinhole
    intrinsics of this image (fx = fy > 0); ``T_world_optical``: 4x4 pose of the REP-103 optical frame (z
    forward, x right, y down) in the world. A pixel (row, col) with depth z is at
    ``T @ [(col-cx) z/fx, (row-cy) z/fy, z, 1]``.
    """

    camera: str
    width: int
    height: int
    color: np.ndarray | None
    depth: np.ndarray | None
    K: np.ndarray
    T_world_optical: np.ndarray
    depth_near: float | None = None     # [m] the renderer's clip planes: depth is measured between them
    depth_far: float | None = None


@dataclasses.dataclass(frozen=True)
class _ModelIds:
    """Indices into MjData that every step reads, looked up once per built model (name lookups cost ~10 us)."""

    grip_site: int
    hand_body: int
    qpos: np.ndarray      # qpos address of each published joint
    qvel: np.ndarray      # dof address of each published joint
    frames: tuple[int, ...]   # urdf.source_ids of the published frames

    @classmethod
    def of(cls, model, joint_names: list[str], frames: tuple[urdf.FrameSpec, ...]) -> _ModelIds:
        joints = [model.joint(n).id for n in joint_names]
        return cls(model.site("gripper0_grip_site").id, model.body("robot0_right_hand").id,
                   np.asarray(model.jnt_qposadr[joints]), np.asarray(model.jnt_dofadr[joints]),
                   urdf.source_ids(model, frames))


class LiberoEpisode:
    """A LIBERO-PRO episode: build/reset, step, state, frames, captures. Not thread-safe: call from one thread."""

    CAMERAS: ClassVar[dict[str, str]] = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}

    def __init__(self, *, stream_resolution: int = 256, lean_step: bool = True, stream_backlog: int = 8,
                 stream_wait: bool = False, render_nice: int = render.DEFAULT_NICE):
        """Nothing is built until :meth:`reset`. ``stream_resolution`` [px] is the nominal size of streamed images;
        ``lean_step`` False steps with the stock ``env.step`` (same trajectory, about twice the time);
        ``stream_backlog``, ``stream_wait`` (a full backlog makes :meth:`stream` wait instead of dropping a frame)
        and ``render_nice`` configure the :class:`~pyrua_ros.sim.render.Renderer`."""
        self.stream_resolution = self._check_resolution(stream_resolution)
        self.lean_step = bool(lean_step)
        self.stream_backlog, self.render_nice = int(stream_backlog), int(render_nice)
        self.stream_wait = bool(stream_wait)
        self._renderer: render.Renderer | None = None
        self._camera_ids: dict[str, int] = {}
        self._lean: LeanStep | None = None
        self._ids: _ModelIds | None = None
        self._names = interfaces.load()
        frames, robot = self._names.frames, self._names.robot
        self._frames = urdf.robot_frames(frames.world, frames.base, frames.end_effector,
                                         {frames.optical(cam): mj for cam, mj in self.CAMERAS.items()})
        self._joint_names = list(robot.arm_joints) + list(robot.finger_joints)
        self._static = frozenset(f.name for f in self._frames if f.joint is None)
        self._env = None
        self._key: tuple[str, int] | None = None
        self._info: EpisodeInfo | None = None
        self._last: StepInfo | None = None
        self._joint_mode: JointPositionMode | None = None
        self._urdf: str | None = None
        self._history: list[render.StateCopy] = []   # the scene after each control step (index = step)

    # ---------------------------------------------------------------- episode
    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int = 10000) -> EpisodeInfo:
        """Reset to the benchmark episode (suite, task, init state ``seed % n``); builds the env if suite/task changed.

        Raises ValueError (listing the valid values) for an unknown suite, a task out of range, a negative seed
        or ``max_episode_steps < 1``.
        """
        suites.validate_episode(suite, task, seed)
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, numbers.Integral) \
                or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be an integer >= 1, got {max_episode_steps!r}")
        if self._key != (suite, task):
            with cputime.section("sim: env build"):
                self._build(suite, task)
        self._joint_mode = None  # env.reset() rebuilds the OSC controller
        self._renderer.clear_stream()   # frames of the last episode; the renderer shares the model a reset edits
        with cputime.section("sim: reset"):
            env = self._env
            env.seed(seed)
            env.reset()
            # a soft reset keeps the gripper's accumulated command; clear it so a reset does not depend on history
            gripper = env.env.robots[0].gripper
            gripper.current_action = np.zeros_like(gripper.current_action)
            env.set_init_state(self._init_states[seed % len(self._init_states)])
            self._lean = LeanStep(env.env) if self.lean_step else None   # the controller is new after env.reset()
            for _ in range(SETTLE_STEPS):
                self._physics_step(SETTLE_ACTION)
            env.env.sim.forward()
        self._info = EpisodeInfo(suite, int(task), int(seed), str(env.language_instruction), self.object_names(),
                                 int(max_episode_steps))
        self._last = StepInfo(0, 0.0, False, False, False)
        self._history = [render.StateCopy.of(self._data)]
        return self._info

    def _build(self, suite: str, task: int) -> None:
        self.close()
        os.environ.setdefault("MUJOCO_GL", "egl")
        benchmark = suites.load_suite(suite)
        with contextlib.redirect_stdout(io.StringIO()):
            from libero.libero import get_libero_path
            from libero.libero.envs.env_wrapper import ControlEnv

            from pyrua_ros.sim import model_cache

            cputime.mark("sim: libero imported")
            t = benchmark.get_task(task)
            bddl = os.path.join(get_libero_path("bddl_files"), t.problem_folder, t.bddl_file)
            self._init_states = benchmark.get_task_init_states(task)
            # LIBERO's OffScreenRenderEnv is this env with robosuite's offscreen renderer; rendering here is the
            # Renderer's (its own thread and GL context), so the env gets none (faster to build and to reset)
            with model_cache.cached_compiles():   # the scene's compiled model, from the last build of it
                self._env = ControlEnv(
                    bddl_file_name=bddl, hard_reset=False, has_offscreen_renderer=False, use_camera_obs=False,
                    camera_heights=self.stream_resolution, camera_widths=self.stream_resolution, ignore_done=True)
        cputime.mark("sim: env created")
        inner = self._env.env
        self._renderer = render.Renderer(
            self._model, render.RenderSettings(visual_geoms=bool(inner.render_visual_mesh),
                                               collision_geoms=bool(inner.render_collision_mesh)),
            max_resolution=max(self.stream_resolution, *self._names.sim.resolutions.values()),
            stream_backlog=self.stream_backlog, wait_when_full=self.stream_wait, nice=self.render_nice)
        self._camera_ids = {mj: self._model.camera(mj).id for mj in self.CAMERAS.values()}
        cputime.mark("cameras", names={str(self._camera_ids[mj]): cam for cam, mj in self.CAMERAS.items()})
        self._key = (suite, task)
        self._urdf = None
        self._ids = _ModelIds.of(self._model, self._joint_names, self._frames)
        self._build_labels()

    def _build_labels(self) -> None:
        """Segmentation id per geom: one id per object, fixture, ``table`` and ``robot`` (0 = none)."""
        inner, model = self._env.env, self._model
        named_roots: dict[int, str] = {}
        for name in [*inner.objects_dict, *inner.fixtures_dict]:
            named_roots[int(model.body_rootid[inner.obj_body_id[name]])] = name
        named_roots.setdefault(int(model.body_rootid[model.body("robot0_base").id]), "robot")
        with contextlib.suppress(KeyError):
            named_roots.setdefault(int(model.body_rootid[model.body("table").id]), "table")
        for root in sorted(set(model.body_rootid.tolist()) - set(named_roots) - {0}):
            named_roots[root] = model.body(root).name  # other arena bodies, under their own names
        root_ids = {root: i + 1 for i, root in enumerate(named_roots)}
        self._labels = {root_ids[root]: name for root, name in named_roots.items()}
        roots = model.body_rootid[model.geom_bodyid]
        # index 0 stands for "no geom" (the renderer's -1 shifted by one)
        self._geom_label = np.zeros(model.ngeom + 1, dtype=np.int32)
        self._geom_label[1:] = [root_ids.get(int(r), 0) for r in roots]
        self._label_parts(named_roots, set(inner.objects_dict) | set(inner.fixtures_dict))

    def _label_parts(self, named_roots: dict[int, str], named: set[str]) -> None:
        """Give the geoms of an object's parts (drawers, handles, burner, knob, door: :mod:`pyrua_ros.sim.parts`)
        labels of their own, numbered after the objects'."""
        import mujoco

        model = self._model
        ids = {name: i for i, name in self._labels.items()}
        for g in range(model.ngeom):
            obj = named_roots.get(int(model.body_rootid[model.geom_bodyid[g]]))
            if obj not in named:
                continue
            mesh = (model.mesh(model.geom_dataid[g]).name
                    if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH and model.geom_dataid[g] >= 0 else "")
            label = parts.part_label(obj, model.body(model.geom_bodyid[g]).name, model.geom(g).name, mesh)
            if label is not None:
                if label not in ids:
                    ids[label] = len(ids) + 1
                    self._labels[ids[label]] = label
                self._geom_label[g + 1] = ids[label]

    def step(self, action: np.ndarray) -> StepInfo:
        """One control step with a 7-D OSC_POSE delta action [dx, dy, dz, dax, day, daz, gripper], each in [-1, 1].

        Position deltas are scaled by 0.05 m, rotation by 0.5 rad (world frame); gripper -1 opens, +1 closes.
        Values outside [-1, 1] are clipped. Ends joint control first if :meth:`step_joints` left it on.
        Raises EpisodeOver after success or truncation, RuntimeError before the first reset.
        """
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (7,) or not np.all(np.isfinite(a)):
            raise ValueError(f"action must be 7 finite numbers [dx, dy, dz, dax, day, daz, gripper], got {action!r}")
        self._check_running()
        if self._joint_mode is not None:
            self.end_joint_control()
        return self._advance(np.clip(a, -1.0, 1.0))

    def step_joints(self, q_target: np.ndarray, gripper: float) -> StepInfo:
        """One control step driving the 7 arm joints toward ``q_target`` [rad] (joint-position controller).

        ``gripper`` is the OSC-style gripper command (-1 open .. +1 close). The joint controller stays in place
        until :meth:`end_joint_control` (or the next :meth:`step`, or reset). Raises EpisodeOver as :meth:`step`.
        """
        q = np.asarray(q_target, dtype=np.float64)
        if q.shape != (7,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q_target must be 7 finite joint positions [rad], got {q_target!r}")
        if not np.isfinite(gripper):
            raise ValueError(f"gripper must be a finite number in [-1, 1], got {gripper!r}")
        self._check_running()
        if self._joint_mode is None:
            self._joint_mode = JointPositionMode(self._env.env, self._env.env.robots[0])
        action = self._joint_mode.action(self.joint_state()[1][:7], q, float(np.clip(gripper, -1.0, 1.0)))
        return self._advance(action)

    def end_joint_control(self) -> None:
        """Swap the OSC_POSE controller back in after :meth:`step_joints` (no-op when it is already in)."""
        if self._joint_mode is not None:
            self._joint_mode.exit()
            self._joint_mode = None

    def _check_running(self) -> None:
        if self._last is None:
            raise RuntimeError("no episode: call reset(suite, task, seed) first")
        if self._last.terminated or self._last.truncated:
            why = "succeeded" if self._last.terminated else f"was truncated at {self._last.step} steps"
            raise EpisodeOver(f"the episode {why}; reset before moving again")

    def _physics_step(self, action: np.ndarray) -> bool:
        """One control step of the env (lean or stock); LIBERO's success check after it."""
        if self._lean is not None:
            return self._lean.step(action)
        return bool(self._env.step(action)[2])   # done is LIBERO's check_success()

    def _advance(self, action: np.ndarray) -> StepInfo:
        with cputime.section("sim: physics"):
            done = self._physics_step(action)
        # mj_step leaves body/site poses one physics substep behind qpos; recompute them so that eef_pose, TF and
        # joint_state describe the same instant (the next step starts with the same forward pass anyway)
        self._env.env.sim.forward()
        step = self._last.step + 1
        success = self._last.success or bool(done)
        truncated = not success and step >= self._info.max_episode_steps
        self._last = StepInfo(step, step * self.control_period, success, success, truncated)
        self._history.append(render.StateCopy.of(self._data))
        return self._last

    @property
    def control_period(self) -> float:
        """Duration of one control step [s] (LIBERO: 1/20)."""
        return float(self._env.env.control_timestep) if self._env is not None else self._names.robot.control_period_s

    def info(self) -> EpisodeInfo:
        """The current episode (RuntimeError before the first reset)."""
        self._require()
        return self._info

    def last_step(self) -> StepInfo:
        """The latest step state (step 0 right after reset)."""
        self._require()
        return self._last

    def _require(self) -> None:
        if self._info is None:
            raise RuntimeError("no episode: call reset(suite, task, seed) first")

    # ---------------------------------------------------------------- state
    @property
    def _model(self):
        return self._env.env.sim.model._model

    @property
    def _data(self):
        return self._env.env.sim.data._data

    def eef_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Position (3,) [m] of the grip site and orientation (x, y, z, w) of the hand, world frame.

        Equals LIBERO's ``robot0_eef_pos`` / ``robot0_eef_quat`` observations and the TF of the end-effector frame.
        """
        self._require()
        d, ids = self._data, self._ids
        return d.site_xpos[ids.grip_site].copy(), cameras.wxyz_to_xyzw(d.xquat[ids.hand_body])

    def eef_pose_at(self, q_arm) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`eef_pose` if the 7 arm joints were at ``q_arm`` [rad] and everything else as now: forward
        kinematics on a scratch copy of the state (the simulation itself is not touched)."""
        import mujoco

        self._require()
        q = np.asarray(q_arm, dtype=np.float64)
        if q.shape != (7,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q_arm must be 7 finite joint positions [rad], got {q_arm!r}")
        scratch = getattr(self, "_scratch", None)
        if scratch is None or scratch[0] is not self._model:
            scratch = self._scratch = (self._model, mujoco.MjData(self._model))
        d, ids = scratch[1], self._ids
        d.qpos[:] = self._data.qpos
        d.mocap_pos[:], d.mocap_quat[:] = self._data.mocap_pos, self._data.mocap_quat
        d.qpos[ids.qpos[:7]] = q
        mujoco.mj_kinematics(self._model, d)
        return d.site_xpos[ids.grip_site].copy(), cameras.wxyz_to_xyzw(d.xquat[ids.hand_body])

    def joint_state(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Names (7 arm joints then 2 finger joints), positions [rad | m] and velocities [rad/s | m/s]."""
        self._require()
        d, ids = self._data, self._ids
        return list(self._joint_names), d.qpos[ids.qpos].copy(), d.qvel[ids.qvel].copy()

    def physics_state(self) -> np.ndarray:
        """MuJoCo ``qpos`` of the whole scene (robot, objects, articulated fixtures), a copy."""
        self._require()
        return self._data.qpos.copy()

    def gripper_opening(self) -> float:
        """Finger gap [m]: |q_finger1| + |q_finger2| (about 0.08 fully open, near 0 closed on nothing)."""
        q = self.joint_state()[1]
        return float(abs(q[7]) + abs(q[8]))

    def link_transforms(self, *, moving_only: bool = False) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        """(parent_frame, child_frame, translation [m], quat xyzw) of every robot and camera frame, for TF;
        ``moving_only`` leaves out the static ones (:meth:`static_frames`), as /tf after each step needs."""
        self._require()
        poses = urdf.world_poses(self._model, self._data, self._frames, self._names.frames.world, self._ids.frames)
        static = self._static if moving_only else frozenset()
        out = []
        for f in self._frames:
            if f.name in static:
                continue
            parent, child = poses[f.parent], poses[f.name]
            R_parent = parent[:3, :3]                   # rigid inverse: T_parent^-1 T_child
            out.append((f.parent, f.name, R_parent.T @ (child[:3, 3] - parent[:3, 3]),
                        matrix_to_quat(R_parent.T @ child[:3, :3])))
        return out

    def static_frames(self) -> set[str]:
        """Child frames whose transform to their parent never changes (publish on /tf_static)."""
        return set(self._static)

    def object_names(self) -> tuple[str, ...]:
        """The episode's movable objects (LIBERO ``objects_dict`` names, e.g. ``akita_black_bowl_1``)."""
        if self._env is None:
            raise RuntimeError("no episode: call reset(suite, task, seed) first")
        return tuple(self._env.env.objects_dict)

    def object_poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Ground truth: object name -> (position [m], quat xyzw) of its root body. For rviz markers ONLY."""
        self._require()
        inner, d = self._env.env, self._data
        return {name: (d.xpos[inner.obj_body_id[name]].copy(), cameras.wxyz_to_xyzw(d.xquat[inner.obj_body_id[name]]))
                for name in inner.objects_dict}

    # ---------------------------------------------------------------- rendering
    def _camera(self, camera: str) -> str:
        if camera not in self.CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; valid cameras: {', '.join(self.CAMERAS)}")
        return self.CAMERAS[camera]

    @staticmethod
    def _check_resolution(resolution: Any) -> int:
        if isinstance(resolution, bool) or not isinstance(resolution, int | np.integer) \
                or not 1 <= resolution <= MAX_RESOLUTION:
            raise ValueError(f"resolution must be an integer number of pixels in 1..{MAX_RESOLUTION}, "
                             f"got {resolution!r}")
        return int(resolution)

    def _views(self, camera: str, resolution: int, kinds: set[str]) -> render.View:
        """The view of ``camera`` at ``resolution`` of the current state with ``kinds``, rendered now
        (synchronously, ahead of stream frames) unless the renderer holds it for this scene already."""
        self._require()
        return self._past_view(render.StateCopy.of(self._data), camera, resolution, kinds)

    # ---------------------------------------------------------------- the past, for renders
    def _past_state(self, step: int | None) -> render.StateCopy | None:
        """The recorded state of control step ``step`` of this episode, or None for now (None or the last step)."""
        self._require()
        if step is None or step == self._last.step:
            return None
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or not 0 <= step <= self._last.step:
            raise ValueError(f"step {step!r} is not a past step of this episode: steps are 0..{self._last.step}")
        return self._history[int(step)]

    def _past_view(self, state: render.StateCopy, camera: str, resolution: int, kinds: set[str]) -> render.View:
        """A view of a recorded state (or the current one), rendered now unless the renderer holds it."""
        cid = self._camera_ids[self._camera(camera)]
        (view,) = self._renderer.render(state, [render.ViewRequest(cid, self._check_resolution(resolution),
                                                                   frozenset(kinds))], timeout=RENDER_TIMEOUT_S)
        return view

    def _capture_of(self, camera: str, v: render.View) -> Capture:
        near, far = self._renderer.depth_range
        return Capture(camera, v.resolution, v.resolution, v.color, v.depth, v.K, v.T_world_optical,
                       depth_near=near, depth_far=far)

    def capture(self, camera: str, resolution: int, step: int | None = None) -> Capture:
        """Render color and depth of ``camera`` (``agentview`` | ``wrist``), ``resolution`` px square, now or as the
        scene was at an earlier control ``step`` of this episode."""
        past = self._past_state(step)
        if past is not None:
            return self._capture_of(camera, self._past_view(past, camera, resolution, {"color", "depth"}))
        return self._capture_of(camera, self._views(camera, resolution, {"color", "depth"}))

    def segmentation(self, camera: str, resolution: int, step: int | None = None) -> tuple[np.ndarray, dict[int, str]]:
        """Instance ids (int32 (H, W), upright, 0 = nothing) of ``camera`` now (or at an earlier control ``step``),
        and id -> object/fixture/part name.

        Ids are fixed per (suite, task): objects, then fixtures, then ``table`` and ``robot`` (the arm, hand and
        mount), then other arena bodies under their body names, then parts. Floor and walls are 0.
        """
        past = self._past_state(step)
        if past is not None:
            v = self._past_view(past, camera, resolution, {"segmentation"})
        else:
            v = self._views(camera, resolution, {"segmentation"})
        return self._geom_label[v.geom], dict(self._labels)

    def stream(self, requests: dict[str, set[str]], deliver: Callable[[list[Capture]], None]) -> None:
        """Queue a best-effort stream frame of the current state: ``{camera: kinds}`` ("color" and/or "depth")
        at ``stream_resolution``. ``deliver(captures)`` runs in the render thread once it is rendered (a field
        not asked for is None); frames the renderer cannot keep up with are dropped, never waited for."""
        self._require()
        names = list(requests)
        asks = [render.ViewRequest(self._camera_ids[self._camera(cam)], self.stream_resolution,
                                   frozenset(requests[cam])) for cam in names]

        def captures(views: list[render.View]) -> None:
            deliver([self._capture_of(cam, v) for cam, v in zip(names, views)])

        self._renderer.stream(render.StateCopy.of(self._data), asks, captures)

    @property
    def renderer(self) -> render.Renderer:
        """The episode's render thread (stream statistics: ``rendered``, ``dropped``, ``pending``)."""
        self._require()
        return self._renderer

    # ---------------------------------------------------------------- description
    def urdf(self) -> str:
        """URDF of the simulated robot and camera frames (names as in joint_state / link_transforms)."""
        if self._env is None:
            raise RuntimeError("no episode: call reset(suite, task, seed) first")
        if self._urdf is None:
            self._urdf = urdf.generate(self._model, self._frames, self._names.frames.world)
        return self._urdf

    def close(self) -> None:
        """Free the env and its render context (safe to call twice)."""
        self._joint_mode = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self._env is not None:
            with contextlib.suppress(Exception):
                self._env.close()
        self._env, self._key, self._info, self._last, self._urdf = None, None, None, None, None
        self._lean, self._ids = None, None
