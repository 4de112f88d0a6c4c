"""Single-shot mode (PYRUALEAN-CONTRACT.md 3.1 item 1, 6.3): ``generate`` a ``policy.py`` once, then ``run`` it once.

``generate(GenerateConfig)`` renders the single-shot prompt (system + task card + the "no tools" sentence) for a
``card.json``, sends it with the card images in ONE chat completion without tools (the ``openai`` runtime with
``tools=[]``), and writes the largest fenced python block of the answer to ``policy.py``. Its directory holds
``prompt.txt``, ``response.md``, ``openai_events.jsonl``, ``generation.json`` (:class:`GenerationRecord`, written
also when the server fails or the answer has no code block, then with ``error``) and ``policy.py``.

``run_policy(RunConfig)`` boots the robot exactly as ``play`` does (an :class:`~pyrua_ros.agent.run.episode.Episode`
whose agent strategy is :class:`SingleShotAgent`), runs ``run(robo)`` exactly once in the sandboxed kernel under a
wall-clock watchdog (no model, no feedback), judges with the benchmark's success check and writes ``result.json``
(:class:`RunResult`), ``policy.py`` (copy), ``policy_output.txt``, ``prompt.txt``, the card, ``calls.jsonl`` and
``workspace/``. The watchdog is three-fold: a timer stops the episode at ``timeout_s`` (a running motion ends with
``EpisodeFinished("timeout")``, the backend command is cancelled), the kernel interrupts, then kills, a program
that is still running at ``timeout_s`` (a pure-Python loop), and the episode's watchdog process
(:mod:`~pyrua_ros.agent.run.watchdog`, outside the agent process) kills an agent process still running 120 s
later and finishes its result.json (status ``timeout``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import re
import sys
import threading
import time
from typing import Any, ClassVar

from pyrua_ros.agent.prompting.contract import NO_TOOLS_NOTE, PromptOptions
from pyrua_ros.agent.prompting.prompt import build_prompt
from pyrua_ros.agent.run.episode import Episode, default_out
from pyrua_ros.agent.runtimes.base import JsonlEventSink, RuntimeFailure
from pyrua_ros.agent.runtimes.openai_runtime import OpenAIRuntime
from pyrua_ros.records.outcome import StrategyOutcome
from pyrua_ros.records.records import (
    TOKEN_KEYS,
    CardRecord,
    ErrorInfo,
    PromptRecord,
    ResultRecord,
    TokenTotals,
    _json_value,
    check_keys,
    now_iso,
    write_json,
)
from pyrua_ros.robo.libero import robot_class
from pyrua_ros.settings.config import GenerateConfig, RunConfig

RUN_STATUSES = ("completed", "finished", "error", "timeout", "boot_error", "interrupted")
MODES = ("per_cell", "transfer")
PYTHON_TAGS = ("python", "py", "python3", "")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)


# ---------------------------------------------------------------------------------------------- prompt


def single_shot_prompt(robot: Any, card: CardRecord, *, card_dir: pathlib.Path | None, budget_s: float,
                       transfer: bool = False, primitives: str = "full"):
    """The single-shot prompt text (system + card + the no-tools sentence) and its PromptBundle; ``robot`` is the
    ``robo`` class or a live instance, ``budget_s`` the run's wall-clock budget [s] told to the model."""

    options = PromptOptions(arm="single-shot", primitives=primitives, budget_s=budget_s, transfer=transfer)
    bundle = build_prompt(robot, card, options, card_dir=card_dir)
    return bundle.text + NO_TOOLS_NOTE, bundle


def extract_policy(text: str | None) -> str | None:
    """The largest fenced code block tagged python (``python``, ``py``, ``python3`` or untagged) of ``text``; None
    when there is none. Blocks tagged with another language (``bash``, ``json`` ...) are ignored."""
    blocks = [m.group(3) for m in _FENCE.finditer(text or "") if m.group(2).lower() in PYTHON_TAGS]
    blocks = [b for b in blocks if b.strip()]
    return max(blocks, key=len) if blocks else None


# ---------------------------------------------------------------------------------------------- generate


