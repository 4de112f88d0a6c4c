"""The LIBERO-PRO simulation node (ROS wiring only): the driver surface and the sim interfaces over one episode.

Behaviour is specified in docs/DESIGN.md ("Sim interfaces", "Driver surface behaviour"); names come from
config/interfaces.yaml, parameters from config/sim.yaml. The episode itself (``sim/env.py``) has no rclpy.

Threading: one SingleThreadedExecutor in the main thread, one (default, mutually exclusive) callback group.
Nothing blocks on another callback: lockstep twists step inside their subscription callback; an action goal is
an ``async`` execute callback awaiting a future that the goal ticker completes. The ticker (a fast timer in
lockstep, the control timer in realtime) advances the one active goal by one control step per call, so e-stop,
cancel requests, services and status reads are served between any two steps.
(``rclpy.experimental.EventsExecutor`` was tried: in rclpy 9.1.2 an ActionServer under it never answers a goal
request, with a sync or an async execute callback, so it is not used.)
"""

from __future__ import annotations

import dataclasses
import json
import math
import time

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from geometry_msgs.msg import PoseStamped, TwistStamped
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from pyrua_ros.driver import qos
from pyrua_ros.driver.convert import (
    camera_info_msg,
    image_msg,
    pose_msg,
    pose_stamped_msg,
    quat_to_matrix,
    time_msg,
    transform_stamped_msg,
)
from pyrua_ros.driver.interfaces import load
from pyrua_ros.safety import EStop, SafetyFilter, SafetyLimits, refusal
from pyrua_ros.sim.clock import RateGate, make_clock
from pyrua_ros.sim.env import EpisodeOver, LiberoEpisode
from pyrua_ros.sim.suites import validate_episode
from pyrua_ros.sim_interfaces import CLOCK_MODES, EpisodeStatus

OSC_POS_SCALE_M = 0.05      # LIBERO OSC_POSE: action 1.0 = 5 cm per control step
OSC_ROT_SCALE_RAD = 0.5     # action 1.0 = 0.5 rad per control step
# [m/s], [rad/s]: the norm of a full action on all three axes at LIBERO's 20 Hz, rounded up (so the safety filter's
# defaults never cut what the OSC range allows, as in the reference, which has no such filter)
OSC_LINEAR_LIMIT = 1.75
OSC_ANGULAR_LIMIT = 17.5
GRIPPER_TOLERANCE_M = 0.004
GRIPPER_STALL_STEPS = 3
GRIPPER_MAX_STEPS = 40
JOINT_TOLERANCE_RAD = 0.05  # default goal tolerance when a goal gives none
SETTLE_STEPS = 10           # extra control steps after the last trajectory point to meet the tolerance
EPISODE_PARAMS = ("suite", "task", "seed", "max_episode_steps")

