"""Goal requests resent while unanswered (``pyrua_ros.wire.goal_client``) never run a goal twice.

In-process rclpy: a real ActionServer whose goal callback answers the first request only after the client has
resent it. Every copy carries the first request's goal id, so the server runs one goal (it refuses the copy's id
as taken) and the client takes the accepted answer, not the copy's refusal. Before, each resend was a new goal:
a ``MoveToTarget`` copy started where the first one had already converged, with its own iterations and feedback.
"""

import threading
import time

import pytest

pytestmark = pytest.mark.unit   # in-process rclpy only: no driver node, no LIBERO

RESEND_S = 0.2    # the client resends after this long
ANSWER_S = 0.7    # the server answers the first request after this long: the client has resent it three times


@pytest.fixture
def rig():
    import rclpy
    from control_msgs.action import GripperCommand
    from rclpy.action import ActionServer, GoalResponse
    from rclpy.executors import MultiThreadedExecutor

    from pyrua_ros.wire.goal_client import action_client
    from pyrua_ros.wire.spin_thread import spin_until_shutdown

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("goal_client_test", context=context)
    seen: list[float] = []                    # the commanded position of each request the server judged
    executed: list[bytes] = []

    def on_goal(request):
        seen.append(request.command.position)
        if len(seen) == 1:
            time.sleep(ANSWER_S)              # slow: the client resends meanwhile
        return GoalResponse.ACCEPT if request.command.position >= 0 else GoalResponse.REJECT

    def execute(handle):
        executed.append(bytes(handle.goal_id.uuid))
        handle.succeed()
        return GripperCommand.Result(position=handle.request.command.position)

    # one callback group (the node's default), as the drivers serve goals: requests are judged one at a time
    server = ActionServer(node, GripperCommand, "gripper_cmd", execute_callback=execute, goal_callback=on_goal)
    client = action_client(node, GripperCommand, "gripper_cmd")
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(node)
    thread = threading.Thread(target=spin_until_shutdown, args=(executor, context), kwargs={"name": "goals"},
                              daemon=True)
    thread.start()
    assert client.wait_for_server(timeout_sec=10.0)
    yield client, seen, executed, GripperCommand
    executor.shutdown(timeout_sec=5.0)
    thread.join(5.0)
    client.destroy()
    server.destroy()
    node.destroy_node()
    rclpy.shutdown(context=context)


def test_a_slow_answer_and_its_resent_copies_run_one_goal(rig):
    from pyrua_ros.wire.goal_client import send_goal_answered

    client, seen, executed, GripperCommand = rig
    goal = GripperCommand.Goal()
    goal.command.position = 0.04
    handle = send_goal_answered(client, goal, 10.0, resend_after_s=RESEND_S)
    assert handle is not None and handle.accepted
    result = handle.get_result_async()
    deadline = time.monotonic() + 10.0
    while not result.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert result.done() and result.result().result.position == pytest.approx(0.04)
    time.sleep(2 * RESEND_S)                  # a copy would have been judged and run by now
    # the server judged the goal once (its copies were refused as a taken id before any callback) and ran it once
    assert len(seen) == 1 and executed == [bytes(handle.goal_id.uuid)], (seen, executed)


def test_a_rejected_goal_is_answered_rejected(rig):
    from pyrua_ros.wire.goal_client import send_goal_answered

    client, _seen, executed, GripperCommand = rig
    goal = GripperCommand.Goal()
    goal.command.position = -1.0
    handle = send_goal_answered(client, goal, 10.0, resend_after_s=RESEND_S)
    assert handle is not None and not handle.accepted and executed == []
