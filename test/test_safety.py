"""Unit tests of the pure layer-1/2/4 pieces the sim node is built on: safety filter, clocks, conversions,
the TF buffer and the episode-status schema. No ROS graph; fast."""

import json

import numpy as np
import pytest

from pyrua_ros.driver.clock import LockstepClock, RateGate, RealtimeClock, make_clock
from pyrua_ros.safety import EStop, SafetyFilter, SafetyLimits, refusal
from pyrua_ros.safety.filter import rotation_vector
from pyrua_ros.sim_interfaces import EpisodeStatus
from pyrua_ros.wire import convert
from pyrua_ros.wire.tf_buffer import TransformError, TransformStore

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

LIMITS = SafetyLimits((-0.5, -0.5, 0.9), (0.5, 0.5, 1.4), max_linear_speed=0.5, max_angular_speed=2.0)
DT = 0.05


def test_twist_inside_limits_passes_unchanged():
    f = SafetyFilter(LIMITS).filter_twist([0.1, 0.0, -0.1], [0, 0, 0.5], [0.0, 0.0, 1.1], DT, step=3)
    assert f.event is None
    np.testing.assert_allclose(f.v, [0.1, 0.0, -0.1])
    np.testing.assert_allclose(f.w, [0, 0, 0.5])


def test_speed_limits_clip_each_axis_and_report_it():
    f = SafetyFilter(LIMITS).filter_twist([2.0, -0.3, 0.0], [0, 0, -8.0], [0.0, 0.0, 1.1], DT, step=7)
    np.testing.assert_allclose(f.v, [0.5, -0.3, 0.0])        # per axis, like LIBERO's OSC action clip
    np.testing.assert_allclose(f.w, [0.0, 0.0, -2.0])
    ev = json.loads(f.event.to_json())
    assert ev["kind"] == "clipped" and ev["step"] == 7
    assert ev["requested"][:3] == [2.0, -0.3, 0.0] and ev["executed"][0] == pytest.approx(0.5)
    assert "linear speed x +2.000 m/s beyond the per-axis limit 0.5 m/s" in ev["reason"]
    assert "angular speed z -8.000 rad/s" in ev["reason"]
    diagonal = SafetyFilter(LIMITS).filter_twist([0.5, 0.5, 0.5], [2.0, 2.0, 0], [0.0, 0.0, 1.1], DT, step=0)
    assert diagonal.event is None                            # every axis at its limit: nothing is cut


def test_workspace_box_stops_at_the_wall_but_lets_the_arm_back_in():
    flt = SafetyFilter(LIMITS)
    f = flt.filter_twist([0.0, 0.0, -0.4], [0, 0, 0], [0.0, 0.0, 0.91], DT, step=0)
    assert f.v[2] == pytest.approx((0.9 - 0.91) / DT)       # exactly reaches z min
    assert "z would reach 0.890 m < workspace min 0.9 m" in f.event.reason
    outside = flt.filter_twist([0.0, 0.0, 0.2], [0, 0, 0], [0.0, 0.0, 0.85], DT, step=0)
    assert outside.event is None and outside.v[2] == pytest.approx(0.2)   # moving back in is allowed
    deeper = flt.filter_twist([0.0, 0.0, -0.2], [0, 0, 0], [0.0, 0.0, 0.85], DT, step=0)
    assert deeper.v[2] == 0.0


