"""Read an rviz2 config (``.rviz``, YAML) and say which topics (with the message type each display expects) and
which frames it uses, so a test can check a running graph serves every one of them.

Only display classes listed in :data:`DISPLAY_TYPES` are understood; any other display that names a topic raises
ValueError, so adding a display to ``config/libero_sim.rviz`` forces this table to learn its type.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import yaml

from pyrua_ros.wire import interfaces

#: rviz_default_plugins display class -> message type of the topic in its "Topic" property.
DISPLAY_TYPES: dict[str, str] = {
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
    "rviz_default_plugins/Camera": "sensor_msgs/msg/Image",
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Marker": "visualization_msgs/msg/Marker",
    "rviz_default_plugins/Pose": "geometry_msgs/msg/PoseStamped",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
}
ROBOT_MODEL = "rviz_default_plugins/RobotModel"
TF_DISPLAY = "rviz_default_plugins/TF"
NO_TOPIC = ("rviz_default_plugins/Grid", "rviz_default_plugins/Axes")
UNSET_FRAME = "<Fixed Frame>"


def load(path: str | os.PathLike) -> dict[str, Any]:
    with open(path) as fh:
        config = yaml.safe_load(fh)
    if not isinstance(config, dict) or "Visualization Manager" not in config:
        raise ValueError(f"{path}: not an rviz2 config (no 'Visualization Manager')")
    return config


def displays(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every display, groups (``rviz_common/Group``) flattened."""
    stack = list(reversed(config["Visualization Manager"].get("Displays") or []))
    while stack:
        display = stack.pop()
        if display.get("Class") == "rviz_common/Group":
            stack.extend(reversed(display.get("Displays") or []))
        else:
            yield display


def _topic(value: Any) -> str:
    return value["Value"] if isinstance(value, dict) else str(value)


def rviz_topics(path: str | os.PathLike) -> dict[str, str]:
    """``{topic: expected message type}`` of every enabled display of the config at ``path``.

    The TF display (and a RobotModel, which needs TF) adds ``/tf`` and ``/tf_static`` with the names of
    ``config/interfaces.yaml``, since rviz2 reads them without naming them in the file.
    """
    names = interfaces.load()
    topics: dict[str, str] = {}
    for display in displays(load(path)):
        cls = display.get("Class", "")
        if display.get("Enabled") is False:
            continue
        if cls == ROBOT_MODEL:
            if display.get("Description Source", "Topic") == "Topic":
                topics[_topic(display["Description Topic"])] = "std_msgs/msg/String"
            cls = TF_DISPLAY
        if cls == TF_DISPLAY:
            topics[names.driver.tf] = "tf2_msgs/msg/TFMessage"
            topics[names.driver.tf_static] = "tf2_msgs/msg/TFMessage"
        elif cls in DISPLAY_TYPES:
            topics[_topic(display["Topic"])] = DISPLAY_TYPES[cls]
        elif "Topic" in display or cls not in NO_TOPIC:
            raise ValueError(f"display {display.get('Name')!r} of class {cls!r} is not understood; known classes: "
                             f"{', '.join(sorted([*DISPLAY_TYPES, ROBOT_MODEL, TF_DISPLAY, *NO_TOPIC]))}")
    return topics


def rviz_frames(path: str | os.PathLike) -> set[str]:
    """Frames the config names: the fixed frame and any display or view ``Reference``/``Target Frame``."""
    config = load(path)
    manager = config["Visualization Manager"]
    frames = {manager["Global Options"]["Fixed Frame"]}
    views = [manager.get("Views", {}).get("Current") or {}]
    for item in [*displays(config), *views]:
        for key in ("Reference Frame", "Target Frame"):
            if item.get(key) and item[key] != UNSET_FRAME:
                frames.add(item[key])
    return frames
