"""``fake_arm_node``: the kinematic fake Panda driver (node name ``sim``).

Run as ``python -m pyrua_ros.nodes.fake_arm_node``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from pyrua_ros.driver.rosenv import node_preamble, rclpy_session

    node_preamble()
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from pyrua_ros.fake_arm.node import FakeArmNode

    args = sys.argv if argv is None else argv
    with rclpy_session(args):
        node = FakeArmNode()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            executor.shutdown()
            node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
