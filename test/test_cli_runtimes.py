"""The ``codex`` and ``claude`` runtimes end to end: the real pinned CLIs (installed from npm by setup), the
episode's real MCP server, the kinematic fake arm, and a scripted model server on loopback speaking the API each
CLI uses (Responses for Codex, Messages for Claude Code).

Every CLI runs with its proxy variables pointing at a :class:`ProxyTrap`, which records any attempt to reach
anything off loopback: each test asserts it saw none, and that the scripted server saw every model request.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from pyrua_ros.reports.episode_view import load_episode
from pyrua_ros.testing.messages_server import MessagesServer
from pyrua_ros.testing.proxy_trap import ProxyTrap
from pyrua_ros.testing.responses_server import ResponsesServer
from pyrua_ros.testing.scripted_model import Turn

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "pyrua_ros.cli.main"]
EPISODE = ["--suite", "fake_table", "--task", "0", "--driver", "fake", "--no-video", "--no-record"]
PROGRAM = (ROOT / "pyrua_ros" / "examples" / "fake_table_cube_on_plate.py").read_text()
PNG_1PX = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLv"
                           "AAAAAElFTkSuQmCC")


def play(out: pathlib.Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "play", "--out", str(out), *EPISODE, "--progress", "off", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)


def group_alive(pgid: int) -> bool:
    """True while any process of process group ``pgid`` exists (zombies included)."""
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            return True
    return False


def test_codex_runs_a_cells_episode_through_the_mcp_server(tmp_path):
    """Also the CLI's sandbox: its shell writes a module into the workspace that the next cell imports, and it
    cannot read a host file outside its view (world-readable, so only the view keeps it out) nor the host's
    names (/etc/hostname, /root)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret-7f3a")
    secret.chmod(0o644)
    picture = tmp_path / "secret.png"   # Codex's view_image once read outside even Codex's own sandbox
    picture.write_bytes(PNG_1PX)
    out = tmp_path / "run"   # (its CODEX_HOME, 16 MiB like the workspace, is filled to ENOSPC, then emptied)
    shell = (f"cat {secret}; cat /etc/hostname; ls /root; printf 'def answer():\\n    return 42\\n' > helper_mod.py; "
             f"head -c 32M /dev/zero > {out}/codex_home/fill; ls -s {out}/codex_home/fill; rm {out}/codex_home/fill; "
             "echo wrote")
    script = [
        Turn(calls=(("python", {"code": "s = robo.state()\nprint(s.step, s.gripper_opening)"}),),
             reasoning="Look before moving.", usage={"input": 5000, "cached": 1000, "output": 200, "reasoning": 50}),
        Turn(calls=(("exec_command", {"cmd": shell}), ("view_image", {"path": str(picture)}))),
        Turn(calls=(("python", {"code": "import helper_mod\nprint('helper says', helper_mod.answer())\n"
                                        + PROGRAM + "\nrun(robo)"}),), usage={"input": 7000, "output": 300}),
        Turn(calls=(("finish", {"status": "success", "summary": "the cube is on the plate"}),)),
        Turn(text="Done: the cube is on the plate."),
    ]
    with ResponsesServer(script) as server, ProxyTrap() as trap:
        env = dict(os.environ, SCRIPTED_KEY="sk-scripted-secret")
        proc = play(out, "--workspace-mib", "16", "--arm", "cells", "--runtime", "codex", "--base-url",
                    server.base_url, "--model", "scripted-coder", "--api-key-env", "SCRIPTED_KEY", "--reasoning",
                    "high", "--cli-proxy", trap.url, env=env)
        checks = [r for r in server.requests if r.method == "GET"]
        requests = [r for r in server.requests if r.method == "POST"]
        reported = server.reported_usage()
        outputs = server.call_outputs()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert trap.attempts == [], trap.attempts                 # nothing but loopback
    shell_output = [item for r in requests for item in r.body.get("input") or []
                    if item.get("type") == "function_call_output" and "wrote" in json.dumps(item)]
    assert shell_output and "No such file or directory" in json.dumps(shell_output[0]), shell_output
    assert "No space left on device" in json.dumps(shell_output[0]), shell_output
    assert not any("host-secret-7f3a" in json.dumps(r.body) for r in requests)      # never reached the model
    viewed = [item for r in requests for item in r.body.get("input") or []
              if item.get("type") == "function_call_output" and "secret.png" in json.dumps(item)]
    assert viewed and "input_image" not in json.dumps(viewed), viewed
    assert [r.outcome for r in checks] == ["models"]           # the check before boot: one GET of /v1/models
    assert server.steps_used == len(script) and all(r.main and r.outcome == "turn" for r in requests)
    first = requests[0]
    assert first.headers["authorization"] == "Bearer sk-scripted-secret"
    assert first.body["model"] == "scripted-coder" and first.body["reasoning"]["effort"] == "high"
    user_parts = [p for item in first.body["input"] if item.get("role") == "user" for p in item["content"]]
    assert sum(p["type"] == "input_image" for p in user_parts) == 2           # the card images
    assert any("# Task card" in p.get("text", "") for p in user_parts)
    moving = [o for o in outputs if isinstance(o["output"], list)
              and any(p.get("type") == "input_image" for p in o["output"])]
    assert len(moving) == 1                                                 # on-motion images after the move

    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["environment_success"] is True
    assert result["finish"]["status"] == "success" and result["tool_turns"] == 3
    assert any("codex CLI ran in bubblewrap" in n and "shared with the kernel" in n
               and "RLIMIT_CPU 1800 s, RLIMIT_AS 4096 MiB" in n for n in result["notes"])   # (and ran in that bound)
    assert result["reasoning_effort"] == "high" and result["codex_returncode"] == 0
    generation = result["generation"]
    assert generation["runtime"] == "codex" and generation["usage_source"] == "codex_events"
    assert generation["input_tokens"] == reported["input"] and generation["output_tokens"] == reported["output"]
    assert generation["cached_input_tokens"] == 1000 and generation["reasoning_output_tokens"] == 50
    assert generation["total_tokens"] == reported["input"] + reported["output"]
    assert generation["requests"] == len(script) and generation["tool_calls"] == {"python": 2, "finish": 1}
    assert (out / "last_message.md").read_text().strip() == "Done: the cube is on the plate."
    turns = json.loads((out / "tool_turns.json").read_text())
    assert [t["tool"] for t in turns] == ["python", "python", "finish"]
    assert turns[1]["ok"] and "helper says 42" in json.dumps(outputs)   # the CLI's module, imported by a cell
    assert (out / "workspace" / "cell_002.py").is_file() and (out / "workspace" / "helper_mod.py").is_file()
    events = [json.loads(line) for line in (out / "codex_events.jsonl").read_text().splitlines()]
    assert sum(e.get("item", {}).get("type") == "mcp_tool_call" and e["type"] == "item.completed" for e in events) == 3
    assert (out / "codex_home" / "config.toml").is_file()
    view = load_episode(out)   # the episode viewer reads the turns back from the events
    assert [t.tool for t in view.turns] == ["python", "python", "finish"] and view.runtime == "codex"
    assert view.turns[0].exchange.reasoning == "Look before moving." and "gripper_opening" in view.turns[0].code
    assert "step" in view.turns[0].exchange.result and len(view.turns[1].exchange.images) == 2
    # the MCP server demanded its per-run token (401 otherwise); Codex read it from the variable the argv names
    start = next(e for e in events if e["type"] == "pyrua.start")
    assert 'mcp_servers.pyrualean.bearer_token_env_var="PYRUALEAN_MCP_TOKEN"' in start["argv"]
    for path in out.rglob("*"):   # the key travelled in the environment only
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".md", ".toml"):
            assert "sk-scripted-secret" not in path.read_text(errors="replace"), path


