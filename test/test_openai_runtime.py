"""The openai chat-completions runtime against a real local HTTP server (pyrua_ros.testing.chat_server).

Every fault the runtime must survive (429, 5xx + Retry-After, dropped connection, slow response, malformed
body, context-length 400) is produced by the server over TCP; backoff is shrunk to milliseconds.
"""

import base64
import json
import struct
import time
import zlib

import pytest

from pyrua_ros.agent import runtimes
from pyrua_ros.agent.runtimes.base import JsonlEventSink, RuntimeFailure
from pyrua_ros.agent.runtimes.context import IMAGE_OMITTED, ContextWindow
from pyrua_ros.agent.runtimes.openai_runtime import OpenAIRuntime
from pyrua_ros.agent.runtimes.tools import tool_specs
from pyrua_ros.settings.model import ModelSettings
from pyrua_ros.settings.schema import parse_json_object
from pyrua_ros.testing.chat_server import ChatServer, Drop, HttpError, Malformed, Reply

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

TOOLS = tool_specs("cells", "pure", "on-demand")


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid tiny RGB PNG."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\x80" * 3 * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def call(code="print(1)"):
    return ("python", {"code": code})


class Sleeps(list):
    """Records every backoff delay, then sleeps it for real."""

    def __call__(self, seconds):
        self.append(seconds)
        time.sleep(seconds)


def make(server, sleeps=None, tools=TOOLS, **overrides):
    fields = {"model": "scripted-model", "base_url": server.base_url, "backoff_initial_s": 0.01,
              "backoff_max_s": 0.2, "request_timeout_s": 2.0, "max_retries": 3, **overrides}
    runtime = OpenAIRuntime(ModelSettings(**fields), tools, sleep=sleeps if sleeps is not None else time.sleep)
    return runtime


def deadline(seconds=20.0):
    return time.monotonic() + seconds


def test_request_carries_settings_verbatim_and_unset_fields_are_not_sent():
    extra = {"top_p": 0.95, "top_k": 20, "chat_template_kwargs": {"enable_thinking": True}}
    with ChatServer([Reply(tool_calls=(call(),)), Reply(content="x")]) as server:
        runtime = make(server, max_tokens=8192, tool_choice="required", temperature=1.0, extra_body=extra)
        runtime.start("the prompt", [png()])
        runtime.respond(deadline())
        bare = make(server)
        bare.start("p", [])
        bare.respond(deadline())
        body, bare_body = server.completion_bodies()
    assert body["model"] == "scripted-model"
    assert body["max_tokens"] == 8192 and body["tool_choice"] == "required" and body["temperature"] == 1.0
    for key, value in extra.items():
        assert body[key] == value
    assert [t["function"]["name"] for t in body["tools"]] == ["python", "finish"]
    assert body["tools"][0]["function"]["parameters"]["required"] == ["code"]
    first = body["messages"][0]
    assert first["role"] == "user"                  # no system prompt by default
    assert first["content"][0] == {"type": "text", "text": "the prompt"}
    url = first["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png()
    assert not {"max_tokens", "tool_choice", "temperature", "top_p"} & set(bare_body)
    assert bare_body["messages"] == [{"role": "user", "content": "p"}]


def test_system_prompt_is_optional_and_sent_first():
    with ChatServer([Reply(content="hi")]) as server:
        runtime = make(server, system_prompt="be brief")
        runtime.start("task", [])
        runtime.respond(deadline())
        body = server.completion_bodies()[0]
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][1]["role"] == "user"


def test_reasoning_content_is_kept_in_transcript_and_sent_back_and_usage_is_totalled():
    script = [Reply(reasoning_content="I should look first.", tool_calls=(call("robo.show('wrist')"),),
                    usage={"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300,
                           "prompt_tokens_details": {"cached_tokens": 0},
                           "completion_tokens_details": {"reasoning_tokens": 250}}),
              Reply(content="done", usage={"prompt_tokens": 1500, "completion_tokens": 20, "total_tokens": 1520,
                                           "prompt_tokens_details": {"cached_tokens": 1000}})]
    with ChatServer(script) as server:
        runtime = make(server)
        runtime.start("task", [])
        first = runtime.respond(deadline())
        runtime.add_tool_result(first.tool_calls[0].id, "python", '{"stdout": ""}', [])
        second = runtime.respond(deadline())
        sent_back = server.completion_bodies()[1]["messages"][1]
    assert first.reasoning == "I should look first."
    assert first.usage.reasoning_tokens == 250 and second.usage.cached_tokens == 1000
    assert sent_back["role"] == "assistant" and sent_back["reasoning_content"] == "I should look first."
    assert runtime.transcript()[1]["reasoning_content"] == "I should look first."
    assert runtime.usage_totals() == {"input_tokens": 2500, "cached_input_tokens": 1000, "output_tokens": 320,
                                      "reasoning_output_tokens": 250, "total_tokens": 2820, "requests": 2,
                                      "requests_without_usage": 0}
    assert [e["event"] for e in runtime.events if e["event"] == "response"] == ["response", "response"]


