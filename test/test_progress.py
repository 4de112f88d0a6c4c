"""Progress from the first second: phases, a line per turn with steps, tokens and budget left on one clock, a live
line inside long cells; plain lines without control characters when piped, rich on a terminal."""

import io
import json
import pathlib
import re
import subprocess
import sys

from pyrua_ros.agent.run import progress
from pyrua_ros.testing.chat_server import ChatServer, Reply

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")   # anything but \t and \n

STATUS = {"turn": 2, "max_turns": 40, "steps": 120, "tokens": 12345, "elapsed_s": 31.4, "budget_left_s": 1168.6,
          "last": "MoveResult(reached=True,\n error_m=0.004)\x1b[31m", "episode": {"success": False}}


def test_plain_lines_for_phases_turns_and_the_summary():
    out = io.StringIO()
    view = progress.PlainProgress(out)
    view.phase("boot", "sim_node started (pid 42)", elapsed_s=0.2)
    view.turn(STATUS)
    view.turn(STATUS | {"turn": 3, "episode": {"success": True, "terminated": True}, "elapsed_s": 40.0})
    line = view.finish({"status": "completed", "environment_success": True, "tool_turns": 3, "env_steps": 150,
                        "total_tokens": 20000, "total_wall_s": 41.0, "startup_s": 7.5, "exit_code": 0,
                        "out": "runs/x"})
    lines = out.getvalue().splitlines()
    assert lines[0] == "[   0.2s] boot: sim_node started (pid 42)"
    assert lines[1] == ("[  31.4s] turn 2/40 | steps 120 | tokens 12.3k | budget 1169s left | episode running | "
                        "last: MoveResult(reached=True, error_m=0.004) [31m")
    assert "turn 3/40" in lines[2] and "episode success" in lines[2]
    assert lines[3] == line == ("episode done: status completed | success yes | turns 3 | steps 150 | tokens 20.0k | "
                                "time 41.0s (boot 7.5s) | exit 0 | run runs/x")
    assert not CONTROL.search(out.getvalue())


def test_a_long_cell_gets_a_live_line_every_ten_seconds_when_piped():
    out = io.StringIO()
    view = progress.PlainProgress(out)
    running = STATUS | {"running": {"tool": "python", "for_s": 1.0}}
    view.tick(running)                                            # too early for a line
    view.tick(running | {"running": {"tool": "python", "for_s": 10.2}, "steps": 300})
    view.tick(running | {"running": {"tool": "python", "for_s": 11.2}})   # same ten seconds: nothing new
    view.tick(running | {"running": {"tool": "python", "for_s": 20.5}})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0] == "[  31.4s]   turn 3 running python for 10s | steps 300 | budget 1169s left"
    assert "for 20s" in lines[1]


def test_rich_view_keeps_a_live_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    view = progress.make_progress("auto", out)
    assert isinstance(view, progress.RichProgress)
    view.phase("reset", "libero_goal task 8", elapsed_s=1.0)
    view.tick(STATUS | {"running": {"tool": "python", "for_s": 3.0}})
    view.turn(STATUS)
    view.finish({"status": "timeout", "reason": "timeout"})
    text = out.getvalue()
    assert "reset: libero_goal task 8" in text and "turn 2/40" in text and "episode done: status timeout" in text
    assert isinstance(progress.make_progress("auto", io.StringIO()), progress.PlainProgress)
    assert progress.make_progress("off") is None


def test_a_piped_episode_shows_every_phase_from_the_first_second_on_one_clock(tmp_path):
    """The real CLI on the fake arm with a scripted model, stderr piped: whole lines only, phases in order, every
    line stamped on the episode clock, a line per turn with steps, tokens and budget left, then the summary."""
    cell = "import time\nprint(robo.state().step)\ntime.sleep(14)\nprint('slept')"
    script = [Reply(tool_calls=(("python", {"code": cell}),), usage={"prompt_tokens": 900, "completion_tokens": 50}),
              Reply(tool_calls=(("finish", {"status": "stuck", "summary": "done"}),))]
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", "cells",
                               "--suite", "fake_table", "--task", "0", "--driver", "fake", "--runtime", "openai",
                               "--base-url", server.base_url, "--max-turns", "5", "--no-video", "--no-record"],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = proc.stderr
    assert not CONTROL.search(err), repr(err)
    lines = err.splitlines()
    phases = [m.group(1) for m in (re.match(r"\[ *[\d.]+s\] (\w+):", ln) for ln in lines) if m]
    assert phases[:6] == ["check", "boot", "reset", "card", "prompt", "agent"], lines
    stamps = [float(m.group(1)) for m in (re.match(r"\[ *([\d.]+)s\]", ln) for ln in lines) if m]
    assert stamps == sorted(stamps) and stamps[0] < 2.0                 # from the first second, one clock
    turn = next(ln for ln in lines if "] turn 1/5 " in ln)
    assert "steps 0" in turn and "tokens 950" in turn and "budget" in turn and "s left" in turn
    live = [ln for ln in lines if re.search(r"\] +turn 1 running python for 1\ds \| steps 0 \| budget", ln)]
    assert live, err                                                     # the live line inside the long cell
    summary = next(ln for ln in lines if ln.startswith("episode done:"))
    result = json.loads((out / "result.json").read_text())
    assert f"time {result['total_wall_s']:.1f}s" in summary and "exit 0" in summary
    assert float(re.match(r"\[ *([\d.]+)s\]", lines[-2]).group(1)) <= result["total_wall_s"]
