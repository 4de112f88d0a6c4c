"""Environment rules for every process that may start rclpy.

On these machines DDS must stay on loopback: ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (the kilted wheels
ignore ``ROS_LOCALHOST_ONLY``) and a ``ROS_DOMAIN_ID`` of the process's own, set before rclpy is imported.

- :func:`default_to_localhost` is for programs that start every node on one machine (``pyrualean play``, the
  pip launch runner): they default to LOCALHOST when the variable is unset, and leave an explicit value alone.
- :func:`check_node_environment` is called by every node's ``main()`` before importing rclpy. When
  ``PYRUA_REQUIRE_LOOPBACK=1`` (the test harness and CI set it) a node refuses to start unless discovery is
  LOCALHOST and a domain id is set, so a test that forgot the rule fails instead of multicasting.
- :func:`default_fastdds_profile` points Fast DDS at pyrua_ros's writer defaults (``fastdds_profile.xml``, and
  ``fastdds2_profile.xml`` for Jazzy's Fast DDS 2: a 100 ms heartbeat, so a large image that lost a fragment is
  repaired in a tenth of a second, not in 3 s) unless the user named a profile file of their own. Every node
  ``main()``, the one-machine programs and the test harness apply it; it must be in the environment before the
  process creates its DDS participant.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import fcntl
import os
import pathlib
import signal
import sys
import tempfile
from collections.abc import MutableMapping

from pyrua_ros.sim_interfaces import blas

DISCOVERY_VAR = "ROS_AUTOMATIC_DISCOVERY_RANGE"
LOCALHOST = "LOCALHOST"
REQUIRE_VAR = "PYRUA_REQUIRE_LOOPBACK"
PARENT_PID_VAR = "PYRUA_PARENT_PID"   # set by a process that starts a node it must not outlive
# The same writer defaults in the XML names of each Fast DDS major version (3 renamed the elements), and the
# variable each reads (Kilted's rmw also reads the 2.x one, so a process must carry only its own).
FASTDDS_PROFILES = {2: pathlib.Path(__file__).with_name("fastdds2_profile.xml"),
                    3: pathlib.Path(__file__).with_name("fastdds_profile.xml")}
FASTDDS_PROFILE_VARS = {2: "FASTRTPS_DEFAULT_PROFILES_FILE", 3: "FASTDDS_DEFAULT_PROFILES_FILE"}
FASTDDS2_DISTROS = frozenset({"humble", "iron", "jazzy"})   # distros whose rmw_fastrtps uses Fast DDS 2.x
DOMAIN_LOCK_DIR = pathlib.Path(tempfile.gettempdir()) / "pyrua_ros_domains"
DOMAIN_RANGE = range(120, 230)   # clear of 0 (the ROS default) and of common hand-picked ids
_held_locks: list = []


class UnsafeDiscoveryError(RuntimeError):
    """A node was about to start with DDS discovery beyond loopback where loopback is required."""


def default_to_localhost(env: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Set LOCALHOST discovery and a ROS home when unset; return the mapping (``os.environ`` by default)."""
    env = os.environ if env is None else env
    env.setdefault(DISCOVERY_VAR, LOCALHOST)
    if not env.get("HOME") and not env.get("ROS_HOME"):
        env["ROS_HOME"] = tempfile.mkdtemp(prefix="pyrua_ros_home_")
    default_fastdds_profile(env)
    return env


def fastdds_major(distro: str | None = None) -> int | None:
    """Fast DDS major version of ``distro`` (default: this process's, see ``wire.distro``); ``None`` if unknown."""
    from pyrua_ros.wire.distro import ros_distro

    try:
        distro = distro or ros_distro()
    except RuntimeError:
        return None
    return 2 if distro in FASTDDS2_DISTROS else 3