def test_several_tool_calls_are_answered_in_order_and_their_images_follow_in_one_user_message():
    script = [Reply(tool_calls=(call("a = 1"), ("finish", {"status": "stuck", "summary": "s"}))), Reply(content="ok")]
    with ChatServer(script) as server:
        runtime = make(server)
        runtime.start("task", [])
        response = runtime.respond(deadline())
        assert [c.name for c in response.tool_calls] == ["python", "finish"]
        assert response.tool_calls[1].arguments == {"status": "stuck", "summary": "s"}
        first, second = response.tool_calls
        runtime.add_tool_result(first.id, "python", "r1", [png(), png(3, 3)])
        with pytest.raises(ValueError, match="unanswered"):
            runtime.respond(deadline())
        runtime.add_tool_result(second.id, "finish", "r2", [png()])
        runtime.respond(deadline())
        messages = server.completion_bodies()[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[2] == {"role": "tool", "tool_call_id": first.id, "content": "r1"}
    assert messages[3]["tool_call_id"] == second.id
    parts = messages[4]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "text", "image_url"]
    assert first.id in parts[0]["text"] and second.id in parts[3]["text"]


def test_unknown_call_id_and_non_image_bytes_are_refused():
    with ChatServer([Reply(tool_calls=(call(),))]) as server:
        runtime = make(server)
        runtime.start("task", [])
        response = runtime.respond(deadline())
        with pytest.raises(ValueError, match="open calls"):
            runtime.add_tool_result("nope", "python", "x", [])
        with pytest.raises(ValueError, match="image/png, image/jpeg"):
            runtime.add_tool_result(response.tool_calls[0].id, "python", "x", [b"GIF89a..."])


def test_no_tool_call_is_a_response_with_content_only():
    with ChatServer([Reply(content="I think the task is done.")]) as server:
        runtime = make(server)
        runtime.start("task", [])
        response = runtime.respond(deadline())
    assert response.tool_calls == () and response.content == "I think the task is done."
    assert response.finish_reason == "stop"


def test_invalid_argument_json_sets_parse_error_and_history_stays_valid_json():
    script = [Reply(tool_calls=(("python", '{"code": "print(1)'), ("python", '["a list"]'), ("python", ""))),
              Reply(content="ok")]
    with ChatServer(script) as server:
        runtime = make(server)
        runtime.start("task", [])
        response = runtime.respond(deadline())
        broken, listed, empty = response.tool_calls
        assert broken.arguments is None and "not valid JSON" in broken.parse_error
        assert broken.raw_arguments == '{"code": "print(1)'
        assert listed.arguments is None and "must be a JSON object, got list" in listed.parse_error
        assert empty.arguments == {} and empty.parse_error is None
        for c in response.tool_calls:
            runtime.add_tool_result(c.id, "python", json.dumps({"error": c.parse_error or "missing code"}), [])
        runtime.respond(deadline())
        assistant = server.completion_bodies()[1]["messages"][1]
    arguments = [json.loads(tc["function"]["arguments"]) for tc in assistant["tool_calls"]]
    assert arguments[0] == {"invalid_arguments": '{"code": "print(1)'}


