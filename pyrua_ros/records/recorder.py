"""Episode recording: the episode's topics, as published, into one MCAP file that ``ros2 bag`` and Foxglove read.

:class:`EpisodeRecorder` subscribes with raw (CDR bytes) subscriptions on a node someone else spins, and
writes each message unchanged: MCAP ``ros2`` profile, ``cdr`` message encoding, one ``ros2msg`` schema per type
(an empty one, as rosbag2 writes, for the generated parts of actions and services).
Schemas are generated from the message classes (:func:`ros2msg_schema`, from ``get_fields_and_field_types()``,
dependencies appended as ``MSG:`` sections), never written by hand. Constants of a type are not part of the
generated text; decoding does not need them.

What rosbag2's MCAP storage writes, so ``ros2 bag play`` replays the bag as recorded: a channel is created when
its first message arrives, with the QoS its publishers offered (``offered_qos_profiles``, rosbag2's YAML:
:func:`offered_qos_yaml`, so ``/tf_static`` and ``/robot_description`` come back transient local and a late
rviz still shows the robot) and the type's RIHS01 hash (``topic_type_hash``); :meth:`EpisodeRecorder.close`
adds the ``rosbag2`` metadata record (``serialized_metadata``, bag metadata version
:data:`ROSBAG2_METADATA_VERSION`, whose integer QoS encoding every player from Humble to Kilted reads).

An episode bag is a dataset (:func:`episode_topics`): robot state and the step-0 state (the episode host starts
the recorder before the reset, :meth:`EpisodeRecorder.wait_for_publishers`), camera streams and the captures the
model saw with their camera_info, and the commands: servo twists, gripper targets, e-stop, and both actions' goals,
results and cancels (their service-event topics, published where introspection is on: robo's gripper client does it
on Kilted), feedback and status.

Threading: callbacks may run on any executor thread; one lock guards the writer. :meth:`close` destroys the
subscriptions first, then finishes the file, so no callback writes after the footer.
Time stamps: ``log_time`` is the middleware's reception time, ``publish_time`` its source time stamp [ns since
the Unix epoch, system clock]; sim time stays inside the messages (``header.stamp``, ``/clock``).

rclpy is imported only when a recorder is built, so this module loads in processes without ROS.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import re
import struct
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from pyrua_ros import cputime
from pyrua_ros.records.records import open_record
from pyrua_ros.wire import interfaces
from pyrua_ros.wire.distro import installed_type_hash, ros_distro

SEPARATOR = "=" * 80
_BOUNDED_SEQUENCE = re.compile(r"^sequence<(.+), (\d+)>$")
_SEQUENCE = re.compile(r"^sequence<(.+)>$")
_ARRAY = re.compile(r"^(.+)\[(\d+)\]$")
_BOUNDED_STRING = re.compile(r"^(w?string)<(\d+)>$")
_PRIMITIVE_NAMES = {"boolean": "bool", "octet": "byte", "double": "float64", "float": "float32"}

STRING = "std_msgs/msg/String"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
IMAGE = "sensor_msgs/msg/Image"
# [ns] a stamp this much before the episode's start still counts as in it: the start comes from the status's sim time
# in float seconds, a stamp from its seconds and nanoseconds, and the two may round 1 ns apart (a control step: 50 ms)
START_SLACK_NS = 1000
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
ROSBAG2_METADATA_VERSION = 8        # integer QoS policies: read by rosbag2 from Humble to Kilted alike
INFINITE_NS = 2**63 - 1             # RMW_DURATION_INFINITE
_KINDS = ("msg", "action", "srv")


def message_class(type_name: str) -> type:
    """``"sensor_msgs/msg/Image"`` (or ``"sensor_msgs/Image"``) -> the generated Python class. Generated parts of
    actions and services resolve too: ``"control_msgs/action/GripperCommand_FeedbackMessage"``,
    ``"action_msgs/srv/CancelGoal_Event"`` (or without the kind, as nested field types name them)."""
    parts = type_name.split("/")
    if len(parts) not in (2, 3) or not all(parts) or (len(parts) == 3 and parts[1] not in _KINDS):
        raise ValueError(f"message type {type_name!r} is not package/msg/Name")
    package, name = parts[0], parts[-1]
    kinds = [parts[1]] if len(parts) == 3 else list(_KINDS)
    problems = []
    for kind in kinds:
        try:
            module = importlib.import_module(f"{package}.{kind}")
        except ImportError as exc:
            problems.append(str(exc))
            continue
        if hasattr(module, name):
            return getattr(module, name)
        base = getattr(module, name.split("_", 1)[0], None)       # Name_Part lives beside its interface
        if base is not None and hasattr(sys.modules[base.__module__], name):
            return getattr(sys.modules[base.__module__], name)
        problems.append(f"no {name} in {package}.{kind}")
    raise ValueError(f"message type {type_name!r} is not installed: {'; '.join(problems)}")


def type_name_of(cls: type) -> str:
    """The class's ``package/msg|action|srv/Name``."""
    package, kind = cls.__module__.split(".")[:2]
    return f"{package}/{kind if kind in _KINDS else 'msg'}/{cls.__name__}"


