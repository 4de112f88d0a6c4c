"""``pytest --cpu-report PATH``: where the suite's CPU time goes, per test file.

On a 2-core machine the suite is CPU-bound (the cores are busy about 95% of the test phase), so its wall time
follows the CPU time its tests spend, and ``--durations`` (wall time, including waits on other processes) does not
say which files to make cheaper. With this option every test appends one JSON line to PATH: its wall time, the CPU
time of the test process (``RUSAGE_SELF``) and of the child processes it reaped during the test
(``RUSAGE_CHILDREN``: nodes, CLIs, kernels, ffmpeg), and the xdist worker. The session ends with a table of the
files that spent the most CPU.

Child CPU is counted when the child is reaped: a module-scoped node appears on the module's last test, so read the
table per file. Processes the test process does not reap itself (a ROS 2 daemon, anything re-parented to init) are
not counted.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import resource
import time

import pytest

TOP_FILES = 20


def pytest_addoption(parser):
    parser.addoption("--cpu-report", metavar="PATH", default=None,
                     help="append each test's wall and CPU time (own and reaped children) to PATH as JSON lines "
                          "and end with the files that spent the most CPU")


def _cpu_s() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    path = session.config.getoption("--cpu-report")
    if path and not _is_worker(session.config):
        pathlib.Path(path).write_text("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = item.config.getoption("--cpu-report")
    if not path:
        yield
        return
    wall0, (own0, children0) = time.monotonic(), _cpu_s()
    yield
    own1, children1 = _cpu_s()
    line = json.dumps({"test": item.nodeid, "wall_s": round(time.monotonic() - wall0, 3),
                       "own_cpu_s": round(own1 - own0, 3), "children_cpu_s": round(children1 - children0, 3),
                       "worker": os.environ.get("PYTEST_XDIST_WORKER", "")})
    with open(path, "a") as f:   # one short append per test: lines from parallel workers do not interleave
        f.write(line + "\n")


def per_file(lines: list[dict]) -> list[tuple[str, int, float, float, float]]:
    """``(file, tests, wall_s, own_cpu_s, children_cpu_s)`` per test file, most CPU first."""
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for row in lines:
        t = totals[row["test"].split("::", 1)[0]]
        t[0] += 1
        t[1] += row["wall_s"]
        t[2] += row["own_cpu_s"]
        t[3] += row["children_cpu_s"]
    rows = [(name, int(t[0]), t[1], t[2], t[3]) for name, t in totals.items()]
    return sorted(rows, key=lambda r: -(r[3] + r[4]))


def pytest_terminal_summary(terminalreporter, config):
    path = config.getoption("--cpu-report")
    if not path or _is_worker(config) or not pathlib.Path(path).exists():
        return
    lines = [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line.strip()]
    rows = per_file(lines)
    tr = terminalreporter
    tr.section("CPU per test file (own + reaped children)")
    tr.write_line(f"{'cpu s':>8} {'own':>7} {'children':>8} {'wall s':>7} {'tests':>5}  file")
    for name, tests, wall, own, children in rows[:TOP_FILES]:
        tr.write_line(f"{own + children:8.1f} {own:7.1f} {children:8.1f} {wall:7.1f} {tests:5d}  {name}")
    own, children = sum(r[3] for r in rows), sum(r[4] for r in rows)
    tr.write_line(f"{own + children:8.1f} {own:7.1f} {children:8.1f} {sum(r[2] for r in rows):7.1f} "
                  f"{len(lines):5d}  all {len(rows)} files (per-test lines in {path})")
