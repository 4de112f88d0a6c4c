"""Success-rate reports over episodes: per suite and overall, as JSON, a text table, Markdown and HTML.

The question a report answers is "how good is this system": for every suite and for all episodes together, the
episodes, the count of each outcome bucket, the one success rate with its Wilson 95% interval, mean tokens in/out
and mean wall time per episode, and the statuses. Which episode falls in which bucket, and which buckets the rate
counts, is :mod:`pyrua_ros.settings.outcomes`: agent outcomes (a program that raised included) always count;
**infrastructure failures** (the driver could not boot, the model server failed after its retries, the host died,
the episode was killed) are counted apart and left out of the rate by default, ``count_errors_as_failures=True``
puts them back in as failures (the reference's ``native_sr`` rule); interrupted episodes and episodes of unknown
outcome (an RPent run without states) never enter a rate.

The HTML page is self-contained (inline CSS and SVG, no script, font or image from anywhere), so it opens from a
file, an artifact store or a mail attachment alike.
"""

from __future__ import annotations

import contextlib
import html
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.reports.metrics import EpisodeMetrics, format_table, natural_key
from pyrua_ros.reports.stats import wilson_interval
from pyrua_ros.settings import outcomes
from pyrua_ros.settings.outcomes import INFRA_STATUSES

MEANS = (("mean_input_tokens", "input_tokens"), ("mean_output_tokens", "output_tokens"),
         ("mean_total_tokens", "total_tokens"), ("mean_wall_time_s", "wall_time_s"), ("mean_turns", "turns"),
         ("mean_env_steps", "env_steps"))
OVERALL = "all"


def is_infra_failure(m: EpisodeMetrics) -> bool:
    """True when the episode ended by an infrastructure failure (see the module docstring)."""
    return m.classified().bucket == outcomes.INFRA


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.fmean(values), 3) if values else None


