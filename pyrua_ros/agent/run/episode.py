"""Episodes by composition: a robot host plus an agent strategy, run as a short sequence of named steps.

- :class:`DriverProcess` — the driver node (LIBERO sim or fake arm) started for an episode or a batch of them,
  ended by its PID; when it dies, :meth:`~DriverProcess.death_message` holds its last error line.
- :class:`EpisodeHost` — the robot side that outlives one episode if asked to: the driver process (or none, for
  ``--driver external``), the ROS backend and the VLA policy server of ``--vla-server-cmd``. ``reset`` waits for
  the driver only while it is alive. A batch runner opens one host and passes it to many :class:`Episode` objects
  (``host=``); an episode that made its own host closes it.
- :class:`AgentStrategy` — what one arm does inside an episode (4 methods): the loop arms over a runtime
  (:class:`pyrua_ros.agent.loop.arms.LoopAgent`: ``cells``, ``program``) and the single shot
  (:class:`pyrua_ros.agent.run.single_shot.SingleShotAgent`).
- :class:`Episode` — one run directory: boot (reset, robo, recorder, video, card), the strategy's start and run,
  the benchmark's verdict, shutdown, and ``result.json``.

``result.json`` is written first as a placeholder that says the episode is running (so a process killed with
SIGKILL still leaves a record that says what happened), then rewritten in ``finally`` whatever happened: model
server, simulator or cell failures included. SIGINT, SIGTERM and SIGHUP (those the process does not ignore) become
KeyboardInterrupt so the ``finally`` runs; an interrupted episode's status is ``interrupted`` (never a success, in
no rate). Once interrupted, or once the shutdown has begun, further ones are ignored, and the shutdown waits for
nothing the interrupt stopped (the driver's last stream frames, a final capture), so the records are complete within
the 5 s that ``ros2 launch`` waits before it escalates to SIGTERM.

Run directory (PYRUALEAN-CONTRACT.md 6.1): result.json, prompt.txt, card.json + card/*.png, workspace/cell_NNN.py
(or program_NN.py), tool_turns.json, calls.jsonl, <runtime>_events.jsonl, transcript.json, last_message.md,
host.log (driver output), episode.mp4 and episode.mcap.
"""

from __future__ import annotations

import contextlib
import math
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Protocol

from pyrua_ros import cputime
from pyrua_ros.agent.loop.arms import LoopAgent
from pyrua_ros.agent.run.interrupts import FirstSignalInterrupts
from pyrua_ros.agent.run.vla_server import VlaServer
from pyrua_ros.agent.run.watchdog import MARGIN_S as WATCHDOG_MARGIN_S
from pyrua_ros.agent.run.watchdog import Watchdog
from pyrua_ros.bringup import graph, runner
from pyrua_ros.bringup.process import interrupt_in, stop_process_groups
from pyrua_ros.kernel import Kernel, KernelLimits
from pyrua_ros.records.outcome import StrategyOutcome
from pyrua_ros.records.publisher import AgentPublisher
from pyrua_ros.records.recorder import record_episode, state_topics
from pyrua_ros.records.records import CardRecord, ErrorInfo, RunRecords, open_record
from pyrua_ros.records.video import EpisodeVideo
from pyrua_ros.robo.codecs import decode_png
from pyrua_ros.robo.libero import libero_host
from pyrua_ros.robo.ros_backend import RosBackend
from pyrua_ros.robo.segmenters import HttpSegmenter
from pyrua_ros.robo.vla import connect
from pyrua_ros.settings.config import CompatSettings, OutputSettings, SandboxSettings
from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.wire.rosenv import PARENT_PID_VAR

STREAM_QUIET_S = 1.0        # [s] no new camera frame for this long: the driver's stream backlog is done
STREAM_FLUSH_MAX_S = 15.0   # [s] longest wait for the next frame at the end of an episode
STREAM_FLUSH_CAP_S = 60.0   # [s] longest wait in all (a lockstep driver's full backlog draining under load)
SANDBOX_DESCRIPTION = ("cells run in a separate process that holds no ROS handle; robo is a proxy over a pipe "
                       "(JSON + raw buffers); per-cell wall-clock timeout with interrupt, then kill and restart; "
                       "address-space, CPU, file-size and process limits; import allow-list; open() confined to "
                       "the workspace")