def test_arguments_nested_100000_deep_or_out_of_range_are_the_models_invalid_call_and_the_episode_goes_on():
    """Issue 27: arguments nested 100000 deep raised RecursionError out of the runtime; ``1e400`` parsed as
    infinity, which no record can hold as JSON. Each is the model's invalid call, answered like any other."""
    deep = '{"code": ' + "[" * 100_000 + "]" * 100_000 + "}"
    script = [Reply(tool_calls=(("python", deep), ("python", '{"code": "print(1)", "n": 1e400}'),
                                ("python", '{"code": NaN}'), ("python", '{"code": "print(2)"}'))),
              Reply(content="ok")]
    with ChatServer(script) as server:
        runtime = make(server)
        runtime.start("task", [])
        response = runtime.respond(deadline())
        nested, huge, nan, fine = response.tool_calls
        assert nested.arguments is None and nested.parse_error == (
            "the arguments are not usable JSON: nested more than 64 levels deep")
        assert huge.arguments is None and "the number 1e400 is out of range" in huge.parse_error
        assert nan.arguments is None and "NaN is not a JSON number" in nan.parse_error
        assert fine.arguments == {"code": "print(2)"} and fine.parse_error is None
        for c in response.tool_calls:
            runtime.add_tool_result(c.id, "python", json.dumps({"error": c.parse_error or "ran"}), [])
        assert runtime.respond(deadline()).content == "ok"
        sent = server.completion_bodies()[1]["messages"][1]
    echoed = json.loads(sent["tool_calls"][0]["function"]["arguments"])["invalid_arguments"]
    assert echoed == deep[:4000] + f"\n... [{len(deep) - 8000} chars omitted] ...\n" + deep[-4000:]


def test_qwen_xml_values_too_deep_or_out_of_range_stay_text():
    from pyrua_ros.agent.runtimes.qwen_xml import parse_xml_calls

    deep = "[" * 100_000 + "]" * 100_000
    text = (f"<tool_call><function=f><parameter=a>{deep}</parameter><parameter=b>1e400</parameter>"
            "<parameter=c>[1, 2]</parameter></function></tool_call>")
    (found,), _rest = parse_xml_calls(text, {"f": {"a": "array", "b": "number", "c": "array"}})
    assert found.arguments == {"a": deep, "b": "1e400", "c": [1, 2]} and found.error is None


