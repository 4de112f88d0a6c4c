"""Episode metrics read back from run directories: one ``EpisodeMetrics`` per ``result.json``, the table and the
aggregate the reference prints (PYRUALEAN-CONTRACT.md 6.5).

Inputs: run directories holding ``result.json``, ``result.json`` files, folders of run directories (searched one
level down), or JSON files holding ``EpisodeMetrics`` dicts (a list, one dict, or a list under ``metrics`` /
``runs`` / ``episodes``, as ``compare`` writes them). Both the play record (``system = "pyrualean:<arm>"``) and
the single-shot ``run`` record (``system = "pyrualean"``) are read. RPent transcripts are not parsed here.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.records import bounded
from pyrua_ros.records.records import TOKEN_KEYS, read_result
from pyrua_ros.records.text import printable
from pyrua_ros.settings import outcomes

# (header, width, kind) as the reference prints them: "s" left-aligned text cut to the width, "r" right-aligned
# text, "f" right-aligned one decimal with 0.0 for a missing value; "-" stands for any other missing value.
COLUMNS = (
    ("system", 17, "s"), ("task", 22, "s"), ("seed", 4, "r"), ("ok", 3, "r"), ("status", 10, "s"),
    ("turns", 5, "r"), ("calls", 5, "r"), ("steps", 6, "r"), ("wall_s", 7, "f"), ("in_tok", 9, "r"),
    ("cached", 9, "r"), ("out_tok", 7, "r"),
)
MEAN_FIELDS = ("calls", "stateful_calls", "env_steps", "turns", "wall_time_s", *TOKEN_KEYS)
CONTAINER_KEYS = ("metrics", "runs", "episodes")
RESULT = "result.json"
REASON_CHARS = 300   # of a result's reason kept in the metrics (a cause, not a log)


@dataclasses.dataclass(frozen=True)
class EpisodeMetrics:
    """What summarize and compare know about one episode. ``task`` is ``"<suite>:<task>"``; ``wall_time_s`` the
    agent-loop (or policy) wall time [s]; ``environment_success`` None = unknown outcome; ``source`` the file;
    ``outcome`` the :mod:`~pyrua_ros.settings.outcomes` kind (from ``status`` and ``reason``; derived from
    ``status`` when a metrics file written before it lacks it); ``reason`` result.json's ``reason`` (the cause of
    an infrastructure failure), cut to REASON_CHARS."""

    system: str
    backend: str
    task: str
    seed: int
    environment_success: bool | None
    status: str
    calls: int | None
    stateful_calls: int | None
    env_steps: int | None
    turns: int | None
    wall_time_s: float | None
    startup_s: float | None
    input_tokens: int | None
    cached_input_tokens: int | None
    output_tokens: int | None
    reasoning_output_tokens: int | None
    total_tokens: int | None
    source: str
    notes: tuple[str, ...] = ()
    outcome: str = ""
    reason: str | None = None

    def classified(self) -> outcomes.Outcome:
        """This episode's outcome kind and bucket (success, failure, infra, interrupted, unknown)."""
        return outcomes.outcome_of_kind(self.outcome, self.environment_success)

    def __post_init__(self) -> None:
        """Run directories are hostile: every text is made printable (a ``result.json`` holding OSC 52 or CSI 2J
        reaches a terminal as ``\\x1b]52;...``), every count that is not an integer and every time that is not a
        finite number is taken as missing, so no report crashes on what it reads."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "notes":
                value = tuple(printable(str(n)) for n in (value if isinstance(value, list | tuple) else ()))
            elif f.name in _TEXT_FIELDS:
                value = printable(str(value))
            elif f.name == "seed":
                value = value if _is_int(value) else int(value) if isinstance(value, str) and value.isdigit() else 0
            elif f.name == "environment_success":
                value = value if value is None or isinstance(value, bool) else bool(value)
            elif f.name in _FLOAT_FIELDS:
                value = float(value) if _is_number(value) and math.isfinite(value) else None
            elif f.name == "outcome":
                value = str(value or "")
            elif f.name == "reason":
                value = None if value is None else printable(str(value))
            elif not _is_int(value):
                value = None
            object.__setattr__(self, f.name, value)
        if not self.outcome:
            object.__setattr__(self, "outcome", outcomes.kind_of(self.status))

    @property
    def suite(self) -> str:
        """The suite part of ``task`` (``"libero_goal"`` for ``"libero_goal:8"``)."""
        return self.task.rpartition(":")[0] or self.task

    def to_json(self) -> dict[str, Any]:
        """All fields, ``notes`` as a list."""
        data = dataclasses.asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeMetrics:
        """Inverse of ``to_json``; a clear error naming the missing or unknown keys."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in data and n not in ("notes", "outcome", "reason")]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ValueError(f"not EpisodeMetrics: missing {missing}, unknown {unknown}; expected keys {names}")
        return cls(**{**data, "notes": tuple(data.get("notes", ())), "outcome": str(data.get("outcome") or ""),
                      "reason": _reason(data.get("reason"))})


