"""``RosBackend``: the :class:`~pyrua_ros.robo.backend.RobotBackend` protocol over ROS 2 (rclpy clients only).

It speaks only the interfaces of ``config/interfaces.yaml``: the driver surface (``/ee_pose``, ``/joint_states``,
``/tf``, the servo twist topic, the GripperCommand action) and the sim interfaces (episode parameters + reset,
episode status, capture and segmentation). Any driver that serves them works: the LIBERO sim node, the
kinematic fake arm, or a real arm's remapped drivers.

Threading model: the backend has two nodes in one rclpy context, each with a ``SingleThreadedExecutor``
spinning in a named daemon thread. The *state* node (``<node>_state``, in the same namespace with the same
remappings) carries only what every control step publishes (``/ee_pose``, ``/joint_states``, episode status,
safety events, ``/tf``): its executor has five subscriptions to wait on, so a step's messages are dispatched in a
fraction of a millisecond. ``node`` (public: the episode host adds its recorder, video and agent publishers to it)
carries everything else: capture topics, clients, the gripper and Cartesian actions. ``node`` is the backend's
own, in a context of its own, or the process's node when one is given (the launched ``agent`` node). Callbacks
never block (they store a value and notify), so one thread per executor is enough. Public methods are called
from the agent's thread; they publish or send requests and then wait on a condition or a future, always with a
deadline from ``timeouts`` in interfaces.yaml. Nothing here ever spins a node itself.

Lockstep protocol of :meth:`servo`: publish one TwistStamped, then wait on one condition, woken by every state
message, until the step's ``/ee_pose`` (newer than the last), its episode status (the driver publishes it last,
so the caller sees whether the step ended the episode) and its joint states are in, or a refusal of the command
arrives on the safety-events topic, or :meth:`cancel` is called. No polling, no sleep slices.

:meth:`move_to_target` sends robo's whole ``move_to`` as one ``MoveToTarget`` goal (the driver runs the same
iterations; one round trip per move instead of one per step) and waits for its result or :meth:`cancel` only,
checking once per ``step_reply_s`` that the driver still steps (no step for that long is a timeout, as for a
twist).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time

import numpy as np

from pyrua_ros import cputime
from pyrua_ros.robo.backend import (
    BackendDeadline,
    BackendRefused,
    BackendTimeout,
    CaptureFrame,
    EePose,
    GripperOutcome,
    JointSnapshot,
    MoveOutcome,
    SegmentationFrame,
)
from pyrua_ros.sim_interfaces.state_digest import StateTrace
from pyrua_ros.sim_interfaces.status import EpisodeStatus
from pyrua_ros.wire.convert import camera_info_to_K, image_to_numpy, pose_to_numpy, stamp_to_seconds, time_msg
from pyrua_ros.wire.followed_clock import FollowedClock
from pyrua_ros.wire.goal_client import action_client, call_answered, future_done_within
from pyrua_ros.wire.interfaces import Interfaces, load, resolve
from pyrua_ros.wire.publishers import publisher_node, sample_gid
from pyrua_ros.wire.spin_thread import spin_until_shutdown
from pyrua_ros.wire.tf_buffer import TfBuffer

_instance_counter = itertools.count(1)
RESEND_AFTER_S = 5.0   # [s] an idempotent service request unanswered this long is sent again (see _call)
# A driver that declares no osc_action_scale is taken to track twists exactly: PyRUA-Lean's rotation command
# (error / 0.1 rad per unit action) then becomes the error itself per step.
DEFAULT_OSC_ACTION_SCALE = (0.05, 0.1)
# what a refusal says, by its reason (BackendRefused.reason), whatever the command: the model reads it
REFUSALS = {"estop": "the e-stop is engaged", "terminated": "the episode is over", "truncated": "the episode is over"}
SETTLE_S = 1.0   # [s] longest wait for the other topics of a control step once its pose / result arrived
# [s] how long the first move waits for the driver's MoveToTarget server (the driver is known by then: its status
# arrived): a driver without one costs this once per backend, then robo streams twists
CARTESIAN_DISCOVERY_S = 5.0


class _Latest:
    """Holds the newest value of a stream and wakes waiters; ``wait(pred, timeout)`` returns the first value
    satisfying ``pred`` (the current one if it already does). Streams given the same ``cond`` share it, so one
    wait can watch several of them."""

    def __init__(self, cond: threading.Condition | None = None):
        self._cond = cond or threading.Condition()
        self.value = None

    def put(self, value) -> None:
        with self._cond:
            self.value = value
            self._cond.notify_all()

    def wait(self, pred, timeout: float):
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.value is None or not pred(self.value):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self.value


class RosBackend:
    """RobotBackend over ROS 2. ``RosBackend()`` connects; ``close()`` releases everything (idempotent).

    ``interfaces``: names and timeouts (default: ``pyrua_ros.wire.interfaces.load()``); names are relative, so
    they resolve in the node's namespace.
    ``node``: run on this node (the launched ``agent`` node, whose namespace, remappings and parameters then hold
    for robo too: one node per process role); it must not be spun by anyone else, and is left alive by ``close``.
    Without one, the backend makes its own node in its own context, initialised with ``context_args`` only (e.g.
    ``["--ros-args", "-r", "__ns:=/robot1"]``), never with ``sys.argv``: a launched process's ``--ros-args``
    (``__node:=agent``) belong to that process's node, not to a second one.
    """

    def __init__(self, interfaces: Interfaces | None = None, *, node=None, node_name: str | None = None,
                 context_args: list[str] | None = None):
        import rclpy
        from control_msgs.action import GripperCommand
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from rcl_interfaces.srv import GetParameters, SetParametersAtomically
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from std_msgs.msg import Float64MultiArray, String
        from std_srvs.srv import Trigger

        from pyrua_ros.wire import qos

        self.names = interfaces or load()
        self.control_period_s = float(self.names.robot.control_period_s)
        self.cameras = tuple(self.names.robot.cameras)
        self.resolutions = dict(self.names.sim.resolutions)
        self._timeouts = self.names.timeouts
        self._closed = False
        self._cancelled = threading.Event()
        self._deadline: float | None = None   # set by the host around each robo call (set_deadline)
        self._status_source: bytes | None = None   # GID of the driver's episode-status publisher, once known
        self.foreign_status: dict[str, dict] = {}  # other publishers of the episode status: {gid hex: info}

        self.state_trace = StateTrace()   # the per-step state digests of the driver's statuses (result.json)

        self._owns_node = node is None
        if node is None:
            self._context = rclpy.Context()
            rclpy.init(args=list(context_args or []), context=self._context)
            node = rclpy.create_node(node_name or f"pyrua_robo_{next(_instance_counter)}", context=self._context)
        else:
            self._context = node.context
        self.node = node
        name = node.get_name()
        # The state node follows the node's namespace and remappings (the process's global arguments); only its
        # name is its own (a node-local __node remap wins over a global one such as the launch's __node:=agent).
        self._state_node = rclpy.create_node(f"{name}_state", context=self._context,
                                             cli_args=["--ros-args", "-r", f"__node:={name}_state"])

        # The driver's /clock from the start (the reset publishes one): what the agent side stamps (markers,
        # goal events) shares the driver's time line. On the main node, off the per-step state executor.
        self.followed_clock = FollowedClock(self.node, names=self.names)
        d, s = self.names.driver, self.names.sim

        self._step_cond = threading.Condition()    # woken by every state message and by cancel()
        self._pose = _Latest(self._step_cond)
        self._joints = _Latest(self._step_cond)
        self._status = _Latest(self._step_cond)
        self._events: list[dict] = []
        self._events_lock = self._step_cond
        self._frames: dict[str, _Latest] = {}

        state_sub = self._state_node.create_subscription
        state_sub(PoseStamped, d.ee_pose, self._on_pose, qos.EVENTS)
        state_sub(JointState, d.joint_states, self._joints.put, qos.EVENTS)
        state_sub(String, s.episode_status, self._on_status, qos.LATCHED_READER)
        state_sub(String, d.safety_events, self._on_safety_event, qos.EVENTS)
        self.tf = TfBuffer(self._state_node, cache_s=30.0)
        sub = self.node.create_subscription
        self._msg_types = {"color": Image, "depth": Image, "segmentation": Image, "camera_info": CameraInfo}
        for camera in self.cameras:
            for resolution in self.resolutions:
                for kind, topic in s.capture_topics(camera, resolution).items():
                    latest = _Latest()
                    self._frames[topic] = latest
                    sub(self._msg_types[kind], topic, latest.put, qos.LATCHED)
        self._labels = _Latest()
        sub(String, s.segmentation_labels, lambda m: self._labels.put(json.loads(m.data)), qos.LATCHED)

        self._twist_pub = self.node.create_publisher(TwistStamped, d.servo_twist, qos.LOCKSTEP)
        self._safety_pub = self.node.create_publisher(String, d.safety_events, qos.EVENTS)
        self._twist_type = TwistStamped
        self._gripper = action_client(self.node, GripperCommand, d.gripper_command)
        self._target_pub = self.node.create_publisher(Float64MultiArray, d.gripper_target, qos.LOCKSTEP)
        self._target_type = Float64MultiArray
        self._streams_target: bool | None = None
        self._introspect(self._gripper)
        self._gripper_type = GripperCommand
        try:   # pyrua_ros's own action type: where it was not built, robo streams twists
            from pyrua_ros_msgs.action import MoveToTarget
        except ImportError:   # pragma: no cover - only where the interface package was not built
            MoveToTarget = None
        self._move_type = MoveToTarget
        self._move = None if MoveToTarget is None else action_client(self.node, MoveToTarget, d.cartesian_move)
        if self._move is not None:
            self._introspect(self._move)
        self._serves_move: bool | None = None
        self._goal_events: set[threading.Event] = set()   # set by cancel(): wakes a waiting Cartesian goal
        self._reset = self.node.create_client(Trigger, s.reset)
        self._get_params = self.node.create_client(GetParameters, f"{s.node}/get_parameters")
        self._get_params_type = GetParameters
        self._osc_scale: tuple[float, float] | None = None
        self._set_params = self.node.create_client(SetParametersAtomically, f"{s.node}/set_parameters_atomically")
        self._trigger_type = Trigger
        self._captures = {}
        for camera in self.cameras:
            for resolution in self.resolutions:
                self._captures[("color", camera, resolution)] = self.node.create_client(
                    Trigger, s.capture_service(camera, resolution))
                self._captures[("segmentation", camera, resolution)] = self.node.create_client(
                    Trigger, s.segmentation_service(camera, resolution))
        self._goal_handles: list = []

        self._executors, self._threads = [], []
        for node in (self._state_node, self.node):
            executor = SingleThreadedExecutor(context=self._context)
            executor.add_node(node)
            thread = threading.Thread(target=self._spin, args=(executor,), name=f"{node.get_name()}-executor",
                                      daemon=True)
            self._executors.append(executor)
            self._threads.append(thread)
            thread.start()

    # ------------------------------------------------------------------ deadline
    def set_deadline(self, deadline: float | None) -> None:
        """Every wait of the calls that follow ends by ``deadline`` (``time.monotonic()`` s; None: no bound)."""
        self._deadline = deadline

    def _within_deadline(self, timeout: float) -> float:
        """``timeout`` shortened to the host's deadline, if one is set (never below 0)."""
        if self._deadline is None:
            return timeout
        return max(0.0, min(timeout, self._deadline - time.monotonic()))

    def _check_deadline(self, what: str) -> None:
        """At or past the host's deadline: stop the arm (goals cancelled, a zero twist in realtime) and raise."""
        if self._deadline is None or time.monotonic() < self._deadline:
            return
        for handle in list(self._goal_handles):
            with contextlib.suppress(Exception):
                handle.cancel_goal_async()
        with contextlib.suppress(Exception):
            if self._status.value is not None and self._status.value.clock_mode == "realtime":
                stop = self._twist_type()
                stop.header.frame_id = self.names.frames.world
                self._twist_pub.publish(stop)
        raise BackendDeadline(f"{what}: the time limit of this call was reached (cell timeout or episode budget); "
                              f"motion was stopped")

    # ------------------------------------------------------------------ plumbing
    def _introspect(self, action_client) -> None:
        """Publish the client's goal, result and cancel requests and answers on the action's service-event topics
        (stamped on the driver's /clock), so an episode bag records the gripper commands themselves. Action
        introspection exists from Kilted on; on Jazzy the bag keeps the action's feedback and status only."""
        if not hasattr(action_client, "configure_introspection"):
            return
        from rclpy.service_introspection import ServiceIntrospectionState

        from pyrua_ros.wire import qos

        action_client.configure_introspection(self.followed_clock.clock, qos.EVENTS,
                                              ServiceIntrospectionState.CONTENTS)

    def _spin(self, executor) -> None:
        """Spin until shutdown; a callback that raises (a malformed message, say) is reported and the backend keeps
        receiving instead of going deaf."""

        with cputime.section(f"rclpy executor: {threading.current_thread().name}"):   # the thread's whole CPU
            spin_until_shutdown(executor, self._context, name="robo backend")

    def _on_pose(self, msg) -> None:
        pos, quat = pose_to_numpy(msg.pose)
        self._pose.put(EePose(pos=pos, quat_xyzw=quat, stamp=stamp_to_seconds(msg.header.stamp)))

    def _on_status(self, msg, info) -> None:
        gid = sample_gid(info)
        if gid is not None and not self._from_driver(gid):
            return
        status = EpisodeStatus.from_json(msg.data)
        self.state_trace.observe(status)
        self._status.put(status)

    def _from_driver(self, gid: bytes) -> bool:
        """True when ``gid`` is the episode-status publisher of the driver node (``sim.node`` of the interfaces, in
        this backend's namespace):
        success, steps and the e-stop are believed only from there. Any other publisher is ignored and reported
        once as a safety event (``foreign_status`` and the safety-events topic)."""
        if self._status_source is not None and gid == self._status_source:
            return True
        key = gid.hex()
        if key in self.foreign_status:
            self.foreign_status[key]["samples"] += 1
            return False

        node = publisher_node(self.node, self.names.sim.episode_status, gid, wait_s=2.0)
        driver = resolve(self.names.sim.node, self.node.get_namespace())   # relative: the robot's namespace
        if node == driver and self._status_source is None:
            self._status_source = gid
            return True
        why = "a second publisher names itself the driver node" if node == driver else "not the driver node"
        self.foreign_status[key] = {"gid": key, "node": node, "samples": 1, "why": why}
        with contextlib.suppress(Exception):
            from std_msgs.msg import String

            event = {"kind": "foreign_publisher", "topic": self.names.sim.episode_status, "node": node,
                     "gid": key, "reason": f"episode status ignored: {why}"}
            self._safety_pub.publish(String(data=json.dumps(event)))
        return False

    def _on_safety_event(self, msg) -> None:
        with contextlib.suppress(ValueError):
            event = json.loads(msg.data)
            with self._events_lock:
                self._events.append(event)
                self._events_lock.notify_all()

    def _wait_service(self, client, what: str, timeout: float | None = None) -> None:
        timeout = self._timeouts.server_wait_s if timeout is None else timeout
        if not client.wait_for_service(timeout_sec=timeout):
            raise BackendTimeout(f"{what}: no server after {timeout} s")

    @staticmethod
    def _done_within(future, timeout: float) -> bool:
        """Wait for an rclpy future (completed by the executor thread) at most ``timeout`` s."""

        return future_done_within(future, timeout)

    def _refusal_reason(self) -> str:
        """Why the driver refuses motion now, from the latest status: estop, terminated, truncated or refused."""
        st = self.status()
        return "estop" if st.estop else "terminated" if st.terminated else "truncated" if st.truncated else "refused"

    def _refused(self, what: str, detail: str = "") -> BackendRefused:
        """BackendRefused for ``what`` with the reason of :meth:`_refusal_reason`, its message saying why in words
        (the e-stop is engaged, the episode is over) before ``detail``."""
        reason = self._refusal_reason()
        why = REFUSALS.get(reason, "")
        return BackendRefused(f"{what}: " + "; ".join(part for part in (why, detail) if part), reason=reason)

    def _call(self, client, request, what: str, timeout: float, *, server_wait: float | None = None,
              resend_after_s: float | None = None):
        """Call a service and return its answer. ``resend_after_s`` (idempotent requests only): send the request
        again while no answer came for that long. A server that has not yet matched this client's response reader
        (discovery, slow under load) drops its answer ("failed to send response"), so the first request of a
        fresh client can go unanswered; a resend after discovery is answered."""

        self._wait_service(client, what, server_wait)
        budget = self._within_deadline(timeout)
        if resend_after_s is None:   # sent once: a reset or a capture must not run twice
            future = client.call_async(request)
            answer = future.result() if self._done_within(future, budget) else None
        else:
            answer = call_answered(client, request, budget, resend_after_s=resend_after_s)
        if answer is not None:
            return answer
        self._check_deadline(what)
        raise BackendTimeout(f"{what}: no answer after {timeout} s")

    def _require(self, latest: _Latest, what: str, pred=lambda _v: True, timeout: float | None = None):
        value = latest.wait(pred, self._timeouts.server_wait_s if timeout is None else timeout)
        if value is None:
            raise BackendTimeout(f"{what}: nothing received within "
                                 f"{self._timeouts.server_wait_s if timeout is None else timeout} s")
        return value

    def _settle(self, sim_time: float) -> None:
        """Wait (at most ``SETTLE_S``) until the pose and joint states of sim time ``sim_time`` arrived: the
        driver publishes them before the status / goal result, but on separate topics that may be delivered
        later, and a State built from a stale joint state would show the fingers a few steps behind."""

        self._pose.wait(lambda p: p.stamp >= sim_time - 1e-6, SETTLE_S)
        self._joints.wait(lambda m: stamp_to_seconds(m.header.stamp) >= sim_time - 1e-6, SETTLE_S)

    # ------------------------------------------------------------------ episode
    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int):
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParametersAtomically


        def param(name, kind, **value):
            return Parameter(name=name, value=ParameterValue(type=kind, **value))

        req = SetParametersAtomically.Request(parameters=[
            param("suite", ParameterType.PARAMETER_STRING, string_value=str(suite)),
            param("task", ParameterType.PARAMETER_INTEGER, integer_value=int(task)),
            param("seed", ParameterType.PARAMETER_INTEGER, integer_value=int(seed)),
            param("max_episode_steps", ParameterType.PARAMETER_INTEGER, integer_value=int(max_episode_steps)),
        ])
        # The driver may still be booting (a sim node builds LIBERO before it spins, ~15-60 s on a loaded
        # machine): its parameter service exists early but answers only once it spins, so the first call of an
        # episode gets the reset deadline, not the server-wait one.
        # Setting the same parameters twice is harmless: a lost answer (see _call) is asked for again, and once
        # this exchange went through, discovery has matched this client on the driver's side for the reset too.
        res = self._call(self._set_params, req, f"{self.names.sim.node}/set_parameters_atomically",
                         self._timeouts.reset_s, server_wait=self._timeouts.reset_s, resend_after_s=RESEND_AFTER_S)
        if not res.result.successful:
            raise ValueError(res.result.reason)
        answer = self._call(self._reset, self._trigger_type.Request(), self.names.sim.reset, self._timeouts.reset_s)
        if not answer.success:
            raise BackendRefused(f"{self.names.sim.reset}: {answer.message}")
        status = EpisodeStatus.from_json(answer.message)
        self.state_trace.observe(status)
        self._cancelled.clear()
        with self._events_lock:   # safety events count per episode
            self._events.clear()
        self._require(self._status, self.names.sim.episode_status,
                      lambda st: st.episode_id == status.episode_id and st.step == status.step)
        self._require(self._pose, self.names.driver.ee_pose)
        return status

    @property
    def osc_action_scale(self) -> tuple[float, float]:
        """[m, rad] of twist per control step per unit OSC action, as the driver declares it in its
        ``osc_action_scale`` parameter (asked once); ``DEFAULT_OSC_ACTION_SCALE`` for a driver without one."""
        if self._osc_scale is None:
            self._osc_scale = DEFAULT_OSC_ACTION_SCALE
            with contextlib.suppress(BackendTimeout):
                answer = self._call(self._get_params, self._get_params_type.Request(names=["osc_action_scale"]),
                                    f"{self.names.sim.node}/get_parameters", self._timeouts.server_wait_s,
                                    resend_after_s=RESEND_AFTER_S)
                values = list(answer.values[0].double_array_value) if answer.values else []
                if len(values) == 2 and min(values) > 0:
                    self._osc_scale = (float(values[0]), float(values[1]))
        return self._osc_scale

    def _set_sim_parameter(self, name: str, value: int) -> None:
        """Set one integer parameter of the sim node; BackendRefused with its reason when it refuses."""
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParametersAtomically

        req = SetParametersAtomically.Request(parameters=[Parameter(name=name, value=ParameterValue(
            type=ParameterType.PARAMETER_INTEGER, integer_value=value))])
        res = self._call(self._set_params, req, f"{self.names.sim.node}/set_parameters_atomically",
                         self._timeouts.capture_s)
        if not res.result.successful:
            raise BackendRefused(f"{self.names.sim.node}: {name}={value} refused: {res.result.reason}")

    def status(self):
        return self._require(self._status, self.names.sim.episode_status)

    def latest_status(self):
        """The latest episode status received from the driver, or None (no wait)."""
        return self._status.value

    def ee_pose(self) -> EePose:
        return self._require(self._pose, self.names.driver.ee_pose)

    def joints(self) -> JointSnapshot:
        msg = self._require(self._joints, self.names.driver.joint_states)
        return JointSnapshot(names=tuple(msg.name), positions=np.asarray(msg.position, dtype=float),
                             velocities=np.asarray(msg.velocity, dtype=float))

    def gripper_opening(self) -> float:
        return float(self.status().gripper_opening)

    # ------------------------------------------------------------------ motion
    def _refusal_since(self, n_events: int) -> dict | None:
        with self._events_lock:
            for event in self._events[n_events:]:
                if event.get("kind") == "refused":
                    return event
        return None

    def clipped_steps(self) -> int:
        """Control steps the driver's safety filter clipped so far (its ``clipped`` safety events)."""
        with self._events_lock:
            return sum(1 for event in self._events if event.get("kind") == "clipped")

    def servo(self, linear: np.ndarray, angular: np.ndarray) -> EePose:
        if self._cancelled.is_set():
            raise BackendRefused("servo: cancelled", reason="cancelled")
        self._check_deadline("servo")
        before = self.ee_pose()
        status = self.status()
        if status.over:
            reason = "terminated" if status.terminated else "truncated"
            raise BackendRefused(f"servo: {REFUSALS[reason]}", reason=reason)
        if status.estop:
            raise BackendRefused(f"servo: {REFUSALS['estop']}", reason="estop")
        with self._events_lock:
            n_events = len(self._events)
        msg = self._twist_type()
        msg.header.frame_id = self.names.frames.world
        msg.header.stamp = time_msg(before.stamp)
        lin = np.asarray(linear, dtype=float).reshape(3)
        ang = np.asarray(angular, dtype=float).reshape(3)
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(v) for v in lin)
        msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z = (float(v) for v in ang)
        self._twist_pub.publish(msg)
        return self._await_step(before.stamp, n_events)

    def _await_step(self, last_stamp: float, n_events: int) -> EePose:
        """Block until the step after ``last_stamp`` is in (pose, its status, its joint states) and return its pose;
        BackendRefused for a refusal reported after event ``n_events`` or a cancel; BackendTimeout at the
        deadline. One condition wait, woken by each state message."""

        pose_t = [None]

        def settled():
            pose = self._pose.value
            if pose is None or pose.stamp <= last_stamp:
                return False
            st = self._status.value
            if st is None or not (st.sim_time >= pose.stamp - 1e-6 or st.over):
                return False
            pose_t[0] = pose
            js = self._joints.value
            return js is not None and stamp_to_seconds(js.header.stamp) >= pose.stamp - 1e-6

        def ended():
            return settled() or self._refusal_since(n_events) is not None or self._cancelled.is_set()

        timeout = self._timeouts.step_reply_s
        with self._step_cond:
            self._step_cond.wait_for(ended, self._within_deadline(timeout))
            refusal = self._refusal_since(n_events)
            if settled():
                return self._pose.value
        if pose_t[0] is not None:
            # pose and status are in, the joint states of that step are late: give them SETTLE_S more
            self._settle(pose_t[0].stamp)
            return pose_t[0]
        if refusal is not None:
            raise BackendRefused(f"servo: {refusal.get('reason', 'refused by the driver')}",
                                 reason=self._refusal_reason())
        if self._cancelled.is_set():
            raise BackendRefused("servo: cancelled", reason="cancelled")
        self._check_deadline("servo")
        if self._pose.value is not None and self._pose.value.stamp > last_stamp:
            raise BackendTimeout(f"{self.names.sim.episode_status}: no status for t={self._pose.value.stamp:.3f} "
                                 f"s within {timeout} s")
        raise BackendTimeout(f"{self.names.driver.ee_pose}: no pose after a servo command within {timeout} s")

    def gripper_target(self, position_m: float) -> bool:
        """Make every following step carry the finger-gap target ``position_m`` [m] (the driver's gripper target
        topic: no step of its own, so the fingers move with the arm's next steps). Returns once the driver's status
        carries it, so the next twist steps with it; False, sending nothing, when the driver has no such topic
        (asked once: a subscriber within ``server_wait_s``); BackendRefused when the driver refuses it."""
        if self._cancelled.is_set():
            raise BackendRefused("gripper target: cancelled", reason="cancelled")
        self._check_deadline("gripper target")
        if self._streams_target is None:
            deadline = time.monotonic() + self._within_deadline(self._timeouts.server_wait_s)
            while self._target_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            self._streams_target = self._target_pub.get_subscription_count() > 0
        if not self._streams_target:
            return False
        target = float(position_m)
        if abs(self.status().gripper_target - target) < 1e-9:
            return True
        with self._events_lock:
            n_events = len(self._events)
        msg = self._target_type()
        msg.data = [target]
        self._target_pub.publish(msg)
        what = self.names.driver.gripper_target

        def carried():
            st = self._status.value
            return st is not None and abs(st.gripper_target - target) < 1e-9

        with self._step_cond:
            self._step_cond.wait_for(lambda: carried() or self._refusal_since(n_events) is not None
                                     or self._cancelled.is_set(), self._within_deadline(self._timeouts.step_reply_s))
            if carried():
                return True
            refusal = self._refusal_since(n_events)
        if refusal is not None:
            raise BackendRefused(f"{what}: {refusal.get('reason', 'refused by the driver')}",
                                 reason=self._refusal_reason())
        if self._cancelled.is_set():
            raise BackendRefused("gripper target: cancelled", reason="cancelled")
        self._check_deadline(what)
        raise BackendTimeout(f"{what}: no status carrying the target {target} m within {self._timeouts.step_reply_s} s")

    def gripper(self, position_m: float, max_effort: float = 0.0) -> GripperOutcome:
        if self._cancelled.is_set():
            raise BackendRefused("gripper: cancelled", reason="cancelled")
        self._check_deadline("gripper")
        what = self.names.driver.gripper_command
        if not self._gripper.wait_for_server(timeout_sec=self._timeouts.server_wait_s):
            raise BackendTimeout(f"{what}: no action server after {self._timeouts.server_wait_s} s")
        start_step = self.status().step
        goal = self._gripper_type.Goal()
        goal.command.position = float(position_m)
        goal.command.max_effort = float(max_effort)
        send = self._gripper.send_goal_async(goal)
        if not self._done_within(send, self._timeouts.server_wait_s):
            raise BackendTimeout(f"{what}: goal not acknowledged within {self._timeouts.server_wait_s} s")
        handle = send.result()
        if not handle.accepted:
            raise BackendRefused(f"{what}: goal rejected", reason=self._refusal_reason())
        self._goal_handles.append(handle)
        result_future = handle.get_result_async()
        limit = max(self._timeouts.step_reply_s * 10, 30.0)
        if not self._done_within(result_future, self._within_deadline(limit)):
            handle.cancel_goal_async()
            self._check_deadline(what)
            raise BackendTimeout(f"{what}: no result within {limit} s")
        self._goal_handles.remove(handle)
        wrapped = result_future.result()
        result = wrapped.result
        from action_msgs.msg import GoalStatus

        if wrapped.status == GoalStatus.STATUS_ABORTED:
            reason = self._refusal_reason()
            if reason != "refused":   # aborted because the e-stop tripped or the episode ended
                raise BackendRefused(f"{what}: aborted by the driver", reason=reason)
        # The result is sent after the goal's last step was published; wait for that step's status (its gap is
        # the result's position) and its pose / joint states, so steps and a State built now are current.
        status = self._status.wait(lambda s: s.step >= start_step
                                   and abs(s.gripper_opening - float(result.position)) < 1e-5, SETTLE_S)
        if status is None:
            status = self._require(self._status, self.names.sim.episode_status, lambda s: s.step >= start_step)
        self._settle(status.sim_time)
        return GripperOutcome(position=float(result.position), effort=float(result.effort),
                              stalled=bool(result.stalled), reached_goal=bool(result.reached_goal),
                              steps=max(0, status.step - start_step))

    def move_to_target(self, target, gripper_m: float, *, tol: float, step_clip: float, action_scale: float,
                       max_steps: int) -> MoveOutcome | None:
        """Run robo's ``move_to`` loop (no rotation) as one ``MoveToTarget`` goal, the finger-gap target
        ``gripper_m`` [m] carried from its start; the twist scale is the driver's ``osc_action_scale``. None,
        sending nothing, when the driver serves no such action (asked once, ``CARTESIAN_DISCOVERY_S``) or
        ``max_steps`` does not fit the goal's uint32. Returns once
        the goal's last step is in (status, pose, joint states); a goal aborted because the episode ended is a
        normal end. BackendRefused for an e-stop, a cancel or a rejected goal; BackendTimeout when no step comes
        for ``step_reply_s``; BackendDeadline (goal cancelled) at the host's deadline."""
        from action_msgs.msg import GoalStatus

        if self._move is None or not 0 < int(max_steps) < 2 ** 32:   # MoveToTarget's max_steps is a uint32
            return None
        what = self.names.driver.cartesian_move
        if self._cancelled.is_set():
            raise BackendRefused(f"{what}: cancelled", reason="cancelled")
        self._check_deadline(what)
        if self._serves_move is None:
            self._serves_move = bool(self._move.wait_for_server(
                timeout_sec=self._within_deadline(CARTESIAN_DISCOVERY_S)))
        if not self._serves_move:
            return None
        status = self.status()
        if status.over or status.estop:
            raise self._refused(what)
        goal = self._move_type.Goal(target=[float(v) for v in target], gripper_position=float(gripper_m),
                                    tolerance=float(tol), step_clip=float(step_clip),
                                    action_scale=float(action_scale), linear_scale=float(self.osc_action_scale[0]),
                                    max_steps=int(max_steps))
        send = self._move.send_goal_async(goal)
        if not self._done_within(send, self._within_deadline(self._timeouts.server_wait_s)):
            self._check_deadline(what)
            raise BackendTimeout(f"{what}: goal not acknowledged within {self._timeouts.server_wait_s} s")
        handle = send.result()
        if not handle.accepted:
            raise self._refused(what, "goal rejected")
        self._goal_handles.append(handle)
        try:
            wrapped = self._await_goal(handle, status.step, what)
        finally:
            self._goal_handles.remove(handle)
        result = wrapped.result
        if wrapped.status == GoalStatus.STATUS_CANCELED:
            raise BackendRefused(f"{what}: cancelled", reason="cancelled")
        if wrapped.status != GoalStatus.STATUS_SUCCEEDED:
            # the driver ends the goal before it publishes the status that says why (e-stop, episode end)
            self._status.wait(lambda st: st.estop or st.over, SETTLE_S)
            reason = self._refusal_reason()
            if reason not in ("terminated", "truncated"):
                raise self._refused(what, f"aborted by the driver: {result.message}")
        # the result follows the goal's last step: wait for that step's status, pose and joint states
        last = self._require(self._status, self.names.sim.episode_status, lambda st: st.step >= result.step)
        self._settle(last.sim_time)
        return MoveOutcome(iterations=int(result.iterations), final_pos=np.array(result.final_position, dtype=float),
                           step=int(result.step))

    def _await_goal(self, handle, step0: int, what: str):
        """The wrapped result of an accepted goal that steps the driver; BackendRefused on :meth:`cancel`,
        BackendTimeout (goal cancelled) when no step came for ``step_reply_s``, BackendDeadline at the deadline.
        Woken only by the result and :meth:`cancel` (not by every step's messages): the driver's steps are checked
        once per ``step_reply_s``."""
        future = handle.get_result_async()
        ended = threading.Event()
        future.add_done_callback(lambda _f: ended.set())
        self._goal_events.add(ended)
        try:
            timeout = self._timeouts.step_reply_s
            last_step = step0
            while not ended.wait(self._within_deadline(timeout)) and not self._cancelled.is_set():
                st = self._status.value
                if self._deadline is not None and time.monotonic() >= self._deadline:
                    break
                if st is None or st.step == last_step:
                    break
                last_step = st.step
        finally:
            self._goal_events.discard(ended)
        if future.done():
            return future.result()
        if self._cancelled.is_set():
            # cancel() may have run before this goal's acceptance arrived, while the driver already stepped it
            handle.cancel_goal_async()
            raise BackendRefused(f"{what}: cancelled", reason="cancelled")
        self._check_deadline(what)
        handle.cancel_goal_async()
        raise BackendTimeout(f"{what}: no control step for {timeout} s (last step {last_step}); goal cancelled")

    # ------------------------------------------------------------------ perception
    def _check_view(self, camera: str, resolution: str) -> None:
        if camera not in self.cameras:
            raise ValueError(f"unknown camera {camera!r}; valid: {list(self.cameras)}")
        if resolution not in self.resolutions:
            raise ValueError(f"unknown resolution {resolution!r}; valid: {list(self.resolutions)}")

    def _trigger_capture(self, kind: str, camera: str, resolution: str,
                         env_step: int | None = None) -> tuple[float, int, dict]:
        """Call a capture service: (stamp s, control step, the reply's JSON) of the frame it publishes. With
        ``env_step`` the sim's one-shot ``capture_step`` parameter asks for the scene as it was at that step."""
        if env_step is not None:
            self._set_sim_parameter("capture_step", int(env_step))
        service = (self.names.sim.capture_service if kind == "color" else self.names.sim.segmentation_service)(
            camera, resolution)
        answer = self._call(self._captures[(kind, camera, resolution)], self._trigger_type.Request(), service,
                            self._timeouts.capture_s)
        if not answer.success:
            raise BackendRefused(f"{service}: {answer.message}")
        info = json.loads(answer.message)
        sec, nanosec = info["stamp"]
        return sec + nanosec * 1e-9, int(info.get("step", -1)), info

    def _frame(self, topic: str, stamp: float):
        return self._require(self._frames[topic], topic,
                             lambda m: abs(stamp_to_seconds(m.header.stamp) - stamp) < 1e-6,
                             timeout=self._timeouts.capture_s)

    def capture(self, camera: str, resolution: str, env_step: int | None = None) -> CaptureFrame:
        self._check_view(camera, resolution)
        stamp, step, info = self._trigger_capture("color", camera, resolution, env_step)
        topics = self.names.sim.capture_topics(camera, resolution)
        color = image_to_numpy(self._frame(topics["color"], stamp))
        depth = image_to_numpy(self._frame(topics["depth"], stamp)).astype(np.float32, copy=False)
        camera_info = self._frame(topics["camera_info"], stamp)
        if "T_world_optical" in info:   # a past render carries its pose (that TF may have left the buffer)
            T = np.asarray(info["T_world_optical"], dtype=float)
        else:
            T = self.tf.wait_for(self.names.frames.world, self.names.frames.optical(camera), stamp,
                                 self._timeouts.capture_s)
        near, far = info.get("depth_near"), info.get("depth_far")
        return CaptureFrame(camera=camera, resolution=resolution, color=color, depth=depth,
                            K=camera_info_to_K(camera_info), T_world_optical=T, stamp=stamp, env_step=step,
                            depth_near=None if near is None else float(near),
                            depth_far=None if far is None else float(far))

    def segmentation(self, camera: str, resolution: str, env_step: int | None = None) -> SegmentationFrame:
        self._check_view(camera, resolution)
        stamp, _step, _info = self._trigger_capture("segmentation", camera, resolution, env_step)
        topics = self.names.sim.capture_topics(camera, resolution)
        ids = image_to_numpy(self._frame(topics["segmentation"], stamp)).astype(np.int32, copy=False)
        labels = self._require(self._labels, self.names.sim.segmentation_labels)
        return SegmentationFrame(ids=ids, labels={int(k): v for k, v in labels.items()}, stamp=stamp,
                                 camera=camera, resolution=resolution)

    # ------------------------------------------------------------------ lifecycle
    def cancel(self) -> None:
        self._cancelled.set()
        with self._step_cond:              # wake a servo waiting for its step
            self._step_cond.notify_all()
        for event in list(self._goal_events):
            event.set()
        for handle in list(self._goal_handles):
            with contextlib.suppress(Exception):
                handle.cancel_goal_async()

    def close(self) -> None:
        import rclpy

        if self._closed:
            return
        self._closed = True
        for executor in self._executors:
            executor.shutdown(timeout_sec=5.0)
        for thread in self._threads:
            thread.join(timeout=5.0)
        for node in (self.node, self._state_node) if self._owns_node else (self._state_node,):
            with contextlib.suppress(Exception):
                node.destroy_node()
        if not self._owns_node:
            return   # the process's node and context are its owner's
        with contextlib.suppress(Exception):
            rclpy.shutdown(context=self._context)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