def _results(body: dict) -> list[tuple[str, dict, dict]]:
    """(tool, arguments, result JSON) of every tool call in a Messages request, in the order the results came."""
    calls = {block["id"]: (block["name"].rsplit("__", 1)[-1], block.get("input") or {})
             for message in body["messages"] if message["role"] == "assistant" and isinstance(message["content"], list)
             for block in message["content"] if block.get("type") == "tool_use" and block["name"].startswith("mcp__")}
    found = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block["tool_use_id"] in calls:
                text = block["content"][0]["text"] if isinstance(block["content"], list) else block["content"]
                found.append((*calls[block["tool_use_id"]], json.loads(text)))
    return found


def _seen(body: dict, prompt: str) -> list[float]:
    """world_xyz of the segment call for ``prompt``, read from the tool results the CLI sent. Matched by the call's
    arguments, as a model reads them: Claude Code runs the two segment calls of one turn concurrently, so which
    one the host numbered first varies."""
    for tool, arguments, result in _results(body):
        if tool == "segment" and arguments.get("prompt") == prompt and result["value"]["found"]:
            return result["value"]["world_xyz"]
    raise AssertionError(f"no segment result for {prompt!r}")


def _move(target: str, dz: float, gripper: float):
    def turn(body: dict) -> Turn:
        x, y, z = _seen(body, target)
        if target == "the plate":
            z = _seen(body, "the red cube")[2]
        return Turn(calls=(("move_to", {"xyz": [x, y, z + dz], "gripper": gripper}),))
    return turn


