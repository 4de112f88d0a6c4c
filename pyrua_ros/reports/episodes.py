"""Per-episode rows for exports and the HTML report: what a reader wants next to each episode's outcome (the task
instruction, the failure reason, where its run directory, viewer page and video are), the CSV export
(``summarize --csv``), the evaluation's configuration from ``eval.json``, and the HTML pieces the report adds
(configuration header, per-task tables with instructions, the episode table with links).

Rows come from :class:`~pyrua_ros.reports.metrics.EpisodeMetrics` plus the ``result.json`` each one was read
from (its ``source``), read again here for the instruction and reason; an episode from a metrics JSON file has no
run directory and its links are left out. CSV cells that a spreadsheet would run as a formula (``=``, ``+``, ``-``,
``@`` first) get a leading ``'``: a reason or instruction is text a model or a run directory chose.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pyrua_ros.records.records import read_result
from pyrua_ros.reports.metrics import EpisodeMetrics

CSV_COLUMNS = ("suite", "task", "instruction", "seed", "status", "reason", "success", "turns", "calls", "steps",
               "tokens", "wall_s", "run_dir")
VIEW_PAGE, VIDEO = "view.html", "episode.mp4"


@dataclasses.dataclass(frozen=True)
class EpisodeRow:
    """One episode: ``task`` is the task id within ``suite``; ``success`` None = unknown; ``reason`` the status
    reason or the error; ``run_dir`` None when the episode was not read from a run directory."""

    suite: str
    task: str
    instruction: str
    seed: int | None
    status: str
    reason: str
    success: bool | None
    turns: int | None
    calls: int | None
    steps: int | None
    tokens: int | None
    wall_s: float | None
    run_dir: Path | None

    def csv_values(self) -> list[Any]:
        """The values of :data:`CSV_COLUMNS`, formula-safe."""
        values = [self.suite, self.task, self.instruction, self.seed, self.status, self.reason,
                  "" if self.success is None else str(self.success).lower(), self.turns, self.calls, self.steps,
                  self.tokens, self.wall_s, "" if self.run_dir is None else str(self.run_dir)]
        return [_formula_safe(v) for v in values]


def _formula_safe(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _reason(data: dict[str, Any]) -> str:
    reason = data.get("reason")
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    words = [str(reason)] if reason else []
    if error and error.get("message") and str(error.get("message")) not in " ".join(words):
        words.append(f"{error.get('type', 'Error')}: {error.get('message')}")
    return "; ".join(words)


def episode_row(m: EpisodeMetrics) -> EpisodeRow:
    """The row of one episode (its result.json read again when ``m.source`` is one)."""
    source = Path(m.source) if m.source else None
    data: dict[str, Any] = {}
    run_dir = None
    if source is not None and source.name == "result.json" and source.is_file():
        run_dir = source.parent
        try:
            data = read_result(source)
        except (OSError, ValueError):
            data = {}
    suite, _, task = m.task.rpartition(":")
    return EpisodeRow(suite=suite or m.task, task=task, instruction=str(data.get("task_language") or ""),
                      seed=m.seed, status=m.status, reason=_reason(data), success=m.environment_success,
                      turns=m.turns, calls=m.calls, steps=m.env_steps, tokens=m.total_tokens, wall_s=m.wall_time_s,
                      run_dir=run_dir)


def episode_rows(metrics: Sequence[EpisodeMetrics]) -> list[EpisodeRow]:
    """:func:`episode_row` of every episode, in order."""
    return [episode_row(m) for m in metrics]


def write_csv(path: Path, rows: Sequence[EpisodeRow]) -> Path:
    """``path`` as CSV: a header of :data:`CSV_COLUMNS`, then one line per episode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(row.csv_values() for row in rows)
    return path


def eval_config(paths: Sequence[Path | str]) -> dict[str, Any] | None:
    """The ``eval.json`` of the first path that is an evaluation directory (or None)."""
    for raw in paths:
        path = Path(raw) / "eval.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                return data
    return None


