"""Episode recording: real publishers over loopback DDS -> EpisodeRecorder -> MCAP -> mcap_ros2 decode."""

import pathlib
import re
import sys
import time

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from pyrua_ros.agent import recorder
from pyrua_ros.driver import interfaces, qos
from pyrua_ros.testing import spin_until

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


def test_unknown_type_is_a_clear_error():
    with pytest.raises(ValueError, match="not package/msg/Name"):
        recorder.message_class("Image")
    with pytest.raises(ValueError, match="not installed"):
        recorder.message_class("no_such_msgs/msg/Thing")


def test_episode_topics_use_interface_names():
    topics = recorder.episode_topics(NAMES)
    assert topics[NAMES.driver.joint_states] == "sensor_msgs/msg/JointState"
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

    with open(path, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary.statistics.message_count == sum(counts.values())
    assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
    assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}

    seen: dict[str, list] = {}
    with open(path, "rb") as fh:
        for schema, channel, _message, decoded in make_reader(fh, decoder_factories=[DecoderFactory()]) \
                .iter_decoded_messages():
            seen.setdefault(channel.topic.removeprefix("/"), []).append((schema.name, decoded))
    assert all(topic.startswith("/") for topic in {c.topic for c in summary.channels.values()})   # absolute
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
