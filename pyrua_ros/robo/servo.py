"""The Cartesian servo behind the motion verbs: PyRUA-Lean's LIBERO primitives, one control step per twist.

``CartesianServo`` reproduces the reference's scripted OSC servos (facts: PYRUALEAN-CONTRACT.md 3.9 and RPent's
LIBERO primitive driver): every loop iteration reads the pose, stops when within tolerance, else computes the
OSC action the reference computes (the law of :mod:`pyrua_ros.wire.move_law`) and sends it as one twist. The
action becomes a twist with the driver's ``osc_action_scale`` (LIBERO's OSC: ``a * 0.05 m`` and
``a * 0.5 rad`` per control step), which the simulator maps back exactly; a driver that tracks twists exactly
declares 0.1 rad, so the reference's rotation command stays stable there. The gripper command (the action's 7th
component) rides on the same steps through the driver's gripper target: a motion's ``gripper`` value moves the
fingers while the arm moves, ``set_gripper(g, steps)`` is exactly ``steps`` steps of the arm holding, as in the
reference; a driver without a gripper target gets a GripperCommand goal before the motion instead. Reported
numbers are rounded as the reference rounds them (positions, distances and angles to 4 decimals) and
``steps_used`` counts loop iterations as the reference does (a move that converged counts its final check: one
more than the control steps it used).

``move_to``, ``move_pose`` and the rotations (each a :class:`~pyrua_ros.wire.move_law.ServoLaw`) run as one
``MoveToTarget`` goal when the driver serves it (``backend.move_to_target``): the driver runs the same iterations
with the same twists through the same safety filter, one round trip per move instead of one per step; a driver
without it gets the twist stream. Both give the same control steps, bit for bit.

It knows nothing about ledgers or argument casting: a verb of ``LiberoRobot`` casts its arguments, then runs one
of these methods inside ``CallRunner.stateful``; values the servo cannot execute raise ``ToolError`` here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pyrua_ros.robo import arguments as check
from pyrua_ros.robo.backend import BackendRefused, EePose, RobotBackend
from pyrua_ros.robo.calls import CallRunner
from pyrua_ros.robo.results import Gripper, Move, MovePose, Release, Rotation
from pyrua_ros.rotations import pitch_of, quat_to_matrix, wrap_angle, yaw_of
from pyrua_ros.wire.move_law import HOLD, ServoLaw, osc_twist

GRIPPER_OPEN_WIDTH_M = 0.08
REPORT_DECIMALS = 4             # positions, distances and angles in results, as the reference reports them
OPEN, CLOSE = -1.0, 1.0


def _round3(v) -> tuple[float, float, float]:
    return tuple(round(float(x), REPORT_DECIMALS) for x in v[:3])


def _round(x: float) -> float:
    return round(float(x), REPORT_DECIMALS)


def gripper_gap(g: float) -> float:
    """The finger-gap target [m] of gripper command ``g`` (-1 open = 0.08 m, +1 closed = 0); LIBERO's driver maps
    it back to exactly ``g`` as the OSC gripper action."""
    return (1.0 - float(g)) / 2.0 * GRIPPER_OPEN_WIDTH_M


class CartesianServo:
    """Motion execution on ``backend``; ``calls`` supplies the stop checks and the episode flags."""

    def __init__(self, backend: RobotBackend, calls: CallRunner) -> None:
        self.backend = backend
        self.calls = calls
        self.gripper_cmd = OPEN

    # -- one step -----------------------------------------------------------------------------------------
    def act(self, tool: str, action: np.ndarray) -> EePose | None:
        """One control step of a 6-D OSC action (position, rotation; each in [-1, 1]) as a twist; None when the
        driver refused because the episode ended (the loop then stops)."""
        self.calls.check_stop()
        linear, angular = osc_twist(action, self.backend.osc_action_scale, self.backend.control_period_s)
        try:
            return self.backend.servo(linear, angular)
        except BackendRefused as exc:
            return self.calls.refused(tool, exc)

    def loop(self, tool: str, action: Callable[[EePose], np.ndarray | None], max_steps: int) -> tuple[EePose, int]:
        """The reference's servo loop: up to ``max_steps`` iterations; each reads the pose and either stops
        (``action`` returns None: converged) or runs one action; the episode's end stops it too. Returns the last
        pose and the iterations counted (the converged check included)."""
        pose = self.backend.ee_pose()
        iterations = 0
        for _ in range(max_steps):
            iterations += 1
            a = action(pose)
            if a is None:
                break
            new = self.act(tool, a)
            if new is None:
                break
            pose = new
            if any(self.calls.flags()):
                break
        return pose, iterations

    def hold(self, tool: str, steps: int, stop: Callable[[], bool] | None = None) -> int:
        """Zero actions (the arm holds, the gripper command stays) for ``steps`` steps or until ``stop()``;
        returns the steps run."""
        done = 0
        for _ in range(steps):
            if self.act(tool, np.zeros(6)) is None:
                break
            done += 1
            if any(self.calls.flags()) or (stop is not None and stop()):
                break
        return done

    # -- gripper ------------------------------------------------------------------------------------------
    def carry_gripper(self, tool: str, g: float) -> bool:
        """Make every following step carry gripper command ``g``, as the reference's 7th action component (the
        driver's gripper target; no step of its own). False when the driver has no gripper target, or refused it
        because the episode ended (the caller's loop then stops by the latched flags)."""
        target = getattr(self.backend, "gripper_target", None)
        if target is None:
            return False
        self.calls.check_stop()
        try:
            carried = bool(target(gripper_gap(g)))
        except BackendRefused as exc:
            self.calls.refused(tool, exc)
            return False
        if carried:
            self.gripper_cmd = g
        return carried

    def send_gripper(self, tool: str, g: float) -> int:
        """Send a GripperCommand goal for command ``g``; returns the control steps it used."""
        self.calls.check_stop()
        step0 = self.calls.env_step()
        try:
            outcome = self.backend.gripper(gripper_gap(g))
        except BackendRefused as exc:
            # a goal the driver aborted because the episode ended mid-goal (e.g. release fired the task check)
            # still used the steps it ran: count them, so steps agree with the ledger's env_steps
            self.calls.refused(tool, exc)
            return max(0, self.calls.env_step() - step0)
        self.gripper_cmd = g
        return int(outcome.steps)

    def hold_gripper(self, tool: str, g: float) -> int:
        """Make the motion that follows carry ``g``: the driver's gripper target (the fingers then move with the
        arm, no step of their own), else a GripperCommand goal before the motion; returns the steps that took."""
        if self.carry_gripper(tool, g) or any(self.calls.flags()):
            return 0
        return self.send_gripper(tool, g) if g != self.gripper_cmd else 0

    # -- motions ------------------------------------------------------------------------------------------
    def run_law(self, tool: str, law: ServoLaw, g: float, max_steps: int) -> tuple[EePose, int]:
        """Run ``law`` carrying gripper command ``g``: as one driver goal when the backend has it, else the twist
        loop; (last pose, iterations counted). Both take the same control steps, bit for bit."""
        ran = self.goal_run(tool, law, g, max_steps)
        if ran is None:
            self.hold_gripper(tool, g)
            ran = self.loop(tool, lambda pose: law.action(pose.pos, pose.quat_xyzw), max_steps)
        return ran

    def move_to(self, target: np.ndarray, g: float, *, tol: float, step_clip: float, max_steps: int,
                target_yaw: float | None, yaw_step_clip: float, action_scale: float) -> Move:
        tool = "move_to"
        check.tolerance(tool, "tol", tol, "m")
        check.positive(tool, "step_clip", step_clip, "m per step")
        check.positive(tool, "action_scale", action_scale, "m per unit action")
        check.count(tool, "max_steps", max_steps)
        if target_yaw is not None:
            check.finite(tool, "target_yaw", target_yaw, "rad")
            check.positive(tool, "yaw_step_clip", yaw_step_clip, "rad per step")
        law = ServoLaw(target, tol, step_clip=step_clip, action_scale=action_scale, yaw=target_yaw,
                       yaw_step=yaw_step_clip)   # (the yaw rides along: ori_tol inf)
        pose, used = self.run_law(tool, law, g, max_steps)
        dist = _round(np.linalg.norm(target - pose.pos))
        term, trunc = self.calls.flags()
        return Move(target_xyz=(float(target[0]), float(target[1]), float(target[2])), final_eef_pos=_round3(pose.pos),
                    final_dist_m=dist, reached=dist <= tol, steps_used=used, max_steps=max_steps, terminated=term,
                    truncated=trunc)

    def goal_run(self, tool: str, law: ServoLaw, g: float, max_steps: int) -> tuple[EePose, int] | None:
        """``law``'s loop run by the driver as one goal: (last pose, iterations counted), or None when the backend
        or driver has no ``MoveToTarget`` action (the caller streams twists). The goal carries gripper command
        ``g`` from its start, as the twist loop's gripper target does."""
        move = getattr(self.backend, "move_to_target", None)
        if move is None:
            return None
        self.calls.check_stop()
        try:
            outcome = move(law, gripper_gap(g), max_steps=max_steps)
        except BackendRefused as exc:
            self.calls.refused(tool, exc)     # raises unless the episode had ended: the loop's first step refused
            return self.backend.ee_pose(), 1
        if outcome is None:
            return None
        self.gripper_cmd = g
        # (the goal's result carries no stamp; nothing here reads the last pose's)
        return EePose(pos=outcome.final_pos, quat_xyzw=outcome.final_quat, stamp=math.nan), outcome.iterations

    def move_pose(self, target: np.ndarray, g: float, *, target_pitch: float | None, target_yaw: float | None,
                  step_clip: float, pitch_step: float, yaw_step: float, tol: float, ori_tol: float, max_steps: int,
                  action_scale: float) -> MovePose:
        tool = "move_pose"
        for name, value in (("step_clip", step_clip), ("pitch_step", pitch_step), ("yaw_step", yaw_step),
                            ("action_scale", action_scale)):
            check.positive(tool, name, value, "per step")
        check.tolerance(tool, "tol", tol, "m")
        check.tolerance(tool, "ori_tol", ori_tol, "rad")
        check.count(tool, "max_steps", max_steps)
        check.finite(tool, "target_pitch", target_pitch, "rad")
        check.finite(tool, "target_yaw", target_yaw, "rad")
        law = ServoLaw(target, tol, step_clip=step_clip, action_scale=action_scale, pitch=target_pitch,
                       yaw=target_yaw, pitch_step=pitch_step, yaw_step=yaw_step, ori_tol=ori_tol)
        pose, used = self.run_law(tool, law, g, max_steps)
        dist = _round(np.linalg.norm(target - pose.pos))
        term, trunc = self.calls.flags()
        return MovePose(final_eef_pos=_round3(pose.pos), final_dist_m=dist,
                        final_pitch=_round(pitch_of(quat_to_matrix(pose.quat_xyzw))), reached=dist <= tol,
                        steps_used=used, terminated=term, truncated=trunc)

    def rotate(self, tool: str, axis: str, target: float | None, delta: float | None, g: float, *, max_steps: int,
               tol: float, step_clip: float) -> Rotation:
        check.finite(tool, f"target_{axis}", target, "rad")
        check.finite(tool, f"delta_{axis}", delta, "rad")
        check.tolerance(tool, "tol", tol, "rad")
        check.positive(tool, "step_clip", step_clip, "rad per step")
        check.count(tool, "max_steps", max_steps)
        measure = yaw_of if axis == "yaw" else pitch_of

        def law_from_here() -> tuple[float, float, ServoLaw]:
            start = measure(quat_to_matrix(self.backend.ee_pose().quat_xyzw))
            goal = float(target) if target is not None else start + float(delta)
            angle = {"yaw": goal, "yaw_step": step_clip} if axis == "yaw" else {"pitch": goal, "pitch_step": step_clip}
            return start, goal, ServoLaw(None, tol, ori_tol=tol, **angle)   # (no position term: the arm holds)

        start, goal, law = law_from_here()
        ran = self.goal_run(tool, law, g, max_steps)
        if ran is None:
            self.hold_gripper(tool, g)
            start, goal, law = law_from_here()   # (after the gripper goal's own steps, on a driver that needs one)
            ran = self.loop(tool, lambda pose: law.action(pose.pos, pose.quat_xyzw), max_steps)
        pose, used = ran
        final = measure(quat_to_matrix(pose.quat_xyzw))
        err = _round(wrap_angle(goal - final))
        term, trunc = self.calls.flags()
        return Rotation(start=_round(start), target=_round(goal), final=_round(final), final_err=err,
                        reached=abs(err) <= tol, steps_used=used, terminated=term, truncated=trunc)

    def set_gripper(self, g: float, steps: int) -> Gripper:
        """The reference's set_gripper: ``steps`` steps of the arm holding with gripper command ``g`` (fewer when
        the episode ends); ``Gripper.steps`` reports ``steps``, as the reference does."""
        check.count("set_gripper", "steps", steps)
        tool = "set_gripper"
        held = self.goal_run(tool, HOLD, g, steps) is not None   # the driver holds the arm for the steps: one goal
        if not held and self.carry_gripper(tool, g):
            self.hold(tool, steps)
        elif not held and not any(self.calls.flags()):   # a driver without a gripper target: a goal, then the rest
            used = self.send_gripper(tool, g)
            if used < steps:
                self.hold(tool, steps - used)
        term, trunc = self.calls.flags()
        return Gripper(gripper=g, steps=steps, terminated=term, truncated=trunc)

    def release(self, max_steps: int) -> Release:
        check.count("release", "max_steps", max_steps)
        start = float(self.backend.gripper_opening())
        peak = [start]

        def opened() -> bool:
            peak[0] = max(peak[0], float(self.backend.gripper_opening()))
            return False

        if self.carry_gripper("release", OPEN):
            used = 0
        else:
            used = 0 if any(self.calls.flags()) else min(max_steps, self.send_gripper("release", OPEN))
        opened()
        if used < max_steps and not any(self.calls.flags()):
            used += self.hold("release", max_steps - used, stop=opened)
        final = float(self.backend.gripper_opening())
        term, trunc = self.calls.flags()
        return Release(steps_used=used, start_gripper_opening=_round(start),
                       peak_gripper_opening=_round(max(peak[0], final)), final_gripper_opening=_round(final),
                       terminated=term, truncated=trunc)

    def osc_action(self, tool: str, action: np.ndarray) -> tuple[EePose | None, int]:
        """Execute one 7-D OSC action (a VLA action) as one step carrying its gripper command (by sign); returns
        the pose after it (None when the episode ended) and the steps it took (a driver without a gripper target
        adds its goal's steps when the sign changes)."""
        g = CLOSE if action[6] > 0 else OPEN
        used = self.hold_gripper(tool, g)
        if any(self.calls.flags()):
            return None, used
        new = self.act(tool, np.asarray(action[:6], dtype=float))
        return new, used + (new is not None)
