"""Executable of the LIBERO-PRO simulation node ``sim``.

Run: ``python -m pyrua_ros.nodes.sim_node --ros-args --params-file config/sim.yaml`` (or ``bin/sim_node``).
"""

from __future__ import annotations

import sys

from pyrua_ros.driver.rosenv import node_preamble, rclpy_session


def main(args: list[str] | None = None) -> int:
    node_preamble()
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from pyrua_ros.sim.node import SimNode

    node = None
    try:
        with rclpy_session(sys.argv if args is None else args):
            node = SimNode()
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:
                executor.spin()
            finally:
                executor.shutdown()
                node.close()
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
