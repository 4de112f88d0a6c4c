"""The driver core's rules, in process over the real fake-arm model (no ROS graph; fast). Every rule written in
pyrua_ros/driver/core.py and goals.py has a case here; the conformance suite checks the same surface over DDS."""

from __future__ import annotations

import numpy as np
import pytest

from pyrua_ros.driver import goals
from pyrua_ros.driver.core import DriverConfig, DriverCore, GoalRejected
from pyrua_ros.fake_arm.arm import FakeArm
from pyrua_ros.safety import SafetyLimits
from pyrua_ros.wire.interfaces import load

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

NAMES = load()
ARM = NAMES.robot.arm_joints


class Recorder:
    """The core's output seam, recording what a node would publish."""

    def __init__(self):
        self.states = 0
        self.statuses = 0
        self.events: list = []
        self.feedback: list = []
        self.done: list = []

    def publish_state(self):
        self.states += 1

    def publish_status(self):
        self.statuses += 1

    def publish_event(self, event):
        self.events.append(event)

    def publish_reset(self):
        pass

    def goal_feedback(self, goal, fields):
        self.feedback.append((goal.kind, fields))

    def goal_done(self, goal):
        self.done.append(goal)


def make_core(clock_mode="lockstep", **gripper):
    model = FakeArm(arm_joints=ARM, finger_joints=NAMES.robot.finger_joints, frames=NAMES.frames,
                    control_period_s=NAMES.robot.control_period_s)
    cfg = DriverConfig(clock_mode=clock_mode, command_timeout_s=0.1,
                       limits=SafetyLimits((-0.5, -0.45, 0.91), (0.35, 0.45, 1.45), 1.0, 10.0),
                       gripper=goals.GripperSettings(**gripper), trajectory=goals.TrajectorySettings(),
                       world_frame=NAMES.frames.world, base_frame=NAMES.frames.base,
                       ee_frame=NAMES.frames.end_effector, arm_joints=ARM, gripper_open_m=0.08)
    out = Recorder()
    core = DriverCore(model, cfg, out)
    core.reset("fake_table", 0, 0, 300)
    return core, out


def run_goal(core, goal, limit=500):
    for _ in range(limit):
        if goal.outcome is not None:
            return goal.outcome
        core.tick()
    raise AssertionError("goal never ended")


def test_lockstep_twist_is_one_step_and_sim_time_never_runs_backwards():
    core, out = make_core()
    z0 = core.model.ee_pose()[0][2]
    core.on_twist((0, 0, 0.2), (0, 0, 0), "", 0.0)
    assert core.model.last_step().step == 1 and out.states == 2          # reset + one step
    assert core.model.ee_pose()[0][2] == pytest.approx(z0 + 0.01, abs=1e-3)
    t = core.sim_time
    core.reset("fake_table", 1, 0, 300)
    assert core.model.last_step().step == 0 and core.sim_time > t


def test_twist_frames_are_resolved_through_the_tf_tree_and_unknown_ones_refused():
    core, out = make_core()
    R_ee = core.frame_rotation(NAMES.frames.end_effector)
    np.testing.assert_allclose(R_ee[:, 2], [0, 0, -1], atol=1e-6)       # the gripper points down
    p0 = core.model.ee_pose()[0]
    core.on_twist((0, 0, 0.2), (0, 0, 0), NAMES.frames.end_effector, 0.0)   # +z of the tool = world down
    assert core.model.ee_pose()[0][2] < p0[2] - 0.005
    core.on_twist((0.1, 0, 0), (0, 0, 0), "camera_link", 0.0)
    assert out.events[-1].kind == "refused" and "'camera_link' is not supported" in out.events[-1].reason
    assert core.model.last_step().step == 1


def test_speed_is_clipped_per_axis_to_the_configured_limit():
    core, out = make_core()
    core.on_twist((3.0, 0.5, 0.0), (0, 0, 0), "", 0.0)
    ev = out.events[-1]
    assert ev.kind == "clipped" and ev.executed[:2] == (1.0, 0.5)