def test_claude_code_solves_a_tools_arm_episode_one_primitive_per_call(tmp_path):
    """Also the CLI's sandbox: its Read tool cannot reach a host file outside its view (world-readable, so only
    the view keeps it out) nor /etc/hostname."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret-7f3a")
    secret.chmod(0o644)
    script = [
        Turn(calls=(("Read", {"file_path": str(secret)}), ("Read", {"file_path": "/etc/hostname"}))),
        Turn(calls=(("segment", {"prompt": "the red cube"}), ("segment", {"prompt": "the plate"})),
             reasoning="Find both objects.", usage={"input": 4000, "cached": 500, "output": 120}),
        _move("the red cube", 0.10, -1.0),
        _move("the red cube", 0.0, -1.0),
        Turn(calls=(("set_gripper", {"gripper": 1.0, "steps": 8}),)),
        _move("the red cube", 0.10, 1.0),
        _move("the plate", 0.10, 1.0),
        Turn(calls=(("release", {"max_steps": 20}),)),
        Turn(calls=(("finish", {"status": "success", "summary": "released over the plate"}),)),
        Turn(text="The cube is on the plate."),
    ]
    out = tmp_path / "run"
    with MessagesServer(script) as server, ProxyTrap() as trap:
        proc = play(out, "--arm", "tools", "--runtime", "claude", "--base-url", server.base_url + "/v1", "--model",
                    "scripted-claude", "--reasoning", "none", "--max-turns", "20", "--cli-proxy", trap.url)
        main = server.main_requests()
        reported = server.reported_usage()
        side = [r for r in server.requests if not r.main and r.method == "POST"]
        tool_results = server.tool_results()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert trap.attempts == [], trap.attempts
    assert not any("host-secret-7f3a" in json.dumps(r.body) for r in server.requests)   # never reached the model
    reads = [block for message in main[1].body["messages"] if isinstance(message["content"], list)
             for block in message["content"] if block.get("type") == "tool_result"]
    assert len(reads) == 2 and all(block.get("is_error") for block in reads), reads
    assert server.steps_used == len(script) and all(r.outcome == "turn" for r in main)
    assert all(r.outcome == "side" for r in side)
    tools = {t["name"] for t in main[0].body["tools"]}
    assert {"mcp__pyrualean__move_to", "mcp__pyrualean__segment", "mcp__pyrualean__finish"} <= tools
    assert not {"Bash", "Edit", "Write", "WebFetch"} & tools                  # only Read/Glob/Grep built in
    assert main[0].body["model"] == "scripted-claude" and "thinking" not in main[0].body   # --reasoning none
    first_user = main[0].body["messages"][0]["content"]
    assert sum(block.get("type") == "image" for block in first_user) == 2

    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["environment_success"] is True, result["reason"]
    assert result["arm"] == "tools" and result["claude_returncode"] == 0
    turns = json.loads((out / "tool_turns.json").read_text())
    assert [t["tool"] for t in turns] == ["segment", "segment", "move_to", "move_to", "set_gripper", "move_to",
                                         "move_to", "release", "finish"]
    generation = result["generation"]
    assert generation["usage_source"] == "result+stream" and generation["requests"] == len(script)
    # Claude Code's totals count cached prompt tokens as input (the reference's convention).
    assert generation["input_tokens"] == reported["input"] + reported["cached"]
    assert generation["cached_input_tokens"] == reported["cached"] == 500
    assert generation["output_tokens"] == reported["output"]
    assert generation["max_turns"] == 25 and generation["tool_requests"] == [2, 2, 3, 4, 5, 6, 7, 8, 9]
    assert any("claude CLI ran in bubblewrap" in n and "of its own" in n
               and "RLIMIT_CPU 1800 s, RLIMIT_AS 4096 MiB" in n for n in result["notes"])   # (and ran in that bound)
    assert generation["init"]["mcp_servers"][0]["status"] == "connected"   # with the server's bearer token
    start = json.loads((out / "claude_events.jsonl").read_text().splitlines()[0])
    mcp_config = json.loads(start["argv"][start["argv"].index("--mcp-config") + 1])
    assert mcp_config["mcpServers"]["pyrualean"]["headers"] == {"Authorization": "Bearer ${PYRUALEAN_MCP_TOKEN}"}
    assert result["host"]["claude_cli"].endswith("claude")
    assert (out / "last_message.md").read_text().strip() == "The cube is on the plate."
    assert not (out / "workspace" / "cell_001.py").exists()                 # no code ran on the tools arm
    images = [block for result in tool_results if isinstance(result["content"], list)
              for block in result["content"] if block.get("type") == "image"]
    assert len(images) == 2 * 6                     # --images on-motion: both cameras after each motion call
    view = load_episode(out)   # the episode viewer reads the turns back from the events
    assert [t.tool for t in view.turns] == [t["tool"] for t in turns] and view.runtime == "claude"
    assert view.turns[0].exchange.reasoning == "Find both objects."
    assert view.turns[2].code.startswith("robo.move_to(xyz=")
    assert sum(len(t.exchange.images) for t in view.turns) == 2 * 6 and view.final_message.startswith("The cube")


@pytest.mark.parametrize("runtime", ["codex", "claude"])
def test_the_budget_kills_an_overrunning_cli_and_its_process_group(tmp_path, runtime):
    from pyrua_ros.agent.runtimes.cli_agent import CliSettings, DeadPort, find_cli

    server_cls = ResponsesServer if runtime == "codex" else MessagesServer
    # mcp_prefix="": any request offering tools is a scripted one (there is no MCP server, so no mcp__ tools)
    with server_cls([Turn(text="thinking for a long time", delay_s=120)], mcp_prefix="") as server, \
            ProxyTrap() as trap:
        dead_mcp = DeadPort()   # no MCP server: the CLI is stuck on the model long before it needs one
        settings = CliSettings(model="scripted", executable=find_cli(runtime, None), base_url=server.base_url,
                               proxy=trap.url, kill_grace_s=3.0)
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        if runtime == "codex":
            from pyrua_ros.agent.runtimes.codex_runtime import CodexRuntime as cls
            extra = {}
        else:
            from pyrua_ros.agent.runtimes.claude_runtime import ClaudeRuntime as cls
            extra = {"tool_names": ["python", "finish"]}
        rt = cls(settings, out_dir=tmp_path, workspace=workspace, events_path=tmp_path / "events.jsonl", **extra)
        started = time.monotonic()
        outcome = rt.run_episode("Say hello.", [], dead_mcp.url + "/mcp", started + 8.0, finished=lambda: False)
        elapsed = time.monotonic() - started
        dead_mcp.close()
        rt.close()
        reached = server.steps_used
    assert outcome.status == "timeout" and rt.stopped == "timeout" and rt.returncode is None
    assert reached == 1                             # the model request was in flight when the budget ran out
    assert elapsed < 8.0 + 3 * 3.0 + 5.0, elapsed
    pids = [e["pid"] for e in map(json.loads, (tmp_path / "events.jsonl").read_text().splitlines())
            if e.get("type") == "pyrua.started"]
    assert pids and not group_alive(pids[0])        # the CLI and everything it started are gone
    assert trap.attempts == []


def _settings(runtime: str):
    from pyrua_ros.agent.runtimes.cli_agent import CliSettings

    return CliSettings(model="m", executable=runtime, base_url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize("runtime", ["codex", "claude"])
def test_the_mcp_token_reaches_the_cli_in_its_environment_only(tmp_path, runtime):
    """The MCP server's bearer token goes in the CLI's environment; the argv (recorded in the events) names the
    variable only."""
    from pyrua_ros.agent.runtimes.claude_runtime import ClaudeRuntime
    from pyrua_ros.agent.runtimes.codex_runtime import CodexRuntime

    if runtime == "codex":
        rt = CodexRuntime(_settings(runtime), out_dir=tmp_path, workspace=tmp_path)
    else:
        rt = ClaudeRuntime(_settings(runtime), tool_names=["python"], out_dir=tmp_path, workspace=tmp_path)
    argv, env, stdin = rt.command("Say hello.", [], "http://127.0.0.1:9/mcp", "http://127.0.0.1:8", "tok-3f9a")
    assert env["PYRUALEAN_MCP_TOKEN"] == "tok-3f9a"
    assert not any("tok-3f9a" in arg for arg in argv) and b"tok-3f9a" not in stdin
    assert any("PYRUALEAN_MCP_TOKEN" in arg for arg in argv)
    if runtime == "codex":   # and kept from the shell commands Codex runs
        assert 'shell_environment_policy.exclude=["PYRUALEAN_MCP_TOKEN"]' in argv
    for path in tmp_path.rglob("*"):   # codex_home/config.toml, claude_config/
        assert not path.is_file() or b"tok-3f9a" not in path.read_bytes(), path


def test_codex_usage_of_a_killed_session_is_recovered_from_its_rollout(tmp_path):
    """No ``turn.completed`` (the CLI was killed): the rollout's last ``token_count`` gives the totals."""
    from pyrua_ros.agent.runtimes.codex_runtime import CodexRuntime

    rt = CodexRuntime(_settings("codex"), out_dir=tmp_path, workspace=tmp_path)
    rt.on_event({"type": "thread.started", "thread_id": "0abc"})
    rollout = tmp_path / "codex_home" / "sessions" / "2026" / "12" / "03" / "rollout-2026-12-03T10-00-00-0abc.jsonl"
    rollout.parent.mkdir(parents=True)
    lines = [{"type": "session_meta", "payload": {"id": "0abc"}}]
    for total_in, total_out in ((1000, 20), (2500, 45)):
        lines.append({"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": total_in, "cached_input_tokens": 100, "output_tokens": total_out,
                                  "reasoning_output_tokens": 5, "total_tokens": total_in + total_out},
            "last_token_usage": {"input_tokens": 1, "output_tokens": 1}}}})
    rollout.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    # the CLI's folder is the model's to write (its shell runs there): a FIFO, a link to an endless file and a
    # linked folder named like this run's rollouts are passed by, never read (a FIFO once held the host forever)
    rt.on_event({"type": "thread.started", "thread_id": "0def"})
    os.mkfifo(rollout.parent / "rollout-2026-12-03T10-00-01-0def.jsonl")
    (rollout.parent / "rollout-2026-12-03T10-00-02-0def.jsonl").symlink_to("/dev/zero")
    (tmp_path / "codex_home" / "sessions" / "loop").symlink_to(tmp_path)
    result = []
    reader = threading.Thread(target=lambda: result.append(rt.usage_totals()), daemon=True)
    reader.start()
    reader.join(20.0)
    assert result == [{"input_tokens": 2500, "cached_input_tokens": 100, "output_tokens": 45,
                       "reasoning_output_tokens": 5, "total_tokens": 2545, "requests": 2}]
    assert rt.audit()["usage_source"] == "codex_rollout"