@check_keys
@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerationRecord(TokenTotals):
    """``generation.json`` (contract 6.3 ``generate`` directory). ``mode``: per_cell | transfer; ``card``
    ``{suite, task, seed}``; ``images`` card image paths attached; ``wall_s`` seconds; ``returncode`` 0 when the
    server answered, 1 when it did not; ``turns`` model responses (0 or 1); the token totals
    (:class:`~pyrua_ros.records.records.TokenTotals`); ``policy`` path of ``policy.py`` (None without one),
    ``policy_lines``; ``error`` why no policy was written (absent when one was). ``api_key_env`` is the variable's
    NAME, never the key."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "model", "reasoning_effort", "base_url", "api_key_env", "mode", "card", "prompt_chars", "images",
        "started_at", "wall_s", "returncode", "turns", *TOKEN_KEYS, "policy", "policy_lines", "error", "runtime",
        "finish_reason")

    model: str
    reasoning_effort: str | None
    base_url: str
    api_key_env: str | None
    mode: str
    card: dict[str, Any]
    prompt_chars: int
    images: tuple[str, ...]
    started_at: str
    wall_s: float
    returncode: int
    turns: int
    policy: str | None
    policy_lines: int
    error: str | None = None
    runtime: str = "openai"
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")

    def to_json(self) -> dict[str, Any]:
        """Fields in ``KEYS`` order; ``error`` only when set."""
        data = {name: _json_value(getattr(self, name)) for name in self.KEYS}
        if self.error is None:
            data.pop("error")
        return data


def generate(cfg: GenerateConfig) -> GenerationRecord:
    """Render, send once, extract; returns the record written to ``<out>/generation.json``.

    The output directory is used as given (the front door applies the run-directory rules before)."""

    g, settings = cfg.generate, cfg.model
    out = pathlib.Path(g.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    card_path = pathlib.Path(g.card)
    card = CardRecord.read(card_path)
    card_dir = card_path if card_path.is_dir() else card_path.parent
    text, bundle = single_shot_prompt(robot_class(g.primitives), card, card_dir=card_dir, budget_s=g.budget_s,
                                      transfer=g.transfer, primitives=g.primitives)
    (out / "prompt.txt").write_text(text, encoding="utf-8")
    images = [pathlib.Path(p).read_bytes() for p in bundle.images]
    started_at, t0 = now_iso(), time.monotonic()
    events = JsonlEventSink(out / "openai_events.jsonl")
    response, error, usage = None, None, {}
    try:
        runtime = OpenAIRuntime(settings, tools=[], event_sink=events)   # one completion, no tools
        runtime.start(text, images)
        try:
            response = runtime.respond(deadline=t0 + g.timeout_s)
        finally:
            usage = runtime.usage_totals()
    except RuntimeFailure as exc:
        error = f"the model server gave no answer: {exc}"
    except ValueError as exc:   # e.g. --api-key-env names an unset variable
        error = str(exc)
    finally:
        events.close()
    policy_path, lines = None, 0
    if response is not None:
        (out / "response.md").write_text(response.content or "", encoding="utf-8")
        code = extract_policy(response.content)
        if code is None:
            error = ("the answer holds no fenced python code block (```python ... ```); see response.md"
                     + ("" if response.content else " (the answer was empty)"))
        else:
            policy_path = out / "policy.py"
            policy_path.write_text(code if code.endswith("\n") else code + "\n", encoding="utf-8")
            lines = len(code.splitlines())
    record = GenerationRecord(
        model=settings.model, reasoning_effort=settings.reasoning, base_url=settings.endpoint(),
        api_key_env=settings.api_key_env, mode="transfer" if g.transfer else "per_cell",
        card={"suite": card.suite, "task": card.task, "seed": card.seed}, prompt_chars=len(text),
        images=tuple(str(p) for p in bundle.images), started_at=started_at,
        wall_s=round(time.monotonic() - t0, 3), returncode=0 if response is not None else 1,
        turns=1 if response is not None else 0,
        **{k: usage.get(k) for k in TOKEN_KEYS},
        policy=str(policy_path) if policy_path else None, policy_lines=lines, error=error,
        finish_reason=response.finish_reason if response is not None else None)
    write_json(out / "generation.json", record.to_json())
    return record


# ---------------------------------------------------------------------------------------------- run


@dataclasses.dataclass(frozen=True)
class PolicyRecord:
    """``policy``: path of the file that was run, its SHA-256, size in bytes and the kernel's static audit flags."""

    path: str
    sha256: str
    bytes: int
    sandbox_flags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.bytes,
                "sandbox_flags": list(self.sandbox_flags)}


