"""The episode watchdog, outside the agent process: an agent process stuck where no timer of its own can reach it
(signals blocked, a C call that never returns) is killed at its limit and the run directory ends with a full
result.json; an episode that ends by itself is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from pyrua_ros.records.records import RunRecords

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

PLACEHOLDER = {"schema": "pyrualean-episode-v2", "status": "error", "environment_success": False, "calls": 3,
               "reason": "killed: the episode host started but did not finish (this placeholder is replaced when "
                         "the episode ends)", "notes": ["booted"]}

AGENT = textwrap.dedent("""
    import json, pathlib, signal, sys, time
    from pyrua_ros.agent.run.watchdog import Watchdog
    out = pathlib.Path(sys.argv[1])
    watchdog = Watchdog.start(out, float(sys.argv[2]))
    print(watchdog.proc.pid, flush=True)
    if sys.argv[3] == "stuck":   # every signal it could catch blocked, then a wait no timer of its own ends
        signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
        time.sleep(3600)
    (out / "result.json").write_text(json.dumps({"status": "completed", "reason": None}))
    watchdog.stop()
""")


def agent(tmp_path, after_s: float, mode: str) -> subprocess.Popen:
    RunRecords(tmp_path).reserve_result(PLACEHOLDER)
    return subprocess.Popen([sys.executable, "-c", AGENT, str(tmp_path), str(after_s), mode], stdout=subprocess.PIPE,
                            text=True)


def test_a_stuck_agent_process_is_killed_and_its_placeholder_becomes_a_full_record(tmp_path):
    proc = agent(tmp_path, 1.0, "stuck")
    watchdog_pid = int(proc.stdout.readline())
    assert proc.wait(timeout=60) == -9   # SIGKILL, from outside
    deadline = time.monotonic() + 30
    while json.loads((tmp_path / "result.json").read_text())["status"] != "timeout" and time.monotonic() < deadline:
        time.sleep(0.1)
    record = json.loads((tmp_path / "result.json").read_text())
    assert record["status"] == "timeout" and record["reason"].startswith("watchdog: the agent process was still "
                                                                         "running 1 s after the agent started")
    assert {k: record[k] for k in ("schema", "environment_success", "calls")} == {
        "schema": "pyrualean-episode-v2", "environment_success": False, "calls": 3}
    assert record["notes"][0] == "booted" and "ended by the episode watchdog" in record["notes"][1]
    with pytest.raises(ProcessLookupError):   # the watchdog is gone too
        for _ in range(100):
            os.kill(watchdog_pid, 0)
            time.sleep(0.1)


def test_an_episode_that_ends_by_itself_is_left_alone(tmp_path):
    proc = agent(tmp_path, 5.0, "done")
    proc.stdout.readline()
    assert proc.wait(timeout=60) == 0
    time.sleep(0.5)
    assert json.loads((tmp_path / "result.json").read_text()) == {"status": "completed", "reason": None}


def test_a_single_shot_run_has_the_episode_watchdog_too(tmp_path):
    """``Episode.run`` starts the watchdog for any strategy with a finite ``wall_budget_s``: the loop arms (play,
    eval) had one, the single shot of ``pyrualean run`` had none (its only watchdog was a timer inside the agent
    process)."""
    import math

    from pyrua_ros.agent.run.single_shot import SingleShotAgent
    from pyrua_ros.settings.config import RunConfig, SingleShotSettings

    cfg = RunConfig(single=SingleShotSettings(policy=tmp_path / "policy.py", timeout_s=42.0))
    budget = getattr(SingleShotAgent(cfg), "wall_budget_s", None)
    assert budget == 42.0 and math.isfinite(budget)
