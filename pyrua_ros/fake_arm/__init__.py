"""The fake driver: a kinematic Panda with a depth camera over a table of primitives. No LIBERO, no MuJoCo.

It serves the same driver and sim interfaces as the LIBERO sim node (docs/DESIGN.md), so ``robo`` can be shown
to depend on interfaces only. ``kinematics`` (Panda FK/IK), ``scene`` (primitives + numpy ray-casting renderer)
and ``episode`` (the stepping core) are pure Python + numpy; only ``node`` imports rclpy.
"""
