"""The Ray engine: episodes as Ray actor tasks, for when one machine is not enough.

Each slot is a Ray actor (``num_cpus`` / ``num_gpus`` per episode, placed by Ray anywhere in the cluster) holding
an :class:`~pyrua_ros.evaluation.worker.EpisodeWorker`: its driver node and ROS domain live as long as the actor,
and every ``run`` call is one episode. The actor claims its ROS domain and loopback discovery before it imports
rclpy, so co-located actors stay apart (DDS never leaves a node: every episode's nodes run where its actor runs).

Results reach ``OUT`` one of two ways: written in place when the actor sees the same ``OUT`` (a shared file system,
or the coordinator's own machine: checked with a token file under ``OUT/.eval``), or else written to a scratch
folder on the actor's node and returned as a gzipped tar that the coordinator unpacks into the instance's run
directory ("gather"). ``--ray-results shared|gather|auto`` forces one.

Without ``--address`` a private Ray instance is started on this machine with every server on loopback and no
dashboard; with one, the coordinator joins that cluster (``ray start --head`` there, see docs/USAGE.md).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import shutil
import signal
import socket
import tempfile
import time
from typing import Any

from pyrua_ros.evaluation.gather import pack
from pyrua_ros.evaluation.runner import EngineError
from pyrua_ros.evaluation.worker import EpisodeWorker, isolate_ros_domain
from pyrua_ros.sim_interfaces import blas

#: ``RAY_USAGE_STATS_REPORT_URL``: a head started by ``ray start --head`` with usage statistics off still posts a
#: "disabled" notice to Ray's usage server (https://usage-stats.ray.io): this one is a loopback port nothing serves
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}
#: the user's home folder, for the actors of a private instance (whose Ray processes get HOME = a private folder)
USER_HOME_ENV = "PYRUA_RAY_USER_HOME"
#: the autoscaler's cluster config that Ray's dashboard process reads from ``~`` (see :func:`private_ray_home`)
BOOTSTRAP_CONFIG = "ray_bootstrap_config.yaml"
DEFAULT_TOKEN_FILE = pathlib.Path.home() / ".ray" / "auth_token"
TOKEN_FILE = "ray-token"
RESULT_MODES = ("auto", "shared", "gather")


def loopback_ray_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """Make Ray choose 127.0.0.1 as this node's address (so every Ray server binds loopback only), keep usage
    statistics off, and require a token only this process and its children know (Ray would otherwise write one
    to ~/.ray); for a private single-machine instance and the tests' head node."""
    env = os.environ if env is None else env
    for key, value in LOOPBACK_ENV.items():
        env.setdefault(key, value)
    if "RAY_AUTH_MODE" not in env:
        env["RAY_AUTH_MODE"] = "token"
        env.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    return env


