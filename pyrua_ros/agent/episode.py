"""The episode host: boot the robot, build the prompt, run the loop, judge, and write the run directory.

``play(cfg)`` is a short sequence of named steps (habit 12): prepare the run directory, start the driver, boot
``robo``, write the task card, build the prompt, start kernel + runtime, run the loop, judge with the
benchmark's own success check, write the records. ``result.json`` is written first as a placeholder that says
the episode is running (so a process killed with SIGKILL still leaves a record that says what happened), then
rewritten in ``finally`` whatever happened: model server, simulator or cell failures included. SIGTERM and
SIGHUP become KeyboardInterrupt so the ``finally`` runs.

Run directory (PYRUALEAN-CONTRACT.md 6.1): result.json, prompt.txt, card.json + card/*.png, workspace/cell_NNN.py
(or program_NN.py), tool_turns.json, calls.jsonl, <runtime>_events.jsonl, transcript.json, last_message.md,
host.log (driver output), episode.mp4 and episode.mcap.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import traceback

from pyrua_ros.agent.config import PlayConfig
from pyrua_ros.agent.records import (
    CardRecord,
    EpisodeResult,
    ErrorInfo,
    Generation,
    HostInfo,
    PromptRecord,
    now_iso,
    write_result,
    write_turns,
)
from pyrua_ros.driver.rosenv import PARENT_PID_VAR

SANDBOX_DESCRIPTION = ("cells run in a separate process that holds no ROS handle; robo is a proxy over a pipe "
                       "(JSON + raw buffers); per-cell wall-clock timeout with interrupt, then kill and restart; "
                       "address-space, CPU, file-size and process limits; import allow-list; open() confined to "
                       "the workspace")


class BootError(RuntimeError):
    """The robot could not be brought up (driver, reset, card); the agent never started."""


class _Driver:
    """The driver node (sim or fake arm) started for this episode, ended by its PID."""

    def __init__(self, cfg: PlayConfig, log_path: pathlib.Path):
        from pyrua_ros.bringup import graph, runner

        values = {"robot": cfg.driver, "suite": cfg.suite, "task": str(cfg.task), "seed": str(cfg.seed),
                  "max_episode_steps": str(cfg.max_episode_steps), "clock_mode": cfg.clock}
        nodes = [n for n in graph.plan(values) if not n.is_agent and n.key in ("sim", "fake")]
        if len(nodes) != 1:
            raise BootError(f"driver {cfg.driver!r}: expected one driver node, planned {[n.key for n in nodes]}")
        self.argv = runner.command(nodes[0])
        env = dict(os.environ, **nodes[0].env)
        env[PARENT_PID_VAR] = str(os.getpid())   # the node exits if this process dies, even by SIGKILL
        env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(self.argv, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise BootError(f"the driver node exited with status {code} (see host.log)")

    def stop(self) -> None:
        from pyrua_ros.bringup.process import stop_process_groups

        stop_process_groups([self.proc], sigint_grace_s=15.0)
        self._log.close()


def _raise_interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


class Episode:
    """One play episode; ``run()`` returns the EpisodeResult that was written to ``<out>/result.json``."""

    def __init__(self, cfg: PlayConfig, *, progress=None, node=None):
        self.cfg = cfg
        self.node = node     # the launched agent node robo runs on (agent_node); None: robo makes its own
        self.out = pathlib.Path(cfg.out).resolve()
        self.workspace = self.out / "workspace"
        self.progress = progress
        self.notes: list[str] = []
        self.status, self.reason, self.error = "error", None, None
        self.t0 = time.monotonic()
        self.startup_s = self.policy_wall_s = None
        self.driver = self.host = self.kernel = self.runtime = self.toolkit = self.recorder = self.video = None
        self.publisher = None
        self.card = None
        self.prompt = None
        self.guides = False
        self.outcome = None
        self.environment_success = False
        self.env_steps_total = None
        self.task_language = None
        self.events = None

    # ------------------------------------------------------------------ steps
    def prepare_run_directory(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        if self.workspace.exists():
            shutil.rmtree(self.workspace)
        self.workspace.mkdir(parents=True)
        for name in ("result.json", "tool_turns.json", "calls.jsonl", "last_message.md"):
            with contextlib.suppress(FileNotFoundError):
                (self.out / name).unlink()
        self.write_result(placeholder=True)
        if self.cfg.cuda_device is not None or self.cfg.rpent_root:
            self.notes.append("--cuda-device and RPENT_ROOT have no meaning for a ROS backend; recorded only")
        if self.cfg.runtime == "replay":
            self.notes.append("runtime replay: the cells come from a recording or program file, not a model")

    def boot(self) -> None:
        from pyrua_ros.robo.host import RobotHost
        from pyrua_ros.robo.ros_backend import RosBackend

        if self.cfg.driver != "external":
            self.driver = _Driver(self.cfg, self.out / "host.log")
        backend = RosBackend(node=self.node)
        segmenter = None
        if self.cfg.sam3_endpoint:
            from pyrua_ros.robo.segmenters import HttpSegmenter

            endpoint = self.cfg.sam3_endpoint
            url = endpoint if "://" in endpoint else f"http://{endpoint}/segment"   # reference style host:port
            segmenter = HttpSegmenter(url)
        vla = None
        if self.cfg.primitives == "full" and self.cfg.vla_endpoint:
            from pyrua_ros.robo.vla import connect

            vla = connect(self.cfg.vla_endpoint)
        self.host = RobotHost.for_libero(backend, primitives=self.cfg.primitives, segmenter=segmenter, vla=vla)
        try:
            status = backend.reset(self.cfg.suite, self.cfg.task, self.cfg.seed, self.cfg.max_episode_steps)
        except Exception as exc:
            if self.driver:
                self.driver.check()
            raise BootError(f"episode reset failed: {type(exc).__name__}: {exc}") from exc
        self.task_language = status.task_language
        if self.cfg.record:
            from pyrua_ros.agent.recorder import record_episode

            self.recorder = record_episode(backend.node, self.out / "episode.mcap")
        from pyrua_ros.agent.publisher import AgentPublisher

        self.publisher = AgentPublisher(backend.node, self.host.ledger)
        if self.cfg.video:
            from pyrua_ros.agent.video import EpisodeVideo

            self.video = EpisodeVideo(backend.node)
        state = self.host.robo.state()
        self.host.capture_boot_images("high")
        self.card = self._write_card(state)
        self.startup_s = round(time.monotonic() - self.t0, 3)

    def _write_card(self, state) -> CardRecord:
        card_dir = self.out / "card"
        card_dir.mkdir(exist_ok=True)
        images = {}
        for camera in self.host.backend.cameras:
            name = f"{camera}_high.png"
            (card_dir / name).write_bytes(self.host.artifact(name, step=0))
            images[camera] = f"card/{name}"
        card = CardRecord(suite=self.cfg.suite, task=self.cfg.task, seed=self.cfg.seed,
                          task_language=state.task, object_names=tuple(state.object_names),
                          eef_pos=tuple(float(v) for v in state.eef_pos),
                          eef_quat=tuple(float(v) for v in state.eef_quat),
                          gripper_opening=float(state.gripper_opening), images=images,
                          max_env_steps=self.cfg.max_episode_steps)
        card.write(self.out)
        return card

    def build_prompt(self):
        from pyrua_ros.agent import prompt as prompt_mod

        if self.cfg.guides:
            self.guides = prompt_mod.copy_guides(self.workspace, self.cfg.guides_dir)
        options = prompt_mod.PromptOptions(arm=self.cfg.arm, robot=self.cfg.robot, primitives=self.cfg.primitives,
                                           feedback=self.cfg.feedback, images=self.cfg.images,
                                           budget_s=self.cfg.budget_s, max_turns=self.cfg.max_turns,
                                           max_programs=self.cfg.max_programs, guides=self.cfg.guides,
                                           cell_timeout_s=self.cfg.cell_timeout_s)
        self.prompt = prompt_mod.build_prompt(self.host.robo, self.card, options, card_dir=self.out)
        (self.out / "prompt.txt").write_text(self.prompt.text)

    def start_agent(self) -> None:
        from pyrua_ros.agent.kernel import Kernel, KernelLimits
        from pyrua_ros.agent.runtimes import make_runtime
        from pyrua_ros.agent.runtimes.base import JsonlEventSink
        from pyrua_ros.agent.toolkit import ArmToolkit

        self.kernel = Kernel(self.host.robo, self.workspace, limits=KernelLimits(),
                             dynamic_methods=tuple(self.host.robo.VLA_PRIMITIVES))
        self.events = JsonlEventSink(self.out / f"{self.cfg.runtime}_events.jsonl")
        self.runtime = make_runtime(self.cfg, events=self.events)
        self.toolkit = ArmToolkit(self.cfg, self.host, self.kernel, self.workspace, on_turn=self._on_turn)

    def agent_status(self, last: str = "") -> dict:
        """The agent status people watch (``/agent/status`` JSON and the terminal progress view)."""
        episode = {}
        with contextlib.suppress(Exception):
            st = self.host.backend.status()
            episode = {"step": st.step, "success": st.success, "terminated": st.terminated,
                       "truncated": st.truncated}
        return {"turn": len(self.toolkit.turns) if self.toolkit else 0, "max_turns": self.cfg.max_turns or 0,
                "steps": episode.get("step"), "tokens": self._usage().get("total_tokens"), "last": last,
                "elapsed_s": round(time.monotonic() - self.t0, 1), "episode": episode}

    def _on_turn(self, record, reply) -> None:
        payload = reply.payload
        last = payload.get("error") or payload.get("exception") or payload.get("episode_finished") \
            or (payload.get("stdout") or "").strip().splitlines()[-1:] or ""
        if isinstance(last, list):
            last = last[0] if last else ""
        status = self.agent_status(f"{record.tool}: {last}" if last else record.tool)
        if self.progress:
            self.progress.update(status)
        if self.publisher:
            self.publisher(status, record, reply, code=self.toolkit.last_code if self.toolkit else None)

    def _usage(self) -> dict:
        with contextlib.suppress(Exception):
            return self.runtime.usage_totals()
        return {}

    def run_loop(self) -> None:
        from pyrua_ros.agent.loop import run_loop

        started = time.monotonic()
        deadline = started + self.cfg.budget_s
        images = [self.host.artifact(f"{c}_high.png", step=0) for c in self.host.backend.cameras]
        tool = "python" if self.cfg.arm == "cells" else "run_program"
        try:
            self.outcome = run_loop(self.runtime, self.toolkit, deadline=deadline, first_prompt=self.prompt.text,
                                    first_images=images, tool_name=tool)
        finally:
            self.policy_wall_s = round(time.monotonic() - started, 3)
        self.notes.extend(self.outcome.notes)
        if self.outcome.status == "timeout":
            self.host.stop("timeout")
        self.status, self.reason = self.outcome.status, self.outcome.reason

    def _read_environment_outcome(self) -> None:
        """The benchmark's verdict (the sim's latched success check) and its step counter, never the agent's claim."""
        status = self.host.backend.status()
        self.environment_success = bool(status.success)
        self.env_steps_total = int(status.step)

    def judge(self) -> None:
        self._read_environment_outcome()
        if self.status == "call_budget" and self.environment_success:
            self.status = "completed"
        if self.status == "planner_error" and self.toolkit and self.toolkit.finish is not None:
            self.status = "completed"

    # ------------------------------------------------------------------ the whole episode
    def run(self) -> EpisodeResult:
        old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
        with contextlib.suppress(ValueError):  # only the main thread may install handlers
            for s in old:
                signal.signal(s, _raise_interrupt)
        stage = "boot"
        try:
            self.prepare_run_directory()
            self.boot()
            stage = "agent"
            self.build_prompt()
            self.start_agent()
            self.run_loop()
            self.judge()
        except BootError as exc:
            self.status, self.reason = "boot_error", str(exc)
            self.error = ErrorInfo.from_exception(exc, traceback.format_exc())
            self.notes.append("host failed before the agent started")
        except KeyboardInterrupt as exc:
            self.status, self.reason = ("boot_error" if stage == "boot" else "error"), "interrupted"
            self.error = ErrorInfo.from_exception(exc, traceback.format_exc())
            self._judge_quietly()
        except Exception as exc:
            self.status = "boot_error" if stage == "boot" else "error"
            self.reason = f"{type(exc).__name__}: {exc}"
            self.error = ErrorInfo.from_exception(exc, traceback.format_exc())
            if stage == "boot":
                self.notes.append("host failed before the agent started")
            self._judge_quietly()
        finally:
            try:
                self.shutdown()
            finally:
                result = self.write_result()
                for s, handler in old.items():
                    with contextlib.suppress(ValueError, TypeError):
                        signal.signal(s, handler)
        return result

    def _judge_quietly(self) -> None:
        if self.host is None:
            return
        with contextlib.suppress(Exception):
            self._read_environment_outcome()

    def shutdown(self) -> None:
        """Stop everything this episode started, each step guarded so one failure does not skip the rest."""
        steps = [
            ("kernel", lambda: self.kernel and self.kernel.close()),
            ("records", self._write_side_records),
            ("recorder", lambda: self.recorder and self.recorder.close()),
            ("events", lambda: self.events and self.events.close()),
            ("robo", lambda: self.host and self.host.close()),
            ("driver", lambda: self.driver and self.driver.stop()),
        ]
        for name, step in steps:
            try:
                step()
            except Exception as exc:
                self.notes.append(f"shutdown of {name} failed: {type(exc).__name__}: {exc}")

    def _write_robot_records(self) -> None:
        """calls.jsonl and episode.mp4: what any episode of the robot leaves (play and single shot)."""
        if self.host is not None:
            self.host.ledger.write_jsonl(self.out / "calls.jsonl")
        if self.video is not None:
            if self.video.write(self.out / "episode.mp4") == 0:
                self.notes.append("episode.mp4 not written: no camera frames arrived")
            self.video.close()

    def _write_side_records(self) -> None:
        import json

        self._write_robot_records()
        if self.toolkit is not None:
            write_turns(self.out / "tool_turns.json", self.toolkit.turns)
        if self.runtime is not None:
            (self.out / "transcript.json").write_text(json.dumps(self.runtime.transcript(), indent=1, default=str))
        (self.out / "last_message.md").write_text((self.outcome.last_message if self.outcome else "") or "")

    # ------------------------------------------------------------------ result.json
    def write_result(self, placeholder: bool = False) -> EpisodeResult:
        cfg = self.cfg
        ledger = self.host.ledger if self.host is not None else None
        usage = self._usage() if self.runtime is not None else {}
        generation = Generation(
            runtime=cfg.runtime, model=cfg.model if cfg.runtime == "openai" else None,
            input_tokens=usage.get("input_tokens"), cached_input_tokens=usage.get("cached_input_tokens"),
            output_tokens=usage.get("output_tokens"), reasoning_output_tokens=usage.get("reasoning_output_tokens"),
            total_tokens=usage.get("total_tokens"), requests=int(usage.get("requests") or 0),
            turns=len(self.toolkit.turns) if self.toolkit else 0,
            usage_source="server usage" if cfg.runtime == "openai" else "none",
            sandbox_flags=tuple(self.toolkit.sandbox_flags) if self.toolkit else (),
            extra={"kernel_restarts": self.toolkit.kernel_restarts if self.toolkit else 0},
        )
        notes = list(self.notes)
        status, reason = self.status, self.reason
        if placeholder:
            status, reason = "error", "killed: the episode host started but did not finish (this placeholder " \
                                      "is replaced when the episode ends)"
        result = EpisodeResult(
            arm=cfg.arm, backend="ros2", robot=cfg.robot, suite=cfg.suite, task=cfg.task, seed=cfg.seed,
            task_language=self.task_language, model=cfg.model if cfg.runtime == "openai" else None,
            reasoning_effort=cfg.reasoning, max_programs=cfg.max_programs, images=cfg.images,
            feedback=cfg.feedback, guides=self.guides, max_turns=cfg.max_turns, budget_mode=cfg.budget_mode,
            environment_success=bool(self.environment_success), status=status, reason=reason, error=self.error,
            finish=self.toolkit.finish if self.toolkit else None,
            calls=len(ledger.records) if ledger is not None else 0,
            stateful_calls=int(ledger.stateful_calls()) if ledger is not None else 0,
            env_steps=int(ledger.env_steps()) if ledger is not None else 0,
            tool_turns=len(self.toolkit.turns) if self.toolkit else 0,
            policy_wall_s=self.policy_wall_s, startup_s=self.startup_s,
            total_wall_s=round(time.monotonic() - self.t0, 3), timeout_s=cfg.budget_s,
            max_episode_steps=cfg.max_episode_steps,
            prompt=PromptRecord(self.prompt.chars, self.prompt.sha256, tuple(self.prompt.images))
            if self.prompt else None,
            generation=generation,
            host=HostInfo(python=sys.version.split()[0], cuda_device=cfg.cuda_device, primitive_set=cfg.primitives,
                          runtime=cfg.runtime, boot_options=cfg.boot_options(), sandbox=SANDBOX_DESCRIPTION,
                          rpent_root=cfg.rpent_root),
            created_at=now_iso(), notes=tuple(notes), runtime_returncode=None if placeholder else 0,
            planner_attempts=1, env_steps_total=self.env_steps_total)
        write_result(self.out / "result.json", result)
        return result


def play(cfg: PlayConfig, *, progress=None, node=None) -> EpisodeResult:
    """Run one episode and return its result (also written to ``<cfg.out>/result.json``). ``node``: the process's
    own ROS node for robo (the launched ``agent`` node), else robo makes one."""
    return Episode(cfg, progress=progress, node=node).run()
