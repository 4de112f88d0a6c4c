"""``--cpu-report``: the per-file CPU table the suite's tiering work is steered by (pyrua_ros/testing/cpu_report.py)."""

from __future__ import annotations

import json

import pytest

from pyrua_ros.testing.cpu_report import per_file

pytestmark = pytest.mark.unit


def test_per_file_sums_each_files_tests_and_puts_the_costliest_first():
    lines = [
        {"test": "test/a.py::t1", "wall_s": 1.0, "own_cpu_s": 0.5, "children_cpu_s": 0.0},
        {"test": "test/b.py::t1[x]", "wall_s": 2.0, "own_cpu_s": 0.1, "children_cpu_s": 3.0},
        {"test": "test/a.py::t2", "wall_s": 1.5, "own_cpu_s": 0.25, "children_cpu_s": 1.0},
    ]
    assert per_file(lines) == [("test/b.py", 1, 2.0, 0.1, 3.0), ("test/a.py", 2, 2.5, 0.75, 1.0)]


def test_a_child_process_cpu_is_charged_to_the_test_that_reaped_it(pytester):
    pytester.makepyfile(test_spend='''
        import subprocess, sys

        def test_child_spends():
            subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                            "while time.process_time() - t < 0.4: pass"], check=True)

        def test_idle():
            pass
    ''')
    report = pytester.path / "cpu.jsonl"
    result = pytester.runpytest_subprocess("-p", "pyrua_ros.testing.cpu_report", "--cpu-report", str(report))
    result.assert_outcomes(passed=2)
    rows = {r["test"].split("::")[1]: r for r in map(json.loads, report.read_text().splitlines())}
    assert rows["test_child_spends"]["children_cpu_s"] >= 0.35
    assert rows["test_idle"]["children_cpu_s"] < 0.05
    result.stdout.fnmatch_lines(["*CPU per test file*", "*test_spend.py*", "*all 1 files*"])


def test_the_suite_command_takes_a_report_path_outside_the_repository(tmp_path):
    """``scripts/test.sh --cpu-report /abs/path``, xdist workers included: the option is known before pytest looks
    for its rootdir, so the path is not taken for a test path (which made every worker refuse the option)."""
    import os
    import pathlib
    import subprocess

    root = pathlib.Path(__file__).resolve().parent.parent
    report = tmp_path / "cpu.jsonl"
    # (-o testpaths: collect this file only; still no test path among the arguments)
    proc = subprocess.run(["bash", str(root / "scripts" / "test.sh"), "-o", "testpaths=test/test_cpu_report.py",
                           "-m", "unit", "-k", "per_file_sums_each_files_tests", "--cpu-report", str(report)],
                          cwd=tmp_path, env=dict(os.environ, PYRUA_TEST_WORKERS="1"), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert [r["test"].rsplit("::", 1)[-1] for r in rows] == [
        "test_per_file_sums_each_files_tests_and_puts_the_costliest_first"]


def test_files_start_longest_first_and_keep_their_own_order():
    from pyrua_ros.testing.file_order import costs_from_report, order

    ids = ["test/a.py::t1", "test/a.py::t2", "test/b.py::t1", "test/new.py::t1", "test/c.py::t1", "test/c.py::t2"]
    costs = {"test/a.py": 5.0, "test/b.py": 1.0, "test/c.py": 30.0}
    # a file without a measured cost (new.py) goes first; then c, a, b; tests within a file stay in order
    assert [ids[i] for i in order(ids, costs)] == ["test/new.py::t1", "test/c.py::t1", "test/c.py::t2",
                                                   "test/a.py::t1", "test/a.py::t2", "test/b.py::t1"]
    lines = [{"test": "test/a.py::t1", "wall_s": 1.04, "own_cpu_s": 9.0, "children_cpu_s": 0.0},
             {"test": "test/b.py::t1", "wall_s": 2.0, "own_cpu_s": 0.1, "children_cpu_s": 0.0},
             {"test": "test/a.py::t2", "wall_s": 0.5, "own_cpu_s": 0.0, "children_cpu_s": 0.0}]
    assert list(costs_from_report(lines).items()) == [("test/b.py", 2.0), ("test/a.py", 1.5)]   # by wall, not CPU


def test_every_test_file_has_a_measured_cost_and_no_cost_names_a_missing_file():
    """test/file_costs.json is refreshed when files come and go (the README says how)."""
    import pathlib

    from pyrua_ros.testing.file_order import COSTS_FILE

    here = pathlib.Path(__file__).resolve().parent
    costs = json.loads((here / COSTS_FILE).read_text())
    files = {f"test/{p.name}" for p in here.glob("test_*.py")}
    assert set(costs) == files, {"unmeasured": sorted(files - set(costs)), "gone": sorted(set(costs) - files)}
