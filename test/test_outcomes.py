"""The one outcome taxonomy (pyrua_ros/settings/outcomes.py): which bucket every recorded ending falls in,
old run directories included, how the one success rate counts them, and that docs/USAGE.md's table names every
kind. The end-to-end corpus (each failure mode produced by a real episode) is test_outcome_corpus.py.
"""

import json
from pathlib import Path

import pytest

from pyrua_ros.reports import metrics as M
from pyrua_ros.reports import summarize as S
from pyrua_ros.settings import outcomes as O

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("status, reason, success, kind, bucket", [
    ("completed", None, True, "ended", "success"),
    ("completed", None, False, "ended", "failure"),
    ("finished", "terminated", True, "episode_finished", "success"),
    ("call_budget", "call budget exhausted (40)", False, "budget_exhausted", "failure"),
    ("timeout", "timeout", False, "timeout", "failure"),
    # a single-shot program that raised or was refused is the model's outcome, in the rate
    ("error", "exception", False, "program_raised", "failure"),
    ("error", "load", False, "program_refused", "failure"),
    ("planner_error", "provider error mid-episode: context: estimated prompt 70000 tokens", False,
     "context_exhausted", "failure"),
    ("boot_error", "episode reset failed: ...", False, "boot_failed", "infra"),
    ("planner_error", "provider error mid-episode: connection: request 3 failed", False, "model_server_failed",
     "infra"),
    ("error", "RuntimeError: the sim node exited with signal 9", False, "host_failed", "infra"),
    ("error", "records: result.json: No space left on device", False, "host_failed", "infra"),
    ("killed", "killed: worker 0 died", False, "killed", "infra"),
    # the placeholder a host killed by SIGKILL leaves behind
    ("error", "killed: the episode host started but did not finish", False, "killed", "infra"),
    ("interrupted", "interrupted", False, "interrupted", "interrupted"),
    # run directories written before the interrupted status: error/boot_error with reason "interrupted"
    ("error", "interrupted", True, "interrupted", "interrupted"),
    ("boot_error", "interrupted", True, "interrupted", "interrupted"),
    # a record that says nothing is not a measurement
    (None, None, False, "host_failed", "infra"),
    ("no-such-status", None, True, "host_failed", "infra"),
])
def test_every_recorded_ending_has_one_bucket(status, reason, success, kind, bucket):
    outcome = O.classify(status, reason, success)
    assert (outcome.kind, outcome.bucket) == (kind, bucket)


def test_an_interrupt_is_never_a_success_and_an_unknown_check_is_no_failure():
    assert O.classify("interrupted", "interrupted", True).bucket == "interrupted"
    assert O.classify("completed", None, None).bucket == "unknown"


def test_the_rate_counts_agent_outcomes_and_names_every_other_bucket():
    ends = [O.classify("completed", None, True), O.classify("error", "exception", False),
            O.classify("boot_error", "x", False), O.classify("planner_error", "provider error mid-episode: http: x",
                                                             True), O.classify("interrupted", "interrupted", False)]
    default = O.rate_counts(ends)
    assert (default.rate_successes, default.denominator) == (1, 2) and default.rate == 0.5
    assert default.text() == "1/2 (50.0%); infra 2, interrupted 1"
    # the reference's rule: infrastructure failures in, each judged by the benchmark's check; the interrupt still out
    counted = O.rate_counts(ends, count_errors_as_failures=True)
    assert (counted.rate_successes, counted.denominator) == (2, 4)
    assert counted.buckets() == {"success": 1, "failure": 1, "infra": 2, "interrupted": 1, "unknown": 0}


def _record(root: Path, name: str, **fields) -> None:
    data = json.loads((ROOT / "test" / "data" / "result_v2.json").read_text())
    data.update(fields)
    (root / name).mkdir()
    (root / name / "result.json").write_text(json.dumps(data))


def test_summarize_gives_one_rate_and_a_crash_counts_as_a_failure(tmp_path, capsys):
    """The issue's first finding: a single-shot run whose run(robo) raised was left out of the rate while
    native_sr counted it; now one rate, with the crash in it."""
    _record(tmp_path, "crash", arm=None, status="error", reason="exception", environment_success=False,
            error={"type": "ValueError", "message": "the model's bug"})
    _record(tmp_path, "ok", seed=1, status="completed", environment_success=True)
    _record(tmp_path, "old-interrupt", seed=2, status="error", reason="interrupted", environment_success=True)
    assert S.main([str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["native_sr"], data["native_sr_denominator"]) == (0.5, 2)
    assert (data["overall"]["success_rate"], data["overall"]["denominator"]) == (0.5, 2)
    assert data["overall"]["interrupted"] == 1 and data["overall"]["infra_failures"] == 0
    assert data["outcomes"] == {"success": 1, "failure": 1, "infra": 0, "interrupted": 1, "unknown": 0}
    assert sorted(r["outcome"] for r in data["runs"]) == ["ended", "interrupted", "program_raised"]
    assert M.EpisodeMetrics.from_json({k: v for k, v in data["runs"][0].items()
                                       if k not in ("outcome", "reason")}).outcome   # older metrics files load


def test_usage_has_the_taxonomy_table():
    usage = (ROOT / "docs" / "USAGE.md").read_text()
    section = usage[usage.index("## Outcomes and the success rate"):]
    for kind in O.KINDS:
        assert f"`{kind.name}`" in section, kind.name


def test_a_retried_model_request_is_told_as_it_happens():
    """The live line said "waiting for the model" for 31 s while connections were refused; each retry is now a
    progress message with its cause and count."""
    from types import SimpleNamespace

    from pyrua_ros.agent.loop.arms import LoopAgent, retry_cause

    told = []
    progress = SimpleNamespace(message=lambda text, elapsed_s=None: told.append(text))
    agent = LoopAgent.__new__(LoopAgent)
    agent.cfg = SimpleNamespace(model=SimpleNamespace(max_retries=5))
    episode = SimpleNamespace(progress=progress, t0=0.0)
    refused = {"event": "error", "attempt": 3, "kind": "connection", "status": None, "retry_in_s": 4.0,
               "message": "Connection error. (ConnectError: [Errno 111] Connection refused)"}
    agent._announce_retry(episode, refused)
    agent._announce_retry(episode, {**refused, "retry_in_s": None})   # the last attempt: nothing more to wait for
    agent._announce_retry(episode, {"event": "attempt", "attempt": 1})
    assert told == ["model server: connection refused, retry 3/5 in 4 s"]
    assert retry_cause({"kind": "http", "status": 503, "message": "HTTP 503: busy"}) == "HTTP 503"
