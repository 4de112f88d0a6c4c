"""``Gripper``: the fingers, as the driver's GripperCommand action (a goal that steps the driver until the gap is
reached or the fingers stall) or as a finger-gap target that the arm's following steps carry (no step of its own).
"""

from __future__ import annotations

import time

from pyrua_ros.robo.backend import BackendRefused, BackendTimeout, GripperOutcome
from pyrua_ros.robo.ros.link import RosLink
from pyrua_ros.robo.ros.state import SETTLE_S, RobotState


class Gripper:
    """The gripper commands over ``link``, waiting on ``state``."""

    def __init__(self, link: RosLink, state: RobotState):
        from control_msgs.action import GripperCommand
        from std_msgs.msg import Float64MultiArray

        from pyrua_ros.wire import qos

        self.link, self.state = link, state
        d = link.names.driver
        self._gripper = link.action_client(GripperCommand, d.gripper_command)
        self._gripper_type = GripperCommand
        self._target_pub = link.node.create_publisher(Float64MultiArray, d.gripper_target, qos.LOCKSTEP)
        self._target_type = Float64MultiArray
        self._streams_target: bool | None = None

    def gripper_target(self, position_m: float) -> bool:
        """Make every following step carry the finger-gap target ``position_m`` [m] (the driver's gripper target
        topic: no step of its own, so the fingers move with the arm's next steps). Returns once the driver's status
        carries it, so the next twist steps with it; False, sending nothing, when the driver has no such topic
        (asked once: a subscriber within ``server_wait_s``); BackendRefused when the driver refuses it."""
        state, link = self.state, self.link
        link.check_cancelled("gripper target")
        link.check_deadline("gripper target")
        if self._streams_target is None:
            deadline = time.monotonic() + link.within_deadline(link.timeouts.server_wait_s)
            while self._target_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            self._streams_target = self._target_pub.get_subscription_count() > 0
        if not self._streams_target:
            return False
        target = float(position_m)
        if abs(state.status().gripper_target - target) < 1e-9:
            return True
        n_events = state.event_count()
        msg = self._target_type()
        msg.data = [target]
        self._target_pub.publish(msg)
        what = link.names.driver.gripper_target

        def carried():
            st = state.latest.value
            return st is not None and abs(st.gripper_target - target) < 1e-9

        with state.cond:
            state.cond.wait_for(lambda: carried() or state.refusal_since(n_events) is not None
                                or link.cancelled.is_set(), link.within_deadline(link.timeouts.step_reply_s))
            if carried():
                return True
            refusal = state.refusal_since(n_events)
        if refusal is not None:
            raise BackendRefused(f"{what}: {refusal.get('reason', 'refused by the driver')}",
                                 reason=state.refusal_reason())
        link.check_cancelled("gripper target")
        link.check_deadline(what)
        raise BackendTimeout(f"{what}: no status carrying the target {target} m within {link.timeouts.step_reply_s} s")

    def gripper(self, position_m: float, max_effort: float = 0.0) -> GripperOutcome:
        from action_msgs.msg import GoalStatus

        state, link = self.state, self.link
        link.check_cancelled("gripper")
        link.check_deadline("gripper")
        what = link.names.driver.gripper_command
        if not self._gripper.wait_for_server(timeout_sec=link.timeouts.server_wait_s):
            raise BackendTimeout(f"{what}: no action server after {link.timeouts.server_wait_s} s")
        start_step = state.status().step
        goal = self._gripper_type.Goal()
        goal.command.position = float(position_m)
        goal.command.max_effort = float(max_effort)
        send = self._gripper.send_goal_async(goal)
        if not link.done_within(send, link.timeouts.server_wait_s):
            raise BackendTimeout(f"{what}: goal not acknowledged within {link.timeouts.server_wait_s} s")
        handle = send.result()
        if not handle.accepted:
            raise BackendRefused(f"{what}: goal rejected", reason=state.refusal_reason())
        link.goals.append(handle)
        result_future = handle.get_result_async()
        limit = max(link.timeouts.step_reply_s * 10, 30.0)
        if not link.done_within(result_future, link.within_deadline(limit)):
            handle.cancel_goal_async()
            link.check_deadline(what)
            raise BackendTimeout(f"{what}: no result within {limit} s")
        link.goals.remove(handle)
        wrapped = result_future.result()
        result = wrapped.result
        if wrapped.status == GoalStatus.STATUS_ABORTED:
            reason = state.refusal_reason()
            if reason != "refused":   # aborted because the e-stop tripped or the episode ended
                raise BackendRefused(f"{what}: aborted by the driver", reason=reason)
        # The result is sent after the goal's last step was published; wait for that step's status (its gap is
        # the result's position) and its pose / joint states, so steps and a State built now are current.
        status = state.latest.wait(lambda s: s.step >= start_step
                                   and abs(s.gripper_opening - float(result.position)) < 1e-5, SETTLE_S)
        if status is None:
            status = link.require(state.latest, link.names.sim.episode_status, lambda s: s.step >= start_step)
        state.settle(status.sim_time)
        return GripperOutcome(position=float(result.position), effort=float(result.effort),
                              stalled=bool(result.stalled), reached_goal=bool(result.reached_goal),
                              steps=max(0, status.step - start_step))
