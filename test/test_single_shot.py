"""Single-shot mode: ``pyrualean generate`` against a real local chat-completions server, ``pyrualean run`` on the
real kinematic fake arm driver (a node process over loopback DDS, booted exactly as ``play`` boots it).

``generate`` runs in this process (the server is a thread here); every ``run`` is the real CLI in a child process,
so its exit status and printed JSON are checked too.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from pyrua_ros.agent.run.single_shot import extract_policy
from pyrua_ros.cli.main import main
from pyrua_ros.records.records import CardRecord
from pyrua_ros.testing.chat_server import ChatServer, HttpError, Reply

REPO = Path(__file__).resolve().parents[1]

SHORT = "def run(robo):\n    print('short')\n"
LONG = ("import math\n\n\ndef run(robo):\n    s = robo.state()\n    x, y, z = s.eef_pos\n"
        "    robo.move_to([x, y, z - 0.03], max_steps=20)\n    print('done', math.pi)\n")


def png(width: int = 2, height: int = 2, shade: int = 0x80) -> bytes:
    """A valid tiny RGB PNG."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + bytes([shade]) * 3 * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture
def card(tmp_path) -> Path:
    """A card.json with two card images, as ``play`` writes it."""
    (tmp_path / "card").mkdir()
    images = {}
    for k, camera in enumerate(("agentview", "robot0_eye_in_hand")):
        (tmp_path / "card" / f"{camera}_high.png").write_bytes(png(shade=40 + k))
        images[camera] = f"card/{camera}_high.png"
    record = CardRecord(suite="libero_goal", task=8, seed=3, task_language="put the bowl on the plate",
                        object_names=("akita_black_bowl_1", "plate_1"), eef_pos=(-0.2, 0.0, 1.17),
                        eef_quat=(1.0, 0.0, 0.0, 0.0), gripper_opening=0.08, images=images, max_env_steps=600)
    return record.write(tmp_path)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("SINGLE_SHOT_TEST_KEY", "sk-secret-do-not-write")


def generate(server, card, out, *extra, capsys=None):
    argv = ["generate", "--card", str(card), "--out", str(out), "--base-url", server.base_url, "--model", "m1",
            "--reasoning", "high", "--api-key-env", "SINGLE_SHOT_TEST_KEY", "--openai-max-tokens", "4096",
            "--openai-extra-body", '{"top_p": 0.95}', *extra]
    code = main(argv)
    printed = capsys.readouterr().out.strip().splitlines() if capsys else []
    return code, json.loads(printed[-1]) if printed else None


def test_extract_policy_takes_the_largest_python_block():
    text = f"intro\n```bash\n{'echo x ' * 50}\n```\n```python\n{SHORT}```\nthen\n```py\n{LONG}```\n"
    assert extract_policy(text) == LONG
    assert extract_policy("no code here") is None
    assert extract_policy("```json\n{\"a\": 1}\n```") is None


def test_generate_writes_the_larger_block_and_sends_images_without_tools(card, tmp_path, capsys):
    answer = f"Plan first.\n\n```python\n{SHORT}```\n\nFinal program:\n\n```python\n{LONG}```\n"
    out = tmp_path / "gen"
    with ChatServer([Reply(content=answer, cached_tokens=5, reasoning_tokens=7)]) as server:
        code, printed = generate(server, card, out, capsys=capsys)
        bodies = server.completion_bodies()
        headers = server.requests[-1].headers
    assert code == 0
    assert (out / "policy.py").read_text() == LONG
    assert printed["policy"] == str(out / "policy.py") and printed["policy_lines"] == len(LONG.splitlines())
    assert set(printed) == {"policy", "policy_lines", "wall_s", "input_tokens", "output_tokens"}
    # exactly one request, no tools, the prompt text and both card images in one user message
    assert len(bodies) == 1
    body = bodies[0]
    assert "tools" not in body and "tool_choice" not in body
    assert body["model"] == "m1" and body["max_tokens"] == 4096 and body["top_p"] == 0.95
    (message,) = body["messages"]
    text, *images = message["content"]
    prompt = (out / "prompt.txt").read_text()
    assert text == {"type": "text", "text": prompt}
    assert "# Task: write one policy program" in prompt and "put the bowl on the plate" in prompt
    assert prompt.endswith("Do not run commands and do not create or read files.")
    sent = [base64.b64decode(part["image_url"]["url"].split(",", 1)[1]) for part in images]
    assert sent == [png(shade=40), png(shade=41)]
    assert headers["authorization"] == "Bearer sk-secret-do-not-write"
    gen = json.loads((out / "generation.json").read_text())
    assert gen["model"] == "m1" and gen["reasoning_effort"] == "high" and gen["mode"] == "per_cell"
    assert gen["api_key_env"] == "SINGLE_SHOT_TEST_KEY" and gen["base_url"] == server.base_url
    assert gen["card"] == {"suite": "libero_goal", "task": 8, "seed": 3}
    assert gen["prompt_chars"] == len(prompt) and len(gen["images"]) == 2
    assert gen["returncode"] == 0 and gen["turns"] == 1 and "error" not in gen
    assert gen["cached_input_tokens"] == 5 and gen["reasoning_output_tokens"] == 7
    assert gen["total_tokens"] == gen["input_tokens"] + gen["output_tokens"] > 0
    assert (out / "response.md").read_text() == answer
    for name in os.listdir(out):   # the key itself is never written anywhere
        if (out / name).is_file():
            assert "sk-secret-do-not-write" not in (out / name).read_text(errors="replace"), name


