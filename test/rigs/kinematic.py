"""The kinematic double of a driver, in process, and robo on it: the rig of the pure robo tests.

The double is a driver like any other: :class:`PointArm`, a small world as an
:class:`~pyrua_ros.driver.model.ArmModel`, under the real driver core in this process
(:class:`~pyrua_ros.testing.inprocess.InProcessDriver`, with the sim node's parameters: its safety filter, goal
rules, refusals and state digest). The world: a point gripper that moves by exactly the twist the core lets through
(the safety filter's per-axis limits are LIBERO's OSC range: 0.05 m and 0.5 rad per step), a finger gap that moves
1 cm per step toward its target, a top-down depth camera over a table with box objects, and a task predicate "the
gripper opened within 3 cm (x/y) of the plate". (The real-sim tests use the sim node rig of :mod:`rigs.nodes`.)

Fixtures (loaded for every test by ``test/conftest.py``):

- ``backend``: a fresh :class:`KinematicBackend` per test;
- ``host`` / ``robo``: ``libero_host(backend, primitives="no-vla")`` and its ``robo``, per test;
- ``kinematic_kernel``: a cell kernel (the real sandboxed subprocess) over robo on a double of its own, one per
  test module: for tests that only run cells and read what came back.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyrua_ros.driver.model import CameraImage, ModelEpisode, ModelStep
from pyrua_ros.robo.backend import BackendRefused
from pyrua_ros.testing.inprocess import InProcessDriver
from pyrua_ros.wire.convert import matrix_to_quat

HOME = np.array([-0.21, 0.0, 1.17])
R_HOME = np.diag([1.0, -1.0, -1.0])  # pointing down
TABLE_Z = 0.90
# name -> (centre x, y, half size x, y, top z)
OBJECTS = {
    "akita_black_bowl_1": (0.05, -0.10, 0.04, 0.04, 0.95),
    "akita_black_bowl_2": (-0.15, 0.15, 0.04, 0.04, 0.95),
    "plate_1": (0.05, 0.20, 0.06, 0.06, 0.92),
    "flat_stove_1": (-0.15, 0.25, 0.06, 0.06, 0.93),
    "flat_stove_1_burner": (-0.15, 0.25, 0.03, 0.03, 0.935),
}
MOVABLE = ("akita_black_bowl_1", "akita_black_bowl_2", "plate_1")
TASK_LANGUAGE = "put the black bowl on the plate"
FINGER_STEP_M = 0.01       # [m] the finger gap moves at most this far per control step
CAMERA_POSE = np.eye(4)    # T_world_optical of every camera: straight down from 1.6 m
CAMERA_POSE[:3, :3] = np.array([[0, -1, 0], [-1, 0, 0], [0, 0, -1.0]])  # columns: optical x, y, z in the world
CAMERA_POSE[:3, 3] = [0.0, 0.05, 1.60]
SUCCESS_OPENING_M = 0.06   # [m] the predicate: opened wider than this ...
SUCCESS_RADIUS_M = 0.03    # [m] ... within this (x/y) of the plate


def render(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K, depth [m] (float32; a 2x2 corner without valid depth) and instance ids (1.. = OBJECTS, 6 = table) of the
    top-down camera at ``size`` px, by ray casting the boxes' tops."""
    f = size / (2 * math.tan(math.radians(30)))
    K = np.array([[f, 0, (size - 1) / 2], [0, f, (size - 1) / 2], [0, 0, 1.0]])
    rows, cols = np.mgrid[0:size, 0:size].astype(float)
    rays = np.stack([(cols - K[0, 2]) / K[0, 0], (rows - K[1, 2]) / K[1, 1], np.ones_like(cols)], -1)
    world_dirs = rays @ CAMERA_POSE[:3, :3].T  # z component is -1 per unit optical depth
    cam = CAMERA_POSE[:3, 3]
    depth = np.full((size, size), cam[2] - TABLE_Z)
    ids = np.full((size, size), 6, dtype=np.int32)
    for pid, (cx, cy, hx, hy, top) in enumerate(OBJECTS.values(), start=1):
        t = cam[2] - top
        x, y = cam[0] + world_dirs[..., 0] * t, cam[1] + world_dirs[..., 1] * t
        hit = (abs(x - cx) <= hx) & (abs(y - cy) <= hy) & (t < depth + 1e-9)
        depth[hit] = t
        ids[hit] = pid
    depth[:2, :2] = 0.0
    return K, depth.astype(np.float32), ids


