"""ROS wiring of the driver core: one node class serves the driver surface and the sim interfaces for any model.

``sim_node`` (LIBERO-PRO) and ``fake_arm_node`` (kinematic fake) are this node over two models
(:mod:`pyrua_ros.sim.node`, :mod:`pyrua_ros.fake_arm.node`); every behaviour rule lives in
:mod:`pyrua_ros.driver.core`. Names come from config/interfaces.yaml; parameters are declared once in
:data:`PARAMETERS` (config/sim.yaml and config/fake_arm.yaml set them per driver).

Threading: one SingleThreadedExecutor, one (mutually exclusive) callback group; nothing blocks on another
callback. A lockstep twist steps inside its subscription callback; an action goal is an ``async`` execute
callback awaiting a future that the goal ticker (a fast timer in lockstep, the control timer in realtime)
completes, one control step per tick, so e-stop, cancel requests, services and parameter requests are served
between any two steps. (``rclpy.experimental.EventsExecutor`` never answered an action goal in rclpy 9.1.2.)

In lockstep nothing is published while nobody commands the robot, so while the model thinks a wall timer
re-publishes the latest TF, clock and stream images every ``republish_period_s`` (same stamps; a stream camera that
gained a subscriber since its last frame renders the current state, within ``camera_rate_hz`` of sim time): rviz,
started late or not, is never empty, and recorded streams keep their rate.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from geometry_msgs.msg import PoseStamped, TwistStamped
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from pyrua_ros import cputime
from pyrua_ros.driver import goals
from pyrua_ros.driver.clock import RateGate
from pyrua_ros.driver.core import ActiveGoal, DriverConfig, DriverCore, GoalRejected
from pyrua_ros.driver.model import ArmModel, CameraImage
from pyrua_ros.safety import SafetyEvent
from pyrua_ros.wire import qos
from pyrua_ros.wire.convert import (
    camera_info_msg,
    image_msg,
    pose_msg,
    pose_stamped_msg,
    stamp_to_seconds,
    time_msg,
    transform_stamped_msg,
)
from pyrua_ros.wire.interfaces import Interfaces, load
from pyrua_ros.wire.publishers import sample_origin

try:   # pyrua_ros's own action type (interfaces/pyrua_ros_msgs); a driver built without it serves twists only
    from pyrua_ros_msgs.action import MoveToTarget
except ImportError:   # pragma: no cover - only where the interface package was not built
    MoveToTarget = None

EPISODE_PARAMS = ("suite", "task", "seed", "max_episode_steps")
GOAL_TICK_S = 0.0005   # lockstep goal ticker period [s]: as fast as the executor allows
# [s] how long one lockstep goal tick goes on stepping before it lets the executor serve other callbacks (so a
# cancel waits at most this long): an executor round costs about a millisecond, a sixth of a LIBERO step
GOAL_TICK_BUDGET_S = 0.025


@dataclasses.dataclass(frozen=True)
class Param:
    """A driver parameter: default, description, and whether it may change after startup."""

    default: object
    description: str
    settable: bool = False


#: Every driver parameter, declared once (episode defaults come from the model: ``DEFAULT_EPISODE``).
PARAMETERS: dict[str, Param] = {
    "suite": Param(None, "suite of the episode the reset service starts", True),
    "task": Param(None, "task index within the suite", True),
    "seed": Param(None, "seed: which official init state (seed % n) and the scene's random placement", True),
    "max_episode_steps": Param(None, "control steps after which the episode is truncated", True),
    "clock_mode": Param("lockstep", "lockstep: time advances only for commands and goals; realtime: a wall "
                                    "timer steps at the control rate"),
    "command_timeout_s": Param(0.1, "[s] realtime: the last twist drops to zero after this long"),
    "camera_rate_hz": Param(2.0, "[Hz] stream cameras (only while subscribed): sim time in lockstep, wall time "
                                 "in realtime"),
    "stream_resolution": Param(256, "[px] square stream camera images"),
    "stream_backlog": Param(16, "stream frames waiting for the render thread; when full, realtime drops the "
                                "oldest and lockstep waits for room, so every frame is rendered (sim)"),
    "render_nice": Param(10, "CPU niceness added to the render thread, so control steps come first (sim)"),
    "republish_period_s": Param(1.0, "[s] lockstep: re-publish TF, clock and stream images this often while idle "
                                     "(0 = never)"),
    "workspace_min": Param([-0.70, -0.60, 0.00], "[m] world box min corner for the end effector"),
    "workspace_max": Param([0.50, 0.60, 1.50], "[m] world box max corner for the end effector"),
    "max_linear_speed": Param(1.0, "[m/s] per-axis twist limit (LIBERO's OSC range: 5 cm per 0.05 s step)"),
    "max_angular_speed": Param(10.0, "[rad/s] per-axis twist limit (LIBERO's OSC range: 0.5 rad per step)"),
    "gripper_goal_tolerance": Param(0.004, "[m] a gripper goal succeeds within this of its position"),
    "gripper_stall_steps": Param(3, "control steps without finger motion that count as a stall"),
    "gripper_allow_stalling": Param(True, "a stalled gripper goal (closed on an object) succeeds, else aborts"),
    "gripper_max_steps": Param(40, "a gripper goal still moving after this many control steps aborts"),
    "trajectory_goal_tolerance": Param(0.05, "[rad] default goal tolerance of a joint trajectory"),
    "trajectory_goal_time": Param(0.5, "[s] default time after the last point to meet the goal tolerance"),
    "cartesian_goals": Param(True, "serve the MoveToTarget action (robo's move_to as one goal); false: a driver "
                                   "without it, robo streams servo twists"),
}


@dataclasses.dataclass(frozen=True)
class Shot:
    """What one capture / segmentation service call rendered: the control ``step`` it shows and its ``stamp``
    (builtin_interfaces/Time), the ``image`` (capture) or ``ids`` and ``labels`` (segmentation), and ``reply``:
    extra fields of the service's JSON reply."""

    step: int
    stamp: object
    image: CameraImage | None = None
    ids: np.ndarray | None = None
    labels: dict[int, str] | None = None
    reply: dict = dataclasses.field(default_factory=dict)