def group_summary(metrics: Sequence[EpisodeMetrics], *, count_errors_as_failures: bool = False) -> dict[str, Any]:
    """Bucket counts, the rate, its Wilson 95% interval, means and statuses of one group of episodes."""
    counts = outcomes.rate_counts((m.classified() for m in metrics), count_errors_as_failures=count_errors_as_failures)
    statuses: dict[str, int] = {}
    for m in metrics:
        statuses[m.status] = statuses.get(m.status, 0) + 1
    successes, denominator = counts.rate_successes, counts.denominator
    failures = denominator - successes   # with count_errors_as_failures, infra failures judged by their check
    interval = wilson_interval(successes, denominator)
    out: dict[str, Any] = {
        "episodes": len(metrics), "successes": successes, "failures": failures, "infra_failures": counts.infra,
        "interrupted": counts.interrupted, "unknown_outcome": counts.unknown, "denominator": denominator,
        "success_rate": round(counts.rate, 6) if counts.rate is not None else None,
        "ci95": {"low": round(interval.low, 6), "high": round(interval.high, 6)} if interval else None,
    }
    for key, name in MEANS:
        out[key] = _mean([getattr(m, name) for m in metrics])
    out["statuses"] = dict(sorted(statuses.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def _by(metrics: Sequence[EpisodeMetrics], key) -> dict[str, list[EpisodeMetrics]]:
    groups: dict[str, list[EpisodeMetrics]] = {}
    for m in metrics:
        groups.setdefault(key(m), []).append(m)
    return {k: groups[k] for k in sorted(groups, key=natural_key)}


def suite_report(metrics: Sequence[EpisodeMetrics], *, count_errors_as_failures: bool = False) -> dict[str, Any]:
    """``{count_errors_as_failures, infra_statuses, overall, suites: {suite: {..., tasks: {task: ...}}}}``."""
    kw = {"count_errors_as_failures": count_errors_as_failures}
    suites = {}
    for suite, group in _by(metrics, lambda m: m.suite).items():
        summary = group_summary(group, **kw)
        summary["tasks"] = {task: {k: v for k, v in group_summary(items, **kw).items()
                                   if k in ("episodes", "successes", "failures", "denominator", "success_rate",
                                            "infra_failures", "interrupted")}
                            for task, items in _by(group, lambda m: m.task).items()}
        suites[suite] = summary
    return {"count_errors_as_failures": count_errors_as_failures, "infra_statuses": list(INFRA_STATUSES),
            "rate_rule": outcomes.rate_rule(count_errors_as_failures), "overall": group_summary(metrics, **kw),
            "suites": suites, "infra_causes": infra_causes(metrics)}


def infra_causes(metrics: Sequence[EpisodeMetrics]) -> list[dict[str, Any]]:
    """Every infrastructure failure with its cause: ``{system, task, seed, status, outcome, reason}``."""
    return [{"system": m.system, "task": m.task, "seed": m.seed, "status": m.status, "outcome": m.outcome,
             "reason": m.reason} for m in metrics if is_infra_failure(m)]


def _cause_lines(report: dict[str, Any], limit: int = 20) -> list[str]:
    causes = report.get("infra_causes") or []
    lines = [f"{c['task']} seed {c['seed']}: {c['status']}: {c['reason'] or 'no reason recorded'}"
             for c in causes[:limit]]
    if len(causes) > limit:
        lines.append(f"... and {len(causes) - limit} more (summarize --json lists them all under infra_causes)")
    return lines


# ---------------------------------------------------------------------------------------------------- text
def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _interval_text(ci: dict | None) -> str:
    return "-" if ci is None else f"[{_pct(ci['low'])}, {_pct(ci['high'])}]"


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.{digits}f}k" if abs(value) >= 10_000 else f"{value:.{digits}f}"


REPORT_COLUMNS = (("suite", 22, "<"), ("episodes", 8, ">"), ("success", 7, ">"), ("fail", 5, ">"),
                  ("infra", 5, ">"), ("intr", 4, ">"), ("rate", 6, ">"), ("95% CI", 17, ">"), ("in_tok/ep", 9, ">"),
                  ("out_tok/ep", 10, ">"), ("wall_s/ep", 9, ">"))


def _report_row(name: str, g: dict[str, Any]) -> list[str]:
    return [name, str(g["episodes"]), str(g["successes"]), str(g["failures"]), str(g["infra_failures"]),
            str(g.get("interrupted", 0)), _pct(g["success_rate"]), _interval_text(g["ci95"]),
            _num(g["mean_input_tokens"]), _num(g["mean_output_tokens"]), _num(g["mean_wall_time_s"])]


def _statuses_text(statuses: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in statuses.items()) or "-"


def _infra_note(report: dict[str, Any]) -> str:
    overall = report["overall"]
    rule = report.get("rate_rule") or outcomes.rate_rule(report["count_errors_as_failures"])
    infra = f"infrastructure failures: {overall['infra_failures']}"
    infra += (", counted in the rate (--count-errors-as-failures)" if report["count_errors_as_failures"]
              else ", left out of the rate (--count-errors-as-failures counts them)")
    return f"rate = {rule}; {infra}; interrupted: {overall.get('interrupted', 0)}, in no rate"


def format_report(report: dict[str, Any]) -> str:
    """The per-suite table with an ``all`` row, then the statuses and how infrastructure failures were counted."""
    def line(cells: Sequence[str]) -> str:
        return " ".join(f"{c[:w] if a == '<' else c:{a}{w}}" for c, (_, w, a) in zip(cells, REPORT_COLUMNS))

    rows = [line([name for name, _, _ in REPORT_COLUMNS])]
    rows += [line(_report_row(suite, g)) for suite, g in report["suites"].items()]
    if len(report["suites"]) != 1:
        rows.append(line(_report_row(OVERALL, report["overall"])))
    unknown = report["overall"]["unknown_outcome"]
    rows.append(f"statuses: {_statuses_text(report['overall']['statuses'])}")
    rows.append(_infra_note(report) + (f"; {unknown} episode(s) of unknown outcome" if unknown else ""))
    causes = _cause_lines(report)
    if causes:
        rows += ["infrastructure failures and their causes:", *(f"  {line}" for line in causes)]
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------------- Markdown
def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cell = _md_cell

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_report(report: dict[str, Any], metrics: Sequence[EpisodeMetrics], title: str) -> str:
    """A Markdown page: the per-suite table, per-task rates of each suite, and the episode table."""
    header = [name for name, _, _ in REPORT_COLUMNS]
    rows = [_report_row(s, g) for s, g in report["suites"].items()] + [_report_row(OVERALL, report["overall"])]
    parts = [f"# {title}", "", _md_table(header, rows), "",
             f"Statuses: {_statuses_text(report['overall']['statuses'])}. {_infra_note(report)}.", ""]
    causes = _cause_lines(report)
    if causes:
        parts += ["Infrastructure failures and their causes:", "", *(f"- {_md_cell(line)}" for line in causes), ""]
    for suite, g in report["suites"].items():
        parts += [f"## {suite}", "", _md_table(["task", "episodes", "success", "rate"], [
            [task, str(t["episodes"]), str(t["successes"]), _pct(t["success_rate"])]
            for task, t in g["tasks"].items()]), ""]
    parts += ["## Episodes", "", "```", format_table(metrics), "```", ""]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------------- HTML
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px;
       color: #1d2330; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px 0; } h2 { font-size: 17px; margin: 28px 0 8px 0; }
p.meta { color: #5b6475; margin: 0 0 16px 0; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e3e6ec; text-align: right; white-space: nowrap; }
th { background: #f3f5f8; } td.l, th.l { text-align: left; } tr.total td { font-weight: 600; }
td.ok { color: #19743a; font-weight: 600; } td.no { color: #a3262a; } td.infra { color: #8a5a00; }
pre { font-size: 12px; background: #f7f8fa; padding: 10px; overflow-x: auto; }
svg text { font-family: inherit; font-size: 12px; fill: #1d2330; }
td.reason { white-space: normal; max-width: 420px; text-align: left; }
"""
BAR, WHISKER, GRID = "#3f6fd8", "#17254a", "#dde2ea"


def bar_chart(rows: Sequence[tuple[str, float | None, dict | None, str]], *, label_width: int = 190,
              plot_width: int = 420) -> str:
    """An inline SVG of horizontal success-rate bars with 95% interval whiskers.

    ``rows`` are ``(label, rate or None, {"low", "high"} or None, annotation)``; rates are fractions.
    """
    row_h, top, note_w = 24, 22, 130
    width, height = label_width + plot_width + note_w, top + row_h * len(rows) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    for tick in range(0, 101, 25):
        x = label_width + plot_width * tick / 100
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 6}" stroke="{GRID}"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle">{tick}%</text>')
    for i, (label, rate, ci, note) in enumerate(rows):
        y = top + i * row_h
        out.append(f'<text x="{label_width - 8}" y="{y + 16}" text-anchor="end">{html.escape(label)}</text>')
        if rate is not None:
            out.append(f'<rect x="{label_width}" y="{y + 5}" width="{plot_width * rate:.1f}" height="14" '
                       f'fill="{BAR}" rx="2"/>')
        if ci is not None:
            x0, x1 = label_width + plot_width * ci["low"], label_width + plot_width * ci["high"]
            mid = y + 12
            out.append(f'<line x1="{x0:.1f}" y1="{mid}" x2="{x1:.1f}" y2="{mid}" stroke="{WHISKER}" '
                       'stroke-width="1.5"/>')
            for x in (x0, x1):
                out.append(f'<line x1="{x:.1f}" y1="{mid - 5}" x2="{x:.1f}" y2="{mid + 5}" stroke="{WHISKER}" '
                           'stroke-width="1.5"/>')
        out.append(f'<text x="{label_width + plot_width + 8}" y="{y + 16}">{html.escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, left: int = 1,
                total_last: bool = False) -> str:
    """A table whose first ``left`` columns are left-aligned; every cell is escaped (run records are data)."""
    def cell(tag: str, i: int, text: Any) -> str:
        return f'<{tag} class="l">{html.escape(str(text))}</{tag}>' if i < left else \
            f"<{tag}>{html.escape(str(text))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = []
    for r, row in enumerate(rows):
        attr = ' class="total"' if total_last and r == len(rows) - 1 else ""
        body.append(f"<tr{attr}>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _rate_note(g: dict[str, Any]) -> str:
    apart = [f"{g[key]} {word}" for key, word in (("infra_failures", "infra"), ("interrupted", "interrupted"))
             if g.get(key)]
    return f"{_pct(g['success_rate'])} ({g['successes']}/{g['denominator']}{''.join(', ' + a for a in apart)})"


def html_report(report: dict[str, Any], metrics: Sequence[EpisodeMetrics], title: str, *,
                generated: str = "", header: str = "", tasks: dict[str, str] | None = None,
                episodes: str | None = None) -> str:
    """A self-contained HTML page: overview chart and table, a per-task chart per suite, the episode table.

    ``header``: HTML placed under the overview (the configuration); ``tasks``: HTML per suite placed under its chart
    (a per-task table); ``episodes``: HTML replacing the plain episode table (one with links)."""
    extra_tasks, columns = tasks, [name for name, _, _ in REPORT_COLUMNS]
    rows = [_report_row(s, g) for s, g in report["suites"].items()] + [_report_row(OVERALL, report["overall"])]
    overview = [(s, g["success_rate"], g["ci95"], _rate_note(g)) for s, g in report["suites"].items()]
    overview.append((OVERALL, report["overall"]["success_rate"], report["overall"]["ci95"],
                     _rate_note(report["overall"])))
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">{html.escape(generated)} {len(metrics)} episode(s). Success rate with a Wilson 95% '
        f"interval; {html.escape(_infra_note(report))}.</p>",
        '<h2 id="overview">Success rate per suite</h2>', bar_chart(overview),
        _html_table(columns, rows, total_last=True),
        f"<p class=\"meta\">Statuses: {html.escape(_statuses_text(report['overall']['statuses']))}</p>",
        header,
    ]
    causes = _cause_lines(report)
    if causes:
        parts += ['<h2 id="infra">Infrastructure failures and their causes</h2>',
                  "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in causes) + "</ul>"]
    for suite, g in report["suites"].items():
        task_bars = [(f"task {task.rpartition(':')[2]}", t["success_rate"], _task_interval(t), _rate_note(t))
                 for task, t in g["tasks"].items()]
        parts += [f'<h2 id="suite-{html.escape(suite)}">{html.escape(suite)}: {_rate_note(g)}</h2>',
                  bar_chart(task_bars, label_width=110), (extra_tasks or {}).get(suite, "")]
    episode_rows = [[m.system, m.task, "-" if m.seed is None else m.seed, _ok_word(m), m.status,
                     _dash(m.turns), _dash(m.calls), _dash(m.env_steps), _num(m.wall_time_s),
                     _dash(m.input_tokens), _dash(m.output_tokens)] for m in metrics]
    if episodes is not None:
        parts += [episodes, "</body></html>"]
        return "\n".join(parts)
    parts += ['<h2 id="episodes">Episodes</h2>',
              _html_table(["system", "task", "seed", "ok", "status", "turns", "calls", "steps", "wall_s", "in_tok",
                           "out_tok"], episode_rows, left=2),
              "</body></html>"]
    return "\n".join(parts)


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")


def chromium_command(extra: Sequence[str], page: Path, user_data_dir: Path) -> list[str]:
    """The headless Chromium command line for ``page`` (Debian's ``chromium``; RuntimeError when none is found).

    Nothing reaches the network: background networking, component updates and sync are off, and the profile is
    a fresh folder of our own."""
    binary = next((shutil.which(n) for n in CHROMIUM_NAMES if shutil.which(n)), None)
    if binary is None:
        raise RuntimeError(f"no Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); scripts/setup.sh installs "
                           "Debian's chromium")
    return [binary, *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", *extra, page.resolve().as_uri()]


def screenshot(page: Path, png: Path, *, width: int = 1280, height: int = 1600, timeout_s: float = 120.0,
               fit: bool = False) -> Path:
    """Render ``page`` in headless Chromium and save a PNG of the window; RuntimeError when that fails.

    ``fit``: the window is ``height`` tall at most and the blank bottom of the page is cut off, so the picture is as
    tall as the content (and never less than 200 px)."""
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="pyrua_chromium_") as profile:
        argv = chromium_command([f"--screenshot={png}", f"--window-size={width},{height}"], Path(page),
                                Path(profile))
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"Chromium did not finish rendering {page} within {timeout_s:.0f} s") from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)   # its zygote and renderers share the group it leads
            proc.wait()
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"Chromium wrote no screenshot (exit {proc.returncode}): {err.strip()[-500:]}")
    if fit:
        _crop_blank_bottom(png)
    return png


def _crop_blank_bottom(png: Path, margin: int = 24, least: int = 200) -> None:
    """Cut the rows below the last one that differs from the bottom row's colour (the page's background)."""
    import cv2  # noqa: PLC0415 (cv2: screenshots only)
    import numpy as np  # noqa: PLC0415 (numpy: screenshots only)

    image = cv2.imread(str(png), cv2.IMREAD_UNCHANGED)
    if image is None:
        return
    background = image[-1:, :, :]
    used = np.flatnonzero(np.any(image != background, axis=(1, 2)))
    bottom = max(least, int(used[-1]) + 1 + margin if used.size else least)
    if bottom < image.shape[0]:
        cv2.imwrite(str(png), image[:bottom])


def _task_interval(t: dict[str, Any]) -> dict | None:
    interval = wilson_interval(t["successes"], t["denominator"])
    return None if interval is None else {"low": interval.low, "high": interval.high}


def _ok_word(m: EpisodeMetrics) -> str:
    bucket = m.classified().bucket
    if bucket in (outcomes.INFRA, outcomes.INTERRUPTED):
        return bucket
    return "-" if m.environment_success is None else ("Y" if m.environment_success else "N")


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


__all__ = ["INFRA_STATUSES", "bar_chart", "chromium_command", "format_report", "group_summary", "html_report",
           "is_infra_failure", "markdown_report", "screenshot", "suite_report"]
