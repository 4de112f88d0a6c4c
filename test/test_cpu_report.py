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
