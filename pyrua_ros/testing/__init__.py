"""Test and benchmark support: loopback ROS environments, node processes, a spinning client.

Used by ``test/conftest.py`` and by ``benchmarks/``. Nothing here is imported by the product.

Threading model of :class:`RosClient`: it owns one rclpy context, one node and one executor spinning in one
daemon thread; callers wait on futures or events with deadlines and never spin themselves. ``close()``
shuts the executor down and joins the thread before the context is shut down.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

from pyrua_ros.bringup.process import stop_process_groups
from pyrua_ros.wire.goal_client import call_answered
from pyrua_ros.wire.rosenv import claim_domain_id, default_fastdds_profile
from pyrua_ros.wire.spin_thread import spin_until_shutdown


def apply_loopback_environment(env: dict | None = None) -> dict:
    """Set the loopback rules on ``env`` (``os.environ`` by default); must run before rclpy is imported."""
    env = os.environ if env is None else env
    if "rclpy" in sys.modules and env is os.environ:
        raise RuntimeError("rclpy was imported before the loopback environment was set")
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_LOCALHOST_ONLY", None)
    env.pop("ROS_STATIC_PEERS", None)
    if not env.get("PYRUA_TEST_DOMAIN_FIXED"):
        env["ROS_DOMAIN_ID"] = str(claim_domain_id())
    home = tempfile.mkdtemp(prefix="pyrua_ros_test_home_")
    env["ROS_HOME"] = home
    env["ROS_LOG_DIR"] = os.path.join(home, "log")
    env["PYRUA_REQUIRE_LOOPBACK"] = "1"
    default_fastdds_profile(env)
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class NodeProcess:
    """A node (or any command) started as a child process in its own process group, ended by its PID. Its output
    goes to ``log_path``, by default a file in this process's ROS home (:func:`apply_loopback_environment`), which
    the suite removes when all of a test process's tests passed and keeps after a failure."""

    def __init__(self, argv: list[str], *, env: dict | None = None, log_path: str | os.PathLike | None = None,
                 cwd: str | os.PathLike | None = None):
        self.argv = list(argv)
        home = os.environ.get("ROS_HOME")
        self.log_path = pathlib.Path(log_path) if log_path else pathlib.Path(tempfile.mkstemp(
            prefix="pyrua_node_", suffix=".log", dir=home if home and os.path.isdir(home) else None)[1])
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, env=dict(os.environ if env is None else env), stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)

    @classmethod
    def module(cls, module: str, *args: str, **kw) -> NodeProcess:
        """Start ``python -m module args...`` with this interpreter."""
        return cls([sys.executable, "-m", module, *args], **kw)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float) -> bool:
        return spin_until(lambda: text in self.output() or not self.alive(), timeout) and text in self.output()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL to this child's process group; returns the exit code."""

        stop_process_groups([self.proc], sigint_grace_s=timeout)
        self._log.close()
        return self.proc.returncode


def spin_until(predicate: Callable[[], bool], timeout: float, period: float = 0.02) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass; never sleeps blindly past the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(period, max(0.0, deadline - time.monotonic())))


class RosClient:
    """An external ROS client for tests: own context, one node, one executor in one thread."""

    def __init__(self, name: str = "pyrua_test_client"):
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"{name}-spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        spin_until_shutdown(self.executor, self.context, name=self.node.get_name())

    def wait_future(self, future, timeout: float):
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout):
            raise TimeoutError(f"future not done after {timeout} s")
        return future.result()

    def call(self, srv_type, name: str, request=None, timeout: float = 60.0):
        """Call an idempotent service (parameters, captures) as a fresh client and return its answer; the request
        is resent while unanswered, since a server that has not matched this client yet drops its answer."""

        cli = self.node.create_client(srv_type, name)
        try:
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"no service {name} within {timeout} s")
            answer = call_answered(cli, request if request is not None else srv_type.Request(), timeout)
            if answer is None:
                raise TimeoutError(f"{name}: no answer within {timeout} s")
            return answer
        finally:
            self.node.destroy_client(cli)

    def latest(self, msg_type, topic: str, timeout: float, qos=10, predicate=None, *, resubscribe_s: float = 5.0):
        """Subscribe, return the first message (matching ``predicate``) within ``timeout``, unsubscribe.

        A latched (transient-local) topic is subscribed again every ``resubscribe_s`` s while nothing came: Fast DDS
        now and then fails to hand a late-joining reader the writer's kept message (eProsima/Fast-DDS#3822), and a
        fresh reader is a fresh late joiner. A volatile topic keeps its one subscription (a gap could miss data)."""
        from rclpy.qos import DurabilityPolicy

        latched = getattr(qos, "durability", None) == DurabilityPolicy.TRANSIENT_LOCAL
        got: list = []
        ev = threading.Event()

        def cb(msg):
            if not ev.is_set() and (predicate is None or predicate(msg)):
                got.append(msg)
                ev.set()

        deadline = time.monotonic() + timeout
        while True:
            sub = self.node.create_subscription(msg_type, topic, cb, qos)
            try:
                left = deadline - time.monotonic()
                if ev.wait(min(left, resubscribe_s) if latched else left):
                    return got[0]
            finally:
                self.node.destroy_subscription(sub)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no {msg_type.__name__} on {topic} within {timeout} s")

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=5.0)
        self._thread.join(timeout=5.0)
        self.node.destroy_node()
        with contextlib.suppress(Exception):
            rclpy.shutdown(context=self.context)


@contextlib.contextmanager
def ros_client(name: str = "pyrua_test_client") -> Iterator[RosClient]:
    client = RosClient(name)
    try:
        yield client
    finally:
        client.close()


def checkout_revision(rev: str, root: str | os.PathLike) -> pathlib.Path:
    """The package and config of git revision ``rev`` of the repository at ``root``, unpacked into a temp dir that
    is removed when this process exits (benchmarks run a second code base beside the working tree, for
    before/after figures from one run)."""
    dest = pathlib.Path(tempfile.mkdtemp(prefix=f"pyrua_ros_{rev[:12]}_"))
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    archive = subprocess.run(["git", "archive", rev, "pyrua_ros", "config"], cwd=root, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def env_with_code(code: str | os.PathLike | None, env: dict | None = None) -> dict:
    """A copy of ``env`` (``os.environ`` by default) that imports the package from ``code`` (a checkout's root)
    first; unchanged when ``code`` is None."""
    env = dict(os.environ if env is None else env)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
    return env


@contextlib.contextmanager
def busy_loops(count: int | None = None) -> Iterator[list[int]]:
    """``count`` (default: one per core) processes spinning a CPU at full speed beside the block: the load a shared
    machine puts on a run. Yields their PIDs; each is ended by its PID on exit."""
    count = (os.cpu_count() or 1) if count is None else count
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              start_new_session=True) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)
