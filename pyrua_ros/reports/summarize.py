"""``pyrualean summarize``: one row per episode and an aggregate over run directories (PYRUALEAN-CONTRACT.md 6.5).

With the per-suite report as text, JSON, Markdown or HTML; what is read: :mod:`pyrua_ros.reports.metrics`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.records.records import now_iso
from pyrua_ros.records.text import printable
from pyrua_ros.reports import episodes as episodes_mod
from pyrua_ros.reports import report as report_mod
from pyrua_ros.reports.metrics import EpisodeMetrics, aggregate, format_table, load_metrics
from pyrua_ros.reports.report import suite_report
from pyrua_ros.reports.viewer import write_view

DEFAULT_TITLE = "Evaluation report"


def main(argv: Sequence[str] | None = None) -> int:
    """``summarize PATH... [--json] [--count-errors-as-failures] [--html F] [--markdown F] [--screenshot F]``."""
    parser = argparse.ArgumentParser(prog="pyrualean summarize", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The summarize flags."""
    parser.add_argument("paths", nargs="+",
                        help="run directories (searched recursively, e.g. an eval's OUT), result.json files or "
                             "metrics JSON files")
    parser.add_argument("--json", action="store_true",
                        help="print only JSON on stdout: the aggregate, the per-suite report and every episode")
    parser.add_argument("--count-errors-as-failures", action="store_true",
                        help="count infrastructure failures (boot_error, planner_error, killed, a host that died) "
                             "in the success rate, judged by the benchmark's check: the reference's native_sr rule "
                             "(default: counted apart, left out; interrupted episodes are in no rate)")
    parser.add_argument("--html", type=Path, default=None, metavar="FILE",
                        help="also write a self-contained HTML report (tables + success-rate charts)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="FILE", help="also write a Markdown report")
    parser.add_argument("--csv", type=Path, default=None, metavar="FILE",
                        help="also write one CSV row per episode (suite, task, instruction, seed, status, reason, "
                             "success, turns, calls, steps, tokens, wall_s, run_dir)")
    parser.add_argument("--screenshot", type=Path, default=None, metavar="PNG",
                        help="with --html: render the page in headless Chromium and save a PNG of it")
    parser.add_argument("--title", default=None, help=f"report title (default {DEFAULT_TITLE!r})")


def summary_json(metrics: Sequence[EpisodeMetrics], *, count_errors_as_failures: bool = False) -> dict[str, Any]:
    """What ``--json`` prints: the reference's aggregate keys (``native_sr`` is the one success rate, counted by
    the same rule as ``overall.success_rate``), ``outcomes`` and ``rate_rule``, then ``count_errors_as_failures``,
    ``infra_statuses``, ``overall`` and ``suites`` (see ``agent.report``) and ``runs`` (every EpisodeMetrics,
    so the output is itself an input of ``compare`` and ``summarize``)."""
    kw = {"count_errors_as_failures": count_errors_as_failures}
    return {**aggregate(metrics, **kw), **suite_report(metrics, **kw),
            "runs": [m.to_json() for m in metrics]}


def write_views(rows) -> None:
    """The viewer page (``view.html``) of every episode read from a run directory, for the report's links; one that
    cannot be written is left out of the links (one line on stderr)."""

    for row in rows:
        if row.run_dir is None:
            continue
        try:
            write_view(row.run_dir)
        except (OSError, ValueError) as exc:
            print(f"summarize: no viewer page for {row.run_dir}: {exc}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Execute parsed summarize arguments; 0 on success, 2 when an input cannot be read or an output written."""
    if args.screenshot is not None and args.html is None:
        print("summarize: --screenshot needs --html FILE (the page to render)", file=sys.stderr)
        return 2
    try:
        metrics = load_metrics(args.paths)
    except (OSError, ValueError) as exc:
        print(f"summarize: {printable(str(exc))}", file=sys.stderr)
        return 2
    summary = summary_json(metrics, count_errors_as_failures=args.count_errors_as_failures)
    title = args.title or DEFAULT_TITLE
    rows = episodes_mod.episode_rows(metrics)
    try:
        if args.html is not None:
            args.html.parent.mkdir(parents=True, exist_ok=True)
            write_views(rows)
            config = episodes_mod.eval_config(args.paths)
            generated = f"Generated {now_iso()} from {', '.join(str(p) for p in args.paths)}."
            page = report_mod.html_report(
                summary, metrics, title, generated=generated, header=episodes_mod.config_html(config),
                tasks={suite: episodes_mod.tasks_html(rows, suite) for suite in summary["suites"]},
                episodes=episodes_mod.episodes_html(rows, args.html))
            args.html.write_text(page, encoding="utf-8")
        if args.csv is not None:
            episodes_mod.write_csv(args.csv, rows)
        if args.markdown is not None:
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
            args.markdown.write_text(report_mod.markdown_report(summary, metrics, title), encoding="utf-8")
        if args.screenshot is not None:
            report_mod.screenshot(args.html, args.screenshot, height=4000, fit=True)
    except (OSError, RuntimeError) as exc:
        print(f"summarize: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_table(metrics))
        print()
        print(report_mod.format_report(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