def default_fastdds_profile(env: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Point this process's Fast DDS at pyrua_ros's profile for its Fast DDS version when its variable is absent
    or names a pyrua_ros profile (a parent of the other distro may have set it), and drop a pyrua_ros profile
    meant for the other version; a user's own file is left alone. Return the mapping (``os.environ`` default)."""
    env = os.environ if env is None else env
    major = fastdds_major()
    if major is None:
        return env
    ours = {str(p) for p in FASTDDS_PROFILES.values()}
    for version, var in FASTDDS_PROFILE_VARS.items():
        current = env.get(var)
        if version == major and (current is None or current in ours):
            env[var] = str(FASTDDS_PROFILES[version])
        elif version != major and current in ours:
            del env[var]
    return env


def claim_domain_id() -> int:
    """Return a ROS domain id no other live process of this machine holds (an flock on a file per id).

    The lock lives as long as this process, so concurrent episodes and test sessions never share a domain;
    child processes inherit the id through ``ROS_DOMAIN_ID``. A node that outlived the process that claimed its
    domain (an orphan of a killed session) still answers there, so a domain some live process was started with
    is skipped too (:func:`domains_in_use`).
    """
    DOMAIN_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    start = os.getpid() % len(DOMAIN_RANGE)
    busy = domains_in_use()
    for k in range(len(DOMAIN_RANGE)):
        domain = DOMAIN_RANGE[(start + k) % len(DOMAIN_RANGE)]
        if domain in busy:
            continue
        fh = open(DOMAIN_LOCK_DIR / f"{domain}.lock", "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            continue
        fh.write(str(os.getpid()))
        fh.flush()
        _held_locks.append(fh)
        return domain
    raise RuntimeError(f"no free ROS domain id in {DOMAIN_RANGE.start}..{DOMAIN_RANGE.stop - 1}")


def domains_in_use() -> set[int]:
    """ROS domain ids in the start environment (``/proc/<pid>/environ``) of this machine's live processes that
    this user may read, this process excluded."""
    found = set()
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(b"ROS_DOMAIN_ID="):
                value = entry.split(b"=", 1)[1]
                if value.isdigit():
                    found.add(int(value))
    return found


def check_node_environment(env: MutableMapping[str, str] | None = None) -> None:
    """Raise :class:`UnsafeDiscoveryError` if loopback is required but not configured.

    Must run before ``import rclpy``; it also refuses to judge once rclpy is loaded, since the DDS
    participant may already exist.
    """
    env = os.environ if env is None else env
    if env.get(REQUIRE_VAR) != "1":
        return
    problems = []
    if env.get(DISCOVERY_VAR) != LOCALHOST:
        problems.append(f"{DISCOVERY_VAR}={env.get(DISCOVERY_VAR)!r} (must be {LOCALHOST!r})")
    if not env.get("ROS_DOMAIN_ID"):
        problems.append("ROS_DOMAIN_ID is unset")
    if "rclpy" in sys.modules and not problems:
        return
    if problems:
        raise UnsafeDiscoveryError(
            f"refusing to start a ROS node: {'; '.join(problems)}. {REQUIRE_VAR}=1 requires loopback-only DDS "
            f"discovery and an own domain id, set before rclpy is imported."
        )


def die_with_parent(env: MutableMapping[str, str] | None = None) -> None:
    """When ``PYRUA_PARENT_PID`` is set (by the pip runner, ``pyrualean play``, or the launch file for the
    ``ros2 launch`` process), ask Linux to SIGTERM this process when its parent dies (``PR_SET_PDEATHSIG``, which
    survives exec), so a launch or an episode killed even by SIGKILL leaves no node behind. Exits at once if the
    named process is already gone (it died before the request took effect). A process between the two (a
    ``--launch-prefix`` program) becomes the parent this node dies with. The variable is removed so grandchildren
    do not inherit it."""
    env = os.environ if env is None else env
    parent = env.pop(PARENT_PID_VAR, None)
    if not parent or not parent.isdigit():
        return

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent) and not _running(int(parent)):
        raise SystemExit(0)


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts as gone)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@contextlib.contextmanager
def rclpy_session(args: list[str] | None = None, context=None, **init_options):
    """``rclpy.init(args, context, **init_options)`` for the length of a ``with`` block, then shut that context
    down (``init_options``: e.g. ``signal_handler_options``).

    Works on every distro: kilted's ``rclpy.init`` returns a context manager, jazzy's returns ``None``.
    """
    import rclpy

    rclpy.init(args=args, context=context, **init_options)
    try:
        yield
    finally:
        rclpy.try_shutdown(context=context)


def dump_stacks_when_stuck_or_crashed() -> None:
    """Make ``kill -USR1 <pid>`` print every thread's stack to this process's stderr (what a node or a run that
    seems stuck is waiting on), and a crash (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) print them before the process
    dies of it, so a native crash in MuJoCo, EGL, DDS or numba says which Python code it came from. Without a real
    stderr (closed, not a file) nothing is registered."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
        faulthandler.enable(file=sys.__stderr__, all_threads=True)


class LostOutputGuard:
    """A text stream (``sys.stdout``/``sys.stderr``) whose writes never raise BrokenPipeError: a node's output is a
    pipe its launcher reads, and a launcher that died (SIGTERM or SIGKILL to ``ros2 launch``) leaves the node to end
    its episode with nobody reading. On the first broken pipe the stream's file descriptor is pointed at
    ``/dev/null``, so later writes (Python's and the C libraries') go nowhere and the teardown goes on."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def survive_lost_output() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`LostOutputGuard` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, LostOutputGuard):
            setattr(sys, name, LostOutputGuard(stream))


def node_preamble() -> None:
    """Call first in every node ``main()``: exit with status 3 and a clear message on an unsafe environment;
    run BLAS on one thread (:func:`pyrua_ros.sim_interfaces.blas.one_thread`);
    apply pyrua_ros's Fast DDS defaults (:func:`default_fastdds_profile`); tie the node's life to its parent's
    when asked (:func:`die_with_parent`); keep writing output from failing once its reader is gone
    (:func:`survive_lost_output`); dump stacks on SIGUSR1 and on a crash (:func:`dump_stacks_when_stuck_or_crashed`)."""
    try:
        check_node_environment()
    except UnsafeDiscoveryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    blas.one_thread()
    default_fastdds_profile()
    die_with_parent()
    survive_lost_output()
    dump_stacks_when_stuck_or_crashed()
