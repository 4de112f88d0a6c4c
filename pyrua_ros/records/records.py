"""Typed run records: ``result.json`` (schema ``pyrualean-episode-v2``), ``tool_turns.json`` and ``card.json``.

One dataclass field per key of PYRUALEAN-CONTRACT.md 6.1, 6.2 and 6.4, so a missing key is a ``TypeError`` at
construction, not a forgotten dict entry. ``to_json()`` gives the exact key set and order of the reference;
``write_result`` / ``write_json`` replace the file atomically (temporary file in the same folder + rename), so a
reader never sees half a record. Times are seconds, ``created_at`` is local ISO 8601 with the UTC offset.
Our own runtime fields ride where the schema leaves room: ``host.runtime`` (``"openai"`` / ``"replay"``),
``generation`` (token totals with the reference's names, requests, per-runtime audit) and the
``<runtime>_returncode`` key.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pyrua_ros.records import bounded
from pyrua_ros.records.text import safe_data, safe_text
from pyrua_ros.settings.modes import BUDGET_MODES, FINISH_STATUSES, PLAY_STATUSES

SCHEMA = "pyrualean-episode-v2"
SYSTEM = "pyrualean"

def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


def now_iso() -> str:
    """Local time now as ISO 8601 with the UTC offset, seconds precision (``created_at``)."""
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _record_folder(folder: Path) -> None:
    """Make ``folder`` a real folder of this process: a link or file planted at its name is removed first (a
    record is never written through a link to somewhere else)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)


def _take_name(tmp: str, path: Path) -> None:
    """Rename the host's own ``tmp`` over ``path``, whatever is there: a link, a FIFO or a file is replaced, a
    folder planted at a record's name is removed first."""
    try:
        os.replace(tmp, path)
    except OSError:
        if not (path.is_dir() and not path.is_symlink()):
            raise
        shutil.rmtree(path)   # the fd-based rmtree: no link inside it is followed
        os.replace(tmp, path)


