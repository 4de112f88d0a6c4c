"""Episode recording: real publishers over loopback DDS -> EpisodeRecorder -> MCAP -> mcap_ros2 decode, and a
whole fake-arm episode's bag read back as ``ros2 bag play`` would: rosbag2's QoS metadata per channel, the
step-0 state, sim-time stamps everywhere, the commands and camera_info."""

import json
import pathlib
import re
import subprocess
import sys
import time

import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

from pyrua_ros.records import recorder
from pyrua_ros.testing import spin_until
from pyrua_ros.wire import interfaces, qos
from pyrua_ros.wire.distro import installed_type_hash

ROOT = pathlib.Path(__file__).resolve().parent.parent

NAMES = interfaces.load()
RECORD_S = 1.0


def _msg_file_fields(type_name: str) -> list[str]:
    """Field lines ``type name`` of the installed ``.msg`` file, without comments, constants or defaults."""
    package, _, name = type_name.split("/")
    path = pathlib.Path(sys.prefix) / "share" / package / "msg" / f"{name}.msg"
    if not path.is_file():
        pytest.skip(f"{path} is not installed")
    fields = []
    for raw in path.read_text().splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) < 2 or "=" in words[1] or (len(words) > 2 and words[2].startswith("=")):
            continue                                           # blank, comment or constant
        kind, field = words[:2]
        if "/" not in kind and kind[0].isupper():            # same-package reference, e.g. "Point"
            kind = f"{package}/{kind}"
        fields.append(f"{kind} {field}")
    return fields


@pytest.mark.parametrize("type_name", ["sensor_msgs/msg/Image", "sensor_msgs/msg/CameraInfo",
                                       "tf2_msgs/msg/TFMessage", "visualization_msgs/msg/Marker"])
def test_generated_schema_matches_the_installed_definition(type_name):
    text = recorder.ros2msg_schema(recorder.message_class(type_name))
    top = text.split(recorder.SEPARATOR)[0].strip().splitlines()
    assert top == _msg_file_fields(type_name)
    # every nested type appears once as a MSG: section
    nested = {m.split("[")[0] for m in re.findall(r"^(\S+/\S+) ", text, re.M)}
    sections = re.findall(r"^MSG: (\S+)$", text, re.M)
    assert sorted(sections) == sorted(set(sections))
    assert nested <= set(sections)


@pytest.mark.parametrize("type_name", ["control_msgs/action/GripperCommand_FeedbackMessage",
                                       "control_msgs/action/FollowJointTrajectory_SendGoal_Event",
                                       "action_msgs/srv/CancelGoal_Event", "action_msgs/msg/GoalStatusArray"])
def test_action_and_service_parts_resolve_and_keep_their_kind(type_name):
    cls = recorder.message_class(type_name)
    assert recorder.type_name_of(cls) == type_name
    text = recorder.ros2msg_schema(cls)
    nested = {m.split("[")[0] for m in re.findall(r"^(\S+/\S+) ", text, re.M)}
    assert nested <= set(re.findall(r"^MSG: (\S+)$", text, re.M))     # every nested part resolved and written


