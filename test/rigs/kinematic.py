"""The kinematic double of a driver, in process, and robo on it: the rig of the pure robo tests.

``KinematicBackend`` is a test double for the RobotBackend protocol (the real-sim tests use the sim node rig in
:mod:`rigs.nodes`): a point gripper that integrates twists exactly (clipped like LIBERO's OSC: 0.05 m and 0.5 rad
per step), a finger gap that moves 1 cm per step, a top-down depth camera over a table with box objects, and a task
predicate "the gripper opened within 3 cm (x/y) of the plate".

Fixtures (loaded for every test by ``test/conftest.py``):

- ``backend``: a fresh ``KinematicBackend`` per test;
- ``host`` / ``robo``: ``libero_host(backend, primitives="no-vla")`` and its ``robo``, per test;
- ``kinematic_kernel``: a cell kernel (the real sandboxed subprocess) over robo on a double of its own, one per
  test module: for tests that only run cells and read what came back.
"""

from __future__ import annotations

import dataclasses
import math
import typing

import numpy as np
import pytest

from pyrua_ros.robo.backend import (
    BackendRefused,
    CaptureFrame,
    EePose,
    GripperOutcome,
    JointSnapshot,
    SegmentationFrame,
)
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


@dataclasses.dataclass(frozen=True)
class Status:
    episode_id: int = 1
    suite: str = "libero_goal"
    task: int = 0
    seed: int = 0
    task_language: str = "put the black bowl on the plate"
    step: int = 0
    sim_time: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    max_episode_steps: int = 600
    object_names: tuple = ("akita_black_bowl_1", "akita_black_bowl_2", "plate_1")
    clock_mode: str = "lockstep"
    estop: bool = False
    gripper_opening: float = 0.08