def _duration(ns: int) -> dict[str, int]:
    ns = INFINITE_NS if ns < 0 or ns >= INFINITE_NS else int(ns)
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def offered_qos_yaml(profiles: Iterable[Any]) -> str:
    """rosbag2's ``offered_qos_profiles`` text for rclpy QoS profiles: a YAML list, one mapping per publisher with
    ``history``, ``depth``, ``reliability``, ``durability``, ``deadline``, ``lifespan``, ``liveliness``,
    ``liveliness_lease_duration`` (``{sec, nsec}``) and ``avoid_ros_namespace_conventions``; policies as the rmw
    enum integers (metadata version 8). A zero duration is written infinite, as rmw reports "no deadline"."""
    out = []
    for q in profiles:
        out.append({
            "history": int(q.history.value), "depth": int(q.depth),
            "reliability": int(q.reliability.value), "durability": int(q.durability.value),
            "deadline": _duration(q.deadline.nanoseconds or INFINITE_NS),
            "lifespan": _duration(q.lifespan.nanoseconds or INFINITE_NS),
            "liveliness": int(q.liveliness.value),
            "liveliness_lease_duration": _duration(q.liveliness_lease_duration.nanoseconds or INFINITE_NS),
            "avoid_ros_namespace_conventions": bool(q.avoid_ros_namespace_conventions),
        })
    return yaml.safe_dump(out, sort_keys=False, default_flow_style=False)


_POLICY_NAMES = {"history": {"system_default": 0, "keep_last": 1, "keep_all": 2, "unknown": 3},
                 "reliability": {"system_default": 0, "reliable": 1, "best_effort": 2, "unknown": 3,
                                 "best_available": 4},
                 "durability": {"system_default": 0, "transient_local": 1, "volatile": 2, "unknown": 3,
                                "best_available": 4},
                 "liveliness": {"system_default": 0, "automatic": 1, "manual_by_topic": 3, "unknown": 4,
                                "best_available": 5}}


def qos_profiles_from_yaml(text: str) -> list:
    """rclpy ``QoSProfile`` objects from an ``offered_qos_profiles`` text, in either encoding rosbag2 writes
    (enum integers, metadata version <= 8, or names such as ``transient_local``, version 9+)."""
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, LivelinessPolicy, QoSProfile, ReliabilityPolicy

    def policy(kind, value, cls):
        return cls(value if isinstance(value, int) else _POLICY_NAMES[kind][str(value)])

    def duration(d):
        return Duration(seconds=int(d["sec"]), nanoseconds=int(d["nsec"]))

    profiles = []
    for entry in yaml.safe_load(text) or []:
        history = policy("history", entry["history"], HistoryPolicy)
        profiles.append(QoSProfile(
            history=history, depth=int(entry["depth"]),
            reliability=policy("reliability", entry["reliability"], ReliabilityPolicy),
            durability=policy("durability", entry["durability"], DurabilityPolicy),
            deadline=duration(entry["deadline"]), lifespan=duration(entry["lifespan"]),
            liveliness=policy("liveliness", entry["liveliness"], LivelinessPolicy),
            liveliness_lease_duration=duration(entry["liveliness_lease_duration"]),
            avoid_ros_namespace_conventions=bool(entry["avoid_ros_namespace_conventions"])))
    return profiles


