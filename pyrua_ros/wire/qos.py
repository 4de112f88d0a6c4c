"""QoS profiles of the driver surface and the sim interfaces, named by what a topic needs.

- :data:`LOCKSTEP`: reliable, keep last 1, volatile. Commands and the state published after each step; a lost
  message would stall a lockstep loop, and at these sizes reliable costs nothing measurable (ROS-BRIDGE-MEASURED.md).
- :data:`LATCHED`: reliable, keep last 1, transient local. Things a late subscriber must still get: the URDF,
  ``/tf_static``, episode status, captures, segmentation labels.
- :data:`STREAM`: reliable, keep last 1, volatile. Camera streams (large images are lost under best effort).
- :data:`EVENTS`: reliable, keep last 50, volatile. Safety events and other logs that should not drop bursts.
- :data:`LATCHED_READER`: reliable, keep last 50, transient local. A reader of a latched topic that must see every
  message, not only the newest: episode status, where a second publisher (a forger's flood) must not push the
  driver's one out of a depth-1 queue before it is taken.
- :data:`TF`: reliable, keep last 100, volatile: ``/tf``, as tf2_ros's broadcaster offers it.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy


def _profile(depth: int, durability: DurabilityPolicy) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=durability)


LOCKSTEP = _profile(1, DurabilityPolicy.VOLATILE)
LATCHED = _profile(1, DurabilityPolicy.TRANSIENT_LOCAL)
STREAM = _profile(1, DurabilityPolicy.VOLATILE)
EVENTS = _profile(50, DurabilityPolicy.VOLATILE)
LATCHED_READER = _profile(50, DurabilityPolicy.TRANSIENT_LOCAL)
TF = _profile(100, DurabilityPolicy.VOLATILE)
# /tf_static carries every static transform in one message per publisher; keep it for late joiners.
TF_STATIC = LATCHED
