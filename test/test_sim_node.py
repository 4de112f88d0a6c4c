"""Black-box tests of the real sim node (``python -m pyrua_ros.nodes.sim_node``, LIBERO-PRO libero_goal task 8)
driven by an external rclpy client over loopback DDS: what only the LIBERO sim shows. One node for the module
(start-up builds LIBERO); each test resets the episode it needs. The driver surface itself, the conformance suite
and the scene the sim declares, is swept with every registered driver in test_driver_conformance.py."""

import json
import threading
import time

import numpy as np
import pytest
from rigs.nodes import start

from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.testing import RosClient, spin_until
from pyrua_ros.wire.goal_client import call_answered
from pyrua_ros.wire.interfaces import load

NAMES = load()
D, S, F = NAMES.driver, NAMES.sim, NAMES.frames
ARM = list(NAMES.robot.arm_joints)
WAIT = 60.0   # [s] an upper bound for what normally takes well under a second (generous: CI beside busy loops)


class SimClient:
    """The test's side of the sim node: publishers, service/action clients, a pose tracker for lockstep."""

    def __init__(self, client: RosClient):
        from control_msgs.action import FollowJointTrajectory, GripperCommand
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from rcl_interfaces.srv import SetParametersAtomically
        from rclpy.action import ActionClient
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger

        from pyrua_ros.wire import qos

        self.c, node = client, client.node
        self.twist_pub = node.create_publisher(TwistStamped, D.servo_twist, qos.LOCKSTEP)
        self.estop_pub = node.create_publisher(Bool, D.estop, qos.LOCKSTEP)
        self.reset_cli = node.create_client(Trigger, S.reset)
        self.params_cli = node.create_client(SetParametersAtomically, S.node + "/set_parameters_atomically")
        self.fjt = ActionClient(node, FollowJointTrajectory, D.follow_joint_trajectory)
        self.gripper = ActionClient(node, GripperCommand, D.gripper_command)
        self.cond = threading.Condition()
        self.poses: list = []
        self.joint_states: list = []
        self.events: list[dict] = []
        self.status: dict = {}
        node.create_subscription(PoseStamped, D.ee_pose, self._on_pose, qos.LOCKSTEP)
        node.create_subscription(JointState, D.joint_states, lambda m: self._append(self.joint_states, m),
                                 qos.LOCKSTEP)
        node.create_subscription(String, D.safety_events, lambda m: self._append(self.events, json.loads(m.data)),
                                 qos.EVENTS)
        node.create_subscription(String, S.episode_status, self._on_status, qos.LATCHED)
        # The trajectory action's feedback as it goes out on the wire: rclpy's ActionClient drops a goal's feedback
        # callback once the result is in, and a busy machine can dispatch the last step's feedback after the result.
        self.fjt_feedback: list = []
        node.create_subscription(FollowJointTrajectory.Impl.FeedbackMessage,
                                 D.follow_joint_trajectory + "/_action/feedback",
                                 lambda m: self._append(self.fjt_feedback, m), 10)
        assert self.reset_cli.wait_for_service(timeout_sec=WAIT), "no /sim/reset service"
        assert self.params_cli.wait_for_service(timeout_sec=WAIT)
        assert self.fjt.wait_for_server(timeout_sec=WAIT) and self.gripper.wait_for_server(timeout_sec=WAIT)
        assert spin_until(lambda: self.twist_pub.get_subscription_count() > 0
                          and self.estop_pub.get_subscription_count() > 0, WAIT)

    def _append(self, lst, item):
        with self.cond:
            lst.append(item)
            self.cond.notify_all()

    def _on_pose(self, msg):
        self._append(self.poses, msg)

    def _on_status(self, msg):
        with self.cond:
            self.status = json.loads(msg.data)
            self.cond.notify_all()

    def wait(self, predicate, timeout=WAIT):
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), "condition not met within timeout"

    def reset(self) -> dict:
        from std_srvs.srv import Trigger

        self.estop(False)
        with self.cond:
            n, m = len(self.poses), len(self.joint_states)
        resp = self.c.wait_future(self.reset_cli.call_async(Trigger.Request()), 120.0)
        assert resp.success, resp.message
        status = json.loads(resp.message)

        def stamp(msg) -> float:
            return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9

        # Wait for the reset's own pose (stamped with the reset's sim time), not just any new pose: a pose of the
        # previous episode still in flight would otherwise be taken for it and shift every later step by one.
        # One publisher's messages arrive in order, so once the reset pose is here nothing older is pending.
        self.wait(lambda: self.status.get("episode_id") == status["episode_id"] and len(self.poses) > n
                  and abs(stamp(self.poses[-1]) - status["sim_time"]) < 1e-6 and len(self.joint_states) > m)
        return status

    def estop(self, on: bool):
        from std_msgs.msg import Bool

        self.estop_pub.publish(Bool(data=on))
        self.wait(lambda: self.status.get("estop") == on)

    def pose(self):
        with self.cond:
            p = self.poses[-1]
        return np.array([p.pose.position.x, p.pose.position.y, p.pose.position.z]), p

    def twist(self, v, w=(0.0, 0.0, 0.0), frame=F.world, expect_step=True):
        """Publish one twist; in lockstep that is one control step: return the new /ee_pose message."""
        from geometry_msgs.msg import TwistStamped

        msg = TwistStamped()
        msg.header.frame_id = frame
        (msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z) = map(float, v)
        (msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z) = map(float, w)
        with self.cond:
            n = len(self.poses)
        self.twist_pub.publish(msg)
        if expect_step:
            self.wait(lambda: len(self.poses) > n, 5.0)
            return self.poses[n]
        return None

    def set_params(self, **values):
        from rcl_interfaces.srv import SetParametersAtomically
        from rclpy.parameter import Parameter

        req = SetParametersAtomically.Request(parameters=[Parameter(k, value=v).to_parameter_msg()
                                                          for k, v in values.items()])
        answer = call_answered(self.params_cli, req, WAIT)   # resent while unanswered: parameter sets are idempotent
        assert answer is not None, "set_parameters_atomically: no answer"
        return answer.result

    def send_goal(self, action_client, goal, feedback=None, accepted=True):
        handle = self.c.wait_future(action_client.send_goal_async(goal, feedback_callback=feedback), WAIT)
        assert handle.accepted == accepted
        return handle

    def result(self, handle, timeout=60.0):
        return self.c.wait_future(handle.get_result_async(), timeout)

    def joints(self) -> np.ndarray:
        """Arm joint positions [rad] of the last /joint_states (published with every step and reset)."""
        with self.cond:
            js = self.joint_states[-1]
        return np.array([js.position[list(js.name).index(n)] for n in ARM])