def _field_type(text: str, nested: list[str]) -> str:
    """rosidl Python type text -> ``.msg`` field type text; nested message types are appended to ``nested``."""
    if m := _BOUNDED_SEQUENCE.match(text):
        return f"{_field_type(m.group(1), nested)}[<={m.group(2)}]"
    if m := _SEQUENCE.match(text):
        return f"{_field_type(m.group(1), nested)}[]"
    if m := _ARRAY.match(text):
        return f"{_field_type(m.group(1), nested)}[{m.group(2)}]"
    if m := _BOUNDED_STRING.match(text):
        return f"{m.group(1)}<={m.group(2)}"
    if "/" in text:
        nested.append(text)
        return text
    return _PRIMITIVE_NAMES.get(text, text)


def _definition(cls: type) -> tuple[str, list[str]]:
    nested: list[str] = []
    lines = [f"{_field_type(kind, nested)} {name}" for name, kind in cls.get_fields_and_field_types().items()]
    return "\n".join(lines) + "\n", nested


def ros2msg_schema(cls: type) -> str:
    """The ``ros2msg`` schema text of a message class: its fields, then every nested type once (depth first)."""
    text, pending = _definition(cls)
    sections = [text]
    seen: set[str] = set()
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        body, more = _definition(message_class(name))
        sections.append(f"{SEPARATOR}\nMSG: {name}\n{body}")
        pending = more + pending
    return "".join(sections)


def action_topics(action: str, action_type: str) -> dict[str, str]:
    """The topics of one action as rosbag2 records it: feedback and status, and the service-event topics of its
    goal, result and cancel services (published by endpoints with introspection on)."""
    package, _, name = action_type.split("/")
    return {
        f"{action}/_action/feedback": f"{package}/action/{name}_FeedbackMessage",
        f"{action}/_action/status": "action_msgs/msg/GoalStatusArray",
        f"{action}/_action/send_goal/_service_event": f"{package}/action/{name}_SendGoal_Event",
        f"{action}/_action/get_result/_service_event": f"{package}/action/{name}_GetResult_Event",
        f"{action}/_action/cancel_goal/_service_event": "action_msgs/srv/CancelGoal_Event",
    }