def test_claude_usage_without_a_result_message_comes_from_the_stream(tmp_path):
    """One request = one message id (repeated per content block); prompt = input + cache read + cache creation."""
    from pyrua_ros.agent.runtimes.claude_runtime import ClaudeRuntime

    rt = ClaudeRuntime(_settings("claude"), tool_names=["python", "finish"], out_dir=tmp_path, workspace=tmp_path)
    usage = {"input_tokens": 100, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 10}
    for message_id, block in (("m1", {"type": "text", "text": "looking"}),
                              ("m1", {"type": "tool_use", "id": "t1", "name": "mcp__pyrualean__python"}),
                              ("m2", {"type": "tool_use", "id": "t2", "name": "mcp__pyrualean__finish"})):
        rt.on_event({"type": "assistant", "message": {"id": message_id, "content": [block], "usage": usage}})
    rt.on_event({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1",
                                                          "is_error": True}]}})
    assert rt.usage_totals() == {"input_tokens": 2020, "cached_input_tokens": 1800, "output_tokens": None,
                                 "reasoning_output_tokens": None, "total_tokens": None, "requests": 2,
                                 "usage_source": "stream"}
    audit = rt.audit()
    assert audit["tool_requests"] == [1, 2] and audit["tool_errors"] == 1 and audit["request_profile"] == [1010, 1010]
    assert rt.attempt_failed()   # no result message: the CLI did not end normally


