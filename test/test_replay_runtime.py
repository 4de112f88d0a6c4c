"""The replay runtime: earlier run directories and run(robo) program files become the same ModelResponse records."""

import json
import time

import pytest

from pyrua_ros.agent import runtimes
from pyrua_ros.agent.runtimes.base import RuntimeFailure
from pyrua_ros.agent.runtimes.replay_runtime import ReplayRuntime

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

PROGRAM = "def run(robo):\n    robo.move_to([0.1, 0.0, 0.2])\n"


def deadline():
    return time.monotonic() + 10.0


def drain(runtime, results=None):
    """Run the runtime to its finish; answer every call with the next text of ``results`` (default '{}')."""
    results = list(results or [])
    responses = []
    while True:
        response = runtime.respond(deadline())
        responses.append(response)
        (call,) = response.tool_calls
        if call.name == "finish":
            return responses
        runtime.add_tool_result(call.id, call.name, results.pop(0) if results else "{}", [])


def run_dir(tmp_path, cells=(), programs=(), finish=None):
    workspace = tmp_path / "run" / "workspace"
    workspace.mkdir(parents=True)
    for k, code in enumerate(cells, start=1):
        (workspace / f"cell_{k:03d}.py").write_text(code)
    for k, code in enumerate(programs, start=1):
        (workspace / f"program_{k:02d}.py").write_text(code)
    (workspace / "notes.py").write_text("ignored = True\n")
    if finish is not False:
        (tmp_path / "run" / "result.json").write_text(json.dumps({"schema": "pyrualean-episode-v2", "finish": finish}))
    return tmp_path / "run"


def test_run_directory_cells_are_replayed_in_order_then_the_recorded_finish(tmp_path):
    cells = [f"x = {k}\n" for k in range(1, 12)]          # 11 cells: cell_010 must sort after cell_009
    source = run_dir(tmp_path, cells=cells, finish={"status": "success", "summary": "placed it",
                                                    "environment_terminated": True})
    runtime = runtimes.create("replay", source=source, arm="cells")
    runtime.start("prompt", [b"png"])
    responses = drain(runtime)
    assert [r.tool_calls[0].arguments for r in responses[:-1]] == [{"code": c} for c in cells]
    assert all(r.tool_calls[0].name == "python" for r in responses[:-1])
    assert responses[-1].tool_calls[0].arguments == {"status": "success", "summary": "placed it"}
    assert [r.request_index for r in responses] == list(range(1, 13))
    assert all(r.usage.prompt_tokens == 0 and r.usage.completion_tokens == 0 for r in responses)
    assert runtime.usage_totals()["total_tokens"] == 0 and runtime.usage_totals()["requests"] == 0
    with pytest.raises(RuntimeFailure, match="exhausted") as info:
        runtime.respond(deadline())
    assert info.value.kind == "budget"


def test_run_directory_without_a_recorded_finish_ends_stuck(tmp_path):
    source = run_dir(tmp_path, cells=["robo.state\n"], finish=False)
    responses = drain(ReplayRuntime(source, "cells"))
    assert responses[-1].tool_calls[0].arguments["status"] == "stuck"


def test_run_directory_program_arm_replays_programs(tmp_path):
    source = run_dir(tmp_path, cells=["a = 1\n"], programs=[PROGRAM, PROGRAM + "# v2\n"], finish=None)
    responses = drain(ReplayRuntime(source, "program"))
    assert [r.tool_calls[0].name for r in responses] == ["run_program", "run_program", "finish"]
    assert responses[1].tool_calls[0].arguments == {"code": PROGRAM + "# v2\n"}


def test_program_file_for_cells_arm_is_one_cell_calling_run(tmp_path):
    path = tmp_path / "policy.py"
    path.write_text(PROGRAM)
    responses = drain(ReplayRuntime(path, "cells"), ['{"cell": 1, "episode_finished": "success"}'])
    first, finish = responses
    assert first.tool_calls[0].arguments["code"] == PROGRAM + "\nrun(robo)\n"
    assert finish.tool_calls[0].arguments["status"] == "success"
    json.loads(first.tool_calls[0].raw_arguments)