def episode_topics(names: interfaces.Interfaces | None = None, *, cameras: bool = True) -> dict[str, str]:
    """``{topic: type}`` of one episode, a dataset: robot state, clock, sim status, agent topics; the captures the
    model saw (color + camera_info of each camera and resolution); the commands (servo twists, gripper targets,
    e-stop, the gripper and trajectory actions and, where its type is built, the Cartesian move action); and, with
    ``cameras``, the camera streams with their camera_info.

    Camera streams render only while someone subscribes, at the sim's ``camera_rate_hz``; ``cameras=False``
    leaves them out (and so costs no rendering). Captures render only on request, whoever listens.

    The order is the order of the subscriptions: the camera streams come first, before the episode status that
    :meth:`EpisodeRecorder.wait_for_publishers` confirms the driver's matching with, so the frame a reset streams
    at step 0 is recorded (a short episode under load recorded none: its later frames fell before the driver had
    matched the stream readers).
    """
    names = names or interfaces.load()
    d, s = names.driver, names.sim
    topics = stream_topics(names) if cameras else {}
    topics |= {
        d.joint_states: "sensor_msgs/msg/JointState",
        d.tf: TF_MESSAGE,
        d.tf_static: TF_MESSAGE,
        d.robot_description: STRING,
        d.ee_pose: "geometry_msgs/msg/PoseStamped",
        d.clock: "rosgraph_msgs/msg/Clock",
        d.safety_events: STRING,
        d.servo_twist: "geometry_msgs/msg/TwistStamped",
        d.gripper_target: "std_msgs/msg/Float64MultiArray",
        d.estop: "std_msgs/msg/Bool",
        s.episode_status: STRING,
        names.agent.status: STRING,
        names.agent.cell: STRING,
        names.agent.output: STRING,
        names.agent.markers: "visualization_msgs/msg/MarkerArray",
    }
    topics.update(action_topics(d.gripper_command, "control_msgs/action/GripperCommand"))
    topics.update(action_topics(d.follow_joint_trajectory, "control_msgs/action/FollowJointTrajectory"))
    if importlib.util.find_spec("pyrua_ros_msgs") is not None:   # robo's move_to goals, where the type was built
        topics.update(action_topics(d.cartesian_move, "pyrua_ros_msgs/action/MoveToTarget"))
    for cam in names.robot.cameras:
        for resolution in s.resolutions:
            capture = s.capture_topics(cam, resolution)
            topics.update({capture["color"]: IMAGE, capture["camera_info"]: CAMERA_INFO})
    return topics


def stream_topics(names: interfaces.Interfaces) -> dict[str, str]:
    """``{topic: type}`` of the camera streams: each camera's color image and its camera_info."""
    d = names.driver
    return {topic: kind for cam in names.robot.cameras
            for topic, kind in ((d.color(cam), IMAGE), (d.info(cam), CAMERA_INFO))}


def latched_topics(names: interfaces.Interfaces | None = None) -> frozenset[str]:
    """Topics published transient local, which a late recorder must still get (a transient-local subscription
    would not match a volatile publisher, so only these)."""
    names = names or interfaces.load()
    s = names.sim
    captures = {topic for cam in names.robot.cameras for resolution in s.resolutions
                for kind, topic in s.capture_topics(cam, resolution).items() if kind in ("color", "camera_info")}
    return frozenset({names.driver.tf_static, names.driver.robot_description, s.episode_status, *captures})


def _absolute(node: Any, topic: str) -> str:
    """The topic's absolute name as ``node`` resolves it (interface names are relative to the robot's namespace);
    bag players want absolute names."""
    resolve = getattr(node, "resolve_topic_name", None)
    return resolve(topic) if resolve is not None else interfaces.resolve(topic, node.get_namespace())


def _cdr_time_ns(data: bytes, offset: int = 4) -> int:
    """The ``builtin_interfaces/Time`` at ``offset`` of a CDR message (4: just after the encapsulation header, where
    a ``std_msgs/Header``'s stamp or a ``rosgraph_msgs/Clock`` starts). 0 for a message too short to hold one."""
    if len(data) < offset + 8:
        return 0
    order = "<" if data[1] == 1 else ">"   # CDR_LE / CDR_BE
    sec, nanosec = struct.unpack_from(f"{order}iI", data, offset)
    return sec * 1_000_000_000 + nanosec


def _stamp_ns(type_name: str, data: bytes) -> int:
    """The stamp of a message of a stamped topic: its header's, or for a ``tf2_msgs/TFMessage`` its first
    transform's (after the sequence length); 0 when there is none."""
    return _cdr_time_ns(data, 8) if type_name == TF_MESSAGE else _cdr_time_ns(data)