RUNTIME_REFUSALS = [
    (["--runtime", "codex"], "--runtime codex needs --base-url on loopback"),
    (["--runtime", "claude", "--base-url", "https://api.example.com/v1"], "is not on loopback"),
    (["--runtime", "codex", "--base-url", "http://127.0.0.1:9/v1", "--cli-network", "elsewhere"],
     "--cli-network must be one of loopback, inherit"),
    (["--arm", "tools"], "--arm tools needs a model runtime"),
    (["--runtime", "codex", "--base-url", "http://127.0.0.1:9/v1", "--codex-bin", "/nonexistent/codex"],
     "--codex-bin: no codex executable found (/nonexistent/codex)"),
    (["--runtime", "claude", "--base-url", "http://127.0.0.1:9/v1", "--codex-bin", "/usr/bin/true"],
     "--codex-bin applies to --runtime codex only (got --runtime claude)"),
    (["--runtime", "codex", "--base-url", "http://127.0.0.1:9/v1", "--claude-cli", "/usr/bin/true"],
     "--claude-cli applies to --runtime claude only (got --runtime codex)"),
    (["--runtime", "openai", "--base-url", "http://127.0.0.1:9/v1", "--codex-bin", "/usr/bin/true"],
     "--codex-bin applies to --runtime codex only (got --runtime openai)"),
    (["--runtime", "claude", "--base-url", "http://127.0.0.1:9", "--api-key-env", "PYRUA_TEST_UNSET_KEY"],
     "--api-key-env names 'PYRUA_TEST_UNSET_KEY', but that environment variable is not set"),
]