def test_qwen_xml_tool_call_in_content_is_recognised_and_recorded():
    xml = ("I will look.\n<tool_call>\n<function=python>\n<parameter=code>\nx = 1\nprint(x < 2)\n</parameter>\n"
           "</function>\n</tool_call>")
    script = [Reply(content="planning the grasp</think>\n\n" + xml), Reply(content="ok")]
    with ChatServer(script) as server:
        runtime = make(server)
        runtime.start("task", [])
        response = runtime.respond(deadline())
        (tc,) = response.tool_calls
        runtime.add_tool_result(tc.id, "python", "{}", [])
        runtime.respond(deadline())
        assistant = server.completion_bodies()[1]["messages"][1]
    assert tc.source == "content_xml" and tc.name == "python" and tc.parse_error is None
    assert tc.arguments == {"code": "x = 1\nprint(x < 2)"}
    assert response.reasoning == "planning the grasp" and response.content == "I will look."
    assert any("Qwen3 XML tool call" in n for n in runtime.notes)
    assert any(e["event"] == "xml_tool_calls" and e["where"] == "content" for e in runtime.events)
    assert "<tool_call>" not in assistant["content"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == tc.arguments


def test_qwen_xml_in_reasoning_and_cut_off_xml():
    cut = "<tool_call>\n<function=finish>\n<parameter=status>\nsuccess\n</parameter>\n<parameter=summary>\nit wo"
    script = [Reply(reasoning_content="look first <tool_call><function=python><parameter=code>robo.show('wrist')"
                                      "</parameter></function></tool_call>"),
              Reply(content=cut, finish_reason="length")]
    with ChatServer(script) as server:
        runtime = make(server)
        runtime.start("task", [])
        first = runtime.respond(deadline())
        runtime.add_tool_result(first.tool_calls[0].id, "python", "{}", [])
        second = runtime.respond(deadline())
    assert first.tool_calls[0].source == "reasoning_xml" and first.reasoning == "look first"
    assert first.tool_calls[0].arguments == {"code": "robo.show('wrist')"}
    (truncated,) = second.tool_calls
    assert truncated.name == "finish" and truncated.arguments is None
    assert "no </tool_call>" in truncated.parse_error and second.finish_reason == "length"


@pytest.mark.parametrize("fault, kind", [
    (HttpError(429, retry_after=0.05), "http"),
    (HttpError(500), "http"),
    (HttpError(503, retry_after=0.05), "http"),
    (Drop(), "connection"),
    (Malformed(), "http"),
])
def test_transient_fault_is_retried_with_backoff_and_logged(fault, kind):
    sleeps = Sleeps()
    with ChatServer([fault, Reply(tool_calls=(call(),))]) as server:
        runtime = make(server, sleeps=sleeps)
        runtime.start("task", [])
        response = runtime.respond(deadline())
    assert response.tool_calls[0].name == "python"
    errors = [e for e in runtime.events if e["event"] == "error"]
    attempts = [e for e in runtime.events if e["event"] == "attempt"]
    assert len(errors) == 1 and errors[0]["kind"] == kind and len(attempts) == 2
    expected = getattr(fault, "retry_after", None) or 0.01    # Retry-After wins over backoff_initial_s
    assert sleeps == [pytest.approx(expected)]
    assert errors[0]["retry_in_s"] == pytest.approx(expected)


def test_slow_response_past_the_request_timeout_is_a_timeout_then_retried():
    with ChatServer([Reply(content="late", delay_s=1.5), Reply(content="on time")]) as server:
        runtime = make(server, request_timeout_s=0.4)
        runtime.start("task", [])
        started = time.monotonic()
        response = runtime.respond(deadline())
        elapsed = time.monotonic() - started
    assert response.content == "on time"
    assert [e["kind"] for e in runtime.events if e["event"] == "error"] == ["timeout"]
    assert elapsed < 1.4            # the client gave up at 0.4 s instead of waiting for the slow reply


def test_backoff_grows_and_exhausted_retries_raise_typed_failure():
    sleeps = Sleeps()
    with ChatServer([HttpError(500)] * 4) as server:
        runtime = make(server, sleeps=sleeps, max_retries=3, backoff_initial_s=0.01, backoff_max_s=0.03)
        runtime.start("task", [])
        with pytest.raises(RuntimeFailure) as info:
            runtime.respond(deadline())
    assert info.value.kind == "http" and "after 4 attempt(s)" in info.value.message
    assert sleeps == [pytest.approx(0.01), pytest.approx(0.02), pytest.approx(0.03)]
    assert runtime.events[-1]["event"] == "failure"


def test_no_server_is_a_connection_failure():
    with ChatServer([]) as server:
        settings = {"base_url": server.base_url}
    runtime = OpenAIRuntime(ModelSettings(model="m", max_retries=1, backoff_initial_s=0.01, **settings), TOOLS)
    runtime.start("task", [])
    with pytest.raises(RuntimeFailure) as info:
        runtime.respond(deadline())
    assert info.value.kind == "connection"


def test_client_error_is_not_retried():
    with ChatServer([HttpError(401, message="bad key")]) as server:
        runtime = make(server)
        runtime.start("task", [])
        with pytest.raises(RuntimeFailure, match="HTTP 401") as info:
            runtime.respond(deadline())
    assert info.value.kind == "http"
    assert len([e for e in runtime.events if e["event"] == "attempt"]) == 1


def test_deadline_bounds_retries_and_slow_attempts():
    with ChatServer([HttpError(503, retry_after=5)]) as server:
        runtime = make(server, backoff_max_s=10.0)
        runtime.start("task", [])
        started = time.monotonic()
        with pytest.raises(RuntimeFailure) as info:
            runtime.respond(time.monotonic() + 1.0)
    assert info.value.kind == "budget" and "deadline" in info.value.message
    assert time.monotonic() - started < 0.9           # did not sleep 5 s into a 1 s budget
    with ChatServer([Reply(content="late", delay_s=2.0)]) as server:
        runtime = make(server, request_timeout_s=30.0)
        runtime.start("task", [])
        started = time.monotonic()
        with pytest.raises(RuntimeFailure) as info:
            runtime.respond(time.monotonic() + 0.5)
    assert info.value.kind == "budget" and time.monotonic() - started < 1.5
    runtime_late = make(server)
    runtime_late.start("task", [])
    with pytest.raises(RuntimeFailure, match="deadline passed"):
        runtime_late.respond(time.monotonic() - 1.0)


def test_server_context_length_error_recalibrates_and_degrades_images_first():
    # The client's estimate (3.5 chars/token, 1100/image) thinks the prompt fits in 6000 - 500 tokens;
    # the server (3.0 chars/token, 1200/image) counts more and answers 400 with its count.
    with ChatServer([Reply(tool_calls=(call(),)), Reply(content="fits now")], context_limit=6000) as server:
        runtime = make(server, context_window=6000, max_tokens=500)
        runtime.start("task " + "x" * 9000, [png(), png()])
        response = runtime.respond(deadline())
        runtime.add_tool_result(response.tool_calls[0].id, "python", "r", [png()])
        final = runtime.respond(deadline())
        outcomes = [r.outcome for r in server.requests]
        first_sent = server.completion_bodies()[1]["messages"]
        last_sent = server.completion_bodies()[-1]["messages"]
    assert final.content == "fits now"
    assert outcomes[:2] == ["400 context length", "reply"]
    assert any("rejected the prompt as too long" in n and "server count" in n for n in runtime.notes)
    assert any("dropped the images of" in n for n in runtime.notes)
    omitted = {"type": "text", "text": IMAGE_OMITTED}
    assert first_sent[0]["content"][1:] == [omitted, omitted]     # the card images (oldest message) went first
    assert [m["role"] for m in last_sent] == ["user", "assistant", "tool", "user"]
    assert last_sent[3]["content"][1]["type"] == "image_url"      # the newest image is still sent
    assert runtime.transcript()[0]["content"][1]["type"] == "image_url"      # the transcript keeps everything


def test_usage_calibration_degrades_before_the_server_refuses():
    # The server reports 2x the tokens the client estimates; the next request is trimmed without any 400.
    with ChatServer([Reply(tool_calls=(call(),), usage={"prompt_tokens": 7000, "completion_tokens": 5}),
                     Reply(content="ok")], context_limit=None) as server:
        runtime = make(server, context_window=7000, max_tokens=500)
        runtime.start("task " + "x" * 6000, [png()])
        response = runtime.respond(deadline())
        scale = runtime.describe()["context"]["scale"]
        runtime.add_tool_result(response.tool_calls[0].id, "python", "o" * 3000, [])
        runtime.respond(deadline())
        second = server.completion_bodies()[1]["messages"]
    assert [r.outcome for r in server.requests] == ["reply", "reply"]
    assert scale > 1.5
    assert any("request 2: context: dropped the images of 1 old message(s)" in n for n in runtime.notes)
    assert second[0]["content"][1] == {"type": "text", "text": IMAGE_OMITTED}


def test_context_that_cannot_fit_is_a_context_failure():
    with ChatServer([Reply(content="never")]) as server:
        runtime = make(server, context_window=5000, max_tokens=1000)
        runtime.start("y" * 20000, [])
        with pytest.raises(RuntimeFailure) as info:
            runtime.respond(deadline())
        assert server.requests == []
    assert info.value.kind == "context" and "exceeds the limit 4000" in info.value.message


def test_context_trimming_order_images_then_tool_outputs_then_reasoning():
    window = ContextWindow(window=12000, reserve_tokens=1000, chars_per_token=3.5, image_tokens=1100)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "prompt"}, image, image]},                # 0
        {"role": "assistant", "content": "", "reasoning_content": "r" * 3500,
         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "python", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "o" * 17500},                                  # 2
        {"role": "user", "content": [{"type": "text", "text": "images"}, image]},                        # 3
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "b", "type": "function", "function": {"name": "python", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "b", "content": "p" * 17500},                                  # 5
    ]
    view, estimate, _, notes = window.fit(messages, TOOLS)
    assert estimate <= window.limit
    assert window.dropped_images == {0, 3} and window.trimmed_tools == {2}    # oldest tool output first
    assert notes[0].startswith("context: dropped the images of 2 old message(s) (indices 0, 3)")
    assert "tool output" in notes[1] and len(notes) == 2
    assert "chars trimmed to fit the context window" in view[2]["content"] and view[5]["content"] == "p" * 17500
    assert messages[2]["content"] == "o" * 17500                                # the original is untouched
    view_again, _, _, notes_again = window.fit(messages, TOOLS)                 # sticky, no new notes
    assert notes_again == [] and view_again == view