class EpisodeRecorder:
    """Record ``topics`` (``{topic: "pkg/msg/Type"}``) seen by ``node`` into the MCAP file ``path``.

    ``latched`` topics are subscribed transient local (depth 10), the others reliable volatile with depth 100 so
    a lockstep burst is not dropped. A topic's channel is written when its first message arrives, with the QoS
    its publishers offer then. ``counts`` holds messages written per topic. Use as a context manager or call
    :meth:`close`.

    ``held=True`` writes only the latched topics until :meth:`begin`: an episode subscribes before its reset (so
    the reset's step-0 state is matched) but a driver shared with an earlier episode may still publish that
    episode's last state and stream frames meanwhile; those belong to no episode of this bag. A frame of such a
    backlog may still land just after :meth:`begin`; so messages of the ``stamped`` topics (each starting with a
    ``std_msgs/Header``) are written only when their stamp is not ahead of the ``clock`` topic's latest time
    seen since :meth:`begin` (0 before the first), and, where the clock carries on across resets, only when it is
    after the clock's time at :meth:`begin` (:meth:`_earlier_episode`; only when the clock topic has a publisher
    at :meth:`begin`; a real arm on wall time has none). Both need this recorder to have seen the clock in time,
    which under load it may not have; so from :meth:`begin` the stamped messages are held back until
    :meth:`start_at` names the episode's reset time, and only those stamped from then on are written.

    ``since_start`` topics (a ``std_msgs/Header`` first, or a ``tf2_msgs/TFMessage``) are kept by that last rule
    alone: held back from :meth:`begin` until :meth:`start_at`, and written when stamped at or after the episode's
    start. A driver's state is published before its clock in a step, so the clock rule does not fit it; but the
    state a driver published while this recorder was matching it (its boot, an earlier episode) may be taken by
    the executor only after :meth:`begin`, and it belongs to no episode of this bag.

    ``stepwise``: topics subscribed on ``stepwise_node`` (when given) instead of ``node``; the recorder's lock
    orders the writes of the two nodes' executor threads.
    """

    def __init__(self, node: Any, path: str | os.PathLike, topics: Mapping[str, str], *,
                 latched: Iterable[str] = (), held: bool = False, stamped: Iterable[str] = (),
                 since_start: Iterable[str] = (), clock: str | None = None, stepwise_node: Any = None,
                 stepwise: Iterable[str] = ()):
        from mcap.writer import Writer
        from rclpy.event_handler import SubscriptionEventCallbacks
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = {topic: 0 for topic in topics}
        self.topics = dict(topics)
        self._node = node
        self._lock = threading.Lock()

        self._file = open_record(self.path)
        self._writer = Writer(self._file)
        self._writer.start(profile="ros2", library="pyrua_ros recorder")
        self._closed = False
        self._held = bool(held)
        self._stamped = frozenset(stamped)
        self._since_start = frozenset(since_start) - self._stamped
        self._held_back = self._stamped | self._since_start   # checked against the episode's start, every message
        self._clock_topic = clock
        self._clock_ns = 0       # the clock topic's latest time since begin() [ns]
        self._last_clock_ns: int | None = None    # its latest time ever (held or not) [ns]
        self._begin_clock_ns: int | None = None   # that time when begin() was called
        self._guard = False      # stamped topics checked against it (from begin(), when a clock is published)
        self._start_ns: int | None = None   # the episode's reset sim time [ns] (start_at): earlier frames stay out
        self._pending: list[tuple] | None = None   # stamped / since_start messages between begin() and start_at()
        self._sequence: dict[str, int] = {}   # per topic, the last sequence number written
        self._started_ns: int | None = None
        self._last_ns = 0
        latched = set(latched)
        self._latched = frozenset(latched)
        stepwise = frozenset(stepwise) if stepwise_node is not None else frozenset()
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self._offered: dict[str, str] = {}
        self._classes: dict[str, type] = {}
        self._requested: dict[str, Any] = {}
        self._subscriptions: dict[str, Any] = {}
        self._owners: dict[str, Any] = {}   # topic -> the node its subscription is on (close() destroys it there)
        for topic, type_name in topics.items():
            cls = message_class(type_name)
            self._classes[topic] = cls
            durable = topic in latched
            qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10 if durable else 100,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if durable else DurabilityPolicy.VOLATILE)
            self._requested[topic] = qos
            # no QoS event handlers (rclpy adds two per subscription by default, only to log an incompatible
            # publisher): each is one more entity every wake of the node's executor walks, and the ~80 of the
            # recorder's were most of robo's main executor's (its CPU per wake is about linear in them)
            owner = self._owners[topic] = stepwise_node if topic in stepwise else node
            self._subscriptions[topic] = owner.create_subscription(
                cls, topic, self._callback(topic), qos, raw=True,
                event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False))

    def wait_for_publishers(self, topics: Iterable[str], timeout: float, *, confirm: str | None = None) -> list[str]:
        """Wait until each of ``topics`` has a publisher matched with its subscription (at most ``timeout`` s),
        so what the driver publishes next (the reset's step-0 state) is recorded; return those still unmatched.

        A publisher count is what this side matched; the driver's writer matches this reader on its own schedule
        (DDS discovery is one-sided), and a volatile message it sends before then is not delivered: under load the
        bag lost the reset's step-0 pose so. ``confirm``: a latched topic whose subscription was made after those
        of ``topics``; its kept message arrives once the driver matched that reader, and the driver learns of this
        side's readers in the order they were made, so then it matched the readers of ``topics`` too. It is
        waited for (within ``timeout``) where it has a publisher."""
        deadline = time.monotonic() + timeout
        pending = [t for t in topics if t in self._subscriptions]
        while pending:
            pending = [t for t in pending if self._subscriptions[t].get_publisher_count() == 0]
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if confirm is not None and confirm in self._subscriptions:
            order = list(self._subscriptions)
            if confirm not in self._latched or any(order.index(t) > order.index(confirm) for t in topics
                                                   if t in self._subscriptions):
                raise ValueError(f"{confirm} must be a latched topic subscribed after {list(topics)}")
            while self._subscriptions[confirm].get_publisher_count() > 0 and self.counts[confirm] == 0 \
                    and time.monotonic() < deadline:   # (a latched message is written even while held)
                time.sleep(0.005)
        return pending

    def begin(self) -> None:
        """Write every topic from now on (see ``held``); call it just before the episode's reset is requested.
        Messages of the ``stamped`` topics are held back until :meth:`start_at` says when the episode began."""
        # A driver without a clock publisher (a real arm on wall time) stamps its frames otherwise: no guard then.
        clocked = self._clock_topic in self._subscriptions and \
            self._subscriptions[self._clock_topic].get_publisher_count() > 0
        with self._lock:
            self._held = False
            self._clock_ns = 0
            self._begin_clock_ns = self._last_clock_ns
            self._guard = clocked
            self._pending = []

    def start_at(self, sim_time: float | None) -> None:
        """The episode began at ``sim_time`` [s] (its reset's status; None: unknown): a stamped message from before
        it belongs to an earlier episode (a shared driver's late stream frame, however late this recorder matched
        the driver's clock). Writes what :meth:`begin` held back from then on."""
        with self._lock:
            self._start_ns = None if sim_time is None else round(sim_time * 1e9)
            pending, self._pending = self._pending or [], None
            for topic, data, received, source in pending:
                if not self._before_start(topic, data):
                    self._write(topic, data, received, source)

    def _before_start(self, topic: str, data: bytes) -> bool:
        """Whether a message of a stamped or since_start topic belongs to an episode before this one (lock held)."""
        stamp = _stamp_ns(self.topics[topic], data)
        return self._earlier_episode(stamp) if topic in self._stamped else self._precedes_start(stamp)

    def _precedes_start(self, stamp_ns: int) -> bool:
        """Whether ``stamp_ns`` lies before the episode's start (:meth:`start_at`; False while it is not known)."""
        return self._start_ns is not None and stamp_ns < self._start_ns - START_SLACK_NS

    def _earlier_episode(self, stamp_ns: int) -> bool:
        """Whether a stream frame stamped ``stamp_ns`` belongs to an episode before :meth:`begin` (lock held).

        Ahead of the clock seen since begin(): a driver whose clock restarts at a reset. Not after the clock
        at begin() while the clock carries on from there: a driver whose time never runs backwards across resets
        (pyrua_ros's drivers: the new episode starts one control period after the last one's end)."""
        if self._start_ns is not None:   # the episode's own start says it (sim time never runs backwards)
            return self._precedes_start(stamp_ns)
        if not self._guard:
            return False
        if stamp_ns > self._clock_ns:
            return True
        begun = self._begin_clock_ns
        return begun is not None and self._clock_ns >= begun and stamp_ns <= begun

    def _channel(self, topic: str) -> int:
        """The topic's channel, registered now (with its schema and its publishers' offered QoS) if new.
        Called with the lock held."""
        if topic in self._channels:
            return self._channels[topic]

        cls = self._classes[topic]
        full_name = type_name_of(cls)
        if full_name not in self._schemas:
            # A generated part of an action or service (GripperCommand_SendGoal_Event) has no .msg form that
            # ros2msg readers accept (their names may not hold "_"); rosbag2 writes those with an empty schema,
            # and players decode them by type name with the installed type support. So do we.
            generated = "_" in cls.__name__
            self._schemas[full_name] = self._writer.register_schema(
                name=full_name, encoding="" if generated else "ros2msg",
                data=b"" if generated else ros2msg_schema(cls).encode())
        try:
            offered = [info.qos_profile for info in self._node.get_publishers_info_by_topic(topic)]
        except Exception:       # the graph may be gone at shutdown; the requested profile still describes it
            offered = []
        self._offered[topic] = offered_qos_yaml(offered or [self._requested[topic]])
        metadata = {"offered_qos_profiles": self._offered[topic],
                    "topic_type_hash": installed_type_hash(full_name) or ""}
        self._channels[topic] = self._writer.register_channel(topic=_absolute(self._node, topic),
                                                              message_encoding="cdr",
                                                              schema_id=self._schemas[full_name], metadata=metadata)
        return self._channels[topic]

    def _write(self, topic: str, data: bytes, received: int, source: int) -> None:
        """Write one message (lock held)."""
        channel = self._channel(topic)
        self._sequence[topic] = self._sequence.get(topic, 0) + 1
        self._writer.add_message(channel_id=channel, log_time=received, data=data, publish_time=source,
                                 sequence=self._sequence[topic])
        self.counts[topic] += 1
        self._started_ns = received if self._started_ns is None else min(self._started_ns, received)
        self._last_ns = max(self._last_ns, received)

    def _callback(self, topic: str):
        def on_message(data: bytes, info) -> None:
            with cputime.section("records: episode.mcap"):
                now = time.time_ns()
                received = info.get("received_timestamp") or now
                source = info.get("source_timestamp") or received
                clock_ns = _cdr_time_ns(data) if topic == self._clock_topic else None
                with self._lock:
                    if clock_ns is not None and not self._closed:
                        self._last_clock_ns = max(self._last_clock_ns or 0, clock_ns)
                    if self._closed or (self._held and topic not in self._latched):
                        return
                    if clock_ns is not None:
                        self._clock_ns = max(self._clock_ns, clock_ns)
                    elif topic in self._held_back:
                        if self._before_start(topic, data):
                            return   # a late frame or state of an earlier episode
                        if self._pending is not None:
                            self._pending.append((topic, data, received, source))   # until start_at() tells the start
                            return
                    self._write(topic, data, received, source)

        return on_message

    def _bag_metadata(self) -> str:
        """rosbag2's ``serialized_metadata`` YAML (``rosbag2_bagfile_information``) for the ``rosbag2`` record."""

        try:
            distro = ros_distro()
        except RuntimeError:
            distro = ""
        start = self._started_ns or 0
        duration = max(0, self._last_ns - start)
        total = sum(self.counts.values())
        topics = [{"topic_metadata": {"name": _absolute(self._node, topic),
                                      "type": type_name_of(self._classes[topic]),
                                      "serialization_format": "cdr", "offered_qos_profiles": self._offered[topic],
                                      "type_description_hash": installed_type_hash(type_name_of(
                                          self._classes[topic])) or ""},
                   "message_count": self.counts[topic]} for topic in self._channels]
        info = {"version": ROSBAG2_METADATA_VERSION, "storage_identifier": "mcap",
                "duration": {"nanoseconds": duration}, "starting_time": {"nanoseconds_since_epoch": start},
                "message_count": total, "topics_with_message_count": topics, "compression_format": "",
                "compression_mode": "", "relative_file_paths": [self.path.name],
                "files": [{"path": self.path.name, "starting_time": {"nanoseconds_since_epoch": start},
                           "duration": {"nanoseconds": duration}, "message_count": total}],
                "custom_data": {"recorded_by": "pyrua_ros"}, "ros_distro": distro}
        return yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False)

    def close(self) -> dict[str, int]:
        """Stop recording and finish the file (idempotent); return the per-topic message counts. Messages held
        back for a :meth:`start_at` that never came (a reset that failed) are written as they are."""
        with self._lock:
            if self._closed:
                return dict(self.counts)
            self._closed = True
            for message in self._pending or ():
                self._write(*message)
            self._pending = None
        for topic, sub in self._subscriptions.items():
            self._owners[topic].destroy_subscription(sub)   # a node destroys only its own subscriptions
        self._subscriptions.clear()
        with self._lock:

            try:
                distro = ros_distro()
            except RuntimeError:
                distro = ""
            self._writer.add_metadata("rosbag2", {"serialized_metadata": self._bag_metadata(), "ROS_DISTRO": distro})
            self._writer.finish()
            self._file.close()
        return dict(self.counts)

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def state_topics(names: interfaces.Interfaces | None = None) -> list[str]:
    """The volatile topics of the robot's state, which the recorder must be matched on before a reset."""
    names = names or interfaces.load()
    d = names.driver
    return [d.joint_states, d.ee_pose, d.tf, d.clock]