def test_no_arm_command_moves_the_end_effector_faster_than_the_speed_limit():
    """A hostile episode once moved the fake arm's end effector 0.06 m in one 0.05 s step: twists at the limits
    with a fast turn swung it sideways through the IK, and a trajectory set point jumped it 0.44 m. Every step of
    either path now moves it at most max_linear_speed * dt along each axis."""
    from pyrua_ros.fake_arm.kinematics import POSITION_SLACK_M

    core, out = make_core()
    reach = 1.0 * core.dt
    for _ in range(32):   # at the linear limit on every axis while turning at 10 rad/s (0.062 m at step 29 before)
        p0 = core.model.ee_pose()[0]
        core.on_twist((1.0, 1.0, 1.0), (0.0, -10.0, 0.0), "", 0.0)
        assert np.all(np.abs(core.model.ee_pose()[0] - p0) <= reach + POSITION_SLACK_M)
    core, out = make_core()
    goal = core.start_trajectory([ARM[0], ARM[1]], [(0.05, [1.5, 0.8], [])], {}, {}, 0.0)
    for _ in range(8):
        p0 = core.model.ee_pose()[0]
        core.tick()
        assert np.all(np.abs(core.model.ee_pose()[0] - p0) <= reach + 1e-6)
    clips = [e for e in out.events if e.kind == "clipped" and e.reason.startswith("joint set point")]
    assert clips and "beyond the per-axis limit 1.0 m/s" in clips[0].reason
    assert abs(core.arm_positions()[0]) > 0.05   # it does move toward the target, at the allowed speed
    run_goal(core, goal)


def test_gripper_goal_reaches_then_a_stall_succeeds_only_when_allowed():
    core, _ = make_core()
    goal = core.start_gripper(0.0)
    outcome = run_goal(core, goal)
    assert outcome.status == goals.SUCCEEDED and outcome.fields["reached_goal"]
    assert core.model.gripper_opening() < 0.004
    strict, _ = make_core(allow_stalling=False, max_steps=5)
    slow = strict.start_gripper(0.0)                   # 8 cm at 1 cm per step: still moving after 5 steps
    assert run_goal(strict, slow).status == goals.ABORTED and "after 5 steps" in slow.outcome.message


def test_a_new_goal_preempts_the_active_one_of_its_kind_only():
    core, _ = make_core()
    first = core.start_gripper(0.0)
    core.tick()
    traj = core.start_trajectory([ARM[0]], [(1.0, [0.2], [])], {}, {}, 0.0)
    assert first.outcome is None                       # a trajectory does not preempt the gripper
    second = core.start_gripper(0.08)
    assert first.outcome.status == goals.ABORTED and "preempted" in first.outcome.message
    run_goal(core, traj)
    assert traj.outcome.status == goals.SUCCEEDED and second.outcome is not None


def test_trajectory_tolerances_follow_the_joint_tolerance_convention():
    core, _ = make_core()
    q0 = core.arm_positions()[0]
    ok = core.start_trajectory([ARM[0]], [(0.5, [q0 + 0.3], [])], {}, {}, 0.0)
    assert run_goal(core, ok).status == goals.SUCCEEDED and core.model.last_step().step == 10
    beyond = core.start_trajectory([ARM[0]], [(0.5, [9.0], [])], {ARM[0]: 0.01}, {}, 0.2)  # past the joint limit
    outcome = run_goal(core, beyond)
    assert outcome.fields["error_code"] == goals.GOAL_TOLERANCE_VIOLATED and ARM[0] in outcome.fields["error_string"]
    assert core.model.last_step().step == 10 + 10 + 4   # 0.5 s of points, then 0.2 s of goal time
    unchecked = core.start_trajectory([ARM[0]], [(0.5, [9.0], [])], {ARM[0]: -1.0}, {}, 0.0)
    assert run_goal(core, unchecked).status == goals.SUCCEEDED     # -1: not checked
    path = core.start_trajectory([ARM[1]], [(0.5, [9.0], [])], {}, {ARM[1]: 0.01}, 0.0)   # the limit stops it
    assert run_goal(core, path).fields["error_code"] == goals.PATH_TOLERANCE_VIOLATED
    assert path.runner.k < path.runner.n                # aborted on the way, not at the end


