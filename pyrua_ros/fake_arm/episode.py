"""The fake arm's stepping core: a kinematic Panda, a two-finger grasp model and a table of primitives.

Pure Python + numpy (no rclpy); :mod:`pyrua_ros.fake_arm.node` wires it to ROS. One control step is
``control_period_s`` (0.05 s). Grasp model: the finger gap moves toward its target by at most ``FINGER_STEP_M`` per
step; closing on an object that lies between the fingers stalls at the object's width and attaches it to the hand;
opening past that width releases it, and it drops onto whatever lies beneath (plate or table). Success (latched):
the task's object rests on the plate.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from pyrua_ros.fake_arm import kinematics as kin
from pyrua_ros.fake_arm.scene import PinholeCamera, Shape, look_at

SUITE = "fake_table"
TABLE_TOP_Z = 0.90
OPEN_WIDTH_M = 0.08
FINGER_STEP_M = 0.01            # finger gap change per control step [m]
T_WORLD_BASE = kin.transform(None, (-0.66, 0.0, 0.912))
HOME_POS = (-0.21, 0.0, 1.17)
HOME_R = np.diag([1.0, -1.0, -1.0])   # grip site pointing down, fingers closing along world y
AGENTVIEW = look_at((0.66, 0.0, 1.61), (-0.05, 0.0, 0.90))
_TILT = np.radians(6.0)   # the wrist camera leans toward the fingers
# Wrist optical frame on the hand, beside the hand body, looking along the hand's z (down) tilted toward the fingers.
T_HAND_WRIST = kin.transform(np.array([[np.cos(_TILT), 0, -np.sin(_TILT)], [0, 1, 0],
                                       [np.sin(_TILT), 0, np.cos(_TILT)]]), (0.06, 0.0, 0.0))
FOVY_DEG = {"agentview": 45.0, "wrist": 75.0}


@dataclasses.dataclass(frozen=True)
class Task:
    language: str
    obj: str
    target: str


TASKS = (
    Task("put the red cube on the plate", "red_cube_1", "plate_1"),
    Task("put the blue can on the plate", "blue_can_1", "plate_1"),
)
# name, kind, size (half extents / radius,_,half height) [m], nominal xy [m], color
OBJECTS = (
    ("red_cube_1", "box", (0.02, 0.02, 0.02), (0.00, -0.15), (200, 40, 40)),
    ("blue_can_1", "cylinder", (0.03, 0.0, 0.05), (-0.06, 0.22), (40, 70, 200)),
    ("plate_1", "cylinder", (0.09, 0.0, 0.008), (0.10, 0.06), (235, 235, 225)),
)
FIXTURES = (
    ("table", "box", (0.45, 0.6, 0.025), (0.0, 0.0, TABLE_TOP_Z - 0.025), (150, 110, 75)),
    ("floor", "box", (3.0, 3.0, 0.01), (0.0, 0.0, -0.01), (95, 95, 100)),
)
ROBOT_COLOR = (210, 210, 215)
LINK_RADIUS = 0.045


def _home_q(panda: kin.Panda) -> np.ndarray:
    q, err = panda.ik(kin.Q_SEED, kin.transform(HOME_R, HOME_POS), iters=200, tol=1e-9)
    if err > 1e-6:
        raise RuntimeError(f"home pose {HOME_POS} unreachable (residual {err:.2e})")
    return q


class FakeEpisode:
    """One episode of the fake table: ``task`` index into :data:`TASKS`, ``seed`` jitters the object layout."""

    def __init__(self, task: int, seed: int, max_episode_steps: int, control_period_s: float = 0.05):
        if not 0 <= task < len(TASKS):
            raise ValueError(f"task {task} out of range for suite {SUITE!r}: valid 0..{len(TASKS) - 1}")
        self.task_index, self.seed, self.max_episode_steps = task, seed, max_episode_steps
        self.task = TASKS[task]
        self.dt = control_period_s
        self.panda = kin.Panda(T_WORLD_BASE)
        self.q_home = _home_q(self.panda)
        self.q = self.q_home.copy()
        self.qd = np.zeros(7)
        self.opening = OPEN_WIDTH_M
        self.opening_rate = 0.0
        self.target_opening = OPEN_WIDTH_M
        self.step_count = 0
        self.success = False
        self.attached: str | None = None
        self._T_ee_obj = np.eye(4)
        rng = np.random.default_rng(seed)
        self.objects: dict[str, Shape] = {}
        for i, (name, kind, size, xy, color) in enumerate(OBJECTS):
            jitter = rng.uniform(-0.02, 0.02, size=2) if seed else np.zeros(2)
            half_h = size[2]
            T = kin.transform(None, (xy[0] + jitter[0], xy[1] + jitter[1], TABLE_TOP_Z + half_h))
            self.objects[name] = Shape(name, kind, np.array(size), T, color, i + 1)
        n = len(OBJECTS)
        self.fixtures = [Shape(name, kind, np.array(size), kin.transform(None, pos), color, n + 1 + i)
                         for i, (name, kind, size, pos, color) in enumerate(FIXTURES)]
        self.robot_id = n + len(FIXTURES) + 1

    # ----- state -----
    @property
    def object_names(self) -> list[str]:
        return list(self.objects)

    @property
    def truncated(self) -> bool:
        return self.step_count >= self.max_episode_steps

    @property
    def over(self) -> bool:
        return self.success or self.truncated

    def T_world_ee(self) -> np.ndarray:
        return self.panda.fk(self.q)

    def frames(self) -> list[np.ndarray]:
        """World poses of link0..link7, hand, grip site."""
        return self.panda.frames(self.q)

    def labels(self) -> dict[int, str]:
        out = {s.seg_id: s.name for s in self.objects.values()}
        out.update({s.seg_id: s.name for s in self.fixtures})
        out[self.robot_id] = "robot"
        return out

    # ----- stepping -----
    def step_twist(self, v, w) -> float:
        """One control step following twist ``v`` [m/s], ``w`` [rad/s] (world); returns the IK residual."""
        q_new, res = self.panda.twist_step(self.q, v, w, self.dt, q_rest=self.q_home)
        self._advance(q_new)
        return res

    def step_hold(self) -> None:
        """One control step holding the arm (the gripper still moves)."""
        self._advance(self.q)

    def step_joints(self, q_target) -> None:
        """One control step to joint positions ``q_target`` [rad] (clipped to the limits)."""
        self._advance(np.clip(np.asarray(q_target, dtype=float), kin.Q_MIN, kin.Q_MAX))

    def set_gripper_target(self, width_m: float) -> None:
        self.target_opening = float(np.clip(width_m, 0.0, OPEN_WIDTH_M))

    def _advance(self, q_new: np.ndarray) -> None:
        self.qd = (q_new - self.q) / self.dt
        self.q = q_new
        before = self.opening
        self._update_gripper()
        self.opening_rate = (self.opening - before) / self.dt
        T_ee = self.T_world_ee()
        if self.attached:
            self.objects[self.attached].T = T_ee @ self._T_ee_obj
        self.step_count += 1
        self.success = self.success or self._on_target()

    def _object_width(self, shape: Shape, T_ee: np.ndarray) -> float:
        return 2.0 * shape.half_extent_along(T_ee[:3, 1])

    def _between_fingers(self, shape: Shape, T_ee: np.ndarray) -> bool:
        rel = T_ee[:3, :3].T @ (shape.T[:3, 3] - T_ee[:3, 3])
        width = self._object_width(shape, T_ee)
        return (width <= self.opening + 1e-6
                and abs(rel[1]) <= (self.opening - width) / 2 + 0.005
                and abs(rel[0]) <= shape.half_extent_along(T_ee[:3, 0]) + 0.01
                and abs(rel[2]) <= shape.half_extent_along(T_ee[:3, 2]) + 0.015)

    def _update_gripper(self) -> None:
        T_ee = self.T_world_ee()
        target = self.target_opening
        if target < self.opening:           # closing
            new = max(target, self.opening - FINGER_STEP_M)
            if self.attached is None:
                for name, shape in self.objects.items():
                    if self._between_fingers(shape, T_ee) and new < self._object_width(shape, T_ee):
                        self.attached = name
                        rel = np.linalg.inv(T_ee) @ shape.T
                        rel[1, 3] = 0.0     # the closing fingers centre the object
                        self._T_ee_obj = rel
                        break
            if self.attached is not None:
                new = max(new, self._object_width(self.objects[self.attached], T_ee))
            self.opening = new
        elif target > self.opening:         # opening
            self.opening = min(target, self.opening + FINGER_STEP_M)
            if self.attached is not None:
                shape = self.objects[self.attached]
                if self.opening > self._object_width(shape, T_ee) + 0.002:
                    self.attached = None
                    self._drop(shape)

    def _support_top(self, shape: Shape) -> float:
        x, y = shape.T[:2, 3]
        top = TABLE_TOP_Z
        for other in self.objects.values():
            if other is shape or other.kind != "cylinder" or other.name == self.attached:
                continue
            ox, oy, oz = other.T[:3, 3]
            if np.hypot(x - ox, y - oy) <= other.size[0] and oz + other.size[2] <= shape.T[2, 3]:
                top = max(top, oz + other.size[2])
        return top

    def _drop(self, shape: Shape) -> None:
        """Fall straight down onto the plate or table, upright, keeping yaw."""
        yaw = np.arctan2(shape.T[1, 0], shape.T[0, 0])
        T = kin.transform(kin.rot_z(yaw), shape.T[:3, 3])
        half_h = shape.half_extent_along(np.array([0.0, 0.0, 1.0]))
        T[2, 3] = self._support_top(shape) + half_h
        shape.T = T

    def _on_target(self) -> bool:
        obj, plate = self.objects[self.task.obj], self.objects[self.task.target]
        if self.attached == obj.name:
            return False
        d_xy = np.hypot(*(obj.T[:2, 3] - plate.T[:2, 3]))
        bottom = obj.T[2, 3] - obj.half_extent_along(np.array([0.0, 0.0, 1.0]))
        return bool(d_xy < plate.size[0] - 0.01 and abs(bottom - (plate.T[2, 3] + plate.size[2])) < 0.005)

    # ----- rendering -----
    def robot_shapes(self) -> list[Shape]:
        fr = self.frames()
        hand = fr[8]
        shapes = []
        pts = [f[:3, 3] for f in fr[:9]]
        for a, b in itertools.pairwise(pts):
            seg = b - a
            length = float(np.linalg.norm(seg))
            if length < 1e-3:
                continue
            z = seg / length
            x = np.cross(z, [1.0, 0.0, 0.0] if abs(z[0]) < 0.9 else [0.0, 1.0, 0.0])
            x /= np.linalg.norm(x)
            R = np.stack([x, np.cross(z, x), z], axis=1)
            shapes.append(Shape("robot", "cylinder", np.array([LINK_RADIUS, 0.0, length / 2]),
                                kin.transform(R, (a + b) / 2), ROBOT_COLOR, self.robot_id))
        shapes.append(Shape("robot", "box", np.array([0.015, 0.1, 0.03]), hand @ kin.transform(None, (0, 0, 0.03)),
                            ROBOT_COLOR, self.robot_id))
        for sign in (1.0, -1.0):
            off = kin.transform(None, (0.0, sign * (self.opening / 2 + 0.0075), 0.09))
            shapes.append(Shape("robot", "box", np.array([0.01, 0.0075, 0.025]), hand @ off, (60, 60, 60),
                                self.robot_id))
        return shapes

    def shapes(self) -> list[Shape]:
        return [*self.fixtures, *self.objects.values(), *self.robot_shapes()]

    def camera(self, name: str, size: int) -> PinholeCamera:
        """The camera ``name`` (``agentview`` fixed, ``wrist`` on the hand) at ``size`` x ``size`` pixels."""
        if name not in FOVY_DEG:
            raise ValueError(f"unknown camera {name!r}; valid: {sorted(FOVY_DEG)}")
        T = AGENTVIEW if name == "agentview" else self.frames()[8] @ T_HAND_WRIST
        return PinholeCamera(T, size, size, FOVY_DEG[name])
