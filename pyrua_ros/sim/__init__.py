"""The LIBERO-PRO simulation: ``env.py`` (the episode core, no rclpy), ``suites.py``, ``cameras.py``,
``urdf.py``, ``joint_control.py``; ``node.py`` wires the core to ROS. Importing this package loads nothing heavy."""
