"""Sending an action goal so that discovery cannot swallow it.

``ActionClient.wait_for_server`` returns once *this* side sees the server; the server may not have matched this
client's request writer yet (discovery runs on both sides, and between Jazzy's Fast DDS 2.14 and Kilted's 3.x the
server side can lag by seconds). A goal request sent into that gap is dropped without an answer, and the client
waits for an acceptance that never comes. :func:`send_goal_answered` sends the request again while no answer has
come, so a lost request costs one resend interval instead of the whole deadline. A request that was only slow and
is answered twice is harmless: the newer goal preempts the older one (the driver's preemption rule).

Service calls have the mirror gap: a server that has not yet matched a fresh client's response reader drops its
answer. :func:`call_answered` resends an *idempotent* request (parameter gets and sets, captures) the same way.
"""

from __future__ import annotations

import threading
import time

RESEND_AFTER_S = 2.0   # [s] no answer to a goal request for this long: send it again


def future_done_within(future, timeout: float) -> bool:
    """Wait for an rclpy future (completed by an executor thread) at most ``timeout`` s."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(max(0.0, timeout))


def send_goal_answered(client, goal, timeout: float, *, feedback_callback=None,
                       resend_after_s: float = RESEND_AFTER_S):
    """The goal handle the server answered with (accepted or rejected), or None when no answer came within
    ``timeout`` s (requests resent every ``resend_after_s`` s meanwhile). The caller waits for the server first."""
    deadline = time.monotonic() + timeout
    while True:
        future = client.send_goal_async(goal, feedback_callback=feedback_callback)
        if future_done_within(future, min(resend_after_s, deadline - time.monotonic())):
            return future.result()
        if time.monotonic() >= deadline:
            return None


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
