"""The driver core every driver runs (the LIBERO sim node, the kinematic fake arm, a real arm's bridge): the
episode's state and goals, the arm model protocol, the control clock, and the node that wires them to ROS. The
names, QoS and conversions it shares with the agent side are in :mod:`pyrua_ros.wire`."""