def test_standard_schemas_decode_and_generated_parts_carry_an_empty_one(ros_client, tmp_path):
    """mcap_ros2 (like Foxglove) decodes the ros2msg schemas; action parts get rosbag2's empty schema."""
    from std_msgs.msg import String

    topic = f"{NAMES.driver.gripper_command}/_action/status"
    topics = {"/rec_check/string": recorder.STRING, topic: "action_msgs/msg/GoalStatusArray",
              "/rec_check/event": "action_msgs/srv/CancelGoal_Event"}
    path = tmp_path / "parts.mcap"
    rec = recorder.EpisodeRecorder(ros_client.node, path, topics)
    from action_msgs.srv import CancelGoal

    pub = ros_client.node.create_publisher(String, "/rec_check/string", qos.EVENTS)
    ev = ros_client.node.create_publisher(CancelGoal.Event, "/rec_check/event", qos.EVENTS)
    assert spin_until(lambda: pub.get_subscription_count() and ev.get_subscription_count(), 10.0)
    pub.publish(String(data="hello"))
    ev.publish(CancelGoal.Event())
    assert spin_until(lambda: rec.counts["/rec_check/string"] and rec.counts["/rec_check/event"], 5.0)
    rec.close()
    with open(path, "rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        schemas = {s.name: s.encoding for s in reader.get_summary().schemas.values()}
        assert schemas == {"std_msgs/msg/String": "ros2msg", "action_msgs/srv/CancelGoal_Event": ""}
        (_s, _c, _m, msg), = reader.iter_decoded_messages(topics=["/rec_check/string"])
    assert msg.data == "hello"
    assert len(decoded(path)[interface_name("/rec_check/event")]) == 1


def test_offered_qos_yaml_is_rosbag2s_and_reads_back():
    text = recorder.offered_qos_yaml([qos.LATCHED, qos.EVENTS])
    entries = yaml.safe_load(text)
    assert [set(e) for e in entries] == [{"history", "depth", "reliability", "durability", "deadline", "lifespan",
                                          "liveliness", "liveliness_lease_duration",
                                          "avoid_ros_namespace_conventions"}] * 2
    assert entries[0]["durability"] == 1 and entries[1]["durability"] == 2 and entries[0]["reliability"] == 1
    assert entries[0]["deadline"] == {"sec": 9223372036, "nsec": 854775807}       # RMW_DURATION_INFINITE
    latched, events = recorder.qos_profiles_from_yaml(text)
    assert latched.durability == DurabilityPolicy.TRANSIENT_LOCAL and latched.depth == 1
    assert events.durability == DurabilityPolicy.VOLATILE and events.depth == 50


def test_qos_reads_rosbag2s_named_policies_too():
    """Metadata version 9 (Kilted's rosbag2) writes policy names instead of integers."""
    text = ("- history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: transient_local\n"
            "  deadline: {sec: 9223372036, nsec: 854775807}\n  lifespan: {sec: 9223372036, nsec: 854775807}\n"
            "  liveliness: automatic\n  liveliness_lease_duration: {sec: 9223372036, nsec: 854775807}\n"
            "  avoid_ros_namespace_conventions: false\n")
    (profile,) = recorder.qos_profiles_from_yaml(text)
    assert profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
    assert profile.reliability == ReliabilityPolicy.RELIABLE


def test_unknown_type_is_a_clear_error():
    with pytest.raises(ValueError, match="not package/msg/Name"):
        recorder.message_class("Image")
    with pytest.raises(ValueError, match="not installed"):
        recorder.message_class("no_such_msgs/msg/Thing")


def test_episode_topics_use_interface_names():
    topics = recorder.episode_topics(NAMES)
    assert topics[NAMES.driver.joint_states] == "sensor_msgs/msg/JointState"
    assert topics[NAMES.driver.gripper_target] == "std_msgs/msg/Float64MultiArray"
    assert topics[NAMES.driver.color("agentview")] == "sensor_msgs/msg/Image"
    assert NAMES.driver.color("wrist") not in recorder.episode_topics(NAMES, cameras=False)
    assert NAMES.driver.tf_static in recorder.latched_topics(NAMES)


def test_records_joint_states_tf_and_images(ros_client, tmp_path):
    from geometry_msgs.msg import TransformStamped
    from sensor_msgs.msg import Image, JointState
    from tf2_msgs.msg import TFMessage

    node = ros_client.node
    camera = NAMES.robot.cameras[0]
    topics = recorder.episode_topics(NAMES)
    path = tmp_path / "episode.mcap"
    rec = recorder.EpisodeRecorder(node, path, topics, latched=recorder.latched_topics(NAMES))

    pub_js = node.create_publisher(JointState, NAMES.driver.joint_states, qos.LOCKSTEP)
    pub_tf = node.create_publisher(TFMessage, NAMES.driver.tf, qos.LOCKSTEP)
    pub_static = node.create_publisher(TFMessage, NAMES.driver.tf_static, qos.TF_STATIC)
    pub_img = node.create_publisher(Image, NAMES.driver.color(camera), qos.STREAM)
    assert spin_until(lambda: all(p.get_subscription_count() > 0 for p in (pub_js, pub_tf, pub_img)), 10.0)

    static = TransformStamped()
    static.header.frame_id, static.child_frame_id = NAMES.frames.world, NAMES.frames.base
    static.transform.rotation.w = 1.0
    pub_static.publish(TFMessage(transforms=[static]))

    joints = list(NAMES.robot.arm_joints)
    start = time.monotonic()
    k = 0
    while time.monotonic() - start < RECORD_S:
        k += 1
        pub_js.publish(JointState(name=joints, position=[0.01 * k] * len(joints)))
        tf = TransformStamped()
        tf.header.frame_id, tf.child_frame_id = NAMES.frames.base, NAMES.frames.end_effector
        tf.transform.translation.z = 0.001 * k
        tf.transform.rotation.w = 1.0
        pub_tf.publish(TFMessage(transforms=[tf]))
        if k % 5 == 0:
            img = Image(height=4, width=6, encoding="rgb8", step=18, data=bytes(range(72)))
            img.header.frame_id = NAMES.frames.optical(camera)
            pub_img.publish(img)
        time.sleep(0.02)
    sent = k
    assert spin_until(lambda: rec.counts[NAMES.driver.joint_states] >= sent, 5.0), rec.counts
    counts = rec.close()
    assert rec.close() == counts                 # idempotent
    assert counts[NAMES.driver.joint_states] == sent
    assert counts[NAMES.driver.tf] == sent
    assert counts[NAMES.driver.tf_static] == 1
    assert counts[NAMES.driver.color(camera)] == sent // 5

    channels = channel_metadata(path)
    assert set(channels) == {t for t, n in counts.items() if n}         # a channel per topic that had messages
    (static_qos,) = recorder.qos_profiles_from_yaml(channels[NAMES.driver.tf_static]["offered_qos_profiles"])
    assert static_qos.durability == DurabilityPolicy.TRANSIENT_LOCAL    # what the publisher offered
    (js_qos,) = recorder.qos_profiles_from_yaml(channels[NAMES.driver.joint_states]["offered_qos_profiles"])
    assert js_qos.durability == DurabilityPolicy.VOLATILE and js_qos.reliability == ReliabilityPolicy.RELIABLE
    assert channels[NAMES.driver.tf]["topic_type_hash"] == installed_type_hash("tf2_msgs/msg/TFMessage")
    info = bag_metadata(path)
    assert info["version"] == recorder.ROSBAG2_METADATA_VERSION and info["storage_identifier"] == "mcap"
    assert info["message_count"] == sum(counts.values()) and info["ros_distro"] == "kilted"
    listed = {interface_name(t["topic_metadata"]["name"]): t["message_count"]
              for t in info["topics_with_message_count"]}
    assert listed == {t: n for t, n in counts.items() if n}

    with open(path, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary.statistics.message_count == sum(counts.values())
    assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
    assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}

    seen: dict[str, list] = {}
    with open(path, "rb") as fh:
        for schema, channel, _message, decoded in make_reader(fh, decoder_factories=[DecoderFactory()]) \
                .iter_decoded_messages():
            seen.setdefault(interface_name(channel.topic), []).append((schema.name, decoded))
    js = seen[NAMES.driver.joint_states]
    assert {name for name, _ in js} == {"sensor_msgs/msg/JointState"}
    assert list(js[-1][1].name) == joints and js[-1][1].position[0] == pytest.approx(0.01 * sent)
    tf_name, tf_msg = seen[NAMES.driver.tf][-1]
    assert tf_name == "tf2_msgs/msg/TFMessage"
    assert tf_msg.transforms[0].child_frame_id == NAMES.frames.end_effector
    assert tf_msg.transforms[0].transform.translation.z == pytest.approx(0.001 * sent)
    assert seen[NAMES.driver.tf_static][0][1].transforms[0].child_frame_id == NAMES.frames.base
    img_name, img = seen[NAMES.driver.color(camera)][0]
    assert img_name == "sensor_msgs/msg/Image"
    assert (img.height, img.width, img.encoding) == (4, 6, "rgb8")
    assert bytes(img.data) == bytes(range(72))
    assert img.header.frame_id == NAMES.frames.optical(camera)


# ------------------------------------------------------------------ reading a bag back
def interface_name(topic: str) -> str:
    """A bag's (absolute) topic as the interface name of config/interfaces.yaml (relative): the tests run in the
    root namespace, where the two differ by the leading slash."""
    assert topic.startswith("/"), topic
    return topic.removeprefix("/")


def channel_metadata(path) -> dict[str, dict]:
    """``{interface name: channel metadata}`` of an MCAP file."""
    with open(path, "rb") as fh:
        return {interface_name(c.topic): dict(c.metadata) for c in make_reader(fh).get_summary().channels.values()}


def bag_metadata(path) -> dict:
    """The ``rosbag2_bagfile_information`` of the file's ``rosbag2`` metadata record (what rosbag2 decodes)."""
    with open(path, "rb") as fh:
        records = [m for m in make_reader(fh).iter_metadata() if m.name == "rosbag2"]
    assert len(records) == 1
    return yaml.safe_load(records[0].metadata["serialized_metadata"])["rosbag2_bagfile_information"]


def decoded(path) -> dict[str, list]:
    """``{topic: [(mcap message, decoded message)]}``, decoded as ``ros2 bag play`` does: by the schema's type
    name with the installed type support (generated action/service parts carry an empty schema, as in rosbag2)."""
    from rclpy.serialization import deserialize_message

    out: dict[str, list] = {}
    with open(path, "rb") as fh:
        for schema, channel, message in make_reader(fh).iter_messages():
            msg = deserialize_message(message.data, recorder.message_class(schema.name))
            out.setdefault(interface_name(channel.topic), []).append((message, msg))
    return out


def header_stamps(msg) -> list[float]:
    """Every ``header.stamp`` [s] inside a decoded message (nested ones too: TF transforms, markers)."""
    found = []
    if hasattr(msg, "header") and hasattr(msg.header, "stamp"):
        found.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
    for name in ("transforms", "markers"):
        for item in getattr(msg, name, None) or []:
            found += header_stamps(item)
    return found


@pytest.fixture(scope="module")
def fake_episode(tmp_path_factory):
    """One recorded ``pyrualean play`` episode on the kinematic fake arm (replayed program: segment, move, grasp,
    place); returns the run directory."""
    out = tmp_path_factory.mktemp("recorded") / "run"
    proc = subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", "cells",
                           "--suite", "fake_table", "--task", "0", "--driver", "fake"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "episode.mcap").is_file()
    return out


