"""The Cartesian servo behind the motion verbs: twist loops on ``/ee_pose`` feedback and gripper commands.

``CartesianServo`` turns a motion request (a target position, a yaw or pitch goal, a gripper command) into a
stream of one-control-step twists on the backend, each computed from the pose the previous step produced, and
returns the typed result. It knows nothing about ledgers or argument checking: a verb of ``LiberoRobot`` checks
its arguments, then runs one of these methods inside ``CallRunner.stateful``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pyrua_ros.robo.backend import BackendRefused, EePose, RobotBackend
from pyrua_ros.robo.calls import CallRunner
from pyrua_ros.robo.geometry import clip, matrix, pitch_of, rot_z, rotation_vector, wrap_angle, yaw_of
from pyrua_ros.robo.results import Gripper, Move, MovePose, Release, Rotation

GRIPPER_OPEN_WIDTH_M = 0.08
OSC_POS_SCALE_M = 0.05          # metres per unit OSC action (the sim maps a = v * dt / 0.05)
OSC_ROT_SCALE_RAD = 0.5         # radians per unit OSC action (a = w * dt / 0.5)
ORIENTATION_HOLD_GAIN = 0.5     # fraction of the orientation error corrected per step while holding
YAW_TOL_RAD = 0.02              # move_to with target_yaw also waits for the yaw to settle within this
OPEN, CLOSE = -1.0, 1.0

Twist = tuple[np.ndarray, np.ndarray]


def _t3(v) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


class CartesianServo:
    """Motion execution on ``backend``; ``calls`` supplies the stop checks and the episode flags."""

    def __init__(self, backend: RobotBackend, calls: CallRunner) -> None:
        self.backend = backend
        self.calls = calls
        self.gripper_cmd = OPEN

    # -- one step -----------------------------------------------------------------------------------------
    def step(self, tool: str, linear: np.ndarray, angular: np.ndarray) -> EePose | None:
        """One twist; None when the driver refused because the episode ended (the loop then stops)."""
        self.calls.check_stop()
        try:
            return self.backend.servo(np.asarray(linear, float), np.asarray(angular, float))
        except BackendRefused as exc:
            return self.calls.refused(tool, exc)

    def loop(self, tool: str, twist: Callable[[EePose], Twist], arrived: Callable[[EePose], bool], max_steps: int,
             steps: int) -> tuple[EePose, int]:
        """Step ``twist(pose)`` until ``arrived(pose)``, ``max_steps`` steps, or the episode ends."""
        pose = self.backend.ee_pose()
        while steps < max_steps and not arrived(pose):
            linear, angular = twist(pose)
            new = self.step(tool, linear, angular)
            if new is None:
                break
            pose, steps = new, steps + 1
            term, trunc = self.calls.flags()
            if term or trunc:
                break
        return pose, steps

    def hold_position(self, tool: str, steps: int, used: int,
                      stop: Callable[[EePose], bool] | None = None) -> tuple[EePose, int]:
        """Hold the current pose for up to ``steps`` steps (``used`` already counted), or until ``stop``."""
        pose0 = self.backend.ee_pose()
        r0 = matrix(pose0.quat_xyzw)

        def twist(pose: EePose) -> Twist:
            return self.linear(pose0.pos - pose.pos, 0.01, OSC_POS_SCALE_M), self.hold_orientation(
                r0, matrix(pose.quat_xyzw))

        return self.loop(tool, twist, stop or (lambda _: False), steps, used)

    # -- gripper ------------------------------------------------------------------------------------------
    def send_gripper(self, tool: str, g: float) -> int:
        """Send a GripperCommand goal for command ``g``; returns the control steps it used."""
        self.calls.check_stop()
        step0 = self.calls.env_step()
        try:
            outcome = self.backend.gripper((1.0 - g) / 2.0 * GRIPPER_OPEN_WIDTH_M)
        except BackendRefused as exc:
            # a goal the driver aborted because the episode ended mid-goal (e.g. release fired the task check)
            # still used the steps it ran: count them, so steps_used agrees with the ledger's env_steps
            self.calls.refused(tool, exc)
            return max(0, self.calls.env_step() - step0)
        self.gripper_cmd = g
        return int(outcome.steps)

    def hold_gripper(self, tool: str, g: float) -> int:
        """Command ``g`` unless it is already held; returns the steps that took."""
        return self.send_gripper(tool, g) if g != self.gripper_cmd else 0

    # -- twist building blocks ----------------------------------------------------------------------------
    def linear(self, delta: np.ndarray, step_clip: float, action_scale: float) -> np.ndarray:
        norm = float(np.linalg.norm(delta))
        if norm > step_clip:
            delta = delta * (step_clip / norm)
        return delta * (OSC_POS_SCALE_M / action_scale) / self.backend.control_period_s

    def hold_orientation(self, r_ref: np.ndarray, r: np.ndarray, *, yaw_full: bool = False) -> np.ndarray:
        err = rotation_vector(r_ref @ r.T)
        omega = ORIENTATION_HOLD_GAIN * err
        if yaw_full:
            omega[2] = err[2]
        return omega / self.backend.control_period_s

    def steer(self, r: np.ndarray, pitch_goal: float, yaw_goal: float, *, pitch_clip: float, yaw_clip: float,
              r_start: np.ndarray) -> np.ndarray:
        """Angular velocity: pitch about world x and yaw about world z toward their goals (clipped per step), the
        sideways tilt (about world y) held at its start value."""
        dt = self.backend.control_period_s
        wx = clip(wrap_angle(pitch_goal - pitch_of(r)), pitch_clip)
        wz = clip(wrap_angle(yaw_goal - yaw_of(r)), yaw_clip)
        wy = 0.0
        if abs(r[2, 2]) > 0.2 and abs(r_start[2, 2]) > 0.2:
            roll, roll0 = np.arctan2(-r[0, 2], -r[2, 2]), np.arctan2(-r_start[0, 2], -r_start[2, 2])
            wy = ORIENTATION_HOLD_GAIN * wrap_angle(float(roll0 - roll))
        return np.array([wx, wy, wz]) / dt

    # -- motions ------------------------------------------------------------------------------------------
    def move_to(self, target: np.ndarray, g: float, *, tol: float, step_clip: float, max_steps: int,
                target_yaw: float | None, yaw_step_clip: float, action_scale: float) -> Move:
        steps = self.hold_gripper("move_to", g)
        r_ref = matrix(self.backend.ee_pose().quat_xyzw)

        def twist(pose: EePose) -> Twist:
            r = matrix(pose.quat_xyzw)
            ref = r_ref
            if target_yaw is not None:
                yaw = yaw_of(r)
                want = yaw + clip(wrap_angle(target_yaw - yaw), yaw_step_clip)
                ref = rot_z(want - yaw_of(r_ref)) @ r_ref
            return (self.linear(target - pose.pos, step_clip, action_scale),
                    self.hold_orientation(ref, r, yaw_full=target_yaw is not None))

        def arrived(pose: EePose) -> bool:
            if np.linalg.norm(target - pose.pos) > tol:
                return False
            return target_yaw is None or abs(wrap_angle(target_yaw - yaw_of(matrix(pose.quat_xyzw)))) <= YAW_TOL_RAD

        pose, steps = self.loop("move_to", twist, arrived, max_steps, steps)
        dist = float(np.linalg.norm(target - pose.pos))
        term, trunc = self.calls.flags()
        return Move(target_xyz=_t3(target), final_eef_pos=_t3(pose.pos), final_dist_m=dist, reached=dist <= tol,
                    steps_used=steps, max_steps=max_steps, terminated=term, truncated=trunc)

    def move_pose(self, target: np.ndarray, g: float, *, target_pitch: float | None, target_yaw: float | None,
                  step_clip: float, pitch_step: float, yaw_step: float, tol: float, ori_tol: float, max_steps: int,
                  action_scale: float) -> MovePose:
        steps = self.hold_gripper("move_pose", g)
        r0 = matrix(self.backend.ee_pose().quat_xyzw)
        pitch_goal = pitch_of(r0) if target_pitch is None else target_pitch
        yaw_goal = yaw_of(r0) if target_yaw is None else target_yaw

        def twist(pose: EePose) -> Twist:
            return (self.linear(target - pose.pos, step_clip, action_scale),
                    self.steer(matrix(pose.quat_xyzw), pitch_goal, yaw_goal, pitch_clip=pitch_step,
                               yaw_clip=yaw_step, r_start=r0))

        def arrived(pose: EePose) -> bool:
            r = matrix(pose.quat_xyzw)
            return (np.linalg.norm(target - pose.pos) <= tol
                    and abs(wrap_angle(pitch_goal - pitch_of(r))) <= ori_tol
                    and abs(wrap_angle(yaw_goal - yaw_of(r))) <= ori_tol)

        pose, steps = self.loop("move_pose", twist, arrived, max_steps, steps)
        dist = float(np.linalg.norm(target - pose.pos))
        term, trunc = self.calls.flags()
        return MovePose(final_eef_pos=_t3(pose.pos), final_dist_m=dist, final_pitch=pitch_of(matrix(pose.quat_xyzw)),
                        reached=dist <= tol, steps_used=steps, terminated=term, truncated=trunc)

    def rotate(self, tool: str, axis: str, target: float | None, delta: float | None, g: float, *, max_steps: int,
               tol: float, step_clip: float) -> Rotation:
        measure = yaw_of if axis == "yaw" else pitch_of
        steps = self.hold_gripper(tool, g)
        pose0 = self.backend.ee_pose()
        r0 = matrix(pose0.quat_xyzw)
        start = measure(r0)
        goal = wrap_angle(target if target is not None else start + delta)
        pitch_goal = goal if axis == "pitch" else pitch_of(r0)
        yaw_goal = goal if axis == "yaw" else yaw_of(r0)
        clips = (step_clip, 0.10) if axis == "pitch" else (0.10, step_clip)

        def twist(pose: EePose) -> Twist:
            return (self.linear(pose0.pos - pose.pos, 0.01, OSC_POS_SCALE_M),
                    self.steer(matrix(pose.quat_xyzw), pitch_goal, yaw_goal, pitch_clip=clips[0],
                               yaw_clip=clips[1], r_start=r0))

        def arrived(pose: EePose) -> bool:
            return abs(wrap_angle(goal - measure(matrix(pose.quat_xyzw)))) <= tol

        pose, steps = self.loop(tool, twist, arrived, max_steps, steps)
        final = measure(matrix(pose.quat_xyzw))
        err = wrap_angle(goal - final)
        term, trunc = self.calls.flags()
        return Rotation(start=start, target=goal, final=final, final_err=err, reached=abs(err) <= tol,
                        steps_used=steps, terminated=term, truncated=trunc)

    def set_gripper(self, g: float, steps: int) -> Gripper:
        used = self.send_gripper("set_gripper", g)
        _, used = self.hold_position("set_gripper", steps, used)
        term, trunc = self.calls.flags()
        return Gripper(gripper=g, steps=used, terminated=term, truncated=trunc)

    def release(self, max_steps: int) -> Release:
        start = float(self.backend.gripper_opening())
        peak = [start]
        used = self.send_gripper("release", OPEN)
        peak[0] = max(peak[0], float(self.backend.gripper_opening()))

        def stop(_: EePose) -> bool:
            peak[0] = max(peak[0], float(self.backend.gripper_opening()))
            return bool(getattr(self.backend.status(), "success", False))

        _, used = self.hold_position("release", max_steps, used, stop=stop)
        final = float(self.backend.gripper_opening())
        term, trunc = self.calls.flags()
        return Release(steps_used=used, start_gripper_opening=start, peak_gripper_opening=max(peak[0], final),
                       final_gripper_opening=final, terminated=term, truncated=trunc)

    def osc_action(self, tool: str, action: np.ndarray) -> tuple[EePose | None, int]:
        """Execute one 7-D OSC action (a VLA action): a gripper goal when its sign changes, then one twist step."""
        used = 0
        g = CLOSE if action[6] > 0 else OPEN
        if g != self.gripper_cmd:
            used += self.send_gripper(tool, g)
        dt = self.backend.control_period_s
        new = self.step(tool, action[:3] * OSC_POS_SCALE_M / dt, action[3:6] * OSC_ROT_SCALE_RAD / dt)
        return new, used + (new is not None)
