"""Executable of the kinematic fake arm driver (node name ``sim``).

Run: ``python -m pyrua_ros.nodes.fake_arm_node --ros-args --params-file config/fake_arm.yaml`` (or
``ros2 run pyrua_ros fake_arm_node``).
"""

from __future__ import annotations

import sys

from pyrua_ros.nodes.spin import spin_node


def main(args: list[str] | None = None) -> int:
    def make():
        from pyrua_ros.fake_arm.node import FakeArmNode

        return FakeArmNode()

    return spin_node(make, args)


if __name__ == "__main__":
    sys.exit(main())