def test_invalid_goals_are_rejected_with_the_reason_published():
    core, out = make_core()
    with pytest.raises(GoalRejected, match=r"unknown: \['elbow'\]"):
        core.check_trajectory_goal(["elbow"], [(1.0, [0.0], [])])
    with pytest.raises(GoalRejected, match="not after the previous point"):
        core.check_trajectory_goal([ARM[0]], [(1.0, [0.0], []), (1.0, [0.1], [])])
    with pytest.raises(GoalRejected, match="not finite"):
        core.check_gripper_goal(float("nan"))
    assert [e.kind for e in out.events] == ["rejected"] * 3


def test_cancel_holds_and_twists_are_refused_while_a_trajectory_runs():
    core, out = make_core()
    goal = core.start_trajectory([ARM[0]], [(5.0, [1.0], [])], {}, {}, 0.0)
    for _ in range(5):
        core.tick()
    core.on_twist((0.1, 0, 0), (0, 0, 0), "", 0.0)
    assert "trajectory goal is executing" in out.events[-1].reason
    core.request_cancel(goal)
    core.tick()
    assert goal.outcome.status == goals.CANCELED and goal.outcome.fields["error_code"] == goals.SUCCESSFUL
    assert not core.tick()                              # nothing left to step
    gripper = core.start_gripper(0.0)
    core.tick()
    core.request_cancel(gripper)
    core.tick()
    assert gripper.outcome.status == goals.CANCELED
    assert core.gripper_target == pytest.approx(core.model.gripper_opening())   # the fingers hold where they are


def test_estop_aborts_goals_refuses_motion_and_rejects_goals_until_released():
    core, out = make_core()
    goal = core.start_trajectory([ARM[0]], [(5.0, [1.0], [])], {}, {}, 0.0)
    core.tick()
    assert core.on_estop(True) and not core.on_estop(True)
    assert goal.outcome.status == goals.ABORTED and "e-stop" in goal.outcome.fields["error_string"]
    step = core.model.last_step().step
    core.on_twist((0.1, 0, 0), (0, 0, 0), "", 0.0)
    assert core.model.last_step().step == step and "e-stop is latched" in out.events[-1].reason
    with pytest.raises(GoalRejected, match="e-stop"):
        core.check_gripper_goal(0.0)
    core.on_estop(False)
    core.on_twist((0.1, 0, 0), (0, 0, 0), "", 0.0)
    assert core.model.last_step().step == step + 1


def test_reset_and_episode_end_abort_active_goals():
    core, _ = make_core()
    goal = core.start_gripper(0.0)
    core.reset("fake_table", 0, 0, 3)
    assert goal.outcome.status == goals.ABORTED and "reset" in goal.outcome.message
    traj = core.start_trajectory([ARM[0]], [(5.0, [1.0], [])], {}, {}, 0.0)
    run_goal(core, traj)
    assert traj.outcome.status == goals.ABORTED and "truncated" in traj.outcome.fields["error_string"]
    assert core.motion_refusal().startswith("episode over (truncated at step 3)")


def test_realtime_holds_the_last_twist_then_drops_it():
    core, _ = make_core("realtime")
    core.on_twist((0, 0, 0.2), (0, 0, 0), "", wall_s=10.0)
    assert core.model.last_step().step == 0             # realtime: the timer steps, not the command
    z0 = core.model.ee_pose()[0][2]
    core.realtime_tick(10.05)
    core.realtime_tick(10.09)
    z1 = core.model.ee_pose()[0][2]
    core.realtime_tick(10.3)                            # past command_timeout_s: zero twist
    assert z1 > z0 + 0.015 and core.model.ee_pose()[0][2] == pytest.approx(z1, abs=1e-4)