def private_ray_home(folder: pathlib.Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Give the Ray processes of a private instance (started with ``env``, by default this process's) ``folder``
    as HOME, holding an empty autoscaler config, and keep the user's home in ``PYRUA_RAY_USER_HOME`` for the
    actors (:class:`EpisodeActor` restores it).

    Why: a head's dashboard process always runs Ray's usage-statistics module (``include_dashboard=False`` loads
    that one alone), and it reads ``~/ray_bootstrap_config.yaml`` *before* it checks that usage statistics are off;
    without that file it asks the cloud metadata services which cloud it runs on (a DNS query for
    metadata.google.internal, HTTP to 169.254.169.254), on any machine with a default route. With the file there
    it reads it and asks nothing. A private instance (:func:`start_private_head`) starts no dashboard process, but
    the tests' multi-node cluster does, and the private HOME keeps every Ray process of an instance out of the
    user's home (``~/.ray``). Returns ``env``."""
    env = os.environ if env is None else env
    folder = pathlib.Path(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / BOOTSTRAP_CONFIG).write_text("# a private pyrua_ros Ray instance: no autoscaler, no cloud provider\n{}\n")
    env.setdefault(USER_HOME_ENV, env.get("HOME", str(pathlib.Path.home())))
    env["HOME"] = str(folder)
    return env


@contextlib.contextmanager
def _private_home_while_starting(folder: pathlib.Path):
    """:func:`private_ray_home` for the processes ``ray.init`` starts, then this process's HOME again."""
    saved = {key: os.environ.get(key) for key in ("HOME", USER_HOME_ENV)}
    private_ray_home(folder)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def private_temp_dir() -> pathlib.Path:
    """A new folder of this process's own for a private Ray instance's session files (logs, sockets, the
    object store's spill files), to pass as ``_temp_dir``: ``/tmp/pyrua-ray-XXXX/r``, where ``pyrua-ray-XXXX``
    is mode 0700 and ours (Ray makes the folder it is given mode 0777 itself, so the private one is its parent;
    short, as Ray's socket paths must fit 107 bytes). Ray's default, /tmp/ray, is shared by every user of the
    machine: another user (uid 65534, the kernel's) could rename a running instance's logs there. Remove the
    parent when done."""
    private = pathlib.Path(tempfile.mkdtemp(prefix="pyrua-ray-", dir="/tmp"))   # (mkdtemp: 0700, ours)
    info = private.stat()
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise OSError(f"{private} is not a private folder (mode {oct(info.st_mode & 0o777)}, uid {info.st_uid})")
    return private / "r"


def start_private_head(num_cpus: int, temp_dir: pathlib.Path):
    """Start the processes of a private single-machine Ray instance (call in the environment of
    :func:`loopback_ray_environment` and :func:`private_ray_home`, on the thread that lives as long as it: each
    process is tied to it by ``PR_SET_PDEATHSIG``); returns Ray's node object (``.address`` to join it with
    ``ray.init``, ``.kill_all_processes`` to end it).

    ``ray.init()`` would start the same head with two more Python processes that a private instance has no use
    for: the autoscaler's monitor (no nodes are ever added) and the log monitor (actors' output is not sent to this
    process, ``log_to_driver=False``); ``ray.init`` has no option to leave them out, Ray's node class (as its own
    multi-node test tooling uses it) does. Each is an interpreter importing Ray while the rest starts: on a loaded
    2-core machine they cost about a second of CPU and of wall time of the start (``benchmarks/ray_start.py``).

    Nor does it start the head's API server (Ray's "dashboard" process): with ``include_dashboard=False`` it
    serves no port and runs only Ray's usage-statistics module, whose report is off here. The start waited for
    its Python start (1.3-1.9 s of the 5-6 s to the driver's join on a 2-core machine) before it started the
    raylet (``benchmarks/ray_start.py``). Without it there is no job-submission or state API, which a private
    instance had no port for anyway.

    Its workers (the episode actors, and so their driver nodes and cell kernels) run at the coordinator's
    priority, as local workers do: Ray's default niceness for workers, 15, made every episode yield its CPU to
    whatever else ran on the machine."""
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    class HeadWithoutApiServer(Node):
        def start_api_server(self, *, include_dashboard, raise_on_failure):   # (Ray's signature)
            self._webui_url = None

    params = RayParams(node_ip_address="127.0.0.1", num_cpus=num_cpus, include_dashboard=False,
                       temp_dir=str(temp_dir), include_log_monitor=False, no_monitor=True,
                       _system_config={"worker_niceness": 0})
    return HeadWithoutApiServer(params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True)


def cluster_token_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """Joining a cluster: turn token authentication on when a token is at hand (``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH`` or ~/.ray/auth_token) and the mode was not chosen, as Ray does for local clusters."""
    env = os.environ if env is None else env
    if "RAY_AUTH_MODE" not in env and (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH")
                                       or DEFAULT_TOKEN_FILE.is_file()):
        env["RAY_AUTH_MODE"] = "token"
    return env


class EpisodeActor:
    """The actor body (wrapped by ``ray.remote`` in :class:`RayEngine`): one EpisodeWorker for its lifetime."""

    def __init__(self, slot: int, log_dir: str):
        home = os.environ.pop(USER_HOME_ENV, None)   # a private instance's actor: the user's home again
        if home:
            os.environ["HOME"] = home
        # Ray's workers block SIGINT, and a blocked signal stays blocked in every child (fork and exec keep the
        # mask): the driver node and the cell kernels would ignore the SIGINT that asks them to stop, and each
        # stop would wait out its grace period (closing two actors took 16 s instead of 2). A SIGINT to the
        # actor itself now raises KeyboardInterrupt, as in a local worker: the episode ends as interrupted.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        blas.one_thread()   # a cluster started elsewhere gave this worker no OPENBLAS_NUM_THREADS

        self.domain = isolate_ros_domain()
        self.slot = slot
        self.scratch = pathlib.Path(tempfile.mkdtemp(prefix=f"pyrua_eval_actor{slot}_"))
        import ray

        self.worker = EpisodeWorker(slot, pathlib.Path(log_dir) if _writable(log_dir) else self.scratch / "logs",
                                    node_address=ray.util.get_node_ip_address())

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname(), "node_address": self.worker.node_address,
                "ros_domain_id": self.domain}

    def run(self, job: dict[str, Any], out_root: str, token: str, mode: str, statuses=None) -> dict[str, Any]:
        """One episode; the summary, plus ``archive`` (gzipped tar of the run directory) when gathering.
        ``statuses``: a Ray queue the per-turn agent status goes to (for the coordinator's live view)."""
        shared = mode == "shared" or (mode == "auto" and _token_matches(out_root, token))
        event: dict[str, Any] = {"event": "done", "worker": self.slot, "instance": job["instance"]}
        on_status = None
        if statuses is not None:
            def on_status(status: dict[str, Any]) -> None:
                with contextlib.suppress(Exception):
                    statuses.put_nowait({"event": "status", "worker": self.slot, "status": status})
        if shared:
            event["summary"] = self.worker.run(job, on_status=on_status)
            return event
        local_out = self.scratch / "run"
        if local_out.exists():
            shutil.rmtree(local_out)
        job = {**job, "out": str(local_out)}   # written here first, packed and returned below
        try:
            event["summary"] = self.worker.run(job, on_status=on_status)
        finally:
            if local_out.exists():
                import socket

                event["archive"] = pack(local_out)
                event["gathered_from"] = {"host": socket.gethostname(), "path": str(local_out)}
        return event

    def close(self) -> None:
        self.worker.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _writable(folder: str) -> bool:
    with contextlib.suppress(OSError):
        pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
        return os.access(folder, os.W_OK)
    return False


def _token_matches(out_root: str, token: str) -> bool:
    with contextlib.suppress(OSError):
        return (pathlib.Path(out_root) / ".eval" / TOKEN_FILE).read_text().strip() == token
    return False


class RayEngine:
    """``slots`` Ray actors; the same interface as :class:`~pyrua_ros.evaluation.local.LocalEngine`."""

    name = "ray"

    def __init__(self, slots: int | None, out: pathlib.Path, *, address: str | None = None,
                 cpus_per_episode: float = 1.0, gpus_per_episode: float = 0.0, results: str = "auto",
                 max_slots: int | None = None):
        if results not in RESULT_MODES:
            raise ValueError(f"--ray-results must be one of {', '.join(RESULT_MODES)}; got {results!r}")
        self.slots = slots   # None: the cluster's CPUs / cpus_per_episode, at most max_slots
        self.max_slots = max_slots
        self.out = pathlib.Path(out).resolve()
        self.address = address
        self.cpus, self.gpus = cpus_per_episode, gpus_per_episode
        self.results = results
        self.token = secrets.token_hex(16)
        self.actors: dict[int, Any] = {}
        self.worker_info: list[dict[str, Any]] = []   # one entry per actor: slot, host, pid, ROS domain
        self.running: dict[Any, int] = {}   # object ref -> slot
        self.pending: dict[int, Any] = {}   # slot -> its new actor's ``info`` ref, until it answers
        self.ready: set[int] = set()   # slots whose actor answered
        self.unplaced_since: float | None = None   # since when no actor runs and none found room
        self.placement_timeout_s = 600.0
        self.statuses = None
        self.closing = False
        self.temp_dir: pathlib.Path | None = None   # a private instance's own session folder (private_temp_dir)
        self.head = None   # a private instance's head node (:func:`start_private_head`), ended by :meth:`close`
        self.timings: dict[str, float] = {}   # where Ray's own time went (seconds): see :meth:`start`, :meth:`close`
        self.on_note = None   # called with a line for the progress view at each step of :meth:`start`

    def start_note(self) -> str:
        """What :meth:`start` is about to do, for the progress view (a private start takes tens of seconds)."""
        if self.address:
            return f"joining the Ray cluster at {self.address}"
        return "starting a private Ray instance on this machine (loopback only; this takes a while)"

    def started_note(self) -> str:
        """What :meth:`start` did and how long it took, for the progress view."""
        what = f"joined the Ray cluster at {self.address}" if self.address else "private Ray instance started"
        took = self.timings.get("ray_init_s", 0.0) + self.timings.get("actors_start_s", 0.0)
        return f"{what} in {took:.0f} s; {len(self.ready)} of {self.slots} episode actor(s) ready"

    def start(self) -> None:
        if self.address:   # both are read when ray is imported: they must come first
            cluster_token_environment()
        else:
            loopback_ray_environment()
        import ray

        t0 = time.monotonic()
        token_path = self.out / ".eval" / TOKEN_FILE
        token_path.parent.mkdir(parents=True, exist_ok=True)
        token_path.write_text(self.token)
        if self.address:
            ray.init(address=self.address, logging_level="WARNING", log_to_driver=False)
        else:
            self._start_private(ray)
        self.timings["ray_init_s"] = round(time.monotonic() - t0, 2)
        if self.on_note is not None:
            what = f"joined the Ray cluster at {self.address}" if self.address else "private Ray instance up"
            self.on_note(f"{what} in {self.timings['ray_init_s']:.0f} s; starting the episode actors")
        if self.slots is None:
            fit = int(ray.cluster_resources().get("CPU", 1) / self.cpus)
            self.slots = max(1, min(fit, self.max_slots or fit))
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        self.statuses = Queue(maxsize=1000, actor_options={"num_cpus": 0, "scheduling_strategy": here})   # (lives
        # on the coordinator's node: it outlives any other node)
        self._actor_class = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0)(EpisodeActor)
        t1 = time.monotonic()
        self._new_actors(range(self.slots), wait_s=300.0)
        self.timings["actors_start_s"] = round(time.monotonic() - t1, 2)

    def _start_private(self, ray, tries: int = 2) -> None:
        """A private instance (:func:`start_private_head`, then this process joins it); a second try when the
        first timed out (Ray waits a fixed 30 s for its raylet, which a machine loaded many times over its cores
        can miss)."""
        slots = self.slots or os.cpu_count() or 1
        for attempt in range(1, tries + 1):
            if self.temp_dir is not None:
                shutil.rmtree(self.temp_dir.parent, ignore_errors=True)
            self.temp_dir = private_temp_dir()
            try:
                with _private_home_while_starting(self.temp_dir.parent / "home"):
                    self.head = start_private_head(max(1, int(slots * self.cpus + 0.999)), self.temp_dir)
                ray.init(address=self.head.address, logging_level="WARNING", log_to_driver=False,
                         _node_ip_address="127.0.0.1")   # (without it, a UDP probe finds this machine's address)
                return
            except Exception:
                with contextlib.suppress(Exception):
                    ray.shutdown()
                self._end_head()   # the processes this try started
                if attempt == tries:
                    raise
                self.timings["failed_starts"] = attempt

    def _end_head(self) -> None:
        if self.head is not None:
            with contextlib.suppress(Exception):
                self.head.kill_all_processes(check_alive=False, allow_graceful=True)
            self.head = None

    def _new_actors(self, slots, wait_s: float = 0.0) -> None:
        """Start actors for ``slots``; each slot takes episodes once its actor answers where it runs (host, pid,
        ROS domain), waited for up to ``wait_s`` here, later checked by :meth:`submit`. A replacement for an actor
        whose node died may wait for room in the cluster: its slot stays idle meanwhile, and the survivors run the
        episodes."""
        import ray

        for slot in slots:
            self.actors[slot] = self._actor_class.remote(slot, str(self.out / ".eval" / "logs"))
            self.pending[slot] = self.actors[slot].info.remote()
        self.ready.difference_update(slots)
        if wait_s > 0 and slots:
            with contextlib.suppress(Exception):
                ray.wait([self.pending[slot] for slot in slots], num_returns=len(slots), timeout=wait_s)
        for slot in slots:
            self._placed(slot)

    def _placed(self, slot: int) -> bool:
        """Whether ``slot``'s actor runs (recording where, the first time it answers)."""
        import ray

        if slot in self.ready:
            return True
        ref = self.pending.get(slot)
        if ref is None or not ray.wait([ref], timeout=0)[0]:
            return False
        del self.pending[slot]
        try:
            self.worker_info.append({"slot": slot, **ray.get(ref)})
        except Exception:   # died before it answered: another one
            self._new_actors([slot])
            return False
        self.ready.add(slot)
        return True

    def submit(self, slot: int, job: dict[str, Any]) -> bool:
        """Hand ``job`` to ``slot``'s actor; False while that actor waits for a place in the cluster."""
        if not self._placed(slot):
            if self.ready or self.running:
                self.unplaced_since = None
            elif self.unplaced_since is None:
                self.unplaced_since = time.monotonic()
            elif time.monotonic() - self.unplaced_since > self.placement_timeout_s:

                raise EngineError(f"no episode actor found room in the Ray cluster for "
                                  f"{self.placement_timeout_s:.0f} s (each needs {self.cpus:g} CPU, "
                                  f"{self.gpus:g} GPU); `ray status` shows what the cluster has")
            return False
        ref = self.actors[slot].run.remote(job, str(self.out), self.token, self.results, self.statuses)
        self.running[ref] = slot
        return True

    def _interrupt_running(self) -> None:
        import ray

        here = socket.gethostname()
        where = {info["slot"]: info for info in self.worker_info}   # the newest actor of each slot
        for ref, slot in list(self.running.items()):
            info = where.get(slot, {})
            if info.get("host") == here and info.get("pid"):
                with contextlib.suppress(OSError):
                    os.kill(info["pid"], signal.SIGTERM)   # the episode's own handler: an "interrupted" record
            else:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=False)

    def poll(self, timeout: float) -> list[dict[str, Any]]:
        """The episodes finished now, else the first to finish within ``timeout`` s (returned as soon as it did, so
        its actor gets its next job at once, as a local worker does), with the per-turn statuses queued meanwhile."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        events = []
        with contextlib.suppress(Exception):   # per-turn statuses, best effort
            events += self.statuses.get_nowait_batch(self.statuses.qsize())
        if not self.running:
            time.sleep(min(timeout, 0.2))
            return events
        refs = list(self.running)
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:   # the others that finished meanwhile, without waiting
            ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        for ref in ready:
            slot = self.running.pop(ref)
            try:
                events.append(ray.get(ref))
            except (RayActorError, RayTaskError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                events.append({"event": "crash", "worker": slot, "instance": None, "detail": f"Ray: {first}"})
                self.ready.discard(slot)
                if not self.closing:
                    with contextlib.suppress(Exception):
                        ray.kill(self.actors[slot])
                    self._new_actors([slot])
        return events

    def close(self, *, interrupted: bool) -> None:
        """When ``interrupted``, end running episodes as ``interrupted`` (SIGTERM to actors on this machine, a
        task cancel elsewhere) and give them a minute to write their records; then stop every actor's driver, end
        the actors, and disconnect (a private Ray instance ends with it)."""
        import ray

        self.closing = True
        if not ray.is_initialized():   # it never started (a Ray call here could start a default instance)
            self._end_head()
            self._remove_private_files()
            return
        if interrupted and self.running:
            self._interrupt_running()
            with contextlib.suppress(Exception):
                ray.wait(list(self.running), num_returns=len(self.running), timeout=60.0)
        t0 = time.monotonic()
        closing = []
        for slot in self.ready:   # (an actor still waiting for a place would never answer)
            with contextlib.suppress(Exception):
                closing.append(self.actors[slot].close.remote())
        with contextlib.suppress(Exception):
            ray.wait(closing, num_returns=len(closing), timeout=60.0)
        for actor in self.actors.values():
            with contextlib.suppress(Exception):
                ray.kill(actor)
        with contextlib.suppress(Exception):
            self.statuses.shutdown()
        self.timings["actors_close_s"] = round(time.monotonic() - t0, 2)
        if ray.is_initialized():
            ray.shutdown()
        self._end_head()
        self.timings["close_s"] = round(time.monotonic() - t0, 2)
        self._remove_private_files()

    def _remove_private_files(self) -> None:
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir.parent, ignore_errors=True)
        with contextlib.suppress(OSError):
            (self.out / ".eval" / TOKEN_FILE).unlink()
