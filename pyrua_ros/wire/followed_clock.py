"""A ROS clock that follows the driver's ``/clock``: sim time in sim runs, system time on a robot without one.

What the agent side stamps (markers, action introspection events) must be on the same time line as what the
driver stamps, or a bag mixes 1970-relative sim seconds with wall time and rviz drops one of them. A simulator
publishes ``/clock`` (sim time, lockstep or realtime); a real arm usually does not, and its stamps are system
time. :class:`FollowedClock` gives an ``rclpy`` ``ROSClock`` that returns system time until the first ``/clock``
message arrives and sim time from then on, without touching the node's own clock or its ``use_sim_time``
(the backend's waits never depend on either).
"""

from __future__ import annotations

from typing import Any

from pyrua_ros.wire.interfaces import Interfaces, load


class FollowedClock:
    """``clock``: an rclpy ``ROSClock`` driven by ``/clock`` (names from ``interfaces``) once it appears."""

    def __init__(self, node: Any, *, names: Interfaces | None = None, callback_group=None):
        from rclpy.clock import ROSClock
        from rclpy.time_source import TimeSource
        from rosgraph_msgs.msg import Clock

        from pyrua_ros.wire import qos

        self.clock = ROSClock()
        self._source = TimeSource()            # no node: it subscribes nothing itself, we feed it below
        self._source.attach_clock(self.clock)
        self._node = node
        self._sub = node.create_subscription(Clock, (names or load()).driver.clock, self._on_clock, qos.LOCKSTEP,
                                             callback_group=callback_group)

    def _on_clock(self, msg) -> None:
        self._source.clock_callback(msg)
        if not self._source.ros_time_is_active:
            self._source.ros_time_is_active = True

    @property
    def following(self) -> bool:
        """True once a ``/clock`` message arrived (stamps are sim time from then on)."""
        return self._source.ros_time_is_active

    def now_msg(self):
        """``builtin_interfaces/Time`` of now on this clock."""
        return self.clock.now().to_msg()

    def close(self) -> None:
        if self._sub is not None:
            self._node.destroy_subscription(self._sub)
            self._sub = None