def test_a_gripper_target_is_carried_by_the_status_and_moves_the_fingers_while_twists_move_the_arm():
    core, out = make_core()
    goal = core.start_gripper(0.0)                      # closing: 8 cm at 1 cm per step
    for _ in range(3):
        core.tick()
    step, statuses = core.model.last_step().step, out.statuses
    core.on_gripper_target([0.08])
    assert goal.outcome.status == goals.ABORTED and "preempted by a gripper target" in goal.outcome.message
    assert core.model.last_step().step == step                     # a target costs no control step
    assert out.statuses == statuses + 1 and core.status().gripper_target == 0.08
    gap, z0 = core.model.gripper_opening(), core.model.ee_pose()[0][2]
    for _ in range(3):
        core.on_twist((0, 0, 0.2), (0, 0, 0), "", 0.0)
    assert core.model.gripper_opening() > gap + 0.01 and core.model.ee_pose()[0][2] > z0 + 0.02
    core.on_gripper_target([-1.0])
    assert core.status().gripper_target == 0.0                     # clipped to the closed gap


@pytest.mark.parametrize("values", [[float("nan")], [float("inf")], [0.01, 0.02], []],
                         ids=["nan", "inf", "two", "none"])
def test_a_gripper_target_that_is_not_one_finite_gap_is_refused(values):
    core, out = make_core()
    core.on_gripper_target(values)
    assert out.events[-1].kind == "refused" and "one finite finger gap" in out.events[-1].reason
    assert core.status().gripper_target == pytest.approx(0.08) and core.model.last_step().step == 0


def test_a_gripper_target_is_refused_under_estop():
    core, out = make_core()
    core.on_estop(True)
    core.on_gripper_target([0.0])
    assert "gripper target refused" in out.events[-1].reason and "e-stop" in out.events[-1].reason
    assert core.status().gripper_target == pytest.approx(core.model.gripper_opening())


def test_object_names_are_listed_sorted_as_the_reference_lists_them():
    core, _ = make_core()
    assert core.episode.object_names == ("red_cube_1", "blue_can_1", "plate_1")       # the scene's order
    assert core.status().object_names == ("blue_can_1", "plate_1", "red_cube_1")


LAW = {"tol": 0.005, "step_clip": 0.01, "action_scale": 0.05, "linear_scale": 0.05}


def test_a_cartesian_goal_steps_exactly_the_twists_robos_loop_would_send():
    """Each step of a MoveToTarget goal is the move_to law's twist for the pose before it, run like a world-frame
    twist; the finger target holds from the start; it converges with one more iteration than steps."""
    from pyrua_ros.wire.move_law import ServoLaw, osc_twist

    core, out = make_core()
    start = np.asarray(core.model.ee_pose()[0], dtype=float)
    target = start + np.array([0.03, -0.015, 0.02])
    twin, _ = make_core()        # the same episode driven by robo's loop: its gripper target, then its twists
    twin.on_gripper_target([0.0])
    sent = []
    law = ServoLaw(target, LAW["tol"], step_clip=LAW["step_clip"], action_scale=LAW["action_scale"])
    while (a := law.action(np.asarray(twin.model.ee_pose()[0], dtype=float), twin.model.ee_pose()[1])) is not None:
        v, w = osc_twist(a, (LAW["linear_scale"], 0.1), twin.dt)
        sent.append(v)
        twin.on_twist(v, w, "", 0.0)
    core.check_cartesian_goal(list(target), 0.0, max_steps=80, **LAW)
    goal = core.start_cartesian(list(target), 0.0, max_steps=80, **LAW)
    assert core.gripper_target == 0.0
    outcome = run_goal(core, goal)
    assert outcome.status == goals.SUCCEEDED and outcome.fields["iterations"] == len(sent) + 1
    assert core.model.last_step().step == outcome.fields["step"] == len(sent)
    assert core.state_digest == twin.state_digest     # the same physics, step for step
    cartesian = [f for kind, f in out.feedback if kind == "cartesian"]
    assert [f["linear"] for f in cartesian] == [[float(x) for x in v] for v in sent]
    assert outcome.fields["final_position"] == [float(x) for x in core.model.ee_pose()[0]]