@check_keys
@dataclasses.dataclass(frozen=True, kw_only=True)
class RunResult(ResultRecord):
    """Single-shot ``result.json`` (``pyrualean-episode-v2``, contract 6.3): the shared fields of
    :class:`~pyrua_ros.records.records.ResultRecord` plus ``policy``, the program that was run. ``status``: completed
    (``run`` returned), finished (``EpisodeFinished``, ``reason`` e.g. terminated), error (``reason`` load |
    exception: the program's own failure, counted in the rate; any other reason: the host failed), timeout,
    boot_error, interrupted (see ``settings.outcomes``). ``timeout_s`` the watchdog. ``host`` is a dict ``{python,
    cuda_device, libero_type, boot_options, rpent_root, sandbox}``; ``generation`` the attached ``generation.json``
    (or None)."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "schema", "system", "backend", "robot", "suite", "task", "seed", "task_language", "policy",
        "environment_success", "status", "reason", "error", "calls", "stateful_calls", "env_steps", "env_steps_total",
        "policy_wall_s", "startup_s", "total_wall_s", "timeout_s", "max_episode_steps", "prompt", "host",
        "created_at", "notes", "generation", "state_digest")
    STATUSES: ClassVar[tuple[str, ...]] = RUN_STATUSES

    policy: PolicyRecord


def error_from_text(text: str) -> ErrorInfo:
    """``{type, message, traceback}`` from a kernel exception text (a traceback whose last line is ``Type: msg``)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "Error"
    head, sep, message = last.partition(":")
    kind = head.strip() if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head.strip()) else "Error"
    return ErrorInfo(type=kind.rsplit(".", 1)[-1], message=message.strip() if sep else last, traceback=text)