class PointArm:
    """The double's world as an ArmModel (any suite name; one task). Its pictures never change but for the
    green channel, which is the control step they show (capped at 255); with ``keeps_history`` it renders past
    steps as the LIBERO sim does (``capture_past``), else only the current one. Its world exists from the driver
    core's first reset on, as the other models' episodes do."""

    control_period_s = 0.05

    def __init__(self, names, *, keeps_history: bool = True):
        self.frames, self.robot = names.frames, names.robot
        self.open_m = float(names.robot.gripper_open_width_m)
        if keeps_history:
            self.capture_past = self._capture_past

    def validate_episode(self, suite, task, seed, max_episode_steps) -> None:
        if not (isinstance(task, int) and isinstance(seed, int) and task >= 0 and seed >= 0):
            raise ValueError(f"task and seed are integers >= 0; got {task!r}, {seed!r}")

    def reset(self, suite, task, seed, max_episode_steps) -> ModelEpisode:
        self.validate_episode(suite, task, seed, max_episode_steps)
        self.pos, self.rot, self.gap = HOME.copy(), R_HOME.copy(), self.open_m
        self.step, self.success, self.max_steps = 0, False, int(max_episode_steps)
        return ModelEpisode(suite, task, seed, TASK_LANGUAGE, MOVABLE, int(max_episode_steps))

    def step_twist(self, v, w, gripper_gap_m) -> ModelStep:
        dt = self.control_period_s
        self.pos = self.pos + np.asarray(v, float) * dt
        rv = np.asarray(w, float) * dt
        angle = float(np.linalg.norm(rv))
        if angle > 0:
            k = rv / angle
            kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
            self.rot = (np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx) @ self.rot
        self.gap += float(np.clip(gripper_gap_m - self.gap, -FINGER_STEP_M, FINGER_STEP_M))
        self.step += 1
        plate = OBJECTS["plate_1"]
        if self.gap > SUCCESS_OPENING_M and math.hypot(self.pos[0] - plate[0], self.pos[1] - plate[1]) < \
                SUCCESS_RADIUS_M:
            self.success = True
        return self.last_step()

    def step_joints(self, q_target, gripper_gap_m) -> ModelStep:
        return self.step_twist(np.zeros(3), np.zeros(3), gripper_gap_m)   # a point has no joints to follow

    def last_step(self) -> ModelStep:
        return ModelStep(self.step, self.success, self.step >= self.max_steps and not self.success)

    def ee_pose(self):
        return self.pos.copy(), matrix_to_quat(self.rot)

    def ee_pose_at(self, q_arm):
        return self.ee_pose()

    def joint_state(self):
        names = [*self.robot.arm_joints, *self.robot.finger_joints]
        return names, np.r_[np.zeros(7), self.gap / 2, -self.gap / 2], np.zeros(9)

    def gripper_opening(self) -> float:
        return self.gap

    def physics_state(self) -> np.ndarray:
        return np.r_[self.pos, self.rot.ravel(), self.gap]

    def transforms(self, *, moving_only: bool = False):
        f, cam = self.frames, (CAMERA_POSE[:3, 3].copy(), matrix_to_quat(CAMERA_POSE[:3, :3]))
        moving = [(f.base, f.end_effector, self.pos.copy(), matrix_to_quat(self.rot))]
        static = [(f.world, f.base, np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])),
                  *((f.world, f.optical(c), *cam) for c in self.robot.cameras)]
        return moving if moving_only else static + moving

    def static_frames(self) -> set[str]:
        return {self.frames.base, *(self.frames.optical(c) for c in self.robot.cameras)}

    def _image(self, camera: str, size: int, step: int) -> CameraImage:
        if camera not in self.robot.cameras:
            raise ValueError(f"unknown camera {camera!r}; cameras: {', '.join(self.robot.cameras)}")
        K, depth, ids = render(size)
        color = np.zeros((size, size, 3), np.uint8)
        color[..., 0] = (ids * 40 % 255).astype(np.uint8)
        color[..., 1] = min(255, step)
        return CameraImage(color, depth, K, size)

    def capture(self, camera: str, size: int) -> CameraImage:
        return self._image(camera, size, self.step)

    def _capture_past(self, camera: str, size: int, step: int):
        return self._image(camera, size, step), CAMERA_POSE.copy()

    def stream(self, requests, size, deliver) -> None:
        deliver({camera: self.capture(camera, size) for camera in requests})

    def segmentation(self, camera: str, size: int, step: int | None = None):
        _K, _depth, ids = render(size)
        return ids, {i: name for i, name in enumerate(OBJECTS, start=1)} | {6: "table"}

    def ground_truth(self):
        return []

    def urdf(self) -> str:
        return ""

    def close(self) -> None:
        """Nothing to free."""