@pytest.mark.parametrize("verb", ["move_pose", "move_to_with_yaw", "rotate_wrist", "rotate_pitch"])
def test_a_goal_with_angles_steps_exactly_the_twists_robos_loop_would_send(verb):
    """The angle laws (move_pose's pitch and yaw, move_to's riding yaw, a rotate verb with no position term) run as
    one goal take the same steps as robo's twist loop of the same law: the same twists, iterations and physics."""
    import math

    from pyrua_ros.driver import cartesian
    from pyrua_ros.rotations import pitch_of, quat_to_matrix, yaw_of
    from pyrua_ros.wire.move_law import ServoLaw, osc_twist

    core, out = make_core()
    pos, quat = core.model.ee_pose()
    r = quat_to_matrix(quat)
    target = np.asarray(pos, dtype=float) + np.array([0.05, -0.03, 0.04])
    law = {"move_pose": ServoLaw(target, 0.004, step_clip=0.01, action_scale=0.05, pitch=pitch_of(r) - 0.3,
                                 yaw=yaw_of(r) + 0.25, pitch_step=0.05, yaw_step=0.04, ori_tol=0.02),
           "move_to_with_yaw": ServoLaw(target, 0.004, step_clip=0.01, action_scale=0.05, yaw=yaw_of(r) - 0.4,
                                        yaw_step=0.05),
           "rotate_wrist": ServoLaw(None, 0.02, yaw=yaw_of(r) + 0.5, yaw_step=0.1, ori_tol=0.02),
           "rotate_pitch": ServoLaw(None, 0.02, pitch=pitch_of(r) + 0.35, pitch_step=0.1, ori_tol=0.02)}[verb]
    scale = (0.05, 0.1)    # the fake arm tracks twists exactly: it declares 0.1 rad per unit action
    twin, _ = make_core()
    twin.on_gripper_target([0.0])
    sent = []
    while len(sent) < 200 and (a := law.action(np.asarray(twin.model.ee_pose()[0], dtype=float),
                                               twin.model.ee_pose()[1])) is not None:
        v, w = osc_twist(a, scale, twin.dt)
        sent.append((v, w))
        twin.on_twist(v, w, "", 0.0)
    assert 3 < len(sent) < 200 and any(np.any(w) for _v, w in sent), "the law turned the hand and converged"
    args = cartesian.arguments(law, linear_scale=scale[0], angular_scale=scale[1], max_steps=200)
    here = [float(x) for x in (law.target if law.target is not None else pos)]
    core.check_cartesian_goal(here, 0.0, **args)
    outcome = run_goal(core, core.start_cartesian(here, 0.0, **args))
    assert outcome.status == goals.SUCCEEDED and outcome.fields["iterations"] == len(sent) + 1
    assert core.state_digest == twin.state_digest
    feedback = [f for kind, f in out.feedback if kind == "cartesian"]
    assert [(f["linear"], f["angular"]) for f in feedback] == [([*map(float, v)], [*map(float, w)]) for v, w in sent]
    assert outcome.fields["final_orientation"] == [float(x) for x in core.model.ee_pose()[1]]
    if law.target is None:     # no position term: the hand turned in place (the zero linear action holds it)
        assert all(f["linear"] == [0.0, 0.0, 0.0] for f in feedback)
    if verb == "move_to_with_yaw":    # the yaw rides along: the goal ends when the position is there
        assert math.isinf(args["ori_tol"])


def test_a_hold_goal_runs_exactly_its_steps_of_zero_twists_as_robos_hold_would():
    """set_gripper's hold as a goal (no position, no angle, never converged): max_steps zero-twist steps carrying
    the goal's finger target, the same physics as robo's gripper target then that many zero twists."""
    from pyrua_ros.driver import cartesian
    from pyrua_ros.wire.move_law import HOLD

    core, out = make_core()
    twin, _ = make_core()
    twin.on_gripper_target([0.0])
    for _ in range(7):
        twin.on_twist((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), "", 0.0)
    here = [float(x) for x in core.model.ee_pose()[0]]
    args = cartesian.arguments(HOLD, linear_scale=0.05, angular_scale=0.1, max_steps=7)
    core.check_cartesian_goal(here, 0.0, **args)
    outcome = run_goal(core, core.start_cartesian(here, 0.0, **args))
    assert outcome.status == goals.SUCCEEDED and outcome.fields["iterations"] == 7 == core.model.last_step().step
    assert core.state_digest == twin.state_digest and core.model.gripper_opening() < 0.08
    assert all(f["linear"] == [0.0] * 3 and f["angular"] == [0.0] * 3 for k, f in out.feedback if k == "cartesian")


