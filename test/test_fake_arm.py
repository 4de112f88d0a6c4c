"""The fake arm driver: pure FK/IK and renderer checks, then the real node over loopback DDS.

One node process serves the ROS tests of this module (module fixture); each test resets the episode first.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from pyrua_ros.fake_arm import kinematics as kin
from pyrua_ros.fake_arm.episode import FakeEpisode
from pyrua_ros.fake_arm.scene import back_project, render
from pyrua_ros.wire.interfaces import load

NAMES = load()
WAIT = 60.0   # [s] for a latched message to a new subscription: discovery, slow beside busy loops


# ----- pure cores -----
def test_fk_matches_jacobian_and_ik_reaches_pose():
    arm = kin.Panda(kin.transform(None, (-0.66, 0.0, 0.912)))
    q = np.array([0.1, -0.3, 0.2, -2.2, 0.1, 2.0, 0.5])
    J, T = arm.jacobian(q)
    for i in range(7):
        dq = np.zeros(7)
        dq[i] = 1e-6
        assert np.allclose((arm.fk(q + dq)[:3, 3] - T[:3, 3]) / 1e-6, J[:3, i], atol=1e-4)
    target = kin.transform(np.diag([1.0, -1.0, -1.0]), (-0.1, 0.1, 1.05))
    q_sol, err = arm.ik(q, target, iters=100)
    assert err < 1e-5
    assert np.all(q_sol >= kin.Q_MIN) and np.all(q_sol <= kin.Q_MAX)
    assert np.allclose(arm.fk(q_sol)[:3, 3], target[:3, 3], atol=1e-5)


def test_twist_integration_tracks_and_joint_limits_hold():
    ep = FakeEpisode(0, 0, 300)
    start = ep.T_world_ee()[:3, 3].copy()
    assert np.allclose(start, (-0.21, 0.0, 1.17), atol=1e-6)
    for _ in range(20):
        ep.step_twist([0.2, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert np.linalg.norm(ep.T_world_ee()[:3, 3] - (start + np.array([0.2, 0.0, 0.0]))) < 0.005
    for _ in range(100):  # push far beyond reach: the joints stay inside their limits
        ep.step_twist([0.0, 0.0, 1.0], [0.0, 0.0, 0.0])
    assert np.all(ep.q >= kin.Q_MIN - 1e-9) and np.all(ep.q <= kin.Q_MAX + 1e-9)


def test_renderer_depth_back_projects_to_the_cube():
    ep = FakeEpisode(0, 0, 300)
    cube = ep.objects["red_cube_1"]
    for size in (256, 1024):
        cam = ep.camera("agentview", size)
        color, depth, seg = render(ep.shapes(), cam)
        assert color.shape == (size, size, 3) and depth.dtype == np.float32 and seg.dtype == np.int32
    rows, cols = np.nonzero(seg == cube.seg_id)
    assert rows.size > 50
    pts = np.array([back_project(u, v, depth[v, u], cam.K, cam.T_world_optical) for v, u in zip(rows, cols)])
    centre = (pts.min(axis=0) + pts.max(axis=0)) / 2
    assert np.linalg.norm(centre - cube.T[:3, 3]) < 0.01
    assert set(np.unique(seg)) >= {cube.seg_id, ep.robot_id}
    assert color[rows, cols].mean(axis=0)[0] > 100   # the cube is red


def test_the_renderer_draws_the_same_image_whatever_its_band_of_rows(monkeypatch):
    """A pixel comes from its own ray alone, so drawing the image a band of rows at a time (what keeps the caster's
    arrays in the CPU's cache) changes no bit: one row per band, the default and the whole image in one band give
    the same color, depth and segmentation, for both cameras, with the arm over the table and the gripper closed
    (the wrist camera inside the hand's bounding sphere: every one of its pixels is tested against the hand)."""
    from pyrua_ros.fake_arm import scene

    ep = FakeEpisode(0, 1, 300)
    for _ in range(8):
        ep.step_twist(np.array([0.1, -0.05, -0.1]), np.array([0.0, 0.2, 0.3]))
    ep.set_gripper_target(0.0)
    for _ in range(5):
        ep.step_hold()
    for camera in ("agentview", "wrist"):
        cam = ep.camera(camera, 320)   # the default band (64k pixels) splits it in two
        drawn = {}
        for band in (1, scene.BAND_PIXELS, 320 * 320):
            monkeypatch.setattr(scene, "BAND_PIXELS", band)
            drawn[band] = render(ep.shapes(), cam)
        assert len(set(np.unique(drawn[1][2]))) >= 3, camera    # it sees several shapes, not only the sky
        for band, images in drawn.items():
            for name, a, b in zip(("color", "depth", "segmentation"), drawn[1], images):
                assert a.dtype == b.dtype and np.array_equal(a, b), f"{camera} {name}: one row vs {band} px bands"


def test_grasp_carry_release_on_plate_succeeds():
    ep = FakeEpisode(0, 3, 400)

    def go(p):
        for _ in range(80):
            d = np.asarray(p) - ep.T_world_ee()[:3, 3]
            if np.linalg.norm(d) < 0.002:
                return
            ep.step_twist(np.clip(d / 0.05, -0.5, 0.5), [0.0, 0.0, 0.0])

    cube = ep.objects["red_cube_1"].T[:3, 3].copy()
    plate = ep.objects["plate_1"].T[:3, 3].copy()
    go(cube + np.array([0, 0, 0.1]))
    go(cube)
    ep.set_gripper_target(0.0)
    for _ in range(10):
        ep.step_hold()
    assert ep.attached == "red_cube_1" and abs(ep.opening - 0.04) < 1e-3
    go(cube + np.array([0, 0, 0.15]))
    assert ep.objects["red_cube_1"].T[2, 3] > cube[2] + 0.1
    go(plate + np.array([0, 0, 0.08]))
    assert not ep.success
    ep.set_gripper_target(0.08)
    for _ in range(10):
        ep.step_hold()
    assert ep.attached is None and ep.success
    assert abs(ep.objects["red_cube_1"].T[2, 3] - (plate[2] + 0.008 + 0.02)) < 1e-3


def test_bad_task_lists_valid_range():
    with pytest.raises(ValueError, match=r"valid 0\.\.1"):
        FakeEpisode(5, 0, 10)


# ----- the node over DDS -----
@pytest.fixture(scope="module")
def node_proc(fake_arm_node):
    """The module's fake arm node (``fake_arm_node`` of :mod:`rigs.nodes`: started with its parameter file, checked
    for a clean exit)."""
    return fake_arm_node


@pytest.fixture
def arm(node_proc, ros_client):
    return Arm(ros_client)


class Arm:
    """Test-side helpers over a RosClient: reset, lockstep twists, actions, captures."""

    def __init__(self, client):
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from std_msgs.msg import Bool, String

        from pyrua_ros.wire import qos

        self.c, self.node = client, client.node
        self.poses: list = []
        self.events: list = []
        self.statuses: list = []
        self.pose_ev = threading.Condition()
        self.node.create_subscription(PoseStamped, NAMES.driver.ee_pose, self._pose, qos.LOCKSTEP)
        self.node.create_subscription(String, NAMES.driver.safety_events, lambda m: self.events.append(
            json.loads(m.data)), qos.EVENTS)
        self.node.create_subscription(String, NAMES.sim.episode_status, lambda m: self.statuses.append(
            json.loads(m.data)), qos.LATCHED)
        self.twist_pub = self.node.create_publisher(TwistStamped, NAMES.driver.servo_twist, qos.LOCKSTEP)
        self.estop_pub = self.node.create_publisher(Bool, NAMES.driver.estop, qos.EVENTS)
        self.TwistStamped, self.Bool = TwistStamped, Bool

    def _pose(self, msg):
        with self.pose_ev:
            self.poses.append(msg)
            self.pose_ev.notify_all()

    def call(self, srv_type, name, request=None, timeout=15.0):
        """One request from a fresh client, sent once (a reset must not be repeated)."""
        cli = self.node.create_client(srv_type, name)
        try:
            assert cli.wait_for_service(timeout_sec=timeout), f"no service {name}"
            return self.c.wait_future(cli.call_async(request or srv_type.Request()), timeout)
        finally:
            self.node.destroy_client(cli)

    def reset(self, **params) -> dict:
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParametersAtomically
        from std_srvs.srv import Trigger

        if params:
            req = SetParametersAtomically.Request()
            for k, v in params.items():
                val = (ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=v) if isinstance(v, int)
                       else ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=v))
                req.parameters.append(Parameter(name=k, value=val))
            res = self.c.call(SetParametersAtomically, f"{NAMES.sim.node}/set_parameters_atomically", req, 15.0)
            if not res.result.successful:
                return {"refused": res.result.reason}
        resp = self.call(Trigger, NAMES.sim.reset)
        assert resp.success
        return json.loads(resp.message)

    def twist(self, v, w=(0.0, 0.0, 0.0), timeout=5.0):
        """Publish one twist and wait for the /ee_pose it produces (None when no step happened)."""
        with self.pose_ev:
            n = len(self.poses)
        msg = self.TwistStamped()
        msg.header.frame_id = NAMES.frames.world
        (msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z) = v
        (msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z) = w
        deadline = time.monotonic() + timeout
        while self.twist_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.twist_pub.publish(msg)
        with self.pose_ev:
            self.pose_ev.wait_for(lambda: len(self.poses) > n, timeout)
            return self.poses[-1] if len(self.poses) > n else None

    def action(self, action_type, name, goal, timeout=20.0, cancel_after_feedback=0):
        from rclpy.action import ActionClient

        feedback = []
        ac = ActionClient(self.node, action_type, name)
        try:
            assert ac.wait_for_server(timeout_sec=15.0), f"no action server {name}"
            gh = self.c.wait_future(ac.send_goal_async(goal, feedback_callback=lambda f: feedback.append(
                f.feedback)), timeout)
            if not gh.accepted:
                return "rejected", None, feedback
            if cancel_after_feedback:
                deadline = time.monotonic() + timeout
                while len(feedback) < cancel_after_feedback and time.monotonic() < deadline:
                    time.sleep(0.005)
                self.c.wait_future(gh.cancel_goal_async(), timeout)
            res = self.c.wait_future(gh.get_result_async(), timeout)
            return res.status, res.result, feedback
        finally:
            ac.destroy()


