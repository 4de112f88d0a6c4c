"""The driver conformance suite: does whatever is live serve the driver surface the way robo needs it?

Run against our sim, the fake arm, or a vendor's stack remapped as docs/BRINGUP.md shows. Each check drives the
live driver only through its interfaces (config/interfaces.yaml, resolved in the namespace) and returns
:class:`~pyrua_ros.conformance.report.Row` s; an exception inside a check becomes a failed row that says what went
wrong, so one broken interface never hides the others. **The suite moves the robot**: a few centimetres of
end-effector motion, one joint by 0.1 rad, the gripper closing and opening; keep the workspace clear.

Order matters and is fixed (:data:`CHECKS`): presence first, then state, motion, goals, e-stop, rates, and the
sim interfaces last (``skip_sim``: a real arm has none).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable

import numpy as np

from pyrua_ros.conformance import report
from pyrua_ros.conformance.probe import Probe
from pyrua_ros.conformance.report import Row
from pyrua_ros.wire.move_law import ServoLaw, osc_twist

RELIABLE, TRANSIENT_LOCAL = "RELIABLE", "TRANSIENT_LOCAL"
MOVE_SPEED = 0.1         # [m/s] of the motion checks
MOVE_TIME_S = 0.5        # [s]: 5 cm commanded
MIN_MOTION_M = 0.002     # what counts as the arm having moved [m] (LIBERO's OSC tracks a small twist at ~15 %)
JOINT_STEP_RAD = 0.1
GOAL_TIMEOUT_S = 30.0
# The goal a cancel must stop: 600 s is 12000 control steps at 20 Hz, 6 s of wall time even for a lockstep driver
# that steps it flat out at 2 kHz, so the cancel arrives first however loaded the machine is.
CANCEL_GOAL_S = 600.0
# Episode steps that must be left for the cancel check to mean anything: with fewer, a lockstep driver can end the
# episode (truncated) before the cancel arrives, and whether it does depends on the machine's load.
CANCEL_MIN_STEPS = 2000
DISCOVERY_S = 10.0       # how long an interface may take to show up in the graph [s]
MIN_FINGER_TRAVEL_M = 0.01   # what counts as the fingers having moved with the arm [m]
TARGET_FALLBACK = "robo waits server_wait_s once, then changes the gripper by GripperCommand goals before motions"
MOVE_FALLBACK = "robo waits for it once per episode, then streams one servo twist per move_to step"
MOVE_UP_M = 0.03          # [m] the Cartesian goal's target above the end effector
# the Cartesian law of the checks (robo's move_to arguments): 1 cm per step at most, 0.05 m per unit action
MOVE_LAW = {"tolerance": 0.005, "step_clip": 0.01, "action_scale": 0.05, "max_steps": 40}
HOLD_GOAL_STEPS = 1000    # a Cartesian goal that never converges (tolerance 0): it holds until canceled


def _qos_text(info) -> tuple[str, str]:
    q = info.qos_profile
    return q.reliability.name, q.durability.name


def _topic_row(probe: Probe, interface: str, name: str, type_name: str, *, publishers: bool = True,
               durability: str | None = None, optional: str | None = None) -> list[Row]:
    """Present (someone publishes / subscribes), type and QoS of one topic (check_presence waited for discovery
    of the required ones already; an optional one gets a second more)."""
    resolved = probe.resolve(name)
    lookup = probe.publishers if publishers else probe.subscribers
    if optional:
        probe.wait_graph(lambda: bool(lookup(name)), 1.0)
    endpoints = lookup(name)
    role = "publisher" if publishers else "subscriber"
    if not endpoints:
        if optional:
            return [report.info(interface, "present", f"no {role} on {resolved} ({optional})")]
        return [report.failed(interface, "present", f"no {role} on {resolved}")]
    rows = [report.passed(interface, "present", f"{len(endpoints)} {role}(s) on {resolved}")]
    types = sorted({e.topic_type for e in endpoints})
    rows.append(report.verdict(types == [type_name], interface, "type", f"{', '.join(types)} (want {type_name})"))
    qos = sorted({_qos_text(e) for e in endpoints})
    ok = all(rel == RELIABLE for rel, _dur in qos) and (durability is None or all(d == durability for _r, d in qos))
    want = f"{RELIABLE}" + (f", {durability}" if durability else "")
    rows.append(report.verdict(ok, interface, "QoS", f"{'; '.join(f'{r}, {d}' for r, d in qos)} (want {want})"))
    return rows


def check_presence(probe: Probe, skip_sim: bool) -> list[Row]:
    """Every driver-surface topic and action is served with its type and QoS."""
    n, d = probe.names, probe.names.driver
    # discovery takes a moment: wait once, for every required endpoint together (not DISCOVERY_S per topic, which
    # made a check of a namespace nobody serves take minutes)
    required = [(probe.publishers, t) for t in (d.joint_states, d.ee_pose, d.tf, d.tf_static)]
    required += [(probe.subscribers, t) for t in (d.servo_twist, d.estop)]
    required += [(probe.publishers, t) for cam in n.robot.cameras for t in (d.color(cam), d.depth(cam), d.info(cam))]
    actions = {probe.resolve(d.follow_joint_trajectory), probe.resolve(d.gripper_command)}
    probe.wait_graph(lambda: all(lookup(t) for lookup, t in required) and actions <= set(probe.actions()),
                     DISCOVERY_S)
    rows = []
    rows += _topic_row(probe, d.joint_states, d.joint_states, "sensor_msgs/msg/JointState")
    rows += _topic_row(probe, d.ee_pose, d.ee_pose, "geometry_msgs/msg/PoseStamped")
    rows += _topic_row(probe, d.tf, d.tf, "tf2_msgs/msg/TFMessage")
    rows += _topic_row(probe, d.tf_static, d.tf_static, "tf2_msgs/msg/TFMessage", durability=TRANSIENT_LOCAL)
    rows += _topic_row(probe, d.robot_description, d.robot_description, "std_msgs/msg/String",
                       durability=TRANSIENT_LOCAL, optional="rviz only")
    rows += _topic_row(probe, d.servo_twist, d.servo_twist, "geometry_msgs/msg/TwistStamped", publishers=False)
    rows += _topic_row(probe, d.estop, d.estop, "std_msgs/msg/Bool", publishers=False)
    rows += _topic_row(probe, d.gripper_target, d.gripper_target, "std_msgs/msg/Float64MultiArray", publishers=False,
                       optional=TARGET_FALLBACK)
    rows += _topic_row(probe, d.safety_events, d.safety_events, "std_msgs/msg/String", optional="reporting only")
    rows += _topic_row(probe, d.clock, d.clock, "rosgraph_msgs/msg/Clock",
                       optional="only simulators publish a clock")
    for cam in n.robot.cameras:
        rows += _topic_row(probe, d.color(cam), d.color(cam), "sensor_msgs/msg/Image")
        rows += _topic_row(probe, d.depth(cam), d.depth(cam), "sensor_msgs/msg/Image")
        rows += _topic_row(probe, d.info(cam), d.info(cam), "sensor_msgs/msg/CameraInfo")
    actions = probe.actions()
    for name, type_name in ((d.follow_joint_trajectory, "control_msgs/action/FollowJointTrajectory"),
                            (d.gripper_command, "control_msgs/action/GripperCommand")):
        resolved = probe.resolve(name)
        types = actions.get(resolved)
        if types is None:
            rows.append(report.failed(name, "present", f"no action server {resolved}"))
        else:
            rows.append(report.passed(name, "present", f"action server {resolved}"))
            rows.append(report.verdict(types == [type_name], name, "type", f"{', '.join(types)} (want {type_name})"))
    return rows


def check_frames(probe: Probe, skip_sim: bool) -> list[Row]:
    """Every frame robo needs is in TF, connected to the world frame."""
    f, n = probe.names.frames, probe.names
    _step_once(probe)
    probe.tf.wait_count(1, 5.0)
    probe.tf_static.wait_count(1, 5.0)
    parents: dict[str, str] = {}
    for stream in (probe.tf_static, probe.tf):
        with stream.cond:
            for msg in stream.messages:
                for t in msg.transforms:
                    parents[t.child_frame_id] = t.header.frame_id
    rows = []
    wanted = [("world -> base", f.base), ("world -> end effector", f.end_effector)]
    wanted += [(f"world -> {cam} optical", f.optical(cam)) for cam in n.robot.cameras]
    for check, frame in wanted:
        chain, name = [frame], frame
        while name in parents and name != f.world and len(chain) < 64:
            name = parents[name]
            chain.append(name)
        ok = name == f.world
        detail = " <- ".join(reversed(chain)) if ok else f"{frame!r} not connected to {f.world!r} (reached {name!r})"
        rows.append(report.verdict(ok, "TF", check, detail))
    return rows


def _step_once(probe: Probe, quiet_s: float = 0.3, timeout: float = 3.0) -> None:
    """A zero twist (in lockstep it makes the driver publish its state once; in realtime it changes nothing), then
    wait for that step's pose and, on a driver with an episode status, its status (published last), until neither
    has arrived for ``quiet_s``: the last pose and status are the arm's state now, not one still in flight from a
    goal that just ended. (Under load a step's status can reach the probe well after its pose.)"""
    def counts() -> tuple[int, int]:
        return probe.poses.count(), probe.status.count()

    poses, statuses = counts()
    probe.twist((0.0, 0.0, 0.0))
    probe.poses.wait_count(poses + 1, 2.0)
    if statuses:
        probe.status.wait_count(statuses + 1, 2.0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = counts()
        time.sleep(quiet_s)
        if counts() == n:
            return


def check_state(probe: Probe, skip_sim: bool) -> list[Row]:
    """ee_pose is in the world frame and joint_states name every arm and finger joint."""
    n, d = probe.names, probe.names.driver
    _step_once(probe)
    rows = []
    pose = probe.poses.latest()
    if pose is None:
        rows.append(report.failed(d.ee_pose, "arrives", "no end-effector pose received"))
    else:
        rows.append(report.verdict(pose.header.frame_id == n.frames.world, d.ee_pose, "frame",
                                   f"frame_id {pose.header.frame_id!r} (want {n.frames.world!r})"))
    js = probe.joints.latest()
    if js is None:
        rows.append(report.failed(d.joint_states, "arrives", "no joint state received"))
    else:
        missing = [j for j in (*n.robot.arm_joints, *n.robot.finger_joints) if j not in js.name]
        rows.append(report.verdict(not missing, d.joint_states, "joint names",
                                   f"missing {missing}" if missing else f"{len(js.name)} joints incl. arm + fingers"))
    return rows


def check_twist(probe: Probe, skip_sim: bool) -> list[Row]:
    """A twist moves the end effector along it, at about the commanded speed; the opposite twist brings it back."""
    d = probe.names.driver
    _step_once(probe)
    start = probe.ee_position()
    if start is None:
        return [report.failed(d.servo_twist, "twist moves the EE", "no end-effector pose to measure motion")]
    probe.stream_twist((0.0, 0.0, MOVE_SPEED), MOVE_TIME_S)
    _step_once(probe)
    moved = probe.ee_position() - start
    expected = MOVE_SPEED * MOVE_TIME_S
    lateral = float(np.linalg.norm(moved[:2]))
    ok = MIN_MOTION_M <= moved[2] <= 1.6 * expected and lateral < max(MIN_MOTION_M, 0.5 * moved[2])
    rows = [report.verdict(ok, d.servo_twist, "twist moves the EE",
                           f"+z {MOVE_SPEED} m/s for {MOVE_TIME_S} s moved it {_fmt(moved)} m: "
                           f"{moved[2] / expected:.0%} of the commanded {expected:.3f} m, along the twist")]
    probe.stream_twist((0.0, 0.0, -MOVE_SPEED), MOVE_TIME_S)
    _step_once(probe)
    back = float(np.linalg.norm(probe.ee_position() - start))
    rows.append(report.verdict(back < 0.5 * max(moved[2], MIN_MOTION_M) + MIN_MOTION_M, d.servo_twist,
                               "reverse twist returns", f"{back * 1000:.1f} mm from the start after the opposite "
                                                        f"twist ({moved[2] * 1000:.1f} mm out)"))
    return rows


def _fmt(v) -> str:
    return "[" + ", ".join(f"{x:+.4f}" for x in v) + "]"


def check_gripper(probe: Probe, skip_sim: bool) -> list[Row]:
    """A gripper goal closes the fingers (reached or stalled), reports feedback, and opens them again."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import GripperCommand

    name, n = probe.names.driver.gripper_command, probe.names
    rows = []
    for label, position in (("close", 0.0), ("open", n.robot.gripper_open_width_m)):
        goal = GripperCommand.Goal()
        goal.command.position = float(position)
        feedback: list = []
        handle, accepted = probe.send_goal(probe.gripper, goal, feedback=feedback)
        if not accepted:
            rows.append(report.failed(name, f"{label} goal", "goal rejected"))
            continue
        res = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S)
        r = res.result
        ok = res.status == GoalStatus.STATUS_SUCCEEDED and (r.reached_goal or r.stalled) and \
            abs(r.position - position) < 0.02
        rows.append(report.verdict(ok, name, f"{label} goal",
                                   f"status {_status(res.status)}, position {r.position:.4f} m (target {position}), "
                                   f"reached_goal {r.reached_goal}, stalled {r.stalled}, {len(feedback)} feedback"))
    def is_open(_msgs) -> bool:
        gap = _finger_gap(probe)
        return gap is not None and abs(gap - n.robot.gripper_open_width_m) < 0.01

    ok = probe.joints.wait(is_open, 5.0)    # the result may come before the last joint state is delivered
    rows.append(report.verdict(ok, name, "joint_states show the fingers",
                               f"finger gap {_finger_gap(probe)} m after opening"))
    return rows


def check_gripper_target(probe: Probe, skip_sim: bool) -> list[Row]:
    """A gripper target costs no step, is carried by the following steps' status, and moves the fingers while a
    twist moves the arm (both ways: closing on the way up, opening on the way back)."""
    d, n = probe.names.driver, probe.names
    name = d.gripper_target
    if not probe.wait_graph(lambda: bool(probe.subscribers(name)), 1.0):
        return [report.info(name, "fingers move with the arm", f"no subscriber on {probe.resolve(name)} "
                                                                f"({TARGET_FALLBACK})")]
    rows = []
    for label, gap, v in (("close", 0.0, MOVE_SPEED), ("open", n.robot.gripper_open_width_m, -MOVE_SPEED)):
        _step_once(probe)
        start, gap0, statuses = probe.ee_position(), _finger_gap(probe), probe.status.count()
        probe.gripper_target(gap)
        if statuses:      # a driver with an episode status acknowledges the target with one (lockstep: same step)
            step0 = probe.episode_status().get("step")
            ok = probe.status.wait(lambda msgs, gap=gap: _carries(msgs[-1], gap), 5.0)
            st = probe.episode_status()
            ok = ok and (st.get("clock_mode") != "lockstep" or st.get("step") == step0)
            rows.append(report.verdict(ok, name, f"{label} target acknowledged",
                                       f"status at step {st.get('step')} (was {step0}) carries gripper_target "
                                       f"{st.get('gripper_target')} (sent {gap})"))
        else:
            time.sleep(0.5)
        probe.stream_twist((0.0, 0.0, v), MOVE_TIME_S)
        _step_once(probe)
        moved, gap1 = float(probe.ee_position()[2] - start[2]), _finger_gap(probe)
        travel = None if gap0 is None or gap1 is None else (gap1 - gap0) * (1 if gap else -1)
        ok = travel is not None and travel >= MIN_FINGER_TRAVEL_M and abs(moved) >= MIN_MOTION_M
        rows.append(report.verdict(ok, name, f"fingers {label} while a twist moves the arm",
                                   f"finger gap {gap0} -> {gap1} m while the EE moved {moved * 1000:+.1f} mm in z"))
        if statuses:
            st = probe.episode_status()
            rows.append(report.verdict(_carries(probe.status.latest(), gap) and st.get("step") > step0, name,
                                       f"{label} target carried by the steps",
                                       f"status at step {st.get('step')} carries gripper_target "
                                       f"{st.get('gripper_target')}"))
    return rows


def _carries(status_msg, gap: float) -> bool:
    """Whether an episode status message carries the gripper target ``gap`` [m]."""
    target = json.loads(status_msg.data).get("gripper_target")
    return target is not None and abs(float(target) - gap) < 1e-6


def _finger_gap(probe: Probe) -> float | None:
    joints = probe.joint_positions()
    fingers = [joints.get(j) for j in probe.names.robot.finger_joints]
    return None if None in fingers else round(sum(abs(x) for x in fingers), 4)


def _status(code: int) -> str:
    from action_msgs.msg import GoalStatus

    return {GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_ABORTED: "aborted",
            GoalStatus.STATUS_CANCELED: "canceled"}.get(code, str(code))


def _trajectory(names, positions, seconds):
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(names)
    goal.trajectory.points.append(JointTrajectoryPoint(
        positions=[float(p) for p in positions],
        time_from_start=Duration(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))))
    return goal


def check_trajectory(probe: Probe, skip_sim: bool) -> list[Row]:
    """A one-point trajectory reaches its target; a long one stops when canceled; an invalid one is refused."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory

    name, arm = probe.names.driver.follow_joint_trajectory, probe.names.robot.arm_joints
    joint = arm[0]
    _step_once(probe)
    q0 = probe.joint_positions().get(joint)
    if q0 is None:
        return [report.failed(name, "trajectory goal", f"no joint state for {joint}")]
    rows = []
    feedback: list = []
    handle, accepted = probe.send_goal(probe.trajectory, _trajectory([joint], [q0 + JOINT_STEP_RAD], 1.0),
                                       feedback=feedback)
    if not accepted:
        rows.append(report.failed(name, "trajectory goal", "goal rejected"))
    else:
        res = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S)
        _step_once(probe)
        q1 = probe.joint_positions().get(joint, math.nan)
        ok = res.status == GoalStatus.STATUS_SUCCEEDED and res.result.error_code == 0 and \
            abs(q1 - (q0 + JOINT_STEP_RAD)) < 0.05
        rows.append(report.verdict(ok, name, "trajectory goal",
                                   f"{joint} {q0:+.3f} -> {q1:+.3f} rad (target {q0 + JOINT_STEP_RAD:+.3f}), status "
                                   f"{_status(res.status)}, error_code {res.result.error_code}, "
                                   f"{len(feedback)} feedback"))
    rows.append(_cancel_stops_the_arm(probe, name, joint, q0))
    handle, accepted = probe.send_goal(probe.trajectory, _trajectory(["no_such_joint"], [0.0], 1.0))
    refused = not accepted
    if accepted:
        res = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S)
        refused = res.result.error_code == FollowJointTrajectory.Result.INVALID_JOINTS
    rows.append(report.verdict(refused, name, "unknown joint refused",
                               "rejected" if not accepted else f"accepted, then error_code {res.result.error_code}"))
    back, accepted = probe.send_goal(probe.trajectory, _trajectory([joint], [q0], 1.0))
    if accepted:
        probe.wait_future(back.get_result_async(), GOAL_TIMEOUT_S)
    return rows