# name -> (default, description); the defaults match config/sim.yaml.
PARAMETERS = {
    "suite": ("libero_goal", "LIBERO-PRO suite of the episode /sim/reset starts"),
    "task": (8, "task index within the suite"),
    "seed": (0, "seed: init state init_states[seed % n] and env.seed(seed)"),
    "max_episode_steps": (10000, "control steps after which the episode is truncated"),
    "clock_mode": ("lockstep", "lockstep: one step per twist; realtime: a wall timer at control_freq (startup only)"),
    "control_freq": (20.0, "[Hz] control steps per second of sim time (startup only)"),
    "command_timeout_s": (0.1, "[s] realtime: the last twist drops to zero after this long (startup only)"),
    "camera_rate_hz": (2.0, "[Hz] stream camera rate, sim time in lockstep, wall time in realtime (startup only)"),
    "stream_resolution": (256, "[px] square stream camera images (startup only)"),
    "stream_backlog": (16, "stream frames waiting for the render thread before the oldest is dropped (startup only)"),
    "render_nice": (10, "CPU niceness added to the render thread, so control steps come first (startup only)"),
    "workspace_min": ([-0.7, -0.6, 0.0], "[m] world box min corner for the end effector (startup only)"),
    "workspace_max": ([0.5, 0.6, 1.5], "[m] world box max corner for the end effector (startup only)"),
    # the defaults let every twist the OSC action range allows through (1.0 on each axis); a real arm sets its own
    "max_linear_speed": (OSC_LINEAR_LIMIT, "[m/s] twist linear speed limit (startup only)"),
    "max_angular_speed": (OSC_ANGULAR_LIMIT, "[rad/s] twist angular speed limit (startup only)"),
    "capture_step": (-1, "sim interface: the next capture / segmentation renders the scene as it was at this control "
                         "step (one shot, back to -1 = now after it)"),
}
ONE_SHOT_PARAMS = ("capture_step",)


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """The node's startup parameters (episode selection lives in the parameters themselves, read at reset)."""

    clock_mode: str
    control_freq: float
    command_timeout_s: float
    camera_rate_hz: float
    stream_resolution: int
    stream_backlog: int
    render_nice: int
    limits: SafetyLimits

    @property
    def dt(self) -> float:
        return 1.0 / self.control_freq

    @classmethod
    def from_values(cls, v: dict) -> SimConfig:
        if v["clock_mode"] not in CLOCK_MODES:
            raise ValueError(f"clock_mode {v['clock_mode']!r} is not one of {list(CLOCK_MODES)}")
        if v["control_freq"] <= 0 or v["stream_resolution"] <= 0 or v["stream_backlog"] < 1:
            raise ValueError("control_freq and stream_resolution must be > 0, stream_backlog >= 1")
        limits = SafetyLimits(tuple(v["workspace_min"]), tuple(v["workspace_max"]), float(v["max_linear_speed"]),
                              float(v["max_angular_speed"]))
        return cls(v["clock_mode"], float(v["control_freq"]), float(v["command_timeout_s"]),
                   float(v["camera_rate_hz"]), int(v["stream_resolution"]), int(v["stream_backlog"]),
                   int(v["render_nice"]), limits)


class _Goal:
    """The one active action goal: its handle, the future its execute callback awaits, and its runner."""

    def __init__(self, handle, runner):
        self.handle, self.runner, self.future = handle, runner, Future()


class _GripperRunner:
    """GripperCommand: step with the arm holding until the gap is reached, stalls, or GRIPPER_MAX_STEPS pass."""

    def __init__(self, node: SimNode, target_m: float):
        self.node, self.target = node, target_m
        self.gaps: list[float] = []

    def result(self):
        gap = self.gaps[-1] if self.gaps else self.node.ep.gripper_opening()
        reached = abs(gap - self.target) <= GRIPPER_TOLERANCE_M
        recent = self.gaps[-(GRIPPER_STALL_STEPS + 1):]
        stalled = len(recent) > GRIPPER_STALL_STEPS and max(recent) - min(recent) < 1e-4 and not reached
        return GripperCommand.Result(position=float(gap), effort=0.0, stalled=stalled, reached_goal=reached)

    def step(self):
        """One control step; returns (succeeded, result) when done, else None."""
        self.node.step_motion(np.zeros(6))
        self.gaps.append(self.node.ep.gripper_opening())
        res = self.result()
        fb = GripperCommand.Feedback(position=res.position, effort=0.0, stalled=res.stalled,
                                     reached_goal=res.reached_goal)
        self.node.gripper_server_feedback(fb)
        if res.reached_goal or res.stalled:
            return True, res
        if len(self.gaps) >= GRIPPER_MAX_STEPS:
            return False, res
        return None

    def stop(self, reason: str):
        return self.result()


