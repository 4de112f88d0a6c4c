"""The coordinator: which episodes still need running, handing them to an engine's workers, retries, records.

An instance is **finished** when its run directory holds a readable ``result.json`` for that instance that records
an agent outcome (``settings.outcomes``: success or a failure the agent caused); finished instances are
skipped, everything else (never run, crashed, interrupted, or an infrastructure failure) runs. An infrastructure
failure is retried up to ``retries`` times in the same invocation; the failed attempt's directory is kept under
``OUT/.eval/attempts/<suite>/<task>/<seed>/<attempt>/``. Whatever happens to a worker, every episode it started ends
with a ``result.json`` that says what happened (the episode's own, or a ``killed`` record written here).

``max_provider_failures`` episodes in a row whose model server failed after its retries (``planner_error``) stop
the evaluation: nothing new starts, the running episodes are interrupted (resumable), and the outcome's ``error``
says why; a server that died would otherwise cost every remaining episode its retries.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import pathlib
import shutil
from typing import Any

from pyrua_ros import cputime
from pyrua_ros.agent.run.watchdog import end_placeholder, is_placeholder
from pyrua_ros.evaluation.gather import unpack_into
from pyrua_ros.evaluation.instances import Instance
from pyrua_ros.evaluation.jobs import episode_summary, make_job
from pyrua_ros.records.records import SCHEMA, SYSTEM, now_iso, read_result, write_json
from pyrua_ros.settings import outcomes
from pyrua_ros.settings.config import PlayConfig

POLL_S = 0.5


class EngineError(RuntimeError):
    """The engine cannot run episodes (it did not start, or every worker keeps dying)."""


def finished_summary(instance: Instance, out: pathlib.Path) -> dict[str, Any] | None:
    """The summary of a finished episode of ``instance`` under ``out``, or None when it has to run (again)."""
    try:
        data = read_result(instance.run_dir(out))
    except (OSError, ValueError):
        return None
    same = (data.get("suite"), data.get("task"), data.get("seed")) == (instance.suite, instance.task, instance.seed)
    if not same or not str(data.get("schema", "")).startswith("pyrualean-"):
        return None
    if not outcomes.is_final(data.get("status"), data.get("reason")):
        return None
    return episode_summary(data)


def killed_status(reason: str) -> str:
    """The status of an episode the evaluation ended from outside: ``interrupted`` when the evaluation was
    interrupted (``reason`` "interrupted"), else ``killed``."""
    return "interrupted" if reason == "interrupted" else "killed"


def write_killed_record(instance: Instance, cfg: PlayConfig, reason: str,
                        placeholder: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``result.json`` of an episode whose host died before finishing its record (status
    :func:`killed_status`). The host's ``placeholder`` record, when it reserved one, keeps its facts (settings,
    counts so far); else a minimal record is written."""
    if placeholder is not None:
        record = end_placeholder(placeholder, killed_status(reason), reason,
                                 "the evaluation worker died before the episode host finished its record")
    else:
        record = {"schema": SCHEMA, "system": SYSTEM, "arm": cfg.agent.arm, "backend": "ros2",
                  "robot": cfg.episode.robot, "suite": instance.suite, "task": instance.task, "seed": instance.seed,
                  "environment_success": False, "status": killed_status(reason), "reason": reason, "error": None,
                  "calls": None, "stateful_calls": None, "env_steps": None, "policy_wall_s": None,
                  "created_at": now_iso(),
                  "notes": ["the evaluation worker died before the episode host wrote its record"]}
    write_json(pathlib.Path(cfg.out) / "result.json", record)
    return record


@dataclasses.dataclass
class RunOutcome:
    """What one invocation did: episodes it ran to the end, whether it was interrupted, why the engine failed."""

    episodes_run: int = 0
    interrupted: bool = False
    error: str | None = None
    provider_stop: bool = False   # stopped after max_provider_failures model-server failures in a row