def test_episode_bag_replays_latched_topics_transient_local(fake_episode):
    channels = channel_metadata(fake_episode / "episode.mcap")
    for topic in (NAMES.driver.tf_static, NAMES.driver.robot_description):
        profiles = recorder.qos_profiles_from_yaml(channels[topic]["offered_qos_profiles"])
        assert profiles and all(p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in profiles), topic
    for topic, meta in channels.items():                                  # every channel parses
        assert recorder.qos_profiles_from_yaml(meta["offered_qos_profiles"]), topic
    info = bag_metadata(fake_episode / "episode.mcap")
    assert {interface_name(t["topic_metadata"]["name"]) for t in info["topics_with_message_count"]} == set(channels)


def test_episode_bag_holds_the_step_zero_state(fake_episode):
    msgs = decoded(fake_episode / "episode.mcap")
    statuses = [json.loads(m.data) for _, m in msgs[NAMES.sim.episode_status]]
    episode = statuses[-1]["episode_id"]                  # the driver's boot status may precede the reset's
    t0 = next(s for s in statuses if s["episode_id"] == episode and s["step"] == 0)["sim_time"]
    for topic in (NAMES.driver.ee_pose, NAMES.driver.joint_states):
        stamps = [header_stamps(m)[0] for _, m in msgs[topic]]
        # the reset's step-0 state is there (the driver's own boot state may precede it: sim time carries on from
        # the boot episode, so that one is stamped earlier, and the first state need not be the reset's)
        assert any(s == pytest.approx(t0) for s in stamps), (topic, t0, sorted(stamps)[:3])
    assert any(s == pytest.approx(t0) for _, m in msgs[NAMES.driver.tf] for s in header_stamps(m))


