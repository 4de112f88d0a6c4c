"""A client's spin thread outlives rclpy's errors from subscriptions destroyed while the executor waits on them.

Test clients and the conformance probe create and destroy subscriptions and service clients all the time; rclpy's
MultiThreadedExecutor then now and then raises ``InvalidHandle`` from ``spin_once``, and a plain ``spin()`` thread
ends there, leaving a client that silently receives nothing more (every later wait runs out its deadline).
"""

import threading
import time

import pytest

pytestmark = pytest.mark.unit   # in-process rclpy only: no driver node, no LIBERO


def test_spin_survives_subscription_churn_and_still_delivers(capfd):
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from std_msgs.msg import String

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.spin_thread import spin_until_shutdown

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("spin_churn", context=context)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(node)
    thread = threading.Thread(target=spin_until_shutdown, args=(executor, context), kwargs={"name": "churn"},
                              daemon=True)
    thread.start()
    try:
        pub = node.create_publisher(String, "churn_latched", qos.LATCHED)
        pub.publish(String(data="kept"))
        deadline = time.monotonic() + 3.0
        churned = 0
        while time.monotonic() < deadline:   # what a plain spin() thread did not survive for 1 s here
            for pause in (0.0, 0.001, 0.002):
                sub = node.create_subscription(String, "churn_latched", lambda _m: None, qos.LATCHED)
                time.sleep(pause)
                node.destroy_subscription(sub)
                churned += 1
        assert thread.is_alive(), "the spin thread ended"
        got = threading.Event()
        sub = node.create_subscription(String, "churn_latched", lambda m: got.set() if m.data == "kept" else None,
                                       qos.LATCHED)
        assert got.wait(10.0), f"nothing delivered after {churned} subscriptions came and went"
        node.destroy_subscription(sub)
    finally:
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=5.0)
        node.destroy_node()
        rclpy.shutdown(context=context)
    assert not thread.is_alive(), "the spin thread did not end with its executor"
