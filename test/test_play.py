"""``pyrualean play`` end to end: the real CLI, real driver nodes, the real kernel, a real chat-completions server.

Fast cases use the kinematic fake arm (``--driver fake``); the seed's own command line runs on the LIBERO sim.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from pyrua_ros.reports.episode_view import load_episode
from pyrua_ros.testing import spin_until
from pyrua_ros.testing.chat_server import ChatServer, Reply

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "pyrua_ros.cli.main"]
# no episode video or bag where a test is about something else: both cost CPU (stream renders, encoding) and
# wall (the video is finished after the episode); the first test and the seed's command line record
QUIET = ("--no-video", "--no-record")
RUN_DIR_FILES = ("result.json", "prompt.txt", "card.json", "card/agentview_high.png", "card/wrist_high.png",
                 "tool_turns.json", "calls.jsonl", "last_message.md", "transcript.json", "episode.mcap", "host.log")


def play(out: pathlib.Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "play", "--out", str(out), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def result_of(out: pathlib.Path) -> dict:
    return json.loads((out / "result.json").read_text())


def test_replay_on_the_fake_arm_succeeds_and_writes_a_complete_run_directory(tmp_path):
    out = tmp_path / "run"
    proc = play(out, "--arm", "cells", "--suite", "fake_table", "--task", "0", "--driver", "fake")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = result_of(out)
    assert result["schema"] == "pyrualean-episode-v2"
    assert result["status"] == "completed" and result["environment_success"] is True
    assert result["finish"]["environment_terminated"] is True
    assert not any("VLA" in n for n in result["notes"]) and "VLA" not in proc.stderr   # replay: no VLA note
    prov = result["provenance"]   # how this run was made, as eval.json records it for an evaluation
    assert prov["argv"][:3] == ["play", "--out", str(out)] and prov["version"] and prov["sampling"] is None
    assert prov["commit"] and isinstance(prov["dirty"], bool)
    for name in RUN_DIR_FILES:
        assert (out / name).is_file(), name
    assert (out / "workspace" / "cell_001.py").is_file()
    turns = json.loads((out / "tool_turns.json").read_text())
    assert [t["tool"] for t in turns] == ["python", "finish"] and turns[0]["moved"]
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert {"segment", "move_to", "set_gripper", "release"} <= {c["tool"] for c in calls}
    assert result["env_steps"] == sum(c["env_steps"] or 0 for c in calls) > 0
    summary = subprocess.run([*CLI, "summarize", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert summary.returncode == 0 and "fake_table:0" in summary.stdout and " Y " in summary.stdout


def _seed_script() -> list:
    look = ("print(robo.task)\nrobo.show('agentview')\ns = robo.state()\n"
            "print([round(v, 3) for v in s.eef_pos], s.gripper_opening)")
    move = ("s = robo.state()\nx, y, z = s.eef_pos\nm = robo.move_to([x + 0.05, y, z - 0.05], robo.OPEN)\n"
            "print(m.reached, round(m.final_dist_m, 4), m.steps_used)")
    return [
        Reply(reasoning_content="Look first.", tool_calls=(("python", {"code": look}),),
              usage={"prompt_tokens": 9000, "completion_tokens": 120,
                     "prompt_tokens_details": {"cached_tokens": 0},
                     "completion_tokens_details": {"reasoning_tokens": 40}}),
        Reply(reasoning_content="Move a little.", tool_calls=(("python", {"code": move}),)),
        Reply(content="Stopping here.", tool_calls=(("finish", {"status": "failure",
                                                               "summary": "test script ends"}),)),
    ]


@pytest.mark.libero
def test_seed_command_line_runs_a_whole_episode_on_the_libero_sim(tmp_path):
    out = tmp_path / "coder-demo"
    with ChatServer(_seed_script()) as server:
        env = dict(os.environ, OPENAI_API_KEY="sk-test-secret-key")
        proc = subprocess.run(
            [*CLI, "play", "--robot", "libero", "--arm", "cells", "--suite", "libero_goal_swap", "--task", "3",
             "--seed", "0", "--runtime", "openai", "--base-url", server.base_url, "--api-key-env", "OPENAI_API_KEY",
             "--model", "DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B", "--openai-max-tokens", "8192",
             "--openai-tool-choice", "required", "--openai-temperature", "1.0",
             "--openai-extra-body", '{"top_p": 0.95, "top_k": 20}', "--images", "on-demand", "--feedback", "pure",
             "--guides", "--max-turns", "40", "--budget-s", "5400", "--out", str(out), "--cuda-device", "0"],
            capture_output=True, text=True, timeout=400, cwd=ROOT, env=env)
        bodies = server.completion_bodies()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = result_of(out)
    assert result["status"] == "completed" and result["tool_turns"] == 3
    assert result["finish"]["status"] == "failure" and result["environment_success"] is False
    assert result["host"]["cuda_device"] == "0" and result["max_turns"] == 40 and result["budget_mode"] == "calls"
    assert result["generation"]["input_tokens"] >= 9000 and result["generation"]["reasoning_output_tokens"] >= 40
    assert result["guides"] and (out / "workspace" / "guides").is_dir()
    for name in (*RUN_DIR_FILES, "openai_events.jsonl", "episode.mp4"):
        assert (out / name).is_file(), name
    # The request carried the seed's settings verbatim, and the key never reached the disk.
    first = bodies[0]
    assert first["tool_choice"] == "required" and first["max_tokens"] == 8192 and first["temperature"] == 1.0
    assert first["top_p"] == 0.95 and first["top_k"] == 20
    assert {t["function"]["name"] for t in first["tools"]} == {"python", "finish"}
    assert sum(1 for p in first["messages"][0]["content"] if p.get("type") == "image_url") == 2
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".md", ".log"):
            assert "sk-test-secret-key" not in path.read_text(errors="replace"), path
    # on-demand images: robo.show() in turn 1 attached the agentview image to the following request.
    second = bodies[1]["messages"]
    assert any(m["role"] == "user" and isinstance(m["content"], list)
               and any(p.get("type") == "image_url" for p in m["content"]) for m in second[2:])
    # pure feedback: only what the code produced.
    tool_msg = next(m for m in second if m["role"] == "tool")
    assert set(json.loads(tool_msg["content"])) <= {"cell", "stdout", "stderr", "elapsed_s", "value", "images"}
    summary = subprocess.run([*CLI, "summarize", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert "libero_goal_swap:3" in summary.stdout, summary.stdout


def test_unreachable_model_server_mid_episode_is_a_planner_error_exit_4_with_the_cause_on_the_terminal(tmp_path):
    out = tmp_path / "run"
    proc = play(out, "--arm", "cells", "--suite", "fake_table", "--task", "0", "--driver", "fake",
                "--runtime", "openai", "--base-url", "http://127.0.0.1:9/v1", "--openai-max-retries", "1",
                "--budget-s", "60", "--no-preflight", "--progress", "plain", *QUIET)
    result = result_of(out)
    assert result["status"] == "planner_error", result
    assert "connection" in result["reason"]
    assert proc.returncode == 4
    assert "reason: provider error mid-episode: connection" in proc.stderr


def test_decision_budget_refuses_the_extra_call_and_stops_the_episode(tmp_path):
    cell = "print(robo.state().step)"
    script = [Reply(tool_calls=(("python", {"code": cell}),)), Reply(tool_calls=(("python", {"code": cell}),)),
              Reply(tool_calls=(("finish", {"status": "stuck", "summary": "budget"}),))]
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = play(out, "--arm", "cells", "--suite", "fake_table", "--task", "0", "--driver", "fake",
                    "--runtime", "openai", "--base-url", server.base_url, "--max-turns", "1", *QUIET)
        bodies = server.completion_bodies()
    result = result_of(out)
    assert result["status"] == "call_budget" and result["reason"] == "call budget exhausted (1)"
    assert result["provenance"]["sampling"]["model"] == bodies[0]["model"]   # the effective sampling settings
    assert result["finish"]["status"] == "stuck"
    assert proc.returncode == 5                      # the budget exit code
    tool_results = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert "call budget exhausted" in tool_results[-1]["content"]


def test_a_reply_without_a_tool_call_ends_the_episode_as_the_reference_does(tmp_path):
    """The reference's runtimes exit when the model answers without calling a tool: status completed, no reason."""
    script = [Reply(tool_calls=(("python", {"code": "print(robo.state().step)"}),)),
              Reply(content="I believe the cube is on the plate."),
              Reply(tool_calls=(("finish", {"status": "success", "summary": "never asked"}),))]
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = play(out, "--arm", "cells", "--suite", "fake_table", "--task", "0", "--driver", "fake",
                    "--runtime", "openai", "--base-url", server.base_url, *QUIET)
        bodies = server.completion_bodies()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = result_of(out)
    assert result["status"] == "completed" and result["reason"] is None and result["finish"] is None
    assert len(bodies) == 2 and result["tool_turns"] == 1                 # no nudge, no third request
    assert "the model replied without a tool call; that final message ended the episode" in result["notes"]
    assert (out / "last_message.md").read_text().strip() == "I believe the cube is on the plate."


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_still_leaves_a_result_that_says_so(tmp_path, sig):
    out = tmp_path / "run"
    script = [Reply(tool_calls=(("python", {"code": "import time\ntime.sleep(60)"}),))]
    with ChatServer(script) as server:
        proc = subprocess.Popen([*CLI, "play", "--out", str(out), "--arm", "cells", "--suite", "fake_table",
                                 "--task", "0", "--driver", "fake", "--runtime", "openai", "--base-url",
                                 server.base_url], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            assert spin_until(lambda: (out / "workspace" / "cell_001.py").exists(), 120), "episode never started"
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    result = result_of(out)
    if sig == signal.SIGKILL:
        assert result["status"] == "error" and result["reason"].startswith("killed")
    else:
        assert result["status"] == "interrupted" and result["reason"] == "interrupted"   # its own outcome
        assert result["environment_success"] is False and result["error"] is None   # no KeyboardInterrupt trace
        assert result["tool_turns"] == 0 or result["tool_turns"] == 1
        assert "interrupted by SIGTERM" in result["notes"] and proc.returncode == 143


def test_program_arm_counts_programs_and_refuses_past_max_programs(tmp_path):
    program = "def run(robo):\n    print('step', robo.state().step)\n"
    script = [Reply(tool_calls=(("run_program", {"path": "../outside.py"}),)),
              Reply(tool_calls=(("run_program", {"code": program}),)),
              Reply(tool_calls=(("run_program", {"code": program}),)),
              Reply(tool_calls=(("finish", {"status": "stuck", "summary": "done"}),))]
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = play(out, "--arm", "program", "--suite", "fake_table", "--task", "0", "--driver", "fake",
                    "--runtime", "openai", "--base-url", server.base_url, "--max-programs", "1", *QUIET)
        bodies = server.completion_bodies()
    assert proc.returncode == 0, proc.stderr[-3000:]
    replies = [json.loads(m["content"]) for m in bodies[-1]["messages"] if m["role"] == "tool"]
    assert "path must be inside the workspace" in replies[0]["error"]            # refused, not counted
    assert replies[1]["status"] == "completed" and replies[1]["programs_left"] == 0
    assert "step 0" in replies[1]["stdout"] and replies[1]["file"] == "program_01.py"
    assert replies[2]["error"] == "program budget exhausted (1); call finish"
    assert (out / "workspace" / "program_01.py").is_file() and not (out / "workspace" / "program_02.py").exists()
    view = load_episode(out)   # the episode viewer reads the program arm's turns back
    assert [t.tool for t in view.turns] == ["run_program"] * 3 + ["finish"]
    assert view.turns[0].code is None and "inside the workspace" in view.turns[0].exchange.result
    assert view.turns[1].code == program and view.turns[1].code_file == "workspace/program_01.py"
    assert "step 0" in view.turns[1].exchange.result and view.turns[2].code_file is None


def test_clipped_steps_are_counted_in_the_result_and_the_rich_feedback(tmp_path):
    """A motion the driver's safety filter had to clip is said in result.json's notes and in the cell's rich
    feedback (the call's ``clipped_steps``)."""
    program = tmp_path / "fast.py"
    program.write_text("def run(robo):\n    x, y, z = robo.state().eef_pos\n"
                       "    robo.move_to([x, y, 0.85], step_clip=0.05, max_steps=20)\n")   # below the box floor
    out = tmp_path / "run"
    proc = play(out, "--arm", "cells", "--suite", "fake_table", "--task", "0", "--driver", "fake",
                "--replay", str(program), "--feedback", "rich", *QUIET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = [n for n in result_of(out)["notes"] if "safety filter clipped" in n]
    assert len(notes) == 1
    clipped = int(notes[0].split("clipped ")[1].split(" ")[0])
    transcript = json.dumps(json.loads((out / "transcript.json").read_text()))
    assert clipped > 0 and f'\\"clipped_steps\\": {clipped}' in transcript
