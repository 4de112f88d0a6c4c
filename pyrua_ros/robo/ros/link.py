"""``RosLink``: the one owner of robo's ROS side; every adapter of :class:`~pyrua_ros.robo.ros_backend.RosBackend`
makes its subscriptions, clients and publishers on its nodes and waits through it.

Two nodes in one rclpy context, each with a ``SingleThreadedExecutor`` spinning in a named daemon thread. Every
wake-up of an rclpy executor walks all the entities of its nodes, in Python, so what every control step publishes
goes to a node with few of them: the *state* node (``<node>_state``, in the same namespace with the same
remappings) carries ``/ee_pose``, ``/joint_states``, episode status, safety events, ``/tf``, ``/clock`` (the
followed clock) and the gripper and Cartesian action clients (a goal's feedback comes every step), and the episode
host adds its subscriptions to the per-step topics there too (the recorder's stepwise topics, the video's).
``node`` (public: the episode host adds its recorder's other topics, and its agent publishers, to it) carries
everything else: capture topics, service clients; an episode wakes it a few times, not every step. ``node`` is the
link's own, in a context of its own, or the process's node when one is given (the launched ``agent`` node).
Callbacks never block (they store a value and notify), so one thread per executor is enough. Nothing here ever
spins a node from the caller's thread.

Every wait is bounded: by a timeout from ``timeouts`` in interfaces.yaml, shortened to the host's deadline
(:meth:`RosLink.set_deadline`); at the deadline the adapters' stop hooks run (motion stops) and the call raises
:class:`~pyrua_ros.robo.backend.BackendDeadline`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable

from pyrua_ros import cputime
from pyrua_ros.robo.backend import BackendDeadline, BackendRefused, BackendTimeout
from pyrua_ros.wire.followed_clock import FollowedClock
from pyrua_ros.wire.goal_client import action_client as make_action_client
from pyrua_ros.wire.goal_client import call_answered, future_done_within
from pyrua_ros.wire.interfaces import Interfaces, load
from pyrua_ros.wire.spin_thread import spin_until_shutdown

_instance_counter = itertools.count(1)
RESEND_AFTER_S = 5.0   # [s] an idempotent service request unanswered this long is sent again (see RosLink.call)


class Latest:
    """Holds the newest value of a stream and wakes waiters; ``wait(pred, timeout)`` returns the first value
    satisfying ``pred`` (the current one if it already does). Streams given the same ``cond`` share it, so one
    wait can watch several of them."""

    def __init__(self, cond: threading.Condition | None = None):
        self._cond = cond or threading.Condition()
        self.value = None

    def put(self, value) -> None:
        with self._cond:
            self.value = value
            self._cond.notify_all()

    def wait(self, pred, timeout: float):
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.value is None or not pred(self.value):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self.value


class RosLink:
    """The nodes, their executors, the deadline and the waits. ``interfaces``, ``node``, ``node_name`` and
    ``context_args``: as :class:`~pyrua_ros.robo.ros_backend.RosBackend` documents them. Make the adapters'
    entities, then :meth:`start` the executors; :meth:`close` releases everything (idempotent)."""

    def __init__(self, interfaces: Interfaces | None = None, *, node=None, node_name: str | None = None,
                 context_args: list[str] | None = None):
        import rclpy

        self.names = interfaces or load()
        self.timeouts = self.names.timeouts
        self.cancelled = threading.Event()   # set by the backend's cancel(); cleared by a reset
        self._deadline: float | None = None   # set by the host around each robo call (set_deadline)
        self._stops: list[Callable[[], None]] = []   # run when a wait reaches the deadline (on_deadline)
        self.goals: list = []   # handles of the action goals in flight (cancelled at the deadline and by cancel)
        self._closed = False
        self._executors, self._threads = [], []
        self._action_clients: list = []   # made by action_client(); destroyed by close() before the nodes

        self.owns_node = node is None
        if node is None:
            self.context = rclpy.Context()
            rclpy.init(args=list(context_args or []), context=self.context)
            node = rclpy.create_node(node_name or f"pyrua_robo_{next(_instance_counter)}", context=self.context)
        else:
            self.context = node.context
        self.node = node
        name = node.get_name()
        # The state node follows the node's namespace and remappings (the process's global arguments); only its
        # name is its own (a node-local __node remap wins over a global one such as the launch's __node:=agent).
        self.state_node = rclpy.create_node(f"{name}_state", context=self.context,
                                            cli_args=["--ros-args", "-r", f"__node:={name}_state"])
        # The driver's /clock from the start (the reset publishes one): what the agent side stamps (markers,
        # goal events) shares the driver's time line. A message every step: on the state node.
        self.followed_clock = FollowedClock(self.state_node, names=self.names)

    def start(self) -> None:
        """Spin both nodes, each in its own thread (once every adapter made its entities)."""
        from rclpy.executors import SingleThreadedExecutor

        for node in (self.state_node, self.node):
            executor = SingleThreadedExecutor(context=self.context)
            executor.add_node(node)
            thread = threading.Thread(target=self._spin, args=(executor,), name=f"{node.get_name()}-executor",
                                      daemon=True)
            self._executors.append(executor)
            self._threads.append(thread)
            thread.start()

    def _spin(self, executor) -> None:
        """Spin until shutdown; a callback that raises (a malformed message, say) is reported and the backend keeps
        receiving instead of going deaf."""
        with cputime.section(f"rclpy executor: {threading.current_thread().name}"):   # the thread's whole CPU
            spin_until_shutdown(executor, self.context, name="robo backend")

    # ------------------------------------------------------------------ deadline
    def set_deadline(self, deadline: float | None) -> None:
        """Every wait of the calls that follow ends by ``deadline`` (``time.monotonic()`` s; None: no bound)."""
        self._deadline = deadline

    @property
    def past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def within_deadline(self, timeout: float) -> float:
        """``timeout`` shortened to the host's deadline, if one is set (never below 0)."""
        if self._deadline is None:
            return timeout
        return max(0.0, min(timeout, self._deadline - time.monotonic()))

    def on_deadline(self, stop: Callable[[], None]) -> None:
        """Run ``stop`` (best effort) when a wait reaches the deadline, before :meth:`check_deadline` raises."""
        self._stops.append(stop)

    def check_cancelled(self, what: str) -> None:
        """BackendRefused (reason ``cancelled``) once the backend was cancelled, until the next reset."""
        if self.cancelled.is_set():
            raise BackendRefused(f"{what}: cancelled", reason="cancelled")

    def cancel_goals(self) -> None:
        """Ask the driver to cancel every action goal in flight (best effort, no wait)."""
        for handle in list(self.goals):
            with contextlib.suppress(Exception):
                handle.cancel_goal_async()

    def check_deadline(self, what: str) -> None:
        """At or past the host's deadline: stop the arm (goals cancelled, then the :meth:`on_deadline` hooks) and
        raise."""
        if not self.past_deadline:
            return
        self.cancel_goals()
        for stop in self._stops:
            with contextlib.suppress(Exception):
                stop()
        raise BackendDeadline(f"{what}: the time limit of this call was reached (cell timeout or episode budget); "
                              f"motion was stopped")

    # ------------------------------------------------------------------ action clients
    def action_client(self, action_type, name: str):
        """An action client of ``action_type`` on ``name``, on the state node (a goal's feedback comes every step),
        with introspection on; :meth:`close` destroys it before its node (an action client left to the garbage
        collector after its node was destroyed crashed a ``play`` process at exit)."""
        client = make_action_client(self.state_node, action_type, name)
        self._action_clients.append(client)
        self._introspect(client)
        return client

    def _introspect(self, client) -> None:
        """Publish the client's goal, result and cancel requests and answers on the action's service-event topics
        (stamped on the driver's /clock), so an episode bag records the commands themselves. Action
        introspection exists from Kilted on; on Jazzy the bag keeps the action's feedback and status only."""
        if not hasattr(client, "configure_introspection"):
            return
        from rclpy.service_introspection import ServiceIntrospectionState

        from pyrua_ros.wire import qos

        client.configure_introspection(self.followed_clock.clock, qos.EVENTS, ServiceIntrospectionState.CONTENTS)

    # ------------------------------------------------------------------ waits
    def wait_service(self, client, what: str, timeout: float | None = None) -> None:
        timeout = self.timeouts.server_wait_s if timeout is None else timeout
        if not client.wait_for_service(timeout_sec=timeout):
            raise BackendTimeout(f"{what}: no server after {timeout} s")

    @staticmethod
    def done_within(future, timeout: float) -> bool:
        """Wait for an rclpy future (completed by an executor thread) at most ``timeout`` s."""
        return future_done_within(future, timeout)

    def call(self, client, request, what: str, timeout: float, *, server_wait: float | None = None,
             resend_after_s: float | None = None):
        """Call a service and return its answer. ``resend_after_s`` (idempotent requests only): send the request
        again while no answer came for that long. A server that has not yet matched this client's response reader
        (discovery, slow under load) drops its answer ("failed to send response"), so the first request of a
        fresh client can go unanswered; a resend after discovery is answered."""
        self.wait_service(client, what, server_wait)
        budget = self.within_deadline(timeout)
        if resend_after_s is None:   # sent once: a reset or a capture must not run twice
            future = client.call_async(request)
            answer = future.result() if self.done_within(future, budget) else None
        else:
            answer = call_answered(client, request, budget, resend_after_s=resend_after_s)
        if answer is not None:
            return answer
        self.check_deadline(what)
        raise BackendTimeout(f"{what}: no answer after {timeout} s")

    def require(self, latest: Latest, what: str, pred=lambda _v: True, timeout: float | None = None):
        """The first value of ``latest`` satisfying ``pred`` within ``timeout`` (default ``server_wait_s``);
        BackendTimeout when none came."""
        timeout = self.timeouts.server_wait_s if timeout is None else timeout
        value = latest.wait(pred, timeout)
        if value is None:
            raise BackendTimeout(f"{what}: nothing received within {timeout} s")
        return value

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        import rclpy

        if self._closed:
            return
        self._closed = True
        for executor in self._executors:
            executor.shutdown(timeout_sec=5.0)
        for thread in self._threads:
            thread.join(timeout=5.0)
        for client in self._action_clients:
            with contextlib.suppress(Exception):
                client.destroy()
        for node in (self.node, self.state_node) if self.owns_node else (self.state_node,):
            with contextlib.suppress(Exception):
                node.destroy_node()
        if not self.owns_node:
            return   # the process's node and context are its owner's
        with contextlib.suppress(Exception):
            rclpy.shutdown(context=self.context)
