"""RosBackend's lockstep servo step against a scripted driver over loopback DDS (real rclpy on both sides).

The scripted driver publishes what a driver publishes after a control step (``/ee_pose``, ``/joint_states``,
episode status) under the test's control, so the step protocol can be checked message by message: the step is
only done once its pose, its status and its joint states are all in, whatever the order they arrive in; a
refusal on the safety-events topic or a cancel ends the wait at once, not at the step deadline.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from pyrua_ros.wire.interfaces import load

NAMES = load()
D, S = NAMES.driver, NAMES.sim


class ScriptedDriver:
    """Publishes driver state on demand and records the twists it receives."""

    def __init__(self, client):
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        from pyrua_ros.wire import qos

        node = client.node
        self.pose_pub = node.create_publisher(PoseStamped, D.ee_pose, qos.LOCKSTEP)
        self.joints_pub = node.create_publisher(JointState, D.joint_states, qos.LOCKSTEP)
        self.status_pub = node.create_publisher(String, S.episode_status, qos.LATCHED)
        self.events_pub = node.create_publisher(String, D.safety_events, qos.EVENTS)
        self.twists: list = []
        self.got_twist = threading.Event()
        node.create_subscription(TwistStamped, D.servo_twist, self._on_twist, qos.LOCKSTEP)
        self._types = (PoseStamped, JointState, String)

    def _on_twist(self, msg) -> None:
        self.twists.append(msg)
        self.got_twist.set()

    def pose(self, t: float, x: float = 0.1) -> None:
        from pyrua_ros.wire.convert import pose_stamped_msg, time_msg

        self.pose_pub.publish(pose_stamped_msg(np.array([x, 0.0, 1.0]), np.array([1.0, 0, 0, 0]), time_msg(t),
                                               NAMES.frames.world))

    def joints(self, t: float) -> None:
        from pyrua_ros.wire.convert import time_msg

        names = list(NAMES.robot.arm_joints) + list(NAMES.robot.finger_joints)
        msg = self._types[1](name=names, position=[0.0] * len(names), velocity=[0.0] * len(names))
        msg.header.stamp = time_msg(t)
        self.joints_pub.publish(msg)

    def status(self, step: int, **over) -> None:
        from pyrua_ros.sim_interfaces.status import EpisodeStatus

        st = EpisodeStatus(episode_id=1, suite="libero_goal", task=8, seed=0, task_language="test", step=step,
                           sim_time=step * 0.05, success=False, terminated=False, truncated=False,
                           max_episode_steps=100, object_names=("bowl",), clock_mode="lockstep", estop=False,
                           gripper_opening=0.08, gripper_target=0.08)
        self.status_pub.publish(self._types[2](data=dataclasses.replace(st, **over).to_json()))

    def step_state(self, step: int, x: float) -> None:
        self.pose(step * 0.05, x)
        self.joints(step * 0.05)
        self.status(step)


@pytest.fixture
def scripted_rig():
    from pyrua_ros.robo.ros_backend import RosBackend
    from pyrua_ros.testing import RosClient, spin_until

    # the scripted driver is the driver node by name: RosBackend believes the episode status only from it
    client = RosClient(S.node.rsplit("/", 1)[-1])
    driver = ScriptedDriver(client)
    backend = RosBackend()
    try:
        assert spin_until(lambda: driver.pose_pub.get_subscription_count() > 0
                          and backend.motion.twist_pub.get_subscription_count() > 0, 15.0)
        driver.step_state(0, 0.1)
        assert spin_until(lambda: backend.state.pose.value is not None and backend.state.latest.value is not None
                          and backend.state.joint_states.value is not None, 15.0)
        yield driver, backend
    finally:
        backend.close()
        client.close()


def _servo_in_thread(backend):
    out: dict = {}

    def run():
        t0 = time.monotonic()
        try:
            out["pose"] = backend.servo(np.array([0.1, 0, 0]), np.zeros(3))
        except Exception as exc:   # the test inspects it
            out["error"] = exc
        out["wall_s"] = time.monotonic() - t0

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_step_completes_only_when_pose_status_and_joints_of_that_step_are_in(scripted_rig):
    driver, backend = scripted_rig
    thread, out = _servo_in_thread(backend)
    assert driver.got_twist.wait(10.0)
    driver.status(1)                     # status first, then the joint states: not done without the pose
    driver.joints(0.05)
    time.sleep(0.3)
    assert thread.is_alive(), out
    driver.pose(0.05, x=0.12)
    thread.join(10.0)
    assert not thread.is_alive() and "error" not in out, out
    assert out["pose"].stamp == pytest.approx(0.05) and out["pose"].pos[0] == pytest.approx(0.12)
    assert backend.status().step == 1


def test_a_refusal_ends_the_wait_at_once(scripted_rig):
    driver, backend = scripted_rig
    from std_msgs.msg import String

    from pyrua_ros.robo.backend import BackendRefused

    thread, out = _servo_in_thread(backend)
    assert driver.got_twist.wait(10.0)
    driver.status(0, estop=True)
    driver.events_pub.publish(String(data='{"kind": "refused", "reason": "e-stop is latched", "step": 0}'))
    thread.join(NAMES.timeouts.step_reply_s)
    assert not thread.is_alive()
    assert isinstance(out.get("error"), BackendRefused) and out["error"].reason == "estop", out
    assert out["wall_s"] < NAMES.timeouts.step_reply_s


def test_cancel_wakes_a_waiting_step(scripted_rig):
    driver, backend = scripted_rig
    from pyrua_ros.robo.backend import BackendRefused

    thread, out = _servo_in_thread(backend)
    assert driver.got_twist.wait(10.0)
    backend.cancel()                                   # the driver never answers this step
    thread.join(NAMES.timeouts.step_reply_s)
    assert not thread.is_alive()
    assert isinstance(out.get("error"), BackendRefused) and out["error"].reason == "cancelled", out
    assert out["wall_s"] < NAMES.timeouts.step_reply_s


def test_no_answer_is_a_timeout_naming_the_topic(scripted_rig):
    _driver, backend = scripted_rig
    from pyrua_ros.robo.backend import BackendTimeout

    thread, out = _servo_in_thread(backend)
    thread.join(NAMES.timeouts.step_reply_s + 10.0)
    assert isinstance(out.get("error"), BackendTimeout) and D.ee_pose in str(out["error"]), out


def test_what_every_step_publishes_is_taken_on_the_node_with_few_entities(scripted_rig, tmp_path):
    """Every wake-up of an rclpy executor walks all its node's entities in Python, so each subscription to a
    per-step topic (robo's own, the episode recorder's, the video's, the followed clock) and the action clients
    whose feedback comes every step are on the stepwise node; the main node, with the recorder's many quiet
    topics, the capture topics and the service clients, has none of them."""
    from rclpy.action import ActionClient

    from pyrua_ros.records.recorder import episode_topics, record_episode, stepwise_topics
    from pyrua_ros.records.video import EpisodeVideo

    _, backend = scripted_rig

    def subscription_counts() -> dict[str, int]:
        return {node.get_name(): len(list(node.subscriptions)) for node in (backend.node, backend.stepwise_node)}

    before = subscription_counts()
    recorder = record_episode(backend.node, tmp_path / "episode.mcap", stepwise_node=backend.stepwise_node)
    video = EpisodeVideo(backend.stepwise_node)
    try:
        def topics(node) -> set[str]:
            return {sub.topic_name.lstrip("/") for sub in node.subscriptions}

        stepwise = {t.lstrip("/") for t in stepwise_topics(NAMES)}
        recorded = {t.lstrip("/") for t in episode_topics(NAMES)}
        assert stepwise <= recorded and len(recorded - stepwise) > 20
        assert not topics(backend.node) & stepwise
        assert {D.ee_pose, D.joint_states, D.tf, D.clock, S.episode_status} <= topics(backend.stepwise_node)
        assert stepwise & recorded <= topics(backend.stepwise_node)
        assert len(topics(backend.node)) > len(topics(backend.stepwise_node))
        clients = [w for w in backend.stepwise_node.waitables if isinstance(w, ActionClient)]
        assert backend.motion._move in clients and backend.fingers._gripper in clients
        assert not [w for w in backend.node.waitables if isinstance(w, ActionClient)]
    finally:
        video.close()
        recorder.close()
    # an episode's recorder and video leave no subscription behind on either node: one left on the stepwise node
    # would take every step's messages for a closed bag, one more set per episode of a reused worker
    assert subscription_counts() == before
    # close() destroys the action clients before their node: rclpy's destroy_node leaves waitables alone, and one
    # left to the garbage collector after its node crashed a play process at exit
    backend.close()
    assert not [w for w in backend.stepwise_node.waitables if isinstance(w, ActionClient)]
