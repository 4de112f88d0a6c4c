"""VLA skills over the openpi websocket protocol: ``play --vla-endpoint`` against a real policy server.

The skills exist only when a policy server is configured (the reference's no-VLA mode otherwise); they send
LIBERO Pi0.5-layout observations and execute the returned 7-D OSC-delta chunks, 5 control steps per chunk,
through the driver interfaces (here the kinematic fake arm).
"""

import json
import os
import pathlib
import shlex
import subprocess
import sys

import numpy as np

from pyrua_ros.testing.chat_server import ChatServer, Reply
from pyrua_ros.testing.policy_server import PolicyServer

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--arm", "cells", "--suite", "fake_table", "--task", "0",
       "--driver", "fake", "--no-video", "--no-record", "--progress", "off"]
PROGRAM = """
def run(robo):
    contact = robo.pi0_doubled("push the red cube", max_chunks=2)
    print("contact:", contact.chunks_used, contact.success)
"""


def forward_chunk(_obs) -> np.ndarray:
    chunk = np.zeros((5, 7))
    chunk[:, 0] = 0.2          # +x, a fifth of the OSC step
    chunk[:, 6] = -1.0         # gripper open
    return chunk


def test_vla_skill_talks_openpi_and_runs_its_chunks_through_the_driver(tmp_path):
    program = tmp_path / "vla_program.py"
    program.write_text(PROGRAM)
    out = tmp_path / "run"
    with PolicyServer(forward_chunk) as server:
        proc = subprocess.run([*CLI, "--out", str(out), "--replay", str(program), "--vla-endpoint", server.endpoint,
                               "--primitives", "full"], capture_output=True, text=True, timeout=300, cwd=ROOT)
        observations = list(server.observations)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["host"]["primitive_set"] == "full" and result["status"] == "completed"
    assert "pi0_pick" in (out / "prompt.txt").read_text()
    assert len(observations) == 2
    obs = observations[0]
    assert obs["observation/image"].shape == (224, 224, 3) and obs["observation/image"].dtype == np.uint8
    assert obs["observation/wrist_image"].shape == (224, 224, 3)
    assert obs["observation/state"].shape == (8,) and obs["prompt"] == "push the red cube"
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    vla = next(c for c in calls if c["tool"] == "pi0_doubled")
    assert vla["ok"] and vla["stateful"] and vla["env_steps"] == 2 * 5
    # the arm moved +x by the chunks: 10 steps of a fifth of the 5 cm OSC step, minus tracking lag
    assert observations[1]["observation/state"][0] > obs["observation/state"][0] + 0.005


def test_without_a_policy_server_the_vla_skills_are_absent(tmp_path):
    script = [Reply(tool_calls=(("python", {"code": PROGRAM + "\nrun(robo)"}),)),
              Reply(tool_calls=(("finish", {"status": "stuck", "summary": "no VLA"}),))]
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = subprocess.run([*CLI, "--out", str(out), "--runtime", "openai", "--base-url", server.base_url,
                               "--primitives", "full"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["host"]["primitive_set"] == "no-vla"
    # a model could have called them: one note line on stderr and a result.json note say the seed model's set is
    # not running (a replay, which plays back recorded code, gets none: test_play.py)
    said = [line for line in proc.stderr.splitlines() if "needs a VLA policy server" in line]
    assert len(said) == 1 and said[0].startswith("note: ") and "no-VLA primitive set" in said[0]
    assert any("needs a VLA policy server" in note for note in result["notes"])
    assert "pi0_pick" not in (out / "prompt.txt").read_text()
    cell = json.loads((out / "transcript.json").read_text())
    text = json.dumps(cell)
    assert "pi0_doubled is not available in this run (no-VLA primitive set)" in text


def test_an_unreachable_policy_server_is_a_boot_error_naming_it(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([*CLI, "--out", str(out), "--vla-endpoint", "127.0.0.1:9", "--primitives", "full"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 3   # boot error (pyrua_ros.cli.exit_codes)
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "boot_error" and "VLA policy server 127.0.0.1:9" in result["reason"]


def _server_cmd(info: pathlib.Path) -> str:
    return f"{shlex.quote(sys.executable)} -m pyrua_ros.testing.policy_server --port {{port}} --info {info}"


def test_vla_server_cmd_boots_on_the_cuda_device_serves_and_stops_with_the_episode(tmp_path):
    """--vla-server-cmd: like the reference booting Pi0.5 on --cuda-device, the episode starts the user's server
    (here the project's test policy server as a process), waits until it answers, uses it, and stops it."""
    program = tmp_path / "vla_program.py"
    program.write_text(PROGRAM)
    out, info = tmp_path / "run", tmp_path / "server.json"
    proc = subprocess.run([*CLI, "--out", str(out), "--replay", str(program), "--primitives", "full",
                           "--vla-server-cmd", _server_cmd(info), "--cuda-device", "3"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["host"]["primitive_set"] == "full" and result["status"] == "completed"
    assert result["host"]["boot_options"]["vla_server_cmd"].endswith(f"--info {info}")
    server = json.loads(info.read_text())
    assert server["cuda_visible_devices"] == "3"
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert next(c for c in calls if c["tool"] == "pi0_doubled")["env_steps"] == 2 * 5
    assert "policy server on 127.0.0.1:" in (out / "vla_server.log").read_text()
    try:
        os.kill(server["pid"], 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the policy server outlived the episode"


def test_a_vla_server_cmd_that_dies_is_a_boot_error_with_its_last_line(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([*CLI, "--out", str(out), "--primitives", "full",
                           "--vla-server-cmd", f"{shlex.quote(sys.executable)} -c "
                           "\"import sys; sys.exit('no checkpoint at /models/pi05')\""],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 3   # boot error
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "boot_error"
    assert "exited with status 1" in result["reason"] and "no checkpoint at /models/pi05" in result["reason"]