def _cancel_stops_the_arm(probe: Probe, name: str, joint: str, q0: float) -> Row:
    """A long goal on ``joint``, canceled once it runs: the goal ends canceled and the joint stays where it stopped."""
    from action_msgs.msg import GoalStatus

    left = _episode_steps_left(probe)
    if left is not None and left < CANCEL_MIN_STEPS:
        return report.skipped(name, "cancel stops the arm",
                              f"not run: {left} control steps left in the episode; a lockstep driver may end it "
                              f"before the cancel arrives (run the driver with max_episode_steps >= "
                              f"{CANCEL_MIN_STEPS + 1000})")
    feedback: list = []
    q_start = probe.joint_positions().get(joint, q0)
    handle, accepted = probe.send_goal(probe.trajectory, _trajectory([joint], [q0 + 1.0], CANCEL_GOAL_S),
                                       feedback=feedback)
    if not accepted:
        return report.failed(name, "cancel stops the arm", "long goal rejected")
    # the goal runs: its feedback or, where feedback cannot be decoded (FollowJointTrajectory feedback differs
    # between Jazzy and Kilted), the joint moving
    probe.wait_graph(lambda: len(feedback) >= 5 or
                     abs(probe.joint_positions().get(joint, q_start) - q_start) > 0.01, 10.0)
    probe.wait_future(handle.cancel_goal_async(), 10.0)
    res = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S)
    time.sleep(0.3)
    q_stop = probe.joint_positions().get(joint, math.nan)
    time.sleep(0.5)
    q_later = probe.joint_positions().get(joint, math.nan)
    ok = res.status == GoalStatus.STATUS_CANCELED and abs(q_later - q_stop) < 0.01 and \
        q_stop < q0 + JOINT_STEP_RAD + 0.5
    return report.verdict(ok, name, "cancel stops the arm", f"status {_status(res.status)}, {joint} held at "
                          f"{q_stop:+.3f} rad (0.5 s later {q_later:+.3f})")


