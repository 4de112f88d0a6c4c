"""Shared bodies of the robo motion tests, run against every driver that serves the driver surface.

``test_robo_ros.py`` runs them against the real LIBERO-PRO sim node and ``test_robo_fake_arm.py`` against the
kinematic fake arm, through the same ``RosBackend`` + ``RobotHost`` an episode uses. Each case takes a
:class:`Rig` (one backend on one driver node, and the few facts about its scene a case needs) and uses only the
public ``robo`` API, the ledger, and the backend's status/pose (to check that the robot really did, or did not,
move). Units: metres, radians, control steps.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

import numpy as np
import pytest

from pyrua_ros.examples import run_program
from pyrua_ros.robo import results as R
from pyrua_ros.robo.backend import BackendRefused
from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.robo.host import RobotHost
from pyrua_ros.robo.libero import MAX_PLANAR_MOVE_M, LiberoRobot, libero_host
from pyrua_ros.rotations import wrap_angle

OPEN_GAP_M = 0.06        # finger gap above this = open (fully open ~0.08)
CLOSED_GAP_M = 0.012     # finger gap below this after closing on nothing = closed


@dataclasses.dataclass
class Rig:
    """One driver node seen through one RosBackend.

    ``object_prompt`` names the object the rig's task carries; ``pick(robo)`` segments it and returns
    ``(segment, grasp_xyz)``;
    ``solve(robo)`` runs the example program that solves the task from its init state (its ``run`` function).
    """

    backend: object
    suite: str
    task: int
    max_episode_steps: int
    object_prompt: str
    pick: Callable[[LiberoRobot], tuple[R.Segment, list[float]]]
    solve: Callable[[LiberoRobot], None]
    host: RobotHost | None = None

    def reset(self, max_episode_steps: int | None = None) -> LiberoRobot:
        """Reset the episode (official init state, seed 0) and return a fresh robo on it."""
        self.backend.reset(self.suite, self.task, 0, max_episode_steps or self.max_episode_steps)
        self.host = libero_host(self.backend, primitives="no-vla")
        return self.host.robo

    @property
    def robo(self) -> LiberoRobot:
        return self.host.robo

    def env_step(self) -> int:
        return int(self.backend.status().step)

    def eef(self) -> np.ndarray:
        return np.asarray(self.backend.ee_pose().pos, dtype=float)


def _last(rig: Rig, tool: str):
    """The latest ledger record of ``tool``."""
    return next(r for r in reversed(rig.host.ledger.records) if r.tool == tool)


def _iterations_match(result, env_steps: int, budget: int) -> None:
    """PyRUA-Lean counts a servo's loop iterations: a loop that stopped by converging before its budget counted the
    final check too (one more than the control steps it ran); otherwise iterations == control steps."""
    if result.steps_used < budget and not (result.terminated or result.truncated):
        assert result.steps_used == env_steps + 1, (result, env_steps)
    else:
        assert result.steps_used == env_steps, (result, env_steps)


def _assert_ledgered_motion(rig: Rig, tool: str, step0: int, result) -> None:
    rec = _last(rig, tool)
    assert rec.ok and rec.stateful and rec.error is None
    assert rec.env_steps == rig.env_step() - step0 > 0
    assert rec.summary["terminated"] is result.terminated and rec.summary["truncated"] is result.truncated


# ---------------------------------------------------------------------------------------------- cases
def case_move_to(rig: Rig) -> None:
    """move_to reaches a point 8 cm away in a straight line, holds the orientation, records one step."""
    robo = rig.reset()
    s0 = robo.state()
    step0 = rig.env_step()
    target = [s0.eef_pos[0] + 0.05, s0.eef_pos[1] - 0.04, s0.eef_pos[2] - 0.05]
    move = robo.move_to(target)
    assert type(move) is R.Move
    assert move.reached and move.final_dist_m <= 0.012 and not move.terminated and not move.truncated
    assert move.target_xyz == pytest.approx(target) and move.max_steps == 80
    # reported numbers are rounded to 4 decimals, as the reference reports them
    assert np.allclose(move.final_eef_pos, rig.eef(), atol=5e-5), "the result is the pose the arm is at"
    assert move.final_dist_m == round(move.final_dist_m, 4)
    # both rounded to 4 decimals: the pose's three coordinates and the distance (up to ~1.4e-4 apart)
    assert np.linalg.norm(np.array(move.final_eef_pos) - target) == pytest.approx(move.final_dist_m, abs=1.5e-4)
    assert 2 <= rig.env_step() - step0 <= 80   # 5 cm at 2.5 cm per step and axis: 2 steps when tracked exactly
    _iterations_match(move, rig.env_step() - step0, 80)
    s1 = robo.state()
    assert s1.step == 1 and np.allclose(s1.eef_pos, move.final_eef_pos, atol=5e-5)
    assert abs(wrap_angle(s1.eef_yaw - s0.eef_yaw)) < 0.05 and abs(s1.eef_pitch - s0.eef_pitch) < 0.05
    _assert_ledgered_motion(rig, "move_to", step0, move)
    # a budget too small to arrive is a result, not an error
    short = robo.move_to([target[0], target[1], target[2] + 0.10], max_steps=2)
    assert short.steps_used == 2 and not short.reached and short.final_dist_m > 0.03


def case_move_pose(rig: Rig) -> None:
    """move_pose moves 4 cm down while tilting 0.25 rad; reached is position-only, final_pitch is measured."""
    robo = rig.reset()
    s0 = robo.state()
    step0 = rig.env_step()
    target = [s0.eef_pos[0] + 0.03, s0.eef_pos[1], s0.eef_pos[2] - 0.04]
    mp = robo.move_pose(target, target_pitch=0.25)
    assert type(mp) is R.MovePose
    assert mp.reached and mp.final_dist_m <= 0.012
    _iterations_match(mp, rig.env_step() - step0, 150)
    assert abs(mp.final_pitch - 0.25) <= 0.06
    s1 = robo.state()
    assert s1.eef_pitch == pytest.approx(mp.final_pitch, abs=1e-4)
    assert abs(wrap_angle(s1.eef_yaw - s0.eef_yaw)) < 0.08
    _assert_ledgered_motion(rig, "move_pose", step0, mp)


def case_rotate_wrist(rig: Rig) -> None:
    """rotate_wrist turns 0.4 rad about world z in place (delta), then back to the start yaw (target)."""
    robo = rig.reset()
    s0 = robo.state()
    step0 = rig.env_step()
    rot = robo.rotate_wrist(delta_yaw=0.4, gripper=robo.OPEN)
    assert type(rot) is R.Rotation
    assert rot.start == pytest.approx(s0.eef_yaw, abs=0.01) and rot.target == pytest.approx(
        wrap_angle(s0.eef_yaw + 0.4), abs=0.01)
    assert rot.reached and abs(rot.final_err) <= 0.02 and rot.final_err == pytest.approx(
        wrap_angle(rot.target - rot.final), abs=2e-4)
    _iterations_match(rot, rig.env_step() - step0, 40)
    s1 = robo.state()
    assert s1.eef_yaw == pytest.approx(rot.final, abs=1e-4)
    # the reference sends no position command while it turns (OSC holds the pose it has): a small drift is its own
    assert np.linalg.norm(np.subtract(s1.eef_pos, s0.eef_pos)) < 0.05, "position is about kept"
    # LIBERO's OSC at the reference's 0.5 rad per unit tilts the hand a little while it turns (its own behaviour)
    print(f"rotate_wrist 0.4 rad: pitch change {s1.eef_pitch - s0.eef_pitch:.3f} rad")
    assert abs(s1.eef_pitch - s0.eef_pitch) < 0.15
    _assert_ledgered_motion(rig, "rotate_wrist", step0, rot)
    back = robo.rotate_wrist(target_yaw=s0.eef_yaw, gripper=robo.OPEN)
    assert back.reached and abs(wrap_angle(robo.state().eef_yaw - s0.eef_yaw)) <= 0.03


def case_rotate_pitch(rig: Rig) -> None:
    """rotate_pitch tilts 0.3 rad about world x in place, keeping yaw."""
    robo = rig.reset()
    s0 = robo.state()
    step0 = rig.env_step()
    rot = robo.rotate_pitch(delta_pitch=0.3, gripper=robo.OPEN)
    assert type(rot) is R.Rotation
    assert rot.reached and abs(rot.final_err) <= 0.02
    assert rot.target == pytest.approx(s0.eef_pitch + 0.3, abs=0.01)
    _iterations_match(rot, rig.env_step() - step0, 40)
    s1 = robo.state()
    assert s1.eef_pitch == pytest.approx(rot.final, abs=1e-4) and s1.eef_pitch > s0.eef_pitch + 0.25
    assert abs(wrap_angle(s1.eef_yaw - s0.eef_yaw)) < 0.06
    assert np.linalg.norm(np.subtract(s1.eef_pos, s0.eef_pos)) < 0.02
    _assert_ledgered_motion(rig, "rotate_pitch", step0, rot)


def case_set_gripper_and_release(rig: Rig) -> None:
    """set_gripper closes the fingers on nothing (gap ~0) holding the arm still; release opens them again."""
    robo = rig.reset()
    s0 = robo.state()
    assert s0.gripper_opening > OPEN_GAP_M
    step0 = rig.env_step()
    g = robo.set_gripper(robo.CLOSE, steps=15)
    assert type(g) is R.Gripper
    # exactly its steps, as the reference's set_gripper (the fingers need ~10-15 steps to close on nothing)
    assert g.gripper == 1.0 and g.steps == 15 and rig.env_step() - step0 == 15 and not g.terminated
    s1 = robo.state()
    assert s1.gripper_opening < CLOSED_GAP_M
    assert np.linalg.norm(np.subtract(s1.eef_pos, s0.eef_pos)) < 0.01, "the arm holds still"
    _assert_ledgered_motion(rig, "set_gripper", step0, g)
    step1 = rig.env_step()
    rel = robo.release(max_steps=20)
    assert type(rel) is R.Release
    assert rel.start_gripper_opening == pytest.approx(s1.gripper_opening, abs=2e-3)
    assert rel.final_gripper_opening > OPEN_GAP_M and rel.peak_gripper_opening >= rel.final_gripper_opening - 1e-6
    assert rel.steps_used == rig.env_step() - step1 <= 20 and not rel.terminated
    assert robo.state().gripper_opening == pytest.approx(rel.final_gripper_opening, abs=2e-3)
    _assert_ledgered_motion(rig, "release", step1, rel)


def case_refusals_before_dispatch(rig: Rig) -> None:
    """Bad arguments raise ValueError before anything is sent: no env step, no motion, a refused ledger entry."""
    robo = rig.reset()
    s0 = robo.state()
    x, y, z = s0.eef_pos
    far = MAX_PLANAR_MOVE_M + 0.005
    bad = [
        (lambda: robo.move_to([math.nan, y, z]), "finite"),
        (lambda: robo.move_to([x, y]), "3 finite"),
        (lambda: robo.move_to([x, y, z], gripper=1.5), "[-1, 1]"),
        (lambda: robo.move_to([x + far, y, z]), "split into waypoints"),
        (lambda: robo.move_to([x + far * 0.6, y + far * 0.8, z]), "split into waypoints"),
        (lambda: robo.move_pose([x, y - far, z], target_pitch=0.1), "split into waypoints"),
        (lambda: robo.move_pose([x, y, z], gripper=-2), "[-1, 1]"),
        (lambda: robo.rotate_wrist(target_yaw=0.0, delta_yaw=0.1), "exactly one"),
        (lambda: robo.rotate_wrist(), "exactly one"),
        (lambda: robo.set_gripper(2.0), "[-1, 1]"),
    ]
    step0, pose0, n0 = rig.env_step(), rig.eef(), len(rig.host.ledger)
    for i, (call, text) in enumerate(bad):
        with pytest.raises(ValueError, match=re.escape(text)):
            call()
        rec = rig.host.ledger.records[-1]
        assert not rec.ok and not rec.stateful and rec.env_steps == 0 and rec.error.startswith("ValueError"), (i, rec)
    assert len(rig.host.ledger) >= n0 + len(bad)
    # values the reference passes through to its backend are refused on the robot side, readable as ToolError
    passed_through = [
        (lambda: robo.move_to([x, y, z], max_steps=0), "move_to: max_steps must be at least 1"),
        (lambda: robo.rotate_pitch(delta_pitch=math.inf), "rotate_pitch: delta_pitch must be a finite number"),
        (lambda: robo.set_gripper(robo.CLOSE, steps=0), "set_gripper: steps must be at least 1"),
        (lambda: robo.release(max_steps=-3), "release: max_steps must be at least 1"),
    ]
    for i, (call, text) in enumerate(passed_through):
        with pytest.raises(ToolError, match=re.escape(text)):
            call()
        rec = rig.host.ledger.records[-1]
        assert not rec.ok and rec.env_steps == 0 and rec.error.startswith("ToolError"), (i, rec)
    assert rig.env_step() == step0 and np.array_equal(rig.eef(), pose0), "nothing was dispatched"
    assert robo.state().step == 0 and rig.host.ledger.env_steps() == 0
    # exactly at the limit is allowed (the check is > 0.30 m + 1e-6), and is a normal motion
    ok = robo.move_to([x + MAX_PLANAR_MOVE_M - 0.001, y, z], max_steps=1)
    assert ok.steps_used == 1


def _assert_frozen(rig: Rig, reason: str) -> None:
    """Every motion call raises EpisodeFinished(reason) before dispatch; the arm and the step counter stay put."""
    robo = rig.robo
    step0, pose0 = rig.env_step(), rig.eef()
    x, y, z = pose0
    calls = [lambda: robo.move_to([x, y, z + 0.05]), lambda: robo.move_pose([x, y, z - 0.03], target_pitch=0.2),
             lambda: robo.rotate_wrist(delta_yaw=0.3), lambda: robo.rotate_pitch(delta_pitch=0.2),
             lambda: robo.set_gripper(robo.CLOSE), lambda: robo.release()]
    for call in calls:
        with pytest.raises(EpisodeFinished) as info:
            call()
        assert info.value.reason == reason
        rec = rig.host.ledger.records[-1]
        assert not rec.ok and rec.env_steps == 0 and rec.error.startswith("EpisodeFinished")
    assert not isinstance(EpisodeFinished(reason), Exception), "policy code cannot swallow it"
    # the driver itself refuses a twist sent past robo's guard
    with pytest.raises(BackendRefused) as refused:
        rig.backend.servo(np.array([0.0, 0.0, 0.2]), np.zeros(3))
    assert refused.value.reason == reason
    assert rig.env_step() == step0 and np.linalg.norm(rig.eef() - pose0) < 1e-9, "the arm did not move"
    # read-only calls keep working
    state = robo.state()
    assert (state.terminated, state.truncated)[reason == "truncated"] is True
    assert robo.image("agentview", resolution="low").shape == (256, 256, 3)


def case_truncation_freezes_motion(rig: Rig) -> None:
    """With a 6-step budget a long move ends truncated; from then on motion is refused and the arm stays."""
    robo = rig.reset(max_episode_steps=6)
    s0 = robo.state()
    move = robo.move_to([s0.eef_pos[0] + 0.2, s0.eef_pos[1], s0.eef_pos[2] - 0.1])
    assert move.truncated and not move.terminated and not move.reached
    assert move.steps_used == 6 == rig.env_step()
    status = rig.backend.status()
    assert status.truncated and status.max_episode_steps == 6
    assert robo.state().truncated and not robo.done
    _assert_frozen(rig, "truncated")


def case_success_freezes_motion(rig: Rig) -> None:
    """The example program solves the task: the benchmark check latches, robo.done, and motion is refused."""
    robo = rig.reset()
    # the benchmark may count the task solved before the program's last motion call (it depends on the CPU's
    # floating point): that call then ends the program with EpisodeFinished("terminated")
    assert run_program(rig.solve, robo) in ("returned", "terminated")
    assert robo.done and rig.backend.status().success and rig.backend.status().terminated
    assert robo.state().terminated
    stateful = [r for r in rig.host.ledger.records if r.stateful]
    assert len(stateful) == rig.host.ledger.stateful_calls() > 3 and stateful[-1].summary["terminated"] is True
    assert rig.host.ledger.env_steps() == rig.env_step(), "ledgered env steps add up to the simulator's count"
    for rec in stateful:   # each result's own count is the simulator's, plus a converged servo's final check
        if "steps_used" in rec.summary:
            assert rec.summary["steps_used"] - rec.env_steps in (0, 1), rec
    _assert_frozen(rig, "terminated")


def case_open_gripper_carry_drops(rig: Rig) -> None:
    """Grasp and lift with CLOSE; a move with the default gripper (-1) opens the hand and the object falls."""
    robo = rig.reset()
    seg0, (gx, gy, gz) = rig.pick(robo)
    assert seg0.found and seg0.step == 0
    robo.move_to([gx, gy, gz + 0.10], robo.OPEN)
    robo.move_to([gx, gy, gz], robo.OPEN, step_clip=0.015, tol=0.008)
    robo.set_gripper(robo.CLOSE, steps=12)
    lift = robo.move_to([gx, gy, gz + 0.10], robo.CLOSE)
    held = robo.state()
    assert CLOSED_GAP_M * 0.2 < held.gripper_opening < OPEN_GAP_M, f"not holding: gap {held.gripper_opening}"
    lifted = robo.segment(rig.object_prompt)
    assert lifted.found and lifted.world_xyz[2] > seg0.world_xyz[2] + 0.05, (seg0.world_xyz, lifted.world_xyz)
    # the carry with the default gripper value drops it
    carry = robo.move_to([lift.final_eef_pos[0], lift.final_eef_pos[1] - 0.05, lift.final_eef_pos[2]])
    assert carry.reached
    assert robo.state().gripper_opening > held.gripper_opening + 0.01, "the fingers opened during the carry"
    robo.move_to([carry.final_eef_pos[0] - 0.08, carry.final_eef_pos[1], carry.final_eef_pos[2] + 0.03])
    fallen = robo.segment(rig.object_prompt)
    assert fallen.found and abs(fallen.world_xyz[2] - seg0.world_xyz[2]) < 0.03, (seg0.world_xyz, fallen.world_xyz)
    assert not robo.done


CASES = [case_move_to, case_move_pose, case_rotate_wrist, case_rotate_pitch, case_set_gripper_and_release,
         case_refusals_before_dispatch, case_truncation_freezes_motion, case_success_freezes_motion,
         case_open_gripper_carry_drops]