def test_every_header_stamp_is_sim_time(fake_episode):
    msgs = decoded(fake_episode / "episode.mcap")
    last_clock = max(m.clock.sec + m.clock.nanosec * 1e-9 for _, m in msgs[NAMES.driver.clock])
    assert 0 < last_clock < 1e6                                           # sim seconds, not the Unix epoch
    stamped = {topic: [s for _, m in items for s in header_stamps(m)] for topic, items in msgs.items()}
    assert stamped[NAMES.agent.markers], "markers were recorded"
    for topic, stamps in stamped.items():
        assert all(0 <= s <= last_clock + 1e-6 for s in stamps), (topic, max(stamps, default=None))
    # service events (action goals, where a client sends any: robo's gripper moves ride the gripper target) too
    events = [m for topic, items in msgs.items() if topic.endswith("/_service_event") for _, m in items]
    assert all(0 < m.info.stamp.sec + m.info.stamp.nanosec * 1e-9 <= last_clock + 1e-6 for m in events)


def test_episode_bag_records_the_commands_and_camera_info(fake_episode):
    msgs = decoded(fake_episode / "episode.mcap")
    calls = [json.loads(line) for line in (fake_episode / "calls.jsonl").read_text().splitlines()]
    twists = msgs.get(NAMES.driver.servo_twist, [])
    moved = sum(c["env_steps"] or 0 for c in calls if c["tool"] in ("move_to", "move_pose", "release"))
    # a move_to runs as one MoveToTarget goal on this driver: its request and one feedback per step are recorded;
    # the other motions' steps are servo twists
    action = NAMES.driver.cartesian_move
    feedback = [m.feedback for _, m in msgs.get(f"{action}/_action/feedback", [])]
    assert len(twists) + len(feedback) >= moved > 0 and feedback
    assert [f.iteration for f in feedback if f.iteration == 1], "each goal's first step is recorded"
    assert msgs.get(f"{action}/_action/send_goal/_service_event"), "the goals themselves are recorded"
    # robo's gripper changes are finger targets the following steps carry (a driver that serves them gets no
    # GripperCommand goal): set_gripper's hold as a goal's gripper_position, release's as a gripper target
    targets = [m.data[0] for _, m in msgs[NAMES.driver.gripper_target]]
    held = [r.goal.gripper_position for _, m in msgs[f"{action}/_action/send_goal/_service_event"] for r in m.request]
    assert targets and held and min(held) < 0.01 < max(targets) <= 0.08       # closed on the cube, opened to release
    for camera in NAMES.robot.cameras:
        capture = NAMES.sim.capture_topics(camera, "high")
        infos = [m for _, m in msgs[capture["camera_info"]]]
        assert infos and infos[0].k[0] > 0 and (infos[0].width, infos[0].height) == (1024, 1024)
        colors = {tuple(header_stamps(m)) for _, m in msgs[capture["color"]]}
        assert colors and colors <= {tuple(header_stamps(m)) for m in infos}   # each image with its camera_info


