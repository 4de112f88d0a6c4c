"""Single-shot mode (PYRUALEAN-CONTRACT.md 3.1 item 1, 6.3): ``generate`` a ``policy.py`` once, then ``run`` it once.

``generate(GenerateConfig)`` renders the single-shot prompt (system + task card + the "no tools" sentence) for a
``card.json``, sends it with the card images in ONE chat completion without tools (the ``openai`` runtime with
``tools=[]``), and writes the largest fenced python block of the answer to ``policy.py``. Its directory holds
``prompt.txt``, ``response.md``, ``openai_events.jsonl``, ``generation.json`` (:class:`GenerationRecord`, written
also when the server fails or the answer has no code block, then with ``error``) and ``policy.py``.

``run_policy(RunConfig)`` boots the robot exactly as ``play`` does (it is an :class:`~pyrua_ros.agent.episode.Episode`
whose agent steps are replaced), runs ``run(robo)`` exactly once in the sandboxed kernel under a wall-clock
watchdog (no model, no feedback), judges with the benchmark's success check and writes ``result.json``
(:class:`RunResult`), ``policy.py`` (copy), ``policy_output.txt``, ``prompt.txt``, the card, ``calls.jsonl`` and
``workspace/``. The watchdog is two-fold: a timer stops the episode at ``timeout_s`` (a running motion ends with
``EpisodeFinished("timeout")``, the backend command is cancelled) and the kernel interrupts, then kills, a program
that is still running at ``timeout_s`` (a pure-Python loop).
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
from typing import Any

from pyrua_ros.agent.config import PlayConfig
from pyrua_ros.agent.episode import Episode, sandbox_description, start_kernel
from pyrua_ros.agent.records import (
    SCHEMA,
    SYSTEM,
    TOKEN_KEYS,
    CardRecord,
    ErrorInfo,
    PromptRecord,
    _json_value,
    now_iso,
    write_json,
)

RUN_STATUSES = ("completed", "finished", "error", "timeout", "boot_error")
MODES = ("per_cell", "transfer")
PYTHON_TAGS = ("python", "py", "python3", "")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)


# ---------------------------------------------------------------------------------------------- prompt


def single_shot_prompt(robot: Any, card: CardRecord, *, card_dir: pathlib.Path | None, budget_s: float,
                       transfer: bool = False, primitives: str = "full"):
    """The single-shot prompt text (system + card + the no-tools sentence) and its PromptBundle; ``robot`` is the
    ``robo`` class or a live instance, ``budget_s`` the run's wall-clock budget [s] told to the model."""
    from pyrua_ros.agent.prompt import NO_TOOLS_NOTE, PromptOptions, build_prompt

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


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    """Settings of one ``pyrualean generate``. ``budget_s``: the run's wall-clock budget stated in the prompt [s];
    ``timeout_s``: hard limit of the whole generation (all attempts) [s]; ``reasoning``: recorded only (send it via
    ``extra_body`` if the server takes it); the ``openai_*`` fields as for ``play`` (None = not sent)."""

    card: pathlib.Path
    out: pathlib.Path
    base_url: str
    model: str = "DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B"
    reasoning: str | None = None
    budget_s: float = 1200.0
    timeout_s: float = 3600.0
    transfer: bool = False
    api_key_env: str | None = None
    primitives: str = "full"
    openai_max_tokens: int | None = None
    openai_temperature: float | None = None
    openai_extra_body: dict | None = None
    openai_max_retries: int = 5
    context_window: int = 65536

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ValueError("generate needs --base-url (an OpenAI-compatible chat-completions endpoint, "
                             "e.g. http://127.0.0.1:30000/v1)")
        for name in ("budget_s", "timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive; got {getattr(self, name)}")


