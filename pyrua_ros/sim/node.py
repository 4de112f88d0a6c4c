"""The LIBERO-PRO simulation node ``sim``: the driver core over the LIBERO-PRO episode (ROS wiring only).

Behaviour: docs/DESIGN.md ("Sim interfaces", "Driver surface behaviour") and :mod:`pyrua_ros.driver.core`;
names from config/interfaces.yaml; parameters from config/sim.yaml (:data:`pyrua_ros.driver.node.PARAMETERS`).
The episode itself (``sim/env.py``) has no rclpy.
"""

from __future__ import annotations

from pyrua_ros.driver.node import DriverNode
from pyrua_ros.sim.arm import LiberoArm


def _make_model(values: dict, names) -> LiberoArm:
    return LiberoArm(stream_resolution=int(values["stream_resolution"]), stream_backlog=int(values["stream_backlog"]),
                     render_nice=int(values["render_nice"]), gripper_open_m=names.robot.gripper_open_width_m,
                     control_period_s=names.robot.control_period_s)


class SimNode(DriverNode):
    """The ``sim`` node: LIBERO-PRO behind the driver surface and the sim interfaces."""

    def __init__(self, **node_kwargs):
        super().__init__("sim", _make_model, LiberoArm.DEFAULT_EPISODE, label="sim node", **node_kwargs)