def test_a_joint_step_runs_only_as_far_as_the_limits_allow():
    """A joint set point is judged by the end-effector motion it gives: here a 'robot' whose end effector sits at
    (q0, 0, 1.1 + q1) and turns by q2 about z."""
    def pose_at(q):
        return np.array([q[0], 0.0, 1.1 + q[1]]), np.array([0.0, 0.0, np.sin(q[2] / 2), np.cos(q[2] / 2)])

    f = SafetyFilter(LIMITS)
    q, event = f.filter_joint_step([0.0, 0.0, 0.0], [0.01, -0.02, 0.05], pose_at, DT, step=4)
    assert event is None and list(q) == [0.01, -0.02, 0.05]                  # 0.2, 0.4 m/s and 1 rad/s: inside
    q, event = f.filter_joint_step([0.0, 0.0, 0.0], [0.3, 0.0, 0.0], pose_at, DT, step=4)   # 6 m/s along x
    assert q[0] == pytest.approx(0.5 * DT, abs=1e-5) and event.kind == "clipped" and event.step == 4
    assert event.requested[0] == pytest.approx(6.0) and event.executed[0] == pytest.approx(0.5, abs=1e-3)
    assert "linear speed x +6.000 m/s beyond the per-axis limit 0.5 m/s" in event.reason
    q, event = f.filter_joint_step([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], pose_at, DT, step=5)   # 20 rad/s about z
    assert q[2] == pytest.approx(2.0 * DT, abs=1e-5) and "angular speed z" in event.reason
    q, event = f.filter_joint_step([0.49, 0.0, 0.0], [0.51, 0.0, 0.0], pose_at, DT, step=6)  # out of the box
    assert q[0] == pytest.approx(0.5, abs=1e-5) and "x would reach 0.510 m > workspace max 0.5 m" in event.reason
    np.testing.assert_allclose(rotation_vector([0, 0, 0, 1], [np.sin(0.15), 0, 0, np.cos(0.15)]), [0.3, 0, 0])


def test_limits_reject_bad_configuration():
    with pytest.raises(ValueError, match="must be below workspace_max"):
        SafetyLimits((0, 0, 1), (1, 1, 0.5), 1.0, 1.0)
    with pytest.raises(ValueError, match="must be > 0"):
        SafetyLimits((0, 0, 0), (1, 1, 1), 0.0, 1.0)


def test_refusal_and_estop_latch():
    ev = json.loads(refusal([0.1, 0, 0], [0, 0, 0], "e-stop is latched", 4).to_json())
    assert ev == {"kind": "refused", "requested": [0.1, 0.0, 0.0, 0.0, 0.0, 0.0], "executed": [0.0] * 6,
                  "reason": "e-stop is latched", "step": 4}
    e = EStop()
    assert e.set(True) and e.active
    assert not e.set(True) and e.active      # stays latched
    assert e.set(False) and not e.active


def test_clocks():
    lock = make_clock("lockstep", 0.1)
    assert isinstance(lock, LockstepClock)
    np.testing.assert_array_equal(lock.on_command(np.ones(6), 0.0), np.ones(6))
    assert lock.on_tick(1.0) is None
    rt = make_clock("realtime", 0.1)
    assert isinstance(rt, RealtimeClock)
    assert rt.on_command(np.ones(6), 10.0) is None
    np.testing.assert_array_equal(rt.on_tick(10.05), np.ones(6))     # held
    np.testing.assert_array_equal(rt.on_tick(10.2), np.zeros(6))     # timed out -> zero
    with pytest.raises(ValueError, match="'lockstep', 'realtime'"):
        make_clock("fast", 0.1)
    gate = RateGate(2.0)
    assert [gate.ready(t) for t in (0.0, 0.25, 0.5, 0.75, 1.0)] == [True, False, True, False, True]


def test_image_round_trip_and_encodings():
    from builtin_interfaces.msg import Time

    rgb = np.random.default_rng(0).integers(0, 255, (4, 5, 3), dtype=np.uint8)
    depth = np.linspace(0, 2, 20, dtype=np.float32).reshape(4, 5)
    ids = np.arange(20, dtype=np.int32).reshape(4, 5)
    for img, enc in ((rgb, "rgb8"), (depth, "32FC1"), (ids, "32SC1")):
        msg = convert.image_msg(img, Time(sec=1, nanosec=5), "cam_optical_frame")
        assert msg.encoding == enc and msg.header.frame_id == "cam_optical_frame"
        assert msg.step == img.shape[1] * img.itemsize * (3 if img.ndim == 3 else 1)
        np.testing.assert_array_equal(convert.image_to_numpy(msg), img)
    with pytest.raises(ValueError, match="supported"):
        convert.image_msg(np.zeros((2, 2), dtype=np.float64), Time(), "f")


