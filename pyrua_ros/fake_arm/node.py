"""The fake arm node (also named ``sim``, so its services sit where the LIBERO sim node's do; the two drivers never
run in one namespace): the driver core over the kinematic fake table (ROS wiring only).

Behaviour: :mod:`pyrua_ros.driver.core`; names from config/interfaces.yaml; parameters from config/fake_arm.yaml
(:data:`pyrua_ros.driver.node.PARAMETERS`).
"""

from __future__ import annotations

from pyrua_ros.driver.node import DriverNode
from pyrua_ros.fake_arm.arm import FakeArm
from pyrua_ros.sim_interfaces.drivers import DRIVERS


def make_model(values: dict, names) -> FakeArm:
    """The fake arm's ArmModel from its node's parameter ``values`` and the interface ``names`` (the in-process
    driver of the tests builds it the same way)."""
    r = names.robot
    return FakeArm(arm_joints=r.arm_joints, finger_joints=r.finger_joints, frames=names.frames,
                   control_period_s=r.control_period_s)


class FakeArmNode(DriverNode):
    """Kinematic Panda + table of primitives behind the driver surface and the sim interfaces."""

    def __init__(self, **node_kwargs):
        super().__init__("sim", make_model, FakeArm.DEFAULT_EPISODE, label=DRIVERS["fake"].label, **node_kwargs)
