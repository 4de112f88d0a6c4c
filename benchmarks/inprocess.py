"""An in-process twin of the ROS path for benchmarks: ``LiberoRobot`` on a backend that calls LIBERO directly.

:class:`InProcessBackend` implements the :class:`~pyrua_ros.robo.backend.RobotBackend` protocol over a
:class:`~pyrua_ros.sim.env.LiberoEpisode` in this process, with the driver behaviour the sim node has (the same
twist -> OSC mapping and safety filter, the GripperCommand goal's stop rules, captures and ground-truth
segmentation from the same renderer), so a ``run(robo)`` program takes the same control steps either way; what
differs is only the transport. With ``lean_step=False`` the episode steps with LIBERO's stock ``env.step``, which
is what a program calling LIBERO in-process pays.

Benchmarks only (nothing in the product imports it).
"""

from __future__ import annotations

import pathlib

import numpy as np
import yaml

from pyrua_ros.driver.goals import GripperSettings
from pyrua_ros.driver.interfaces import load
from pyrua_ros.robo.backend import CaptureFrame, EePose, GripperOutcome, JointSnapshot, SegmentationFrame
from pyrua_ros.safety import SafetyFilter, SafetyLimits
from pyrua_ros.sim import arm as sim_arm
from pyrua_ros.sim.env import LiberoEpisode
from pyrua_ros.sim_interfaces.status import EpisodeStatus

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRIPPER = GripperSettings()   # the driver core's gripper_action_controller defaults


def _limits() -> SafetyLimits:
    """The driver's safety limits as config/sim.yaml sets them (its ``/**/sim`` entry), else the driver defaults."""
    from pyrua_ros.driver.node import PARAMETERS

    entries = yaml.safe_load((ROOT / "config" / "sim.yaml").read_text())
    p = {name: param.default for name, param in PARAMETERS.items()}
    p.update(next((v["ros__parameters"] for k, v in entries.items() if k.rsplit("/", 1)[-1] == "sim"), {}))
    return SafetyLimits(tuple(p["workspace_min"]), tuple(p["workspace_max"]), float(p["max_linear_speed"]),
                        float(p["max_angular_speed"]))