class SingleShotAgent:
    """The single-shot arm as an agent strategy: ``run(robo)`` of ``policy.py`` once in the sandboxed kernel under
    a watchdog, no model; boot, card, verdict and shutdown are the episode's."""

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.policy_record: PolicyRecord | None = None
        self.program = None
        self.kernel = None
        self.generation: dict[str, Any] | None = None

    def _load_generation(self, ep) -> dict[str, Any] | None:
        single = self.cfg.single
        path = single.generation or pathlib.Path(single.policy).resolve().parent / "generation.json"
        if not pathlib.Path(path).is_file():
            return None
        try:
            data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            ep.notes.append(f"generation.json at {path} could not be read: {exc}")
            return None
        return data if isinstance(data, dict) else None

    @property
    def wall_budget_s(self) -> float:
        """``--timeout-s``: the episode starts its watchdog outside this process at this plus its margin
        (``watchdog.MARGIN_S``), so a ``pyrualean run`` whose agent process is held where the timer below cannot
        reach it still ends, with a full result.json, as play and eval do."""
        return self.cfg.timeout_s

    def start(self, ep) -> None:
        self.generation = self._load_generation(ep)
        source = pathlib.Path(self.cfg.single.policy).resolve()
        code = source.read_bytes()
        if source != (ep.out / "policy.py").resolve():
            (ep.out / "policy.py").write_bytes(code)
        (ep.workspace / "policy.py").write_bytes(code)
        self.policy_record = PolicyRecord(path=str(source), sha256=hashlib.sha256(code).hexdigest(), bytes=len(code))
        ep.phase("prompt", "single shot: the prompt the policy's author saw is kept as prompt.txt")
        text, bundle = single_shot_prompt(ep.robot.robo, ep.card, card_dir=ep.out, budget_s=self.cfg.timeout_s,
                                          primitives=ep.settings.primitive_set)
        (ep.out / "prompt.txt").write_text(text, encoding="utf-8")
        ep.prompt = PromptRecord(len(text), hashlib.sha256(text.encode("utf-8")).hexdigest(), tuple(bundle.images))
        self.kernel = ep.open_kernel(self.cfg.sandbox)

    def run(self, ep) -> StrategyOutcome:
        """Run ``run(robo)`` once under the watchdog; the program's outcome as a status and reason."""
        timeout_s = self.cfg.timeout_s
        ep.phase("agent", f"run(robo) of {self.cfg.single.policy} once; watchdog {timeout_s:g} s")
        watchdog = threading.Timer(timeout_s, ep.robot.stop, args=("timeout",))
        watchdog.daemon = True
        watchdog.start()
        try:
            self.program = self.kernel.run_program(path="policy.py", timeout_s=timeout_s)
        finally:
            watchdog.cancel()
        program = self.program
        self.policy_record = dataclasses.replace(self.policy_record, sandbox_flags=tuple(program.sandbox_flags))
        output = program.stdout + (("\n--- stderr ---\n" + program.stderr) if program.stderr else "")
        ep.records.write_text("policy_output.txt", output)
        notes = []
        if program.status == "timeout" or ep.robot.stop_reason == "timeout":
            notes.append(f"the program ran past its {timeout_s:g} s wall-clock budget and was stopped")
            outcome = StrategyOutcome("timeout", "timeout", ErrorInfo(
                type="TimeoutError", message=f"run(robo) ran past its {timeout_s:g} s watchdog",
                traceback=program.exception))
        elif program.status == "error":
            text = program.exception or "Error: the program failed"
            # a program that did not load raised the reference's PolicyLoadError (its text is one line)
            outcome = StrategyOutcome("error", "load" if program.refused or not program.loaded else "exception",
                                      ErrorInfo(type="PolicyLoadError", message=text, traceback=text)
                                      if not program.loaded else error_from_text(text))
        elif program.status == "finished":
            outcome = StrategyOutcome("finished", program.reason)
        else:
            outcome = StrategyOutcome("completed", "returned")
        if program.restarted:
            notes.append("the kernel process was killed and restarted after the program")
        return dataclasses.replace(outcome, notes=tuple(notes))

    def close(self, ep) -> None:
        if self.kernel is not None:
            self.kernel.close()   # no tool turns, transcript or last message in a single shot

    def result(self, ep, placeholder: bool = False) -> RunResult:
        cfg, e = self.cfg, ep.settings
        calls = ep.calls_for_result()
        status, reason = ep.status, ep.reason
        if placeholder:
            status, reason = "error", ("killed: the single-shot host started but did not finish (this placeholder "
                                       "is replaced when the run ends)")
        host = {"python": sys.executable, "cuda_device": cfg.compat.cuda_device,
                "libero_type": cfg.compat.libero_type, "boot_options": cfg.boot_options(),
                "rpent_root": cfg.compat.rpent_root, "sandbox": ep.sandbox_description()}
        policy = self.policy_record or PolicyRecord(str(cfg.single.policy), "", 0)
        return RunResult(
            backend="ros2", robot=e.robot, suite=e.suite, task=e.task, seed=e.seed,
            task_language=ep.task_language, policy=policy, environment_success=bool(ep.environment_success),
            status=status, reason=reason, error=ep.error,
            **ep.call_counts(calls), env_steps_total=ep.env_steps_total,
            policy_wall_s=ep.policy_wall_s, startup_s=ep.startup_s,
            total_wall_s=round(time.monotonic() - ep.t0, 3), timeout_s=cfg.timeout_s,
            max_episode_steps=e.max_episode_steps, prompt=ep.prompt, host=host, created_at=now_iso(),
            notes=ep.final_notes(placeholder), generation=self.generation,
            state_digest=None if placeholder else ep.state_digest)


def run_policy(cfg: RunConfig, *, progress=None, host=None) -> RunResult:
    """Run one single-shot episode; the result is also written to ``<out>/result.json``."""

    out = cfg.out or default_out(cfg.episode, "single")
    episode = Episode(cfg.episode, SingleShotAgent(cfg), out=out, output=cfg.output, compat=cfg.compat, host=host,
                      progress=progress)
    return episode.run()
