"""A driver's core in this process, as a ``RobotBackend``: the ROS path minus the transport.

:class:`InProcessDriver` runs :class:`~pyrua_ros.driver.core.DriverCore` over an ArmModel with its node's own
parameters (its parameter file over the driver's defaults): the sim node's LIBERO-PRO model
(:class:`~pyrua_ros.sim.arm.LiberoArm`, config/sim.yaml) by default, or any driver's (the fake arm's:
``InProcessDriver(fake_arm.node.make_model, params_file=config/fake_arm.yaml)``). It answers ``LiberoRobot``'s
backend calls by calling the core directly: a twist is one lockstep control step, a gripper goal ticks until the
core ends it, captures render in the model. Every rule (safety filter, goal rules, refusals, the state digest) is
the core's, so a ``run(robo)`` program takes the same control steps here as over ROS, bit for bit; what differs is
only DDS. With ``lean_step=False`` LIBERO steps with its stock ``env.step`` (what a program calling LIBERO
in-process pays). The servo verbs stream twists, as on a driver without the Cartesian action, unless
``cartesian_goals`` is set: then each runs as the node's ``MoveToTarget`` goal (the core ticks it to its end), so
the two paths can be compared step for step.

Tests (reproducibility: the same digest in-process and over ROS) and benchmarks (episode overhead) use it; the
product never imports it.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import yaml

from pyrua_ros.driver import cartesian
from pyrua_ros.driver.core import ActiveGoal, DriverConfig, DriverCore, GoalRejected
from pyrua_ros.driver.model import ArmModel
from pyrua_ros.robo.backend import (
    BackendRefused,
    CaptureFrame,
    EePose,
    GripperOutcome,
    JointSnapshot,
    MoveOutcome,
    SegmentationFrame,
)
from pyrua_ros.robo.ros.episode import DEFAULT_OSC_ACTION_SCALE
from pyrua_ros.sim.arm import OSC_POS_SCALE_M, OSC_ROT_SCALE_RAD, LiberoArm
from pyrua_ros.sim_interfaces import blas
from pyrua_ros.sim_interfaces.state_digest import StateTrace
from pyrua_ros.wire.convert import quat_to_matrix
from pyrua_ros.wire.interfaces import load
from pyrua_ros.wire.move_law import ServoLaw

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sim_parameters(params_file: pathlib.Path | None = None) -> dict:
    """The sim node's parameter values: the driver's defaults, then its ``/**/sim`` entry of ``params_file``
    (config/sim.yaml by default)."""
    from pyrua_ros.driver.node import PARAMETERS

    values = {name: param.default for name, param in PARAMETERS.items()}
    entries = yaml.safe_load((params_file or ROOT / "config" / "sim.yaml").read_text()) or {}
    values.update(next((v["ros__parameters"] for k, v in entries.items() if k.rsplit("/", 1)[-1] == "sim"), {}))
    return values


class _Output:
    """The core's DriverOutput: statuses go to the trace; nothing is published."""

    def __init__(self, driver: InProcessDriver):
        self.driver = driver

    def publish_state(self) -> None:
        self.driver.state_trace.observe(self.driver.core.status())

    def publish_status(self) -> None:
        self.publish_state()

    def publish_event(self, event) -> None:
        if event.kind == "clipped":
            self.driver.clipped += 1

    def publish_reset(self) -> None:
        pass

    def goal_feedback(self, goal: ActiveGoal, fields: dict) -> None:
        pass

    def goal_done(self, goal: ActiveGoal) -> None:
        pass