def _episode_steps_left(probe: Probe) -> int | None:
    """Control steps before the driver truncates its episode, from its latest episode status; None without one
    (a real arm has no episode)."""
    status = probe.episode_status() or {}
    if "max_episode_steps" not in status or "step" not in status:
        return None
    return int(status["max_episode_steps"]) - int(status["step"])


def check_cartesian_move(probe: Probe, skip_sim: bool) -> list[Row]:
    """The MoveToTarget action (optional; robo streams twists without it): a goal 3 cm up runs robo's move_to law
    (each step's twist is the law's for the pose before it), converges within its tolerance with one feedback per
    step and, on a driver with an episode status, one control step per feedback; a goal that never converges ends
    canceled when canceled and takes no step after."""
    from action_msgs.msg import GoalStatus


    name = probe.names.driver.cartesian_move
    resolved = probe.resolve(name)
    if probe.cartesian is None:
        return [report.info(name, "present", f"the MoveToTarget type is not built here ({MOVE_FALLBACK})")]
    if not probe.wait_graph(lambda: resolved in probe.actions(), 1.0):
        return [report.info(name, "present", f"no action server {resolved} ({MOVE_FALLBACK})")]
    types = probe.actions()[resolved]
    rows = [report.passed(name, "present", f"action server {resolved}"),
            report.verdict(types == ["pyrua_ros_msgs/action/MoveToTarget"], name, "type",
                           f"{', '.join(types)} (want pyrua_ros_msgs/action/MoveToTarget)")]
    _step_once(probe)
    start, step0 = probe.ee_position(), (probe.episode_status() or {}).get("step")
    gap = _finger_gap(probe)
    target = start + np.array([0.0, 0.0, MOVE_UP_M])
    goal = probe.cartesian._action_type.Goal(target=[float(v) for v in target], linear_scale=0.05,
                                              gripper_position=float(gap if gap is not None else 0.08), **MOVE_LAW)
    feedback: list = []
    handle, accepted = probe.send_goal(probe.cartesian, goal, feedback=feedback)
    if not accepted:
        return [*rows, report.failed(name, "goal reaches the target", "goal rejected")]
    res = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S)
    r = res.result
    probe.wait_graph(lambda: len(feedback) >= r.iterations - 1, 10.0)   # feedback may arrive after the result
    final = np.asarray(r.final_position, dtype=float)
    dist = float(np.linalg.norm(final - target))
    ok = res.status == GoalStatus.STATUS_SUCCEEDED and dist < MOVE_LAW["tolerance"] and \
        r.iterations == len(feedback) + 1 < MOVE_LAW["max_steps"]
    rows.append(report.verdict(ok, name, "goal reaches the target",
                               f"status {_status(res.status)}, {dist * 1000:.1f} mm from the target after "
                               f"{r.iterations} iterations (converged check included), {len(feedback)} feedback"))
    if feedback:
        dt = probe.names.robot.control_period_s
        law = ServoLaw(target, MOVE_LAW["tolerance"], step_clip=MOVE_LAW["step_clip"],
                       action_scale=MOVE_LAW["action_scale"])
        want, _w = osc_twist(law.action(start, (0.0, 0.0, 0.0, 1.0)), (0.05, 1.0), dt)   # (no angle: no quat read)
        got = np.asarray(feedback[0].linear, dtype=float)
        rows.append(report.verdict(bool(np.array_equal(got, want)), name, "first step follows move_to's law",
                                   f"twist {_fmt(got)} m/s (law from the start pose: {_fmt(want)})"))
    if step0 is not None:
        steps = int(r.step) - int(step0)
        rows.append(report.verdict(steps == len(feedback), name, "one control step per feedback",
                                   f"{steps} control steps, {len(feedback)} feedback"))
    rows.append(_cancel_holds_the_move(probe, name))
    return rows


