"""The fake table episode as an :class:`~pyrua_ros.driver.model.ArmModel` for the driver core (no rclpy).

Commands act on the kinematic Panda of :mod:`pyrua_ros.fake_arm.episode`: a twist is integrated through damped
least-squares IK, joint targets are followed within the joint limits, and the finger-gap target moves the fingers
by at most ``FINGER_STEP_M`` per step (closing on an object stalls at its width and grasps it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from pyrua_ros.driver.model import CameraImage, ModelEpisode, ModelStep, TruthObject
from pyrua_ros.fake_arm import kinematics as kin
from pyrua_ros.fake_arm.episode import AGENTVIEW, SUITE, T_HAND_WRIST, TASKS, FakeEpisode
from pyrua_ros.fake_arm.scene import render
from pyrua_ros.wire.convert import matrix_to_quat

HAND = "robot0_right_hand"
FINGER_LINKS = ("gripper0_leftfinger", "gripper0_rightfinger")
MAX_CACHED_VIEWS = 4   # both cameras at two sizes


class FakeArm:
    """ArmModel over :class:`~pyrua_ros.fake_arm.episode.FakeEpisode` (suite ``fake_table``)."""

    DEFAULT_EPISODE = (SUITE, 0, 0, 300)   # suite, task, seed, max_episode_steps

    def __init__(self, *, arm_joints, finger_joints, frames, control_period_s: float):
        self.arm_joints, self.finger_joints, self.frames = tuple(arm_joints), tuple(finger_joints), frames
        self.control_period_s = float(control_period_s)
        self.episode: FakeEpisode | None = None
        self._views: dict[tuple, tuple] = {}   # the last few renders, by view and scene state
        self._urdf = kin.panda_urdf(self.arm_joints, self.finger_joints, frames.base, frames.end_effector)

    def validate_episode(self, suite: str, task: int, seed: int, max_episode_steps: int) -> None:
        if suite != SUITE:
            raise ValueError(f"unknown suite {suite!r}; valid suites: {SUITE}")
        if isinstance(task, bool) or not isinstance(task, int) or not 0 <= task < len(TASKS):
            raise ValueError(f"task {task!r} out of range for suite {SUITE!r}: valid tasks are 0..{len(TASKS) - 1}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed {seed!r} is invalid: seed must be an integer >= 0")

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> ModelEpisode:
        self.validate_episode(suite, task, seed, max_episode_steps)
        self.episode = FakeEpisode(task, seed, max_episode_steps, self.control_period_s)
        self._views.clear()
        e = self.episode
        return ModelEpisode(SUITE, task, seed, e.task.language, tuple(e.object_names), max_episode_steps)

    def step_twist(self, v: np.ndarray, w: np.ndarray, gripper_gap_m: float) -> ModelStep:
        self.episode.set_gripper_target(gripper_gap_m)
        self.episode.step_twist(v, w)
        return self.last_step()

    def step_joints(self, q_target: np.ndarray, gripper_gap_m: float) -> ModelStep:
        self.episode.set_gripper_target(gripper_gap_m)
        self.episode.step_joints(q_target)
        return self.last_step()

    def last_step(self) -> ModelStep:
        e = self.episode
        return ModelStep(e.step_count, bool(e.success), bool(e.truncated))

    def ee_pose(self):
        T = self.episode.T_world_ee()
        return T[:3, 3].copy(), matrix_to_quat(T[:3, :3])

    def ee_pose_at(self, q_arm):
        T = self.episode.panda.fk(np.clip(np.asarray(q_arm, dtype=float), kin.Q_MIN, kin.Q_MAX))
        return T[:3, 3].copy(), matrix_to_quat(T[:3, :3])

    def joint_state(self):
        e, half = self.episode, self.episode.opening / 2
        rate = e.opening_rate / 2
        return ([*self.arm_joints, *self.finger_joints], np.array([*e.q, half, -half]),
                np.array([*e.qd, rate, -rate]))

    def gripper_opening(self) -> float:
        return float(self.episode.opening)

    def physics_state(self) -> np.ndarray:
        e = self.episode
        poses = [e.objects[name].T[:3, :].ravel() for name in sorted(e.objects)]
        return np.concatenate([e.q, [e.opening], *poses])

    def _static(self) -> list[tuple[str, str, np.ndarray]]:
        f = self.frames
        return [(f.world, f.base, self.episode.panda.T_world_base), ("robot0_link7", HAND, kin.T_FLANGE_HAND),
                (HAND, f.end_effector, kin.T_HAND_TCP), (HAND, f.optical("wrist"), T_HAND_WRIST),
                (f.world, f.optical("agentview"), AGENTVIEW)]

    def transforms(self, *, moving_only: bool = False):
        e, f = self.episode, self.frames
        links = [f.base] + [f"robot0_link{i}" for i in range(1, 8)]
        out = [] if moving_only else [(p, c, T[:3, 3].copy(), matrix_to_quat(T[:3, :3]))
                                      for p, c, T in self._static()]
        for i in range(7):
            T = kin.dh_transform(*kin.DH[i], float(e.q[i]))
            out.append((links[i], links[i + 1], T[:3, 3].copy(), matrix_to_quat(T[:3, :3])))
        for child, sign in zip(FINGER_LINKS, (1.0, -1.0)):
            out.append((HAND, child, np.array([0.0, sign * e.opening / 2, 0.0584]), np.array([0.0, 0.0, 0.0, 1.0])))
        return out

    def static_frames(self) -> set[str]:
        return {c for _p, c, _T in self._static()}

    def _render(self, camera: str, size: int):
        """``(camera, (color, depth, segmentation))`` of a view of the scene as it is now, drawn once per view and
        scene state: an episode's card capture, its world map and its segmentations of the same unmoved scene
        share one render (a 1024 px render is the fake's costliest call). Callers get copies."""
        key = (camera, size, self.physics_state().tobytes())
        view = self._views.get(key)
        if view is None:
            cam = self.episode.camera(camera, size)
            view = (cam, render(self.episode.shapes(), cam))
            while len(self._views) >= MAX_CACHED_VIEWS:
                del self._views[next(iter(self._views))]
            self._views[key] = view
        cam, images = view
        return cam, tuple(image.copy() for image in images)

    def capture(self, camera: str, size: int) -> CameraImage:
        cam, (color, depth, _seg) = self._render(camera, size)
        return CameraImage(color, depth, cam.K, size)

    def stream(self, requests: dict[str, set[str]], size: int,
               deliver: Callable[[dict[str, CameraImage]], None]) -> None:
        """Rendered now, in the caller's thread (the fake's renderer is cheap)."""
        images = {}
        for cam, kinds in requests.items():
            image = self.capture(cam, size)
            images[cam] = dataclasses.replace(image, color=image.color if "color" in kinds else None,
                                              depth=image.depth if "depth" in kinds else None)
        deliver(images)

    def segmentation(self, camera: str, size: int):
        _cam, (_color, _depth, seg) = self._render(camera, size)
        return seg, self.episode.labels()

    def ground_truth(self) -> list[TruthObject]:
        out = []
        for shape in self.episode.objects.values():
            sx = 2 * shape.size[0]
            size = (sx, 2 * shape.size[1] if shape.kind == "box" else sx, 2 * shape.size[2])
            out.append(TruthObject(shape.name, tuple(map(float, shape.T[:3, 3])),
                                   tuple(map(float, matrix_to_quat(shape.T[:3, :3]))), shape.kind,
                                   tuple(map(float, size)), tuple(c / 255.0 for c in shape.color)))
        return out

    def urdf(self) -> str:
        return self._urdf

    def close(self) -> None:
        """Nothing to free."""