class InProcessDriver:
    """RobotBackend over the driver core and an ArmModel in this process (built once, reset per episode).

    By default the model is the sim node's (LIBERO-PRO, :class:`~pyrua_ros.sim.arm.LiberoArm`, with
    config/sim.yaml); ``make_model(values, names)`` gives any driver's model as its node builds it (e.g.
    :func:`pyrua_ros.fake_arm.node.make_model`), with that driver's ``params_file`` and the ``osc_action_scale``
    its node declares (a node that declares none tracks twists exactly: robo's default)."""

    def __init__(self, make_model: Callable[[dict, Any], ArmModel] | None = None, *, lean_step: bool = True,
                 params_file: pathlib.Path | None = None, osc_action_scale: tuple[float, float] | None = None,
                 blas_kernel: str = "native", cartesian_goals: bool = False):
        """``blas_kernel``: the kernel this process must run on (``haswell``: started with
        ``blas.environment("haswell")``; a clear BlasKernelError otherwise, as the pin cannot be set once NumPy is
        loaded). ``lean_step``: LIBERO's own model only."""

        blas.require(blas_kernel)

        self.names = load()
        values = sim_parameters(params_file)
        values["clock_mode"] = "lockstep"
        if make_model is None:
            self.model = LiberoArm(stream_resolution=int(values["stream_resolution"]),
                                   gripper_open_m=self.names.robot.gripper_open_width_m,
                                   control_period_s=self.names.robot.control_period_s, lean_step=lean_step)
            # what RosBackend reads from the sim node's osc_action_scale parameter: LIBERO's OSC_POSE scale
            scale = (OSC_POS_SCALE_M, OSC_ROT_SCALE_RAD)
        else:
            self.model, scale = make_model(values, self.names), DEFAULT_OSC_ACTION_SCALE
        self.osc_action_scale = tuple(osc_action_scale or scale)
        self.core = DriverCore(self.model, DriverConfig.from_parameters(values, self.names), _Output(self))
        self.control_period_s = float(self.names.robot.control_period_s)
        self.cameras = tuple(self.names.robot.cameras)
        self.resolutions = dict(self.names.sim.resolutions)
        self.state_trace = StateTrace()
        self.clipped = 0
        self.cartesian_goals = cartesian_goals

    # ------------------------------------------------------------------ episode and state
    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int):
        self.clipped = 0
        return self.core.reset(suite, int(task), int(seed), int(max_episode_steps))

    def status(self):
        return self.core.status()

    def ee_pose(self) -> EePose:
        pos, quat = self.model.ee_pose()
        return EePose(pos=np.asarray(pos, float), quat_xyzw=np.asarray(quat, float), stamp=self.core.sim_time)

    def joints(self) -> JointSnapshot:
        names, q, dq = self.model.joint_state()
        return JointSnapshot(names=tuple(names), positions=np.asarray(q), velocities=np.asarray(dq))

    def gripper_opening(self) -> float:
        return float(self.model.gripper_opening())

    def clipped_steps(self) -> int:
        return self.clipped

    # ------------------------------------------------------------------ motion
    def _refused(self, what: str) -> None:
        why = self.core.motion_refusal()
        if why is None:
            return
        st = self.core.status()
        reason = "terminated" if st.terminated else "truncated" if st.truncated else "estop" if st.estop else "refused"
        raise BackendRefused(f"{what}: {why}", reason=reason)

    def servo(self, linear: np.ndarray, angular: np.ndarray) -> EePose:
        self._refused("servo")
        before = self.core.status().step
        self.core.on_twist(np.asarray(linear, float), np.asarray(angular, float), "", time.monotonic())
        if self.core.status().step == before:
            self._refused("servo")
            raise BackendRefused("servo: the twist was refused", reason="refused")
        return self.ee_pose()

    def gripper_target(self, position_m: float) -> bool:
        """The sim node's gripper target topic: every following step carries it (no step of its own)."""
        self._refused("gripper target")
        target = float(np.clip(position_m, 0.0, self.core.config.gripper_open_m))
        self.core.on_gripper_target([target])
        if abs(self.core.status().gripper_target - target) > 1e-9:
            raise BackendRefused(f"gripper target {position_m} m refused by the driver", reason="refused")
        return True

    def gripper(self, position_m: float, max_effort: float = 0.0) -> GripperOutcome:
        self._refused("gripper")
        start = self.core.status().step
        try:
            self.core.check_gripper_goal(float(position_m))
        except GoalRejected as exc:
            raise BackendRefused(f"gripper: {exc}", reason="refused") from exc
        goal = self.core.start_gripper(float(position_m))
        while self.core.tick():
            pass
        outcome = goal.outcome
        if outcome is not None and outcome.status == "aborted":
            self._refused("gripper")
        f = outcome.fields if outcome is not None else {}
        return GripperOutcome(position=float(f.get("position", self.gripper_opening())),
                              effort=float(f.get("effort", 0.0)), stalled=bool(f.get("stalled", False)),
                              reached_goal=bool(f.get("reached_goal", False)),
                              steps=self.core.status().step - start)

    def move_to_target(self, law: ServoLaw, gripper_m: float, *, max_steps: int) -> MoveOutcome | None:
        """The sim node's MoveToTarget action when ``cartesian_goals`` is set (None otherwise: robo streams
        twists): the core runs the servo verb's loop to its end; one ended by the episode's end is a normal end."""
        if not self.cartesian_goals:
            return None
        self._refused("move_to_target")
        target = [float(v) for v in (law.target if law.target is not None else self.model.ee_pose()[0])]
        law = cartesian.arguments(law, linear_scale=self.osc_action_scale[0], angular_scale=self.osc_action_scale[1],
                                  max_steps=max_steps)
        try:
            self.core.check_cartesian_goal(target, float(gripper_m), **law)
        except GoalRejected as exc:
            raise BackendRefused(f"move_to_target: {exc}", reason="refused") from exc
        goal = self.core.start_cartesian(target, float(gripper_m), **law)
        while self.core.tick():
            pass
        outcome = goal.outcome
        if outcome.status != "succeeded" and not self.core.model.last_step().over:
            self._refused("move_to_target")
            raise BackendRefused(f"move_to_target: {outcome.message}", reason="refused")
        f = outcome.fields
        return MoveOutcome(iterations=int(f["iterations"]), final_pos=np.array(f["final_position"], dtype=float),
                           final_quat=np.array(f["final_orientation"], dtype=float), step=int(f["step"]))

    # ------------------------------------------------------------------ perception
    def _optical_pose(self, camera: str) -> np.ndarray:
        """T_world_optical now, chained through the model's frames."""
        parents = {child: (parent, t, q) for parent, child, t, q in self.model.transforms()}
        T, name = np.eye(4), self.names.frames.optical(camera)
        while name != self.names.frames.world:
            parent, t, q = parents[name]
            step = np.eye(4)
            step[:3, :3], step[:3, 3] = quat_to_matrix(q), t
            T, name = step @ T, parent
        return T

    def capture(self, camera: str, resolution: str, env_step: int | None = None) -> CaptureFrame:
        size = self.resolutions[resolution]
        step = self.core.status().step if env_step is None else int(env_step)
        if env_step is None:
            image, T = self.model.capture(camera, size), self._optical_pose(camera)
        else:
            image, T = self._past(camera).capture_past(camera, size, step)
        near, far = image.depth_range or (None, None)
        return CaptureFrame(camera=camera, resolution=resolution, color=image.color, depth=image.depth, K=image.K,
                            T_world_optical=T, stamp=self.core.time_base + step * self.control_period_s,
                            env_step=step, depth_near=near, depth_far=far)

    def segmentation(self, camera: str, resolution: str, env_step: int | None = None) -> SegmentationFrame:
        size = self.resolutions[resolution]
        step = self.core.status().step if env_step is None else int(env_step)
        if env_step is None:
            ids, labels = self.model.segmentation(camera, size)
        else:
            ids, labels = self._past(camera).segmentation(camera, size, step=env_step)
        return SegmentationFrame(ids=ids, labels=labels, stamp=self.core.time_base + step * self.control_period_s,
                                 camera=camera, resolution=resolution)

    def _past(self, camera: str):
        """The model, when it renders past control steps (LIBERO's does); else BackendRefused, as the node of a
        driver without the sim's ``capture_step`` refuses."""
        if not hasattr(self.model, "capture_past"):
            raise BackendRefused(f"{camera}: this driver renders the current state only", reason="refused")
        return self.model

    def cancel(self) -> None:
        """Nothing runs asynchronously here."""

    def close(self) -> None:
        self.model.close()