_TEXT_FIELDS = ("system", "backend", "task", "status", "source")
_FLOAT_FIELDS = ("wall_time_s", "startup_s")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _token(generation: dict[str, Any], name: str, alias: str | None = None) -> int | None:
    value = generation.get(name)
    if value is None and alias is not None:
        value = generation.get(alias)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def metrics_from_result(data: dict[str, Any], source: str = "") -> EpisodeMetrics:
    """Metrics of a pyrualean ``result.json`` (play or single-shot run); a ``ValueError`` of one line for a
    record whose fields have the wrong shapes (a hostile run directory)."""
    try:
        return _metrics_from_result(data, source)
    except (TypeError, AttributeError, KeyError, OverflowError) as exc:
        raise ValueError(f"{source or 'result'}: not a readable pyrualean result ({type(exc).__name__}: "
                         f"{printable(str(exc))[:200]})") from None


def _metrics_from_result(data: dict[str, Any], source: str) -> EpisodeMetrics:
    schema = data.get("schema", "")
    if not str(schema).startswith("pyrualean-"):
        raise ValueError(f"{source or 'result'}: not a pyrualean result (schema {schema!r}); "
                         "expected schema 'pyrualean-episode-v2' or a single-shot run record")
    play = data.get("arm") is not None
    system = f"{data.get('system', 'pyrualean')}:{data['arm']}" if play else str(data.get("system", "pyrualean"))
    generation = data.get("generation") or {}
    turns = data.get("tool_turns") if play else generation.get("turns")
    input_tokens = _token(generation, "input_tokens", "prompt_tokens")
    output_tokens = _token(generation, "output_tokens", "completion_tokens")
    total = _token(generation, "total_tokens")
    if total is None and input_tokens is not None and output_tokens is not None:
        total = input_tokens + output_tokens
    notes = [str(n) for n in data.get("notes") or ()]
    error = data.get("error")
    if isinstance(error, dict) and error:
        notes.append(f"{error.get('type', 'Error')}: {error.get('message', '')}")
    success = data.get("environment_success")
    if success is None:
        success = False  # a pyrualean episode that crashed or never ran is a failure, not an unknown
    kind = outcomes.kind_of(data.get("status"), data.get("reason"))
    if kind == "interrupted":
        success = False   # an interrupt is never a success, whatever an old record carried
    return EpisodeMetrics(
        system=system, backend=str(data.get("backend", data.get("robot", "libero"))),
        task=f"{data.get('suite')}:{data.get('task')}", seed=data.get("seed", 0),
        environment_success=bool(success), status=str(data.get("status", "unknown")),
        calls=data.get("calls"), stateful_calls=data.get("stateful_calls"), env_steps=data.get("env_steps"),
        turns=turns, wall_time_s=data.get("policy_wall_s"), startup_s=data.get("startup_s"),
        input_tokens=input_tokens, cached_input_tokens=_token(generation, "cached_input_tokens"),
        output_tokens=output_tokens, reasoning_output_tokens=_token(generation, "reasoning_output_tokens"),
        total_tokens=total, source=source, notes=tuple(notes), outcome=kind, reason=_reason(data.get("reason")),
    )


def _reason(value: Any) -> str | None:
    return None if value is None else " ".join(str(value).split())[:REASON_CHARS]


def _metrics_from_json_file(path: Path) -> list[EpisodeMetrics]:
    try:
        data = bounded.read_file(path)
    except OSError as exc:
        raise ValueError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if isinstance(data, dict) and "schema" in data:
        return [metrics_from_result(data, str(path))]
    if isinstance(data, dict):
        for key in CONTAINER_KEYS:
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            data = [data]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a result.json, EpisodeMetrics dicts, or a list under "
                         f"{' / '.join(CONTAINER_KEYS)}")
    return [EpisodeMetrics.from_json(item) for item in data]


