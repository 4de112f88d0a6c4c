"""Sending an action goal so that discovery cannot swallow it.

``ActionClient.wait_for_server`` returns once *this* side sees the server; the server may not have matched this
client's request writer yet (discovery runs on both sides, and between Jazzy's Fast DDS 2.14 and Kilted's 3.x the
server side can lag by seconds). A goal request sent into that gap is dropped without an answer, and the client
waits for an acceptance that never comes. :func:`send_goal_answered` sends the request again while no answer has
come, so a lost request costs one resend interval instead of the whole deadline. Every copy carries the first
request's goal id, so a server runs the goal at most once: a request that was only slow is answered accepted, its
copy is refused as a duplicate id, and that refusal is not taken for the goal's answer while the earlier request
may still be answered. (A second goal would not be harmless: a ``MoveToTarget`` copy starts where the first one
already converged, with its own iterations and feedback.)

Jazzy's rclpy (7.1) registers a goal, cancel or result request only *after* handing it to the middleware, and its
executor takes the answer without a lock: an answer that comes back fast is dropped as unexpected ("There may be
more than one action server for the action ...") and its future never completes. Kilted's takes both under one
lock. :func:`action_client` makes an ``ActionClient`` that does the same on every distro.

Service calls have the mirror gap: a server that has not yet matched a fresh client's response reader drops its
answer. :func:`call_answered` resends an *idempotent* request (parameter gets and sets, captures) the same way.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid

RESEND_AFTER_S = 2.0   # [s] no answer to a goal request for this long: send it again


def future_done_within(future, timeout: float) -> bool:
    """Wait for an rclpy future (completed by an executor thread) at most ``timeout`` s."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(max(0.0, timeout))


@functools.cache
def _locked_client_class():
    from rclpy.action import ActionClient

    class LockedActionClient(ActionClient):
        """An ActionClient whose executor cannot take an answer before its request is registered."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._request_lock = threading.RLock()

        def take_data(self):
            with self._request_lock:
                return super().take_data()

        def send_goal_async(self, *args, **kwargs):
            with self._request_lock:
                return super().send_goal_async(*args, **kwargs)

        def _cancel_goal_async(self, goal_handle):
            with self._request_lock:
                return super()._cancel_goal_async(goal_handle)

        def _get_result_async(self, goal_handle):
            with self._request_lock:
                return super()._get_result_async(goal_handle)

    return LockedActionClient


def action_client(node, action_type, name: str, **kwargs):
    """An ``rclpy.action.ActionClient`` of ``action_type`` on ``name`` (keyword arguments as ActionClient's) whose
    goal, cancel and result requests are registered before the executor may take their answers: on Jazzy's rclpy a
    fast answer is otherwise dropped (see the module docstring)."""
    return _locked_client_class()(node, action_type, name, **kwargs)


def new_goal_id():
    """A random ``unique_identifier_msgs/UUID`` for a goal request."""
    from unique_identifier_msgs.msg import UUID

    return UUID(uuid=list(uuid.uuid4().bytes))


def send_goal_answered(client, goal, timeout: float, *, feedback_callback=None,
                       resend_after_s: float = RESEND_AFTER_S, goal_id=None):
    """The goal handle the server answered with (accepted or rejected), or None when no answer came within
    ``timeout`` s. The request is resent every ``resend_after_s`` s while unanswered, always with the goal id
    ``goal_id`` (a new one when None), so the server runs the goal at most once; an accepted answer to any copy is
    the goal's answer, a rejection once the first copy is answered (else at the deadline). The caller waits for
    the server first."""
    goal_id = goal_id if goal_id is not None else new_goal_id()
    deadline = time.monotonic() + timeout
    answered = threading.Condition()
    futures: list = []

    def notify(_future) -> None:
        with answered:
            answered.notify_all()

    while True:
        future = client.send_goal_async(goal, feedback_callback=feedback_callback, goal_uuid=goal_id)
        with answered:
            futures.append(future)
        future.add_done_callback(notify)
        resend_at = min(time.monotonic() + resend_after_s, deadline)
        with answered:
            answered.wait_for(lambda: _answer(futures) is not None, max(0.0, resend_at - time.monotonic()))
            handle = _answer(futures)
        if handle is not None:
            return handle
        if time.monotonic() >= deadline:
            rejected = [f.result() for f in futures if f.done()]
            return rejected[0] if rejected else None


def _answer(futures: list):
    """The goal's answer among the answers to its copies so far: the first accepted one; a rejection once the
    first copy is answered (the server judged the goal on it; a later copy's rejection may only say that the id
    is taken); else None."""
    for future in futures:
        if future.done() and future.result().accepted:
            return future.result()
    return futures[0].result() if futures[0].done() else None


def call_answered(client, request, timeout: float, *, resend_after_s: float = RESEND_AFTER_S):
    """The answer to an idempotent service request, or None when none came within ``timeout`` s (the request is
    resent every ``resend_after_s`` s meanwhile). The caller waits for the service first."""
    deadline = time.monotonic() + timeout
    while True:
        future = client.call_async(request)
        if future_done_within(future, min(resend_after_s, deadline - time.monotonic())):
            return future.result()
        if time.monotonic() >= deadline:
            return None