def test_followed_clock_is_system_time_until_clock_then_sim_time(ros_client):
    from rosgraph_msgs.msg import Clock

    from pyrua_ros.wire.followed_clock import FollowedClock

    node = ros_client.node
    followed = FollowedClock(node)
    try:
        wall = time.time()
        before = followed.now_msg()
        assert not followed.following and abs(before.sec + before.nanosec * 1e-9 - wall) < 5.0
        pub = node.create_publisher(Clock, NAMES.driver.clock, qos.LOCKSTEP)
        assert spin_until(lambda: pub.get_subscription_count() > 0, 10.0)
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = 12, 500_000_000
        pub.publish(msg)
        assert spin_until(lambda: followed.following, 5.0)
        now = followed.now_msg()
        assert (now.sec, now.nanosec) == (12, 500_000_000)        # sim time holds until the next /clock
    finally:
        followed.close()


def test_a_held_recording_keeps_an_earlier_episodes_late_frames_out(ros_client, tmp_path):
    """A driver shared between episodes may still publish the last episode's stream frames: a held bag writes
    only latched topics until begin(), then no stream frame stamped ahead of the new episode's clock."""
    from builtin_interfaces.msg import Time
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image

    color, clock = "/rec_held/color", "/rec_held/clock"
    rec = recorder.EpisodeRecorder(ros_client.node, tmp_path / "held.mcap",
                                   {color: recorder.IMAGE, clock: "rosgraph_msgs/msg/Clock"},
                                   held=True, stamped=[color], clock=clock)
    images = ros_client.node.create_publisher(Image, color, qos.EVENTS)
    clocks = ros_client.node.create_publisher(Clock, clock, qos.EVENTS)
    assert spin_until(lambda: images.get_subscription_count() and clocks.get_subscription_count(), 10.0)

    def frame(t: float) -> Image:
        msg = Image(height=1, width=1, encoding="rgb8", step=3, data=b"\x01\x02\x03")
        msg.header.stamp = Time(sec=int(t), nanosec=round(t % 1 * 1e9))
        return msg

    def settle():
        deadline = time.monotonic() + 0.5
        spin_until(lambda: time.monotonic() > deadline, 1.0)

    images.publish(frame(7.0))                     # the last episode, before begin(): not written
    settle()
    rec.begin()
    images.publish(frame(7.5))                     # after begin(), ahead of the new clock (none yet): not written
    settle()
    for t in (0.0, 0.5):                           # the new episode: its clock, then its frame
        clocks.publish(Clock(clock=Time(sec=0, nanosec=round(t * 1e9))))
        settle()
        images.publish(frame(t))
        settle()
    rec.close()
    written = decoded(tmp_path / "held.mcap")[interface_name(color)]
    assert [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _mc, m in written] == [0.0, 0.5]