def test_a_goal_with_a_bad_angle_is_rejected():
    core, _ = make_core()
    here = [float(x) for x in core.model.ee_pose()[0]]
    base = {**LAW, "max_steps": 10}
    for law, why in (({"yaw": float("nan")}, "target_yaw must be finite"),
                     ({"pitch": 0.1, "pitch_step": 0.0}, "pitch_step must be finite and > 0"),
                     ({"yaw": 0.1, "angular_scale": 0.0}, "angular_scale must be finite and > 0"),
                     ({"ori_tol": -1.0}, "orientation_tolerance must be >= 0")):
        with pytest.raises(GoalRejected, match=why):
            core.check_cartesian_goal(here, 0.08, **base, **law)


def test_a_cartesian_goal_counts_max_steps_and_converges_without_a_step_when_there():
    core, _ = make_core()
    here = [float(x) for x in core.model.ee_pose()[0]]
    at_once = run_goal(core, core.start_cartesian(here, 0.08, max_steps=80, **LAW))
    assert at_once.fields["iterations"] == 1 and core.model.last_step().step == 0
    far = [here[0] + 0.2, here[1], here[2]]
    capped = run_goal(core, core.start_cartesian(far, 0.08, max_steps=3, **LAW))
    assert capped.status == goals.SUCCEEDED and capped.fields["iterations"] == 3 and core.model.last_step().step == 3


def test_one_arm_controller_at_a_time_and_estop_or_cancel_end_a_cartesian_goal():
    core, out = make_core()
    here = [float(x) for x in core.model.ee_pose()[0]]
    hold = {**LAW, "tol": 0.0, "max_steps": 1000}      # never converges: zero twists until stopped
    goal = core.start_cartesian(here, 0.08, **hold)
    core.tick()
    step = core.model.last_step().step
    core.on_twist((0, 0, 0.1), (0, 0, 0), "", 0.0)                  # refused: the goal holds the arm
    assert core.model.last_step().step == step and "Cartesian goal is executing" in out.events[-1].reason
    with pytest.raises(GoalRejected, match="Cartesian goal is executing"):
        core.check_trajectory_goal([ARM[0]], [(1.0, [0.1], [])])
    core.request_cancel(goal)
    core.tick()
    assert goal.outcome.status == goals.CANCELED and goal.outcome.fields["iterations"] == step
    goal = core.start_cartesian(here, 0.08, **hold)
    core.tick()
    core.on_estop(True)
    assert goal.outcome.status == goals.ABORTED and "e-stop" in goal.outcome.message
    with pytest.raises(GoalRejected, match="e-stop"):
        core.check_cartesian_goal(here, 0.08, **hold)
    core.on_estop(False)
    with pytest.raises(GoalRejected, match="step_clip must be finite and > 0"):
        core.check_cartesian_goal(here, 0.08, **{**hold, "step_clip": 0.0})


def test_in_realtime_the_control_timer_steps_a_cartesian_goal_once_per_tick():
    core, _ = make_core("realtime")
    start = [float(x) for x in core.model.ee_pose()[0]]
    goal = core.start_cartesian([start[0], start[1], start[2] + 0.03], 0.08, max_steps=80, **LAW)
    for k in range(1, 4):
        core.realtime_tick(float(k))
        assert core.model.last_step().step == k and goal.outcome is None
    for k in range(4, 40):
        core.realtime_tick(float(k))
    assert goal.outcome.status == goals.SUCCEEDED and goal.outcome.fields["iterations"] == goal.outcome.fields[
        "step"] + 1