@pytest.fixture(scope="module")
def runtime_refusals(tmp_path_factory):
    """Every row of :data:`RUNTIME_REFUSALS` run by the real CLI, all in one child: ``(call, out)`` each."""
    from pyrua_ros.testing.cli_calls import run_in_one_child

    base, argvs = tmp_path_factory.mktemp("refusals"), []
    for k, (args, _) in enumerate(RUNTIME_REFUSALS):
        argvs.append(["play", "--out", str(base / f"run{k}"), "--suite", "fake_table", "--task", "0", "--driver",
                      "fake", *([] if "--arm" in args else ["--arm", "cells"]), *args])
    calls = run_in_one_child(argvs, cwd=ROOT, timeout_s=60 + 5 * len(argvs))
    return [(call, base / f"run{k}") for k, call in enumerate(calls)]


@pytest.mark.parametrize("k", range(len(RUNTIME_REFUSALS)),
                         ids=[f"args{k}-{message}" for k, (_, message) in enumerate(RUNTIME_REFUSALS)])
def test_cli_runtime_settings_are_checked_before_anything_starts(runtime_refusals, k):
    call, out = runtime_refusals[k]
    assert call.code == 2 and RUNTIME_REFUSALS[k][1] in call.stderr, call.stderr
    assert not (out / "result.json").exists()


PROBE = r"""
import json, os, socket, sys
got = {}
for name, port in (("proxied", int(sys.argv[1])), ("other", int(sys.argv[2]))):
    try:
        with socket.create_connection(("localhost", port), timeout=5) as conn:
            got[name] = conn.recv(16).decode()
    except OSError as exc:
        got[name] = exc.errno
for path in ("/etc/hostname", "/etc/passwd", sys.argv[3]):
    got[path] = os.path.exists(path)
print(json.dumps(got))
"""