def _cancel_holds_the_move(probe: Probe, name: str) -> Row:
    """A Cartesian goal that never converges (tolerance 0 at the current position: zero twists) for up to
    ``HOLD_GOAL_STEPS`` steps, canceled once it runs: it ends canceled and no control step follows."""
    from action_msgs.msg import GoalStatus

    left = _episode_steps_left(probe)
    if left is not None and left < CANCEL_MIN_STEPS:
        return report.skipped(name, "cancel ends the move",
                              f"not run: {left} control steps left in the episode; a lockstep driver may end it "
                              f"before the cancel arrives (run the driver with max_episode_steps >= "
                              f"{CANCEL_MIN_STEPS + 1000})")
    _step_once(probe)
    here = probe.ee_position()
    goal = probe.cartesian._action_type.Goal(target=[float(v) for v in here], linear_scale=0.05,
                                              gripper_position=float(_finger_gap(probe) or 0.0),
                                              **{**MOVE_LAW, "tolerance": 0.0, "max_steps": HOLD_GOAL_STEPS})
    feedback: list = []
    handle, accepted = probe.send_goal(probe.cartesian, goal, feedback=feedback)
    if not accepted:
        return report.failed(name, "cancel ends the move", "goal rejected")
    probe.wait_graph(lambda: len(feedback) >= 5, 10.0)
    probe.wait_future(handle.cancel_goal_async(), 10.0)
    res = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S)
    time.sleep(0.3)
    step_stop = (probe.episode_status() or {}).get("step")
    time.sleep(0.5)
    step_later = (probe.episode_status() or {}).get("step")
    ok = res.status == GoalStatus.STATUS_CANCELED and res.result.iterations < HOLD_GOAL_STEPS and \
        step_stop == step_later
    return report.verdict(ok, name, "cancel ends the move",
                          f"status {_status(res.status)} after {res.result.iterations} of {HOLD_GOAL_STEPS} "
                          f"iterations; control step {step_stop}, 0.5 s later {step_later}")


