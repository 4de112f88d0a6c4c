"""``pyrualean compare``: a strictly paired comparison of two systems (PYRUALEAN-CONTRACT.md 6.7).

Episodes pair by ``(backend, task, seed)``. A key where either system has more than one episode is a duplicate,
a key where either has none is unmatched; either makes the report invalid (exit status 2), and the report is still
written so the listed keys can be fixed. Episodes of any third system are ignored, as in the reference. A system
name matches itself and, when it has no ``:``, every ``<name>:<arm>``, so the default right side ``pyrualean``
matches play results (``pyrualean:cells``, ``pyrualean:program``); a mix of both arms then shows up as a duplicate
rather than a silent choice.

The report has the reference's keys (``protocol``, ``systems`` [left, right], ``pairing`` with the
``key_definition`` list, ``summary`` keyed by system name, ``pairs`` with ``delta`` = right - left) plus
``statistics``: both success rates with Wilson 95% intervals, the paired difference (right - left) with Newcombe's
95% interval, the concordant and discordant pair counts and the exact McNemar p-value, overall and per suite.
Pairs where either side is interrupted, of unknown outcome or (unless ``--count-errors-as-failures``) an
infrastructure failure are left out of the statistics and counted; ``summary`` counts each side by the same rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.records.records import write_json
from pyrua_ros.reports.metrics import EpisodeMetrics, aggregate, load_metrics, natural_key
from pyrua_ros.reports.stats import mcnemar_exact_p, paired_difference_interval, wilson_interval
from pyrua_ros.settings import outcomes

PROTOCOL = "pyrualean-paired-v2"
DELTA_FIELDS = ("calls", "stateful_calls", "env_steps", "turns", "wall_time_s", "input_tokens",
                "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens")
KEY_DEFINITION = ["backend", "task", "seed"]
DEFAULT_LEFT = "rpent"
DEFAULT_RIGHT = "pyrualean"


def system_matches(system: str, name: str) -> bool:
    """True when ``system`` is ``name`` or, for a name without ``:``, one of its arms (``name:<arm>``)."""
    return system == name or (":" not in name and system.startswith(name + ":"))


def _key(m: EpisodeMetrics) -> tuple[str, str, int | None]:
    return (m.backend, m.task, m.seed)


def _key_order(key: tuple[str, str, int | None]) -> tuple:
    return (key[0], natural_key(key[1]), key[2] is None, key[2] or 0)


def _delta(left: EpisodeMetrics, right: EpisodeMetrics) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    for name in DELTA_FIELDS:
        a, b = getattr(left, name), getattr(right, name)
        delta[name] = None if a is None or b is None else b - a
    a, b = left.environment_success, right.environment_success
    delta["native_success_delta"] = None if a is None or b is None else int(b) - int(a)
    return delta


def _outcome(m: EpisodeMetrics, count_errors_as_failures: bool) -> bool | None:
    """The episode's outcome for the statistics, or None when it is left out (interrupted, unknown, and an infra
    failure unless counted as a failure): the rule of every rate (``settings.outcomes``)."""
    bucket = m.classified().bucket
    if bucket == outcomes.INFRA:
        return m.classified().solved if count_errors_as_failures else None
    if bucket in (outcomes.INTERRUPTED, outcomes.UNKNOWN):
        return None
    return bucket == outcomes.SUCCESS


def paired_statistics(pairs: Sequence[tuple[EpisodeMetrics, EpisodeMetrics]], left_name: str, right_name: str, *,
                      count_errors_as_failures: bool = False) -> dict[str, Any]:
    """Rates, paired difference (right - left) with its interval, pair table and exact McNemar p of ``pairs``."""
    both = left_only = right_only = neither = excluded = 0
    for left, right in pairs:
        a, b = _outcome(left, count_errors_as_failures), _outcome(right, count_errors_as_failures)
        if a is None or b is None:
            excluded += 1
        elif a and b:
            both += 1
        elif a:
            left_only += 1
        elif b:
            right_only += 1
        else:
            neither += 1
    n = both + left_only + right_only + neither

    def rate(successes: int) -> dict[str, Any]:
        ci = wilson_interval(successes, n)
        return {"successes": successes, "episodes": n, "success_rate": round(successes / n, 6) if n else None,
                "ci95": {"low": round(ci.low, 6), "high": round(ci.high, 6)} if ci else None}

    difference = paired_difference_interval(both, right_only, left_only, neither)
    return {
        "pairs_used": n, "pairs_excluded": excluded,
        "rates": {left_name: rate(both + left_only), right_name: rate(both + right_only)},
        "difference": None if difference is None else {
            "definition": f"{right_name} - {left_name}", "estimate": round(difference.estimate, 6),
            "ci95": {"low": round(difference.low, 6), "high": round(difference.high, 6)},
            "method": "Newcombe paired (square-and-add of Wilson intervals)"},
        "concordant": {"both_succeeded": both, "both_failed": neither},
        "discordant": {f"only_{left_name}": left_only, f"only_{right_name}": right_only},
        "mcnemar_exact_p": round(mcnemar_exact_p(left_only, right_only), 6),
    }


def compare(metrics: Sequence[EpisodeMetrics], left_system: str = DEFAULT_LEFT,
            right_system: str = DEFAULT_RIGHT, *, count_errors_as_failures: bool = False) -> dict[str, Any]:
    """The paired report; ``report["pairing"]["valid"]`` says whether every key was paired exactly once."""
    if system_matches(left_system, right_system) or system_matches(right_system, left_system):
        raise ValueError(f"left and right systems overlap: {left_system!r} vs {right_system!r}")
    indexed: dict[tuple, list[EpisodeMetrics]] = {}
    for m in metrics:
        indexed.setdefault(_key(m), []).append(m)
    duplicates, unmatched, pairs, matched = [], [], [], []
    for key in sorted(indexed, key=_key_order):
        runs = indexed[key]
        left = [m for m in runs if system_matches(m.system, left_system)]
        right = [m for m in runs if system_matches(m.system, right_system)]
        key_json = dict(zip(KEY_DEFINITION, key))
        if len(left) > 1 or len(right) > 1:
            duplicates.append({**key_json, "counts": {left_system: len(left), right_system: len(right)},
                               "systems": sorted({m.system for m in left + right}),
                               "sources": [m.source for m in left + right]})
        elif len(left) != 1 or len(right) != 1:
            unmatched.append({**key_json, "present": sorted({m.system for m in runs})})
        else:
            matched.append((left[0], right[0]))
            pairs.append({**key_json, left_system: left[0].to_json(), right_system: right[0].to_json(),
                          "delta": _delta(left[0], right[0])})
    kw = {"count_errors_as_failures": count_errors_as_failures}
    by_suite: dict[str, list] = {}
    for left, right in matched:
        by_suite.setdefault(left.suite, []).append((left, right))
    statistics = paired_statistics(matched, left_system, right_system, **kw)
    statistics["count_errors_as_failures"] = count_errors_as_failures
    statistics["suites"] = {suite: paired_statistics(group, left_system, right_system, **kw)
                            for suite, group in sorted(by_suite.items(), key=lambda kv: natural_key(kv[0]))}
    return {
        "protocol": PROTOCOL,
        "systems": [left_system, right_system],
        "pairing": {
            "valid": bool(pairs) and not duplicates and not unmatched,
            "matched_episodes": len(pairs),
            "input_episodes": len(metrics),
            "duplicate_keys": duplicates,
            "unmatched_keys": unmatched,
            "key_definition": list(KEY_DEFINITION),
        },
        "summary": {left_system: aggregate([p[0] for p in matched], **kw),
                    right_system: aggregate([p[1] for p in matched], **kw)},
        "statistics": statistics,
        "pairs": pairs,
    }


# ---------------------------------------------------------------------------------------------------- table
def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}%"


def _stats_lines(stats: dict[str, Any], left: str, right: str, indent: str = "") -> list[str]:
    width = max(len(left), len(right), 6)
    lines = [f"{indent}{'system':<{width}}  successes  pairs   rate  95% CI"]
    for name in (left, right):
        r = stats["rates"][name]
        ci = r["ci95"]
        interval = "-" if ci is None else f"[{_pct(ci['low'])}, {_pct(ci['high'])}]"
        lines.append(f"{indent}{name:<{width}}  {r['successes']:>9}  {r['episodes']:>5}  {_pct(r['success_rate']):>6}"
                     f"  {interval}")
    diff = stats["difference"]
    if diff is not None:
        lines.append(f"{indent}difference ({right} - {left}): {_pct(diff['estimate'], True)} points, 95% CI "
                     f"[{_pct(diff['ci95']['low'], True)}, {_pct(diff['ci95']['high'], True)}] (Newcombe, paired)")
    disc = stats["discordant"]
    lines.append(f"{indent}discordant pairs: {disc[f'only_{left}']} only {left}, {disc[f'only_{right}']} only "
                 f"{right}; exact McNemar p = {stats['mcnemar_exact_p']:.4g}")
    if stats["pairs_excluded"]:
        lines.append(f"{indent}{stats['pairs_excluded']} pair(s) left out (interrupted, unknown outcome, or an "
                     "infrastructure failure not counted as a failure, on either side)")
    return lines


def format_comparison(report: dict[str, Any]) -> str:
    """The human-readable table of a compare report: pairing, rates, difference, discordant pairs, per suite."""
    left, right = report["systems"]
    pairing, stats = report["pairing"], report["statistics"]
    verdict = "valid" if pairing["valid"] else (f"INVALID: {len(pairing['duplicate_keys'])} duplicate, "
                                                f"{len(pairing['unmatched_keys'])} unmatched key(s)")
    lines = [f"paired on ({', '.join(pairing['key_definition'])}): {pairing['matched_episodes']} pairs from "
             f"{pairing['input_episodes']} input episodes; {verdict}", ""]
    lines += _stats_lines(stats, left, right)
    if len(stats["suites"]) > 1:
        for suite, suite_stats in stats["suites"].items():
            lines += ["", f"{suite}:", *_stats_lines(suite_stats, left, right, indent="  ")]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The compare flags: ``metrics...``, ``--output``, ``--left-system``, ``--right-system``, ``--table``,
    ``--count-errors-as-failures``."""
    parser.add_argument("metrics", nargs="+", help="run directories, result.json files or EpisodeMetrics JSON files")
    parser.add_argument("--output", type=Path, default=None, help="write the report JSON here as well")
    parser.add_argument("--left-system", default=DEFAULT_LEFT, help=f"left system name (default {DEFAULT_LEFT})")
    parser.add_argument("--right-system", default=DEFAULT_RIGHT,
                        help=f"right system name (default {DEFAULT_RIGHT}, which matches pyrualean:cells / :program)")
    parser.add_argument("--table", action="store_true",
                        help="print the human-readable table instead of the JSON report (--output still gets JSON)")
    parser.add_argument("--count-errors-as-failures", action="store_true",
                        help="keep pairs with an infrastructure failure in the statistics, as failures")


def run(args: argparse.Namespace) -> int:
    """Execute parsed compare arguments: print the report; exit 0 when valid, 2 when not (or unreadable)."""
    try:
        report = compare(load_metrics(args.metrics), args.left_system, args.right_system,
                         count_errors_as_failures=args.count_errors_as_failures)
    except (OSError, ValueError) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    if args.output is not None:
        write_json(args.output, report)
    print(format_comparison(report) if args.table else json.dumps(report, indent=2, ensure_ascii=False))
    if not report["pairing"]["valid"]:
        print(f"compare: pairing is invalid ({len(report['pairing']['duplicate_keys'])} duplicate, "
              f"{len(report['pairing']['unmatched_keys'])} unmatched key(s)); see pairing", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``compare METRICS... [--output PATH] [--left-system S] [--right-system S] [--table]``."""
    parser = argparse.ArgumentParser(prog="pyrualean compare", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