class KinematicBackend(InProcessDriver):
    """The driver core over :class:`PointArm`, as robo's backend, with what the tests read of it: ``servo_calls``
    (twists taken), ``gripper_goals`` (gripper goal targets [m]), ``captures`` ((camera, resolution, step shown)),
    ``cancelled``, an ``on_servo(backend)`` hook after every twist, and the world's ``step`` and ``gap``.
    Its renders are small (96 / 32 px) and the core tracks twists exactly, as a driver without OSC lag declares.
    It serves the standard interfaces only, as a real arm's drivers do: no sim-only gripper target (robo sends
    GripperCommand goals) and no MoveToTarget (robo streams twists)."""

    gripper_target = None

    def __init__(self, max_episode_steps: int = 600, keeps_history: bool = True):
        super().__init__(lambda values, names: PointArm(names, keeps_history=keeps_history),
                         osc_action_scale=(0.05, 0.1))
        self.resolutions = {"high": 96, "low": 32}
        self.servo_calls = 0
        self.gripper_goals: list[float] = []
        self.captures: list[tuple[str, str, int]] = []
        self.on_servo = None
        self.cancelled = False
        self.reset("libero_goal", 0, 0, max_episode_steps)

    @property
    def step(self) -> int:
        return self.model.step

    @property
    def gap(self) -> float:
        return self.model.gap

    def _refused(self, what: str) -> None:
        if self.cancelled:
            raise BackendRefused(f"{what}: cancelled", "cancelled")
        super()._refused(what)

    def servo(self, linear, angular):
        pose = super().servo(linear, angular)
        self.servo_calls += 1
        if self.on_servo:
            self.on_servo(self)
        return pose

    def gripper(self, position_m, max_effort=0.0):
        self._refused("gripper")
        self.gripper_goals.append(position_m)
        return super().gripper(position_m, max_effort)

    def capture(self, camera, resolution, env_step=None):
        frame = super().capture(camera, resolution, env_step)
        self.captures.append((camera, resolution, frame.env_step))
        return frame

    def cancel(self):
        self.cancelled = True


@pytest.fixture
def backend() -> KinematicBackend:
    return KinematicBackend()


@pytest.fixture
def host(backend):
    from pyrua_ros.robo.libero import libero_host

    return libero_host(backend, primitives="no-vla")


@pytest.fixture
def robo(host):
    return host.robo


@pytest.fixture(scope="module")
def kinematic_kernel(tmp_path_factory):
    from pyrua_ros.kernel import Kernel, KernelLimits
    from pyrua_ros.robo.libero import libero_host

    kernel_host = libero_host(KinematicBackend(), primitives="no-vla")
    with Kernel(kernel_host.robo, tmp_path_factory.mktemp("ws"), limits=KernelLimits()) as kernel:
        yield kernel