DRIVER_POLL_S = 0.1
_ERROR_LINE = re.compile(r"error|exception|fatal|traceback|refused|invalid|unknown|out of range", re.I)


class BootError(RuntimeError):
    """The robot could not be brought up (driver, reset, card); the agent never started."""


class DriverProcess:
    """The node of the driver ``episode.driver`` (one we start), with its output appended to ``log_path``."""

    def __init__(self, episode, log_path: pathlib.Path):
        values = {"robot": episode.driver, "suite": episode.suite, "task": str(episode.task),
                  "seed": str(episode.seed), "max_episode_steps": str(episode.max_episode_steps),
                  "clock_mode": episode.clock, "blas_kernel": episode.blas_kernel}
        if episode.video_fps is not None:
            values["camera_rate_hz"] = str(episode.video_fps)
        nodes = [n for n in graph.plan(values) if n.key in DRIVERS]   # the driver's node: keyed by its name
        if len(nodes) != 1:
            raise BootError(f"driver {episode.driver!r}: expected one driver node, planned {[n.key for n in nodes]}")
        self.name = nodes[0].executable
        self.argv = runner.command(nodes[0])
        self.log_path = pathlib.Path(log_path)
        env = dict(os.environ, **nodes[0].env)
        env[PARENT_PID_VAR] = str(os.getpid())   # the node exits if this process dies, even by SIGKILL
        env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)

        self._log = open_record(self.log_path)   # a fresh file of this run, never a link planted there
        self.proc = subprocess.Popen(self.argv, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def last_error_line(self) -> str | None:
        """The last line of the driver's output that reads like an error (else its last line), or None."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, self.log_path.stat().st_size - 16384))
                lines = [ln.strip() for ln in handle.read().decode(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return None
        for line in reversed(lines):
            if _ERROR_LINE.search(line):
                return line
        return lines[-1] if lines else None

    def death_message(self) -> str:
        """Why the driver is gone, with its last error line."""
        code = self.proc.poll()
        line = self.last_error_line()
        status = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
        return f"the {self.name} exited with {status}" + (f": {line}" if line else f" (see {self.log_path})")

    def stop(self) -> None:
        stop_process_groups([self.proc], sigint_grace_s=15.0)
        self._log.close()


class EpisodeHost:
    """The robot side of one or more episodes: the driver process (unless external) and the ROS backend.

    ``open(log_path)`` starts them; ``reset(episode)`` starts an episode; ``robot(episode)`` gives a fresh
    :class:`~pyrua_ros.robo.host.RobotHost` (ledger, artifacts) per episode; ``close()`` ends everything it started.
    ``cuda_device``: the GPU of the ``--vla-server-cmd`` server (``CUDA_VISIBLE_DEVICES``), as the reference boots
    Pi0.5 on ``--cuda-device``.
    """

    def __init__(self, episode, *, on_phase=None, node=None, cuda_device: str | None = None):
        self.settings = episode
        self.node = node     # the launched agent node robo runs on (agent_node); None: robo makes its own
        self.driver: DriverProcess | None = None
        self.backend = None
        self.vla_server = None
        self.vla_client = None   # connected to vla_server once it answers
        self.cuda_device = cuda_device
        self._on_phase = on_phase or (lambda *_a: None)

    def open(self, log_path: pathlib.Path) -> None:
        e = self.settings
        if e.primitive_set == "full" and e.vla_server_cmd:   # boots while the driver boots

            try:
                self.vla_server = VlaServer(e.vla_server_cmd, log=log_path.parent / "vla_server.log",
                                            cuda_device=self.cuda_device, endpoint=e.vla_endpoint)
            except (RuntimeError, ValueError) as exc:
                raise BootError(str(exc)) from exc
            self._on_phase("boot", f"VLA policy server starting on {self.vla_server.endpoint} (its output goes to "
                                   "vla_server.log)")
        if DRIVERS[self.settings.driver].starts_node:
            self.driver = DriverProcess(self.settings, log_path)
            self._on_phase("boot", f"{self.driver.name} started (pid {self.driver.pid}; its output goes to "
                                   f"{log_path.name})")
        else:
            self._on_phase("boot", f"driver {self.settings.driver}: using the drivers already running")
        cputime.mark("host: driver started")
        self.backend = RosBackend(node=self.node)
        cputime.mark("host: backend ready")
        if self.vla_server is not None:
            self._on_phase("boot", f"waiting for the VLA policy server on {self.vla_server.endpoint}")
            try:
                self.vla_client = self.vla_server.wait_ready(e.vla_server_timeout_s)
            except RuntimeError as exc:
                raise BootError(str(exc)) from exc

    def while_driver_alive(self, fn, what: str):
        """``fn()``, but a driver that exits meanwhile ends the wait at once with a BootError naming its last error."""
        if self.driver is None:
            return fn()
        box: dict[str, Any] = {}

        def target():
            try:
                box["value"] = fn()
            except BaseException as exc:   # handed to the caller below
                box["error"] = exc

        worker = threading.Thread(target=target, name=what, daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(DRIVER_POLL_S)
            if worker.is_alive() and not self.driver.alive():
                worker.join(0.5)   # an answer that was already on its way
                if worker.is_alive():
                    raise BootError(f"{what} failed: {self.driver.death_message()}")
        if "error" in box:
            if not self.driver.alive():
                raise BootError(f"{what} failed: {self.driver.death_message()}") from box["error"]
            raise box["error"]
        return box["value"]

    def reset(self, episode):
        """Reset the driver to ``episode`` (suite, task, seed, step budget); the new episode status."""
        try:
            return self.while_driver_alive(
                lambda: self.backend.reset(episode.suite, episode.task, episode.seed, episode.max_episode_steps),
                "episode reset")
        except BootError:
            raise
        except Exception as exc:
            raise BootError(f"episode reset failed: {type(exc).__name__}: {exc}") from exc

    def robot(self, episode):
        """A fresh robot host for one episode (primitive set, segmenter and VLA client of ``episode``)."""

        segmenter = None
        if episode.sam3_endpoint:

            endpoint = episode.sam3_endpoint
            segmenter = HttpSegmenter(endpoint if "://" in endpoint else f"http://{endpoint}/segment")
        vla = None
        if episode.primitive_set == "full":

            vla = self.vla_client if self.vla_client is not None else connect(episode.vla_endpoint)
        return libero_host(self.backend, primitives=episode.primitive_set, segmenter=segmenter, vla=vla)

    def close(self) -> None:
        try:
            if self.backend is not None:
                self.backend.close()
        finally:
            try:
                if self.driver is not None:
                    self.driver.stop()
            finally:
                if self.vla_server is not None:
                    self.vla_server.stop()


class AgentStrategy(Protocol):
    """What one arm does inside an :class:`Episode`: ``start`` and ``close`` read the episode and write their
    records; ``run`` returns a frozen :class:`~pyrua_ros.records.outcome.StrategyOutcome` that the episode
    applies, so how an episode ended is set in one place."""

    def start(self, ep: Episode) -> None:
        """Write the arm's inputs (prompt.txt, policy.py ...) and start its kernel and runtime."""

    def run(self, ep: Episode) -> StrategyOutcome:
        """Run the agent and say how it ended; the episode applies the outcome (:meth:`Episode.apply_outcome`)
        and times the call (``policy_wall_s``)."""

    def close(self, ep: Episode) -> None:
        """Stop the kernel/runtime and write the arm's own records (tool turns, transcript ...)."""

    def result(self, ep: Episode, placeholder: bool = False):
        """The result record (written to result.json by the episode); ``placeholder``: the 'still running' one."""


class Episode:
    """One episode in ``out``: ``settings`` (an :class:`~pyrua_ros.settings.config.EpisodeSettings`),
    ``output`` and ``compat`` settings, an :class:`AgentStrategy`, and optionally a lent :class:`EpisodeHost`
    (kept open).

    Fields the strategy and the result read: ``out``, ``workspace``, ``host`` (EpisodeHost), ``robot``
    (RobotHost), ``card``, ``prompt``, ``task_language``, ``status``, ``reason``, ``error``, ``notes``,
    ``environment_success``, ``env_steps_total``, ``startup_s``, ``policy_wall_s``, ``t0`` (the one clock of the
    episode: ``time.monotonic()`` at its start), ``interrupted_by`` (signal number of an interrupt).
    """

    def __init__(self, settings, strategy: AgentStrategy, *, out: pathlib.Path, output=None, compat=None,
                 host: EpisodeHost | None = None, progress=None, node=None):

        self.settings = settings
        self.strategy = strategy
        self.output = output or OutputSettings(out=out)
        self.compat = compat or CompatSettings()
        self.out = pathlib.Path(out).resolve()
        self.workspace = self.out / "workspace"
        self.progress = progress
        self.host = host
        self.node = node     # for a host of its own: the process's ROS node robo runs on (None: robo makes one)
        self._own_host = host is None
        self.robot = None
        self.recorder = self.video = self.publisher = None
        self.card: CardRecord | None = None
        self.prompt = None
        self.task_language: str | None = None
        self.notes: list[str] = []
        self.status, self.reason, self.error = "error", None, None
        self.environment_success = False
        self.env_steps_total: int | None = None
        self.state_digest: dict | None = None   # the driver's per-step state digests (sim_interfaces/state_digest.py)
        self.episode_id: int | None = None   # the driver's id of THIS episode's reset; None until the reset answered
        self.startup_s = self.policy_wall_s = None
        self.interrupted_by: int | None = None
        self.kernel = None          # the cell kernel, once the strategy opened it (open_kernel)
        self.records = RunRecords(self.out)   # the one writer of this run directory's records
        self.calls_written = None   # the ledger records calls.jsonl was written from: result.json counts the same
        self.t0 = getattr(progress, "t0", None) or time.monotonic()   # the progress view's clock when there is one

    # ------------------------------------------------------------------ progress
    def phase(self, name: str, detail: str = "") -> None:
        """Tell the person watching what the episode is doing now (boot, reset, card, prompt, agent, ...)."""
        cputime.mark(f"phase:{name}")
        if self.progress is not None:
            self.progress.phase(name, detail, elapsed_s=time.monotonic() - self.t0)

    # ------------------------------------------------------------------ steps
    def prepare(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(exist_ok=True)
        self.write_result(placeholder=True)
        if (self.compat.cuda_device is not None and not self.settings.vla_server_cmd) or self.compat.rpent_root:
            self.notes.append("--cuda-device (without --vla-server-cmd) and RPENT_ROOT (beyond --guides) have no "
                              "meaning for a ROS backend; recorded only")
        fallback = self.settings.vla_fallback
        if fallback and getattr(self.strategy, "model_calls", False):   # a model could call a VLA skill: say so
            self.notes.append(fallback)
            print(f"note: {fallback}", file=sys.stderr, flush=True)

    def boot(self) -> None:
        e = self.settings
        if self.host is None:
            self.host = EpisodeHost(e, on_phase=self.phase, node=self.node, cuda_device=self.compat.cuda_device)
            self.host.open(self.out / "host.log")
        if self.host.vla_server is not None:
            self.notes.append(f"VLA policy server started by --vla-server-cmd on {self.host.vla_server.endpoint}")
        node = self.host.backend.node
        if self.output.record:
            self._start_recorder(self.host.backend)
        self.phase("reset", f"{e.suite} task {e.task} seed {e.seed} (the first reset waits for the driver to "
                            "build its scene)")
        if self.recorder is not None:
            self.recorder.begin()   # what a shared driver still published of an earlier episode stays out
        status = self.host.reset(e)
        cputime.mark("boot: reset answered")
        self.episode_id = status.episode_id
        if self.recorder is not None:
            self.recorder.start_at(status.sim_time)   # stream frames stamped before the reset are an earlier one's
        self.task_language = status.task_language
        self.robot = self.host.robot(e)

        self.publisher = AgentPublisher(node, self.robot.ledger, clock=self.host.backend.followed_clock)
        if self.output.video:

            self.video = EpisodeVideo(self.host.backend.stepwise_node, task=self.task_language or "")
        self.phase("card", f'"{self.task_language}": capturing the card images')
        state = self.robot.robo.state()
        self.host.while_driver_alive(lambda: self.robot.capture_boot_images("high"), "card capture")
        self.card = self._write_card(state)
        if self.video is not None:   # the first state of the video is the card view

            for camera in self.host.backend.cameras:
                self.video.add_frame(camera, status.sim_time, decode_png(self.robot.artifact(f"{camera}_high.png",
                                                                                             step=0)))
        self.startup_s = round(time.monotonic() - self.t0, 3)

    def _start_recorder(self, backend) -> None:
        """Record before the reset, matched with the driver's state publishers, so the bag holds the step-0 state
        the reset publishes (a driver still booting gets the reset's deadline to appear)."""

        self.recorder = record_episode(backend.node, self.out / "episode.mcap", held=True,
                                       stepwise_node=backend.stepwise_node)
        unmatched = self.recorder.wait_for_publishers(state_topics(), backend.names.timeouts.reset_s,
                                                      confirm=backend.names.sim.episode_status)
        if unmatched:
            self.notes.append(f"recording started before {', '.join(unmatched)} had a publisher: the bag may "
                              "lack the step-0 state")

    def _write_card(self, state) -> CardRecord:
        images = {}
        for camera in self.host.backend.cameras:
            name = f"{camera}_high.png"
            self.records.write_bytes(f"card/{name}", self.robot.artifact(name, step=0))
            images[camera] = f"card/{name}"
        card = CardRecord(suite=self.settings.suite, task=self.settings.task, seed=self.settings.seed,
                          task_language=state.task, object_names=tuple(state.object_names),
                          eef_pos=tuple(float(v) for v in state.eef_pos),
                          eef_quat=tuple(float(v) for v in state.eef_quat),
                          gripper_opening=float(state.gripper_opening), images=images,
                          max_env_steps=self.settings.max_episode_steps)
        card.write(self.out)
        return card

    def open_kernel(self, sandbox=None):
        """The sandboxed cell kernel for this episode's ``robo`` (the strategy closes it): the bubblewrap boundary
        of ``sandbox`` (a :class:`~pyrua_ros.settings.config.SandboxSettings`; ``--unsafe-sandbox`` is noted in
        result.json), every robo call bounded by the running cell's deadline."""

        sandbox = sandbox or SandboxSettings()
        with cputime.section("kernel start (this process)"):
            self.kernel = Kernel(self.robot.robo, self.workspace,
                                 limits=KernelLimits(workspace_bytes=sandbox.workspace_mib * 2**20),
                                 dynamic_methods=tuple(self.robot.robo.VLA_PRIMITIVES), sandbox=sandbox.isolation,
                                 deadline_hook=self.robot.set_deadline)
        if sandbox.unsafe_sandbox:
            self.notes.append(self.kernel.description)
        return self.kernel

    def sandbox_description(self) -> str:
        """``host.sandbox`` of result.json: the kernel's own description when it started."""
        kernel = self.kernel
        if kernel is not None and kernel.description:
            return f"{SANDBOX_DESCRIPTION}; {kernel.description}"
        return SANDBOX_DESCRIPTION

    def boundary_notes(self) -> list[str]:
        """What the sandbox and the driver identity check refused during the episode (for result.json notes)."""
        notes = []
        events = self.kernel.events if self.kernel is not None else []
        if events:
            notes.append(f"kernel boundary: {len(events)} event(s), e.g. {events[0]}")
        backend = self.host.backend if self.host is not None else None
        for info in (getattr(backend, "foreign_status", None) or {}).values():
            who = info["node"] or "an unknown node"
            notes.append(f"safety: ignored {info['samples']} episode status sample(s) from {who} "
                         f"(publisher gid {info['gid']}): {info['why']}")
        return notes

    def final_notes(self, placeholder: bool = False) -> tuple[str, ...]:
        """result.json's notes: the episode's own, then (final record only) the boundary's and record failures."""
        if placeholder:
            return tuple(self.notes)
        return (*self.notes, *self.boundary_notes(), *self.records.failures)

    def calls_for_result(self) -> tuple:
        """The ledger records result.json counts: the snapshot calls.jsonl was written from, else the live ledger."""
        if self.calls_written is not None:
            return tuple(self.calls_written)
        return tuple(self.robot.ledger.records) if self.robot is not None else ()

    def call_counts(self, calls: tuple) -> dict[str, int]:
        """result.json's ``calls``, ``stateful_calls`` and ``env_steps``: of the records ``calls`` plus the calls
        a full ledger counted without keeping (``Ledger.dropped``)."""
        dropped = self.robot.ledger.dropped if self.robot is not None else None
        return {"calls": len(calls) + (dropped.calls if dropped else 0),
                "stateful_calls": sum(1 for r in calls if r.stateful) + (dropped.stateful if dropped else 0),
                "env_steps": sum(r.env_steps for r in calls) + (dropped.env_steps if dropped else 0)}

    def episode_status(self) -> dict:
        """The driver's episode status as a small dict (empty when it cannot be read)."""
        with contextlib.suppress(Exception):
            st = self.host.backend.status()
            return {"step": st.step, "success": st.success, "terminated": st.terminated, "truncated": st.truncated}
        return {}

    def read_environment_outcome(self) -> None:
        """The benchmark's verdict (the sim's latched success check) and its step counter, never the agent's claim.

        Read for this episode's reset only, by its id: a host lent by eval still holds the previous episode's status
        (and digests) until this episode's reset answered, so an episode whose reset did not answer has no verdict
        (RuntimeError), and a status of another episode is never taken for this one's."""
        if self.episode_id is None:
            raise RuntimeError("the environment outcome was asked for before this episode's reset answered")
        status = self.host.backend.status()
        if status.episode_id != self.episode_id:
            raise RuntimeError(f"the driver's episode status is of its episode {status.episode_id}, not of this "
                               f"episode ({self.episode_id}): the driver was reset or restarted meanwhile")
        self.environment_success = bool(status.success)
        self.env_steps_total = int(status.step)
        trace = getattr(self.host.backend, "state_trace", None)
        same = trace is not None and getattr(trace, "episode_id", self.episode_id) == self.episode_id
        self.state_digest = trace.summary() if same else None
        clipped = getattr(self.host.backend, "clipped_steps", lambda: 0)()
        note = (f"the driver's safety filter clipped {clipped} control step(s) (speed or workspace limits; the "
                "calls' summaries say which, episode.mcap has /safety/events)")
        if clipped and note not in self.notes:
            self.notes.append(note)

    # ------------------------------------------------------------------ the whole episode
    def run(self):
        """Run every step; returns the result record that was written to ``<out>/result.json``."""
        interrupts = FirstSignalInterrupts("the episode writes its records")
        with interrupts.installed():
            stage = "boot"
            watchdog = None
            cputime.mark("episode:start")
            try:
                self.prepare()
                with cputime.section("episode: boot (reset, recorder, card)"):
                    self.boot()
                stage = "agent"
                with cputime.section("episode: agent start (prompt, kernel, runtime)"):
                    self.strategy.start(self)
                budget = getattr(self.strategy, "wall_budget_s", None)
                if budget is not None and math.isfinite(budget):   # outside this process: see watchdog.py
                    watchdog = Watchdog.start(self.out, budget + WATCHDOG_MARGIN_S)
                started = time.monotonic()
                try:
                    outcome = self.strategy.run(self)
                finally:
                    self.policy_wall_s = round(time.monotonic() - started, 3)
                self.apply_outcome(outcome)
            except BootError as exc:
                self.status, self.reason = "boot_error", str(exc)
                self.error = ErrorInfo.from_exception(exc, traceback.format_exc())
                self.notes.append("host failed before the agent started")
            except (KeyboardInterrupt, Exception) as exc:
                # the user's Ctrl-C, or SIGTERM/SIGHUP, also where a library wrapped it in an error of its own: its
                # own outcome, in no rate; any other error is the harness's
                if (interrupt := interrupt_in(exc)) is not None:
                    interrupts.done = True
                    self._mark_interrupted(interrupt)
                else:
                    self._mark_failed(exc, stage)
            finally:
                interrupts.done = True
                try:
                    self.shutdown()
                finally:
                    result = self.write_result()
                    if watchdog is not None:
                        watchdog.stop()
        return result

    def apply_outcome(self, outcome: StrategyOutcome) -> None:
        """The one place a strategy's outcome becomes the episode's: its notes, status, reason and error, then the
        benchmark's verdict (read once, here). An ``interrupted`` episode is never a success (outcomes.py); a
        call budget that ran out after the task was solved is ``completed``."""
        self.notes.extend(outcome.notes)
        self.status, self.reason, self.error = outcome.status, outcome.reason, outcome.error
        self.read_environment_outcome()
        if self.status == "interrupted":
            self.environment_success = False
        if self.status == "call_budget" and self.environment_success:
            self.status = "completed"

    def _mark_interrupted(self, exc: KeyboardInterrupt) -> None:
        """Status ``interrupted`` (never a success, in no rate, resumable), whatever the episode had reached; the
        step counter and digests only where this episode's own status can be read."""
        signum = re.fullmatch(r"signal (\d+)", str(exc))
        self.interrupted_by = int(signum.group(1)) if signum else signal.SIGINT
        self.status, self.reason, self.error = "interrupted", "interrupted", None
        self.notes.append(f"interrupted by {signal.Signals(self.interrupted_by).name}")
        self._judge_quietly()
        self.environment_success = False   # never a success: the episode did not run to its end

    def _mark_failed(self, exc: Exception, stage: str) -> None:
        """Status ``boot_error`` (the host failed before the agent started) or ``error`` (the harness failed while
        the agent ran), with the error and, where the driver died, how."""
        self.status = "boot_error" if stage == "boot" else "error"
        self.reason = f"{type(exc).__name__}: {exc}"
        driver = self.host.driver if self.host is not None else None
        if driver is not None and not driver.alive():
            self.reason = f"{self.reason} ({driver.death_message()})"
        self.error = ErrorInfo.from_exception(exc, traceback.format_exc())
        if stage == "boot":
            self.notes.append("host failed before the agent started")
        self._judge_quietly()

    def _judge_quietly(self) -> None:
        """The verdict after a failure, when this episode's own status can still be read (else none is taken)."""
        if self.host is None or self.host.backend is None or self.episode_id is None:
            return
        with contextlib.suppress(Exception):
            self.read_environment_outcome()

    def shutdown(self) -> None:
        """Stop everything this episode started, each step guarded so one failure does not skip the rest. An
        interrupt meanwhile lets the remaining steps run and makes the episode ``interrupted`` (its records may be
        incomplete, so it is no measurement)."""
        interrupt = None
        try:
            self.phase("shutdown", "writing the records")
        except (KeyboardInterrupt, Exception) as exc:
            if (interrupt := interrupt_in(exc)) is None:
                raise
        steps = [
            ("agent", lambda: self.strategy.close(self)),
            ("streams", self._let_streams_finish),
            ("calls", self._write_calls),
            ("video", self._write_video),
            ("recorder", lambda: self.recorder and self.recorder.close()),
            ("publisher", lambda: self.publisher and self.publisher.close()),
            ("host", lambda: self._own_host and self.host and self.host.close()),
        ]
        for name, step in steps:
            try:
                with cputime.section(f"episode: shutdown {name}"):
                    step()
                cputime.mark(f"shutdown: {name}")
            except (KeyboardInterrupt, Exception) as exc:
                if (wrapped := interrupt_in(exc)) is not None:
                    interrupt = interrupt or wrapped
                    self.notes.append(f"shutdown of {name} was interrupted")
                else:
                    self.notes.append(f"shutdown of {name} failed: {type(exc).__name__}: {exc}")
        if interrupt is not None and self.status != "interrupted":
            self._mark_interrupted(interrupt)

    def _write_calls(self) -> None:
        if self.robot is not None:
            self.calls_written = list(self.robot.ledger.records)
            self.records.write_jsonl("calls.jsonl", (r.to_json() for r in self.calls_written))
            dropped = self.robot.ledger.dropped
            if dropped.calls:
                self.notes.append(f"calls.jsonl holds the first {len(self.calls_written)} robo calls; "
                                  f"{dropped.calls} more were counted in calls/stateful_calls/env_steps, not kept")

    def _let_streams_finish(self) -> None:
        """The driver renders stream frames off its control path (niced, so under load far behind), so when the
        policy ends the last ones may still be on their way: before the video and the recording are closed, wait
        until every stream has delivered its frame of the episode's last stream period, or, for a stream whose
        period is not known yet, until no new frame arrived for STREAM_QUIET_S; while frames keep coming (a
        lockstep driver renders every frame, its backlog drains) at most STREAM_FLUSH_MAX_S after the last one and
        STREAM_FLUSH_CAP_S in all. An interrupted episode waits for none: the interrupt (a Ctrl-C reaches every
        node) stopped the driver too."""
        if self.video is None or self.interrupted_by is not None:
            return
        latest = getattr(self.host.backend, "latest_status", lambda: None)()
        final_t = None if latest is None else float(latest.sim_time)
        cap = time.monotonic() + STREAM_FLUSH_CAP_S
        seen, quiet_since = self.video.frame_count, time.monotonic()
        while time.monotonic() < min(cap, quiet_since + STREAM_FLUSH_MAX_S):
            reached = None if final_t is None else self.video.streams_reach(final_t)
            quiet_s = time.monotonic() - quiet_since
            if reached or (reached is None and quiet_s >= STREAM_QUIET_S):
                break
            time.sleep(0.05)
            if self.video.frame_count != seen:
                seen, quiet_since = self.video.frame_count, time.monotonic()

    def _write_video(self) -> None:
        if self.video is None:
            return
        try:
            final = self.episode_status()
            driver_up = self.host.driver is None or self.host.driver.alive()
            if final and driver_up and self.interrupted_by is None:
                for camera in self.host.backend.cameras:   # the final state, whatever the stream rate
                    with contextlib.suppress(Exception):
                        frame = self.host.backend.capture(camera, "low")
                        self.video.add_frame(camera, frame.stamp, frame.color)
            if self.video.write(self.out / "episode.mp4", success=bool(final.get("success"))) == 0:
                self.notes.append("episode.mp4 not written: no camera frames arrived")
            else:
                self.records.write_json("episode_video.json", self.video.index())
        finally:
            self.video.close()

    def record_failures(self) -> None:
        """A record that could not be written makes the episode an ``error`` whose reason says which."""
        failures = self.records.failures
        if failures and self.status not in ("error", "boot_error", "interrupted"):
            self.status, self.reason = "error", f"records: {failures[0]}"

    def write_result(self, placeholder: bool = False):
        """Write ``result.json`` through the one records writer: the placeholder (which reserves its space on
        disk) or the final record, whose counts come from the snapshot the side records were written from."""
        if not placeholder:
            self.record_failures()
        result = self.strategy.result(self, placeholder=placeholder)
        if placeholder:
            self.records.reserve_result(result.to_json())
        else:
            self.records.write_result(result.to_json())
        return result


def default_out(episode, kind: str = "") -> pathlib.Path:
    """``runs/<suite>_t<task>_s<seed>[-kind]-<time>``: where a run goes when no ``--out`` is given."""
    return pathlib.Path("runs") / f"{episode.tag}{'-' + kind if kind else ''}-{time.strftime('%Y%m%d-%H%M%S')}"


def play(cfg, *, progress=None, host: EpisodeHost | None = None, node=None):
    """Run one ``play`` episode (the loop arm of ``cfg``) and return its result (also in ``<out>/result.json``).

    ``host``: a lent, already open :class:`EpisodeHost` (a batch runner reusing one driver); kept open.
    ``node``: without a lent host, the process's own ROS node for robo (the launched ``agent`` node: one node per
    process role); else robo makes one.
    """

    out = cfg.out or default_out(cfg.episode)
    return Episode(cfg.episode, LoopAgent(cfg), out=out, output=cfg.output, compat=cfg.compat, host=host,
                   progress=progress, node=node).run()