def test_generate_without_a_code_block_exits_4_and_records_the_error(card, tmp_path, capsys):
    out = tmp_path / "gen"
    with ChatServer([Reply(content="I would move the bowl, but here is no code.")]) as server:
        code, printed = generate(server, card, out, "--transfer", capsys=capsys)
    assert code == 4 and printed["policy"] is None   # a planner error: the model gave no program
    assert not (out / "policy.py").exists()
    gen = json.loads((out / "generation.json").read_text())
    assert "no fenced python code block" in gen["error"] and gen["mode"] == "transfer"
    assert gen["returncode"] == 0 and gen["turns"] == 1 and gen["policy"] is None


def test_generate_records_a_failing_server(card, tmp_path, capsys):
    out = tmp_path / "gen"
    with ChatServer([HttpError(500), HttpError(503)]) as server:
        code, _ = generate(server, card, out, "--openai-max-retries", "1", capsys=capsys)
        outcomes = [r.outcome for r in server.requests]
    assert code == 4 and outcomes == ["models", "500", "503"]   # the preflight GET; retried once, then gave up
    gen = json.loads((out / "generation.json").read_text())
    assert "HTTP 503" in gen["error"] and gen["returncode"] == 1 and gen["turns"] == 0
    assert not (out / "policy.py").exists() and not (out / "response.md").exists()
    events = [json.loads(line)["event"] for line in (out / "openai_events.jsonl").read_text().splitlines()]
    assert events.count("error") == 2 and events[-1] == "failure"


# ------------------------------------------------------------------------------------------------ run


def run_cli(tmp_path: Path, policy: str, timeout_s: float = 30.0, generation: dict | None = None,
            suite: str = "fake_table"):
    """``pyrualean run`` on the fake arm; returns (exit status, printed JSON, result.json, run directory)."""
    gen_dir = tmp_path / "gen"
    gen_dir.mkdir(exist_ok=True)
    (gen_dir / "policy.py").write_text(policy)
    if generation is not None:
        (gen_dir / "generation.json").write_text(json.dumps(generation))
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "pyrua_ros.cli.main", "run", "--policy", str(gen_dir / "policy.py"),
            "--timeout-s", str(timeout_s), "--driver", "fake", "--suite", suite, "--task", "0",
            "--seed", "1", "--max-episode-steps", "300", "--out", str(out), "--no-video", "--no-record"]
    proc = subprocess.run(argv, check=False, cwd=REPO, capture_output=True, text=True, timeout=timeout_s + 90)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1]), json.loads(
        (out / "result.json").read_text()), out