def _pos(pose):
    p = pose.pose.position
    return np.array([p.x, p.y, p.z])


def test_capture_back_projects_the_cube(arm):
    from sensor_msgs.msg import CameraInfo, Image
    from std_srvs.srv import Trigger
    from tf2_msgs.msg import TFMessage

    from pyrua_ros.wire import convert, qos

    arm.reset(task=0, seed=0)
    cam, res = "agentview", "low"
    topics = NAMES.sim.capture_topics(cam, res)
    resp = arm.c.call(Trigger, NAMES.sim.capture_service(cam, res), timeout=15.0)
    meta = json.loads(resp.message)
    assert resp.success and meta["camera"] == cam and meta["resolution"] == res
    assert arm.c.call(Trigger, NAMES.sim.segmentation_service(cam, res), timeout=15.0).success
    color = arm.c.latest(Image, topics["color"], WAIT, qos=qos.LATCHED)
    depth = arm.c.latest(Image, topics["depth"], WAIT, qos=qos.LATCHED)
    seg = arm.c.latest(Image, topics["segmentation"], WAIT, qos=qos.LATCHED)
    info = arm.c.latest(CameraInfo, topics["camera_info"], WAIT, qos=qos.LATCHED)
    from std_msgs.msg import String

    labels = json.loads(arm.c.latest(String, NAMES.sim.segmentation_labels, WAIT, qos=qos.LATCHED).data)
    assert (color.encoding, depth.encoding, seg.encoding) == ("rgb8", "32FC1", "32SC1")
    frame = NAMES.frames.optical(cam)
    assert color.header.frame_id == depth.header.frame_id == info.header.frame_id == frame
    assert [color.header.stamp.sec, color.header.stamp.nanosec] == meta["stamp"]
    static = arm.c.latest(TFMessage, NAMES.driver.tf_static, WAIT, qos=qos.TF_STATIC)
    tf = next(t for t in static.transforms if t.child_frame_id == frame)
    assert tf.header.frame_id == NAMES.frames.world
    T = convert.transform_to_matrix(tf.transform)
    K = convert.camera_info_to_K(info)
    d, s = convert.image_to_numpy(depth), convert.image_to_numpy(seg)
    cube_id = int(next(k for k, v in labels.items() if v == "red_cube_1"))
    rows, cols = np.nonzero(s == cube_id)
    v, u = round(rows.mean()), round(cols.mean())
    pts = np.array([back_project(c, r, d[r, c], K, T) for r, c in zip(rows, cols)])
    truth = np.array([0.0, -0.15, 0.92])   # the nominal (seed 0) cube centre
    assert np.linalg.norm((pts.min(axis=0) + pts.max(axis=0)) / 2 - truth) < 0.02
    assert np.linalg.norm(back_project(u, v, d[v, u], K, T) - truth) < 0.03   # a surface point of a 4 cm cube