def test_api_key_comes_from_env_and_never_reaches_logs(tmp_path, monkeypatch):
    secret = "sk-test-SECRET-0123456789"
    monkeypatch.setenv("PYRUA_TEST_KEY", secret)
    script = [HttpError(500, message=f"upstream echoed key {secret}"), Reply(tool_calls=(call(),))]
    sink_path = tmp_path / "openai_events.jsonl"
    sink = JsonlEventSink(sink_path)
    with ChatServer(script) as server:
        settings = ModelSettings(model="m", base_url=server.base_url, api_key_env="PYRUA_TEST_KEY",
                                 backoff_initial_s=0.01)
        runtime = OpenAIRuntime(settings, TOOLS, event_sink=sink)
        runtime.start("task", [])
        runtime.respond(deadline())
        auth = server.requests[-1].headers.get("authorization")
    sink.close()
    assert auth == f"Bearer {secret}"
    logged = sink_path.read_text()
    assert "[redacted]" in logged and secret not in logged
    assert len(logged.splitlines()) == len(runtime.events)
    for blob in (json.dumps(runtime.events), json.dumps(runtime.transcript()), json.dumps(runtime.describe()),
                 repr(settings), json.dumps(runtime.notes)):
        assert secret not in blob
    monkeypatch.delenv("PYRUA_TEST_KEY")
    with pytest.raises(ValueError, match=r"'PYRUA_TEST_KEY'.*not set"):
        OpenAIRuntime(settings, TOOLS)