@pytest.fixture(scope="module")
def sim(sim_node):
    """A client of the module's sim node (``sim_node`` of :mod:`rigs.nodes`: it checks the node's clean exit)."""
    client = RosClient("sim_test_client")
    try:
        yield SimClient(client)
    finally:
        client.close()


def trajectory_goal(names, positions_per_point, dt=0.5):
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(names)
    for k, pos in enumerate(positions_per_point, start=1):
        t = k * dt
        goal.trajectory.points.append(JointTrajectoryPoint(positions=list(map(float, pos)),
                                                           time_from_start=Duration(sec=int(t),
                                                                                    nanosec=int((t % 1) * 1e9))))
    return goal


def test_libero_episode_state_model_and_ground_truth(sim):
    """What only the LIBERO sim shows (the driver surface itself is test_driver_conformance.py's): the episode
    status of libero_goal task 8, the URDF of the simulated robot, the home pose, ground-truth markers for rviz."""
    from std_msgs.msg import String
    from visualization_msgs.msg import MarkerArray

    from pyrua_ros.sim_interfaces import EpisodeStatus
    from pyrua_ros.wire import qos

    st = EpisodeStatus.from_dict(sim.reset())
    assert (st.suite, st.task, st.seed, st.step, st.clock_mode) == ("libero_goal", 8, 0, 0, "lockstep")
    assert "plate" in st.task_language and st.object_names
    assert 0.07 < st.gripper_opening < 0.09   # open at reset
    urdf = sim.c.latest(String, D.robot_description, WAIT, qos.LATCHED)
    assert "<robot" in urdf.data and F.base in urdf.data and all(j in urdf.data for j in ARM)
    truth = sim.c.latest(MarkerArray, S.ground_truth, WAIT, qos.LATCHED)
    assert {m.text for m in truth.markers if m.text} == set(st.object_names)
    assert all(m.header.frame_id == F.world for m in truth.markers)
    pose = sim.twist((0, 0, 0))
    assert abs(pose.pose.position.z - 1.17) < 0.05 and abs(pose.pose.orientation.x) > 0.9   # home, pointing down


