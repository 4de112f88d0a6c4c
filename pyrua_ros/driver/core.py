"""The driver core: the driver-surface behaviour written once, over an :class:`~pyrua_ros.driver.model.ArmModel`.

The LIBERO sim node and the kinematic fake arm are this core over two models; their node files only wire ROS to it
(:mod:`pyrua_ros.driver.node`). Plain Python, no rclpy: the node hands messages in as numbers and publishes what the
core tells its :class:`DriverOutput` to publish.

The rules (behaviour of ros2_control's joint_trajectory_controller and gripper_action_controller and of MoveIt
Servo, ../shared/docs/ROS2-ANCHORS.md; the goal rules themselves are in :mod:`pyrua_ros.driver.goals`):

Stepping
  Every control step carries one arm command (a twist, a trajectory set point, or hold) and the finger-gap target.
  **Lockstep**: a twist is exactly one step, run in its callback; an active goal steps the model by itself (the
  node's goal ticker calls :meth:`DriverCore.tick`), a trajectory with its set point, a gripper-only goal with the
  arm holding; nothing else advances time. **Realtime**: the control timer calls :meth:`DriverCore.realtime_tick`
  at the control rate: the trajectory's set point when one runs, else the last twist, which drops to zero after
  ``command_timeout_s`` (Servo's ``incoming_command_timeout``). Every step advances every active goal.
  Sim time never runs backwards, across resets included (``time_base`` carries on).
Servo twists (MoveIt Servo, speed units)
  ``header.frame_id`` names the frame of the twist: empty = world; any frame of the robot's TF tree is rotated
  into the world; anything else is refused, naming the accepted frames. Non-finite values are refused. The
  safety filter clips each axis to its speed limit and keeps the end effector in the workspace box, reporting
  every clip. A twist while a joint trajectory runs is refused (one arm controller at a time); a twist during a
  gripper goal runs, and the fingers keep moving.
Gripper target (``gripper_target`` topic, forward_command_controller style)
  A finger-gap target [m] that every following step carries, arm commands included, so the fingers move while the
  arm moves, as one OSC action moves both. It takes no step of its own (in lockstep the next twist is the step) and
  is acknowledged by a fresh episode status carrying it (``gripper_target``), so a client that waits for that
  status knows the next step carries it. It ends an active gripper goal (aborted, "preempted by a gripper target");
  refused like a twist while motion is refused; clipped to 0..open.
Goals
  A gripper goal and a trajectory goal may run together (two controllers). A new goal of the same kind preempts
  the active one, which ends **aborted** with "preempted by a newer goal" (ros2_controllers report it canceled,
  which an rclpy action server cannot do without a cancel request from the client). Goals are rejected at once
  while motion is refused (e-stop, episode over), and trajectory goals that fail validation are rejected with the
  reason on the safety-events topic (kind ``rejected``). Every set point of a trajectory passes the safety filter
  too (``SafetyFilter.filter_joint_step``): a step that would move the end effector faster than the speed limits
  or out of the box runs only as far as it may (a ``clipped`` event), so the arm lags the trajectory instead.
  Cancel ends a goal **canceled** at the next control
  step: the arm holds where it is, the gripper's target becomes its current gap.
Cartesian goals (``pyrua_ros_msgs/action/MoveToTarget``, :mod:`pyrua_ros.driver.cartesian`)
  robo's ``move_to`` run by the driver: each tick reads the pose and either converges (the goal succeeds, no step)
  or runs one step of the law's twist exactly as a world-frame servo twist runs (safety filter, clip events), with
  the goal's finger-gap target carried from its start (set like the gripper target topic, ending a gripper goal).
  One arm controller at a time: a Cartesian goal is rejected while a trajectory runs and twists are refused while
  it runs; a new one preempts the old. It ends by ``max_steps`` iterations, cancel, e-stop or the episode's end
  like any goal; its result always carries the iterations and the final position.
E-stop (``/estop`` true latches until false)
  Within one control step: active goals **abort**, the held twist is forgotten, the gripper target becomes its
  current gap, twists are refused and reported, new goals are rejected. Releasing it enables motion again; nothing
  resumes by itself.
Episode end and reset
  After success (terminated) or truncation, motion is refused as under the e-stop and active goals abort. A reset
  aborts active goals, opens the gripper target and starts the episode the ``episode`` settings name.
Every refusal is a ``refused`` event on ``/safety/events`` plus a fresh episode status, so a lockstep client waiting
for a step learns at once that none comes.
State digest
  After the reset and after every control step the core chains a digest of the model's physics state
  (:mod:`pyrua_ros.sim_interfaces.state_digest`) into the episode status, so two runs can prove they took the
  same trajectory and name the first step where they did not.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from pyrua_ros.driver import cartesian, goals
from pyrua_ros.driver.clock import make_clock
from pyrua_ros.driver.model import ArmModel, CameraImage, ModelEpisode
from pyrua_ros.safety import EStop, SafetyEvent, SafetyFilter, SafetyLimits, refusal
from pyrua_ros.sim_interfaces import blas, state_digest
from pyrua_ros.sim_interfaces.status import CLOCK_MODES, EpisodeStatus
from pyrua_ros.wire.convert import quat_to_matrix

ZERO3 = (0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class DriverConfig:
    """Startup settings of a driver (node parameters; config/sim.yaml and config/fake_arm.yaml).

    ``frames``: world, base and end-effector frame names (interfaces.yaml); ``gripper_open_m``: the open finger gap.
    """

    clock_mode: str
    command_timeout_s: float
    limits: SafetyLimits
    gripper: goals.GripperSettings
    trajectory: goals.TrajectorySettings
    world_frame: str
    base_frame: str
    ee_frame: str
    arm_joints: tuple[str, ...]
    gripper_open_m: float

    @classmethod
    def from_parameters(cls, v: dict, names) -> DriverConfig:
        """The config a driver node builds from its parameter values ``v`` (driver/node.py ``PARAMETERS``) and the
        interface names (interfaces.yaml)."""
        f, r = names.frames, names.robot
        limits = SafetyLimits(tuple(v["workspace_min"]), tuple(v["workspace_max"]), float(v["max_linear_speed"]),
                              float(v["max_angular_speed"]))
        gripper = goals.GripperSettings(goal_tolerance_m=float(v["gripper_goal_tolerance"]),
                                        stall_steps=int(v["gripper_stall_steps"]),
                                        allow_stalling=bool(v["gripper_allow_stalling"]),
                                        max_steps=int(v["gripper_max_steps"]))
        trajectory = goals.TrajectorySettings(goal_tolerance_rad=float(v["trajectory_goal_tolerance"]),
                                              goal_time_s=float(v["trajectory_goal_time"]))
        return cls(clock_mode=str(v["clock_mode"]), command_timeout_s=float(v["command_timeout_s"]),
                   limits=limits, gripper=gripper, trajectory=trajectory, world_frame=f.world, base_frame=f.base,
                   ee_frame=f.end_effector, arm_joints=tuple(r.arm_joints),
                   gripper_open_m=float(r.gripper_open_width_m))

    def __post_init__(self):
        if self.clock_mode not in CLOCK_MODES:
            raise ValueError(f"clock_mode {self.clock_mode!r} is not one of {list(CLOCK_MODES)}")
        if not self.command_timeout_s > 0:
            raise ValueError(f"command_timeout_s must be > 0, got {self.command_timeout_s!r}")


@dataclasses.dataclass
class ActiveGoal:
    """A goal the core runs. ``runner`` is a :class:`~pyrua_ros.driver.goals.GripperGoal` or ``TrajectoryGoal``;
    ``handle`` belongs to the node (its action goal handle); ``outcome`` is set when the goal ends."""

    runner: goals.GripperGoal | goals.TrajectoryGoal | cartesian.CartesianGoal
    handle: object = None
    cancel_requested: bool = False
    outcome: goals.Outcome | None = None

    @property
    def kind(self) -> str:
        return self.runner.kind


class DriverOutput(Protocol):
    """What the core asks its node to publish."""

    def publish_state(self) -> None:
        """After every step and reset: end-effector pose, joint states, TF, clock, episode status (that order)."""

    def publish_status(self) -> None:
        """A fresh episode status alone (refusals, e-stop changes)."""

    def publish_event(self, event: SafetyEvent) -> None:
        """One safety event (clipped, refused or rejected command)."""

    def publish_reset(self) -> None:
        """After a reset, before the state: static frames, robot description, labels, ground truth."""

    def goal_feedback(self, goal: ActiveGoal, fields: dict) -> None:
        """Feedback of an active goal after a step (control_msgs field names)."""

    def goal_done(self, goal: ActiveGoal) -> None:
        """``goal.outcome`` is set: end the action goal with it."""


class GoalRejected(Exception):
    """A goal the driver does not accept; the message says why."""


def rejection(reason: str, step: int) -> SafetyEvent:
    """The event published for a rejected goal."""
    return SafetyEvent("rejected", (0.0,) * 6, (0.0,) * 6, reason, step)


class DriverCore:
    """The driver-surface behaviour of one robot over ``model`` (see the module docstring for the rules)."""

    def __init__(self, model: ArmModel, config: DriverConfig, out: DriverOutput):
        self.model, self.config, self.out = model, config, out
        self.dt = float(model.control_period_s)
        self.clock = make_clock(config.clock_mode, config.command_timeout_s)
        self.safety = SafetyFilter(config.limits)
        self.estop = EStop()
        self.episode: ModelEpisode | None = None
        self.episode_id = 0
        self.time_base = 0.0
        self.gripper_target = config.gripper_open_m
        self.goals: dict[str, ActiveGoal] = {}
        self.state_digest = ""     # chained digest of the physics state through the last step (state_digest.py)
        self.digest_scope = blas.digest_scope()   # where that digest compares: this process's BLAS kernel

    # ---------------------------------------------------------------- episode
    def validate_episode(self, suite: str, task: int, seed: int, max_episode_steps: int) -> None:
        """ValueError naming the valid values, from the model."""
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int) or max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be an integer >= 1, got {max_episode_steps!r}")
        self.model.validate_episode(suite, task, seed, max_episode_steps)

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> EpisodeStatus:
        """Abort active goals, reset the model, publish the new episode's statics and state; return its status."""
        self._end_all(goals.ABORTED, "aborted by an episode reset")
        if self.episode is not None:
            self.time_base = self.sim_time + self.dt     # sim time never runs backwards
        self.episode = self.model.reset(suite, task, seed, max_episode_steps)
        self.episode_id += 1
        self.state_digest = state_digest.start_digest(self.model.physics_state())
        self.gripper_target = self.config.gripper_open_m
        self.clock.clear()
        self.out.publish_reset()
        self.out.publish_state()
        return self.status()

    @property
    def sim_time(self) -> float:
        """Seconds of sim time now: every stamp the driver publishes [s]."""
        return self.time_base + self.model.last_step().step * self.dt

    def status(self) -> EpisodeStatus:
        e, s = self.episode, self.model.last_step()
        return EpisodeStatus(episode_id=self.episode_id, suite=e.suite, task=e.task, seed=e.seed,
                             task_language=e.task_language, step=s.step, sim_time=round(self.sim_time, 9),
                             success=bool(s.success), terminated=bool(s.success), truncated=bool(s.truncated),
                             max_episode_steps=e.max_episode_steps, object_names=tuple(sorted(e.object_names)),
                             clock_mode=self.config.clock_mode, estop=self.estop.active,
                             gripper_opening=round(float(self.model.gripper_opening()), 6),
                             gripper_target=float(self.gripper_target), state_digest=self.state_digest,
                             digest_scope=self.digest_scope if self.state_digest else "")

    def motion_refusal(self) -> str | None:
        """Why motion is refused now, or None."""
        if self.estop.active:
            return "e-stop is latched; publish false on the e-stop topic to release it"
        s = self.model.last_step()
        if s.over:
            return (f"episode over ({'terminated: success' if s.success else 'truncated'} at step {s.step}); "
                    "call the reset service")
        return None

    # ---------------------------------------------------------------- servo
    def frame_rotation(self, frame: str) -> np.ndarray | None:
        """R_world_frame of a frame of the robot's TF tree ('' = world), or None for an unknown frame."""
        world = self.config.world_frame
        if frame in ("", world):
            return np.eye(3)
        parents = {child: (parent, q) for parent, child, _t, q in self.model.transforms()}
        R, name = np.eye(3), frame
        for _ in range(len(parents) + 1):
            if name == world:
                return R
            if name not in parents:
                return None
            parent, q = parents[name]
            R = quat_to_matrix(q) @ R
            name = parent
        return None

    def accepted_frames(self) -> list[str]:
        c = self.config
        return ["" , c.world_frame, c.base_frame, c.ee_frame, "or any frame of the robot's TF tree"]

    def on_twist(self, v: Sequence[float], w: Sequence[float], frame: str, wall_s: float) -> None:
        """A servo command [m/s, rad/s] in ``frame``: run it (lockstep), hold it (realtime) or refuse it."""
        v, w = np.asarray(v, dtype=float), np.asarray(w, dtype=float)
        step = self.model.last_step().step
        R = self.frame_rotation(frame)
        if R is None:
            return self._refuse(v, w, f"twist frame_id {frame!r} is not supported; use one of "
                                      f"{self.accepted_frames()}", step)
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(w))):
            return self._refuse(v, w, "twist has non-finite values", step)
        reason = self.motion_refusal() or self._arm_busy(None)
        if reason:
            return self._refuse(v, w, reason, step)
        motion = self.clock.on_command(self._world_motion(R, v, w), wall_s)
        if motion is not None:
            self._servo_step(motion)
        return None

    @staticmethod
    def _world_motion(R: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The world-frame motion 6-vector of a twist given in a frame rotated by ``R``."""
        return np.concatenate([R @ v, R @ w])

    def _arm_busy(self, starting: str | None) -> str | None:
        """Why the arm cannot take a twist (``starting`` None) or start a goal of kind ``starting`` now: another
        arm controller's goal runs (a goal of the same kind is preempted instead)."""
        for kind, what in (("trajectory", "a joint trajectory goal"), ("cartesian", "a Cartesian goal")):
            if kind in self.goals and kind != starting:
                return f"{what} is executing (cancel it first)"
        return None

    def _refuse(self, v, w, reason: str, step: int) -> None:
        self.out.publish_event(refusal(v, w, reason, step))
        self.out.publish_status()

    def _servo_step(self, motion: np.ndarray) -> None:
        f = self.safety.filter_twist(motion[:3], motion[3:], self.model.ee_pose()[0], self.dt,
                                     self.model.last_step().step)
        if f.event:
            self.out.publish_event(f.event)
        self._step(self.model.step_twist, f.v, f.w)

    def _step(self, fn, *args) -> None:
        """One control step (with the gripper target), then publish and advance every active goal."""
        step = fn(*args, self.gripper_target).step
        self.state_digest = state_digest.next_digest(self.state_digest, step, self.model.physics_state())
        self.out.publish_state()
        q_arm = self.arm_positions()
        gap = float(self.model.gripper_opening())
        seen = {"gripper": gap, "trajectory": q_arm, "cartesian": (*self.model.ee_pose(), step)}
        for goal in list(self.goals.values()):
            runner = goal.runner
            outcome = runner.after_step(seen[runner.kind])
            self.out.goal_feedback(goal, runner.fields(seen[runner.kind]))
            if outcome is not None:
                self._finish(goal, outcome)
        if self.model.last_step().over:
            self._end_all(goals.ABORTED, "aborted: " + (self.motion_refusal() or "episode over"))

    def arm_positions(self) -> np.ndarray:
        names, q, _ = self.model.joint_state()
        return np.array([q[names.index(n)] for n in self.config.arm_joints])

    # ---------------------------------------------------------------- ticks
    def tick(self) -> bool:
        """Lockstep goal ticker: one control step for the active goals; False when none is left."""
        self._apply_cancels()
        if not self.goals:
            return False
        reason = self.motion_refusal()
        if reason:
            self._end_all(goals.ABORTED, f"aborted: {reason}")
            return False
        self._goal_step()
        return bool(self.goals)

    def _goal_step(self) -> None:
        trajectory, move = self.goals.get("trajectory"), self.goals.get("cartesian")
        if move is not None:
            pos, quat = self.model.ee_pose()
            twist = move.runner.next_twist(np.asarray(pos, dtype=float), quat)
            if twist is None:
                self._finish(move, move.runner.converged(self.model.last_step().step))
                if self.goals:      # a gripper goal still runs: it gets this tick's step
                    self._goal_step()
                return
            # exactly the path of a world-frame servo twist in lockstep (on_twist, then _servo_step)
            self._servo_step(self._world_motion(self.frame_rotation(self.config.world_frame), *twist))
        elif trajectory is not None:
            q, event = self.safety.filter_joint_step(self.arm_positions(), trajectory.runner.setpoint(),
                                                     self.model.ee_pose_at, self.dt, self.model.last_step().step)
            if event:
                self.out.publish_event(event)
            self._step(self.model.step_joints, q)
        else:
            self._step(self.model.step_twist, np.zeros(3), np.zeros(3))

    def realtime_tick(self, wall_s: float) -> None:
        """Realtime control timer: step the trajectory, else the held twist (zero after the command timeout)."""
        self._apply_cancels()
        reason = self.motion_refusal()
        if reason:
            self._end_all(goals.ABORTED, f"aborted: {reason}")
            return
        if "trajectory" in self.goals or "cartesian" in self.goals:
            self._goal_step()
        else:
            self._servo_step(self.clock.on_tick(wall_s))

    # ---------------------------------------------------------------- gripper target
    def on_gripper_target(self, values: Sequence[float]) -> None:
        """A gripper target command (one finger gap [m]): hold it for every following step, or refuse it."""
        step = self.model.last_step().step
        reason = self.motion_refusal()
        if reason is None and (len(values) != 1 or not math.isfinite(values[0])):
            reason = f"a gripper target is one finite finger gap [m], got {list(values)!r}"
        if reason:
            return self._refuse(ZERO3, ZERO3, f"gripper target refused: {reason}", step)
        goal = self.goals.get("gripper")
        if goal is not None:
            self._finish(goal, goal.runner.stopped(goals.ABORTED, "preempted by a gripper target",
                                                   float(self.model.gripper_opening())))
        self.gripper_target = float(np.clip(values[0], 0.0, self.config.gripper_open_m))
        self.out.publish_status()
        return None

    # ---------------------------------------------------------------- goals
    def check_gripper_goal(self, position_m: float) -> None:
        """Raise GoalRejected (and publish why) unless a gripper goal to ``position_m`` [m] can start."""
        reason = self.motion_refusal()
        if reason is None and not math.isfinite(position_m):
            reason = f"gripper position {position_m!r} is not finite"
        if reason:
            self._reject(f"gripper goal rejected: {reason}")

    def check_trajectory_goal(self, names: Sequence[str], points) -> None:
        """Raise GoalRejected (and publish why) unless the trajectory can start (see goals.validate_trajectory)."""
        reason = self.motion_refusal() or self._arm_busy("trajectory")
        if reason is None:
            code, text = goals.validate_trajectory(names, points, self.config.arm_joints)
            if code != goals.SUCCESSFUL:
                reason = text
        if reason:
            self._reject(f"trajectory goal rejected: {reason}")

    def check_cartesian_goal(self, target: Sequence[float], gripper_m: float, **law) -> None:
        """Raise GoalRejected (and publish why) unless the Cartesian goal can start; ``law``: the keyword arguments
        of :meth:`start_cartesian` (see :func:`~pyrua_ros.driver.cartesian.validate`)."""
        reason = (self.motion_refusal() or self._arm_busy("cartesian")
                  or cartesian.validate(target, gripper_m, **law))
        if reason:
            self._reject(f"Cartesian goal rejected: {reason}")

    def _reject(self, reason: str) -> None:
        self.out.publish_event(rejection(reason, self.model.last_step().step))
        raise GoalRejected(reason)

    def start_gripper(self, position_m: float) -> ActiveGoal:
        """Start an accepted gripper goal (preempting an active one); the caller ticks it."""
        self.gripper_target = float(np.clip(position_m, 0.0, self.config.gripper_open_m))
        return self._start(goals.GripperGoal(self.gripper_target, self.config.gripper))

    def start_trajectory(self, names: Sequence[str], points, goal_tolerances: dict[str, float],
                         path_tolerances: dict[str, float], goal_time_tolerance_s: float) -> ActiveGoal:
        """Start an accepted trajectory goal (preempting an active one) from the current posture."""
        runner = goals.TrajectoryGoal(names, points, self.config.arm_joints, self.arm_positions(), dt=self.dt,
                                      settings=self.config.trajectory, goal_tolerances=goal_tolerances,
                                      path_tolerances=path_tolerances, goal_time_tolerance_s=goal_time_tolerance_s)
        return self._start(runner)

    def start_cartesian(self, target: Sequence[float], gripper_m: float, **law) -> ActiveGoal:
        """Start an accepted Cartesian goal (preempting an active one): its finger-gap target holds from now, as
        the gripper target topic sets it; the caller ticks it. ``law``: the keyword arguments of
        :class:`~pyrua_ros.driver.cartesian.CartesianGoal` but ``dt``."""
        gripper = self.goals.get("gripper")
        if gripper is not None:
            self._finish(gripper, self._stopped(gripper, goals.ABORTED, "preempted by a Cartesian goal's gripper"))
        gap = float(np.clip(gripper_m, 0.0, self.config.gripper_open_m))
        if gap != self.gripper_target:
            self.gripper_target = gap
            self.out.publish_status()   # as the gripper target topic acknowledges it (a converged goal has no step)
        runner = cartesian.CartesianGoal(target, dt=self.dt, **law)
        return self._start(runner)

    def _start(self, runner) -> ActiveGoal:
        old = self.goals.get(runner.kind)
        if old is not None:
            self._finish(old, self._stopped(old, goals.ABORTED, "preempted by a newer goal"))
        goal = ActiveGoal(runner)
        self.goals[runner.kind] = goal
        return goal

    def request_cancel(self, goal: ActiveGoal) -> None:
        """The client asked to cancel ``goal``: it ends canceled at the next tick (or now, in lockstep)."""
        goal.cancel_requested = True

    def _apply_cancels(self) -> None:
        for goal in list(self.goals.values()):
            if goal.cancel_requested:
                self._finish(goal, self._stopped(goal, goals.CANCELED, "canceled"))

    def _stopped(self, goal: ActiveGoal, status: str, why: str) -> goals.Outcome:
        if goal.kind == "gripper":
            gap = float(self.model.gripper_opening())
            if status != goals.SUCCEEDED:
                self.gripper_target = gap          # hold the fingers where they are
            return goal.runner.stopped(status, why, gap)
        if goal.kind == "cartesian":
            return goal.runner.stopped(status, why, self.model.last_step().step)
        return goal.runner.stopped(status, why)

    def _finish(self, goal: ActiveGoal, outcome: goals.Outcome) -> None:
        if self.goals.get(goal.kind) is goal:
            del self.goals[goal.kind]
        goal.outcome = outcome
        self.out.goal_done(goal)

    def _end_all(self, status: str, why: str) -> None:
        for goal in list(self.goals.values()):
            self._finish(goal, self._stopped(goal, status, why))

    # ---------------------------------------------------------------- e-stop
    def on_estop(self, stop: bool) -> bool:
        """Apply an e-stop message; True when the latch changed (then everything is reported)."""
        if not self.estop.set(stop):
            return False
        self.clock.clear()
        step = self.model.last_step().step
        if stop:
            self._end_all(goals.ABORTED, "aborted by the e-stop")
            self.gripper_target = float(self.model.gripper_opening())
        self.out.publish_event(refusal(ZERO3, ZERO3, "e-stop tripped: motion refused until released" if stop
                                       else "e-stop released", step))
        self.out.publish_status()
        return True

    # ---------------------------------------------------------------- cameras
    def capture(self, camera: str, size: int) -> CameraImage:
        return self.model.capture(camera, size)

    def capture_reply(self, camera: str, resolution: str, stamp: tuple[int, int], *, step: int | None = None,
                      extra: dict | None = None) -> str:
        """The JSON ``message`` of a capture / segmentation Trigger response: the image's stamp, the control step it
        shows (now unless ``step`` names another) and ``extra`` fields (a capture's depth range, say)."""
        step = self.model.last_step().step if step is None else int(step)
        return json.dumps({"stamp": list(stamp), "step": step, "camera": camera, "resolution": resolution,
                           **(extra or {})})