def natural_key(text: str | Path) -> tuple:
    """Sort key that puts ``libero_goal:10`` (or ``task/10``) after ``libero_goal:9``: digit runs compare as
    numbers, everything else as text."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", str(text)) if part)


def find_run_dirs(root: Path) -> list[Path]:
    """Every run directory (a folder holding ``result.json``) at or below ``root``, in natural order.

    A run directory's own sub-folders are not searched (``workspace/`` is the agent's: a ``result.json`` written
    there is not a run record), nor are hidden folders (``.eval/`` keeps earlier attempts) or linked folders.
    """
    found = []
    for folder, subdirs, files in os.walk(root, followlinks=False):
        if RESULT in files:
            found.append(Path(folder))
            subdirs[:] = []
            continue
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and d != "workspace"]
    return sorted(found, key=natural_key)


def load_metrics(paths: Iterable[Path | str]) -> list[EpisodeMetrics]:
    """Metrics of every episode found under ``paths`` (see the module docstring), in the order given."""
    out: list[EpisodeMetrics] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = find_run_dirs(path)
            if not found:
                transcripts = sorted(path.glob("transcript_*.json"))
                hint = " (RPent transcripts are not read by pyrua_ros)" if transcripts else ""
                raise FileNotFoundError(f"{path}: no result.json in it or in its sub-folders{hint}")
            out.extend(metrics_from_result(read_result(f), str(f / RESULT)) for f in found)
        elif path.is_file():
            out.extend(_metrics_from_json_file(path))
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return out


def _cell(value: Any, width: int, kind: str) -> str:
    if kind == "f":
        return f"{float(value or 0.0):>{width}.1f}"
    text = "-" if value is None else str(value)
    return f"{text[:width]:<{width}}" if kind == "s" else f"{text:>{width}}"


def _ok(m: EpisodeMetrics) -> str:
    return "-" if m.environment_success is None else ("Y" if m.environment_success else "N")


def format_table(metrics: Sequence[EpisodeMetrics]) -> str:
    """The reference's fixed-width table: a header and one row per episode. Text columns are cut to their width,
    a missing wall time prints as 0.0 and any other missing value as "-"."""
    header = " ".join(f"{name:<{w}}" if kind == "s" else f"{name:>{w}}" for name, w, kind in COLUMNS)
    rows = [header]
    for m in metrics:
        values = (m.system, m.task, m.seed, _ok(m), m.status, m.turns, m.calls, m.env_steps, m.wall_time_s,
                  m.input_tokens, m.cached_input_tokens, m.output_tokens)
        rows.append(" ".join(_cell(v, w, kind) for v, (_, w, kind) in zip(values, COLUMNS)))
    return "\n".join(rows)


def aggregate(metrics: Sequence[EpisodeMetrics], *, count_errors_as_failures: bool = False) -> dict[str, Any]:
    """The reference's aggregate keys over ``metrics``, with its one success rate counted by the outcome
    taxonomy (:mod:`pyrua_ros.settings.outcomes`): ``native_sr`` = successes / ``native_sr_denominator``
    (agent outcomes, plus infrastructure failures when ``count_errors_as_failures``: then exactly the reference's
    rule); ``unknown_outcome_episodes`` the episodes of unknown outcome; ``outcomes`` every bucket's count and
    ``rate_rule`` the rule in words (after the reference's keys); status counts and means over non-null values."""
    counts = outcomes.rate_counts((m.classified() for m in metrics), count_errors_as_failures=count_errors_as_failures)
    statuses: dict[str, int] = {}
    for m in metrics:
        statuses[m.status] = statuses.get(m.status, 0) + 1
    out: dict[str, Any] = {
        "episodes": len(metrics),
        "native_sr": counts.rate,
        "native_sr_denominator": counts.denominator,
        "unknown_outcome_episodes": counts.unknown,
        "statuses": statuses,
    }
    for name in MEAN_FIELDS:
        values = [getattr(m, name) for m in metrics if getattr(m, name) is not None]
        key = "mean_wall_time_s" if name == "wall_time_s" else f"mean_{name}"
        out[key] = statistics.fmean(values) if values else None
    out["outcomes"] = counts.buckets()   # beyond the reference's keys: every bucket's count, and the rule
    out["rate_rule"] = outcomes.rate_rule(count_errors_as_failures)
    return out