def test_tf_buffer_composes_the_published_tree_to_the_end_effector_pose(sim):
    from pyrua_ros.wire.tf_buffer import TfBuffer

    tf = TfBuffer(sim.c.node)
    try:
        sim.reset()
        msgs = [sim.twist((0.05, -0.05, 0.0)) for _ in range(3)]
        for msg in msgs:
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            T = tf.wait_for(F.world, F.end_effector, stamp, WAIT)
            p = msg.pose.position
            np.testing.assert_allclose(T[:3, 3], [p.x, p.y, p.z], atol=1e-6)
        T_cam = tf.wait_for(F.world, F.optical("agentview"), None, WAIT)
        assert T_cam[2, 3] > 1.0 and T_cam[2, 2] < 0   # above the table, looking down
    finally:
        tf.destroy()

def test_reset_and_lockstep_are_deterministic(sim):
    seq = [(0.1 * np.sin(k), 0.1 * np.cos(k), -0.05) for k in range(15)]
    runs = []
    for _ in range(2):
        sim.reset()
        initial = (sim.pose()[0], sim.joints())
        poses = [sim.twist(v).pose for v in seq]
        runs.append((initial, [(p.position.x, p.position.y, p.position.z, p.orientation.w) for p in poses]))
    np.testing.assert_array_equal(runs[0][0][0], runs[1][0][0])
    np.testing.assert_array_equal(runs[0][0][1], runs[1][0][1])
    assert runs[0][1] == runs[1][1]


def test_joint_trajectory_runs_to_completion(sim):
    from control_msgs.action import FollowJointTrajectory

    sim.reset()
    q0 = sim.joints()
    target = q0[[0, 3]] + [0.15, 0.1]
    handle = sim.send_goal(sim.fjt, trajectory_goal([ARM[0], ARM[3]], [target], dt=1.0))
    res = sim.result(handle)
    assert res.result.error_code == FollowJointTrajectory.Result.SUCCESSFUL, res.result.error_string

    def last_desired():   # the last step's feedback is published before the result but may arrive after it
        with sim.cond:
            mine = [m for m in sim.fjt_feedback if bytes(m.goal_id.uuid) == bytes(handle.goal_id.uuid)]
        return list(mine[-1].feedback.desired.positions) if mine else "no feedback"

    assert spin_until(lambda: last_desired() == pytest.approx(list(target)), WAIT), (last_desired(), list(target))
    sim.wait(lambda: sim.status["step"] >= 20)   # one control step per 0.05 s of the 1.0 s trajectory
    q = sim.joints()
    assert np.all(np.abs(q[[0, 3]] - target) < 0.05)
    assert np.all(np.abs(np.delete(q - q0, [0, 3])) < 0.05)   # the joints not named hold
    before = sim.pose()[0]
    for _ in range(8):
        after = sim.twist((0.0, 0.0, 0.3)).pose.position   # OSC is back after the trajectory
    assert after.z > before[2] + 0.01


def test_safety_filter_clips_and_reports(sim):
    sim.reset()
    n = len(sim.events)
    start, _ = sim.pose()
    msg = sim.twist((3.0, 0.0, 0.0))
    sim.wait(lambda: len(sim.events) > n)
    ev = sim.events[n]
    assert ev["kind"] == "clipped" and ev["requested"][0] == 3.0 and ev["executed"][0] == pytest.approx(1.0)
    assert "linear speed x +3.000" in ev["reason"] and ev["step"] == 0
    assert msg.pose.position.x - start[0] < 1.0 * 0.05 + 1e-3


