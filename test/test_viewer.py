"""``pyrualean view``: an episode's run directory as one offline HTML page, opened in headless Chromium.

The model's run directory is real: ``play`` on the kinematic fake arm with a scripted model server. The reference's
layout (Codex events, no transcript.json, turns that do not say which calls they made) and hostile records are
crafted here. The program arm (test_play.py), the tools arm and the codex and claude runtimes (test_cli_runtimes.py)
are read back on the run directories those tests make.
"""

import json
import pathlib
import re
import subprocess
import sys

import pytest

from pyrua_ros.reports import viewer
from pyrua_ros.reports.episode_view import load_episode
from pyrua_ros.testing.browser import broken_links, open_offline
from pyrua_ros.testing.chat_server import ChatServer, Reply

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "pyrua_ros.cli.main"]
EPISODE = ["--suite", "fake_table", "--task", "0", "--driver", "fake", "--progress", "off"]
LOOK = "s = robo.state()\nprint('start', [round(v, 3) for v in s.eef_pos])"
MOVE = ("s = robo.state()\nx, y, z = s.eef_pos\nm = robo.move_to([x + 0.04, y, z - 0.04], robo.OPEN)\n"
        "print('reached', m.reached)\nrobo.set_gripper(1.0, steps=6)")


def play(out: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "play", "--out", str(out), *EPISODE, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    """A cells episode of a scripted model on the fake arm, with the video and the bag."""
    out = tmp_path_factory.mktemp("viewer") / "run"
    script = [Reply(reasoning_content="Look where the gripper is <first>.", tool_calls=(("python", {"code": LOOK}),)),
              Reply(reasoning_content="Move a little, then close.", tool_calls=(("python", {"code": MOVE}),)),
              Reply(content="Done looking.", tool_calls=(("finish", {"status": "failure", "summary": "a test"}),))]
    with ChatServer(script) as server:
        proc = play(out, "--arm", "cells", "--runtime", "openai", "--base-url", server.base_url, "--model", "scripted")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_the_page_shows_each_turn_the_video_and_the_path(model_run):
    proc = subprocess.run([*CLI, "view", str(model_run)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    page = pathlib.Path(proc.stdout.strip())
    assert page == model_run / "view.html"
    text = page.read_text()
    view = load_episode(model_run)
    assert [t.tool for t in view.turns] == ["python", "python", "finish"] and view.problems == ()
    moving = view.turns[1]
    assert [c["tool"] for c in moving.calls][-2:] == ["move_to", "set_gripper"]   # its own robo calls
    assert not view.turns[0].calls or all(c["tool"] != "move_to" for c in view.turns[0].calls)
    assert len(moving.exchange.images) == 2 and all(i.data_uri for i in moving.exchange.images)  # on-motion
    assert [t.video_s is not None for t in view.turns] == [True, True, True]
    assert view.turns[0].video_s <= view.turns[1].video_s < view.turns[2].video_s
    assert "<h1>put the red cube on the plate</h1>" in text
    assert "Look where the gripper is &lt;first&gt;." in text                      # reasoning, escaped
    assert '<span class="r">robo</span>.move_to' in text                           # highlighted code
    assert "reached True" in text                                                  # the cell's output
    assert "<b>set_gripper</b>" in text and "Done looking." in text
    assert text.count('<img class="seen"') == 2 + 2                                # card + the motion images
    assert '<video id="video"' in text and 'src="episode.mp4"' in text
    assert text.count('data-t="') == 2 * 3                                         # each turn linked twice
    assert "<polyline" in text and "control step (episode.mcap)" in text           # the path from the bag
    assert "Content-Security-Policy" in text


def test_chromium_opens_the_page_offline_with_the_video_and_every_link(model_run, tmp_path):
    page = viewer.write_view(model_run, tmp_path / "pages" / "episode.html")   # links relative to another folder
    check = open_offline(page)
    assert check.console == (), check.console          # no refusal, no failed load, no script error
    assert check.video is not None and check.video.startswith("loaded "), check.video
    assert float(check.video.split()[1]) > 0.5          # the video element read the mp4's duration
    assert check.broken == () and check.external == ()
    assert "Turn 3" in check.dom
    # the same check fails for a page that needs the network
    needy = tmp_path / "pages" / "needy.html"
    needy.write_text(page.read_text().replace("<h2>Prompt</h2>", '<img src="https://cdn.example/x.png">'
                                              "<h2>Prompt</h2>"))
    bad = open_offline(needy)
    assert bad.external == ("https://cdn.example/x.png",) and bad.console


def _layout_topics(node) -> set[str]:
    """Every topic the Foxglove layout names: image and calibration topics, message paths, 3D topic keys."""
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("imageTopic", "calibrationTopic", "topicPath", "value") and isinstance(value, str):
                found.add(re.split(r"[.\[]", value, maxsplit=1)[0])
            elif key == "topics" and isinstance(value, dict):
                found.update(value)
            else:
                found |= _layout_topics(value)
    elif isinstance(node, list):
        for item in node:
            found |= _layout_topics(item)
    return found


def test_the_foxglove_layout_names_only_topics_an_episode_bag_holds(model_run):
    from mcap.reader import make_reader

    layout = json.loads((ROOT / "config" / "foxglove_episode.json").read_text())
    topics = _layout_topics(layout["configById"])
    assert {"/cameras/agentview/color/image_raw", "/ee_pose", "/agent/cell", "/agent/output", "/tf"} <= topics
    with open(model_run / "episode.mcap", "rb") as handle:
        recorded = {c.topic for c in make_reader(handle).get_summary().channels.values()}
    assert topics <= recorded, sorted(topics - recorded)
    panels = set(re.findall(r'"([A-Za-z0-9]+![A-Za-z0-9]+)"', json.dumps(layout["layout"])))
    assert panels == set(layout["configById"])   # every panel placed, none missing


# ---------------------------------------------------------------------------------------------------- crafted
GOLDEN = ROOT / "test" / "data" / "result_v2.json"


def _reference_run(root: pathlib.Path) -> pathlib.Path:
    """A run directory in the reference's layout: codex events, no transcript.json, tool turns without calls."""
    run = root / "ref"
    (run / "workspace").mkdir(parents=True)
    result = json.loads(GOLDEN.read_text())
    result["host"]["runtime"] = "codex"
    (run / "result.json").write_text(json.dumps(result))
    (run / "workspace" / "cell_001.py").write_text("print(robo.state())\n")
    (run / "tool_turns.json").write_text(json.dumps([
        {"index": 0, "tool": "python", "elapsed_s": 1.5, "ok": True, "moved": False, "env_steps": 0,
         "terminated": False, "sandbox_flags": []},
        {"index": 1, "tool": "finish", "elapsed_s": 0.0, "ok": True, "moved": False, "env_steps": 0,
         "terminated": False, "sandbox_flags": []}]))
    (run / "calls.jsonl").write_text(json.dumps({"index": 0, "tool": "view_env_state", "kwargs": {}, "ok": True,
                                                 "env_steps": 0, "elapsed_s": 0.01, "summary": {"step": 0}}) + "\n")
    events = [{"type": "item.completed", "item": {"type": "reasoning", "text": "Check the state first."}},
              {"type": "item.completed", "item": {"type": "mcp_tool_call", "tool": "python",
                                                  "arguments": {"code": "print(robo.state())"},
                                                  "result": {"content": [{"type": "text", "text": "State(step=0)"},
                                                                         {"type": "image", "mimeType": "image/png",
                                                                          "data": "iVBORw0KGgo="}]}}},
              {"type": "item.completed", "item": {"type": "shell", "command": "ls"}},
              {"type": "item.completed", "item": {"type": "mcp_tool_call", "tool": "finish",
                                                  "arguments": {"status": "stuck", "summary": "s"}}},
              {"type": "item.completed", "item": {"type": "agent_message", "text": "I stop here."}}]
    (run / "codex_events.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\nnot json\n")
    return run


def test_a_reference_layout_run_directory_renders(tmp_path):
    run = _reference_run(tmp_path)
    view = load_episode(run)
    assert view.runtime == "codex" and [t.tool for t in view.turns] == ["python", "finish"]
    assert view.turns[0].exchange.reasoning == "Check the state first."
    assert view.turns[0].code_file == "workspace/cell_001.py"
    assert view.turns[0].exchange.images[0].data_uri == "data:image/png;base64,iVBORw0KGgo="
    assert len(view.unplaced_calls) == 1 and view.final_message == "I stop here."
    assert any("codex_events.jsonl: 1 line(s)" in p for p in view.problems)
    text = viewer.write_view(run).read_text()
    assert "robo calls not placed in a turn (1)" in text and "Check the state first." in text


def test_hostile_records_are_escaped_and_never_followed(tmp_path):
    run = _reference_run(tmp_path)
    (run / "transcript.json").write_text(json.dumps([
        {"role": "user", "content": [{"type": "text", "text": "prompt"},
                                     {"type": "image_url", "image_url": {"url": "https://evil.example/a.png"}}]},
        {"role": "assistant", "content": "</pre><script>alert(1)</script>", "reasoning_content": "<img src=x>",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "python", "arguments": json.dumps({"code": "x = '</pre><b>'"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "<a href='javascript:alert(1)'>x</a>"},
        {"role": "user", "content": [{"type": "text", "text": "Images attached to the result of the python call c1:"},
                                     {"type": "image_url", "image_url": {"url": "data:text/html;base64,PGI+"}}]}]))
    (run / "prompt.txt").symlink_to("/etc/hostname")
    (run / "card.json").write_text(json.dumps({"images": {"agentview": "../../../etc/passwd"}}))
    page = viewer.write_view(run)
    text = page.read_text()
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<img src=x>" not in text and "&lt;img src=x&gt;" in text
    assert "evil.example" not in text and "data:text/html" not in text               # images not embedded
    assert "/etc/hostname" not in text and text.count("<script>") == 1              # only the page's own
    assert broken_links(text, page) == ([], [])                                     # no javascript: link either