def test_run_executes_the_policy_once_and_records_6_3(tmp_path):
    code, printed, result, out = run_cli(tmp_path, LONG, generation={"model": "m1", "turns": 1, "input_tokens": 9})
    assert code == 0, result
    assert set(printed) >= {"status", "reason", "environment_success", "calls", "env_steps", "policy_wall_s"}
    assert result["status"] == "completed" and printed["status"] == "completed"
    assert list(result)[:3] == ["schema", "system", "backend"]
    assert result["schema"] == "pyrualean-episode-v2" and result["system"] == "pyrualean"
    assert (result["suite"], result["task"], result["seed"]) == ("fake_table", 0, 1)
    assert result["task_language"] == "put the red cube on the plate"
    policy = (out / "policy.py").read_bytes()
    assert policy == LONG.encode() and result["policy"]["bytes"] == len(policy)
    assert len(result["policy"]["sha256"]) == 64 and result["policy"]["sandbox_flags"] == []
    assert result["environment_success"] is False and result["error"] is None
    assert result["stateful_calls"] == 1 and result["env_steps"] >= 1 and result["env_steps_total"] >= 1
    assert result["calls"] == printed["calls"] >= 2
    assert result["timeout_s"] == 30.0 and result["max_episode_steps"] == 300
    assert 0 < result["policy_wall_s"] < result["total_wall_s"] and result["startup_s"] > 0
    assert result["prompt"]["chars"] == len((out / "prompt.txt").read_text()) and len(result["prompt"]["images"]) == 2
    assert set(result["host"]) == {"python", "cuda_device", "libero_type", "boot_options", "rpent_root", "sandbox"}
    assert result["host"]["python"] == sys.executable   # the interpreter path, as the reference records it
    assert result["generation"] == {"model": "m1", "turns": 1, "input_tokens": 9}
    assert "done 3.14" in (out / "policy_output.txt").read_text()
    assert result["provenance"]["argv"][:2] == ["run", "--policy"] and result["provenance"]["sampling"] is None
    calls = [json.loads(line)["tool"] for line in (out / "calls.jsonl").read_text().splitlines()]
    assert "move_to" in calls[-1] and (out / "card.json").is_file() and (out / "workspace" / "policy.py").is_file()


def test_run_ends_a_program_where_the_task_is_solved_and_records_the_state_digest(tmp_path):
    """A program still moving after the benchmark counted the task solved (success can come a step earlier on
    another CPU) ends at that call with EpisodeFinished: ``finished``/``terminated``, success, exit 0."""
    from pyrua_ros.examples import EXAMPLES

    policy = (EXAMPLES[("fake_table", 0)].read_text() + "\n\n_solve = run\n\n\ndef run(robo):\n    _solve(robo)\n"
              "    robo.move_to(list(robo.state().eef_pos), robo.OPEN)\n    print('not reached')\n")
    code, printed, result, out = run_cli(tmp_path, policy)
    assert code == 0 and printed["exit_code"] == 0, result
    assert (result["status"], result["reason"]) == ("finished", "terminated") and result["environment_success"]
    assert "not reached" not in (out / "policy_output.txt").read_text()
    digest = result["state_digest"]
    assert digest["steps"] == result["env_steps_total"] and digest["missing"] == 0
    assert len(digest["per_step"]) == digest["steps"] + 1 and digest["final"] == digest["per_step"][-1]


def test_run_records_an_exception_with_its_traceback(tmp_path):
    policy = "def run(robo):\n    robo.state()\n    raise ValueError('boom 42')\n"
    code, printed, result, _ = run_cli(tmp_path, policy)
    assert code == 0   # a failing program is a measured outcome, not a CLI failure
    assert result["status"] == printed["status"] == "error" and result["reason"] == "exception"
    assert result["error"]["type"] == "ValueError" and result["error"]["message"] == "boom 42"
    assert 'File "policy.py", line 3, in run' in result["error"]["traceback"]
    assert result["environment_success"] is False and result["generation"] is None


def test_run_stops_a_policy_that_loops_forever(tmp_path):
    policy = "def run(robo):\n    robo.state()\n    while True:\n        pass\n"
    code, printed, result, _ = run_cli(tmp_path, policy, timeout_s=2.0)
    assert printed["status"] == "timeout"
    assert code == 5   # the budget exit code
    assert result["status"] == "timeout" and result["reason"] == "timeout"
    assert result["error"]["type"] == "TimeoutError" and "KeyboardInterrupt" in result["error"]["traceback"]
    assert 2.0 <= result["policy_wall_s"] < 8.0


def test_run_refuses_an_unknown_suite_before_anything_boots(tmp_path):
    (tmp_path / "policy.py").write_text(LONG)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", "run", "--policy", str(tmp_path / "policy.py"),
                           "--driver", "fake", "--suite", "no_such_suite", "--task", "0", "--out",
                           str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and time.monotonic() - started < 10
    assert "unknown suite 'no_such_suite' for --driver fake" in proc.stderr and "fake_table" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_run_refuses_a_missing_policy_with_exit_2(tmp_path, capsys):
    assert main(["run", "--policy", str(tmp_path / "nope.py"), "--task", "0", "--out", str(tmp_path / "r")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
