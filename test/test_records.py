"""Typed run records: exact result.json key set and order, atomic writes, turn and card records."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pyrua_ros.records import records as R

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

GOLDEN = Path(__file__).parent / "data" / "result_v2.json"

# PYRUALEAN-CONTRACT.md 6.2, in order; "<runtime>_returncode" is "openai_returncode" for our runtime; then our own
# env_steps_total (the driver's step counter) and state_digest (per-step physics digests, DESIGN.md "Reproducibility").
RESULT_KEYS = [
    "schema", "system", "arm", "backend", "robot", "suite", "task", "seed", "task_language", "model",
    "reasoning_effort", "max_programs", "images", "feedback", "guides", "max_turns", "budget_mode",
    "environment_success", "status", "reason", "error", "finish", "calls", "stateful_calls", "env_steps",
    "tool_turns", "policy_wall_s", "startup_s", "total_wall_s", "timeout_s", "max_episode_steps", "prompt",
    "generation", "host", "created_at", "notes", "openai_returncode", "planner_attempts", "env_steps_total",
    "state_digest",
]


def make_result(**overrides) -> R.EpisodeResult:
    values = dict(
        arm="cells", backend="libero", robot="libero", suite="libero_goal", task=8, seed=1,
        task_language="put the bowl on the plate", model="m", reasoning_effort=None, max_programs=None,
        images="on-motion", feedback="rich", guides=False, max_turns=None, budget_mode="wall",
        environment_success=True, status="completed", reason=None, error=None,
        finish=R.FinishRecord("success", "bowl on plate", True), calls=30, stateful_calls=9, env_steps=400,
        tool_turns=6, policy_wall_s=88.25, startup_s=12.0, total_wall_s=101.0, timeout_s=1200.0,
        max_episode_steps=10000, prompt=R.PromptRecord(30000, "0" * 64, ("card/agentview_high.png",)),
        generation=R.Generation(runtime="openai", input_tokens=1000, output_tokens=200, total_tokens=1200, requests=6),
        host=R.HostInfo(python="3.11.7", cuda_device=None, primitive_set="full", runtime="openai",
                        boot_options={}, sandbox="subprocess"),
        created_at=R.now_iso(), notes=(), runtime_returncode=0, planner_attempts=1, env_steps_total=400,
    )
    values.update(overrides)
    return R.EpisodeResult(**values)


def test_result_json_has_the_reference_keys_in_order():
    data = make_result().to_json()
    assert list(data) == RESULT_KEYS
    assert data["schema"] == "pyrualean-episode-v2" and data["system"] == "pyrualean"
    assert data["finish"] == {"status": "success", "summary": "bowl on plate", "environment_terminated": True}
    assert data["host"]["runtime"] == "openai" and "codex_home" not in data["host"]
    assert data["generation"]["input_tokens"] == 1000 and data["generation"]["runtime"] == "openai"
    assert json.loads(json.dumps(data)) == data  # plain JSON values only


def test_golden_file_matches_the_record_type():
    golden = json.loads(GOLDEN.read_text())
    assert list(golden) == RESULT_KEYS
    assert set(golden["host"]) == {f.name for f in dataclasses.fields(R.HostInfo)
                                   if f.name not in ("codex_context", "codex_home", "claude_cli")}


def test_a_missing_field_is_a_type_error_and_bad_values_list_choices():
    fields = {f.name for f in dataclasses.fields(R.EpisodeResult)}
    assert fields >= {"policy_wall_s", "env_steps_total", "runtime_returncode", "planner_attempts"}
    with pytest.raises(TypeError):
        R.EpisodeResult(arm="cells")
    with pytest.raises(ValueError, match="status must be one of completed, timeout, call_budget, planner_error, "
                                         "error, boot_error, interrupted; got 'crashed'"):
        make_result(status="crashed")
    with pytest.raises(ValueError, match="finish status must be one of success, failure, stuck"):
        R.FinishRecord("done", "x", False)
    with pytest.raises(ValueError, match="shadow fields"):
        R.Generation(runtime="openai", extra={"requests": 3}).to_json()


def test_both_result_kinds_declare_the_shared_fields_once_and_keep_their_own_key_order():
    from pyrua_ros.agent.run.single_shot import RunResult

    shared = [f.name for f in dataclasses.fields(R.ResultRecord)]
    for kind in (R.EpisodeResult, RunResult):
        assert issubclass(kind, R.ResultRecord) and [f.name for f in dataclasses.fields(kind)][:len(shared)] == shared
        assert sorted(kind.KEYS) == sorted(f.name for f in dataclasses.fields(kind))
    assert RunResult.KEYS[:3] == ("schema", "system", "backend") and "policy" in RunResult.KEYS

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Forgetful(R.ResultRecord):
        KEYS = ("schema", "system", "status")
        extra: int

    with pytest.raises(TypeError, match=r"Forgetful.KEYS must name each field once: missing \['backend'"):
        R.check_keys(Forgetful)


def test_token_totals_are_declared_once_and_written_where_each_record_puts_them():
    from pyrua_ros.agent.run.single_shot import GenerationRecord

    assert R.TOKEN_KEYS == ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens",
                            "total_tokens")
    assert issubclass(R.Generation, R.TokenTotals) and issubclass(GenerationRecord, R.TokenTotals)
    assert list(R.Generation(runtime="openai", requests=2).to_json())[:7] == ["runtime", "model", *R.TOKEN_KEYS]
    assert GenerationRecord.KEYS[GenerationRecord.KEYS.index("turns") + 1:][:5] == R.TOKEN_KEYS


def test_write_result_is_atomic(tmp_path):
    path = R.write_result(tmp_path, make_result())
    assert path == tmp_path / "result.json"
    before = path.read_text()

    class Unprintable:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        R.write_result(path, {"schema": R.SCHEMA, "bad": Unprintable()})
    assert path.read_text() == before  # the old record survives a failed write
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left behind
    assert R.read_result(tmp_path)["status"] == "completed"


def test_read_result_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no result\.json at"):
        R.read_result(tmp_path)
    (tmp_path / "result.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a list, expected a JSON object"):
        R.read_result(tmp_path)


def test_turn_record_and_turns_file(tmp_path):
    turn = R.TurnRecord(index=1, tool="python", elapsed_s=1.23456, ok=True, moved=True, env_steps=42,
                        terminated=False, sandbox_flags=("probe:getattr",))
    assert turn.to_json() == {"index": 1, "tool": "python", "elapsed_s": 1.235, "ok": True, "moved": True,
                              "env_steps": 42, "terminated": False, "sandbox_flags": ["probe:getattr"]}
    with_usage = dataclasses.replace(turn, usage={"prompt_tokens": 10}, model_latency_s=0.5)
    assert with_usage.to_json()["usage"] == {"prompt_tokens": 10}
    R.write_turns(tmp_path / "tool_turns.json", [turn, with_usage])
    assert len(json.loads((tmp_path / "tool_turns.json").read_text())) == 2


def test_card_record_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown keys \\['poses'\\]; known keys: suite, task"):
        R.CardRecord.from_json({"poses": {}})


# ------------------------------------------------------------------------------------------ the one writer

SURROGATE = "bad " + chr(0xD800) + " text"


def test_run_records_make_every_text_safe(tmp_path):
    records = R.RunRecords(tmp_path)
    assert records.write_json("transcript.json", [{"content": SURROGATE, SURROGATE: 1}])
    assert records.write_jsonl("calls.jsonl", [{"kwargs": {"label": SURROGATE}}, {"n": 2}])
    assert records.write_text("last_message.md", SURROGATE)
    assert records.failures == []
    assert json.loads((tmp_path / "transcript.json").read_text("utf-8")) == [
        {"content": "bad \\ud800 text", "bad \\ud800 text": 1}]
    lines = (tmp_path / "calls.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"kwargs": {"label": "bad \\ud800 text"}}, {"n": 2}]
    assert (tmp_path / "last_message.md").read_text("utf-8") == "bad \\ud800 text"


def test_result_and_transcript_escape_line_and_paragraph_separators(tmp_path):
    """Issue 28: result.json and transcript.json kept raw U+2028/U+2029, which line-based readers split at."""
    records = R.RunRecords(tmp_path)
    text = "a\u2028b\u2029c\x85d"
    assert records.write_json("transcript.json", [{"content": text}])
    R.write_json(tmp_path / "result.json", {"finish": {"summary": text}})
    for name in ("transcript.json", "result.json"):
        raw = (tmp_path / name).read_bytes()
        assert "\u2028".encode() not in raw and "\u2029".encode() not in raw and "\x85".encode() not in raw
        assert b"\\u2028" in raw and text in json.dumps(json.loads(raw), ensure_ascii=False)


def test_a_record_that_cannot_be_written_is_reported_not_raised(tmp_path):
    records = R.RunRecords(tmp_path)
    looped: list = []
    looped.append(looped)   # a value that cannot become JSON
    assert records.write_json("tool_turns.json", looped) is False
    assert records.failures and records.failures[0].startswith("tool_turns.json could not be written: ")
    assert not (tmp_path / "tool_turns.json").exists()


def test_a_folder_link_or_fifo_at_a_record_name_is_replaced_never_followed(tmp_path):
    import os

    outside = tmp_path / "outside.txt"
    outside.write_text("kept")
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.json").mkdir()
    (run / "a.json" / "x").write_text("x")
    (run / "b.json").symlink_to(outside)
    os.mkfifo(run / "c.json")
    records = R.RunRecords(run)
    for name in ("a.json", "b.json", "c.json"):
        assert records.write_json(name, {"name": name}), records.failures
        assert not (run / name).is_symlink() and json.loads((run / name).read_text()) == {"name": name}
    assert outside.read_text() == "kept"


def test_the_placeholder_reserves_room_and_reads_back_as_json(tmp_path):
    records = R.RunRecords(tmp_path)
    records.reserve_result({"schema": R.SCHEMA, "status": "error", "reason": "killed: placeholder"})
    assert (tmp_path / "result.json").stat().st_size == R.RESULT_RESERVE_BYTES
    assert R.read_result(tmp_path)["reason"] == "killed: placeholder"


FULL_DISK_SCRIPT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from pyrua_ros.records.records import RunRecords
out = sys.argv[2]
records = RunRecords(out)
records.reserve_result({"schema": "pyrualean-episode-v2", "status": "error", "reason": "killed: placeholder"})
with open(os.path.join(out, "filler.bin"), "wb") as f:   # fill the disk to the last byte
    try:
        while True:
            f.write(b"0" * 65536)
            f.flush()
    except OSError:
        pass
ok = records.write_json("tool_turns.json", [{"index": i} for i in range(5000)])
final = {"schema": "pyrualean-episode-v2", "system": "pyrualean", "status": "error",
         "reason": "records: " + records.failures[0], "environment_success": False,
         "notes": ["note %d %s" % (i, "x" * 100) for i in range(100)] + records.failures,
         "error": {"type": "OSError", "message": "disk full", "traceback": "t" * 20000},
         "generation": {"requests": 3, "extra": "y" * 60000}}
records.write_result(final)
print(json.dumps({"ok": ok, "result": json.loads(open(os.path.join(out, "result.json")).read())}))
"""


def test_result_json_is_written_on_a_full_disk(tmp_path):
    """A real full disk (a 1 MiB tmpfs made by bubblewrap): the side record fails and says so, and the final
    result.json lands over the reserved placeholder, compacted to fit."""
    import os
    import subprocess
    import sys

    root = Path(R.__file__).resolve().parents[2]
    script = tmp_path / "full_disk.py"
    script.write_text(FULL_DISK_SCRIPT)
    out = str(tmp_path / "full_disk_run")   # bwrap makes the mount point on the real file system: keep it in tmp_path
    proc = subprocess.run(
        ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--size", str(2**20), "--tmpfs", out,
         *([] if os.geteuid() == 0 else ["--unshare-user"]), "--",
         sys.executable, str(script), str(root), out], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ok"] is False
    result = report["result"]
    assert result["status"] == "error" and result["reason"].startswith("records: tool_turns.json could not be")
    assert "No space left on device" in result["reason"]
    assert "traceback" not in result["error"] and result["generation"] is None
    assert result["notes"][-1].startswith("result.json was written over its reserved placeholder (OSError: ")
