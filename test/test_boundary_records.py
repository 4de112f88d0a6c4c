"""The host's records against a hostile workspace and a hostile run directory, through whole ``pyrualean play``
episodes (fake arm, a scripted chat-completions server, the bubblewrap kernel):

- a cell that fills its workspace (one file, many files, and cells that start with it full) gets ENOSPC and a
  line saying the workspace is full; the loop goes on and every record is written, even when the run directory
  sits on a file system smaller than the workspace (the copy of the workspace leaves the records their room);
- links, FIFOs, files and folders planted at every record name, in the run directory and in its workspace/,
  never receive or keep anything: each record ends as a regular file holding only what the host wrote, and a
  cell's text holding line separators is never a JSON line of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from pyrua_ros.kernel import sandbox
from pyrua_ros.testing import spin_until
from pyrua_ros.testing.chat_server import ChatServer, Reply

PLAY = [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--arm", "cells", "--suite", "fake_table", "--task",
        "0", "--driver", "fake", "--runtime", "openai", "--images", "none", "--feedback", "pure", "--no-video",
        "--no-record", "--progress", "off", "--no-preflight"]
EMPTY_AND_FILL_ONE = ("for n in range(1000):\n    open(f'f{n}.bin', 'wb').close()\n"   # frees the space, then
                      "with open('big.bin', 'wb') as f:\n    f.write(b'0' * (200 * 2**20))")   # one file too big
FILL_MANY = ("n = 0\ntry:\n    while True:\n        open(f'f{n}.bin', 'wb').write(b'1' * 2**20)\n        n += 1\n"
             "except OSError as exc:\n    print('stopped after', n, exc.errno)")
FULL_LINE = "[the workspace is full (128 MiB): writing a file fails with OSError ENOSPC until files are deleted]"


def _tool_results(out: Path) -> list[dict]:
    return [json.loads(m["content"]) for m in json.loads((out / "transcript.json").read_text())
            if m["role"] == "tool"]


def test_a_full_workspace_is_a_cell_error_and_every_record_is_still_written(tmp_path):
    """The run directory is a 64 MiB file system, the workspace 128 MiB: before, the copy of a filled workspace
    took the whole disk, the next cell source could not be saved and the loop ended with OSError ENOSPC after 2
    of 4 requests, without tool_turns.json or transcript.json."""
    small = tmp_path / "small"
    small.mkdir()
    out = small / "run"
    script = [Reply(tool_calls=(("python", {"code": FILL_MANY}),)),
              Reply(tool_calls=(("python", {"code": "print('still here')"}),)),
              Reply(tool_calls=(("python", {"code": EMPTY_AND_FILL_ONE}),)),
              Reply(tool_calls=(("finish", {"status": "failure", "summary": "filled"}),))]
    report = tmp_path / "report.py"   # runs inside the same mount namespace, after play: what is on that disk
    report.write_text("import json, os, sys\nout = sys.argv[1]\nst = os.statvfs(out)\n"
                      "files = {n: open(os.path.join(out, n), 'rb').read().decode() for n in os.listdir(out)\n"
                      "         if n.endswith(('.json', '.jsonl', '.md'))}\n"
                      "print(json.dumps({'free': st.f_bavail * st.f_frsize, 'files': files}))\n")
    with ChatServer(script) as server:
        play = [*PLAY, "--out", str(out), "--base-url", server.base_url, "--workspace-mib", "128"]
        proc = subprocess.run(
            ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--size", str(64 * 2**20), "--tmpfs", str(small),
             *([] if os.geteuid() == 0 else ["--unshare-user"]), "--", "sh", "-c",
             '"$@" >/dev/null; exec "$0" "$REPORT" "$OUT"', sys.executable, *play],
            env={**os.environ, "REPORT": str(report), "OUT": str(out)}, capture_output=True, text=True,
            timeout=300, cwd=sandbox.PACKAGE_ROOT)
        requests = len(server.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    files = seen["files"]
    result = json.loads(files["result.json"])
    assert requests == 4
    assert result["status"] == "completed", (result["status"], result["reason"], result["notes"])
    assert result["tool_turns"] == 4 and result["finish"]["summary"] == "filled"
    assert not any("could not be written" in note for note in result["notes"]), result["notes"]
    turns = json.loads(files["tool_turns.json"])
    transcript = json.loads(files["transcript.json"])
    results = [json.loads(m["content"]) for m in transcript if m["role"] == "tool"]
    assert [t["tool"] for t in turns] == ["python"] * 3 + ["finish"]
    # many files: the cell sees ENOSPC and is told the workspace is full
    assert results[0]["stdout"].startswith("stopped after") and results[0]["stdout"].strip().endswith(" 28")
    assert FULL_LINE in results[0]["stderr"]
    # a cell that starts with the workspace full still runs and is told
    assert results[1]["stdout"] == "still here\n" and FULL_LINE in results[1]["stderr"]
    assert "exception" not in results[1]
    # one file: the tmpfs refuses it
    assert results[2]["exception"].strip().splitlines()[-1] == "OSError: [Errno 28] No space left on device"
    assert FULL_LINE in results[2]["stderr"]
    # the records' room was kept on the run directory's file system
    assert seen["free"] >= 16 * 2**20
    assert all(isinstance(json.loads(line), dict) for line in files["calls.jsonl"].splitlines())


CANARY_TEXT = "canary: never written by the host\n"
FORGED = '{"event": "response", "forged": true}'
PLANTED = "planted_by_the_test"


def _plant(path: Path, kind: str, canary: Path) -> None:
    if kind == "link":
        path.symlink_to(canary)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "file":
        path.write_text(json.dumps({PLANTED: True}) + "\n")
    else:
        path.mkdir()
        (path / "inside.txt").write_text(PLANTED)


def test_records_planted_at_every_name_hold_only_what_the_host_wrote(tmp_path):
    """While the episode runs, something plants a link (to a file outside the run), a FIFO, a file or a folder at
    every record name of the run directory and at the cell names of its workspace/; a cell prints text with
    U+2028 / U+2029 / U+0085 followed by a forged event line. Every record ends as the host's own regular file."""
    canary = tmp_path / "canary.txt"
    canary.write_text(CANARY_TEXT)
    out = tmp_path / "run"
    gate = threading.Event()
    forging = f"print('a\\u2028{FORGED}\\u2029{FORGED}\\x85{FORGED}')"
    script = [Reply(tool_calls=(("python", {"code": forging}),), after=gate),
              Reply(tool_calls=(("python", {"code": "print(open('cell_002.py').read()[:5])"}),)),
              Reply(content="done", tool_calls=(("finish", {"status": "failure", "summary": "planted"}),))]
    names = ["result.json", "tool_turns.json", "transcript.json", "calls.jsonl", "openai_events.jsonl",
             "last_message.md", "workspace/cell_001.py", "workspace/cell_002.py"]
    kinds = ["link", "fifo", "file", "folder"]
    with ChatServer(script) as server:
        proc = subprocess.Popen([*PLAY, "--out", str(out), "--base-url", server.base_url], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=sandbox.PACKAGE_ROOT)
        try:
            assert spin_until(lambda: len(server.requests) >= 1 or proc.poll() is not None, 240.0)
            assert (out / "openai_events.jsonl").is_file() and (out / "result.json").is_file()
            for i, name in enumerate(names):
                target = out / name
                if target.exists() or target.is_symlink():
                    target.unlink()
                _plant(target, kinds[i % len(kinds)], canary)
            gate.set()
            _stdout, stderr = proc.communicate(timeout=240)
        finally:
            gate.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    assert canary.read_text() == CANARY_TEXT
    for name in names:
        path = out / name
        assert path.is_file() and not path.is_symlink(), name
        assert PLANTED not in path.read_text(), name
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["finish"]["summary"] == "planted"
    assert not any("could not be" in note for note in result["notes"]), result["notes"]
    assert len(json.loads((out / "tool_turns.json").read_text())) == 3
    assert (out / "last_message.md").read_text() == "done"
    assert (out / "workspace/cell_001.py").read_text() == forging
    results = _tool_results(out)
    assert results[0]["stdout"] == f"a\u2028{FORGED}\u2029{FORGED}\x85{FORGED}\n"
    assert results[1]["stdout"] == "print\n"   # the kernel's own copy of cell_002.py is the host's source
    # every JSON-lines record: each line (as str.splitlines sees lines) is one whole object, none forged
    for name in ("calls.jsonl", "openai_events.jsonl"):
        lines = (out / name).read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert all(isinstance(row, dict) and not row.get("forged") for row in rows), name
    events = [json.loads(line) for line in (out / "openai_events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("request") == 3 and events[0]["event"] == "start"


def test_the_tools_arm_bounds_each_call_by_the_cell_deadline_and_names_its_own_sandbox(tmp_path):
    """A robot tool call of the tools arm once had no deadline: ``set_gripper(1, steps=10**9)`` ran on until the
    budget. Now it stops at the per-call deadline of a cell (``--cell-timeout-s``) with the cell's error."""
    from pyrua_ros.agent.loop.arms import TOOLS_SANDBOX

    out = tmp_path / "run"
    script = [Reply(tool_calls=(("set_gripper", {"gripper": 1, "steps": 10**9}),)),
              Reply(tool_calls=(("finish", {"status": "failure", "summary": "bounded"}),))]
    with ChatServer(script) as server:
        proc = subprocess.run([*PLAY[:PLAY.index("--arm") + 1], "tools", *PLAY[PLAY.index("--arm") + 2:], "--out",
                               str(out), "--base-url", server.base_url, "--cell-timeout-s", "2", "--budget-s", "60"],
                              capture_output=True, text=True, timeout=240, cwd=sandbox.PACKAGE_ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["host"]["sandbox"] == TOOLS_SANDBOX
    first = _tool_results(out)[0]
    assert "time limit of this call was reached" in first["exception"], first
    assert first["elapsed_s"] < 2 + 2
