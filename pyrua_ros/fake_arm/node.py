"""ROS wiring of the fake arm: the same driver surface and sim interfaces as the LIBERO sim node.

Node name ``sim`` (so ``/sim/set_parameters_atomically`` and the ``/sim/...`` services match config/interfaces.yaml;
the two drivers never run together). Threading: one SingleThreadedExecutor in one thread runs everything. In
lockstep a twist steps the episode inside its subscription callback; action goals are stepped by a goal timer (one
control step per tick) so cancel requests and ``/estop`` are served between steps, and the async execute callback
awaits the runner's outcome. In realtime a 20 Hz timer steps with the last twist.
"""

from __future__ import annotations

import json
import pathlib
import time

import numpy as np
import yaml
from control_msgs.action import FollowJointTrajectory, GripperCommand
from geometry_msgs.msg import PoseStamped, TwistStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from pyrua_ros.driver import convert, qos
from pyrua_ros.driver.interfaces import load
from pyrua_ros.fake_arm import goals
from pyrua_ros.fake_arm import kinematics as kin
from pyrua_ros.fake_arm.episode import AGENTVIEW, SUITE, T_HAND_WRIST, TASKS, FakeEpisode
from pyrua_ros.fake_arm.scene import render
from pyrua_ros.safety import EStop, SafetyFilter, SafetyLimits, refusal
from pyrua_ros.sim_interfaces.status import CLOCK_MODES, EpisodeStatus

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config" / "fake_arm.yaml"
HAND = "robot0_right_hand"
FINGER_LINKS = ("gripper0_leftfinger", "gripper0_rightfinger")


def defaults(path: pathlib.Path = CONFIG) -> dict:
    """The node's parameter defaults from config/fake_arm.yaml (``sim.ros__parameters``)."""
    return dict(yaml.safe_load(path.read_text())["sim"]["ros__parameters"])


