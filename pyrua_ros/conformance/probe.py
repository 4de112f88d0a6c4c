"""The conformance kit's ROS side: one node in the driver's namespace that watches, commands and queries the graph.

Threading: the probe owns one rclpy context, one node and one MultiThreadedExecutor spinning in one daemon thread;
the checks call its methods from the caller's thread and every wait has a deadline. Names come from
config/interfaces.yaml and are resolved in ``namespace``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable

import numpy as np

from pyrua_ros.wire.goal_client import action_client, call_answered, new_goal_id, send_goal_answered
from pyrua_ros.wire.interfaces import Interfaces, load
from pyrua_ros.wire.spin_thread import spin_until_shutdown

LOCKSTEP_POSE_TIMEOUT_S = 10.0   # longest wait for a lockstep driver's pose after a twist [s]


class Stream:
    """Every message of one topic since subscription, with arrival times (monotonic [s])."""

    def __init__(self):
        self.cond = threading.Condition()
        self.messages: list = []
        self.times: list[float] = []

    def put(self, msg) -> None:
        with self.cond:
            self.messages.append(msg)
            self.times.append(time.monotonic())
            self.cond.notify_all()

    def latest(self):
        with self.cond:
            return self.messages[-1] if self.messages else None

    def count(self) -> int:
        with self.cond:
            return len(self.messages)

    def wait(self, pred: Callable[[list], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: pred(self.messages), timeout)

    def wait_count(self, n: int, timeout: float) -> bool:
        return self.wait(lambda msgs: len(msgs) >= n, timeout)


class Probe:
    """A node named ``pyrua_conformance`` in ``namespace`` with the driver surface's clients."""

    def __init__(self, namespace: str = "", names: Interfaces | None = None):
        import rclpy
        from control_msgs.action import FollowJointTrajectory, GripperCommand
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from rclpy.executors import MultiThreadedExecutor
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool, Float64MultiArray, String
        from tf2_msgs.msg import TFMessage

        from pyrua_ros.wire import qos

        self.names = names or load()
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        ns = "/" + namespace.strip("/") if namespace.strip("/") else "/"
        self.node = rclpy.create_node("pyrua_conformance", namespace=ns, context=self.context)
        d, s = self.names.driver, self.names.sim
        self.poses, self.joints, self.tf, self.tf_static = Stream(), Stream(), Stream(), Stream()
        self.events, self.status = Stream(), Stream()
        sub = self.node.create_subscription
        sub(PoseStamped, d.ee_pose, self.poses.put, qos.EVENTS)
        sub(JointState, d.joint_states, self.joints.put, qos.EVENTS)
        sub(TFMessage, d.tf, self.tf.put, qos.TF)
        sub(TFMessage, d.tf_static, self.tf_static.put, qos.TF_STATIC)
        sub(String, d.safety_events, self.events.put, qos.EVENTS)
        sub(String, s.episode_status, self.status.put, qos.LATCHED)
        self.twist_pub = self.node.create_publisher(TwistStamped, d.servo_twist, qos.LOCKSTEP)
        self.estop_pub = self.node.create_publisher(Bool, d.estop, qos.EVENTS)
        self.gripper_target_pub = self.node.create_publisher(Float64MultiArray, d.gripper_target, qos.LOCKSTEP)
        self._feedback_lock = threading.Lock()
        self._feedback: dict[bytes, list] = {}   # goal id -> the list its feedback goes to (send_goal)
        self.trajectory = self._action(FollowJointTrajectory, d.follow_joint_trajectory)
        self.gripper = self._action(GripperCommand, d.gripper_command)
        try:   # pyrua_ros's own action type; where it was not built the kit cannot probe the action
            from pyrua_ros_msgs.action import MoveToTarget
        except ImportError:   # pragma: no cover - only where the interface package was not built
            MoveToTarget = None
        self.cartesian = None if MoveToTarget is None else self._action(MoveToTarget, d.cartesian_move)
        self._types = {"TwistStamped": TwistStamped, "Bool": Bool, "FollowJointTrajectory": FollowJointTrajectory,
                       "GripperCommand": GripperCommand, "Float64MultiArray": Float64MultiArray}
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="conformance-probe", daemon=True)
        self._thread.start()

    def _action(self, action_type, name: str):
        """An action client of ``name``, and a subscription to the action's feedback as it goes out on the wire:
        rclpy's ActionClient drops a goal's feedback callback once its result is in, and a busy machine can
        dispatch the last steps' feedback after the result, so the kit would count fewer feedback than were
        sent."""
        from rclpy.qos import QoSProfile

        self.node.create_subscription(action_type.Impl.FeedbackMessage, f"{name}/_action/feedback",
                                      self._on_feedback, QoSProfile(depth=1000))
        return action_client(self.node, action_type, name)

    def _on_feedback(self, msg) -> None:
        with self._feedback_lock:
            into = self._feedback.get(bytes(msg.goal_id.uuid))
            if into is not None:
                into.append(msg.feedback)

    def _spin(self) -> None:
        spin_until_shutdown(self.executor, self.context, name="conformance probe")

    # ------------------------------------------------------------------ graph
    def resolve(self, name: str) -> str:
        return self.node.resolve_topic_name(name)

    def publishers(self, name: str) -> list:
        return self.node.get_publishers_info_by_topic(self.resolve(name))

    def subscribers(self, name: str) -> list:
        return self.node.get_subscriptions_info_by_topic(self.resolve(name))

    def services(self) -> dict[str, list[str]]:
        return dict(self.node.get_service_names_and_types())

    def actions(self) -> dict[str, list[str]]:
        """Actions that have a server, with their types. The graph lists an action for a client alone too (the
        probe's own clients among them); only a server publishes ``<action>/_action/status``."""
        from rclpy.action.graph import get_action_names_and_types

        return {name: types for name, types in get_action_names_and_types(self.node)
                if self.node.get_publishers_info_by_topic(f"{name}/_action/status")}

    def wait_graph(self, pred: Callable[[], bool], timeout: float, period: float = 0.05) -> bool:
        """Poll ``pred`` every ``period`` [s] until it holds (True) or ``timeout`` [s] passed (False)."""
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                return False
            time.sleep(period)
        return True

    # ------------------------------------------------------------------ futures
    @staticmethod
    def wait_future(future, timeout: float):
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout):
            raise TimeoutError(f"no answer within {timeout} s")
        return future.result()

    def call(self, srv_type, name: str, request, timeout: float, *, idempotent: bool = False):
        """One service call from a fresh client. An ``idempotent`` request (a capture) is resent while unanswered:
        a server that has not matched this fresh client yet drops its answer; a reset is never sent twice."""
        client = self.node.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=min(timeout, 10.0)):
                raise TimeoutError(f"no {self.resolve(name)} service")
            if not idempotent:
                return self.wait_future(client.call_async(request), timeout)
            answer = call_answered(client, request, timeout)
            if answer is None:
                raise TimeoutError(f"no answer within {timeout} s")
            return answer
        finally:
            self.node.destroy_client(client)

    # ------------------------------------------------------------------ commands
    def twist(self, v, w=(0.0, 0.0, 0.0), frame: str | None = None) -> None:
        msg = self._types["TwistStamped"]()
        msg.header.frame_id = self.names.frames.world if frame is None else frame
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = map(float, v)
        msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z = map(float, w)
        self.twist_pub.publish(msg)

    def stream_twist(self, v, duration_s: float, rate_hz: float = 20.0) -> int:
        """Publish ``v`` [m/s] at ``rate_hz`` for ``duration_s``, each message after the previous one's pose (or
        a period): one step per message in lockstep, a steady command in realtime. Returns poses received.

        A lockstep driver (its episode status says so) gets each message only after the previous one's pose,
        however long its step takes: its command queue holds one message, so one sent sooner would replace the
        one not yet taken, and a slow or loaded driver would take fewer steps than were sent."""
        n0 = self.poses.count()
        period = 1.0 / rate_hz
        lockstep = self.clock_mode() == "lockstep"
        for _ in range(max(1, round(duration_s * rate_hz))):
            before, events = self.poses.count(), self.events.count()
            self.twist(v)
            if lockstep:   # until the step's pose, or a refusal (no step will come)
                self.wait_graph(lambda b=before, e=events: self.poses.count() > b or self._refused_since(e),
                                LOCKSTEP_POSE_TIMEOUT_S, period=0.002)
            else:
                self.poses.wait_count(before + 1, period)
        self.twist((0.0, 0.0, 0.0))
        return self.poses.count() - n0

    def _refused_since(self, events: int) -> bool:
        """Whether a ``refused`` safety event arrived after the first ``events``."""
        with self.events.cond:
            return any(json.loads(m.data).get("kind") == "refused" for m in self.events.messages[events:])

    def episode_status(self) -> dict | None:
        """The driver's latest episode status, parsed; None without one (a real arm publishes none)."""
        msg = self.status.latest()
        return None if msg is None else json.loads(msg.data)

    def clock_mode(self) -> str | None:
        """The driver's clock mode (``lockstep`` | ``realtime``); None without an episode status (a real arm runs in
        real time)."""
        return (self.episode_status() or {}).get("clock_mode")

    def gripper_target(self, gap_m: float) -> None:
        """Publish a gripper target: the finger gap [m] every following step carries."""
        self.gripper_target_pub.publish(self._types["Float64MultiArray"](data=[float(gap_m)]))

    def estop(self, stop: bool) -> None:
        self.estop_pub.publish(self._types["Bool"](data=stop))

    def ee_position(self) -> np.ndarray | None:
        msg = self.poses.latest()
        if msg is None:
            return None
        p = msg.pose.position
        return np.array([p.x, p.y, p.z])

    def joint_positions(self) -> dict[str, float]:
        msg = self.joints.latest()
        return dict(zip(msg.name, msg.position)) if msg is not None else {}

    def send_goal(self, client, goal, timeout: float = 10.0, feedback: list | None = None):
        """(goal handle, accepted) of a goal; its feedback messages, as published (all of them, also those that
        arrive after the result), are appended to ``feedback``."""
        if not client.wait_for_server(timeout_sec=timeout):
            raise TimeoutError("no action server")
        goal_id = new_goal_id()
        if feedback is not None:
            with self._feedback_lock:
                self._feedback[bytes(goal_id.uuid)] = feedback
        handle = send_goal_answered(client, goal, timeout, goal_id=goal_id)
        if handle is None:
            raise TimeoutError(f"no answer to the goal within {timeout} s")
        return handle, bool(handle.accepted)

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=5.0)
        self._thread.join(timeout=5.0)
        with contextlib.suppress(Exception):
            self.trajectory.destroy()
            self.gripper.destroy()
            if self.cartesian is not None:
                self.cartesian.destroy()
        self.node.destroy_node()
        with contextlib.suppress(Exception):
            rclpy.shutdown(context=self.context)