def check_estop(probe: Probe, skip_sim: bool) -> list[Row]:
    """``true`` on the e-stop latches: twists do not move the arm and goals are refused; ``false`` releases it."""
    d = probe.names.driver
    rows = []
    _step_once(probe)
    start = probe.ee_position()
    n_events = probe.events.count()
    probe.estop(True)
    _wait_estop_state(probe, True)
    try:
        probe.stream_twist((0.0, 0.0, MOVE_SPEED), MOVE_TIME_S)
        _step_once(probe)
        moved = float(np.linalg.norm(probe.ee_position() - start))
        rows.append(report.verdict(moved < MIN_MOTION_M / 2, d.estop, "latch holds the arm",
                                   f"moved {moved * 1000:.1f} mm under twists while the e-stop was true"))
        with probe.events.cond:
            refusals = [json.loads(m.data) for m in probe.events.messages[n_events:]]
        reported = any(e.get("kind") == "refused" for e in refusals)
        rows.append(report.Row(d.estop, "refusals reported", report.PASS if reported else report.INFO,
                               f"{sum(e.get('kind') == 'refused' for e in refusals)} refused event(s) on "
                               f"{probe.resolve(d.safety_events)}"))
        from action_msgs.msg import GoalStatus

        q0 = probe.joint_positions().get(probe.names.robot.arm_joints[0], 0.0)
        handle, accepted = probe.send_goal(probe.trajectory,
                                           _trajectory([probe.names.robot.arm_joints[0]], [q0 + 0.05], 0.5))
        status = None
        if accepted:
            status = probe.wait_future(handle.get_result_async(), GOAL_TIMEOUT_S).status
        rows.append(report.verdict(not accepted or status == GoalStatus.STATUS_ABORTED, d.estop,
                                   "goals refused while latched",
                                   "trajectory goal rejected" if not accepted else f"accepted, {_status(status)}"))
    finally:
        probe.estop(False)
    _wait_estop_state(probe, False)
    _step_once(probe)
    before = probe.ee_position()
    probe.stream_twist((0.0, 0.0, -MOVE_SPEED), MOVE_TIME_S)
    _step_once(probe)
    moved = float(np.linalg.norm(probe.ee_position() - before))
    rows.append(report.verdict(moved >= MIN_MOTION_M, d.estop, "release enables motion",
                               f"moved {moved * 1000:.1f} mm after false"))
    return rows


