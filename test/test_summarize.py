"""summarize and compare: the golden result.json stays readable, exact table and aggregate, strict pairing."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pyrua_ros.reports import compare as C
from pyrua_ros.reports import metrics as M
from pyrua_ros.reports import summarize as S

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

GOLDEN = Path(__file__).parent / "data" / "result_v2.json"
AGGREGATE_KEYS = [
    "episodes", "native_sr", "native_sr_denominator", "unknown_outcome_episodes", "statuses", "mean_calls",
    "mean_stateful_calls", "mean_env_steps", "mean_turns", "mean_wall_time_s", "mean_input_tokens",
    "mean_cached_input_tokens", "mean_output_tokens", "mean_reasoning_output_tokens", "mean_total_tokens",
]


def run_dir(root: Path, name: str, **changes) -> Path:
    """A run directory holding the golden result.json with some keys changed."""
    data = json.loads(GOLDEN.read_text())
    data.update(changes)
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data))
    return folder


def test_golden_play_result_is_read():
    (m,) = M.load_metrics([GOLDEN])
    assert m.system == "pyrualean:cells" and m.backend == "libero" and m.task == "libero_goal_swap:3"
    assert (m.seed, m.environment_success, m.status) == (0, False, "call_budget")
    assert (m.calls, m.stateful_calls, m.env_steps, m.turns) == (212, 57, 2311, 40)
    assert (m.wall_time_s, m.startup_s) == (1874.26, 41.7)
    assert (m.input_tokens, m.cached_input_tokens, m.output_tokens, m.reasoning_output_tokens,
            m.total_tokens) == (1203345, 1101120, 48211, 30122, 1251556)
    assert m.source == str(GOLDEN)


def test_single_shot_run_record_is_read(tmp_path):
    data = {"schema": "pyrualean-run-v2", "system": "pyrualean", "backend": "libero", "suite": "libero_goal",
            "task": 8, "seed": 2, "environment_success": None, "status": "error", "calls": 4,
            "error": {"type": "ValueError", "message": "bad"}, "policy_wall_s": 3.0,
            "generation": {"turns": 1, "prompt_tokens": 900, "completion_tokens": 100}}
    (tmp_path / "result.json").write_text(json.dumps(data))
    (m,) = M.load_metrics([tmp_path])
    assert m.system == "pyrualean" and m.environment_success is False  # a crash is a failure, not unknown
    assert (m.turns, m.input_tokens, m.output_tokens, m.total_tokens) == (1, 900, 100, 1000)
    assert m.notes[-1] == "ValueError: bad"


def test_table_has_the_references_columns():
    """Columns as the reference's ``cmd_summarize`` prints them (src/pyrualean/cli.py): text cut to its width,
    ``ok`` right-aligned in 3, a missing wall time as 0.0, any other missing value as "-"."""
    metrics = M.load_metrics([GOLDEN])
    long = dataclasses.replace(metrics[0], system="pyrualean:cells-with-a-long-name", task="libero_goal_swap:3" * 2,
                               environment_success=None, calls=None, wall_time_s=None, seed=12345)
    header, row, odd = M.format_table([*metrics, long]).splitlines()
    assert header == ("system            task                   seed  ok status     turns calls  steps  wall_s"
                      "    in_tok    cached out_tok")
    assert row == ("pyrualean:cells   libero_goal_swap:3        0   N call_budge    40   212   2311  1874.3"
                   "   1203345   1101120   48211")
    assert odd == ("pyrualean:cells-w libero_goal_swap:3libe 12345   - call_budge    40     -   2311     0.0"
                   "   1203345   1101120   48211")


def test_aggregate_keys_and_means(tmp_path):
    a = run_dir(tmp_path, "a", environment_success=True, status="completed", calls=100)
    b = run_dir(tmp_path, "b", seed=1)
    metrics = M.load_metrics([tmp_path])  # a folder of run directories
    assert [m.source for m in metrics] == [str(a / "result.json"), str(b / "result.json")]
    agg = M.aggregate([*metrics, dataclasses.replace(metrics[0], environment_success=None, calls=None)])
    assert list(agg) == [*AGGREGATE_KEYS, "outcomes", "rate_rule"]   # the reference's keys first, in its order
    assert agg["outcomes"] == {"success": 1, "failure": 1, "infra": 0, "interrupted": 0, "unknown": 1}
    assert (agg["episodes"], agg["native_sr_denominator"], agg["unknown_outcome_episodes"]) == (3, 2, 1)
    assert agg["native_sr"] == 0.5
    assert agg["statuses"] == {"completed": 2, "call_budget": 1}
    assert agg["mean_calls"] == 156.0  # mean of 100 and 212; the None is skipped
    assert M.aggregate([])["native_sr"] is None


def test_summarize_cli(tmp_path, capsys):
    assert S.main([str(GOLDEN), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)   # --json prints JSON and nothing else
    assert list(report)[:len(AGGREGATE_KEYS)] == AGGREGATE_KEYS and report["episodes"] == 1
    assert report["overall"]["failures"] == 1 and report["runs"][0]["system"] == "pyrualean:cells"
    assert S.main([str(GOLDEN)]) == 0
    table, suites = capsys.readouterr().out.split("\n\n", 1)
    assert table.startswith("system ") and suites.startswith("suite ")
    assert S.main([str(tmp_path)]) == 2
    assert "no result.json in it or in its sub-folders" in capsys.readouterr().err


ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[31m\u2028\u202e\x9b"


def test_terminal_escapes_in_a_hostile_result_are_printed_escaped(tmp_path, capsys):
    """Issue 28: a result.json's strings reached the terminal raw (an OSC 52 clipboard write, CSI 2J clearing
    the screen). Every report shows them as escapes; the JSON output stays valid and escaped too."""
    run_dir(tmp_path, "evil", status=f"completed{ESCAPES}", system=f"x{ESCAPES}", suite=ESCAPES,
            notes=[f"note{ESCAPES}"], seed=[1], calls="many", policy_wall_s="slow")
    html, markdown = tmp_path / "r.html", tmp_path / "r.md"
    for args in ([], ["--json"], ["--html", str(html), "--markdown", str(markdown)]):
        assert S.main([str(tmp_path), *args]) == 0
        out = capsys.readouterr().out
        assert not any(c in out for c in "\x1b\x07\x9b\u2028\u202e"), repr(out)
    assert "completed\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J" in out
    for page in (html, markdown):
        assert not any(c in page.read_text() for c in "\x1b\x07\x9b\u2028\u202e")
    (m,) = M.load_metrics([tmp_path])
    assert (m.seed, m.calls, m.wall_time_s) == (0, None, None) and m.notes[0].startswith("note\\x1b]52")


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"schema": "pyrualean-episode-v2", "x": 1e400}',
                                  '{"a": NaN}', "\x00not json", '{"schema": {"a": [1, 2]}}'])
def test_a_hostile_result_json_is_one_clear_line_not_a_crash(tmp_path, capsys, body):
    folder = tmp_path / "evil\x1b[2J"
    folder.mkdir()
    (folder / "result.json").write_text(body)
    assert S.main([str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("summarize: ")
    assert "\x1b" not in captured.err and "Traceback" not in captured.err


def test_run_directories_are_found_at_any_depth_but_not_in_workspaces(tmp_path):
    """An eval's OUT/<suite>/<task>/<seed>/ layout is read in natural order; a result.json an agent wrote in its
    workspace, or one under a hidden folder (earlier attempts), is not an episode."""
    for task in (10, 9):
        run_dir(tmp_path / "libero_goal_swap" / str(task), "0", task=task)
    (tmp_path / "libero_goal_swap" / "9" / "0" / "workspace").mkdir()
    (tmp_path / "libero_goal_swap" / "9" / "0" / "workspace" / "result.json").write_text("{}")
    run_dir(tmp_path / ".eval" / "attempts", "1")
    metrics = M.load_metrics([tmp_path])
    assert [m.task for m in metrics] == ["libero_goal_swap:9", "libero_goal_swap:10"]


def rpent_metrics(tmp_path: Path, keys: list[tuple[str, int]], *, name: str = "rpent.json") -> Path:
    (golden,) = M.load_metrics([GOLDEN])
    items = [dataclasses.replace(golden, system="rpent", task=task, seed=seed, calls=200, environment_success=True,
                                 source="rpent").to_json() for task, seed in keys]
    path = tmp_path / name
    path.write_text(json.dumps({"metrics": items}))
    return path


def test_compare_pairs_strictly_with_play_results_by_default(tmp_path):
    left = rpent_metrics(tmp_path, [("libero_goal_swap:3", 0), ("libero_goal_swap:3", 1)])
    run_dir(tmp_path / "runs", "s0")
    run_dir(tmp_path / "runs", "s1", seed=1, environment_success=True)
    report = C.compare(M.load_metrics([left, tmp_path / "runs"]))  # default systems: rpent vs pyrualean(:cells)
    assert report["protocol"] == "pyrualean-paired-v2"
    assert report["systems"] == ["rpent", "pyrualean"]   # the reference's schema: a list, summary keyed by name
    pairing = report["pairing"]
    assert pairing["valid"] and pairing["matched_episodes"] == 2 and pairing["input_episodes"] == 4
    first = report["pairs"][0]
    assert (first["backend"], first["task"], first["seed"]) == ("libero", "libero_goal_swap:3", 0)
    assert first["rpent"]["calls"] == 200 and first["pyrualean"]["system"] == "pyrualean:cells"
    assert first["delta"]["calls"] == 12 and first["delta"]["native_success_delta"] == -1
    assert report["pairs"][1]["delta"]["native_success_delta"] == 0
    assert report["summary"]["rpent"]["native_sr"] == 1.0 and report["summary"]["pyrualean"]["native_sr"] == 0.5
    assert pairing["key_definition"] == ["backend", "task", "seed"]


def test_compare_reports_duplicates_and_unmatched_and_exits_2(tmp_path, capsys):
    left = rpent_metrics(tmp_path, [("libero_goal_swap:3", 0), ("libero_goal_swap:3", 5)])
    run_dir(tmp_path / "runs", "cells")
    run_dir(tmp_path / "runs", "program", arm="program")  # same key, other arm: ambiguous, not silently chosen
    report = C.compare(M.load_metrics([left, tmp_path / "runs"]))
    pairing = report["pairing"]
    assert not pairing["valid"]
    duplicate = pairing["duplicate_keys"][0]
    assert duplicate["counts"] == {"rpent": 1, "pyrualean": 2}
    assert duplicate["systems"] == ["pyrualean:cells", "pyrualean:program", "rpent"]
    assert [(u["seed"], u["present"]) for u in pairing["unmatched_keys"]] == [(5, ["rpent"])]
    out = tmp_path / "report.json"
    assert C.main([str(left), str(tmp_path / "runs"), "--output", str(out)]) == 2
    assert "pairing is invalid" in capsys.readouterr().err
    assert json.loads(out.read_text())["pairing"]["valid"] is False
    # naming one arm makes it valid for the matched key only; seed 5 stays unmatched
    shutil.rmtree(tmp_path / "runs" / "program")
    assert C.main([str(left), str(tmp_path / "runs"), "--right-system", "pyrualean:cells"]) == 2
    with pytest.raises(ValueError, match="overlap"):
        C.compare([], "pyrualean", "pyrualean:cells")


def test_info_parsers_dispatch_summarize_and_compare(tmp_path, capsys):
    import argparse

    from pyrua_ros.cli.commands_info import add_info_parsers

    parser = argparse.ArgumentParser(prog="pyrualean")
    add_info_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["summarize", str(GOLDEN), "--json"])
    assert args.func(args) == 0 and "pyrualean:cells" in capsys.readouterr().out
    args = parser.parse_args(["compare", str(GOLDEN)])  # no rpent side: every episode unmatched
    assert (args.left_system, args.right_system) == ("rpent", "pyrualean")
    assert args.func(args) == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["api", "--primitives", "some"])
    assert "invalid choice: 'some'" in capsys.readouterr().err