def test_settings_and_tools_refuse_bad_values_listing_the_choices():
    with pytest.raises(ValueError, match="--openai-tool-choice must be one of auto, required, none"):
        ModelSettings(model="m", tool_choice="always")
    with pytest.raises(ValueError, match="--openai-extra-body must be a JSON object"):
        parse_json_object("--openai-extra-body", "[1, 2]")
    assert parse_json_object("--openai-extra-body", '{"top_p": 0.95, "top_k": 20}') == {"top_p": 0.95, "top_k": 20}
    assert ModelSettings(model="m", base_url="http://h:30000/").endpoint() == "http://h:30000/v1"
    with pytest.raises(ValueError, match="arm must be one of cells, program"):
        tool_specs("notebook", "pure", "none")
    with pytest.raises(ValueError, match="images must be one of on-motion, on-demand, none"):
        tool_specs("cells", "pure", "always")
    with pytest.raises(ValueError, match="valid runtimes: openai, replay"):
        runtimes.create("codex")


def test_tool_descriptions_follow_feedback_and_images():
    def describe(*args):
        return tool_specs(*args)[0]["function"]["description"]
    pure, rich = describe("cells", "pure", "on-motion"), describe("cells", "rich", "on-motion")
    assert "robot state" not in pure and "robot state" in rich
    assert "only for cameras requested with robo.show" in describe("cells", "pure", "on-demand")
    assert "No camera images" in describe("cells", "pure", "none")
    program = tool_specs("program", "rich", "none", max_programs=2)
    assert [t["function"]["name"] for t in program] == ["run_program", "finish"]
    assert program[0]["function"]["description"].endswith("You may call it at most 2 time(s).")
    assert program[0]["function"]["parameters"]["required"] == []
    finish = program[1]["function"]["parameters"]
    assert finish["properties"]["status"]["enum"] == ["success", "failure", "stuck"]
    assert finish["required"] == ["status", "summary"]


def test_registry_builds_the_openai_runtime_lazily():
    with ChatServer([Reply(content="hi")]) as server:
        runtime = runtimes.create("openai", settings=ModelSettings(model="m", base_url=server.base_url),
                                  tools=TOOLS)
        runtime.start("task", [])
        assert runtime.respond(deadline()).content == "hi"


def test_make_runtime_builds_from_an_episode_config(tmp_path):
    from pyrua_ros.settings.config import PlayConfig
    from pyrua_ros.settings.schema import build

    with ChatServer([Reply(content="hi")]) as server:
        cfg = build(PlayConfig, {"out": tmp_path, "task": 0, "runtime": "openai", "arm": "program",
                                 "feedback": "rich", "images": "none", "max_programs": 1, "model": "m",
                                 "base_url": server.base_url, "openai_max_tokens": 8192,
                                 "openai_tool_choice": "required", "openai_temperature": 1.0,
                                 "openai_extra_body": {"top_k": 20}, "openai_request_timeout_s": 60.0})
        events = []
        runtime = runtimes.make_runtime(cfg, events=events.append)
        runtime.start("task", [])
        runtime.respond(deadline())
        body = server.completion_bodies()[0]
    assert body["tools"][0]["function"]["name"] == "run_program" and body["top_k"] == 20
    assert body["max_tokens"] == 8192 and [e["event"] for e in events][:2] == ["start", "request"]
    replay = build(PlayConfig, {"out": tmp_path, "suite": "libero_goal", "task": 2, "runtime": "replay"})
    with pytest.raises(ValueError, match=r"no example program for libero_goal task 2.*pass --replay FILE"):
        runtimes.make_runtime(replay)
