"""Episode recording: the episode's topics, as published, into one MCAP file that ``ros2 bag`` and Foxglove read.

:class:`EpisodeRecorder` subscribes with raw (CDR bytes) subscriptions on a node someone else spins, and
writes each message unchanged: MCAP ``ros2`` profile, ``cdr`` message encoding, one ``ros2msg`` schema per type.
Schemas are generated from the message classes (:func:`ros2msg_schema`, from ``get_fields_and_field_types()``,
dependencies appended as ``MSG:`` sections), never written by hand. Constants of a type are not part of the
generated text; decoding does not need them.

Threading: callbacks may run on any executor thread; one lock guards the writer. :meth:`close` destroys the
subscriptions first, then finishes the file, so no callback writes after the footer.
Time stamps: ``log_time`` is the middleware's reception time, ``publish_time`` its source time stamp [ns since
the Unix epoch, system clock]; sim time stays inside the messages (``header.stamp``, ``/clock``).

rclpy is imported only when a recorder is built, so this module loads in processes without ROS.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from pyrua_ros.driver import interfaces

SEPARATOR = "=" * 80
_BOUNDED_SEQUENCE = re.compile(r"^sequence<(.+), (\d+)>$")
_SEQUENCE = re.compile(r"^sequence<(.+)>$")
_ARRAY = re.compile(r"^(.+)\[(\d+)\]$")
_BOUNDED_STRING = re.compile(r"^(w?string)<(\d+)>$")
_PRIMITIVE_NAMES = {"boolean": "bool", "octet": "byte", "double": "float64", "float": "float32"}

STRING = "std_msgs/msg/String"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"


def message_class(type_name: str) -> type:
    """``"sensor_msgs/msg/Image"`` (or ``"sensor_msgs/Image"``) -> the generated Python class."""
    parts = type_name.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"message type {type_name!r} is not package/msg/Name")
    package, kind, name = parts
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"message type {type_name!r} is not installed: {exc}") from None


def type_name_of(cls: type) -> str:
    """The class's ``package/msg/Name``."""
    package = cls.__module__.split(".")[0]
    return f"{package}/msg/{cls.__name__}"


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


def episode_topics(names: interfaces.Interfaces | None = None, *, cameras: bool = True) -> dict[str, str]:
    """``{topic: type}`` of one episode: robot state, clock, camera color streams, sim status, agent topics.

    Camera streams render only while someone subscribes, at the sim's ``camera_rate_hz``; ``cameras=False``
    leaves them out (and so costs no rendering).
    """
    names = names or interfaces.load()
    d = names.driver
    topics = {
        d.joint_states: "sensor_msgs/msg/JointState",
        d.tf: TF_MESSAGE,
        d.tf_static: TF_MESSAGE,
        d.robot_description: STRING,
        d.ee_pose: "geometry_msgs/msg/PoseStamped",
        d.clock: "rosgraph_msgs/msg/Clock",
        d.safety_events: STRING,
        names.sim.episode_status: STRING,
        names.agent.status: STRING,
        names.agent.cell: STRING,
        names.agent.output: STRING,
        names.agent.markers: "visualization_msgs/msg/MarkerArray",
    }
    if cameras:
        topics.update({d.color(cam): "sensor_msgs/msg/Image" for cam in names.robot.cameras})
    return topics


def latched_topics(names: interfaces.Interfaces | None = None) -> frozenset[str]:
    """Topics published transient local, which a late recorder must still get."""
    names = names or interfaces.load()
    return frozenset({names.driver.tf_static, names.driver.robot_description, names.sim.episode_status})


def _absolute(node: Any, topic: str) -> str:
    """The topic's absolute name as ``node`` resolves it (interface names are relative to the robot's namespace);
    bag players want absolute names."""
    resolve = getattr(node, "resolve_topic_name", None)
    return resolve(topic) if resolve is not None else interfaces.resolve(topic, node.get_namespace())


class EpisodeRecorder:
    """Record ``topics`` (``{topic: "pkg/msg/Type"}``) seen by ``node`` into the MCAP file ``path``.

    ``latched`` topics are subscribed transient local (depth 10), the others reliable volatile with depth 100 so
    a lockstep burst is not dropped. ``counts`` holds messages written per topic. Use as a context manager or
    call :meth:`close`.
    """

    def __init__(self, node: Any, path: str | os.PathLike, topics: Mapping[str, str], *,
                 latched: Iterable[str] = ()):
        from mcap.writer import Writer
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = {topic: 0 for topic in topics}
        self._node = node
        self._lock = threading.Lock()
        self._file = open(self.path, "wb")
        self._writer = Writer(self._file)
        self._writer.start(profile="ros2", library="pyrua_ros recorder")
        self._closed = False
        latched = set(latched)
        schemas: dict[str, int] = {}
        self._subscriptions = []
        for topic, type_name in topics.items():
            cls = message_class(type_name)
            full_name = type_name_of(cls)
            if full_name not in schemas:
                schemas[full_name] = self._writer.register_schema(
                    name=full_name, encoding="ros2msg", data=ros2msg_schema(cls).encode())
            channel = self._writer.register_channel(topic=_absolute(node, topic), message_encoding="cdr",
                                                    schema_id=schemas[full_name])
            durable = topic in latched
            qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10 if durable else 100,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if durable else DurabilityPolicy.VOLATILE)
            self._subscriptions.append(node.create_subscription(cls, topic, self._callback(topic, channel), qos,
                                                                raw=True))

    def _callback(self, topic: str, channel: int):
        sequence = [0]

        def on_message(data: bytes, info) -> None:
            now = time.time_ns()
            received = info.get("received_timestamp") or now
            source = info.get("source_timestamp") or received
            with self._lock:
                if self._closed:
                    return
                sequence[0] += 1
                self._writer.add_message(channel_id=channel, log_time=received, data=data, publish_time=source,
                                         sequence=sequence[0])
                self.counts[topic] += 1

        return on_message

    def close(self) -> dict[str, int]:
        """Stop recording and finish the file (idempotent); return the per-topic message counts."""
        with self._lock:
            if self._closed:
                return dict(self.counts)
            self._closed = True
        for sub in self._subscriptions:
            self._node.destroy_subscription(sub)
        self._subscriptions.clear()
        with self._lock:
            self._writer.finish()
            self._file.close()
        return dict(self.counts)

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def record_episode(node: Any, path: str | os.PathLike, *, cameras: bool = True,
                   names: interfaces.Interfaces | None = None) -> EpisodeRecorder:
    """An :class:`EpisodeRecorder` of :func:`episode_topics` with the latched ones subscribed transient local."""
    names = names or interfaces.load()
    return EpisodeRecorder(node, path, episode_topics(names, cameras=cameras), latched=latched_topics(names))