def test_the_cli_sandbox_reaches_only_its_proxied_loopback_ports(tmp_path):
    """The CLI's network namespace has only the ports it was given (the model server, the MCP server, the proxy),
    carried through the agent process; another server on this machine's loopback is refused, and nothing of
    /etc or the run directory's neighbours is in view. Run with the interpreter the forwarder uses."""
    import socket
    import threading

    from pyrua_ros.agent.runtimes.cli_sandbox import CliSandbox

    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]

    def answer(server: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                conn.sendall(b"hello")
                conn.close()

    for server in servers:
        threading.Thread(target=answer, args=(server,), daemon=True).start()
    proxied, other = (s.getsockname()[1] for s in servers)
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret-7f3a")
    (tmp_path / "workspace").mkdir()
    sandbox = CliSandbox(workspace=tmp_path / "workspace", shared=None, home=tmp_path / "home", own_home=True,
                         executable="/usr/bin/true", ports=[proxied])
    try:
        wrapped = sandbox.wrap([os.path.realpath(sys.executable), "-I", "-S", "-c", PROBE, str(proxied), str(other),
                                str(secret)])
        try:
            done = subprocess.run(wrapped.argv, pass_fds=wrapped.pass_fds, capture_output=True, text=True,
                                  timeout=60)
        finally:
            for fd in wrapped.owned:
                os.close(fd)
    finally:
        sandbox.close()
        for server in servers:
            server.close()
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got == {"proxied": "hello", "other": errno.ECONNREFUSED, "/etc/hostname": False, "/etc/passwd": False,
                   str(secret): False}, got


BOUND_PROBE = r"""
import json, resource, sys
got = {"as": resource.getrlimit(resource.RLIMIT_AS)[1], "cpu": resource.getrlimit(resource.RLIMIT_CPU)[1]}
try:
    block = bytearray(int(sys.argv[1]))
    got["alloc"] = "ok"
except MemoryError:
    got["alloc"] = "MemoryError"
try:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    got["raise"] = "raised"
except (ValueError, OSError) as exc:
    got["raise"] = type(exc).__name__
print(json.dumps(got), flush=True)
while True:   # past RLIMIT_CPU: the Linux kernel ends it
    pass
"""


def _run_in_cli_sandbox(sandbox, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    wrapped = sandbox.wrap(argv)
    try:
        return subprocess.run(wrapped.argv, pass_fds=wrapped.pass_fds, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        for fd in wrapped.owned:
            os.close(fd)


def test_the_cli_sandbox_bounds_memory_and_cpu_like_the_kernel(tmp_path):
    """A process in the CLI's sandbox (where Codex's view_image or Claude Code's Read decode an image) gets the
    kernel's RLIMIT_AS and RLIMIT_CPU, cannot raise them, fails to allocate past the bound and is ended past its
    CPU seconds; the bound is in the sandbox's line for result.json."""
    from pyrua_ros.agent.runtimes.cli_sandbox import CliSandbox
    from pyrua_ros.kernel.outcomes import KernelLimits

    (tmp_path / "workspace").mkdir()
    limits = KernelLimits(memory_bytes=256 * 2**20, cpu_s=1)
    sandbox = CliSandbox(workspace=tmp_path / "workspace", shared=None, home=tmp_path / "home", own_home=True,
                         executable="/usr/bin/true", ports=[], limits=limits)
    try:
        done = _run_in_cli_sandbox(sandbox, [os.path.realpath(sys.executable), "-I", "-S", "-c", BOUND_PROBE,
                                             str(512 * 2**20)])
        description = sandbox.description()
    finally:
        sandbox.close()
    got = json.loads(done.stdout.splitlines()[0])
    assert got == {"as": 256 * 2**20, "cpu": 1, "alloc": "MemoryError", "raise": "ValueError"}, got
    assert done.returncode != 0   # ended by SIGXCPU / SIGKILL, not by itself
    assert "RLIMIT_CPU 1 s, RLIMIT_AS 256 MiB" in description, description


FILL_PROBE = r"""
import errno, json, os, sys
home = sys.argv[1]
got = {"config": open(os.path.join(home, "config.toml")).read()}
with open(os.path.join(home, "kept.txt"), "w") as fh:
    fh.write("the CLI's own file")
chunks = 0
try:
    with open(os.path.join(home, "fill"), "wb") as fh:
        while chunks < 64:
            fh.write(b"x" * 2**20)
            fh.flush()
            chunks += 1
except OSError as exc:
    got["error"] = errno.errorcode[exc.errno]
got["chunks"] = chunks
print(json.dumps(got))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a detached tmpfs of its own needs root")
def test_the_cli_config_folder_is_a_bounded_tmpfs_copied_back(tmp_path):
    """The CLI's config folder (CODEX_HOME / CLAUDE_CONFIG_DIR) is a tmpfs of the workspace's size: the CLI sees what
    the host put there, writing past it is ENOSPC (never the run directory's disk), and what it wrote is copied
    back into the run directory's folder, bounded."""
    from pyrua_ros.agent.runtimes.cli_sandbox import CliSandbox
    from pyrua_ros.kernel.outcomes import KernelLimits

    (tmp_path / "workspace").mkdir()
    home = tmp_path / "codex_home"
    home.mkdir()
    (home / "config.toml").write_text("model = 'm'\n")
    sandbox = CliSandbox(workspace=tmp_path / "workspace", shared=None, home=home, own_home=True,
                         executable="/usr/bin/true", ports=[], limits=KernelLimits(workspace_bytes=8 * 2**20))
    try:
        done = _run_in_cli_sandbox(sandbox, [os.path.realpath(sys.executable), "-I", "-S", "-c", FILL_PROBE,
                                             str(home)])
        description = sandbox.description()
    finally:
        sandbox.close()
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["config"] == "model = 'm'\n" and got["error"] == "ENOSPC" and got["chunks"] < 8, got
    assert (home / "kept.txt").read_text() == "the CLI's own file"            # copied back
    assert (home / "fill").stat().st_size <= 8 * 2**20 and sandbox.notes == []
    assert "its config folder (8 MiB tmpfs, at most 4096 files)" in description, description


SEED_PROBE = r"""
import json, os, sys
home, user = sys.argv[1], sys.argv[2]
got = {}
for name in ("config.toml", "auth.json", "sessions/rollout-old.jsonl"):
    try:
        got[name] = open(os.path.join(home, name)).read()
    except OSError as exc:
        got[name] = exc.strerror
got["user folder"] = os.path.exists(user)
for name, text in (("config.toml", "planted = true\n"), ("new.txt", "the CLI's own file")):
    try:
        with open(os.path.join(home, name), "w") as fh:
            fh.write(text)
    except OSError as exc:
        got[f"write {name}"] = exc.strerror
print(json.dumps(got))
"""


def test_a_users_codex_home_gives_the_cli_its_config_and_auth_only(tmp_path):
    """``--codex-home``: inside the sandbox the CLI's CODEX_HOME holds that folder's config.toml and auth.json
    (readable by the sandbox's uid; before, the folder was bound as it was, root's 0600 auth.json unreadable), and
    nothing else of it (no earlier sessions, not the folder itself); what the CLI writes never reaches the user's
    folder, and the user's files are not copied into the run directory."""
    from pyrua_ros.agent.runtimes.cli_sandbox import CliSandbox

    user = tmp_path / "user_codex"
    (user / "sessions").mkdir(parents=True)
    (user / "config.toml").write_text("model = 'the-users'\n")
    (user / "auth.json").write_text('{"OPENAI_API_KEY": "sk-user-3c1d"}')
    (user / "auth.json").chmod(0o600)
    (user / "sessions" / "rollout-old.jsonl").write_text("the user's earlier session")
    (tmp_path / "workspace").mkdir()
    home = tmp_path / "run" / "codex_home"
    sandbox = CliSandbox(workspace=tmp_path / "workspace", shared=None, home=home, own_home=True,
                         executable="/usr/bin/true", ports=[], seed=user)
    try:
        done = _run_in_cli_sandbox(sandbox, [os.path.realpath(sys.executable), "-I", "-S", "-c", SEED_PROBE,
                                             str(home), str(user)])
        description = sandbox.description()
    finally:
        sandbox.close()
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["config.toml"] == "model = 'the-users'\n" and got["auth.json"] == '{"OPENAI_API_KEY": "sk-user-3c1d"}'
    assert got["sessions/rollout-old.jsonl"] == "No such file or directory" and got["user folder"] is False, got
    assert (user / "config.toml").read_text() == "model = 'the-users'\n"        # the user's folder is untouched
    assert sorted(p.name for p in user.rglob("*")) == ["auth.json", "config.toml", "rollout-old.jsonl", "sessions"]
    if os.geteuid() == 0:   # (the tmpfs is copied back, the user's files left out)
        assert (home / "new.txt").read_text() == "the CLI's own file" and not (home / "auth.json").exists()
        assert not (home / "config.toml").exists() and sandbox.notes == []
    assert f"config.toml and auth.json of {user}" in description, description


def test_the_real_codex_reads_a_users_codex_home_inside_its_sandbox(tmp_path):
    """The pinned Codex, sandboxed with ``--codex-home``: the user's config.toml reaches it (its
    developer_instructions are in the model request), and nothing is written into the user's folder."""
    from pyrua_ros.agent.runtimes.cli_agent import CliSettings, DeadPort, find_cli
    from pyrua_ros.agent.runtimes.codex_runtime import CONFIG_TOML, CodexRuntime

    user = tmp_path / "user_codex"
    user.mkdir()   # (a user's folder made for this: with the clean one's settings, no update check, no analytics)
    (user / "config.toml").write_text('developer_instructions = "USER-CONFIG-7e2b"\n' + CONFIG_TOML)
    (user / "auth.json").write_text('{"OPENAI_API_KEY": "sk-user-file-5d0e"}')
    (user / "auth.json").chmod(0o600)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in user.iterdir())
    with ResponsesServer([Turn(text="hello")], mcp_prefix="") as server, ProxyTrap() as trap:
        dead_mcp = DeadPort()
        settings = CliSettings(model="scripted", executable=find_cli("codex", None), base_url=server.base_url,
                               proxy=trap.url, home=user, attempts=1, kill_grace_s=3.0)
        (tmp_path / "workspace").mkdir()
        rt = CodexRuntime(settings, out_dir=tmp_path / "run", workspace=tmp_path / "workspace",
                          events_path=tmp_path / "events.jsonl")
        outcome = rt.run_episode("Say hello.", [], dead_mcp.url + "/mcp", time.monotonic() + 60.0,
                                 finished=lambda: False)
        dead_mcp.close()
        rt.close()
        requests = [r for r in server.requests if r.method == "POST"]
    assert requests and "USER-CONFIG-7e2b" in json.dumps(requests[0].body), outcome
    assert rt.last_message == "hello" and trap.attempts == []
    assert sorted((p.name, p.stat().st_mtime_ns) for p in user.iterdir()) == before
    assert not (tmp_path / "run" / "codex_home" / "auth.json").exists()