class _TrajectoryRunner:
    """FollowJointTrajectory: one joint-position control step per control period of ``time_from_start``."""

    def __init__(self, node: SimNode, goal, arm_joints: tuple[str, ...]):
        self.node, self.names = node, list(goal.trajectory.joint_names)
        self.idx = [arm_joints.index(n) for n in self.names]
        names, pos, _ = node.ep.joint_state()
        self.q0 = np.array([pos[list(names).index(n)] for n in arm_joints])
        pts = goal.trajectory.points
        self.times = np.array([0.0] + [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in pts])
        self.path = np.array([self.q0[self.idx]] + [list(p.positions) for p in pts])
        tol = {t.name: t.position for t in goal.goal_tolerance if t.position > 0}
        self.tol = np.array([tol.get(n, JOINT_TOLERANCE_RAD) for n in self.names])
        self.k = 0
        self.n = max(1, math.ceil(self.times[-1] / node.config.dt - 1e-9))

    def desired(self, t: float) -> np.ndarray:
        q = self.q0.copy()
        q[self.idx] = [np.interp(t, self.times, self.path[:, j]) for j in range(len(self.names))]
        return q

    def actual(self) -> np.ndarray:
        names, pos, _ = self.node.ep.joint_state()
        return np.array([pos[list(names).index(n)] for n in self.names])

    def step(self):
        self.k += 1
        t = min(self.k, self.n) * self.node.config.dt
        q_des = self.desired(t)
        self.node.step_joints(q_des)
        actual = self.actual()
        err = q_des[self.idx] - actual
        fb = FollowJointTrajectory.Feedback(joint_names=self.names)
        fb.header.stamp = self.node.stamp()
        fb.desired.positions, fb.actual.positions, fb.error.positions = \
            list(map(float, q_des[self.idx])), list(map(float, actual)), list(map(float, err))
        self.node.trajectory_server_feedback(fb)
        if self.k < self.n:
            return None
        final_err = self.path[-1] - actual
        if np.all(np.abs(final_err) <= self.tol):
            self.node.ep.end_joint_control()
            return True, FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL)
        if self.k < self.n + SETTLE_STEPS:
            return None
        self.node.ep.end_joint_control()
        bad = ", ".join(f"{n}: {e:+.4f} rad (tolerance {t})" for n, e, t in zip(self.names, final_err, self.tol)
                        if abs(e) > t)
        return False, FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED,
                                                   error_string=f"final joint error beyond tolerance: {bad}")

    def stop(self, reason: str):
        self.node.ep.end_joint_control()
        return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL if reason == "canceled"
                                            else FollowJointTrajectory.Result.INVALID_GOAL,
                                            error_string=f"{reason} after {self.k} of {self.n} steps")


def trajectory_goal_error(goal, arm_joints: tuple[str, ...]) -> tuple[int, str] | None:
    """(error_code, error_string) if a FollowJointTrajectory goal is not executable, else None."""
    R = FollowJointTrajectory.Result
    names = list(goal.trajectory.joint_names)
    unknown = [n for n in names if n not in arm_joints]
    if not names or unknown or len(set(names)) != len(names):
        return R.INVALID_JOINTS, (f"joint_names {names} must be distinct names from the arm joints "
                                  f"{list(arm_joints)}; unknown: {unknown}")
    pts = goal.trajectory.points
    if not pts:
        return R.INVALID_GOAL, "trajectory has no points"
    last = -1.0
    for i, p in enumerate(pts):
        t = p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
        if len(p.positions) != len(names):
            return R.INVALID_GOAL, f"point {i} has {len(p.positions)} positions for {len(names)} joint_names"
        if p.velocities and len(p.velocities) != len(names):
            return R.INVALID_GOAL, f"point {i} has {len(p.velocities)} velocities for {len(names)} joint_names"
        if not all(math.isfinite(v) for v in p.positions):
            return R.INVALID_GOAL, f"point {i} has non-finite positions"
        if t <= last:
            return R.INVALID_GOAL, f"point {i} time_from_start {t:.3f} s is not after the previous point"
        last = t
    return None


