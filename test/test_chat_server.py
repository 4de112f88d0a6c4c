"""The scripted chat-completions test server speaks real HTTP on 127.0.0.1 (checked with urllib, no openai client)."""

import http.client
import json
import urllib.error
import urllib.request

import pytest

from pyrua_ros.testing.chat_server import ChatServer, Drop, HttpError, Reply

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


def post(server, body, path="/v1/chat/completions"):
    request = urllib.request.Request(server.base_url.removesuffix("/v1") + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, json.loads(response.read())


def test_replays_script_records_bodies_and_serves_models():
    script = [Reply(content=None, reasoning_content="hmm", tool_calls=(("python", {"code": "1"}), ("finish", "{bad")),
                    cached_tokens=7, reasoning_tokens=3),
              HttpError(503, retry_after=2)]
    with ChatServer(script, model="m1") as server:
        status, data = post(server, {"model": "m1", "messages": [{"role": "user", "content": "hi"}], "top_k": 20})
        with pytest.raises(urllib.error.HTTPError) as info:
            post(server, {"model": "m1", "messages": []})
        with pytest.raises(urllib.error.HTTPError) as exhausted:
            post(server, {"model": "m1", "messages": []})
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as response:
            models = json.loads(response.read())
        bodies = server.completion_bodies()
    assert status == 200
    message = data["choices"][0]["message"]
    assert message["reasoning_content"] == "hmm" and data["choices"][0]["finish_reason"] == "tool_calls"
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"code": "1"}', "{bad"]
    assert data["usage"]["prompt_tokens_details"] == {"cached_tokens": 7}
    assert data["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
    assert info.value.code == 503 and info.value.headers["Retry-After"] == "2"
    assert exhausted.value.code == 500 and "script exhausted after 2 step(s)" in exhausted.value.read().decode()
    assert models["data"][0]["id"] == "m1"
    assert bodies[0]["top_k"] == 20 and len(bodies) == 3


def test_drop_closes_the_connection_and_context_limit_answers_400():
    with ChatServer([Drop(), Reply(content="ok")], context_limit=100) as server:
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
            post(server, {"messages": [{"role": "user", "content": "short"}]})
        with pytest.raises(urllib.error.HTTPError) as info:
            post(server, {"messages": [{"role": "user", "content": "x" * 600}], "max_tokens": 10})
        assert info.value.code == 400 and "maximum context length is 100 tokens" in info.value.read().decode()
        assert post(server, {"messages": [{"role": "user", "content": "short"}]})[1]["choices"][0]["message"][
            "content"] == "ok"                                    # the 400 did not consume a step
        assert [r.outcome for r in server.requests] == ["dropped", "400 context length", "reply"]