# ---------------------------------------------------------------------------------------------------- HTML
#: (eval.json option = settings leaf name, label) shown in the report's configuration header
CONFIG_KEYS = (("model", "model"), ("arm", "arm"), ("runtime", "runtime"), ("robot_api", "robot API"),
               ("robot", "driver"), ("primitives", "primitives"), ("images", "images"), ("feedback", "feedback"),
               ("guides", "guides"), ("max_turns", "max turns"), ("budget_s", "budget [s]"),
               ("max_programs", "max programs"), ("reasoning", "reasoning"), ("openai_temperature", "temperature"),
               ("openai_max_tokens", "max tokens"), ("openai_tool_choice", "tool choice"),
               ("openai_extra_body", "extra body"), ("camera_rate_hz", "video fps"))


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def config_html(config: dict[str, Any] | None) -> str:
    """A small table of the evaluation's settings (eval.json ``options`` and ``code``); empty without one."""
    if not config:
        return ""
    options = config.get("options") if isinstance(config.get("options"), dict) else {}
    code = config.get("code") if isinstance(config.get("code"), dict) else {}
    cells = [(label, options[k]) for k, label in CONFIG_KEYS if options.get(k) not in (None, "", False)]
    version = f"pyrua_ros {code.get('pyrua_ros', '?')}"
    if code.get("git_commit"):
        version += f", commit {str(code['git_commit'])[:12]}" + (" (dirty tree)" if code.get("git_dirty") else "")
    cells.append(("code", version))
    runs = config.get("runs") if isinstance(config.get("runs"), list) else []
    if runs and isinstance(runs[-1], dict):
        cells.append(("last run", f"{runs[-1].get('started_at', '?')}, backend {runs[-1].get('backend', '?')}, "
                                  f"{runs[-1].get('workers', '?')} worker(s)"))
    body = "".join(f'<tr><td class="l">{_e(k)}</td><td class="l">{_e(json.dumps(v) if isinstance(v, dict) else v)}'
                   "</td></tr>" for k, v in cells)
    return f'<h2 id="configuration">Configuration (eval.json)</h2><table><tbody>{body}</tbody></table>'


def _href(target: Path, page: Path) -> str:
    return quote(Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix())


def tasks_html(rows: Sequence[EpisodeRow], suite: str) -> str:
    """The per-task table of ``suite``: task, instruction, episodes, successes, rate (over known outcomes)."""
    tasks: dict[str, list[EpisodeRow]] = {}
    for row in rows:
        if row.suite == suite:
            tasks.setdefault(row.task, []).append(row)
    body = []
    for task, group in tasks.items():
        known = [r for r in group if r.success is not None]
        wins = sum(1 for r in known if r.success)
        rate = f"{100 * wins / len(known):.0f}%" if known else "-"
        instruction = next((r.instruction for r in group if r.instruction), "")
        body.append(f'<tr><td class="l">{_e(task)}</td><td class="l">{_e(instruction)}</td><td>{len(group)}</td>'
                    f"<td>{wins}</td><td>{rate}</td></tr>")
    return ('<table><thead><tr><th class="l">task</th><th class="l">instruction</th><th>episodes</th>'
            f"<th>success</th><th>success / known</th></tr></thead><tbody>{''.join(body)}</tbody></table>")


def episodes_html(rows: Sequence[EpisodeRow], page: Path) -> str:
    """The episode table with each row's failure reason and links (relative to ``page``) to its viewer page, video
    and run directory, where those exist."""
    body = []
    for row in rows:
        links = []
        if row.run_dir is not None:
            for name, label in ((VIEW_PAGE, "view"), (VIDEO, "video")):
                target = row.run_dir / name
                if target.is_file() and not target.is_symlink():
                    links.append(f'<a href="{_href(target, page)}">{label}</a>')
            links.append(f'<a href="{_href(row.run_dir, page)}/">run</a>')
        ok = "-" if row.success is None else ("Y" if row.success else "N")
        cls = "ok" if row.success else "no"
        body.append(f'<tr><td class="l">{_e(row.suite)}</td><td>{_e(row.task)}</td><td>{_e(row.seed)}</td>'
                    f'<td class="{cls}">{ok}</td><td class="l">{_e(row.status)}</td>'
                    f'<td class="l reason">{_e(row.reason)}</td><td>{_e(row.turns)}</td><td>{_e(row.steps)}</td>'
                    f'<td>{_e(row.tokens)}</td><td>{"-" if row.wall_s is None else f"{row.wall_s:.1f}"}</td>'
                    f'<td class="l">{" · ".join(links)}</td></tr>')
    head = "".join(f'<th class="l">{h}</th>' if h in ("suite", "status", "reason", "links") else f"<th>{h}</th>"
                   for h in ("suite", "task", "seed", "ok", "status", "reason", "turns", "steps", "tokens", "wall_s",
                             "links"))
    return f'<h2 id="episodes">Episodes</h2><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


__all__ = ["CSV_COLUMNS", "EpisodeRow", "config_html", "episode_row", "episode_rows", "episodes_html",
           "eval_config", "tasks_html", "write_csv"]