class KinematicBackend:
    control_period_s = 0.05
    osc_action_scale = (0.05, 0.1)   # tracks twists exactly, as a driver without OSC lag declares
    cameras = ("agentview", "wrist")
    resolutions: typing.ClassVar[dict[str, int]] = {"high": 96, "low": 32}

    def __init__(self, max_episode_steps: int = 600, keeps_history: bool = True):
        self.keeps_history = keeps_history   # renders a past control step, as the LIBERO sim does
        self.pos = HOME.copy()
        self.rot = R_HOME.copy()
        self.gap = 0.08
        self.step = 0
        self.success = False
        self.max_steps = max_episode_steps
        self.servo_calls = 0
        self.gripper_goals: list[float] = []
        self.captures: list[tuple[str, str, int]] = []
        self.on_servo = None
        self.cancelled = False

    # protocol ---------------------------------------------------------------------------------------------
    def reset(self, suite, task, seed, max_episode_steps):
        self.__init__(max_episode_steps, self.keeps_history)
        return self.status()

    def status(self):
        return Status(step=self.step, sim_time=self.step * self.control_period_s, success=self.success,
                      terminated=self.success, truncated=self.step >= self.max_steps,
                      max_episode_steps=self.max_steps, gripper_opening=self.gap)

    def ee_pose(self):
        return EePose(self.pos.copy(), matrix_to_quat(self.rot), self.step * self.control_period_s)

    def joints(self):
        names = (*(f"robot0_joint{i}" for i in range(1, 8)), "gripper0_finger_joint1", "gripper0_finger_joint2")
        pos = np.r_[np.zeros(7), self.gap / 2, -self.gap / 2]
        return JointSnapshot(names, pos, np.zeros(9))

    def gripper_opening(self):
        return self.gap

    def _refuse_if_over(self):
        if self.cancelled:
            raise BackendRefused("cancelled", "cancelled")
        if self.success:
            raise BackendRefused("episode terminated", "terminated")
        if self.step >= self.max_steps:
            raise BackendRefused("episode truncated", "truncated")

    def _advance(self):
        self.step += 1
        plate = OBJECTS["plate_1"]
        if self.gap > 0.06 and math.hypot(self.pos[0] - plate[0], self.pos[1] - plate[1]) < 0.03:
            self.success = True

    def servo(self, linear, angular):
        self._refuse_if_over()
        self.servo_calls += 1
        dt = self.control_period_s
        self.pos = self.pos + np.clip(np.asarray(linear) * dt, -0.05, 0.05)
        w = np.clip(np.asarray(angular) * dt, -0.5, 0.5)
        angle = float(np.linalg.norm(w))
        if angle > 0:
            k = w / angle
            kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
            self.rot = (np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx) @ self.rot
        self._advance()
        if self.on_servo:
            self.on_servo(self)
        return self.ee_pose()

    def gripper(self, position_m, max_effort=0.0):
        self._refuse_if_over()
        self.gripper_goals.append(position_m)
        steps = 0
        while abs(self.gap - position_m) > 0.004 and steps < 40:
            self.gap += float(np.clip(position_m - self.gap, -0.01, 0.01))
            steps += 1
            self._advance()
        return GripperOutcome(self.gap, 0.0, False, abs(self.gap - position_m) <= 0.004, steps)

    def _geometry(self, resolution):
        n = self.resolutions[resolution]
        f = n / (2 * math.tan(math.radians(30)))
        K = np.array([[f, 0, (n - 1) / 2], [0, f, (n - 1) / 2], [0, 0, 1.0]])
        T = np.eye(4)
        T[:3, :3] = np.array([[0, -1, 0], [-1, 0, 0], [0, 0, -1.0]])  # columns: optical x, y, z in the world
        T[:3, 3] = [0.0, 0.05, 1.60]
        return n, K, T

    def _render(self, resolution):
        n, K, T = self._geometry(resolution)
        rows, cols = np.mgrid[0:n, 0:n].astype(float)
        rays = np.stack([(cols - K[0, 2]) / K[0, 0], (rows - K[1, 2]) / K[1, 1], np.ones_like(cols)], -1)
        world_dirs = rays @ T[:3, :3].T  # z component is -1 per unit optical depth
        cam = T[:3, 3]
        depth = np.full((n, n), cam[2] - TABLE_Z)
        ids = np.full((n, n), 6, dtype=np.int32)
        for pid, (cx, cy, hx, hy, top) in enumerate(OBJECTS.values(), start=1):
            t = cam[2] - top
            x, y = cam[0] + world_dirs[..., 0] * t, cam[1] + world_dirs[..., 1] * t
            hit = (abs(x - cx) <= hx) & (abs(y - cy) <= hy) & (t < depth + 1e-9)
            depth[hit] = t
            ids[hit] = pid
        depth[:2, :2] = 0.0  # a corner without valid depth
        return n, K, T, depth.astype(np.float32), ids

    def _shown_step(self, env_step):
        if env_step is None:
            return self.step
        if not self.keeps_history:
            raise BackendRefused("this double keeps no history", "refused")
        return env_step

    def capture(self, camera, resolution, env_step=None):
        shown = self._shown_step(env_step)
        if camera not in self.cameras or resolution not in self.resolutions:
            raise ValueError("bad view")
        self.captures.append((camera, resolution, shown))
        n, K, T, depth, ids = self._render(resolution)
        color = np.zeros((n, n, 3), np.uint8)
        color[..., 0] = (ids * 40 % 255).astype(np.uint8)
        color[..., 1] = min(255, shown)            # the control step the picture shows
        return CaptureFrame(camera, resolution, color, depth, K, T, shown * 0.05, shown)

    def segmentation(self, camera, resolution, env_step=None):
        self._shown_step(env_step)
        _, _, _, _, ids = self._render(resolution)
        labels = {i: name for i, name in enumerate(OBJECTS, start=1)} | {6: "table"}
        return SegmentationFrame(ids, labels, self.step * 0.05, camera, resolution)

    def cancel(self):
        self.cancelled = True

    def close(self):
        pass


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
