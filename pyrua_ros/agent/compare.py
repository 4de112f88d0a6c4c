"""``pyrualean compare``: a strictly paired comparison of two systems (PYRUALEAN-CONTRACT.md 6.7).

Episodes pair by ``(backend, task, seed)``. A key that occurs twice on one side, a key present on one side only,
or an input episode that belongs to neither system makes the report invalid (exit status 2); the report is still
written so the listed keys can be fixed. A system name matches itself and, when it has no ``:``, every
``<name>:<arm>``, so the default right side ``pyrualean`` matches play results (``pyrualean:cells``,
``pyrualean:program``); a mix of both arms then shows up as duplicate keys rather than a silent choice.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.agent.records import write_json
from pyrua_ros.agent.summarize import EpisodeMetrics, aggregate, load_metrics

PROTOCOL = "pyrualean-paired-v2"
DELTA_FIELDS = ("calls", "stateful_calls", "env_steps", "turns", "wall_time_s", "input_tokens",
                "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens")
KEY_DEFINITION = "(backend, task, seed); task = '<suite>:<task index>'"
DEFAULT_LEFT = "rpent"
DEFAULT_RIGHT = "pyrualean"


def system_matches(system: str, name: str) -> bool:
    """True when ``system`` is ``name`` or, for a name without ``:``, one of its arms (``name:<arm>``)."""
    return system == name or (":" not in name and system.startswith(name + ":"))


def _key(m: EpisodeMetrics) -> tuple[str, str, int]:
    return (m.backend, m.task, m.seed)


def _key_json(key: tuple[str, str, int], **extra: Any) -> dict[str, Any]:
    return {"backend": key[0], "task": key[1], "seed": key[2], **extra}


def _delta(left: EpisodeMetrics, right: EpisodeMetrics) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    for name in DELTA_FIELDS:
        a, b = getattr(left, name), getattr(right, name)
        delta[name] = None if a is None or b is None else b - a
    a, b = left.environment_success, right.environment_success
    delta["native_success_delta"] = None if a is None or b is None else int(b) - int(a)
    return delta


def compare(metrics: Sequence[EpisodeMetrics], left_system: str = DEFAULT_LEFT,
            right_system: str = DEFAULT_RIGHT) -> dict[str, Any]:
    """The paired report; ``report["pairing"]["valid"]`` says whether every input was paired exactly once."""
    if system_matches(left_system, right_system) or system_matches(right_system, left_system):
        raise ValueError(f"left and right systems overlap: {left_system!r} vs {right_system!r}")
    sides: dict[str, dict[tuple[str, str, int], list[EpisodeMetrics]]] = {"left": {}, "right": {}}
    strays: list[EpisodeMetrics] = []
    for m in metrics:
        if system_matches(m.system, left_system):
            sides["left"].setdefault(_key(m), []).append(m)
        elif system_matches(m.system, right_system):
            sides["right"].setdefault(_key(m), []).append(m)
        else:
            strays.append(m)
    duplicates = [_key_json(k, side=side, systems=[m.system for m in ms], sources=[m.source for m in ms])
                  for side, groups in sides.items() for k, ms in groups.items() if len(ms) > 1]
    left_keys, right_keys = set(sides["left"]), set(sides["right"])
    unmatched = [_key_json(k, present_in=left_system) for k in sorted(left_keys - right_keys)]
    unmatched += [_key_json(k, present_in=right_system) for k in sorted(right_keys - left_keys)]
    unmatched += [_key_json(_key(m), present_in=m.system, note="belongs to neither system") for m in strays]
    paired = sorted(k for k in left_keys & right_keys if len(sides["left"][k]) == 1 and len(sides["right"][k]) == 1)
    pairs, lefts, rights = [], [], []
    for k in paired:
        left, right = sides["left"][k][0], sides["right"][k][0]
        lefts.append(left)
        rights.append(right)
        pairs.append({**_key_json(k), left_system: left.to_json(), right_system: right.to_json(),
                      "delta": _delta(left, right)})
    return {
        "protocol": PROTOCOL,
        "systems": {"left": left_system, "right": right_system},
        "pairing": {
            "valid": not duplicates and not unmatched and bool(pairs),
            "matched_episodes": len(pairs),
            "input_episodes": len(metrics),
            "duplicate_keys": duplicates,
            "unmatched_keys": unmatched,
            "key_definition": KEY_DEFINITION,
        },
        "summary": {"left": aggregate(lefts), "right": aggregate(rights)},
        "pairs": pairs,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The compare flags: ``metrics...``, ``--output``, ``--left-system``, ``--right-system``."""
    parser.add_argument("metrics", nargs="+", help="run directories, result.json files or EpisodeMetrics JSON files")
    parser.add_argument("--output", type=Path, default=None, help="write the report JSON here as well")
    parser.add_argument("--left-system", default=DEFAULT_LEFT, help=f"left system name (default {DEFAULT_LEFT})")
    parser.add_argument("--right-system", default=DEFAULT_RIGHT,
                        help=f"right system name (default {DEFAULT_RIGHT}, which matches pyrualean:cells / :program)")


def run(args: argparse.Namespace) -> int:
    """Execute parsed compare arguments: print the report; exit 0 when valid, 2 when not (or unreadable)."""
    try:
        report = compare(load_metrics(args.metrics), args.left_system, args.right_system)
    except (OSError, ValueError) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    if args.output is not None:
        write_json(args.output, report)
    print(json.dumps(report, indent=2))
    if not report["pairing"]["valid"]:
        print(f"compare: pairing is invalid ({len(report['pairing']['duplicate_keys'])} duplicate, "
              f"{len(report['pairing']['unmatched_keys'])} unmatched key(s)); see pairing", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``compare METRICS... [--output PATH] [--left-system S] [--right-system S]``."""
    parser = argparse.ArgumentParser(prog="pyrualean compare", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
