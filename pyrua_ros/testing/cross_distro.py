"""A client that exercises a live driver from whatever distro it runs on, and reports what it saw as JSON.

test/test_cross_distro.py runs it in the Jazzy venv against a Kilted driver and in the Kilted venv against a Jazzy
driver: the driver surface (latched topics, twist, both actions, e-stop), the type hashes each endpoint
advertises next to this venv's own, and a ``robo`` session (reset, state, a 1024x1024 capture, segment, move,
gripper) through the same RosBackend + RobotHost an episode uses. Every check records ``ok`` and a detail instead
of raising, so one report shows everything that differs between the distros.

    python -m pyrua_ros.testing.cross_distro --out report.json [--suite fake_table --task 0]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import threading
import time
import traceback

from pyrua_ros.wire.distro import endpoint_type_hashes, installed_type_hash, ros_distro
from pyrua_ros.wire.goal_client import action_client, send_goal_answered
from pyrua_ros.wire.rosenv import node_preamble

# Types whose wire layout the two ends must agree on, and the topic each is advertised on.
WIRE_TYPES = {
    "control_msgs/action/FollowJointTrajectory_FeedbackMessage": "follow_joint_trajectory",
    "control_msgs/action/GripperCommand_FeedbackMessage": "gripper_command",
    "tf2_msgs/msg/TFMessage": "tf",
}
WAIT_S = 15.0


class Report:
    """Named checks with ``ok`` and a detail; ``check(name)`` is a context manager that records an exception."""

    def __init__(self):
        self.data: dict = {"checks": {}}

    def put(self, name: str, ok: bool, detail=None) -> None:
        self.data["checks"][name] = {"ok": bool(ok), "detail": detail}

    def run(self, name: str, fn) -> None:
        t0 = time.monotonic()
        try:
            ok, detail = fn()
        except Exception as exc:    # a failed check is data for the report, not the end of the run
            ok, detail = False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
        self.put(name, ok, detail)
        self.data["checks"][name]["wall_s"] = round(time.monotonic() - t0, 3)


def _first_message(node, msg_type, topic: str, qos, timeout: float = WAIT_S):
    got, ev = [], threading.Event()

    def cb(msg):
        if not ev.is_set():
            got.append(msg)
            ev.set()

    sub = node.create_subscription(msg_type, topic, cb, qos)
    try:
        return got[0] if ev.wait(timeout) else None
    finally:
        node.destroy_subscription(sub)


def latched_topics(report: Report, backend) -> None:
    """A late subscriber still gets /tf_static and /robot_description (transient local across distros)."""
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    from pyrua_ros.wire import qos

    d = backend.names.driver

    def tf_static():
        msg = _first_message(backend.node, TFMessage, d.tf_static, qos.TF_STATIC)
        return msg is not None and len(msg.transforms) > 0, msg and sorted(t.child_frame_id for t in msg.transforms)

    def description():
        msg = _first_message(backend.node, String, d.robot_description, qos.LATCHED)
        return msg is not None and "<robot" in msg.data, msg and len(msg.data)

    report.run("tf_static_latched", tf_static)
    report.run("robot_description_latched", description)


def type_hashes(report: Report, backend) -> None:
    """This venv's installed hashes and what the driver's endpoints advertise, per wire type."""

    d = backend.names.driver
    wire = {}
    for type_name, attr in WIRE_TYPES.items():
        topic = getattr(d, attr) + ("/_action/feedback" if "/action/" in type_name else "")
        advertised = endpoint_type_hashes(backend.node, topic).get(type_name, set())
        wire[type_name] = {"topic": topic, "ours": installed_type_hash(type_name), "advertised": sorted(advertised)}
    report.data["wire_types"] = wire


def follow_joint_trajectory(report: Report, backend) -> None:
    """A small joint move through FollowJointTrajectory: accepted, SUCCESSFUL, feedback counted (its layout
    differs between the distros, so how much of it decodes is reported, not required)."""
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint


    names = backend.names
    client = action_client(backend.node, FollowJointTrajectory, names.driver.follow_joint_trajectory)

    def run():
        if not client.wait_for_server(timeout_sec=WAIT_S):
            return False, "no server"
        joints = backend.joints()
        now = dict(zip(joints.names, joints.positions))
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(names.robot.arm_joints)
        goal.trajectory.points = [JointTrajectoryPoint(
            positions=[float(now[j]) + 0.03 for j in names.robot.arm_joints],
            time_from_start=Duration(sec=0, nanosec=400_000_000))]
        feedback = []
        handle = send_goal_answered(client, goal, WAIT_S, feedback_callback=lambda m: feedback.append(m.feedback))
        if handle is None or not handle.accepted:
            return False, "goal not accepted" if handle is not None else "goal not answered"
        result = handle.get_result_async()
        if not backend.link.done_within(result, WAIT_S):
            return False, "no result"
        res = result.result().result
        return res.error_code == FollowJointTrajectory.Result.SUCCESSFUL, {
            "error_code": res.error_code, "error_string": res.error_string, "feedback_messages": len(feedback)}

    try:
        report.run("follow_joint_trajectory", run)
    finally:
        client.destroy()


def estop(report: Report, backend) -> None:
    """/estop true latches (a twist is refused and reported), false releases (the next twist moves)."""
    import numpy as np
    from std_msgs.msg import Bool

    from pyrua_ros.robo.backend import BackendRefused
    from pyrua_ros.wire import qos

    pub = backend.node.create_publisher(Bool, backend.names.driver.estop, qos.LATCHED)

    def twist_moves() -> bool:
        try:
            before = backend.ee_pose().pos.copy()
            after = backend.servo(np.array([0.02, 0.0, 0.0]), np.zeros(3)).pos
            return float(abs(after[0] - before[0])) > 1e-4
        except BackendRefused:
            return False

    def run():
        pub.publish(Bool(data=True))
        latched = _until(lambda: backend.status().estop)
        refused = latched and not twist_moves()
        pub.publish(Bool(data=False))
        released = _until(lambda: not backend.status().estop)
        moved = released and twist_moves()
        return latched and refused and released and moved, {"latched": latched, "refused": refused,
                                                            "released": released, "moved_after": moved}

    try:
        report.run("estop_latch_release", run)
    finally:
        backend.node.destroy_publisher(pub)


def _until(pred, timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def robo_session(report: Report, backend, prompt: str) -> None:
    """The robo API an episode uses, on this driver: state, a high-resolution capture, segment, move, gripper."""
    from pyrua_ros.robo.libero import libero_host

    host = libero_host(backend, primitives="no-vla")
    robo = host.robo
    report.data["task"] = robo.task

    def state():
        s = robo.state()
        return len(s.eef_pos) == 3 and s.step == 0, {"eef_pos": list(s.eef_pos), "step": s.step}

    def image():
        t0 = time.monotonic()
        img = robo.image("agentview", resolution="high")
        return img.shape == (1024, 1024, 3) and int(img.max()) > 0, {"shape": list(img.shape),
                                                                   "wall_s": round(time.monotonic() - t0, 3)}

    def segment():
        seg = robo.segment(prompt)
        return seg.found and seg.world_xyz is not None, {"box": seg.box, "world_xyz": seg.world_xyz}

    def move():
        start = robo.state().eef_pos
        target = [start[0] + 0.05, start[1], start[2]]
        res = robo.move_to(target)
        return res.reached, {"final_dist_m": res.final_dist_m, "steps": res.steps_used}

    def gripper():
        start = robo.state().gripper_opening
        res = robo.set_gripper(1.0, steps=12)   # exactly 12 steps of the arm holding, the fingers closing
        closed = robo.state().gripper_opening
        return res.steps == 12 and closed < min(0.03, start - 0.03), {"steps": res.steps, "opening_m": closed}

    for name, fn in (("robo_state", state), ("robo_image_high", image), ("robo_segment", segment),
                     ("robo_move_to", move), ("robo_gripper", gripper)):
        report.run(name, fn)
    report.data["ledger"] = [r.tool for r in host.ledger.records]


EPISODE_STEPS = 10000   # control steps of the one episode every check shares


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, required=True)
    ap.add_argument("--suite", default="fake_table")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--prompt", default="the red cube", help="an object of the task to segment")
    args = ap.parse_args(argv)


    node_preamble()                      # loopback rules and this distro's Fast DDS profile, before rclpy loads
    from pyrua_ros.robo.ros_backend import RosBackend

    report = Report()
    report.data["distro"] = ros_distro()
    backend = RosBackend()
    try:
        # one episode serves every check below, the conformance kit's too: steps enough that none is truncated
        status = backend.reset(args.suite, args.task, 0, EPISODE_STEPS)
        report.put("reset", status.step == 0, {"episode_id": status.episode_id, "task": status.task_language})
        latched_topics(report, backend)
        robo_session(report, backend, args.prompt)
        follow_joint_trajectory(report, backend)
        estop(report, backend)
        type_hashes(report, backend)
    except Exception as exc:            # still write what was seen, with the reason it stopped
        report.put("client", False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    finally:
        backend.close()
    report.data["installed_hashes"] = {t: installed_type_hash(t) for t in (
        "control_msgs/action/FollowJointTrajectory", "control_msgs/action/FollowJointTrajectory_Feedback",
        "control_msgs/action/GripperCommand", "tf2_msgs/msg/TFMessage")}
    args.out.write_text(json.dumps(report.data, indent=2, default=str))
    failed = [k for k, v in report.data["checks"].items() if not v["ok"]]
    print(f"cross-distro client ({report.data['distro']}): {len(report.data['checks']) - len(failed)} checks ok"
          + (f", failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