@dataclasses.dataclass(frozen=True)
class GenerationRecord:
    """``generation.json`` (contract 6.3 ``generate`` directory). ``mode``: per_cell | transfer; ``card``
    ``{suite, task, seed}``; ``images`` card image paths attached; ``wall_s`` seconds; ``returncode`` 0 when the
    server answered, 1 when it did not; ``turns`` model responses (0 or 1); token totals under the reference's
    names; ``policy`` path of ``policy.py`` (None without one), ``policy_lines``; ``error`` why no policy was
    written (absent when one was). ``api_key_env`` is the variable's NAME, never the key."""

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
    input_tokens: int | None
    cached_input_tokens: int | None
    output_tokens: int | None
    reasoning_output_tokens: int | None
    total_tokens: int | None
    policy: str | None
    policy_lines: int
    error: str | None = None
    runtime: str = "openai"
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")

    def to_json(self) -> dict[str, Any]:
        """Fields in order; ``error`` only when set."""
        data = {f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if self.error is None:
            data.pop("error")
        return data


def generate(cfg: GenerateConfig) -> GenerationRecord:
    """Render, send once, extract; returns the record written to ``<out>/generation.json``."""
    from pyrua_ros.agent.runtimes.base import JsonlEventSink, RuntimeFailure
    from pyrua_ros.agent.runtimes.openai_runtime import OpenAIRuntime
    from pyrua_ros.agent.runtimes.settings import ModelSettings
    from pyrua_ros.robo.libero import robot_class

    out = pathlib.Path(cfg.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name in ("policy.py", "response.md", "generation.json", "openai_events.jsonl"):
        (out / name).unlink(missing_ok=True)
    card_path = pathlib.Path(cfg.card)
    card = CardRecord.read(card_path)
    card_dir = card_path if card_path.is_dir() else card_path.parent
    text, bundle = single_shot_prompt(robot_class(cfg.primitives), card, card_dir=card_dir, budget_s=cfg.budget_s,
                                      transfer=cfg.transfer, primitives=cfg.primitives)
    (out / "prompt.txt").write_text(text, encoding="utf-8")
    images = [pathlib.Path(p).read_bytes() for p in bundle.images]
    started_at, t0 = now_iso(), time.monotonic()
    settings = ModelSettings(model=cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                             max_tokens=cfg.openai_max_tokens, temperature=cfg.openai_temperature,
                             extra_body=cfg.openai_extra_body, request_timeout_s=cfg.timeout_s,
                             max_retries=cfg.openai_max_retries, context_window=cfg.context_window)
    events = JsonlEventSink(out / "openai_events.jsonl")
    response, error, usage = None, None, {}
    try:
        runtime = OpenAIRuntime(settings, tools=[], event_sink=events)   # one completion, no tools
        runtime.start(text, images)
        try:
            response = runtime.respond(deadline=t0 + cfg.timeout_s)
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
        model=cfg.model, reasoning_effort=cfg.reasoning, base_url=settings.endpoint(), api_key_env=cfg.api_key_env,
        mode="transfer" if cfg.transfer else "per_cell",
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
class RunConfig:
    """Settings of one ``pyrualean run``: the ``policy`` file, the cell (``play`` = a PlayConfig whose ``budget_s``
    is the watchdog ``timeout_s`` [s]; its agent settings are unused) and the ``generation.json`` to attach
    (default: the one next to the policy, if any)."""

    policy: pathlib.Path
    play: PlayConfig
    generation: pathlib.Path | None = None

    def __post_init__(self) -> None:
        if not pathlib.Path(self.policy).is_file():
            raise ValueError(f"--policy {self.policy}: no such file")
        if self.generation is not None and not pathlib.Path(self.generation).is_file():
            raise ValueError(f"--generation {self.generation}: no such file")

    @property
    def timeout_s(self) -> float:
        return self.play.budget_s


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


@dataclasses.dataclass(frozen=True)
class RunResult:
    """Single-shot ``result.json`` (``pyrualean-episode-v2``, contract 6.3). ``status``: completed (``run``
    returned), finished (``EpisodeFinished``, ``reason`` e.g. terminated), error (``reason`` load | exception),
    timeout, boot_error. ``environment_success`` is the benchmark check, never the program's claim. Times [s];
    ``timeout_s`` the watchdog. ``host`` ``{python, cuda_device, libero_type, boot_options, rpent_root, sandbox}``;
    ``generation`` the attached ``generation.json`` (or None)."""

    backend: str
    robot: str
    suite: str
    task: int | str
    seed: int
    task_language: str | None
    policy: PolicyRecord
    environment_success: bool
    status: str
    reason: str | None
    error: ErrorInfo | None
    calls: int
    stateful_calls: int
    env_steps: int
    env_steps_total: int | None
    policy_wall_s: float | None
    startup_s: float | None
    total_wall_s: float | None
    timeout_s: float
    max_episode_steps: int
    prompt: PromptRecord | None
    host: dict[str, Any]
    created_at: str
    notes: tuple[str, ...]
    generation: dict[str, Any] | None
    schema: str = SCHEMA
    system: str = SYSTEM

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}; got {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        """The key order of contract 6.3 (schema and system first)."""
        data: dict[str, Any] = {"schema": self.schema, "system": self.system}
        for field in dataclasses.fields(self):
            if field.name not in ("schema", "system"):
                data[field.name] = _json_value(getattr(self, field.name))
        return data


def error_from_text(text: str) -> ErrorInfo:
    """``{type, message, traceback}`` from a kernel exception text (a traceback whose last line is ``Type: msg``)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "Error"
    head, sep, message = last.partition(":")
    kind = head.strip() if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head.strip()) else "Error"
    return ErrorInfo(type=kind.rsplit(".", 1)[-1], message=message.strip() if sep else last, traceback=text)


class SingleShotRun(Episode):
    """An Episode whose agent is one ``run(robo)`` call: boot, card, judge and shutdown are the play host's."""

    def __init__(self, cfg: RunConfig):
        super().__init__(cfg.play)
        self.run_cfg = cfg
        self.policy_record: PolicyRecord | None = None
        self.program = None
        self.generation = self._load_generation()

    def _load_generation(self) -> dict[str, Any] | None:
        path = self.run_cfg.generation or pathlib.Path(self.run_cfg.policy).resolve().parent / "generation.json"
        if not pathlib.Path(path).is_file():
            return None
        try:
            data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            self.notes.append(f"generation.json at {path} could not be read: {exc}")
            return None
        return data if isinstance(data, dict) else None

    def prepare_run_directory(self) -> None:
        source = pathlib.Path(self.run_cfg.policy).resolve()
        code = source.read_bytes()
        super().prepare_run_directory()
        self.notes = [n for n in self.notes if not n.startswith("runtime replay")]   # no runtime runs here
        for name in ("policy_output.txt", "prompt.txt"):
            (self.out / name).unlink(missing_ok=True)
        if source != (self.out / "policy.py").resolve():
            (self.out / "policy.py").write_bytes(code)
        (self.workspace / "policy.py").write_bytes(code)
        self.policy_record = PolicyRecord(path=str(source), sha256=hashlib.sha256(code).hexdigest(), bytes=len(code))

    def build_prompt(self) -> None:
        text, bundle = single_shot_prompt(self.host.robo, self.card, card_dir=self.out, budget_s=self.cfg.budget_s,
                                          primitives=self.cfg.primitives)
        (self.out / "prompt.txt").write_text(text, encoding="utf-8")
        self.prompt = PromptRecord(len(text), hashlib.sha256(text.encode("utf-8")).hexdigest(),
                                   tuple(bundle.images))

    def start_agent(self) -> None:
        start_kernel(self)

    def run_loop(self) -> None:
        """Run ``run(robo)`` once under the watchdog; map the program outcome to status and reason."""
        timeout_s = self.cfg.budget_s
        watchdog = threading.Timer(timeout_s, self.host.stop, args=("timeout",))
        watchdog.daemon = True
        started = time.monotonic()
        watchdog.start()
        try:
            self.program = self.kernel.run_program(path="policy.py", timeout_s=timeout_s)
        finally:
            watchdog.cancel()
            self.policy_wall_s = round(time.monotonic() - started, 3)
        outcome = self.program
        self.policy_record = dataclasses.replace(self.policy_record, sandbox_flags=tuple(outcome.sandbox_flags))
        output = outcome.stdout + (("\n--- stderr ---\n" + outcome.stderr) if outcome.stderr else "")
        self.records.write_text("policy_output.txt", output)
        timed_out = outcome.status == "timeout" or self.host.stop_reason == "timeout"
        if timed_out:
            self.status, self.reason = "timeout", "timeout"
            self.notes.append(f"the program ran past its {timeout_s:g} s wall-clock budget and was stopped")
            self.error = ErrorInfo(type="TimeoutError", message=f"run(robo) ran past its {timeout_s:g} s watchdog",
                                   traceback=outcome.exception)
        elif outcome.status == "error":
            text = outcome.exception or "Error: the program failed"
            self.status = "error"
            self.reason = "load" if outcome.refused or text.startswith("PolicyLoadError") else "exception"
            self.error = error_from_text(text)
        elif outcome.status == "finished":
            self.status, self.reason = "finished", outcome.reason
        else:
            self.status, self.reason = "completed", "returned"
        if outcome.restarted:
            self.notes.append("the kernel process was killed and restarted after the program")

    def _write_side_records(self) -> None:
        self._write_robot_records()   # no tool turns, transcript or last message in a single shot

    def build_result(self, placeholder: bool = False) -> RunResult:
        cfg = self.cfg
        calls = self.calls_written if self.calls_written is not None else (
            self.host.ledger.records if self.host is not None else ())
        status, reason = self.status, self.reason
        if placeholder:
            status, reason = "error", ("killed: the single-shot host started but did not finish (this placeholder "
                                       "is replaced when the run ends)")
        host = {"python": sys.version.split()[0], "cuda_device": cfg.cuda_device, "libero_type": cfg.libero_type,
                "boot_options": cfg.boot_options(), "rpent_root": cfg.rpent_root, "sandbox": sandbox_description(self)}
        policy = self.policy_record or PolicyRecord(str(self.run_cfg.policy), "", 0)
        result = RunResult(
            backend="ros2", robot=cfg.robot, suite=cfg.suite, task=cfg.task, seed=cfg.seed,
            task_language=self.task_language, policy=policy, environment_success=bool(self.environment_success),
            status=status, reason=reason, error=self.error,
            calls=len(calls), stateful_calls=sum(1 for r in calls if r.stateful),
            env_steps=sum(r.env_steps for r in calls), env_steps_total=self.env_steps_total,
            policy_wall_s=self.policy_wall_s, startup_s=self.startup_s,
            total_wall_s=round(time.monotonic() - self.t0, 3), timeout_s=cfg.budget_s,
            max_episode_steps=cfg.max_episode_steps, prompt=self.prompt, host=host, created_at=now_iso(),
            notes=tuple(self.notes) + (() if placeholder else (*self.boundary_notes(), *self.records.failures)),
            generation=self.generation)
        return result


def run_policy(cfg: RunConfig) -> RunResult:
    """Run one single-shot episode; the result is also written to ``<out>/result.json``."""
    return SingleShotRun(cfg).run()