def test_camera_info_pose_and_quaternions():
    K = np.array([[-200.0, 0, 127.5], [0, 200.0, 127.5], [0, 0, 1]])
    info = convert.camera_info_msg(K, 256, 256, convert.time_msg(1.25), "agentview_optical_frame")
    np.testing.assert_array_equal(convert.camera_info_to_K(info), K)
    assert (info.header.stamp.sec, info.header.stamp.nanosec) == (1, 250_000_000)
    q = np.array([0.9996, 0.0002, -0.0284, 0.0])
    q /= np.linalg.norm(q)
    np.testing.assert_allclose(convert.matrix_to_quat(convert.quat_to_matrix(q)), q, atol=1e-12)
    pos, quat = convert.pose_to_numpy(convert.pose_msg([1, 2, 3], q))
    np.testing.assert_allclose(pos, [1, 2, 3])
    np.testing.assert_allclose(quat, q)


def _T(t, yaw=0.0):
    T = np.eye(4)
    T[:3, :3] = [[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]]
    T[:3, 3] = t
    return T


def test_tf_store_composes_chains_and_respects_stamps():
    tf = TransformStore()
    tf.add("world", "base", 0.0, _T([1, 0, 0]), static=True)
    tf.add("base", "ee", 1.0, _T([0, 1, 0], np.pi / 2))
    tf.add("base", "ee", 2.0, _T([0, 2, 0], np.pi / 2))
    tf.add("world", "cam", 0.0, _T([0, 0, 2]), static=True)
    np.testing.assert_allclose(tf.lookup("world", "ee")[:3, 3], [1, 2, 0], atol=1e-12)        # latest
    np.testing.assert_allclose(tf.lookup("world", "ee", 1.5)[:3, 3], [1, 1, 0], atol=1e-12)   # at or before
    T_cam_ee = tf.lookup("cam", "ee", 2.0)
    np.testing.assert_allclose(T_cam_ee[:3, 3], [1, 2, -2], atol=1e-12)
    np.testing.assert_allclose(tf.lookup("ee", "cam", 2.0) @ T_cam_ee, np.eye(4), atol=1e-12)
    with pytest.raises(TransformError, match=r"no transform at or before t=0\.5000"):
        tf.lookup("world", "ee", 0.5)
    with pytest.raises(TransformError, match="known frames"):
        tf.lookup("world", "nowhere")


def test_episode_status_round_trip_and_schema_errors():
    st = EpisodeStatus(episode_id=1, suite="libero_goal", task=8, seed=0, task_language="put the bowl on the plate",
                       step=3, sim_time=0.15, success=False, terminated=False, truncated=False,
                       max_episode_steps=10000, object_names=("plate_1",), clock_mode="lockstep", estop=False,
                       gripper_opening=0.079, gripper_target=0.08)
    assert EpisodeStatus.from_json(st.to_json()) == st
    assert json.loads(st.to_json())["object_names"] == ["plate_1"]
    d = st.to_dict()
    del d["estop"]
    d["extra"] = 1
    with pytest.raises(ValueError, match=r"missing keys \['estop'\], unknown keys \['extra'\]"):
        EpisodeStatus.from_dict(d)
    with pytest.raises(ValueError, match="clock_mode 'fast'"):
        EpisodeStatus.from_dict(st.to_dict() | {"clock_mode": "fast"})


def test_tf_lookup_at_a_stamp_not_yet_received_raises_instead_of_answering_an_older_pose():
    store = TransformStore()
    for k, stamp in enumerate((0.05, 0.10)):
        T = np.eye(4)
        T[0, 3] = k
        store.add("world", "ee", stamp, T)
    assert store.lookup("world", "ee", 0.10)[0, 3] == 1.0
    assert store.lookup("world", "ee", 0.07)[0, 3] == 0.0
    with pytest.raises(TransformError, match="yet"):
        store.lookup("world", "ee", 0.15)
