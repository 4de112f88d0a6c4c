"""Executable of the LIBERO-PRO simulation node ``sim``.

Run: ``python -m pyrua_ros.nodes.sim_node --ros-args --params-file config/sim.yaml`` (or
``ros2 run pyrua_ros sim_node``).
"""

from __future__ import annotations

from pyrua_ros.bringup.process import exit_now
from pyrua_ros.nodes.spin import spin_node


def main(args: list[str] | None = None) -> int:
    def make():
        from pyrua_ros.sim.node import SimNode

        return SimNode()

    return spin_node(make, args)


if __name__ == "__main__":
    exit_now(main())   # the node is closed: skip freeing the scene object by object
