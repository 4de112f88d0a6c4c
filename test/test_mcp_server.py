"""``pyrua-ros mcp`` driven by the official MCP SDK's own client, over stdio and streamable HTTP.

Each test boots one episode on the kinematic fake arm (real driver node, real kernel, real run directory) and
talks to it only through MCP: the tool list with its annotations, a ``python`` call, an image content block,
``isError`` for refusals, prefixed tool names, and a client that disconnects while its call is still running.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import anyio
import pytest

from pyrua_ros.testing import spin_until

ROOT = pathlib.Path(__file__).resolve().parent.parent
EPISODE = ["--suite", "fake_table", "--task", "0", "--driver", "fake", "--no-video", "--no-record"]
PNG = b"\x89PNG\r\n\x1a\n"
# The same wrong argument, as a cell and as a tools-arm call, gets the same text.
WRONG_ARGUMENT = "TypeError: LiberoRobot.move_to() got an unexpected keyword argument 'speed'"


def _raw_status(url: str, headers: dict) -> int:
    """The HTTP status of one MCP ``ping`` POSTed to ``url`` with extra ``headers``."""
    import urllib.error
    import urllib.request

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _payload(result) -> dict:
    return json.loads(result.content[0].text)


def test_stdio_server_lists_the_arms_tools_and_runs_cells(tmp_path):
    from mcp import Client, StdioServerParameters  # here, not at the top: the SDK takes a second to import

    out = tmp_path / "run"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pyrua_ros.cli.main", "mcp", "--arm", "cells", "--out", str(out), *EPISODE,
              "--images", "on-demand", "--feedback", "pure", "--max-turns", "4"],
        env={k: v for k, v in os.environ.items() if k.startswith(("ROS_", "PYRUA_", "PATH", "HOME", "LD_"))},
        cwd=str(ROOT))

    async def session() -> dict:
        seen: dict = {}
        async with Client(params, read_timeout_seconds=120) as client:
            listing = await client.list_tools()
            seen["tools"] = {t.name: t for t in listing.tools}
            seen["cell"] = await client.call_tool("python", {"code": "s = robo.state()\nprint(s.step)\ns.step"})
            seen["image"] = await client.call_tool("mcp__pyrualean__python", {"code": "robo.show('wrist')"})
            seen["missing_code"] = await client.call_tool("python", {})
            seen["unknown"] = await client.call_tool("move_to", {"xyz": [0, 0, 1]})
            seen["raises"] = await client.call_tool("python", {"code": "robo.move_to([5.0, 0.0, 1.0])"})
            seen["wrong"] = await client.call_tool("python", {"code": "robo.move_to([0.0, 0.0, 1.0], speed=3)"})
            seen["over_budget"] = await client.call_tool("python", {"code": "print(1)"})
            seen["finish"] = await client.call_tool("finish", {"status": "stuck", "summary": "test over"})
        return seen

    seen = anyio.run(session)
    tools = seen["tools"]
    assert list(tools) == ["python", "finish"]
    for tool in tools.values():
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert tool.annotations.open_world_hint is False
    assert tools["python"].input_schema["required"] == ["code"]
    assert tools["finish"].input_schema["properties"]["status"]["enum"] == ["success", "failure", "stuck"]

    cell = _payload(seen["cell"])
    assert seen["cell"].is_error is False and cell["stdout"] == "0\n" and cell["value"] == "0"
    image = seen["image"]
    assert [c.type for c in image.content] == ["text", "image"] and image.content[1].mime_type == "image/png"
    assert base64.b64decode(image.content[1].data).startswith(PNG)
    assert _payload(image)["images"] == ["wrist_high.png"]
    assert seen["missing_code"].is_error is True and "python needs a string argument `code`" in \
        _payload(seen["missing_code"])["error"]
    assert seen["unknown"].is_error is True and "unknown tool: move_to" in _payload(seen["unknown"])["error"]
    raised = _payload(seen["raises"])   # a cell that raises is a result, not a refusal
    assert seen["raises"].is_error is False and "ValueError: planar move" in raised["exception"]
    assert _payload(seen["wrong"])["exception"].rstrip().splitlines()[-1] == WRONG_ARGUMENT
    assert seen["over_budget"].is_error is True and "call budget exhausted" in _payload(seen["over_budget"])["error"]
    assert _payload(seen["finish"])["ok"] is True

    # The client closed stdin; the server ended the episode and wrote the run directory.
    assert spin_until(lambda: (out / "result.json").is_file() and "created_at" in (out / "result.json").read_text()
                      and json.loads((out / "result.json").read_text())["status"] != "error", 60)
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "call_budget" and result["host"]["runtime"] == "mcp"
    assert result["finish"]["status"] == "stuck" and result["model"] is None
    turns = json.loads((out / "tool_turns.json").read_text())
    assert [t["tool"] for t in turns] == ["python", "python", "python", "move_to", "python", "python", "python",
                                         "finish"]
    assert (out / "workspace" / "cell_003.py").read_text() == "robo.move_to([5.0, 0.0, 1.0])"


def _http_server(out: pathlib.Path, *extra: str) -> tuple[subprocess.Popen, str, str]:
    """``pyrua-ros mcp --transport http`` started; its process, URL and bearer token (from its stderr line)."""
    proc = subprocess.Popen([sys.executable, "-m", "pyrua_ros.cli.main", "mcp", "--transport", "http", "--out",
                             str(out), *EPISODE, *extra], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        if line.startswith('{"mcp_url"'):
            announced = json.loads(line)
            # the rest of stderr is drained, so that a full pipe can never stall the server; kept for messages
            proc.stderr_tail = collections.deque(maxlen=200)
            threading.Thread(target=proc.stderr_tail.extend, args=(proc.stderr,), daemon=True).start()
            return proc, announced["mcp_url"], announced["mcp_token"]
    proc.kill()
    raise AssertionError(f"the MCP HTTP server did not report its URL (exit {proc.poll()})")


def test_http_server_survives_a_client_that_disconnects_mid_call(tmp_path):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    out = tmp_path / "run"
    proc, url, token = _http_server(out, "--arm", "tools", "--images", "on-motion")
    bearer = {"Authorization": f"Bearer {token}"}

    @contextlib.asynccontextmanager
    async def authorized(**kwargs):
        """An MCP client that sends the token (as a client given the stderr line would)."""
        async with create_mcp_http_client(headers=bearer) as http, \
                Client(streamable_http_client(url, http_client=http), **kwargs) as client:
            yield client

    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert json.loads((out / "mcp.json").read_text())["url"] == url

        async def leave_mid_call() -> None:
            async with authorized() as client:
                with anyio.move_on_after(1.0):   # the call is still running when the client goes away
                    await client.call_tool("move_to", {"xyz": [-0.21, 0.0, 1.0], "max_steps": 150,
                                                       "step_clip": 0.004})

        async def second_client() -> tuple:
            async with authorized(read_timeout_seconds=120) as client:
                listing = await client.list_tools()
                state = await client.call_tool("state", {})
                bad = await client.call_tool("mcp__pyrualean__move_to", {"xyz": [0, 0, 1], "speed": 3})
                return listing, state, bad

        anyio.run(leave_mid_call)
        listing, state, bad = anyio.run(second_client)
        # only the holder of the per-run token is served: no token, or another one, gets 401
        assert _raw_status(url, {}) == 401
        assert _raw_status(url, {"Authorization": "Bearer not-the-token"}) == 401
        assert _raw_status(url, {"Authorization": token}) == 401
        assert _raw_status(url, bearer) == 200
        # DNS rebinding: a page of another site, or a request addressed to another name, is refused
        assert _raw_status(url, {"Host": "rebound.example:80", **bearer}) == 421
        assert _raw_status(url, {"Origin": "http://rebound.example", **bearer}) == 403
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)   # the CLI prints every thread's stack: what it is waiting on
            time.sleep(2.0)
            raise AssertionError("the server did not end within 60 s of SIGINT; its stderr ended:\n"
                                 + "".join(proc.stderr_tail)) from None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    names = [t.name for t in listing.tools]
    assert names[:2] == ["state", "show"] and names[-1] == "finish" and "move_to" in names
    assert "image" not in names and "pi0_pick" not in names   # pixels via --images; no VLA server
    move = next(t for t in listing.tools if t.name == "move_to")
    assert move.input_schema["required"] == ["xyz"] and move.input_schema["properties"]["tol"]["default"] == 0.012
    # The abandoned move ran to its end before the next call was served: the state shows where it went.
    value = _payload(state)["value"]
    assert value["type"] == "State" and abs(value["eef_pos"][2] - 1.0) < 0.02, value["eef_pos"]
    assert bad.is_error is False and _payload(bad)["exception"] == WRONG_ARGUMENT
    assert proc.returncode == 130   # stopped before the client called finish: interrupted, in no rate
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "interrupted" and result["reason"] == "interrupted"
    assert result["environment_success"] is False
    turns = json.loads((out / "tool_turns.json").read_text())
    assert [t["tool"] for t in turns] == ["move_to", "state", "move_to"] and turns[0]["moved"]
    for path in out.rglob("*"):   # the token was printed once and written nowhere
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("name, expected", [("mcp__pyrualean__python", "python"), ("python", "python"),
                                            ("mcp__other__finish", "finish"), ("plain__name", "plain__name")])
def test_prefixed_tool_names_reduce_to_the_tool(name, expected):
    from pyrua_ros.agent.loop.mcp_server import tool_name

    assert tool_name(name) == expected