class FakeArmNode(Node):
    """Kinematic Panda + table of primitives behind the driver and sim interfaces (see module docstring)."""

    def __init__(self):
        self.names = load()
        super().__init__(self.names.sim.node.strip("/"))
        for key, value in defaults().items():
            self.declare_parameter(key, value)
        self.add_on_set_parameters_callback(self._validate_parameters)
        r = self.names.robot
        self.dt = r.control_period_s
        self.safety = SafetyFilter(SafetyLimits(
            tuple(self._p("workspace_min")), tuple(self._p("workspace_max")),
            float(self._p("max_linear_speed")), float(self._p("max_angular_speed"))))
        self.estop = EStop()
        self.episode_id = 0
        self.time_base = 0.0
        self.last_stream_t = -np.inf
        self.goal_run = None
        self.goal_handle = None
        self.goal_future: Future | None = None
        self.last_twist = (np.zeros(3), np.zeros(3), -np.inf)
        self._make_interfaces()
        self._reset_episode()
        self._publish_static()
        self.get_logger().info(f"fake arm ready: suite {SUITE}, {len(TASKS)} tasks, clock {self.clock_mode}")

    # ----- parameters -----
    def _p(self, name: str):
        return self.get_parameter(name).value

    def _validate_parameters(self, params) -> SetParametersResult:
        for p in params:
            v = p.value
            if p.name == "suite" and v != SUITE:
                return SetParametersResult(successful=False, reason=f"unknown suite {v!r}; valid: [{SUITE!r}]")
            if p.name == "task" and not (isinstance(v, int) and 0 <= v < len(TASKS)):
                return SetParametersResult(successful=False, reason=f"task {v!r} out of range for suite {SUITE!r}: "
                                                                    f"valid 0..{len(TASKS) - 1}")
            if p.name == "seed" and not (isinstance(v, int) and v >= 0):
                return SetParametersResult(successful=False, reason=f"seed must be an int >= 0, got {v!r}")
            if p.name == "max_episode_steps" and not (isinstance(v, int) and v > 0):
                return SetParametersResult(successful=False, reason=f"max_episode_steps must be > 0, got {v!r}")
            if p.name == "clock_mode" and v not in CLOCK_MODES:
                return SetParametersResult(successful=False, reason=f"clock_mode {v!r}; valid: {list(CLOCK_MODES)}")
        return SetParametersResult(successful=True)

    # ----- interfaces -----
    def _make_interfaces(self) -> None:
        d, s = self.names.driver, self.names.sim
        pub = self.create_publisher
        self.pub_pose = pub(PoseStamped, d.ee_pose, qos.LOCKSTEP)
        self.pub_joints = pub(JointState, d.joint_states, qos.LOCKSTEP)
        self.pub_tf = pub(TFMessage, d.tf, qos.EVENTS)
        self.pub_tf_static = pub(TFMessage, d.tf_static, qos.TF_STATIC)
        self.pub_clock = pub(Clock, d.clock, qos.LOCKSTEP)
        self.pub_status = pub(String, s.episode_status, qos.LATCHED)
        self.pub_events = pub(String, d.safety_events, qos.EVENTS)
        self.pub_urdf = pub(String, d.robot_description, qos.LATCHED)
        self.pub_labels = pub(String, s.segmentation_labels, qos.LATCHED)
        self.pub_truth = pub(MarkerArray, s.ground_truth, qos.LATCHED)
        self.capture_pubs, self.stream_pubs = {}, {}
        for cam in self.names.robot.cameras:
            self.stream_pubs[cam] = (pub(Image, d.color(cam), qos.STREAM), pub(Image, d.depth(cam), qos.STREAM),
                                     pub(CameraInfo, d.info(cam), qos.STREAM))
            for res in s.resolutions:
                topics = s.capture_topics(cam, res)
                self.capture_pubs[cam, res] = {k: pub(CameraInfo if k == "camera_info" else Image, t,
                                                      qos.LATCHED) for k, t in topics.items()}
                self.create_service(Trigger, s.capture_service(cam, res),
                                    lambda req, resp, c=cam, r=res: self._capture(resp, c, r, False))
                self.create_service(Trigger, s.segmentation_service(cam, res),
                                    lambda req, resp, c=cam, r=res: self._capture(resp, c, r, True))
        self.create_service(Trigger, s.reset, self._on_reset)
        self.create_subscription(TwistStamped, d.servo_twist, self._on_twist, qos.LOCKSTEP)
        self.create_subscription(Bool, d.estop, self._on_estop, qos.EVENTS)
        self.gripper_server = ActionServer(self, GripperCommand, d.gripper_command, self._execute_gripper,
                                           goal_callback=self._on_goal,
                                           cancel_callback=lambda _g: CancelResponse.ACCEPT)
        self.trajectory_server = ActionServer(self, FollowJointTrajectory, d.follow_joint_trajectory,
                                              self._execute_trajectory, goal_callback=self._on_goal,
                                              cancel_callback=lambda _g: CancelResponse.ACCEPT)
        self.goal_timer = self.create_timer(0.001, self._goal_tick)
        self.goal_timer.cancel()
        self.rt_timer = self.create_timer(self.dt, self._realtime_tick)
        self.rt_timer.cancel()
        self.pub_urdf.publish(String(data=kin.panda_urdf(self.names.robot.arm_joints, self.names.robot.finger_joints,
                                                          self.names.frames.base, self.names.frames.end_effector)))

    # ----- episode -----
    @property
    def sim_time(self) -> float:
        return self.time_base + self.episode.step_count * self.dt

    def _reset_episode(self) -> None:
        if self.episode_id:
            self.time_base = self.sim_time + self.dt     # sim time never runs backwards across resets
        self.episode = FakeEpisode(int(self._p("task")), int(self._p("seed")), int(self._p("max_episode_steps")),
                                   self.dt)
        self.episode_id += 1
        self.clock_mode = str(self._p("clock_mode"))
        if self.clock_mode == "realtime":
            self.rt_timer.reset()
        else:
            self.rt_timer.cancel()
        self.goal_timer.timer_period_ns = int((self.dt if self.clock_mode == "realtime" else 0.001) * 1e9)
        self.pub_labels.publish(String(data=json.dumps({str(k): v for k, v in self.episode.labels().items()})))
        self._publish_state()

    def status(self) -> EpisodeStatus:
        e = self.episode
        return EpisodeStatus(
            episode_id=self.episode_id, suite=SUITE, task=e.task_index, seed=e.seed, task_language=e.task.language,
            step=e.step_count, sim_time=round(self.sim_time, 6), success=e.success, terminated=e.success,
            truncated=e.truncated, max_episode_steps=e.max_episode_steps, object_names=tuple(e.object_names),
            clock_mode=self.clock_mode, estop=self.estop.active, gripper_opening=round(float(e.opening), 6))

    def _on_reset(self, _req, resp):
        if self.goal_run is not None:
            self._finish_goal(goals.Outcome("aborted", self._abort_fields("episode reset")))
        self._reset_episode()
        resp.success, resp.message = True, self.status().to_json()
        return resp

    def _refusal_reason(self) -> str | None:
        if self.estop.active:
            return "e-stop active: motion refused until /estop false"
        if self.episode.over:
            return f"episode over (success={self.episode.success}, truncated={self.episode.truncated}): reset first"
        return None

    # ----- servo -----
    def _twist_world(self, msg: TwistStamped) -> tuple[np.ndarray, np.ndarray] | None:
        v = np.array([msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z])
        w = np.array([msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z])
        f = self.names.frames
        frame = msg.header.frame_id or f.world
        if frame in (f.world, f.base):        # the base is not rotated in the world
            return v, w
        if frame == f.end_effector:
            R = self.episode.T_world_ee()[:3, :3]
            return R @ v, R @ w
        self._event(refusal(v, w, f"twist frame {frame!r} unknown; valid: {[f.world, f.base, f.end_effector]}",
                            self.episode.step_count))
        return None

    def _on_twist(self, msg: TwistStamped) -> None:
        vw = self._twist_world(msg)
        if vw is None:
            return
        if self.clock_mode == "realtime":
            self.last_twist = (vw[0], vw[1], time.monotonic())
            return
        self._servo_step(*vw)

    def _servo_step(self, v, w) -> None:
        reason = self._refusal_reason() or ("a trajectory or gripper goal is executing" if self.goal_run else None)
        if reason:
            if np.any(v) or np.any(w):
                self._event(refusal(v, w, reason, self.episode.step_count))
            return
        ft = self.safety.filter_twist(v, w, self.episode.T_world_ee()[:3, 3], self.dt, self.episode.step_count)
        if ft.event:
            self._event(ft.event)
        self.episode.step_twist(ft.v, ft.w)
        self._publish_state()

    def _realtime_tick(self) -> None:
        if self.goal_run is not None:
            return
        v, w, t = self.last_twist
        if time.monotonic() - t > float(self._p("command_timeout_s")):
            v, w = np.zeros(3), np.zeros(3)
        if self._refusal_reason():
            if np.any(v) or np.any(w):
                self._event(refusal(v, w, self._refusal_reason(), self.episode.step_count))
            return
        self._servo_step(v, w)

    def _on_estop(self, msg: Bool, info) -> None:
        if self.estop.set(msg.data):
            from pyrua_ros.driver.publishers import sample_origin

            self.get_logger().warn(f"e-stop {'latched' if msg.data else 'released'} "
                                   f"{sample_origin(self, self.names.driver.estop, info)}")
            if msg.data and self.goal_run is not None:
                self._finish_goal(goals.Outcome("aborted", self._abort_fields("e-stop")))
            self.pub_status.publish(String(data=self.status().to_json()))

    def _event(self, event) -> None:
        self.pub_events.publish(String(data=event.to_json()))

    # ----- actions -----
    def _on_goal(self, _goal) -> GoalResponse:
        if self.goal_run is not None:
            self.get_logger().warn("goal rejected: another goal is executing")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _abort_fields(self, reason: str, run=None, code: int = goals.PATH_TOLERANCE_VIOLATED) -> dict:
        """Result fields of a goal ended early: the gripper's state, or an error code + string for trajectories."""
        run = run or self.goal_run
        if isinstance(run, goals.GripperRun):
            return run.feedback(self.episode)
        return {"error_code": code, "error_string": f"aborted: {reason}"}

    async def _run_goal(self, goal_handle, run, result):
        reason = self._refusal_reason() or ("another goal is executing" if self.goal_run is not None else None)
        if reason:
            self.get_logger().warn(f"goal refused: {reason}")
            goal_handle.abort()
            return self._fill(result, self._abort_fields(reason, run, goals.INVALID_GOAL))
        self.goal_run, self.goal_handle = run, goal_handle
        self.goal_future = Future(executor=self.executor)
        self.goal_future.add_done_callback(lambda _f: None)   # wakes the executor when the outcome is set
        self.goal_timer.reset()
        outcome = await self.goal_future
        return self._fill(result, outcome.fields)

    @staticmethod
    def _fill(result, fields: dict):
        for k, v in fields.items():
            setattr(result, k, v)
        return result

    async def _execute_gripper(self, goal_handle):
        run = goals.GripperRun(goal_handle.request.command.position)
        return await self._run_goal(goal_handle, run, GripperCommand.Result())

    async def _execute_trajectory(self, goal_handle):
        traj = goal_handle.request.trajectory
        points = [(convert.stamp_to_seconds(p.time_from_start), list(p.positions)) for p in traj.points]
        result = FollowJointTrajectory.Result()
        code, text = goals.validate_trajectory(list(traj.joint_names), points, self.names.robot.arm_joints)
        if code != goals.SUCCESSFUL:
            goal_handle.abort()
            return self._fill(result, {"error_code": code, "error_string": text})
        tol = {t.name: t.position for t in goal_handle.request.goal_tolerance}
        run = goals.TrajectoryRun(list(traj.joint_names), points, self.names.robot.arm_joints,
                                  q_start=self.episode.q, dt=self.dt, tolerances=tol)
        return await self._run_goal(goal_handle, run, result)

    def _goal_tick(self) -> None:
        run, handle = self.goal_run, self.goal_handle
        if run is None:
            self.goal_timer.cancel()
            return
        if handle.is_cancel_requested:
            self._finish_goal(goals.Outcome("canceled", self._abort_fields("canceled")))
            return
        reason = self._refusal_reason()
        if reason:
            self._finish_goal(goals.Outcome("aborted", self._abort_fields(reason)))
            return
        outcome = run.tick(self.episode)
        self._publish_state()
        self._feedback(run, handle)
        if outcome is not None:
            self._finish_goal(outcome)

    def _feedback(self, run, handle) -> None:
        if isinstance(run, goals.GripperRun):
            fb = GripperCommand.Feedback()
            self._fill(fb, run.feedback(self.episode))
        else:
            fb = FollowJointTrajectory.Feedback()
            fb.header.stamp = convert.time_msg(self.sim_time)
            fb.joint_names = run.names
            fb.desired.positions = [float(x) for x in run.desired]
            fb.actual.positions = [float(x) for x in self.episode.q[run.index]]
            fb.error.positions = [float(a - b) for a, b in zip(fb.desired.positions, fb.actual.positions)]
        handle.publish_feedback(fb)

    def _finish_goal(self, outcome: goals.Outcome) -> None:
        handle, fut = self.goal_handle, self.goal_future
        self.goal_run = self.goal_handle = self.goal_future = None
        self.goal_timer.cancel()
        {"succeeded": handle.succeed, "aborted": handle.abort, "canceled": handle.canceled}[outcome.status]()
        fut.set_result(outcome)

    # ----- publishing -----
    def _publish_state(self) -> None:
        """/ee_pose, /joint_states, /tf, /clock, episode status (that order), then ground truth and streams."""
        e, f, r = self.episode, self.names.frames, self.names.robot
        stamp = convert.time_msg(self.sim_time)
        T_ee = e.T_world_ee()
        self.pub_pose.publish(convert.pose_stamped_msg(T_ee[:3, 3], convert.matrix_to_quat(T_ee[:3, :3]), stamp,
                                                       f.world))
        js = JointState()
        js.header.stamp = stamp
        js.name = [*r.arm_joints, *r.finger_joints]
        half = e.opening / 2
        js.position = [*map(float, e.q), half, -half]
        js.velocity = [*map(float, e.qd), e.opening_rate / 2, -e.opening_rate / 2]
        self.pub_joints.publish(js)
        self.pub_tf.publish(TFMessage(transforms=self._dynamic_tf(stamp)))
        self.pub_clock.publish(Clock(clock=stamp))
        self.pub_status.publish(String(data=self.status().to_json()))
        self.pub_truth.publish(self._truth(stamp))
        self._stream(stamp)

    def _dynamic_tf(self, stamp) -> list:
        e, f = self.episode, self.names.frames
        links = [f.base] + [f"robot0_link{i}" for i in range(1, 8)]
        out = []
        for i in range(7):
            T = kin.dh_transform(*kin.DH[i], float(e.q[i]))
            out.append(convert.transform_stamped_msg(links[i], links[i + 1], T[:3, 3],
                                                     convert.matrix_to_quat(T[:3, :3]), stamp))
        for child, sign in zip(FINGER_LINKS, (1.0, -1.0)):
            out.append(convert.transform_stamped_msg(HAND, child, (0.0, sign * e.opening / 2, 0.0584),
                                                     (0.0, 0.0, 0.0, 1.0), stamp))
        return out

    def _publish_static(self) -> None:
        f = self.names.frames
        stamp = convert.time_msg(self.sim_time)
        statics = [(f.world, f.base, self.episode.panda.T_world_base),
                   ("robot0_link7", HAND, kin.T_FLANGE_HAND), (HAND, f.end_effector, kin.T_HAND_TCP),
                   (HAND, f.optical("wrist"), T_HAND_WRIST), (f.world, f.optical("agentview"), AGENTVIEW)]
        self.pub_tf_static.publish(TFMessage(transforms=[
            convert.transform_stamped_msg(p, c, T[:3, 3], convert.matrix_to_quat(T[:3, :3]), stamp)
            for p, c, T in statics]))

    def _truth(self, stamp) -> MarkerArray:
        arr = MarkerArray()
        for i, shape in enumerate(self.episode.objects.values()):
            m = Marker()
            m.header.stamp, m.header.frame_id = stamp, self.names.frames.world
            m.ns, m.id, m.action = "objects", i, Marker.ADD
            m.type = Marker.CUBE if shape.kind == "box" else Marker.CYLINDER
            m.pose = convert.pose_msg(shape.T[:3, 3], convert.matrix_to_quat(shape.T[:3, :3]))
            sx = 2 * shape.size[0]
            m.scale.x, m.scale.y, m.scale.z = sx, 2 * shape.size[1] if shape.kind == "box" else sx, 2 * shape.size[2]
            m.color.r, m.color.g, m.color.b, m.color.a = (*(c / 255.0 for c in shape.color), 1.0)
            m.text = shape.name
            arr.markers.append(m)
        return arr

    def _render(self, camera: str, size: int):
        cam = self.episode.camera(camera, size)
        return cam, render(self.episode.shapes(), cam)

    def _stream(self, stamp) -> None:
        rate = float(self._p("camera_rate_hz"))
        if rate <= 0 or self.sim_time - self.last_stream_t < 1.0 / rate - 1e-9:
            return
        size = self.names.sim.resolutions[str(self._p("stream_resolution"))]
        for cam, (p_color, p_depth, p_info) in self.stream_pubs.items():
            if not (p_color.get_subscription_count() or p_depth.get_subscription_count()):
                continue
            self.last_stream_t = self.sim_time
            c, (color, depth, _seg) = self._render(cam, size)
            frame = self.names.frames.optical(cam)
            p_color.publish(convert.image_msg(color, stamp, frame, "rgb8"))
            p_depth.publish(convert.image_msg(depth, stamp, frame, "32FC1"))
            p_info.publish(convert.camera_info_msg(c.K, size, size, stamp, frame))

    def _capture(self, resp, camera: str, resolution: str, segmentation: bool):
        size = self.names.sim.resolutions[resolution]
        stamp = convert.time_msg(self.sim_time)
        frame = self.names.frames.optical(camera)
        c, (color, depth, seg) = self._render(camera, size)
        pubs = self.capture_pubs[camera, resolution]
        if segmentation:
            pubs["segmentation"].publish(convert.image_msg(seg, stamp, frame, "32SC1"))
            self.pub_labels.publish(String(data=json.dumps({str(k): v for k, v in self.episode.labels().items()})))
        else:
            pubs["color"].publish(convert.image_msg(color, stamp, frame, "rgb8"))
            pubs["depth"].publish(convert.image_msg(depth, stamp, frame, "32FC1"))
        pubs["camera_info"].publish(convert.camera_info_msg(c.K, size, size, stamp, frame))
        resp.success = True
        resp.message = json.dumps({"stamp": [stamp.sec, stamp.nanosec], "step": self.episode.step_count,
                                   "camera": camera, "resolution": resolution})
        return resp