def _wait_estop_state(probe: Probe, stop: bool, timeout: float = 5.0) -> None:
    """Give the driver time to apply an e-stop message: until the episode status reports it (a driver with sim
    interfaces), else a moment."""
    def applied(msgs) -> bool:
        return bool(msgs) and json.loads(msgs[-1].data).get("estop") == stop

    if not probe.status.wait(applied, timeout if probe.status.count() else 0.0):
        time.sleep(0.5)


IMAGE_WAIT_S = 20.0   # [s] longest wait for a stream camera's first frame once it has a subscriber


def check_rates(probe: Probe, skip_sim: bool) -> list[Row]:
    """How often state and images arrive, idle and under a twist stream (measured; images must arrive)."""
    from sensor_msgs.msg import Image

    from pyrua_ros.wire import qos

    d, n = probe.names.driver, probe.names
    rows = []
    cams = {}
    for cam in n.robot.cameras:
        cams[cam] = stream = _Counter()
        probe.node.create_subscription(Image, d.color(cam), stream.put, qos.STREAM)
    idle = {name: s.count() for name, s in (("pose", probe.poses), ("joints", probe.joints), ("tf", probe.tf))}
    time.sleep(2.0)
    idle_rates = {k: (s.count() - idle[k]) / 2.0 for k, s in (("pose", probe.poses), ("joints", probe.joints),
                                                             ("tf", probe.tf))}
    mode = "lockstep (state only on commands)" if idle_rates["pose"] < 1.0 else "streams while idle"
    rows.append(report.info("rates", "idle", f"ee_pose {idle_rates['pose']:.1f} Hz, joint_states "
                                             f"{idle_rates['joints']:.1f} Hz, tf {idle_rates['tf']:.1f} Hz: {mode}"))
    t0, c0 = time.monotonic(), probe.poses.count()
    probe.stream_twist((0.0, 0.0, 0.0), 1.0)
    rows.append(report.info("rates", "under a 20 Hz twist stream",
                            f"ee_pose {(probe.poses.count() - c0) / (time.monotonic() - t0):.1f} Hz"))
    # a driver renders its stream off the control path: under load the first frame may take a while, so wait for
    # it (up to IMAGE_WAIT_S) instead of a fixed second
    deadline = time.monotonic() + IMAGE_WAIT_S
    while time.monotonic() < deadline and not all(stream.count() for stream in cams.values()):
        time.sleep(0.05)
    for cam, stream in cams.items():
        got = stream.count()
        rows.append(report.verdict(got > 0, d.color(cam), "images arrive",
                                   f"{got} image(s) in {time.monotonic() - stream.t0:.1f} s while subscribed"))
    return rows


