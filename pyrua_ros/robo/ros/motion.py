"""``Motion``: robo's commands to the driver surface, each returning once its last control step is in.

Lockstep protocol of :meth:`Motion.servo`: publish one TwistStamped, then wait on the state's one condition, woken
by every state message, until the step's ``/ee_pose`` (newer than the last), its episode status (the driver
publishes it last, so the caller sees whether the step ended the episode) and its joint states are in, or a refusal
of the command arrives on the safety-events topic, or :meth:`Motion.cancel` is called. No polling, no sleep slices.

:meth:`Motion.move_to_target` sends a whole servo verb (``move_to``, ``move_pose``, ``rotate_*``) as one
``MoveToTarget`` goal (the driver runs the same iterations; one round trip per move instead of one per step) and
waits for its result or a cancel only, checking once per ``step_reply_s`` that the driver still steps (no step for
that long is a timeout, as for a twist).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from pyrua_ros.robo.backend import BackendRefused, BackendTimeout, EePose, MoveOutcome
from pyrua_ros.robo.ros.episode import EpisodeControl
from pyrua_ros.robo.ros.link import RosLink
from pyrua_ros.robo.ros.state import REFUSALS, SETTLE_S, RobotState
from pyrua_ros.wire.convert import stamp_to_seconds, time_msg
from pyrua_ros.wire.move_law import ServoLaw

# [s] how long the first move waits for the driver's MoveToTarget server (the driver is known by then: its status
# arrived): a driver without one costs this once per backend, then robo streams twists
CARTESIAN_DISCOVERY_S = 5.0


class Motion:
    """Servo twists and Cartesian goals, over ``link``, waiting on ``state``; the twist scale of a Cartesian goal is
    ``episode``'s ``osc_action_scale``."""

    def __init__(self, link: RosLink, state: RobotState, episode: EpisodeControl):
        from geometry_msgs.msg import TwistStamped

        from pyrua_ros.wire import qos

        self.link, self.state, self.episode = link, state, episode
        d = link.names.driver
        node = link.node
        self.twist_pub = node.create_publisher(TwistStamped, d.servo_twist, qos.LOCKSTEP)
        self._twist_type = TwistStamped
        try:   # pyrua_ros's own action type: where it was not built, robo streams twists
            from pyrua_ros_msgs.action import MoveToTarget
        except ImportError:   # pragma: no cover - only where the interface package was not built
            MoveToTarget = None
        self._move_type = MoveToTarget
        self._move = None if MoveToTarget is None else link.action_client(MoveToTarget, d.cartesian_move)
        self._serves_move: bool | None = None
        self._goal_events: set[threading.Event] = set()   # set by cancel(): wakes a waiting Cartesian goal
        link.on_deadline(self.stop)

    # ------------------------------------------------------------------ stopping
    def stop(self) -> None:
        """Stop the arm at the deadline: on a realtime driver (which holds the last twist) send a zero twist (the
        link cancels the goals in flight)."""
        status = self.state.latest.value
        if status is not None and status.clock_mode == "realtime":
            stop = self._twist_type()
            stop.header.frame_id = self.link.names.frames.world
            self.twist_pub.publish(stop)

    def cancel(self) -> None:
        """End the current command and refuse the next ones until the next reset."""
        self.link.cancelled.set()
        with self.state.cond:              # wake a servo or gripper target waiting for its step
            self.state.cond.notify_all()
        for event in list(self._goal_events):
            event.set()
        self.link.cancel_goals()

    # ------------------------------------------------------------------ servo
    def servo(self, linear: np.ndarray, angular: np.ndarray) -> EePose:
        self.link.check_cancelled("servo")
        self.link.check_deadline("servo")
        before = self.state.ee_pose()
        status = self.state.status()
        if status.over:
            reason = "terminated" if status.terminated else "truncated"
            raise BackendRefused(f"servo: {REFUSALS[reason]}", reason=reason)
        if status.estop:
            raise BackendRefused(f"servo: {REFUSALS['estop']}", reason="estop")
        n_events = self.state.event_count()
        msg = self._twist_type()
        msg.header.frame_id = self.link.names.frames.world
        msg.header.stamp = time_msg(before.stamp)
        lin = np.asarray(linear, dtype=float).reshape(3)
        ang = np.asarray(angular, dtype=float).reshape(3)
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(v) for v in lin)
        msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z = (float(v) for v in ang)
        self.twist_pub.publish(msg)
        return self._await_step(before.stamp, n_events)

    def _await_step(self, last_stamp: float, n_events: int) -> EePose:
        """Block until the step after ``last_stamp`` is in (pose, its status, its joint states) and return its pose;
        BackendRefused for a refusal reported after event ``n_events`` or a cancel; BackendTimeout at the
        deadline. One condition wait, woken by each state message."""
        state, link, names = self.state, self.link, self.link.names
        pose_t = [None]

        def settled():
            pose = state.pose.value
            if pose is None or pose.stamp <= last_stamp:
                return False
            st = state.latest.value
            if st is None or not (st.sim_time >= pose.stamp - 1e-6 or st.over):
                return False
            pose_t[0] = pose
            js = state.joint_states.value
            return js is not None and stamp_to_seconds(js.header.stamp) >= pose.stamp - 1e-6

        def ended():
            return settled() or state.refusal_since(n_events) is not None or link.cancelled.is_set()

        timeout = link.timeouts.step_reply_s
        with state.cond:
            state.cond.wait_for(ended, link.within_deadline(timeout))
            refusal = state.refusal_since(n_events)
            if settled():
                return state.pose.value
        if pose_t[0] is not None:
            # pose and status are in, the joint states of that step are late: give them SETTLE_S more
            state.settle(pose_t[0].stamp)
            return pose_t[0]
        if refusal is not None:
            raise BackendRefused(f"servo: {refusal.get('reason', 'refused by the driver')}",
                                 reason=state.refusal_reason())
        self.link.check_cancelled("servo")
        link.check_deadline("servo")
        if state.pose.value is not None and state.pose.value.stamp > last_stamp:
            raise BackendTimeout(f"{names.sim.episode_status}: no status for t={state.pose.value.stamp:.3f} "
                                 f"s within {timeout} s")
        raise BackendTimeout(f"{names.driver.ee_pose}: no pose after a servo command within {timeout} s")

    # ------------------------------------------------------------------ Cartesian goal
    def move_to_target(self, law: ServoLaw, gripper_m: float, *, max_steps: int) -> MoveOutcome | None:
        """Run a servo verb's loop (``law``: ``move_to``, ``move_pose`` or a rotate verb) as one ``MoveToTarget``
        goal, the finger-gap target ``gripper_m`` [m] carried from its start; the twist scale is the driver's
        ``osc_action_scale``. None, sending nothing, when the driver serves no such action (asked once,
        ``CARTESIAN_DISCOVERY_S``) or ``max_steps`` does not fit the goal's uint32. Returns once
        the goal's last step is in (status, pose, joint states); a goal aborted because the episode ended is a
        normal end. BackendRefused for an e-stop, a cancel or a rejected goal; BackendTimeout when no step comes
        for ``step_reply_s``; BackendDeadline (goal cancelled) at the host's deadline."""
        from action_msgs.msg import GoalStatus

        state, link = self.state, self.link
        if self._move is None or not 0 < int(max_steps) < 2 ** 32:   # MoveToTarget's max_steps is a uint32
            return None
        what = link.names.driver.cartesian_move
        self.link.check_cancelled(what)
        link.check_deadline(what)
        if self._serves_move is None:
            self._serves_move = bool(self._move.wait_for_server(
                timeout_sec=link.within_deadline(CARTESIAN_DISCOVERY_S)))
        if not self._serves_move:
            return None
        status = state.status()
        if status.over or status.estop:
            raise state.refused(what)
        goal = self._goal(law, gripper_m, max_steps)
        send = self._move.send_goal_async(goal)
        if not link.done_within(send, link.within_deadline(link.timeouts.server_wait_s)):
            link.check_deadline(what)
            raise BackendTimeout(f"{what}: goal not acknowledged within {link.timeouts.server_wait_s} s")
        handle = send.result()
        if not handle.accepted:
            raise state.refused(what, "goal rejected")
        link.goals.append(handle)
        try:
            wrapped = self._await_goal(handle, status.step, what)
        finally:
            link.goals.remove(handle)
        result = wrapped.result
        if wrapped.status == GoalStatus.STATUS_CANCELED:
            raise BackendRefused(f"{what}: cancelled", reason="cancelled")
        if wrapped.status != GoalStatus.STATUS_SUCCEEDED:
            # the driver ends the goal before it publishes the status that says why (e-stop, episode end)
            state.latest.wait(lambda st: st.estop or st.over, SETTLE_S)
            reason = state.refusal_reason()
            if reason not in ("terminated", "truncated"):
                raise state.refused(what, f"aborted by the driver: {result.message}")
        # the result follows the goal's last step: wait for that step's status, pose and joint states
        last = link.require(state.latest, link.names.sim.episode_status, lambda st: st.step >= result.step)
        state.settle(last.sim_time)
        return MoveOutcome(iterations=int(result.iterations), final_pos=np.array(result.final_position, dtype=float),
                           final_quat=np.array(result.final_orientation, dtype=float), step=int(result.step))

    def _goal(self, law: ServoLaw, gripper_m: float, max_steps: int):
        """The MoveToTarget goal of ``law`` (the action's defaults are ``move_to``'s law: position, no angle)."""
        linear, angular = self.episode.osc_action_scale
        here = self.state.pose.value
        target = law.target if law.target is not None else (here.pos if here is not None else np.zeros(3))
        goal = self._move_type.Goal(target=[float(v) for v in target], gripper_position=float(gripper_m),
                                    tolerance=float(law.tol), step_clip=float(law.step_clip),
                                    action_scale=float(law.action_scale), linear_scale=float(linear),
                                    max_steps=int(max_steps), no_position=law.target is None,
                                    pitch_step=float(law.pitch_step), yaw_step=float(law.yaw_step),
                                    angular_scale=float(angular))
        if law.pitch is not None:
            goal.servo_pitch, goal.target_pitch = True, float(law.pitch)
        if law.yaw is not None:
            goal.servo_yaw, goal.target_yaw = True, float(law.yaw)
        if math.isfinite(law.ori_tol):
            goal.angles_converge, goal.orientation_tolerance = True, float(law.ori_tol)
        return goal

    def _await_goal(self, handle, step0: int, what: str):
        """The wrapped result of an accepted goal that steps the driver; BackendRefused on :meth:`cancel`,
        BackendTimeout (goal cancelled) when no step came for ``step_reply_s``, BackendDeadline at the deadline.
        Woken only by the result and :meth:`cancel` (not by every step's messages): the driver's steps are checked
        once per ``step_reply_s``."""
        link = self.link
        future = handle.get_result_async()
        ended = threading.Event()
        future.add_done_callback(lambda _f: ended.set())
        self._goal_events.add(ended)
        try:
            timeout = link.timeouts.step_reply_s
            last_step = step0
            while not ended.wait(link.within_deadline(timeout)) and not link.cancelled.is_set():
                st = self.state.latest.value
                if link.past_deadline:
                    break
                if st is None or st.step == last_step:
                    break
                last_step = st.step
        finally:
            self._goal_events.discard(ended)
        if future.done():
            return future.result()
        if link.cancelled.is_set():
            # cancel() may have run before this goal's acceptance arrived, while the driver already stepped it
            handle.cancel_goal_async()
            raise BackendRefused(f"{what}: cancelled", reason="cancelled")
        link.check_deadline(what)
        handle.cancel_goal_async()
        raise BackendTimeout(f"{what}: no control step for {timeout} s (last step {last_step}); goal cancelled")