def depth_range_fields(image: CameraImage) -> dict:
    """``depth_near`` / ``depth_far`` [m] of a capture reply (the renderer's clip planes), when the model has them."""
    if image.depth_range is None:
        return {}
    near, far = image.depth_range
    return {"depth_near": float(near), "depth_far": float(far)}


class DriverNode(Node):
    """The node of a driver: :class:`~pyrua_ros.driver.core.DriverCore` over ``make_model(values)``.

    ``make_model`` gets the startup parameter values and returns the model; ``default_episode`` is the model's
    ``(suite, task, seed, max_episode_steps)`` used when no parameter file sets them; ``label`` names the driver
    in its log, whose line ``<label> ready (<clock mode>); <status>`` says the node serves.
    """

    def __init__(self, node_name: str, make_model: Callable[[dict, Interfaces], ArmModel],
                 default_episode: tuple[str, int, int, int], *, label: str, names: Interfaces | None = None,
                 **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        self.names = names or load()
        episode_defaults = dict(zip(EPISODE_PARAMS, default_episode, strict=True))
        for name, p in PARAMETERS.items():
            default = episode_defaults.get(name, p.default)
            self.declare_parameter(name, default, ParameterDescriptor(description=p.description))
        values = {name: self.get_parameter(name).value for name in PARAMETERS}
        self.config = self._config(values)
        self.stream_size = int(values["stream_resolution"])
        self.model = make_model(values, self.names)
        self.core = DriverCore(self.model, self.config, self)
        self._start_with_a_valid_episode(episode_defaults)
        self.add_on_set_parameters_callback(self.on_set_parameters)
        self._create_publishers()
        self._create_interfaces(float(values["republish_period_s"]))
        self.camera_gate = RateGate(float(values["camera_rate_hz"]))
        self.truth_gate = RateGate(float(values["camera_rate_hz"]))
        self._last_state_wall = time.monotonic()
        self._last_tf: TFMessage | None = None
        self._stream_cache: dict[str, tuple[int, frozenset, tuple]] = {}   # camera -> (episode, kinds, messages)
        # held while a stream frame is published and cached (render thread) and while the cache is re-published
        # (executor): a re-published frame can never follow a newer one on the wire
        self._stream_lock = threading.Lock()
        cputime.mark("node: interfaces created")
        self.reset_episode()
        cputime.mark("ready")
        self.get_logger().info(f"{label} ready ({self.config.clock_mode}); "
                               f"{self.core.status().to_json()}")

    def _start_with_a_valid_episode(self, defaults: dict) -> None:
        """An invalid episode in the parameter file or overrides must not kill the driver: it starts with the
        model's default episode and says why; a client's reset to the bad episode is then refused with the
        reason (the valid values), where the client can see it."""
        v = {n: self.get_parameter(n).value for n in EPISODE_PARAMS}
        try:
            self.core.validate_episode(v["suite"], v["task"], v["seed"], v["max_episode_steps"])
        except ValueError as exc:
            self.get_logger().error(f"episode parameters refused ({exc}); starting with the default episode "
                                    f"{defaults}")
            self.set_parameters([Parameter(n, value=defaults[n]) for n in EPISODE_PARAMS])

    def _config(self, v: dict) -> DriverConfig:
        if int(v["stream_resolution"]) <= 0 or int(v["stream_backlog"]) < 1:
            raise ValueError(f"stream_resolution must be > 0 and stream_backlog >= 1, got "
                             f"{v['stream_resolution']!r} and {v['stream_backlog']!r}")
        return DriverConfig.from_parameters(v, self.names)

    # ---------------------------------------------------------------- wiring
    def _create_publishers(self) -> None:
        d, s = self.names.driver, self.names.sim
        pub = self.create_publisher
        self.pub_pose = pub(PoseStamped, d.ee_pose, qos.LOCKSTEP)
        self.pub_joints = pub(JointState, d.joint_states, qos.LOCKSTEP)
        self.pub_tf = pub(TFMessage, d.tf, qos.TF)
        self.pub_tf_static = pub(TFMessage, d.tf_static, qos.TF_STATIC)
        self.pub_clock = pub(Clock, d.clock, qos.LOCKSTEP)
        self.pub_status = pub(String, s.episode_status, qos.LATCHED)
        self.pub_urdf = pub(String, d.robot_description, qos.LATCHED)
        self.pub_events = pub(String, d.safety_events, qos.EVENTS)
        self.pub_truth = pub(MarkerArray, s.ground_truth, qos.LATCHED)
        self.pub_labels = pub(String, s.segmentation_labels, qos.LATCHED)
        self.streams = {cam: (pub(Image, d.color(cam), qos.STREAM), pub(Image, d.depth(cam), qos.STREAM),
                              pub(CameraInfo, d.info(cam), qos.STREAM))
                        for cam in self.names.robot.cameras}
        self.captures = {(cam, res): {kind: pub(CameraInfo if kind == "camera_info" else Image, topic, qos.LATCHED)
                                      for kind, topic in s.capture_topics(cam, res).items()}
                         for cam in self.names.robot.cameras for res in s.resolutions}

    def _create_interfaces(self, republish_period_s: float) -> None:
        d, s = self.names.driver, self.names.sim
        self.create_subscription(TwistStamped, d.servo_twist, self.on_twist, qos.LOCKSTEP)
        self.create_subscription(Bool, d.estop, self.on_estop, qos.EVENTS)
        self.create_subscription(Float64MultiArray, d.gripper_target, self.on_gripper_target, qos.LOCKSTEP)
        self.create_service(Trigger, s.reset, self.on_reset)
        for cam in self.names.robot.cameras:
            for res in s.resolutions:
                self.create_service(Trigger, s.capture_service(cam, res),
                                    lambda _rq, rs, c=cam, r=res: self.on_capture(c, r, rs, segmentation=False))
                self.create_service(Trigger, s.segmentation_service(cam, res),
                                    lambda _rq, rs, c=cam, r=res: self.on_capture(c, r, rs, segmentation=True))
        self.trajectory_server = ActionServer(
            self, FollowJointTrajectory, d.follow_joint_trajectory, execute_callback=self.execute_trajectory,
            goal_callback=self.on_trajectory_goal, cancel_callback=self.on_cancel)
        self.gripper_server = ActionServer(
            self, GripperCommand, d.gripper_command, execute_callback=self.execute_gripper,
            goal_callback=self.on_gripper_goal, cancel_callback=self.on_cancel)
        self.cartesian_server = None
        if MoveToTarget is not None and bool(self.get_parameter("cartesian_goals").value):
            self.cartesian_server = ActionServer(
                self, MoveToTarget, d.cartesian_move, execute_callback=self.execute_cartesian,
                goal_callback=self.on_cartesian_goal, cancel_callback=self.on_cancel)
        if self.config.clock_mode == "realtime":
            self.goal_timer = None
            self.control_timer = self.create_timer(self.core.dt, self.on_control_tick)
        else:
            self.goal_timer = self.create_timer(GOAL_TICK_S, self.on_goal_tick)
            self.goal_timer.cancel()
            if republish_period_s > 0:
                self.create_timer(republish_period_s, self.on_idle)
        self._republish_period_s = republish_period_s

    # ---------------------------------------------------------------- parameters and reset
    def on_set_parameters(self, params) -> SetParametersResult:
        """Episode parameters are validated against the model's suites; the rest is read at startup only."""
        fixed = [p.name for p in params if p.name in PARAMETERS and not PARAMETERS[p.name].settable]
        if fixed:
            return SetParametersResult(successful=False, reason=f"{fixed} are read at startup only; restart the "
                                       f"node to change them. Settable now: {list(EPISODE_PARAMS)}")
        values = {n: self.get_parameter(n).value for n in EPISODE_PARAMS}
        values.update({p.name: p.value for p in params if p.name in EPISODE_PARAMS})
        try:
            self.core.validate_episode(values["suite"], values["task"], values["seed"], values["max_episode_steps"])
        except ValueError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def reset_episode(self):
        v = {n: self.get_parameter(n).value for n in EPISODE_PARAMS}
        status = self.core.reset(v["suite"], v["task"], v["seed"], v["max_episode_steps"])
        if self.goal_timer is not None:
            self.goal_timer.cancel()
        return status

    def on_reset(self, _req, resp):
        try:
            resp.message = self.reset_episode().to_json()
            resp.success = True
        except Exception as exc:  # the node keeps serving after a failed reset
            self.get_logger().error(f"reset failed: {exc!r}")
            resp.success, resp.message = False, f"reset failed: {exc}"
        return resp

    # ---------------------------------------------------------------- DriverOutput
    def stamp(self):
        return time_msg(self.core.sim_time)

    def publish_reset(self) -> None:
        stamp, static = self.stamp(), self.model.static_frames()
        self.pub_tf_static.publish(TFMessage(transforms=[transform_stamped_msg(p, c, t, q, stamp)
                                                         for p, c, t, q in self.model.transforms() if c in static]))
        self.pub_urdf.publish(String(data=self.model.urdf()))
        self.camera_gate.reset()
        self.truth_gate.reset()
        with self._stream_lock:
            self._stream_cache.clear()

    def _status_msg(self):
        return String(data=self.core.status().to_json())

    def publish_status(self) -> None:
        self.pub_status.publish(self._status_msg())

    def publish_event(self, event: SafetyEvent) -> None:
        self.pub_events.publish(String(data=event.to_json()))

    def publish_state(self) -> None:
        """/ee_pose, /joint_states, /tf, /clock and episode status, in that order; then markers and streams.

        Every message is built before the first goes out, so the five leave within a fraction of a millisecond
        and a subscriber's executor mostly takes them in one wake-up instead of one each."""
        stamp, world = self.stamp(), self.names.frames.world
        pos, quat = self.model.ee_pose()
        pose = pose_stamped_msg(pos, quat, stamp, world)
        names, q, dq = self.model.joint_state()
        js = JointState(name=list(names), position=[float(x) for x in q], velocity=[float(x) for x in dq])
        js.header.stamp = stamp
        self._last_tf = TFMessage(transforms=[transform_stamped_msg(p, c, t, r, stamp)
                                              for p, c, t, r in self.model.transforms(moving_only=True)])
        status = self._status_msg()
        for pub, msg in ((self.pub_pose, pose), (self.pub_joints, js), (self.pub_tf, self._last_tf),
                         (self.pub_clock, Clock(clock=stamp)), (self.pub_status, status)):
            pub.publish(msg)
        self._last_state_wall = time.monotonic()
        now = self.core.clock.camera_time(self.core.sim_time, self._last_state_wall)
        if self.truth_gate.ready(now):
            self.publish_ground_truth(stamp)
        if self.camera_gate.ready(now):
            self.publish_streams(stamp)

    def publish_ground_truth(self, stamp) -> None:
        kinds = {"sphere": Marker.SPHERE, "box": Marker.CUBE, "cylinder": Marker.CYLINDER}
        markers = MarkerArray()
        for k, obj in enumerate(self.model.ground_truth()):
            for ns in ("objects", "labels"):
                m = Marker(ns=ns, id=k, action=Marker.ADD,
                           type=kinds[obj.shape] if ns == "objects" else Marker.TEXT_VIEW_FACING,
                           text=obj.name if ns == "labels" else "")
                m.header.stamp, m.header.frame_id = stamp, self.names.frames.world
                above = (0.0, 0.0, obj.size[2] / 2 + 0.04) if ns == "labels" else (0.0, 0.0, 0.0)
                m.pose = pose_msg(np.asarray(obj.position) + above, obj.quat_xyzw)
                m.scale.x, m.scale.y, m.scale.z = obj.size if ns == "objects" else (0.03, 0.03, 0.03)
                m.color.r, m.color.g, m.color.b = obj.color
                m.color.a = 0.9
                markers.markers.append(m)
        self.pub_truth.publish(markers)

    def _wanted_streams(self) -> dict[str, frozenset[str]]:
        """``{camera: kinds}`` of the stream cameras with subscribers: color and/or depth as subscribed
        (camera_info alone still follows rendered color frames)."""
        wanted = {}
        for cam, (color, depth, info) in self.streams.items():
            kinds = {k for k, pub in (("color", color), ("depth", depth)) if pub.get_subscription_count()}
            if not kinds and info.get_subscription_count():
                kinds = {"color"}
            if kinds:
                wanted[cam] = frozenset(kinds)
        return wanted

    def publish_streams(self, stamp) -> None:
        """Stream the cameras that have subscribers (at most ``camera_rate_hz``; see publish_state)."""
        self._render_streams(self._wanted_streams(), stamp)

    def _render_streams(self, wanted: dict[str, frozenset[str]], stamp) -> None:
        """Ask the model for a stream frame of the current state; it publishes when rendered (LIBERO: in its
        render thread, off the control path; in realtime a frame it cannot keep up with is dropped, in lockstep
        the step waits for room in its backlog)."""
        if not wanted:
            return
        episode = self.core.episode_id

        def deliver(images) -> None:
            for cam, image in images.items():
                msgs = self._camera_msgs(cam, image, stamp)
                with self._stream_lock:
                    self._stream_cache[cam] = (episode, wanted[cam], msgs)
                    for pub, msg in zip(self.streams[cam], msgs):
                        if msg is not None:
                            pub.publish(msg)

        self.model.stream({cam: set(kinds) for cam, kinds in wanted.items()}, self.stream_size, deliver)

    def _camera_msgs(self, cam: str, image, stamp) -> tuple:
        """(color, depth, camera_info) messages of ``image``; None for a kind it does not hold."""
        frame = self.names.frames.optical(cam)
        return (None if image.color is None else image_msg(image.color, stamp, frame, "rgb8"),
                None if image.depth is None else image_msg(image.depth, stamp, frame, "32FC1"),
                camera_info_msg(image.K, image.size, image.size, stamp, frame))

    def goal_feedback(self, goal: ActiveGoal, fields: dict) -> None:
        if goal.kind == "gripper":
            fb = GripperCommand.Feedback(**fields)
        elif goal.kind == "cartesian":
            fb = MoveToTarget.Feedback(**fields)
        else:
            fb = FollowJointTrajectory.Feedback(joint_names=fields["joint_names"])
            fb.header.stamp = self.stamp()
            fb.desired.positions, fb.actual.positions, fb.error.positions = \
                fields["desired"], fields["actual"], fields["error"]
        goal.handle.publish_feedback(fb)

    def goal_done(self, goal: ActiveGoal) -> None:
        outcome, handle = goal.outcome, goal.handle
        if outcome.status == goals.CANCELED and handle.is_cancel_requested:
            handle.canceled()
        elif outcome.status == goals.SUCCEEDED:
            handle.succeed()
        else:
            handle.abort()
        if outcome.status != goals.SUCCEEDED:
            self.get_logger().info(f"{goal.kind} goal {outcome.status}: {outcome.message}")
        result = {"gripper": GripperCommand.Result, "trajectory": FollowJointTrajectory.Result,
                  "cartesian": MoveToTarget and MoveToTarget.Result}[goal.kind](**outcome.fields)
        goal.future.set_result(result)

    # ---------------------------------------------------------------- commands
    def on_twist(self, msg: TwistStamped) -> None:
        t = msg.twist
        self.core.on_twist((t.linear.x, t.linear.y, t.linear.z), (t.angular.x, t.angular.y, t.angular.z),
                           msg.header.frame_id, time.monotonic())

    def on_gripper_target(self, msg: Float64MultiArray) -> None:
        self.core.on_gripper_target(list(msg.data))

    def on_estop(self, msg: Bool, info) -> None:   # info: who published it (rclpy passes it to a 2-arg callback)
        if self.core.on_estop(bool(msg.data)):   # applied first; then the log names who did it

            self.get_logger().warn(f"e-stop {'latched' if msg.data else 'released'} "
                                   f"{sample_origin(self, self.names.driver.estop, info)}")

    def on_control_tick(self) -> None:
        self._sync_cancels()
        self.core.realtime_tick(time.monotonic())

    def on_goal_tick(self) -> None:
        """Lockstep: control steps of the active goals for up to GOAL_TICK_BUDGET_S, then back to the executor."""
        deadline = time.monotonic() + GOAL_TICK_BUDGET_S
        while True:
            self._sync_cancels()
            if not self.core.tick():
                self.goal_timer.cancel()
                return
            if time.monotonic() >= deadline:
                return

    def on_idle(self) -> None:
        """Lockstep, nobody commanding: re-publish TF, clock and the latest stream frames (their own stamps). A
        camera without a frame of this episode in the kinds now subscribed renders the current state, within
        ``camera_rate_hz`` of sim time like every stream frame."""
        if time.monotonic() - self._last_state_wall < self._republish_period_s or self._last_tf is None:
            return
        stamp = self.stamp()
        self.pub_tf.publish(self._last_tf)
        self.pub_clock.publish(Clock(clock=stamp))
        missing = {}
        for cam, kinds in self._wanted_streams().items():
            with self._stream_lock:
                episode, cached_kinds, msgs = self._stream_cache.get(cam, (None, frozenset(), ()))
                if episode != self.core.episode_id or not kinds <= cached_kinds:
                    missing[cam] = kinds
                    continue
                for pub, msg in zip(self.streams[cam], msgs):
                    if msg is not None:
                        pub.publish(msg)
        if missing and self.camera_gate.ready(self.core.clock.camera_time(self.core.sim_time, time.monotonic())):
            self._render_streams(missing, stamp)

    # ---------------------------------------------------------------- actions
    def _sync_cancels(self) -> None:
        for goal in list(self.core.goals.values()):
            if goal.handle is not None and goal.handle.is_cancel_requested:
                self.core.request_cancel(goal)

    def on_cancel(self, _handle) -> CancelResponse:
        if self.goal_timer is not None:
            self.goal_timer.reset()          # the ticker ends the goal at its next call
        return CancelResponse.ACCEPT

    def on_gripper_goal(self, request) -> GoalResponse:
        try:
            self.core.check_gripper_goal(float(request.command.position))
        except GoalRejected as exc:
            self.get_logger().warn(str(exc))
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    @staticmethod
    def _points(trajectory) -> list[tuple[float, list[float], list[float]]]:
        return [(stamp_to_seconds(p.time_from_start), list(p.positions), list(p.velocities))
                for p in trajectory.points]

    def on_trajectory_goal(self, request) -> GoalResponse:
        try:
            self.core.check_trajectory_goal(list(request.trajectory.joint_names), self._points(request.trajectory))
        except GoalRejected as exc:
            self.get_logger().warn(str(exc))
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    @staticmethod
    def _cartesian_law(request) -> dict:
        """The keyword arguments of ``DriverCore.start_cartesian`` a MoveToTarget goal carries."""
        return {"tol": float(request.tolerance), "step_clip": float(request.step_clip),
                "action_scale": float(request.action_scale), "linear_scale": float(request.linear_scale),
                "max_steps": int(request.max_steps), "position": not request.no_position,
                "pitch": float(request.target_pitch) if request.servo_pitch else None,
                "yaw": float(request.target_yaw) if request.servo_yaw else None,
                "pitch_step": float(request.pitch_step), "yaw_step": float(request.yaw_step),
                "angular_scale": float(request.angular_scale),
                "ori_tol": float(request.orientation_tolerance) if request.angles_converge else math.inf}

    def on_cartesian_goal(self, request) -> GoalResponse:
        try:
            self.core.check_cartesian_goal(list(request.target), float(request.gripper_position),
                                           **self._cartesian_law(request))
        except GoalRejected as exc:
            self.get_logger().warn(str(exc))
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def execute_cartesian(self, handle):
        req = handle.request
        goal = self.core.start_cartesian(list(req.target), float(req.gripper_position), **self._cartesian_law(req))
        return await self._run(goal, handle)

    async def execute_gripper(self, handle):
        goal = self.core.start_gripper(float(handle.request.command.position))
        return await self._run(goal, handle)

    async def execute_trajectory(self, handle):
        req = handle.request
        goal = self.core.start_trajectory(
            list(req.trajectory.joint_names), self._points(req.trajectory),
            {t.name: t.position for t in req.goal_tolerance}, {t.name: t.position for t in req.path_tolerance},
            stamp_to_seconds(req.goal_time_tolerance))
        return await self._run(goal, handle)

    async def _run(self, goal: ActiveGoal, handle):
        goal.handle, goal.future = handle, Future(executor=self.executor)
        if goal.outcome is None and self.goal_timer is not None:
            self.goal_timer.reset()
        return await goal.future

    # ---------------------------------------------------------------- captures
    def shoot(self, camera: str, size: int, *, segmentation: bool) -> Shot:
        """What a capture / segmentation service call publishes: the current state. (The sim node overrides it:
        its one-shot ``capture_step`` parameter renders a past control step.)"""
        step, stamp = self.model.last_step().step, self.stamp()
        if segmentation:
            ids, labels = self.model.segmentation(camera, size)
            return Shot(step, stamp, ids=ids, labels=labels)
        image = self.core.capture(camera, size)
        return Shot(step, stamp, image=image, reply=depth_range_fields(image))

    def on_capture(self, camera: str, resolution: str, resp, *, segmentation: bool):
        what = "segmentation" if segmentation else "capture"
        try:
            shot = self.shoot(camera, self.names.sim.resolutions[resolution], segmentation=segmentation)
            stamp, pubs = shot.stamp, self.captures[(camera, resolution)]
            frame = self.names.frames.optical(camera)
            if segmentation:
                self.pub_labels.publish(String(data=json.dumps({str(k): v for k, v in sorted(shot.labels.items())})))
                pubs["segmentation"].publish(image_msg(np.asarray(shot.ids, dtype=np.int32), stamp, frame, "32SC1"))
            else:
                color, depth, info = self._camera_msgs(camera, shot.image, stamp)
                pubs["color"].publish(color)
                pubs["depth"].publish(depth)
                pubs["camera_info"].publish(info)
            resp.success = True
            resp.message = self.core.capture_reply(camera, resolution, (stamp.sec, stamp.nanosec), step=shot.step,
                                                   extra=shot.reply)
        except Exception as exc:
            self.get_logger().error(f"{what} {camera}/{resolution} failed: {exc!r}")
            resp.success, resp.message = False, f"{what} {camera}/{resolution} failed: {exc}"
        return resp

    def close(self) -> None:
        self.model.close()