def test_bad_requests_are_refused_with_the_valid_choices(sim):

    r = sim.set_params(suite="libero_nope")
    assert not r.successful and "unknown suite 'libero_nope'" in r.reason and "libero_goal" in r.reason
    r = sim.set_params(task=99)
    assert not r.successful and "valid tasks are 0..9" in r.reason
    r = sim.set_params(clock_mode="realtime")
    assert not r.successful and "startup only" in r.reason
    sim.reset()
    q0 = sim.joints()
    n = len(sim.events)
    sim.send_goal(sim.fjt, trajectory_goal(["elbow", ARM[0]], [[0.0, 0.0]]), accepted=False)
    sim.wait(lambda: any("unknown: ['elbow']" in e["reason"] and ARM[6] in e["reason"] for e in sim.events[n:]))
    sim.send_goal(sim.fjt, trajectory_goal(ARM[:2], [[0.0]]), accepted=False)
    sim.wait(lambda: any("point 0 has 1 positions for 2 joint_names" in e["reason"] for e in sim.events[n:]))
    unordered = trajectory_goal(ARM[:1], [[q0[0]], [q0[0]]])
    unordered.trajectory.points[1].time_from_start = unordered.trajectory.points[0].time_from_start
    sim.send_goal(sim.fjt, unordered, accepted=False)
    sim.wait(lambda: any("not after" in e["reason"] and e["kind"] == "rejected" for e in sim.events[n:]))
    assert sim.twist((0.0, 0.0, 0.1)) is not None            # still serving
    assert sim.twist((0, 0, 0), frame="camera", expect_step=False) is None
    sim.wait(lambda: any("frame_id 'camera' is not supported" in e["reason"] for e in sim.events))


def test_parameters_then_reset_select_the_episode(sim):
    r = sim.set_params(suite="libero_goal", task=3, seed=1)
    assert r.successful, r.reason
    try:
        st = sim.reset()
        assert (st["task"], st["seed"]) == (3, 1) and st["task_language"] != ""
    finally:
        assert sim.set_params(task=8, seed=0).successful


def test_episode_truncation_refuses_motion(sim):
    assert sim.set_params(max_episode_steps=3).successful
    try:
        sim.reset()
        for _ in range(3):
            sim.twist((0, 0, 0))
        sim.wait(lambda: sim.status["truncated"] and sim.status["step"] == 3)
        n = len(sim.events)
        sim.twist((0.1, 0, 0), expect_step=False)
        sim.wait(lambda: any("episode over" in e["reason"] for e in sim.events[n:]))
    finally:
        assert sim.set_params(max_episode_steps=10000).successful
        sim.reset()


def test_capture_publishes_images_with_the_stamp_of_the_response(sim):
    from sensor_msgs.msg import CameraInfo, Image
    from std_srvs.srv import Trigger

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.convert import image_to_numpy

    t0 = sim.reset()["sim_time"]
    sim.twist((0, 0, 0.1))
    resp = sim.c.call(Trigger, S.capture_service("agentview", "low"), timeout=WAIT)
    assert resp.success, resp.message
    meta = json.loads(resp.message)
    near, far = meta.pop("depth_near"), meta.pop("depth_far")   # the depth camera's range (camera_meta reports it)
    assert {k: meta[k] for k in ("step", "camera", "resolution")} == {"step": 1, "camera": "agentview",
                                                                       "resolution": "low"}
    assert abs(meta["stamp"][0] + meta["stamp"][1] * 1e-9 - (t0 + NAMES.robot.control_period_s)) < 1e-6
    assert 0 < near < 0.05 and far > 10
    topics = S.capture_topics("agentview", "low")
    color = sim.c.latest(Image, topics["color"], WAIT, qos.LATCHED)
    depth = sim.c.latest(Image, topics["depth"], WAIT, qos.LATCHED)
    info = sim.c.latest(CameraInfo, topics["camera_info"], WAIT, qos.LATCHED)
    for m in (color, depth, info):
        assert [m.header.stamp.sec, m.header.stamp.nanosec] == meta["stamp"]
        assert m.header.frame_id == F.optical("agentview")
    rgb, d = image_to_numpy(color), image_to_numpy(depth)
    assert color.encoding == "rgb8" and rgb.shape == (256, 256, 3) and rgb.std() > 10
    assert depth.encoding == "32FC1" and 0.3 < float(np.median(d[d > 0])) < 3.0
    assert info.width == 256 and info.k[8] == 1.0


def test_capture_step_renders_a_past_step_once(sim):
    """The sim's one-shot ``capture_step``: refused beyond the last step; the next capture shows that step, with its
    step, its stamp and the camera pose of that time; the capture after it shows now again."""
    from std_srvs.srv import Trigger

    t0 = sim.reset()["sim_time"]
    for _ in range(2):
        sim.twist((0, 0, 0.1))
    refused = sim.set_params(capture_step=5)
    assert not refused.successful and "0..2" in refused.reason

    def capture() -> dict:
        resp = sim.c.call(Trigger, S.capture_service("wrist", "low"), timeout=WAIT)
        assert resp.success, resp.message
        return json.loads(resp.message)

    assert sim.set_params(capture_step=1).successful
    past, now = capture(), capture()
    assert past["step"] == 1 and now["step"] == 2 and "T_world_optical" not in now
    assert abs(past["stamp"][0] + past["stamp"][1] * 1e-9 - (t0 + NAMES.robot.control_period_s)) < 1e-6
    T = np.asarray(past["T_world_optical"])
    assert T.shape == (4, 4) and np.allclose(T[3], [0, 0, 0, 1])
    assert 0 < past["depth_near"] < 0.05 and past["depth_far"] > 10


