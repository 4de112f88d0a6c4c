"""The pip launch runner brings up the whole graph, and everything the rviz config shows is really published.

``pyrua-ros launch libero_sim`` starts the LIBERO sim node and the agent node (replaying the packaged program);
while it runs, an external client subscribes to every topic ``config/libero_sim.rviz`` references and checks
that each carries messages of the type rviz expects, and that every frame rviz names is in the TF tree.
"""

import pathlib
import subprocess
import sys
import threading

from pyrua_ros.bringup.rviz_config import rviz_frames, rviz_topics
from pyrua_ros.records.recorder import message_class
from pyrua_ros.testing import spin_until
from pyrua_ros.wire.interfaces import load

NAMES = load()

ROOT = pathlib.Path(__file__).resolve().parent.parent
RVIZ = ROOT / "config" / "libero_sim.rviz"


def test_runner_publishes_every_topic_and_frame_the_rviz_config_shows(ros_client, tmp_path):
    from pyrua_ros.wire import qos

    expected = rviz_topics(RVIZ)
    seen: dict[str, object] = {}
    frames: set[str] = set()
    lock = threading.Lock()

    def on(topic):
        def cb(msg):
            with lock:
                seen.setdefault(topic, msg)
                if hasattr(msg, "transforms"):
                    for tf in msg.transforms:
                        frames.update({tf.header.frame_id, tf.child_frame_id})
        return cb

    latched = {NAMES.driver.robot_description, NAMES.driver.tf_static, NAMES.agent.markers, NAMES.sim.ground_truth}
    for topic, type_name in expected.items():
        profile = qos.LATCHED if topic in latched else qos.STREAM
        ros_client.node.create_subscription(message_class(type_name), topic, on(topic), profile)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "pyrua_ros.cli.main", "launch", "libero_sim", "robot:=sim",
                             "suite:=libero_goal", "task:=8", f"out:={out}", "record:=false", "video:=false"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert spin_until(lambda: set(expected) <= set(seen) or proc.poll() is not None, 300)
        with lock:
            missing = sorted(set(expected) - set(seen))
        assert not missing, f"never published: {missing}"
        for topic, type_name in expected.items():
            assert type(seen[topic]) is message_class(type_name), topic
        assert rviz_frames(RVIZ) <= frames, f"rviz frames {rviz_frames(RVIZ)} not all in TF {sorted(frames)}"
        code = proc.wait(300)
        output = proc.stdout.read()
        assert code == 0, output[-3000:]
    finally:
        if proc.poll() is None:
            proc.send_signal(2)
            proc.wait(60)
    assert (out / "result.json").is_file()