def test_program_file_for_program_arm_is_one_run_program_call(tmp_path):
    path = tmp_path / "policy.py"
    path.write_text(PROGRAM)
    runtime = ReplayRuntime(path, "program")
    responses = drain(runtime, ['{"status": "completed", "terminated": false}'])
    assert responses[0].tool_calls[0].name == "run_program"
    assert responses[0].tool_calls[0].arguments == {"code": PROGRAM}
    assert responses[1].tool_calls[0].arguments["status"] == "failure"
    assert [m["role"] for m in runtime.transcript()] == ["assistant", "tool", "assistant"]
    assert [e["event"] for e in runtime.events] == ["response", "response"]


def test_bad_sources_are_refused_with_what_is_accepted(tmp_path):
    (tmp_path / "no_run.py").write_text("def main(robo):\n    pass\n")
    with pytest.raises(ValueError, match=r"must define a top-level function run\(robo\)"):
        ReplayRuntime(tmp_path / "no_run.py", "cells")
    with pytest.raises(ValueError, match="arm must be one of cells, program"):
        ReplayRuntime(tmp_path / "no_run.py", "notebook")
    with pytest.raises(ValueError, match="does not exist"):
        ReplayRuntime(tmp_path / "missing", "cells")
    empty = run_dir(tmp_path, cells=[], finish=None)
    with pytest.raises(ValueError, match=r"no cell_NNN\.py files"):
        ReplayRuntime(empty, "cells")


def test_deadline_passed_is_a_budget_failure(tmp_path):
    path = tmp_path / "policy.py"
    path.write_text(PROGRAM)
    with pytest.raises(RuntimeFailure) as info:
        ReplayRuntime(path, "cells").respond(time.monotonic() - 1)
    assert info.value.kind == "budget"


def test_the_loop_returns_one_frozen_outcome_the_episode_applies(tmp_path):
    import dataclasses

    from pyrua_ros.agent.loop.loop import run_loop
    from pyrua_ros.agent.runtimes.base import LoopOutcome
    from pyrua_ros.records.outcome import StrategyOutcome

    path = tmp_path / "policy.py"
    path.write_text(PROGRAM)
    outcome = run_loop(ReplayRuntime(path, "cells"), None, deadline=time.monotonic() - 1, first_prompt="p",
                       first_images=[])
    assert outcome == LoopOutcome("timeout", "timeout") and isinstance(outcome, StrategyOutcome)
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.status = "completed"


def test_a_run_directory_is_read_without_following_links_out_of_it(tmp_path):
    """Issue 28: ``--replay RUNDIR`` followed links out of the source (a cell file linked to a secret was replayed
    as code, and sent to the kernel and the records)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET = 'outside the run directory'\n")
    source = run_dir(tmp_path, cells=["x = 1\n"], finish={"status": "success", "summary": "ok"})
    (source / "workspace" / "cell_002.py").symlink_to(secret)
    with pytest.raises(ValueError, match=r"workspace/cell_002\.py: cannot open \(a link\)"):
        ReplayRuntime(source, "cells")
    (source / "workspace" / "cell_002.py").unlink()
    (source / "result.json").rename(tmp_path / "outside.json")
    (source / "result.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(ValueError, match=r"result\.json: cannot open \(a link\)"):
        ReplayRuntime(source, "cells")
    (source / "result.json").unlink()
    (source / "result.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested more than 64 levels deep"):
        ReplayRuntime(source, "cells")
    (source / "result.json").unlink()
    (source / "workspace").rename(tmp_path / "elsewhere")
    (source / "workspace").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="without workspace/"):
        ReplayRuntime(source, "cells")
