"""The call ledger: one ``CallRecord`` per ``robo`` call the policy makes (PyRUA-Lean contract section 2.8).

The host reads it for the rich feedback (``primitive_calls``), for result.json (``calls``, ``stateful_calls``,
``env_steps``) and writes it to ``calls.jsonl``. Host-side state reads (feedback summary, the planar-move check)
are *not* ledgered here, unlike the reference, so ``calls`` counts only what the policy asked for.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
from collections.abc import Iterator
from typing import Any

SUMMARY_KEYS: tuple[str, ...] = (
    "terminated", "truncated", "success", "final_dist_m", "final_eef_pos", "steps_used", "chunks_used",
    "found", "score", "world_xyz", "center_xyz", "step",
)


MAX_KEPT_ITEMS = 64     # a list / dict / array argument longer than this is kept as a summary
MAX_KEPT_CHARS = 2000   # a string argument longer than this is cut
MAX_KEPT_DEPTH = 8


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-serialisable data: tuples -> lists, numpy scalars/arrays -> Python, non-finite floats
    kept as floats, anything else unknown -> ``repr``. Bounded, since policy code chooses the arguments: a
    container of more than ``MAX_KEPT_ITEMS`` items (or nested deeper than ``MAX_KEPT_DEPTH``) becomes a summary
    ``{"summary": ..., "len": n, "head": [...]}`` and long strings are cut."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_KEPT_CHARS else value[:MAX_KEPT_CHARS] + f"... [{len(value)} chars]"
    if depth >= MAX_KEPT_DEPTH:
        return {"summary": f"{type(value).__name__} nested more than {MAX_KEPT_DEPTH} deep"}
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "tolist"):  # numpy arrays and scalars
        size = int(getattr(value, "size", 1))
        if size > MAX_KEPT_ITEMS:
            flat = value.reshape(-1)[:8].tolist()
            return {"summary": f"array {getattr(value, 'dtype', '')} shape {list(shape)}", "len": size,
                    "head": json_safe(flat, depth + 1)}
        return json_safe(value.tolist(), depth + 1)
    if isinstance(value, dict):
        if len(value) > MAX_KEPT_ITEMS:
            items = list(value.items())[:8]
            return {"summary": f"dict of {len(value)} items", "len": len(value),
                    "head": {str(k): json_safe(v, depth + 1) for k, v in items}}
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if len(value) > MAX_KEPT_ITEMS:
            return {"summary": f"{type(value).__name__} of {len(value)} items", "len": len(value),
                    "head": [json_safe(v, depth + 1) for v in value[:8]]}
        return [json_safe(v, depth + 1) for v in value]
    if hasattr(value, "tolist"):
        return json_safe(value.tolist(), depth + 1)
    text = repr(value)
    return text if len(text) <= MAX_KEPT_CHARS else text[:MAX_KEPT_CHARS] + "..."


def summarize(tool: str, result: Any) -> dict[str, Any]:
    """The small summary kept in a record: the result's fields among SUMMARY_KEYS (plus ``eef_pos`` for
    ``view_env_state`` and ``bytes`` for ``artifact``)."""
    if tool == "artifact" and isinstance(result, bytes | bytearray):
        return {"bytes": len(result)}
    if not dataclasses.is_dataclass(result):
        return {}
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    keys = (*SUMMARY_KEYS, "eef_pos") if tool == "view_env_state" else SUMMARY_KEYS
    return {k: json_safe(fields[k]) for k in keys if k in fields}


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """One ``robo`` call. ``index`` (0-based order), ``tool`` (PyRUA tool name, e.g. ``move_to``,
    ``view_env_state``, ``back_project``), ``kwargs`` (JSON-safe arguments; positional ones under ``args``),
    ``started_at`` epoch s, ``elapsed_s``, ``ok`` (no exception), ``stateful`` (a motion call),
    ``env_steps`` (control steps it consumed, >= 0; 0 for read-only calls), ``error`` ("Type: msg" or None),
    ``summary`` (see :func:`summarize`), ``note`` (for operators, never shown to the model: e.g. which ground-truth
    label a ``segment`` prompt matched, or what the scene had on a miss; None for most calls)."""

    index: int
    tool: str
    kwargs: dict[str, Any]
    started_at: float
    elapsed_s: float
    ok: bool
    stateful: bool
    env_steps: int
    error: str | None
    summary: dict[str, Any]
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (non-finite floats become strings so the line stays valid JSON)."""
        def finite(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return str(v)
            if isinstance(v, dict):
                return {k: finite(x) for k, x in v.items()}
            if isinstance(v, list):
                return [finite(x) for x in v]
            return v
        return finite(json_safe(dataclasses.asdict(self)))


MAX_RECORDS = 20_000   # calls kept whole in one ledger; later ones are counted only (Ledger.dropped)


@dataclasses.dataclass(frozen=True)
class Dropped:
    """The calls a full ledger counted without keeping: ``calls``, ``stateful`` (motion calls among them) and
    ``env_steps`` (the control steps they consumed)."""

    calls: int = 0
    stateful: int = 0
    env_steps: int = 0


class Ledger:
    """Append-only, thread-safe list of CallRecords, bounded: policy code decides how many calls it makes (a
    300 s cell made 0.5-1.3 million, up to 1 GB of records), so the first ``max_records`` are kept whole and
    the rest only counted (:attr:`dropped`). ``len()`` is every call, kept or not."""

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self._records: list[CallRecord] = []
        self._lock = threading.Lock()
        self.max_records = max_records
        self._dropped = Dropped()

    def append(self, *, tool: str, kwargs: dict[str, Any], started_at: float, elapsed_s: float, ok: bool,
               stateful: bool, env_steps: int = 0, error: str | None = None,
               summary: dict[str, Any] | None = None, note: str | None = None) -> CallRecord:
        """Add a record (index assigned here, kwargs made JSON-safe, env_steps clamped >= 0) and return it."""
        with self._lock:
            full = len(self._records) >= self.max_records
            record = CallRecord(
                index=len(self._records) + self._dropped.calls, tool=tool,
                kwargs={} if full else json_safe(dict(kwargs)), started_at=float(started_at),
                elapsed_s=float(elapsed_s), ok=bool(ok), stateful=bool(stateful),
                env_steps=max(0, int(env_steps)), error=error, summary=dict(summary or {}), note=note,
            )
            if full:
                d = self._dropped
                self._dropped = Dropped(d.calls + 1, d.stateful + record.stateful, d.env_steps + record.env_steps)
            else:
                self._records.append(record)
            return record

    @property
    def dropped(self) -> Dropped:
        """The calls counted but not kept, once ``max_records`` were."""
        with self._lock:
            return self._dropped

    @property
    def records(self) -> tuple[CallRecord, ...]:
        """A snapshot of every record so far."""
        with self._lock:
            return tuple(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records) + self._dropped.calls

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.records)

    def since(self, index: int) -> tuple[CallRecord, ...]:
        """Records with ``record.index >= index`` (a turn's calls: snapshot ``len(ledger)`` before the turn)."""
        return self.records[index:]

    def stateful_calls(self) -> int:
        """Number of stateful (motion) calls, kept or not."""
        return sum(1 for r in self.records if r.stateful) + self.dropped.stateful

    def env_steps(self) -> int:
        """Total control steps consumed by all calls, kept or not."""
        return sum(r.env_steps for r in self.records) + self.dropped.env_steps

    def write_jsonl(self, path: str | os.PathLike) -> None:
        """Write one JSON object per record to ``path`` (overwrites)."""
        with open(path, "w", encoding="utf-8") as fh:
            for record in self.records:
                fh.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
