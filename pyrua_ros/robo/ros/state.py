"""``RobotState``: what the driver publishes every control step, kept newest-first for robo's reads and waits.

Subscribed on the link's state node: ``/ee_pose``, ``/joint_states``, the episode status (believed only from the
driver node, see :meth:`RobotState.from_driver`), the safety events, and ``/tf`` (:class:`TfBuffer`). The pose,
joint states, status and events share one condition (``cond``), so a single wait can watch a whole control step.
"""

from __future__ import annotations

import contextlib
import json
import threading

import numpy as np

from pyrua_ros.robo.backend import BackendRefused, EePose, JointSnapshot
from pyrua_ros.robo.ros.link import Latest, RosLink
from pyrua_ros.sim_interfaces.state_digest import StateTrace
from pyrua_ros.sim_interfaces.status import EpisodeStatus
from pyrua_ros.wire.convert import pose_to_numpy, stamp_to_seconds
from pyrua_ros.wire.interfaces import resolve
from pyrua_ros.wire.publishers import publisher_node, sample_gid
from pyrua_ros.wire.tf_buffer import TfBuffer

# what a refusal says, by its reason (BackendRefused.reason), whatever the command: the model reads it
REFUSALS = {"estop": "the e-stop is engaged", "terminated": "the episode is over", "truncated": "the episode is over"}
SETTLE_S = 1.0   # [s] longest wait for the other topics of a control step once its pose / result arrived


class RobotState:
    """The driver's per-step state on ``link``'s state node (see the module docstring)."""

    def __init__(self, link: RosLink):
        from geometry_msgs.msg import PoseStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        from pyrua_ros.wire import qos

        self.link = link
        names = link.names
        d, s = names.driver, names.sim
        self.trace = StateTrace()   # the per-step state digests of the driver's statuses (result.json)
        self.foreign_status: dict[str, dict] = {}  # other publishers of the episode status: {gid hex: info}
        self._status_source: bytes | None = None   # GID of the driver's episode-status publisher, once known
        self.cond = threading.Condition()    # woken by every state message and by a cancel
        self.pose = Latest(self.cond)
        self.joint_states = Latest(self.cond)
        self.latest = Latest(self.cond)      # the episode status
        self.events: list[dict] = []         # this episode's safety events, guarded by ``cond``

        sub = link.state_node.create_subscription
        sub(PoseStamped, d.ee_pose, self._on_pose, qos.EVENTS)
        sub(JointState, d.joint_states, self.joint_states.put, qos.EVENTS)
        sub(String, s.episode_status, self._on_status, qos.LATCHED_READER)
        sub(String, d.safety_events, self._on_safety_event, qos.EVENTS)
        self.tf = TfBuffer(link.state_node, cache_s=30.0)
        self._safety_pub = link.node.create_publisher(String, d.safety_events, qos.EVENTS)
        self._string_type = String

    # ------------------------------------------------------------------ callbacks (executor thread)
    def _on_pose(self, msg) -> None:
        pos, quat = pose_to_numpy(msg.pose)
        self.pose.put(EePose(pos=pos, quat_xyzw=quat, stamp=stamp_to_seconds(msg.header.stamp)))

    def _on_status(self, msg, info) -> None:
        gid = sample_gid(info)
        if gid is not None and not self.from_driver(gid):
            return
        status = EpisodeStatus.from_json(msg.data)
        self.trace.observe(status)
        self.latest.put(status)

    def from_driver(self, gid: bytes) -> bool:
        """True when ``gid`` is the episode-status publisher of the driver node (``sim.node`` of the interfaces, in
        this backend's namespace): success, steps and the e-stop are believed only from there. Any other publisher
        is ignored and reported once as a safety event (``foreign_status`` and the safety-events topic)."""
        if self._status_source is not None and gid == self._status_source:
            return True
        key = gid.hex()
        if key in self.foreign_status:
            self.foreign_status[key]["samples"] += 1
            return False
        names, node_of = self.link.names, self.link.node
        node = publisher_node(node_of, names.sim.episode_status, gid, wait_s=2.0)
        driver = resolve(names.sim.node, node_of.get_namespace())   # relative: the robot's namespace
        if node == driver and self._status_source is None:
            self._status_source = gid
            return True
        why = "a second publisher names itself the driver node" if node == driver else "not the driver node"
        self.foreign_status[key] = {"gid": key, "node": node, "samples": 1, "why": why}
        with contextlib.suppress(Exception):
            event = {"kind": "foreign_publisher", "topic": names.sim.episode_status, "node": node,
                     "gid": key, "reason": f"episode status ignored: {why}"}
            self._safety_pub.publish(self._string_type(data=json.dumps(event)))
        return False

    def _on_safety_event(self, msg) -> None:
        with contextlib.suppress(ValueError):
            event = json.loads(msg.data)
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()

    # ------------------------------------------------------------------ reads (agent thread)
    def new_episode(self, status: EpisodeStatus) -> None:
        """A reset answered with ``status``: it starts the trace's episode, and safety events count afresh."""
        self.trace.observe(status)
        with self.cond:
            self.events.clear()

    def status(self) -> EpisodeStatus:
        return self.link.require(self.latest, self.link.names.sim.episode_status)

    def ee_pose(self) -> EePose:
        return self.link.require(self.pose, self.link.names.driver.ee_pose)

    def joints(self) -> JointSnapshot:
        msg = self.link.require(self.joint_states, self.link.names.driver.joint_states)
        return JointSnapshot(names=tuple(msg.name), positions=np.asarray(msg.position, dtype=float),
                             velocities=np.asarray(msg.velocity, dtype=float))

    def event_count(self) -> int:
        with self.cond:
            return len(self.events)

    def refusal_since(self, n_events: int) -> dict | None:
        """The first ``refused`` safety event after the first ``n_events`` of this episode, or None."""
        with self.cond:
            for event in self.events[n_events:]:
                if event.get("kind") == "refused":
                    return event
        return None

    def clipped_steps(self) -> int:
        """Control steps the driver's safety filter clipped so far (its ``clipped`` safety events)."""
        with self.cond:
            return sum(1 for event in self.events if event.get("kind") == "clipped")

    def refusal_reason(self) -> str:
        """Why the driver refuses motion now, from the latest status: estop, terminated, truncated or refused."""
        st = self.status()
        return "estop" if st.estop else "terminated" if st.terminated else "truncated" if st.truncated else "refused"

    def refused(self, what: str, detail: str = "") -> BackendRefused:
        """BackendRefused for ``what`` with the reason of :meth:`refusal_reason`, its message saying why in words
        (the e-stop is engaged, the episode is over) before ``detail``."""
        reason = self.refusal_reason()
        why = REFUSALS.get(reason, "")
        return BackendRefused(f"{what}: " + "; ".join(part for part in (why, detail) if part), reason=reason)

    def settle(self, sim_time: float) -> None:
        """Wait (at most ``SETTLE_S``) until the pose and joint states of sim time ``sim_time`` arrived: the
        driver publishes them before the status / goal result, but on separate topics that may be delivered
        later, and a State built from a stale joint state would show the fingers a few steps behind."""
        self.pose.wait(lambda p: p.stamp >= sim_time - 1e-6, SETTLE_S)
        self.joint_states.wait(lambda m: stamp_to_seconds(m.header.stamp) >= sim_time - 1e-6, SETTLE_S)