def test_a_held_recording_keeps_late_frames_out_when_sim_time_carries_on(ros_client, tmp_path):
    """pyrua_ros's drivers never run sim time backwards: the new episode starts a control period after the last
    one's end, so a late frame of the last episode is one stamped no later than the clock at begin()."""
    from builtin_interfaces.msg import Time
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image

    color, clock = "/rec_carry/color", "/rec_carry/clock"
    rec = recorder.EpisodeRecorder(ros_client.node, tmp_path / "carry.mcap",
                                   {color: recorder.IMAGE, clock: "rosgraph_msgs/msg/Clock"},
                                   held=True, stamped=[color], clock=clock)
    images = ros_client.node.create_publisher(Image, color, qos.EVENTS)
    clocks = ros_client.node.create_publisher(Clock, clock, qos.EVENTS)
    assert spin_until(lambda: images.get_subscription_count() and clocks.get_subscription_count(), 10.0)

    def stamp(t: float) -> Time:
        return Time(sec=int(t), nanosec=round(t % 1 * 1e9))

    def frame(t: float) -> Image:
        msg = Image(height=1, width=1, encoding="rgb8", step=3, data=b"\x01\x02\x03")
        msg.header.stamp = stamp(t)
        return msg

    def settle():
        deadline = time.monotonic() + 0.5
        spin_until(lambda: time.monotonic() > deadline, 1.0)

    clocks.publish(Clock(clock=stamp(7.0)))        # the last episode's end
    settle()
    rec.begin()
    clocks.publish(Clock(clock=stamp(7.0)))        # re-published while idle: time carries on from there
    settle()
    images.publish(frame(7.0))                     # a late frame of the last episode: not written
    settle()
    for t in (7.05, 7.55):                         # the new episode: its clock, then its frame
        clocks.publish(Clock(clock=stamp(t)))
        settle()
        images.publish(frame(t))
        settle()
    rec.close()
    written = decoded(tmp_path / "carry.mcap")[interface_name(color)]
    assert [round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 3) for _mc, m in written] == [7.05, 7.55]


def test_start_at_keeps_an_earlier_episodes_frames_out_even_without_the_clock(ros_client, tmp_path):
    """Under load the recorder may not have matched the driver's clock by begin(): the reset's own sim time
    (start_at) still keeps a late frame of the earlier episode out, and the new episode's frames in."""
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import Image

    color = "/rec_start/color"
    rec = recorder.EpisodeRecorder(ros_client.node, tmp_path / "start.mcap", {color: recorder.IMAGE}, held=True,
                                   stamped=[color], clock="/rec_start/clock")
    images = ros_client.node.create_publisher(Image, color, qos.EVENTS)
    assert spin_until(lambda: images.get_subscription_count(), 10.0)

    def frame(t: float) -> Image:
        msg = Image(height=1, width=1, encoding="rgb8", step=3, data=b"\x01\x02\x03")
        msg.header.stamp = Time(sec=int(t), nanosec=round(t % 1 * 1e9))
        return msg

    rec.begin()
    images.publish(frame(7.0))                     # a late frame of the last episode, after begin()
    assert spin_until(lambda: rec._pending, 5.0)   # held back: the reset has not answered yet
    rec.start_at(7.05)                             # the reset's status: the new episode starts here
    for t in (7.05, 7.55):
        images.publish(frame(t))
    assert spin_until(lambda: rec.counts[color] == 2, 5.0)
    rec.close()
    written = decoded(tmp_path / "start.mcap")[interface_name(color)]
    assert [round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 3) for _mc, m in written] == [7.05, 7.55]


