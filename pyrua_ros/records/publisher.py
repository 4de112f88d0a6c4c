"""What the agent publishes for people watching: status, current cell, output summary, markers.

- ``/agent/status`` (String JSON): ``turn``, ``max_turns``, ``steps``, ``tokens``, ``last``, ``elapsed_s``,
  ``episode`` — the same dict the terminal progress view shows.
- ``/agent/cell`` (String): the source of the cell (or program) of the last turn.
- ``/agent/output`` (String): a short summary of its result (stdout tail, exception, episode end).
- ``/agent/markers`` (MarkerArray): move targets (green spheres), segmented points (blue spheres) from the call
  ledger, and the status as a text marker (ns ``status``) above the table, since rviz has no String display.
Names come from config/interfaces.yaml (``agent`` section); frames are the world frame. Marker stamps follow the
driver's ``/clock`` (``wire.followed_clock``): sim time in sim runs, like every other stamp of an episode bag.
"""

from __future__ import annotations

import json
import math

from pyrua_ros.records.text import safe_text
from pyrua_ros.wire.followed_clock import FollowedClock
from pyrua_ros.wire.interfaces import Interfaces, load

OUTPUT_LIMIT = 2000


class AgentPublisher:
    """Publishes on ``node`` after every turn; call it as ``publisher(status, record, reply)``. ``clock``: the
    :class:`~pyrua_ros.wire.followed_clock.FollowedClock` to stamp markers with."""

    def __init__(self, node, ledger, *, names: Interfaces | None = None, clock=None):
        from std_msgs.msg import String
        from visualization_msgs.msg import MarkerArray

        from pyrua_ros.wire import qos

        self.names = names or load()
        # ``clock``: a FollowedClock that already saw the reset's /clock (RosBackend.followed_clock); one made
        # here would stamp system time until the next motion step.
        self._clock = clock or FollowedClock(node, names=self.names)
        a = self.names.agent
        self._string = String
        self._status = node.create_publisher(String, a.status, qos.LATCHED)
        self._cell = node.create_publisher(String, a.cell, qos.LATCHED)
        self._output = node.create_publisher(String, a.output, qos.LATCHED)
        self._markers = node.create_publisher(MarkerArray, a.markers, qos.LATCHED)
        self._node = node
        self._ledger = ledger
        self._seen = 0
        self._points: list[tuple[str, tuple[float, float, float]]] = []

    def __call__(self, status: dict, record, reply, code: str | None = None) -> None:
        # every text is made safe: model output (a lone surrogate) must not end the episode in rclpy
        self._status.publish(self._string(data=safe_text(json.dumps(status, default=str))))
        if code is not None:
            self._cell.publish(self._string(data=safe_text(code)))
        summary = reply.text if len(reply.text) <= OUTPUT_LIMIT else reply.text[:OUTPUT_LIMIT] + "\n[truncated]"
        self._output.publish(self._string(data=safe_text(summary)))
        self._collect_points()
        self._markers.publish(self._marker_array(status))

    def _collect_points(self) -> None:
        records = self._ledger.records[self._seen:]
        self._seen += len(records)
        for r in records:
            xyz = None
            if r.tool in ("move_to", "move_pose") and isinstance(r.kwargs.get("xyz"), (list, tuple)):
                xyz, kind = r.kwargs["xyz"], "target"
            elif r.tool == "segment" and (r.summary or {}).get("world_xyz"):
                xyz, kind = r.summary["world_xyz"], "segment"
            if xyz is not None and len(xyz) == 3:
                try:   # the ledger keeps what the policy passed, valid or not
                    point = tuple(float(v) for v in xyz)
                except (TypeError, ValueError):
                    continue
                if all(math.isfinite(v) for v in point):
                    self._points.append((kind, point))
        del self._points[:-50]

    def _marker_array(self, status: dict):
        from visualization_msgs.msg import Marker, MarkerArray

        stamp = self._clock.now_msg()
        markers = []
        colors = {"target": (0.1, 0.9, 0.2), "segment": (0.2, 0.4, 1.0)}
        for i, (kind, (x, y, z)) in enumerate(self._points):
            m = Marker(ns=kind, id=i, type=Marker.SPHERE, action=Marker.ADD)
            m.header.frame_id, m.header.stamp = self.names.frames.world, stamp
            m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y, z
            m.pose.orientation.w = 1.0
            m.scale.x = m.scale.y = m.scale.z = 0.02
            m.color.r, m.color.g, m.color.b = colors[kind]
            m.color.a = 0.9
            markers.append(m)
        text = Marker(ns="status", id=0, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        text.header.frame_id, text.header.stamp = self.names.frames.world, stamp
        text.pose.position.z = 1.5
        text.pose.orientation.w = 1.0
        text.scale.z = 0.04
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        episode = status.get("episode") or {}
        text.text = (f"turn {status.get('turn')}  steps {status.get('steps')}  tokens {status.get('tokens')}  "
                     f"success {episode.get('success')}")
        markers.append(text)
        return MarkerArray(markers=markers)

    def close(self) -> None:
        """Destroy the publishers (the node may outlive this episode when a host is reused)."""
        for pub in (self._status, self._cell, self._output, self._markers):
            self._node.destroy_publisher(pub)