class Coordinator:
    """Runs ``configs`` (instance -> its PlayConfig, ``out`` = its run directory) on ``engine``."""

    def __init__(self, out: pathlib.Path, configs: dict[Instance, PlayConfig], engine, progress, *,
                 retries: int = 1, max_provider_failures: int = 3):
        self.out = pathlib.Path(out)
        self.configs = configs
        self.engine = engine
        self.progress = progress
        self.retries = retries
        self.max_provider_failures = max_provider_failures   # 0: never stop on them
        self.provider_failures = 0   # model-server failures in a row
        self.todo: collections.deque[tuple[Instance, int]] = collections.deque()
        self.running: dict[int, tuple[Instance, int]] = {}
        self.slot_task: dict[int, tuple[str, int]] = {}   # the (suite, task) whose scene each worker's driver holds
        self.outcome = RunOutcome()

    def run(self, instances: list[Instance]) -> RunOutcome:
        """Run ``instances`` (the ones not finished); Ctrl-C/SIGTERM (KeyboardInterrupt) stops cleanly."""
        self.todo.extend((instance, 1) for instance in instances)
        if not self.todo:
            return self.outcome
        self._set_aside_earlier_attempts()
        try:
            note = getattr(self.engine, "start_note", None)
            if note is not None and note():
                self.progress.note(note())
            if hasattr(self.engine, "on_note"):   # an engine whose start has steps (Ray's): each one shown
                self.engine.on_note = self.progress.note
            cputime.mark("eval: engine start")
            try:
                self.engine.start()
            except Exception as exc:   # Ray unreachable or refusing us, a worker that cannot be spawned, ...
                raise EngineError(f"the {self.engine.name} engine did not start: {type(exc).__name__}: {exc}") \
                    from exc
            self.progress.slots = self.engine.slots   # a Ray cluster's size is known once joined
            started = getattr(self.engine, "started_note", None)
            if started is not None:
                self.progress.note(started())
            while (self.todo or self.running) and not self.outcome.provider_stop:
                self._fill_idle_slots()
                for event in self.engine.poll(POLL_S):
                    self._handle(event)
        except KeyboardInterrupt:
            self.outcome.interrupted = True
        except EngineError as exc:
            self.outcome.error = str(exc)
        finally:
            stopping = self.outcome.interrupted or self.outcome.provider_stop
            cputime.mark("eval: engine close")
            try:
                self.engine.close(interrupted=stopping)
            finally:
                cputime.mark("eval: engine closed")
                why = ("interrupted" if stopping else "killed: the evaluation stopped while this episode ran")
                for instance, _attempt in self.running.values():   # started, but its host wrote no record yet
                    self._ensure_record(instance, why)
        return self.outcome

    def _next_for(self, slot: int) -> tuple[Instance, int]:
        """Take the next job for ``slot``, preferring its driver's current (suite, task): a reset to the same task
        reuses the simulator's scene, a new task builds another (seconds); else a task no other worker holds."""
        def pick(predicate) -> int | None:
            return next((i for i, (inst, _a) in enumerate(self.todo) if predicate((inst.suite, inst.task))), None)

        held = {task for other, task in self.slot_task.items() if other != slot}
        index = pick(lambda task: task == self.slot_task.get(slot))
        if index is None:
            index = pick(lambda task: task not in held)
        job = self.todo[index or 0]
        del self.todo[index or 0]
        return job

    def _fill_idle_slots(self) -> None:
        for slot in range(self.engine.slots):
            if slot in self.running or not self.todo:
                continue
            instance, attempt = self._next_for(slot)
            job = make_job(instance.to_json(), self.configs[instance], attempt)
            if self.engine.submit(slot, job):
                self.running[slot] = (instance, attempt)
                self.slot_task[slot] = (instance.suite, instance.task)
                self.progress.episode_started(slot, instance.key, attempt)
            else:
                self.todo.appendleft((instance, attempt))

    def _handle(self, event: dict[str, Any]) -> None:
        kind, slot = event.get("event"), event.get("worker")
        if kind == "status":
            self.progress.episode_status(slot, event.get("status") or {})
            return
        if kind not in ("done", "crash") or slot not in self.running:
            return
        instance, attempt = self.running.pop(slot)
        if event.get("archive") is not None:

            unpack_into(event["archive"], instance.run_dir(self.out), event.get("gathered_from"))
        detail = event.get("detail") or event.get("error") or ""
        summary = {**(event.get("summary") or {}),
                   **self._ensure_record(instance, f"killed: {detail}" if detail else "killed")}
        self._count_provider_failure(summary)
        retry = (outcomes.is_infra(summary.get("status"), summary.get("reason")) and attempt <= self.retries
                 and not self.outcome.interrupted and not self.outcome.provider_stop)
        if retry:
            self._keep_attempt(instance, attempt)
            self.todo.append((instance, attempt + 1))
            self.progress.episode_done(slot, instance.key, summary, final=False, detail=detail)
            return
        self.outcome.episodes_run += 1
        self.progress.episode_done(slot, instance.key, summary, detail=detail)

    def _count_provider_failure(self, summary: dict[str, Any]) -> None:
        """Count model-server failures in a row; at ``max_provider_failures`` stop the evaluation with the cause."""
        if outcomes.kind_of(summary.get("status"), summary.get("reason")) != "model_server_failed":
            self.provider_failures = 0
            return
        self.provider_failures += 1
        if self.max_provider_failures and self.provider_failures >= self.max_provider_failures \
                and not self.outcome.provider_stop:
            self.outcome.provider_stop = True
            self.outcome.error = (f"the model server failed {self.provider_failures} episode(s) in a row (after its "
                                  f"retries); last: {summary.get('reason') or 'no reason recorded'}; stopped so "
                                  "the remaining episodes do not each spend their retries on it")
            self.todo.clear()

    def _ensure_record(self, instance: Instance, reason: str) -> dict[str, Any]:
        """The episode's summary from its result.json; a ``killed`` record (``reason``: what the engine saw) is
        written first if it has none, or only the placeholder its host reserved at the start."""
        run_dir = instance.run_dir(self.out)
        try:
            found = read_result(run_dir)
        except (OSError, ValueError):
            found = None
        if found is not None and not is_placeholder(found):
            return episode_summary(found)
        with contextlib.suppress(OSError):
            return episode_summary(write_killed_record(instance, self.configs[instance], reason, found))
        return {"status": killed_status(reason), "reason": reason}

    def _set_aside_earlier_attempts(self) -> None:
        """Run directories of instances about to run again (crashed, interrupted, infrastructure failures of an
        earlier invocation) move under ``.eval/attempts`` instead of being overwritten."""
        for instance, _attempt in self.todo:
            if instance.run_dir(self.out).exists():
                self._keep_attempt(instance, f"earlier-{now_iso().replace(':', '')}")

    def _keep_attempt(self, instance: Instance, attempt: int | str) -> None:
        source = instance.run_dir(self.out)
        target = self.out / ".eval" / "attempts" / instance.suite / str(instance.task) / str(instance.seed) / \
            str(attempt)
        with contextlib.suppress(OSError):
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), str(target))
