"""A scripted Anthropic Messages API server on loopback, streaming as Claude Code expects (tests only).

``MessagesServer(script)`` serves ``POST /v1/messages`` (``?beta=true`` accepted) with ``stream: true`` as
server-sent events: ``message_start`` (a message with ``usage``: ``input_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``), per content block ``content_block_start`` / ``content_block_delta``
(``thinking_delta``, ``text_delta`` or ``input_json_delta``) / ``content_block_stop``, then ``message_delta``
(``stop_reason`` ``tool_use`` or ``end_turn``, ``usage.output_tokens``) and ``message_stop``; a non-streaming
request gets the whole message as JSON. ``POST /v1/messages/count_tokens`` answers an estimate. A scripted call
is sent under the name the request offered (``mcp__pyrualean__python`` for the bare ``python``). Main requests
are those offering an ``mcp__`` tool (the script's steps; see :mod:`.scripted_model`); Claude Code's side calls
(titles, summaries) get a short text. The scripted ``input`` usage is reported as ``input_tokens`` with
``cached`` as ``cache_read_input_tokens`` on top. ``base_url`` is the server root (what ``ANTHROPIC_BASE_URL``
takes).
"""

from __future__ import annotations

import json

from .scripted_model import (
    HttpFailure,
    ScriptedModelServer,
    Seen,
    Turn,
    estimate_tokens,
    offered_tool,
    send_json,
    send_sse,
)

__all__ = ["HttpFailure", "MessagesServer", "Turn"]


class MessagesServer(ScriptedModelServer):
    """Scripted Messages API server (see the module docstring)."""

    def __init__(self, script: list, *, mcp_prefix: str = "mcp__"):
        super().__init__(script, tool_prefix=mcp_prefix)
        self.base_url = self.root_url
        self._ids = 0

    def route(self, path: str) -> bool:
        return path.rstrip("/") in ("/v1/messages", "/v1/messages/count_tokens")

    def is_main(self, body: dict) -> bool:
        if "max_tokens" not in body:   # count_tokens
            return False
        return any(str(t.get("name", "")).startswith(self.tool_prefix) for t in body.get("tools") or [])

    def _blocks(self, body: dict, turn: Turn) -> list[dict]:
        offered = [str(t.get("name")) for t in body.get("tools") or []]
        blocks = []
        if turn.reasoning:
            blocks.append({"type": "thinking", "thinking": turn.reasoning, "signature": "scripted"})
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for tool, arguments in turn.calls:
            name = offered_tool(offered, tool, self.tool_prefix)
            if name is None:
                raise ValueError(f"scripted call {tool!r} is not among the offered tools {offered}")
            self._ids += 1
            blocks.append({"type": "tool_use", "id": f"toolu_{self._ids:04d}", "name": name,
                           "input": json.loads(arguments) if isinstance(arguments, str) else arguments})
        return blocks

    def _message(self, body: dict, blocks: list[dict], usage: dict) -> dict:
        self._ids += 1
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return {"id": f"msg_{self._ids:04d}", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": blocks, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": usage["input"], "cache_read_input_tokens": usage["cached"],
                          "cache_creation_input_tokens": 0, "output_tokens": usage["output"]}}

    def _send(self, handler, body: dict, message: dict) -> None:
        if not body.get("stream"):
            send_json(handler, 200, message)
            return
        start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
        events = [("message_start", {"type": "message_start", "message": start})]
        for index, block in enumerate(message["content"]):
            if block["type"] == "tool_use":
                opening, delta = {**block, "input": {}}, {"type": "input_json_delta",
                                                          "partial_json": json.dumps(block["input"])}
            elif block["type"] == "thinking":
                opening, delta = {"type": "thinking", "thinking": ""}, {"type": "thinking_delta",
                                                                       "thinking": block["thinking"]}
            else:
                opening, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": opening}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            if block["type"] == "thinking":
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "signature_delta",
                                                                 "signature": block["signature"]}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                         "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
        events.append(("message_stop", {"type": "message_stop"}))
        send_sse(handler, events)

    def respond(self, handler, body: dict, step: Turn, seen: Seen) -> None:
        self._send(handler, body, self._message(body, self._blocks(body, step), seen.usage))

    def side_response(self, handler, body: dict, seen: Seen) -> None:
        if "max_tokens" not in body:   # count_tokens
            send_json(handler, 200, {"input_tokens": estimate_tokens(body)})
            return
        seen.usage = {"input": estimate_tokens(body), "cached": 0, "output": 1, "reasoning": 0}
        self._send(handler, body, self._message(body, [{"type": "text", "text": "ok"}], seen.usage))

    def tool_results(self) -> list[dict]:
        """The ``tool_result`` blocks Claude Code sent back, in order (from the last main request)."""
        main = self.main_requests()
        if not main or not main[-1].body:
            return []
        return [block for message in main[-1].body.get("messages") or [] if isinstance(message.get("content"), list)
                for block in message["content"] if block.get("type") == "tool_result"]