def test_segmentation_and_labels(sim):
    from sensor_msgs.msg import Image
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.convert import image_to_numpy

    sim.reset()
    resp = sim.c.call(Trigger, S.segmentation_service("agentview", "low"), timeout=WAIT)
    assert resp.success, resp.message
    meta = json.loads(resp.message)
    seg = sim.c.latest(Image, S.capture_topics("agentview", "low")["segmentation"], WAIT, qos.LATCHED)
    labels = json.loads(sim.c.latest(String, S.segmentation_labels, WAIT, qos.LATCHED).data)
    assert seg.encoding == "32SC1" and [seg.header.stamp.sec, seg.header.stamp.nanosec] == meta["stamp"]
    ids = image_to_numpy(seg)
    present = {labels[str(i)] for i in np.unique(ids) if i != 0 and str(i) in labels}
    assert "plate_1" in present and "table" in present
    assert set(sim.status["object_names"]) & present


def test_stream_cameras_render_at_camera_rate_and_republish_while_idle(sim):
    """Streams render only for subscribers, at camera_rate_hz of sim time; while nobody commands the robot the
    latest frame is re-published (same stamp), so rviz is never empty while the model thinks."""
    from sensor_msgs.msg import CameraInfo, Image

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.convert import image_to_numpy

    got = {"color": [], "depth": [], "info": []}
    node = sim.c.node
    subs = [node.create_subscription(Image, D.color("agentview"), got["color"].append, qos.STREAM),
            node.create_subscription(Image, D.depth("agentview"), got["depth"].append, qos.STREAM),
            node.create_subscription(CameraInfo, D.info("agentview"), got["info"].append, qos.STREAM)]

    def stamps(key, since):
        return sorted({round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 6) for m in got[key]
                       if m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 >= since - 1e-9})

    try:
        assert spin_until(lambda: all(s.get_publisher_count() > 0 for s in subs), WAIT)
        t0 = sim.reset()["sim_time"]      # renders at t0 (gate reset)
        for _ in range(20):               # 1 s of sim time at 2 Hz: renders at 0.5 s and 1.0 s
            sim.twist((0, 0, 0))
        wanted = [round(t0 + k * 0.5, 6) for k in range(3)]
        assert spin_until(lambda: all(set(wanted) <= set(stamps(k, t0)) for k in got), WAIT), \
            {k: stamps(k, t0) for k in got}
        assert got["color"][-1].width == 256 and got["color"][-1].header.frame_id == F.optical("agentview")
        # the frame of t0 + 1.0 s (rendered off the control path, from a copy of that step's state) is the same
        # image as a capture of that state at the stream size
        cap = _capture(sim, "agentview", "low")
        assert round(cap["stamp"][0] + cap["stamp"][1] * 1e-9, 6) == wanted[-1]

        def frame(key):
            return next(m for m in got[key] if round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 6)
                        == wanted[-1])

        np.testing.assert_array_equal(image_to_numpy(frame("color")), cap["color"])
        np.testing.assert_array_equal(image_to_numpy(frame("depth")), cap["depth"])
        n = len(got["color"])
        assert spin_until(lambda: len(got["color"]) > n, 5.0)          # idle: re-published ...
        assert stamps("color", t0)[-1] == wanted[-1]                   # ... the same frame, nothing new
    finally:
        for s in subs:
            node.destroy_subscription(s)


@pytest.mark.parametrize("clock_mode, waits", [("lockstep", True), ("realtime", False)])
def test_lockstep_streams_wait_for_the_renderer_realtime_ones_drop(clock_mode, waits):
    """In lockstep sim time waits for its client, so a stream frame waits for room in the render backlog (every
    frame of camera_rate_hz is rendered: ``--video-fps 20`` gets a distinct frame per step); realtime drops."""
    from pyrua_ros.driver.node import PARAMETERS
    from pyrua_ros.sim.node import _make_model

    values = {name: p.default for name, p in PARAMETERS.items()} | {"clock_mode": clock_mode}
    model = _make_model(values, NAMES)   # builds nothing until a reset
    try:
        assert model.episode.stream_wait is waits
    finally:
        model.close()