def test_state_published_before_the_episode_stays_out_though_taken_after_begin(ros_client, tmp_path):
    """The state a driver published while the recorder was matching it (its boot's step 0, stamped 0) can be taken
    by the executor only after begin(): an eval worker's first bag once held that pose and joint state beside its
    own step 0. Pose, joint states and TF are kept from the episode's start (start_at) on; the reset's own step 0
    (stamped at the start, published before its clock) and the steps after it are all kept."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import PoseStamped, TransformStamped
    from rosgraph_msgs.msg import Clock
    from tf2_msgs.msg import TFMessage

    pose, tf, clock = "/rec_since/ee_pose", "/rec_since/tf", "/rec_since/clock"
    topics = {pose: "geometry_msgs/msg/PoseStamped", tf: recorder.TF_MESSAGE, clock: "rosgraph_msgs/msg/Clock"}
    rec = recorder.EpisodeRecorder(ros_client.node, tmp_path / "since.mcap", topics, held=True,
                                   since_start=[pose, tf], clock=clock)
    poses = ros_client.node.create_publisher(PoseStamped, pose, qos.EVENTS)
    tfs = ros_client.node.create_publisher(TFMessage, tf, qos.EVENTS)
    clocks = ros_client.node.create_publisher(Clock, clock, qos.EVENTS)
    assert spin_until(lambda: poses.get_subscription_count() and tfs.get_subscription_count()
                      and clocks.get_subscription_count(), 10.0)

    def stamp(t: float) -> Time:
        return Time(sec=int(t), nanosec=round(t % 1 * 1e9))

    def step(t: float) -> None:   # what a driver publishes after a step: state first, then the clock
        msg = PoseStamped()
        msg.header.stamp = stamp(t)
        poses.publish(msg)
        transform = TransformStamped(child_frame_id="hand")
        transform.header.stamp = stamp(t)
        tfs.publish(TFMessage(transforms=[transform]))
        clocks.publish(Clock(clock=stamp(t)))

    clocks.publish(Clock(clock=stamp(0.0)))
    rec.begin()
    step(0.0)                                      # the driver's boot state, taken after begin()
    step(0.05)                                     # the reset's step 0 ...
    assert spin_until(lambda: len(rec._pending) == 4, 5.0)   # ... both held back until the reset answers
    rec.start_at(0.05)
    for t in (0.1, 0.15):
        step(t)
    step(0.0)                                      # a stale state after the start: not written either
    assert spin_until(lambda: rec.counts[pose] == 3 and rec.counts[tf] == 3, 5.0)
    rec.close()
    written = decoded(tmp_path / "since.mcap")
    assert [round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 3)
            for _mc, m in written[interface_name(pose)]] == [0.05, 0.1, 0.15]
    assert [round(m.transforms[0].header.stamp.sec + m.transforms[0].header.stamp.nanosec * 1e-9, 3)
            for _mc, m in written[interface_name(tf)]] == [0.05, 0.1, 0.15]


def test_a_held_recording_gets_the_first_state_a_driver_in_another_process_publishes(ros_client, tmp_path):
    """The bag must hold the reset's step-0 state. Matched on this side is not matched on the driver's (DDS
    discovery is one-sided; under load CI lost the step-0 pose so): ``wait_for_publishers`` also waits for the
    latched status, which the driver sends once it matched that reader, made after the state readers. The driver
    here is another participant (its own context), publishing the state at once after the wait, as a reset does."""
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import String

    from pyrua_ros.testing import RosClient

    pose, status = "/rec_match/ee_pose", "/rec_match/status"
    driver = RosClient("rec_match_driver")
    try:
        status_pub = driver.node.create_publisher(String, status, qos.LATCHED)
        status_pub.publish(String(data="{}"))
        pose_pub = driver.node.create_publisher(PoseStamped, pose, qos.EVENTS)
        rec = recorder.EpisodeRecorder(ros_client.node, tmp_path / "match.mcap",
                                       {pose: "geometry_msgs/msg/PoseStamped", status: recorder.STRING},
                                       latched={status}, held=True)
        with pytest.raises(ValueError, match="latched topic subscribed after"):
            rec.wait_for_publishers([status], 1.0, confirm=pose)
        assert rec.wait_for_publishers([pose], 30.0, confirm=status) == []
        rec.begin()
        pose_pub.publish(PoseStamped())            # at once, as the reset publishes its step-0 state
        spin_until(lambda: rec.counts[pose] > 0, 10.0)
        rec.close()
    finally:
        driver.close()
    assert rec.counts[pose] == 1 and rec.counts[status] == 1
