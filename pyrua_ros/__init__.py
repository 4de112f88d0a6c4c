"""pyrua_ros: PyRUA-Lean robot agents on a ROS 2 stack.

Layers (one sub-package each; see docs/DESIGN.md): ``driver`` (standard interface names, QoS, message
conversions), ``sim_interfaces`` (the small set of sim-only interfaces), ``sim`` (the LIBERO-PRO simulation
node), ``safety`` (workspace, speed and e-stop filter), ``robo`` (the PyRUA-Lean LIBERO API over ROS),
``agent`` (cell loop, runtimes, kernel, run records), ``fake_arm`` (a kinematic second driver), ``nodes``,
``cli`` and ``bringup`` (executables, CLI and the launch description). Importing this package does nothing.
"""

__version__ = "0.1.0"
