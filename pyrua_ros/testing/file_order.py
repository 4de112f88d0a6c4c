"""Longest test files first: the order that keeps a parallel suite from ending on one long file.

``scripts/test.sh`` runs pytest-xdist with whole files per worker, handed out in collection order
(``--no-loadscope-reorder``; xdist's own reorder puts files with the most tests first, which are mostly quick unit
files). This plugin sorts the collected tests so that files start in order of their measured wall time, longest
first: longest-processing-time-first scheduling, which keeps a file that runs for two minutes from starting when the
other workers are nearly done. Within a file the order is unchanged.

The measured times are ``test/file_costs.json`` (``{"test/test_x.py": wall seconds}``), written from a
``--cpu-report`` file::

    scripts/test.sh --cpu-report cpu.jsonl
    .venv/bin/python -m pyrua_ros.testing.file_order cpu.jsonl > test/file_costs.json

A file not listed there (a new one) starts first: if it is long that is where it belongs, and if it is short it
costs nothing there. The order only changes how long the suite takes, never what it runs.
"""

from __future__ import annotations

import json
import pathlib
import sys

from pyrua_ros.testing.cpu_report import per_file

COSTS_FILE = "file_costs.json"   # next to the conftest.py of the test directory


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order(nodeids: list[str], costs: dict[str, float]) -> list[int]:
    """Indices of ``nodeids`` with files in descending cost (unlisted files first), each file's tests in order."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(_file_of(nodeid), i)

    def key(i: int) -> tuple[float, int, int]:
        name = _file_of(nodeids[i])
        return (-costs.get(name, float("inf")), first_seen[name], i)

    return sorted(range(len(nodeids)), key=key)


def costs_from_report(lines: list[dict]) -> dict[str, float]:
    """``{file: wall seconds}`` from ``--cpu-report`` lines, longest first, rounded to 0.1 s."""

    walls = {name: round(wall, 1) for name, _tests, wall, _own, _children in per_file(lines)}
    return dict(sorted(walls.items(), key=lambda kv: -kv[1]))


def pytest_collection_modifyitems(session, config, items):
    path = pathlib.Path(str(config.rootpath)) / "test" / COSTS_FILE
    if not path.is_file():
        return
    costs = json.loads(path.read_text())
    items[:] = [items[i] for i in order([item.nodeid for item in items], costs)]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pyrua_ros.testing.file_order CPU_REPORT.jsonl > test/file_costs.json",
              file=sys.stderr)
        return 2
    lines = [json.loads(line) for line in pathlib.Path(argv[0]).read_text().splitlines() if line.strip()]
    json.dump(costs_from_report(lines), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