class InProcessBackend:
    """RobotBackend over a LIBERO episode in this process (built once, reset per episode)."""

    def __init__(self, *, lean_step: bool = True):
        self.names = load()
        self.control_period_s = float(self.names.robot.control_period_s)
        self.cameras = tuple(self.names.robot.cameras)
        self.resolutions = dict(self.names.sim.resolutions)
        self.ep = LiberoEpisode(lean_step=lean_step)
        self.safety = SafetyFilter(_limits())
        self.episode_id = 0
        self._gripper_cmd = -1.0
        # what RosBackend reads from the sim node's osc_action_scale parameter: LIBERO's OSC_POSE scale
        self.osc_action_scale = (sim_arm.OSC_POS_SCALE_M, sim_arm.OSC_ROT_SCALE_RAD)

    # ------------------------------------------------------------------ episode
    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> EpisodeStatus:
        self.ep.reset(suite, task, seed, max_episode_steps)
        self.episode_id += 1
        self._gripper_cmd = -1.0
        return self.status()

    def status(self) -> EpisodeStatus:
        i, s = self.ep.info(), self.ep.last_step()
        return EpisodeStatus(episode_id=self.episode_id, suite=i.suite, task=i.task, seed=i.seed,
                             task_language=i.task_language, step=s.step, sim_time=float(s.sim_time),
                             success=bool(s.success), terminated=bool(s.terminated), truncated=bool(s.truncated),
                             max_episode_steps=i.max_episode_steps, object_names=tuple(i.object_names),
                             clock_mode="lockstep", estop=False, gripper_opening=float(self.ep.gripper_opening()),
                             gripper_target=self._gap_target)

    def ee_pose(self) -> EePose:
        pos, quat = self.ep.eef_pose()
        return EePose(pos=pos, quat_xyzw=quat, stamp=float(self.ep.last_step().sim_time))

    def joints(self) -> JointSnapshot:
        names, q, dq = self.ep.joint_state()
        return JointSnapshot(names=tuple(names), positions=q, velocities=dq)

    def gripper_opening(self) -> float:
        return float(self.ep.gripper_opening())

    # ------------------------------------------------------------------ motion
    def _refused(self) -> None:
        from pyrua_ros.robo.backend import BackendRefused

        s = self.ep.last_step()
        if s.terminated or s.truncated:
            raise BackendRefused("the episode is over", reason="terminated" if s.terminated else "truncated")

    def _step(self, v: np.ndarray, w: np.ndarray) -> None:
        dt = self.control_period_s
        f = self.safety.filter_twist(v, w, self.ep.eef_pose()[0], dt, self.ep.last_step().step)
        a = np.empty(7)
        a[0:3] = np.clip(np.asarray(f.v) * dt / sim_arm.OSC_POS_SCALE_M, -1.0, 1.0)
        a[3:6] = np.clip(np.asarray(f.w) * dt / sim_arm.OSC_ROT_SCALE_RAD, -1.0, 1.0)
        a[6] = self._gripper_cmd
        self.ep.step(a)

    def servo(self, linear: np.ndarray, angular: np.ndarray) -> EePose:
        self._refused()
        self._step(np.asarray(linear, float), np.asarray(angular, float))
        return self.ee_pose()

    @property
    def _gap_target(self) -> float:
        return (1.0 - self._gripper_cmd) / 2.0 * self.names.robot.gripper_open_width_m

    def gripper_target(self, position_m: float) -> bool:
        """The sim node's gripper target: every following step carries it, no step of its own."""
        self._refused()
        open_m = self.names.robot.gripper_open_width_m
        self._gripper_cmd = float(np.clip(1.0 - 2.0 * position_m / open_m, -1.0, 1.0))
        return True

    def gripper(self, position_m: float, max_effort: float = 0.0) -> GripperOutcome:
        """The sim node's GripperCommand goal: arm holding, until the gap is within tolerance, stalls, or the
        step limit passes."""
        self._refused()
        open_m = self.names.robot.gripper_open_width_m
        self._gripper_cmd = float(np.clip(1.0 - 2.0 * position_m / open_m, -1.0, 1.0))
        gaps: list[float] = []
        reached = stalled = False
        while not (self.ep.last_step().terminated or self.ep.last_step().truncated):
            self._step(np.zeros(3), np.zeros(3))
            gaps.append(self.gripper_opening())
            reached = abs(gaps[-1] - position_m) <= GRIPPER.goal_tolerance_m
            recent = gaps[-(GRIPPER.stall_steps + 1):]
            stalled = (len(recent) > GRIPPER.stall_steps and max(recent) - min(recent) < 1e-4
                       and not reached)
            if reached or stalled or len(gaps) >= GRIPPER.max_steps:
                break
        return GripperOutcome(position=gaps[-1] if gaps else self.gripper_opening(), effort=0.0, stalled=stalled,
                              reached_goal=reached, steps=len(gaps))

    # ------------------------------------------------------------------ perception
    def capture(self, camera: str, resolution: str, env_step: int | None = None) -> CaptureFrame:
        cap = self.ep.capture(camera, self.resolutions[resolution], step=env_step)
        step = self.ep.last_step().step if env_step is None else int(env_step)
        return CaptureFrame(camera=camera, resolution=resolution, color=cap.color, depth=cap.depth, K=cap.K,
                            T_world_optical=cap.T_world_optical, stamp=step * self.control_period_s, env_step=step,
                            depth_near=cap.depth_near, depth_far=cap.depth_far)

    def segmentation(self, camera: str, resolution: str, env_step: int | None = None) -> SegmentationFrame:
        ids, labels = self.ep.segmentation(camera, self.resolutions[resolution], step=env_step)
        step = self.ep.last_step().step if env_step is None else int(env_step)
        return SegmentationFrame(ids=ids, labels=labels, stamp=step * self.control_period_s, camera=camera,
                                 resolution=resolution)

    def cancel(self) -> None:
        """Nothing runs asynchronously here."""

    def close(self) -> None:
        self.ep.close()
