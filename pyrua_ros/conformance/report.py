"""Rows of a conformance run and their text tables (no rclpy)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

PASS, FAIL, INFO, SKIP = "pass", "FAIL", "info", "skip"


@dataclasses.dataclass(frozen=True)
class Row:
    """One checked property of one interface. ``verdict``: pass | FAIL | info (measured, no pass/fail) | skip."""

    interface: str
    check: str
    verdict: str
    detail: str

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL


def passed(interface: str, check: str, detail: str = "") -> Row:
    return Row(interface, check, PASS, detail)


def failed(interface: str, check: str, detail: str) -> Row:
    return Row(interface, check, FAIL, detail)


def info(interface: str, check: str, detail: str) -> Row:
    return Row(interface, check, INFO, detail)


def skipped(interface: str, check: str, detail: str) -> Row:
    return Row(interface, check, SKIP, detail)


def verdict(ok: bool, interface: str, check: str, detail: str) -> Row:
    return Row(interface, check, PASS if ok else FAIL, detail)


def table(rows: Sequence[Row]) -> str:
    """One aligned table per interface, in first-seen order, then a summary line. Details are never cut (a
    remedy must reach the reader whole)."""
    out: list[str] = []
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.interface, []).append(row)
    check_w = min(34, max((len(r.check) for r in rows), default=5))
    for interface, group in groups.items():
        out.append(interface)
        for r in group:
            out.append(f"  {r.check:<{check_w}}  {r.verdict:<4}  {r.detail}")
        out.append("")
    out.append(summary(rows))
    return "\n".join(out)


def summary(rows: Iterable[Row]) -> str:
    rows = list(rows)
    counts = {v: sum(r.verdict == v for r in rows) for v in (PASS, FAIL, INFO, SKIP)}
    head = "conformant" if not counts[FAIL] else "NOT conformant"
    return (f"{head}: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[INFO]} measured, "
            f"{counts[SKIP]} skipped")
