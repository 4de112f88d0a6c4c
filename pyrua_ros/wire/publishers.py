"""Who published a sample: the node behind a publisher GID, from the ROS graph (no rclpy import at module level).

A subscription callback that takes ``(msg, info)`` gets rclpy's message info, whose ``publisher_gid`` names the
writer of that one sample. ``publisher_node`` maps it to the fully qualified name of the node that owns that
publisher, as the graph reports it. The agent uses it to believe the episode status only from the driver it
launched; drivers use it to log who changed the e-stop. Without DDS security a GID can be forged on the wire;
ROS-SECURITY in docs/SANDBOX.md says how a deployment restricts who may publish at all.
"""

from __future__ import annotations

import time


def sample_gid(info) -> bytes | None:
    """The publisher GID of a received sample (rclpy message info), or None when it is not there."""
    if not info:
        return None
    gid = info.get("publisher_gid") if isinstance(info, dict) else None
    return bytes(gid["data"]) if gid and gid.get("data") is not None else None


def publisher_node(node, topic: str, gid: bytes | None, *, wait_s: float = 0.0) -> str | None:
    """``/namespace/name`` of the node whose publisher on ``topic`` has ``gid`` (waiting up to ``wait_s`` for
    discovery to name it), or None when the graph does not know it."""
    if gid is None:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        for endpoint in node.get_publishers_info_by_topic(topic):
            if bytes(endpoint.endpoint_gid) == gid and not endpoint.node_name.startswith("_"):
                return f"{endpoint.node_namespace.rstrip('/')}/{endpoint.node_name}"
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def sample_origin(node, topic: str, info) -> str:
    """``"by /node (publisher gid ...)"`` for a sample received on ``topic`` (for logs of operator acts)."""
    gid = sample_gid(info)
    who = publisher_node(node, topic, gid, wait_s=0.5) or "an unknown node"
    return f"by {who} (publisher gid {gid.hex() if gid else 'unknown'})"