class _Counter:
    def __init__(self):
        self.t0, self.n = time.monotonic(), 0

    def put(self, _msg) -> None:
        self.n += 1

    def count(self) -> int:
        return self.n


def check_sim_interfaces(probe: Probe, skip_sim: bool) -> list[Row]:
    """The sim-only interfaces: reset answers a fresh episode status; capture and segmentation publish images."""
    from sensor_msgs.msg import Image
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from pyrua_ros.wire import qos

    s = probe.names.sim
    if skip_sim:
        return [report.skipped("sim interfaces", "all", "--skip-sim-interfaces: a real arm has none")]
    rows = []
    resp = probe.call(Trigger, s.reset, Trigger.Request(), probe.names.timeouts.reset_s)
    status = json.loads(resp.message) if resp.success else {}
    rows.append(report.verdict(resp.success and status.get("step") == 0, s.reset, "reset",
                               f"episode {status.get('episode_id')}, step {status.get('step')}, "
                               f"{status.get('task_language')!r}" if resp.success else resp.message))
    rows += _topic_row(probe, s.episode_status, s.episode_status, "std_msgs/msg/String", durability=TRANSIENT_LOCAL)
    cam = probe.names.robot.cameras[0]
    for what, service, kind in (("capture", s.capture_service(cam, "low"), "color"),
                                ("segmentation", s.segmentation_service(cam, "low"), "segmentation")):
        topic = s.capture_topics(cam, "low")[kind]
        got: list = []
        sub = probe.node.create_subscription(Image, topic, got.append, qos.LATCHED)
        try:
            answer = probe.call(Trigger, service, Trigger.Request(), probe.names.timeouts.capture_s,
                                idempotent=True)
            stamp = json.loads(answer.message).get("stamp") if answer.success else None
            ok = answer.success and probe.wait_graph(
                lambda got=got, stamp=stamp: any([m.header.stamp.sec, m.header.stamp.nanosec] == stamp for m in got),
                10.0)
            detail = f"{what} stamped {stamp} on {probe.resolve(topic)}" if answer.success else answer.message
            rows.append(report.verdict(ok, service, what, detail))
        finally:
            probe.node.destroy_subscription(sub)
    got_labels: list = []
    sub = probe.node.create_subscription(String, s.segmentation_labels, got_labels.append, qos.LATCHED)
    probe.wait_graph(lambda: bool(got_labels), 5.0)
    probe.node.destroy_subscription(sub)
    rows.append(report.verdict(bool(got_labels), s.segmentation_labels, "labels",
                               f"{len(json.loads(got_labels[-1].data))} labelled ids" if got_labels else "none"))
    return rows