def _capture(sim, camera: str, resolution: str) -> dict:
    """Call the capture service; the published color and depth of that capture, and the response's stamp."""
    from sensor_msgs.msg import Image
    from std_srvs.srv import Trigger

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.convert import image_to_numpy

    resp = sim.c.call(Trigger, S.capture_service(camera, resolution), timeout=WAIT)
    assert resp.success, resp.message
    stamp = json.loads(resp.message)["stamp"]
    topics = S.capture_topics(camera, resolution)
    out = {"stamp": stamp}
    for kind in ("color", "depth"):
        msg = sim.c.latest(Image, topics[kind], WAIT, qos.LATCHED,
                           predicate=lambda m: [m.header.stamp.sec, m.header.stamp.nanosec] == stamp)
        out[kind] = image_to_numpy(msg)
    return out


HOLD_S = 0.5   # the realtime node's command timeout here [s]: several control steps even on a loaded machine


def test_realtime_mode_holds_the_last_twist_then_stops():
    """A second node, realtime clock, in a domain of its own (the module's lockstep node is also named sim)."""
    import os

    from geometry_msgs.msg import PoseStamped, TwistStamped
    from std_msgs.msg import String

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.rosenv import claim_domain_id

    env = dict(os.environ, ROS_DOMAIN_ID=str(claim_domain_id()))
    node = start(DRIVERS["sim"], "-p", "clock_mode:=realtime", "-p", f"command_timeout_s:={HOLD_S}", env=env)
    saved = os.environ["ROS_DOMAIN_ID"]
    client = None
    try:
        assert f"{DRIVERS['sim'].ready} (realtime)" in node.output(), node.output()[-3000:]
        os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]   # rclpy.init reads the domain from the environment
        try:
            client = RosClient("realtime_test_client")
        finally:
            os.environ["ROS_DOMAIN_ID"] = saved
        poses, seen = [], []   # seen: (wall time received [s], the pose's sim-time stamp [s])

        def on_pose(msg):
            seen.append((time.monotonic(), msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9))
            poses.append(msg)

        client.node.create_subscription(PoseStamped, D.ee_pose, on_pose, qos.LOCKSTEP)
        status = json.loads(client.latest(String, S.episode_status, WAIT, qos.LATCHED).data)
        assert status["clock_mode"] == "realtime"
        assert spin_until(lambda: len(poses) >= 10, WAIT)         # steps on its own, no command needed
        # The step rate from the sim time the node stepped (its stamps) over 3 s of wall time between two poses:
        # a burst of poses delivered late (a loaded machine) does not count as steps
        (t_a, s_a) = seen[-1]
        time.sleep(3.0)
        (t_b, s_b) = seen[-1]
        rate = (s_b - s_a) / NAMES.robot.control_period_s / (t_b - t_a)
        assert 0 < rate < 25.0, f"{rate:.1f} steps/s"  # at most the control rate (20 Hz), never flat out; a loaded
        #                                                machine steps slower, so there is no lower bound
        pub = client.node.create_publisher(TwistStamped, D.servo_twist, qos.LOCKSTEP)
        assert spin_until(lambda: pub.get_subscription_count() > 0, WAIT)
        z0 = poses[-1].pose.position.z
        msg = TwistStamped()
        msg.header.frame_id = F.world
        msg.twist.linear.z = 0.3
        pub.publish(msg)                                          # one command, held for HOLD_S of wall time
        time.sleep(HOLD_S + 1.0)
        z1 = poses[-1].pose.position.z
        time.sleep(0.5)
        z2 = poses[-1].pose.position.z
        print(f"held twist: {(z1 - z0) * 1000:.1f} mm, then {(z2 - z1) * 1000:.2f} mm; {rate:.1f} steps/s idle")
        assert z1 - z0 > 0.001                                    # it moved with the held twist
        assert z1 - z0 < 0.3 * (HOLD_S + 0.1) and abs(z2 - z1) < 0.002   # no longer than held; then it stopped
    finally:
        if client is not None:
            client.close()
        rc = node.stop()
    assert rc == 0, f"realtime sim node exit code {rc}:\n" + node.output()[-3000:]
