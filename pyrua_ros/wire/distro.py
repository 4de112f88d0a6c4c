"""Which ROS 2 distro this process runs on, and whether its interface types match another node's on the wire.

Jazzy (the LTS most real arms run) and Kilted differ in one type pyrua_ros uses: control_msgs 6.3+ (Kilted) adds
two fields to the FollowJointTrajectory feedback. ROS 2 names a type's wire layout by its RIHS01 type hash, which
every endpoint advertises; :func:`installed_type_hash` reads ours (from the type description installed with the
package) and :func:`endpoint_type_hashes` reads what a live node advertises for a topic, so a check can say
"the driver speaks a different FollowJointTrajectory" instead of leaving feedback silently undecodable.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import pathlib

RCLPY_MAJOR_TO_DISTRO = {7: "jazzy", 9: "kilted"}   # ros-rclpy wheel major version -> distro


def ros_distro() -> str:
    """The ROS 2 distro of this process: ``ROS_DISTRO`` (set by a real install's setup script), else the distro
    of the ``ros-rclpy`` wheel. Raises ``RuntimeError`` when neither says."""
    if os.environ.get("ROS_DISTRO"):
        return os.environ["ROS_DISTRO"]
    try:
        version = importlib.metadata.version("ros-rclpy")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError("ROS_DISTRO is unset and no ros-rclpy wheel is installed") from None
    major = int(version.split(".")[0])
    if major not in RCLPY_MAJOR_TO_DISTRO:
        raise RuntimeError(f"ros-rclpy {version} belongs to no distro pyrua_ros knows "
                           f"({', '.join(f'{v}: {k}.x' for k, v in RCLPY_MAJOR_TO_DISTRO.items())})")
    return RCLPY_MAJOR_TO_DISTRO[major]


def _split(type_name: str) -> tuple[str, str, str]:
    parts = type_name.split("/")
    if len(parts) != 3 or parts[1] not in ("msg", "srv", "action") or not all(parts):
        raise ValueError(f"type {type_name!r} is not package/msg|srv|action/Name")
    return parts[0], parts[1], parts[2]


@functools.cache
def _description_hashes(package: str, kind: str, base: str) -> dict[str, str]:
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        share = pathlib.Path(get_package_share_directory(package))
    except PackageNotFoundError:
        return {}
    path = share / kind / f"{base}.json"
    if not path.is_file():
        return {}
    return {h["type_name"]: h["hash_string"] for h in json.loads(path.read_text())["type_hashes"]}


def installed_type_hash(type_name: str) -> str | None:
    """RIHS01 hash of an installed type, e.g. ``control_msgs/action/FollowJointTrajectory_Feedback``; ``None`` if
    the type (or its package's type description) is not installed. Parts of a service or action
    (``_Goal``, ``_Feedback``, ``_FeedbackMessage``...) are read from their interface's description."""
    package, kind, name = _split(type_name)
    base = name.split("_", 1)[0]          # interface names are CamelCase; "_" only starts a generated part
    return _description_hashes(package, kind, base).get(type_name)


def endpoint_type_hashes(node, topic: str) -> dict[str, set[str]]:
    """``{"type/name": {RIHS01 hash, ...}}`` advertised by the live publishers and subscriptions of ``topic``
    (nodes of any distro from Iron on advertise one)."""
    found: dict[str, set[str]] = {}
    for info in [*node.get_publishers_info_by_topic(topic), *node.get_subscriptions_info_by_topic(topic)]:
        found.setdefault(info.topic_type, set()).add(str(info.topic_type_hash))
    return found
