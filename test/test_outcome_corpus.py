"""Every number a report prints is true: each way an episode can end, produced end to end by the real CLI, then
``summarize --json`` (default and ``--count-errors-as-failures``) and eval's own live line and report compared with
counts made by hand from the records.

One ``eval`` on the fake arm (one worker, so one driver boot) runs eight seeds of fake_table task 0 against a real
loopback chat server whose scripted model picks its behaviour by the seed it reads in its prompt: a success, a
claimed failure, no tool call, invalid tool arguments then silence, a raising cell and a false success claim, the
turn budget spent, a model server that refuses mid-episode (401: infrastructure), and a context window outgrown
(the agent's). One single-shot ``run`` whose ``run(robo)`` raises adds the issue's headline case: the model's crash
counts as a failure. Interrupts at every phase are test_interrupt_phases.py; the classification table itself is
test_outcomes.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from pyrua_ros.testing.chat_server import ChatServer, HttpError, Reply

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "pyrua_ros.cli.main"]
PROGRAM = (ROOT / "pyrua_ros" / "examples" / "fake_table_cube_on_plate.py").read_text()
SEEDS = 8
MAX_TURNS = 3


def _seed_and_turn(body: dict) -> tuple[int, int]:
    """The seed the prompt names and how many answers the model gave so far in this conversation."""
    text = json.dumps(body.get("messages", [])[:2])
    seed = int(re.search(r"- seed: (\d+)", text).group(1))
    return seed, sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def model(body: dict):
    """The scripted model: one behaviour per seed (see the module docstring)."""
    seed, turn = _seed_and_turn(body)
    finish = lambda status: Reply(tool_calls=(("finish", {"status": status, "summary": f"seed {seed}"}),))  # noqa
    if seed == 0:
        return Reply(tool_calls=(("python", {"code": PROGRAM + "\nrun(robo)\n"}),)) if turn == 0 else finish("success")
    if seed == 1:
        return finish("failure")
    if seed == 2:
        return Reply(content="I will stop here.")
    if seed == 3:
        return Reply(tool_calls=(("python", '{"code": "x = [' + "[" * 50),)) if turn == 0 else Reply(content="ok")
    if seed == 4:
        return Reply(tool_calls=(("python", {"code": "raise ValueError('my bug')"}),)) if turn == 0 \
            else finish("success")   # a false claim: the benchmark's check decides
    if seed == 5:
        return Reply(tool_calls=(("python", {"code": "x = 1"}),))   # never finishes: the turn budget ends it
    if seed == 6:
        return HttpError(401, message="the key was revoked")   # not retried: the model server failed
    return HttpError(400, message="This model's maximum context length is 4096 tokens")   # seed 7


# (status, reason prefix, environment_success, bucket) each seed's record must hold, made by hand
EXPECTED = {
    0: ("completed", None, True, "success"),
    1: ("completed", None, False, "failure"),
    2: ("completed", None, False, "failure"),
    3: ("completed", None, False, "failure"),
    4: ("completed", None, False, "failure"),
    5: ("call_budget", "call budget exhausted (3)", False, "failure"),
    6: ("planner_error", "provider error mid-episode: http: HTTP 401 (not retried)", False, "infra"),
    7: ("planner_error", "provider error mid-episode: context: ", False, "failure"),
}


def _summarize(*args: str) -> dict:
    proc = subprocess.run([*CLI, "summarize", *args, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_ending_counts_where_the_taxonomy_says(tmp_path):
    out = tmp_path / "eval"
    with ChatServer([model] * 200, context_limit=None) as server:
        proc = subprocess.run(
            [*CLI, "eval", "--arm", "cells", "--driver", "fake", "--suite", "fake_table", "--task", "0", "--seed",
             f"0-{SEEDS - 1}", "--workers", "1", "--runtime", "openai", "--base-url", server.base_url, "--model",
             "scripted-model", "--max-turns", str(MAX_TURNS), "--retries", "0", "--images", "none", "--no-video",
             "--no-record", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]   # one infrastructure failure is left
    crash = tmp_path / "crash.py"
    crash.write_text("def run(robo):\n    raise ValueError('the model bug')\n")
    single = subprocess.run([*CLI, "run", "--driver", "fake", "--suite", "fake_table", "--task", "0", "--policy",
                             str(crash), "--out", str(tmp_path / "runs" / "crash"), "--no-video", "--no-record",
                             "--progress", "off"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]   # the program's own failure is a measured outcome

    records = {seed: json.loads((out / "fake_table" / "0" / str(seed) / "result.json").read_text())
               for seed in range(SEEDS)}
    for seed, (status, reason, success, _bucket) in EXPECTED.items():
        r = records[seed]
        assert (r["status"], r["environment_success"]) == (status, success), (seed, r["status"], r["reason"])
        assert reason is None or r["reason"].startswith(reason), (seed, r["reason"])
        assert "http: http:" not in str(r["reason"]) and "context: context:" not in str(r["reason"])
    assert records[3]["tool_turns"] == 1 and records[4]["finish"]["status"] == "success"
    crashed = json.loads((tmp_path / "runs" / "crash" / "result.json").read_text())
    assert (crashed["status"], crashed["reason"], crashed["environment_success"]) == ("error", "exception", False)

    # by hand: 1 success, 6 agent failures in the eval + the crash, 1 infrastructure failure
    by_hand = {"success": 1, "failure": 7, "infra": 1, "interrupted": 0, "unknown": 0}
    data = _summarize(str(out), str(tmp_path / "runs"))
    assert data["outcomes"] == by_hand
    assert (data["native_sr_denominator"], data["overall"]["denominator"]) == (8, 8)
    assert data["native_sr"] == data["overall"]["success_rate"] == 1 / 8
    assert (data["overall"]["successes"], data["overall"]["failures"], data["overall"]["infra_failures"]) == (1, 7, 1)
    assert [c["task"] + f":{c['seed']}" for c in data["infra_causes"]] == ["fake_table:0:6"]
    assert "the key was revoked" in data["infra_causes"][0]["reason"]
    counted = _summarize(str(out), str(tmp_path / "runs"), "--count-errors-as-failures")
    assert (counted["native_sr_denominator"], counted["overall"]["denominator"]) == (9, 9)
    assert counted["native_sr"] == 1 / 9 and counted["overall"]["success_rate"] == round(1 / 9, 6)

    # eval's live line and its closing report say the same (its 8 episodes: 1 / 7, infra 1 beside the rate)
    last = [line for line in proc.stderr.splitlines() if line.startswith("[eval] w0 done")][-1]
    assert "| 8/8 done | success 1/7 (14.3%); infra 1 |" in last, last
    assert "fake_table:0 seed 6: planner_error: provider error mid-episode: http: HTTP 401" in proc.stdout