class SimNode(Node):
    """The ``sim`` node. Entities are created here; callbacks are the named methods below."""

    def __init__(self):
        super().__init__("sim")
        self.names = load()
        for name, (default, desc) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=desc))
        self.config = SimConfig.from_values({n: self.get_parameter(n).value for n in PARAMETERS})
        self.add_on_set_parameters_callback(self.on_set_parameters)
        self.clock = make_clock(self.config.clock_mode, self.config.command_timeout_s)
        self.safety = SafetyFilter(self.config.limits)
        self.estop = EStop()
        self.ep = LiberoEpisode(stream_resolution=self.config.stream_resolution,
                                stream_backlog=self.config.stream_backlog, render_nice=self.config.render_nice)
        self.episode_id = 0
        self.gripper_cmd = -1.0
        self.goal: _Goal | None = None
        self._create_publishers()
        self._create_interfaces()
        self.reset_episode()
        self.get_logger().info(f"sim node ready ({self.config.clock_mode}); {self.status().to_json()}")

    # ---------------------------------------------------------------- wiring
    def _create_publishers(self) -> None:
        d, s = self.names.driver, self.names.sim
        self.pub_pose = self.create_publisher(PoseStamped, d.ee_pose, qos.LOCKSTEP)
        self.pub_joints = self.create_publisher(JointState, d.joint_states, qos.LOCKSTEP)
        self.pub_tf = self.create_publisher(TFMessage, d.tf, qos.LOCKSTEP)
        self.pub_tf_static = self.create_publisher(TFMessage, d.tf_static, qos.TF_STATIC)
        self.pub_clock = self.create_publisher(ClockMsg, d.clock, qos.LOCKSTEP)
        self.pub_status = self.create_publisher(String, s.episode_status, qos.LATCHED)
        self.pub_urdf = self.create_publisher(String, d.robot_description, qos.LATCHED)
        self.pub_safety = self.create_publisher(String, d.safety_events, qos.EVENTS)
        self.pub_truth = self.create_publisher(MarkerArray, s.ground_truth, qos.LATCHED)
        self.pub_labels = self.create_publisher(String, s.segmentation_labels, qos.LATCHED)
        self.streams = {cam: (self.create_publisher(Image, d.color(cam), qos.STREAM),
                              self.create_publisher(Image, d.depth(cam), qos.STREAM),
                              self.create_publisher(CameraInfo, d.info(cam), qos.STREAM))
                        for cam in self.names.robot.cameras}
        self.captures = {(cam, res): {k: self.create_publisher(Image if k != "camera_info" else CameraInfo, topic,
                                                               qos.LATCHED)
                                      for k, topic in s.capture_topics(cam, res).items()}
                         for cam in self.names.robot.cameras for res in s.resolutions}
        self.camera_gate = RateGate(self.config.camera_rate_hz)
        self.truth_gate = RateGate(self.config.camera_rate_hz)

    def _create_interfaces(self) -> None:
        d, s = self.names.driver, self.names.sim
        self.create_subscription(TwistStamped, d.servo_twist, self.on_twist, qos.LOCKSTEP)
        self.create_subscription(Bool, d.estop, self.on_estop, qos.LOCKSTEP)
        self.create_service(Trigger, s.reset, self.on_reset)
        for cam in self.names.robot.cameras:
            for res in s.resolutions:
                self.create_service(Trigger, s.capture_service(cam, res),
                                    lambda rq, rs, c=cam, r=res: self.on_capture(c, r, rs))
                self.create_service(Trigger, s.segmentation_service(cam, res),
                                    lambda rq, rs, c=cam, r=res: self.on_segmentation(c, r, rs))
        accept = dict(goal_callback=lambda _g: GoalResponse.ACCEPT, cancel_callback=lambda _g: CancelResponse.ACCEPT)
        self.fjt_server = ActionServer(self, FollowJointTrajectory, d.follow_joint_trajectory,
                                       execute_callback=self.execute_trajectory, **accept)
        self.gripper_server = ActionServer(self, GripperCommand, d.gripper_command,
                                           execute_callback=self.execute_gripper, **accept)
        if self.config.clock_mode == "realtime":
            self.goal_timer = None
            self.control_timer = self.create_timer(self.config.dt, self.on_control_tick)
        else:
            self.goal_timer = self.create_timer(0.0005, self.tick_goal)
            self.goal_timer.cancel()

    # ---------------------------------------------------------------- parameters and reset
    def on_set_parameters(self, params) -> SetParametersResult:
        """Validate parameter changes: episode selection is checked against the suites; the rest is startup-only."""
        startup = [p.name for p in params
                   if p.name in PARAMETERS and p.name not in EPISODE_PARAMS + ONE_SHOT_PARAMS]
        if startup:
            return SetParametersResult(successful=False, reason=f"{startup} are read at startup only; restart the "
                                       f"node to change them. Settable now: {list(EPISODE_PARAMS)}")
        for p in params:
            last = self.ep.last_step().step
            if p.name == "capture_step" and not (isinstance(p.value, int) and -1 <= p.value <= last):
                return SetParametersResult(successful=False, reason=f"capture_step must be -1 (now) or a past step "
                                           f"0..{self.ep.last_step().step}, got {p.value!r}")
        values = {n: self.get_parameter(n).value for n in EPISODE_PARAMS}
        values.update({p.name: p.value for p in params if p.name in EPISODE_PARAMS})
        try:
            validate_episode(values["suite"], values["task"], values["seed"])
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        steps = values["max_episode_steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            return SetParametersResult(successful=False, reason=f"max_episode_steps must be an integer >= 1, "
                                       f"got {steps!r}")
        return SetParametersResult(successful=True)

    def reset_episode(self) -> EpisodeStatus:
        """Reset to the episode parameters and publish the initial state (statics, URDF, state, status)."""
        if self.goal is not None:
            self._finish_goal(False, self.goal.runner.stop("aborted by an episode reset"))
        v = {n: self.get_parameter(n).value for n in EPISODE_PARAMS}
        self.info = self.ep.reset(v["suite"], v["task"], v["seed"], v["max_episode_steps"])
        self.episode_id += 1
        self.gripper_cmd = -1.0
        self.clock.clear()
        self.camera_gate.reset()
        self.truth_gate.reset()
        stamp = self.stamp()
        static = self.ep.static_frames()
        self.pub_tf_static.publish(TFMessage(transforms=[transform_stamped_msg(p, c, t, q, stamp)
                                                         for p, c, t, q in self.ep.link_transforms() if c in static]))
        self.pub_urdf.publish(String(data=self.ep.urdf()))
        self.publish_state()
        return self.status()

    def on_reset(self, _req, resp):
        try:
            resp.message = self.reset_episode().to_json()
            resp.success = True
        except Exception as exc:  # the node keeps serving after a failed reset
            self.get_logger().error(f"reset failed: {exc!r}")
            resp.success, resp.message = False, f"reset failed: {exc}"
        return resp

    # ---------------------------------------------------------------- state
    def stamp(self):
        return time_msg(self.ep.last_step().sim_time)

    def status(self) -> EpisodeStatus:
        i, s = self.info, self.ep.last_step()
        return EpisodeStatus(episode_id=self.episode_id, suite=i.suite, task=i.task, seed=i.seed,
                             task_language=i.task_language, step=s.step, sim_time=float(s.sim_time),
                             success=bool(s.success), terminated=bool(s.terminated), truncated=bool(s.truncated),
                             max_episode_steps=i.max_episode_steps, object_names=tuple(i.object_names),
                             clock_mode=self.config.clock_mode, estop=self.estop.active,
                             gripper_opening=float(self.ep.gripper_opening()))

    def publish_state(self) -> None:
        """Publish /ee_pose, /joint_states, /tf, /clock and episode status, in that order; then due cameras."""
        stamp, world = self.stamp(), self.names.frames.world
        pos, quat = self.ep.eef_pose()
        self.pub_pose.publish(pose_stamped_msg(pos, quat, stamp, world))
        names, q, dq = self.ep.joint_state()
        js = JointState(name=list(names), position=[float(x) for x in q], velocity=[float(x) for x in dq])
        js.header.stamp = stamp
        self.pub_joints.publish(js)
        self.pub_tf.publish(TFMessage(transforms=[transform_stamped_msg(p, c, t, r, stamp)
                                                  for p, c, t, r in self.ep.link_transforms(moving_only=True)]))
        self.pub_clock.publish(ClockMsg(clock=stamp))
        self.pub_status.publish(String(data=self.status().to_json()))
        now = self.clock.camera_time(self.ep.last_step().sim_time, time.monotonic())
        if self.truth_gate.ready(now):
            self.publish_ground_truth(stamp)
        self.publish_streams(now, stamp)

    def publish_ground_truth(self, stamp) -> None:
        markers = MarkerArray()
        for k, (name, (pos, quat)) in enumerate(sorted(self.ep.object_poses().items())):
            for ns, kind in (("objects", Marker.SPHERE), ("labels", Marker.TEXT_VIEW_FACING)):
                m = Marker(ns=ns, id=k, type=kind, action=Marker.ADD, text=name if ns == "labels" else "")
                m.header.stamp, m.header.frame_id = stamp, self.names.frames.world
                m.pose = pose_msg(np.asarray(pos) + ([0, 0, 0.06] if ns == "labels" else 0), quat)
                m.scale.x = m.scale.y = m.scale.z = 0.03
                m.color.r, m.color.g, m.color.b, m.color.a = 0.1, 0.8, 0.3, 0.9
                markers.markers.append(m)
        self.pub_truth.publish(markers)

    def publish_streams(self, now: float, stamp) -> None:
        """Queue a stream frame of the cameras that have subscribers, at most camera_rate_hz: color and/or depth as
        subscribed (camera_info with either). The render thread renders and publishes it; a frame it cannot keep
        up with is dropped, never waited for."""
        wanted = {}
        for cam, (color, depth, info) in self.streams.items():
            kinds = {k for k, pub in (("color", color), ("depth", depth)) if pub.get_subscription_count()}
            if not kinds and info.get_subscription_count():
                kinds = {"color"}           # camera_info alone still follows the rendered frames
            if kinds:
                wanted[cam] = kinds
        if not wanted or not self.camera_gate.ready(now):
            return
        self.ep.stream(wanted, lambda caps: [self._publish_capture(self.streams[c.camera], c, stamp) for c in caps])

    def _publish_capture(self, pubs, cap, stamp) -> None:
        """Publish what ``cap`` holds (color, depth) and its camera_info, all with ``stamp``."""
        frame = self.names.frames.optical(cap.camera)
        if cap.color is not None:
            pubs[0].publish(image_msg(cap.color, stamp, frame, "rgb8"))
        if cap.depth is not None:
            pubs[1].publish(image_msg(cap.depth, stamp, frame, "32FC1"))
        pubs[2].publish(camera_info_msg(cap.K, cap.width, cap.height, stamp, frame))

    def report(self, event) -> None:
        self.pub_safety.publish(String(data=event.to_json()))

    # ---------------------------------------------------------------- stepping
    def motion_refusal(self) -> str | None:
        """Why motion is refused now, or None."""
        if self.estop.active:
            return "e-stop is latched; publish false on the e-stop topic to release it"
        s = self.ep.last_step()
        if s.terminated or s.truncated:
            return (f"episode over ({'terminated: success' if s.terminated else 'truncated'} at step {s.step}); "
                    "call the reset service")
        return None

    def _osc_action(self, motion: np.ndarray) -> np.ndarray:
        a = np.empty(7)
        a[0:3] = np.clip(motion[0:3] * self.config.dt / OSC_POS_SCALE_M, -1.0, 1.0)
        a[3:6] = np.clip(motion[3:6] * self.config.dt / OSC_ROT_SCALE_RAD, -1.0, 1.0)
        a[6] = self.gripper_cmd
        return a

    def step_motion(self, motion: np.ndarray) -> None:
        """One OSC control step with a filtered twist [m/s, rad/s, world] and the latched gripper; publishes."""
        self.ep.step(self._osc_action(np.asarray(motion, dtype=float)))
        self.publish_state()

    def step_joints(self, q_target: np.ndarray) -> None:
        self.ep.step_joints(q_target, self.gripper_cmd)
        self.publish_state()

    def on_twist(self, msg: TwistStamped) -> None:
        v = np.array([msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z])
        w = np.array([msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z])
        step = self.ep.last_step().step
        frame = msg.header.frame_id or self.names.frames.world
        if frame == self.names.frames.end_effector:  # rotate an end-effector-frame twist into the world
            R = quat_to_matrix(self.ep.eef_pose()[1])
            v, w = R @ v, R @ w
        elif frame != self.names.frames.world:
            self.report(refusal(v, w, f"twist frame_id {frame!r} is not supported; use "
                                      f"{[self.names.frames.world, self.names.frames.end_effector, '']}", step))
            self.pub_status.publish(String(data=self.status().to_json()))
            return
        reason = self.motion_refusal() or ("an action goal is executing" if self.goal is not None else None)
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(w))):
            reason = "twist has non-finite values"
        if reason:
            self.report(refusal(v, w, reason, step))
            self.pub_status.publish(String(data=self.status().to_json()))
            return
        motion = self.clock.on_command(np.concatenate([v, w]), time.monotonic())
        if motion is not None:
            self._filter_and_step(motion)

    def _filter_and_step(self, motion: np.ndarray) -> None:
        """Run the safety filter on a twist [vx, vy, vz, wx, wy, wz] from the current pose, report a clip, step."""
        f = self.safety.filter_twist(motion[:3], motion[3:], self.ep.eef_pose()[0], self.config.dt,
                                     self.ep.last_step().step)
        if f.event:
            self.report(f.event)
        self._safe_step(lambda: self.step_motion(np.concatenate([f.v, f.w])))

    def _safe_step(self, fn) -> bool:
        try:
            fn()
            return True
        except EpisodeOver as exc:
            self.report(refusal((0,) * 3, (0,) * 3, f"episode over: {exc}", self.ep.last_step().step))
            self.pub_status.publish(String(data=self.status().to_json()))
            return False

    def on_control_tick(self) -> None:
        """Realtime: advance the active goal, else step the held twist (zero after the command timeout)."""
        if self.goal is not None:
            return self.tick_goal()
        if self.motion_refusal():
            return None
        self._filter_and_step(self.clock.on_tick(time.monotonic()))
        return None

    def on_estop(self, msg: Bool, info) -> None:
        if not self.estop.set(msg.data):
            return
        from pyrua_ros.driver.publishers import sample_origin

        self.get_logger().warn(f"e-stop {'TRIPPED' if msg.data else 'released'} "
                               f"{sample_origin(self, self.names.driver.estop, info)}")
        self.clock.clear()
        if msg.data and self.goal is not None:
            self._finish_goal(False, self.goal.runner.stop("aborted by the e-stop"))
        self.report(refusal((0,) * 3, (0,) * 3, "e-stop tripped: motion refused until released" if msg.data
                            else "e-stop released", self.ep.last_step().step))
        self.pub_status.publish(String(data=self.status().to_json()))

    # ---------------------------------------------------------------- actions
    def trajectory_server_feedback(self, fb) -> None:
        if self.goal is not None:
            self.goal.handle.publish_feedback(fb)

    gripper_server_feedback = trajectory_server_feedback

    async def execute_trajectory(self, handle):
        err = trajectory_goal_error(handle.request, self.names.robot.arm_joints)
        refused = self.motion_refusal()
        if err or refused:
            handle.abort()
            code = err[0] if err else FollowJointTrajectory.Result.INVALID_GOAL
            return FollowJointTrajectory.Result(error_code=code, error_string=err[1] if err else f"refused: {refused}")
        return await self._run(handle, _TrajectoryRunner(self, handle.request, self.names.robot.arm_joints))

    async def execute_gripper(self, handle):
        target = float(handle.request.command.position)
        refused = self.motion_refusal()
        if refused or not math.isfinite(target):
            self.get_logger().warn(f"gripper goal refused: {refused or 'position is not finite'}")
            handle.abort()
            return GripperCommand.Result(position=float(self.ep.gripper_opening()))
        open_m = self.names.robot.gripper_open_width_m
        self.gripper_cmd = float(np.clip(1.0 - 2.0 * target / open_m, -1.0, 1.0))
        return await self._run(handle, _GripperRunner(self, target))

    async def _run(self, handle, runner):
        if self.goal is not None:
            self._finish_goal(False, self.goal.runner.stop("preempted by a new goal"))
        self.goal = _Goal(handle, runner)
        if self.goal_timer is not None:
            self.goal_timer.reset()
        return await self.goal.future

    def tick_goal(self) -> None:
        """Advance the active goal by one control step, or finish it (cancel, e-stop, episode over)."""
        g = self.goal
        if g is None:
            if self.goal_timer is not None:
                self.goal_timer.cancel()
            return
        if g.handle.is_cancel_requested:
            return self._finish_goal(None, g.runner.stop("canceled"))
        reason = self.motion_refusal()
        if reason:
            return self._finish_goal(False, g.runner.stop(f"aborted: {reason}"))
        try:
            done = g.runner.step()
        except EpisodeOver as exc:
            return self._finish_goal(False, g.runner.stop(f"aborted: episode over ({exc})"))
        if done is not None:
            self._finish_goal(*done)
        return None

    def _finish_goal(self, succeeded: bool | None, result) -> None:
        """End the active goal: succeeded True/False, or None for canceled; hand the result to its execute."""
        g, self.goal = self.goal, None
        if succeeded is None:
            g.handle.canceled()
        elif succeeded:
            g.handle.succeed()
        else:
            g.handle.abort()
        g.future.set_result(result)

    # ---------------------------------------------------------------- captures
    def _capture_reply(self, camera: str, resolution: str, resp, stamp, *, step: int,
                       extra: dict | None = None) -> None:
        resp.success = True
        resp.message = json.dumps({"stamp": [stamp.sec, stamp.nanosec], "step": step, "camera": camera,
                                   "resolution": resolution, **(extra or {})})

    def _take_capture_step(self) -> tuple[int | None, object, int]:
        """The step the next render shows (one-shot ``capture_step``, None = now), its stamp and step number."""
        requested = int(self.get_parameter("capture_step").value)
        if requested < 0:
            return None, self.stamp(), self.ep.last_step().step
        self.set_parameters([Parameter("capture_step", value=-1)])
        return requested, time_msg(requested * self.config.dt), requested

    def on_capture(self, camera: str, resolution: str, resp):
        try:
            past, stamp, step = self._take_capture_step()
            cap = self.ep.capture(camera, self.names.sim.resolutions[resolution], step=past)
            pubs = self.captures[(camera, resolution)]
            self._publish_capture((pubs["color"], pubs["depth"], pubs["camera_info"]), cap, stamp)
            # the depth camera's range; a past render also carries its camera pose (the TF of that time may be gone
            # from a client's buffer)
            extra = {"depth_near": cap.depth_near, "depth_far": cap.depth_far}
            if past is not None:
                extra["T_world_optical"] = cap.T_world_optical.tolist()
            self._capture_reply(camera, resolution, resp, stamp, step=step, extra=extra)
        except Exception as exc:
            self.get_logger().error(f"capture {camera}/{resolution} failed: {exc!r}")
            resp.success, resp.message = False, f"capture {camera}/{resolution} failed: {exc}"
        return resp

    def on_segmentation(self, camera: str, resolution: str, resp):
        try:
            past, stamp, step = self._take_capture_step()
            ids, labels = self.ep.segmentation(camera, self.names.sim.resolutions[resolution], step=past)
            self.pub_labels.publish(String(data=json.dumps({str(k): v for k, v in sorted(labels.items())})))
            self.captures[(camera, resolution)]["segmentation"].publish(
                image_msg(np.asarray(ids, dtype=np.int32), stamp, self.names.frames.optical(camera), "32SC1"))
            self._capture_reply(camera, resolution, resp, stamp, step=step)
        except Exception as exc:
            self.get_logger().error(f"segmentation {camera}/{resolution} failed: {exc!r}")
            resp.success, resp.message = False, f"segmentation {camera}/{resolution} failed: {exc}"
        return resp

    def close(self) -> None:
        self.ep.close()