CHECKS: tuple[Callable[[Probe, bool], list[Row]], ...] = (
    check_presence, check_frames, check_state, check_twist, check_gripper, check_gripper_target, check_trajectory,
    check_cartesian_move, check_estop, check_rates, check_sim_interfaces)


def run_one(check: Callable[[Probe, bool], list[Row]], probe: Probe, *, skip_sim: bool = False) -> list[Row]:
    """One check; if it raises, one failed row naming the exception."""
    try:
        return check(probe, skip_sim)
    except Exception as exc:
        return [report.failed(check.__name__.removeprefix("check_"), "ran", f"{type(exc).__name__}: {exc}")]


def _no_driver(rows: list[Row], probe: Probe) -> bool:
    """Presence found neither the joint states nor the end-effector pose: nothing here serves the surface."""
    d = probe.names.driver
    state = [r for r in rows if r.check == "present" and r.interface in (d.joint_states, d.ee_pose)]
    return bool(state) and all(r.failed for r in state)


# the checks that need the arm to move (the rates too: a lockstep driver publishes state and stream frames as it
# steps): a driver whose episode is over refuses every motion until a reset
MOVES_THE_ARM = (check_state, check_twist, check_gripper, check_gripper_target, check_trajectory,
                 check_cartesian_move, check_estop, check_rates)


def episode_over(probe: Probe) -> str | None:
    """Why the driver refuses motion for the rest of its episode, from its latest episode status ("terminated:
    success at step 142"); None while the episode runs or without a status (a real arm has no episode)."""
    status = probe.episode_status() or {}
    if status.get("terminated"):
        return f"terminated: success at step {status.get('step')}"
    if status.get("truncated"):
        return f"truncated at step {status.get('step')} of {status.get('max_episode_steps')}"
    return None


def run(probe: Probe, *, skip_sim: bool = False, on_rows: Callable[[list[Row]], None] | None = None) -> list[Row]:
    """Run every check in order (:data:`CHECKS`). When presence finds no driver state at all, the behaviour checks
    each report one failed row instead of waiting out their own timeouts against nobody. When the driver's episode
    is over (before the kit or during it), each check that moves the arm reports one failed row that says so,
    instead of rows that blame the driver for motion it was right to refuse."""
    rows: list[Row] = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        over = episode_over(probe) if check in MOVES_THE_ARM else None
        if check is not check_presence and _no_driver(rows, probe) and not (skip_sim and check is
                                                                            check_sim_interfaces):
            got = [report.failed(name, "ran", "not run: nothing publishes the joint states or the end-effector pose "
                                              "in this namespace (see presence)")]
        elif over:
            got = [report.failed(name, "ran", f"not run: the driver's episode is over ({over}); call "
                                              f"{probe.resolve(probe.names.sim.reset)} and run the kit again")]
        else:
            got = run_one(check, probe, skip_sim=skip_sim)
        rows += got
        if on_rows:
            on_rows(got)
    return rows