def stepwise_topics(names: interfaces.Interfaces | None = None) -> list[str]:
    """The topics a driver publishes every control step or stream frame: the robot's state, the clock, the episode
    status, the servo commands, the actions' feedback and the camera streams."""
    names = names or interfaces.load()
    d, s = names.driver, names.sim
    feedback = [f"{action}/_action/feedback" for action in (d.gripper_command, d.follow_joint_trajectory,
                                                             d.cartesian_move)]
    return [*state_topics(names), s.episode_status, d.servo_twist, d.gripper_target, *feedback,
            *stream_topics(names)]


def record_episode(node: Any, path: str | os.PathLike, *, cameras: bool = True,
                   names: interfaces.Interfaces | None = None, held: bool = False,
                   stepwise_node: Any = None) -> EpisodeRecorder:
    """An :class:`EpisodeRecorder` of :func:`episode_topics` with the latched ones subscribed transient local
    (``held``: see :class:`EpisodeRecorder`). ``stepwise_node``: the :func:`stepwise_topics` are subscribed on
    it instead of ``node`` (a node whose executor waits on few entities: every wake-up of an rclpy executor walks
    all of its node's entities, and the recorder's quiet topics are most of them)."""
    names = names or interfaces.load()
    d = names.driver
    return EpisodeRecorder(node, path, episode_topics(names, cameras=cameras), latched=latched_topics(names),
                           held=held, stamped=list(stream_topics(names)) if held else (),
                           since_start=[d.ee_pose, d.joint_states, d.tf] if held else (),
                           clock=d.clock if held else None, stepwise_node=stepwise_node,
                           stepwise=stepwise_topics(names))
