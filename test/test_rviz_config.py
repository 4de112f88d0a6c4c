"""config/libero_sim.rviz: parses as an rviz2 config, and every topic and frame it uses is one of the interfaces."""

import pytest
import yaml

from pyrua_ros.bringup import graph, rviz_config
from pyrua_ros.wire import interfaces

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

RVIZ = graph.config_dir() / graph.RVIZ_CONFIG
NAMES = interfaces.load()


def test_topics_and_types_are_the_interfaces():
    topics = rviz_config.rviz_topics(RVIZ)
    expected = {
        NAMES.driver.robot_description: "std_msgs/msg/String",
        NAMES.driver.tf: "tf2_msgs/msg/TFMessage",
        NAMES.driver.tf_static: "tf2_msgs/msg/TFMessage",
        NAMES.driver.ee_pose: "geometry_msgs/msg/PoseStamped",
        NAMES.agent.markers: "visualization_msgs/msg/MarkerArray",
        NAMES.sim.ground_truth: "visualization_msgs/msg/MarkerArray",
        **{NAMES.driver.color(cam): "sensor_msgs/msg/Image" for cam in NAMES.robot.cameras},
    }
    assert topics == expected


def test_frames_are_the_world_frame():
    assert rviz_config.rviz_frames(RVIZ) == {NAMES.frames.world}


def test_rviz_config_shape():
    config = yaml.safe_load(RVIZ.read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == NAMES.frames.world
    classes = [d["Class"] for d in rviz_config.displays(config)]
    assert classes.count("rviz_default_plugins/Image") == len(NAMES.robot.cameras)
    model = next(d for d in rviz_config.displays(config) if d["Class"] == rviz_config.ROBOT_MODEL)
    assert model["Description Source"] == "Topic"
    assert model["Description Topic"]["Durability Policy"] == "Transient Local"   # /robot_description is latched
    markers = [d for d in rviz_config.displays(config) if d["Class"] == "rviz_default_plugins/MarkerArray"]
    assert markers and all(d["Topic"]["Durability Policy"] == "Transient Local" for d in markers)   # as published
    topics = [d["Topic"]["Value"] for d in rviz_config.displays(config) if isinstance(d.get("Topic"), dict)]
    assert not [t for t in topics if t.startswith("/")]      # relative: a namespaced rviz shows its own robot


def test_unknown_display_is_refused_with_the_known_classes(tmp_path):
    config = yaml.safe_load(RVIZ.read_text())
    config["Visualization Manager"]["Displays"].append(
        {"Class": "rviz_default_plugins/LaserScan", "Name": "scan", "Enabled": True, "Topic": {"Value": "/scan"}})
    path = tmp_path / "extra.rviz"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match=r"LaserScan.*known classes: .*rviz_default_plugins/Image"):
        rviz_config.rviz_topics(path)


def test_group_displays_and_disabled_ones(tmp_path):
    config = yaml.safe_load(RVIZ.read_text())
    displays = config["Visualization Manager"]["Displays"]
    config["Visualization Manager"]["Displays"] = [
        {"Class": "rviz_common/Group", "Name": "all", "Enabled": True, "Displays": displays},
        {"Class": "rviz_default_plugins/Image", "Name": "off", "Enabled": False, "Topic": {"Value": "/off"}},
    ]
    path = tmp_path / "grouped.rviz"
    path.write_text(yaml.safe_dump(config))
    assert rviz_config.rviz_topics(path) == rviz_config.rviz_topics(RVIZ)