def _replace_atomically(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``: a reader sees
    the old file or the new one, never half of one; a link, FIFO or folder at ``path`` is replaced, never
    followed or opened."""
    _record_folder(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)   # mkstemp makes 0600; run records are meant to be read by others
        _take_name(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def open_record(path: Path | str):
    """A new, empty file at ``path`` that only this process wrote, open for binary writing (records appended as
    they happen: event logs, bags, driver logs). Made as a temporary file with ``O_EXCL`` and renamed over the
    name, so a link, FIFO or file already there is replaced, never followed, opened or appended to."""
    path = Path(path)
    _record_folder(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)
        _take_name(tmp, path)
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return os.fdopen(fd, "wb")


# Characters JSON leaves as they are that ``str.splitlines`` (and many JSON-lines readers) take as line ends: a
# text from a cell holding them would otherwise start a line of its own, a record it does not own.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def jsonl_line(row: Any) -> str:
    """One JSON-lines line (newline included) of ``row``, text made safe and every character a reader could take
    as a line end escaped: whatever text the row holds, it is exactly one line."""
    text = json.dumps(safe_data(row), ensure_ascii=False, default=lambda v: safe_text(str(v)))
    return text.translate(_LINE_BREAKS) + "\n"


def json_bytes(data: Any) -> bytes:
    """Indented UTF-8 JSON of ``data`` with every string made safe (:func:`safe_data`), newline-terminated; the
    characters a reader could take as line ends (U+2028, U+2029, U+0085) escaped, as in :func:`jsonl_line`
    (JavaScript before ES2019 and line-based tools split a ``result.json`` or ``transcript.json`` at them)."""
    text = json.dumps(safe_data(data), indent=2, ensure_ascii=False, default=lambda v: safe_text(str(v)))
    return (text.translate(_LINE_BREAKS) + "\n").encode("utf-8")


def write_json(path: Path | str, data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically (temporary file + ``os.replace``), text made safe."""
    return _replace_atomically(Path(path), json_bytes(data))


@dataclasses.dataclass(frozen=True)
class ErrorInfo:
    """Why an episode failed with an exception: ``type`` (class name), ``message``, optional ``traceback``."""

    type: str
    message: str
    traceback: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{type, message}`` plus ``traceback`` when there is one."""
        data = {"type": self.type, "message": self.message}
        if self.traceback is not None:
            data["traceback"] = self.traceback
        return data

    @classmethod
    def from_exception(cls, exc: BaseException, traceback_text: str | None = None) -> ErrorInfo:
        """The record of a caught exception."""
        return cls(type=type(exc).__name__, message=str(exc), traceback=traceback_text)


@dataclasses.dataclass(frozen=True)
class FinishRecord:
    """The agent's ``finish`` call: ``status`` (success|failure|stuck), ``summary``, and whether the environment
    had terminated (``robo.done``) when it was called. Only a claim: success is judged by the benchmark."""

    status: str
    summary: str
    environment_terminated: bool

    def __post_init__(self) -> None:
        _check_choice("finish status", self.status, FINISH_STATUSES)

    def to_json(self) -> dict[str, Any]:
        """``{status, summary, environment_terminated}``."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PromptRecord:
    """``prompt``: length in characters, SHA-256 of ``prompt.txt`` and the attached image paths."""

    chars: int
    sha256: str
    images: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{chars, sha256, images}``."""
        return {"chars": self.chars, "sha256": self.sha256, "images": list(self.images)}


def check_keys(cls):
    """``cls`` (a record whose ``to_json`` writes the keys ``KEYS`` in that order) after checking that ``KEYS``
    names each of its fields exactly once: a field missing from the key order would be dropped from the file
    silently; a ``TypeError`` at import otherwise."""
    names = [f.name for f in dataclasses.fields(cls)]
    if sorted(cls.KEYS) != sorted(names):
        raise TypeError(f"{cls.__name__}.KEYS must name each field once: missing "
                        f"{sorted(set(names) - set(cls.KEYS))}, unknown or repeated "
                        f"{sorted(k for k in set(cls.KEYS) if cls.KEYS.count(k) != 1 or k not in names)}")
    return cls


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenTotals:
    """Token totals under the reference's names (``TOKEN_KEYS``), summed over a run's model requests, None where the
    server reported none: ``input_tokens`` (``cached_input_tokens`` of them served from the prompt cache),
    ``output_tokens`` (``reasoning_output_tokens`` of them reasoning), ``total_tokens`` = input + output. Shared by
    ``result.json``'s :class:`Generation` and the single shot's ``generation.json``; each writes them where its
    ``KEYS`` say."""

    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_output_tokens: int | None = None
    total_tokens: int | None = None


TOKEN_KEYS = tuple(f.name for f in dataclasses.fields(TokenTotals))


@check_keys
@dataclasses.dataclass(frozen=True, kw_only=True)
class Generation(TokenTotals):
    """``generation``: the runtime's audit. The token totals (:class:`TokenTotals`); ``requests`` model requests;
    ``turns`` tool turns the runtime counted; ``sandbox_flags`` ``[{turn, flags}]``; ``extra`` runtime-specific keys
    merged in (e.g. per-request usage)."""

    KEYS: ClassVar[tuple[str, ...]] = ("runtime", "model", *TOKEN_KEYS, "requests", "turns", "usage_source",
                                       "sandbox_flags", "extra")

    runtime: str
    model: str | None = None
    requests: int = 0
    turns: int | None = None
    usage_source: str | None = None
    sandbox_flags: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """All fields in ``KEYS`` order, ``extra`` merged at top level (its keys may not shadow a field)."""
        data = {name: getattr(self, name) for name in self.KEYS if name != "extra"}
        data["sandbox_flags"] = [dict(flag) for flag in self.sandbox_flags]
        clash = set(self.extra) & set(data)
        if clash:
            raise ValueError(f"generation extra keys shadow fields: {sorted(clash)}")
        return {**data, **self.extra}


@dataclasses.dataclass(frozen=True)
class HostInfo:
    """``host``: interpreter, GPU index as given (unused by a ROS backend, recorded), primitive set, runtime,
    boot options, sandbox description, RPent root (accepted and recorded, meaningless here); the ``codex_*`` /
    ``claude_cli`` keys exist only for those runtimes and are written only when set."""

    python: str
    cuda_device: str | None
    primitive_set: str
    runtime: str
    boot_options: dict[str, Any]
    sandbox: str
    rpent_root: str | None = None
    codex_context: dict[str, Any] | None = None
    codex_home: str | None = None
    claude_cli: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Fields in order; the optional runtime-specific ones only when not None."""
        optional = {"codex_context", "codex_home", "claude_cli"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in optional or getattr(self, f.name) is not None}


def _json_value(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResultRecord:
    """What every ``result.json`` (``pyrualean-episode-v2``) holds: a play episode's (:class:`EpisodeResult`,
    PYRUALEAN-CONTRACT.md 6.2) and a single shot's (:class:`~pyrua_ros.agent.run.single_shot.RunResult`, 6.3).

    ``environment_success`` is the benchmark predicate after the agent or program ran, never its claim. ``status`` /
    ``reason`` / ``error``: how the episode ended (``STATUSES`` of the kind, :mod:`pyrua_ros.settings.outcomes`).
    ``calls`` is the ledger length, ``stateful_calls`` the calls that moved, ``env_steps`` the sum of the ledger's env
    steps, ``env_steps_total`` the backend frame counter, ``state_digest`` the driver's chained per-step digest of
    the physics state (``final``, ``per_step``: the same program on the same instance reproduces it on one machine;
    :mod:`pyrua_ros.sim_interfaces.state_digest`). Wall times [s]: ``policy_wall_s`` (agent loop or program),
    ``startup_s`` (boot), ``total_wall_s``; ``timeout_s`` the wall-clock budget or watchdog [s];
    ``max_episode_steps`` the simulator's step budget. ``host``: interpreter, GPU, boot options, sandbox (a
    :class:`HostInfo`, or the single shot's plain dict); ``generation``: the runtime's audit (a :class:`Generation`,
    or the single shot's attached ``generation.json``); ``created_at`` local ISO 8601; ``notes`` lines a reader
    should know.

    Each kind gives its key order once, ``KEYS`` (the contract's order, ``schema`` and ``system`` first, checked
    against its fields by :func:`check_keys`), and ``to_json`` writes exactly those keys in that order: the fields
    are declared here once, the order stays the reference's.
    """

    KEYS: ClassVar[tuple[str, ...]] = ()
    STATUSES: ClassVar[tuple[str, ...]] = ()

    backend: str
    robot: str
    suite: str | None
    task: int | str
    seed: int
    task_language: str | None
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
    host: HostInfo | dict[str, Any]
    created_at: str
    notes: tuple[str, ...]
    generation: Generation | dict[str, Any] | None
    state_digest: dict[str, Any] | None = None
    schema: str = SCHEMA
    system: str = SYSTEM

    def __post_init__(self) -> None:
        _check_choice("status", self.status, self.STATUSES)
        if self.schema != SCHEMA:
            raise ValueError(f"schema must be {SCHEMA!r}; got {self.schema!r}")

    def json_key(self, name: str) -> str:
        """The result.json key of field ``name`` (its name, unless a kind renames it)."""
        return name

    def to_json(self) -> dict[str, Any]:
        """The exact key set and order of the kind's ``result.json`` (``KEYS``)."""
        return {self.json_key(name): _json_value(getattr(self, name)) for name in self.KEYS}


@check_keys
@dataclasses.dataclass(frozen=True, kw_only=True)
class EpisodeResult(ResultRecord):
    """One play episode's ``result.json`` (``pyrualean-episode-v2``, PYRUALEAN-CONTRACT.md 6.2): the shared
    fields of :class:`ResultRecord` plus the arm's settings (``arm``, ``model``, ``reasoning_effort``,
    ``max_programs``, ``images``, ``feedback``, ``guides``, ``max_turns``, ``budget_mode``), the agent's ``finish``
    claim, ``tool_turns`` and the runtime's ``runtime_returncode`` (written as ``<host.runtime>_returncode``) and
    ``planner_attempts``. ``timeout_s`` = ``budget_s``."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "schema", "system", "arm", "backend", "robot", "suite", "task", "seed", "task_language", "model",
        "reasoning_effort", "max_programs", "images", "feedback", "guides", "max_turns", "budget_mode",
        "environment_success", "status", "reason", "error", "finish", "calls", "stateful_calls", "env_steps",
        "tool_turns", "policy_wall_s", "startup_s", "total_wall_s", "timeout_s", "max_episode_steps", "prompt",
        "generation", "host", "created_at", "notes", "runtime_returncode", "planner_attempts", "env_steps_total",
        "state_digest")
    STATUSES: ClassVar[tuple[str, ...]] = PLAY_STATUSES

    arm: str
    model: str | None
    reasoning_effort: str | None
    max_programs: int | None
    images: str
    feedback: str
    guides: dict[str, Any] | bool
    max_turns: int | None
    budget_mode: str
    finish: FinishRecord | None
    tool_turns: int
    runtime_returncode: int | None
    planner_attempts: int

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_choice("budget_mode", self.budget_mode, BUDGET_MODES)

    def json_key(self, name: str) -> str:
        """``runtime_returncode`` is written as ``<host.runtime>_returncode``."""
        return f"{self.host.runtime}_returncode" if name == "runtime_returncode" else name


def write_result(path: Path | str, result: ResultRecord | dict[str, Any]) -> Path:
    """Write ``result.json`` atomically (text made safe); ``path`` may be the run directory or the file itself."""
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    return write_json(path, result.to_json() if isinstance(result, ResultRecord) else result)


class JsonlRecord:
    """A JSON-lines record written as it happens (``<runtime>_events.jsonl``): each row is appended to a file
    only this process made (:func:`open_record`) as one line (:func:`jsonl_line`), and kept. A failed write
    (a full disk) never raises here; ``close()`` rewrites the file atomically from the kept rows when a write
    failed or the name no longer holds this process's own file (replaced by a link, a FIFO or another file), so
    the record ends with exactly its own rows. ``failures`` says what could not be repaired. Thread-safe."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.rows: list[Any] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._dirty = False
        try:
            self._fh = open_record(self.path)
            self._identity = _identity(os.fstat(self._fh.fileno()))
        except OSError as exc:
            self._fh, self._identity, self._dirty = None, None, True
            self.failures.append(f"{self.path.name} could not be opened: {exc}")

    def append(self, row: Any) -> None:
        """Keep ``row`` and append its line to the file."""
        line = jsonl_line(row).encode("utf-8")
        with self._lock:
            self.rows.append(row)
            if self._fh is None or self._dirty:
                self._dirty = True
                return
            try:
                self._fh.write(line)
                self._fh.flush()
            except OSError:
                self._dirty = True   # rewritten whole at close

    def close(self) -> None:
        """Close the file; rewrite it from the kept rows when it is not whole or not this process's own."""
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError:
                    self._dirty = True
                self._fh = None
            try:
                ours = _identity(os.lstat(self.path)) == self._identity
            except OSError:
                ours = False
            if self._dirty or not ours:
                try:
                    _replace_atomically(self.path, "".join(jsonl_line(r) for r in self.rows).encode("utf-8"))
                except OSError as exc:
                    self.failures.append(f"{self.path.name} could not be written: {type(exc).__name__}: {exc}")


def _identity(info: os.stat_result) -> tuple[int, int] | None:
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


RESULT_RESERVE_BYTES = 64 * 1024   # the placeholder result.json holds this much space for the final record


class RunRecords:
    """The one writer of a run directory's records (``result.json``, ``tool_turns.json``, ``transcript.json``,
    ``calls.jsonl``, text files), used by every path: play cells, the program arm, single shot, and failures.

    Every text is made safe (:func:`safe_data`), every file replaced atomically. A record that cannot be written
    is not an exception: the failure is kept in ``failures`` (what the host must report as ``status: error``)
    and the episode's other records still get written. ``result.json`` is written first as a placeholder that
    reserves ``RESULT_RESERVE_BYTES`` on disk, so the final record can still be written over it in place when
    the disk is full (compacted if it does not fit)."""

    def __init__(self, out: Path | str) -> None:
        self.out = Path(out)
        self.failures: list[str] = []

    def _attempt(self, name: str, make_bytes) -> bool:
        try:
            _replace_atomically(self.out / name, make_bytes())
        except Exception as exc:   # a full disk, a hostile value, our own bug: recorded, never fatal here
            self.failures.append(f"{name} could not be written: {type(exc).__name__}: {safe_text(str(exc))[:300]}")
            return False
        return True

    def write_json(self, name: str, data: Any) -> bool:
        """``name`` (relative to the run directory) as indented JSON; True when it was written."""
        return self._attempt(name, lambda: json_bytes(data))

    def write_text(self, name: str, text: str) -> bool:
        """``name`` as UTF-8 text (made safe); True when it was written."""
        return self._attempt(name, lambda: safe_text(text or "").encode("utf-8"))

    def write_bytes(self, name: str, data: bytes) -> bool:
        """``name`` as the bytes ``data`` (an image); True when it was written."""
        return self._attempt(name, lambda: bytes(data))

    def write_jsonl(self, name: str, rows) -> bool:
        """``name`` as JSON lines, one object per row (made safe); True when it was written."""
        def make() -> bytes:
            return "".join(jsonl_line(row) for row in rows).encode("utf-8")
        return self._attempt(name, make)

    def reserve_result(self, placeholder: dict[str, Any]) -> None:
        """Write the placeholder ``result.json`` padded to ``RESULT_RESERVE_BYTES`` (JSON allows trailing
        whitespace): the blocks the final record may need are taken now, while there is room."""
        data = json_bytes(placeholder)
        data += b" " * max(0, RESULT_RESERVE_BYTES - len(data) - 1) + b"\n"
        _replace_atomically(self.out / "result.json", data)

    def write_result(self, result: dict[str, Any]) -> Path:
        """Write the final ``result.json``: atomically when the disk allows, else over the reserved placeholder
        in place (compacted to fit: notes and tracebacks cut first). Raises only when neither works."""
        path = self.out / "result.json"
        data = json_bytes(result)
        try:
            return _replace_atomically(path, data)
        except OSError as exc:
            why = f"{type(exc).__name__}: {exc.strerror or exc}"
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"result.json is no longer the placeholder this run wrote ({why})")
            room = os.fstat(fd).st_size
            data = _fit(result, room, why)
            os.pwrite(fd, data + b" " * (room - len(data)), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        return path


def _fit(result: dict[str, Any], room: int, why: str) -> bytes:
    """``result`` as JSON of at most ``room`` bytes, with a note that the disk was full; what does not fit is
    dropped in order of value (tracebacks, then generation details, then notes beyond the last few)."""
    record = dict(result)
    record["notes"] = [*list(record.get("notes") or []),
                       f"result.json was written over its reserved placeholder ({why})"]
    data = json_bytes(record)
    if len(data) <= room:
        return data
    if isinstance(record.get("error"), dict):
        record["error"] = {k: v for k, v in record["error"].items() if k != "traceback"}
    record["generation"] = None
    record["notes"] = record["notes"][-5:]
    data = json_bytes(record)
    if len(data) <= room:
        return data
    minimal = {k: record.get(k) for k in ("schema", "system", "status", "reason", "environment_success")}
    minimal["notes"] = [safe_text(str(n))[:200] for n in record["notes"][-2:]]
    return json_bytes(minimal)[:room]


def read_result(path: Path | str) -> dict[str, Any]:
    """Load a ``result.json`` (file or run directory) as a dict; a clear error when it is missing or not JSON.
    Read as hostile (``bounded.read_file``): never through a link, at most 64 MiB, nested at most 64 deep,
    numbers finite; each refusal is a ``ValueError`` of one line naming the file."""
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    if not path.is_file():
        raise FileNotFoundError(f"no result.json at {path}")
    try:
        data = bounded.read_file(path)
    except OSError as exc:
        raise ValueError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a {type(data).__name__}, expected a JSON object")
    return data


@dataclasses.dataclass(frozen=True)
class TurnRecord:
    """One tool turn in ``tool_turns.json`` (6.4): ``index`` (0-based, as the reference), ``tool``
    (python|run_program|finish|...), ``elapsed_s`` (3 dp), ``ok`` (no ``error`` key in the result), ``moved`` (a
    stateful call ran), ``env_steps`` (frame delta), ``terminated`` (``robo.done`` after the turn),
    ``sandbox_flags``. Our additions, written only when set: ``usage`` (token usage of the model request that
    made this call), ``model_latency_s``, and ``first_call`` / ``calls`` (the turn's ``robo`` calls are the
    calls.jsonl rows ``first_call`` .. ``first_call + calls - 1``)."""

    index: int
    tool: str
    elapsed_s: float
    ok: bool
    moved: bool
    env_steps: int
    terminated: bool
    sandbox_flags: tuple[str, ...] = ()
    usage: dict[str, Any] | None = None
    model_latency_s: float | None = None
    first_call: int | None = None
    calls: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The reference keys (``elapsed_s`` rounded to 3 dp), then our optional ones when set."""
        data = {"index": self.index, "tool": self.tool, "elapsed_s": round(float(self.elapsed_s), 3),
                "ok": self.ok, "moved": self.moved, "env_steps": self.env_steps, "terminated": self.terminated,
                "sandbox_flags": list(self.sandbox_flags)}
        if self.usage is not None:
            data["usage"] = dict(self.usage)
        if self.model_latency_s is not None:
            data["model_latency_s"] = round(float(self.model_latency_s), 3)
        if self.first_call is not None and self.calls is not None:
            data["first_call"], data["calls"] = self.first_call, self.calls
        return data


def write_turns(path: Path | str, turns: Sequence[TurnRecord]) -> Path:
    """Write ``tool_turns.json`` (a JSON list of turn records) atomically."""
    return write_json(path, [turn.to_json() for turn in turns])


@dataclasses.dataclass(frozen=True)
class CardRecord:
    """``card.json``: the non-privileged facts of an episode at step 0 (no object poses). ``eef_pos`` m,
    ``eef_quat`` (x, y, z, w), ``gripper_opening`` m, ``images`` {camera: path relative to the run directory},
    ``max_env_steps`` simulator steps, ``transfer`` (images show an example layout only), ``facts`` extra
    bullets ``{name: value}`` (the reference's dict; robots without the LIBERO layout put their facts here)."""

    suite: str
    task: int | str
    seed: int
    task_language: str
    object_names: tuple[str, ...]
    eef_pos: tuple[float, float, float]
    eef_quat: tuple[float, float, float, float]
    gripper_opening: float
    images: dict[str, str]
    max_env_steps: int
    transfer: bool = False
    robot: str = "libero"
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """All fields in order, tuples as lists."""
        return {f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CardRecord:
        """Inverse of ``to_json``; unknown keys are an error that lists the known ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"card.json has unknown keys {unknown}; known keys: {', '.join(names)}")
        values = dict(data)
        for key in ("object_names", "eef_pos", "eef_quat"):
            if key in values:
                values[key] = tuple(values[key])
        values["images"] = dict(values.get("images", {}))
        facts = values.get("facts", {})
        if isinstance(facts, list):   # an older card.json wrote facts as bullet lines
            facts = {f"fact {i + 1}": line for i, line in enumerate(facts)}
        values["facts"] = dict(facts)
        return cls(**values)

    def write(self, path: Path | str) -> Path:
        """Write ``card.json`` atomically (``path`` may be the run directory)."""
        path = Path(path)
        return write_json(path / "card.json" if path.is_dir() else path, self.to_json())

    @classmethod
    def read(cls, path: Path | str) -> CardRecord:
        """Load ``card.json`` (file or run directory)."""
        path = Path(path)
        path = path / "card.json" if path.is_dir() else path
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