def _capture_depth(arm, after_step: int) -> np.ndarray:
    from sensor_msgs.msg import Image
    from std_srvs.srv import Trigger

    from pyrua_ros.wire import convert, qos

    topic = NAMES.sim.capture_topics("agentview", "low")["depth"]
    meta = json.loads(arm.c.call(Trigger, NAMES.sim.capture_service("agentview", "low"), timeout=15.0).message)
    assert meta["step"] == after_step
    msg = arm.c.latest(Image, topic, WAIT, qos=qos.LATCHED,
                       predicate=lambda m: [m.header.stamp.sec, m.header.stamp.nanosec] == meta["stamp"])
    return convert.image_to_numpy(msg).copy()


def test_reset_is_deterministic_and_validates(arm):
    a = arm.reset(task=1, seed=7)
    depth_a = _capture_depth(arm, 0)
    for _ in range(3):
        arm.twist((0.1, 0.0, 0.0))
    b = arm.reset(task=1, seed=7)
    depth_b = _capture_depth(arm, 0)
    assert a["episode_id"] + 1 == b["episode_id"] and b["step"] == 0
    assert b["sim_time"] > a["sim_time"]    # sim time never runs backwards across resets
    assert {k: a[k] for k in ("task", "seed", "task_language")} == {k: b[k] for k in ("task", "seed", "task_language")}
    assert a["task_language"] == "put the blue can on the plate"
    assert np.array_equal(depth_a, depth_b)
    arm.reset(task=1, seed=8)
    assert not np.array_equal(depth_a, _capture_depth(arm, 0))   # another seed, another layout
    assert "valid tasks are 0..1" in arm.reset(task=9)["refused"]
    assert "fake_table" in arm.reset(suite="libero_goal")["refused"]




def test_sigusr1_prints_every_thread_stack_and_the_node_goes_on(node_proc, arm):
    """`kill -USR1 <pid>` on a node prints where each of its threads is (what a test that gives up on a hung launch
    shows), and the node keeps serving afterwards."""
    from pyrua_ros.testing.processes import dump_node_stacks

    before = len(node_proc.output())
    assert dump_node_stacks([node_proc.pid]) == [node_proc.pid]
    dump = node_proc.output()[before:]
    assert "Current thread" in dump and "File " in dump and "spin" in dump, dump[-3000:]
    assert node_proc.alive()
    assert arm.reset(task=0, seed=0)["step"] == 0
