"""The CPU meter behind benchmarks/episode_cpu.py: off it costs nothing and writes nothing; on, a process's record
charges each section only its own CPU (nested ones exclusively), holds CPU measured in a child process tree, and
marks carry the section totals of their moment."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pyrua_ros import cputime

pytestmark = pytest.mark.unit

SCRIPT = textwrap.dedent("""
    import subprocess, sys, time
    from pyrua_ros import cputime

    def burn(seconds):   # this thread's CPU, not wall time: exact under any load
        t0 = time.thread_time()
        while time.thread_time() - t0 < seconds:
            pass

    with cputime.section("outer"):
        burn(0.1)
        with cputime.section("inner"):
            burn(0.2)
    cputime.mark("between")
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\\nt0 = time.process_time()\\nwhile time.process_time() - t0 < 0.3: pass"])
    while child.poll() is None:
        cpu = cputime.tree_cpu_s(child.pid)
        time.sleep(0.01)
    cputime.add("child", cpu)
""")


def test_a_record_charges_sections_exclusively_and_holds_a_child_tree(tmp_path):
    env = dict(os.environ, **{cputime.ENV: str(tmp_path)})
    subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, timeout=120)
    (path,) = tmp_path.glob("*.json")
    record = json.loads(path.read_text())
    assert record["pid"] != os.getpid() and record["role"]
    inner, outer = record["sections"]["inner"]["cpu_s"], record["sections"]["outer"]["cpu_s"]
    assert 0.2 <= inner < 0.3
    assert 0.1 <= outer < 0.2   # the inner section's 0.2 s are not the outer one's
    between = next(m for m in record["marks"] if m["name"] == "between")
    # the process's start and exit on the marks' clock: eval_timeline.py lines processes up by them
    assert record["started_t"] <= record["marks"][0]["t"] <= between["t"] <= record["exited_t"]
    assert between["sections"]["inner"] == pytest.approx(inner, abs=1e-4)
    assert between["process_cpu_s"] >= inner + outer
    # the child's CPU as seen just before it exited: most of its 0.3 s burn (the last poll may miss a little)
    assert 0.15 <= record["external"]["child"]["cpu_s"] <= 1.0
    main = record["thread_groups"]["MainThread"]
    assert main["charged_s"] == pytest.approx(inner + outer, abs=1e-3) and main["cpu_s"] >= main["charged_s"]


def test_off_it_is_a_shared_null_context_and_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != cputime.ENV}
    code = ("from pyrua_ros import cputime\n"
            "assert not cputime.enabled() and cputime.section('a') is cputime.section('b')\n"
            "with cputime.render_section('r'):\n    pass\n"
            "cputime.add('x', 1.0); cputime.mark('m')\n"
            "assert cputime.dump() is None and cputime.snapshot()['sections'] == {}\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path, timeout=60)
    assert list(tmp_path.iterdir()) == []
