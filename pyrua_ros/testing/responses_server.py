"""A scripted OpenAI Responses API server on loopback, streaming as Codex CLI expects (tests only).

``ResponsesServer(script)`` serves ``POST /v1/responses`` with ``stream: true`` as server-sent events:
``response.created``, then per output item ``response.output_item.added`` (+ ``response.output_text.delta``
for text, ``response.function_call_arguments.delta``/``.done`` for calls) and ``response.output_item.done``, and
``response.completed`` carrying ``usage`` (``input_tokens`` with ``input_tokens_details.cached_tokens``,
``output_tokens`` with ``output_tokens_details.reasoning_tokens``, ``total_tokens``). A scripted call is sent the
way the request offered the tool: a plain ``function`` tool by its name, or a tool inside a ``namespace`` tool
(Codex puts an MCP server's tools in the namespace ``mcp__<server>``) as a ``function_call`` with that
``namespace``. Main requests are those offering a tool of the ``mcp__`` namespace (the script's steps; see
:mod:`.scripted_model`); others get a short text. ``base_url`` is ``http://127.0.0.1:<port>/v1``.
"""

from __future__ import annotations

import json

from .scripted_model import HttpFailure, ScriptedModelServer, Seen, Turn, offered_tool, send_sse

__all__ = ["HttpFailure", "ResponsesServer", "Turn"]


def _offered(body: dict) -> dict[str, str | None]:
    """Tool names the request offers -> their namespace (None for a top-level function)."""
    names: dict[str, str | None] = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                names[f"{tool.get('name')}__{inner.get('name')}"] = tool.get("name")
        elif tool.get("name"):
            names[str(tool["name"])] = None
    return names


class ResponsesServer(ScriptedModelServer):
    """Scripted Responses API server (see the module docstring)."""

    def __init__(self, script: list, *, mcp_prefix: str = "mcp__"):
        super().__init__(script, tool_prefix=mcp_prefix)
        self.base_url = f"{self.root_url}/v1"
        self._ids = 0

    def route(self, path: str) -> bool:
        return path.rstrip("/") == "/v1/responses"

    def is_main(self, body: dict) -> bool:
        return any(name.startswith(self.tool_prefix) for name in _offered(body))

    def _next_id(self, kind: str) -> str:
        self._ids += 1
        return f"{kind}_{self._ids}"

    def _items(self, body: dict, turn: Turn) -> list[dict]:
        offered = _offered(body)
        items = []
        if turn.reasoning:
            items.append({"type": "reasoning", "id": self._next_id("rs"),
                          "summary": [{"type": "summary_text", "text": turn.reasoning}]})
        for tool, arguments in turn.calls:
            name = offered_tool(list(offered), tool, self.tool_prefix)
            if name is None:
                raise ValueError(f"scripted call {tool!r} is not among the offered tools {sorted(offered)}")
            namespace = offered[name]
            item = {"type": "function_call", "id": self._next_id("fc"), "call_id": self._next_id("call"),
                    "name": name[len(namespace) + 2:] if namespace else name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}
            if namespace:
                item["namespace"] = namespace
            items.append(item)
        if turn.text:
            items.append({"type": "message", "role": "assistant", "id": self._next_id("msg"),
                          "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
        return items

    def _stream(self, body: dict, items: list[dict], usage: dict) -> list[tuple[str, dict]]:
        response_id = self._next_id("resp")
        head = {"id": response_id, "object": "response", "model": body.get("model"), "status": "in_progress",
                "output": []}
        events = [("response.created", {"type": "response.created", "response": head})]
        for index, item in enumerate(items):
            events.append(("response.output_item.added",
                           {"type": "response.output_item.added", "output_index": index, "item": item}))
            if item["type"] == "message":
                events.append(("response.output_text.delta",
                               {"type": "response.output_text.delta", "output_index": index, "content_index": 0,
                                "item_id": item["id"], "delta": item["content"][0]["text"]}))
            elif item["type"] == "function_call":
                for kind in ("delta", "done"):
                    key = "delta" if kind == "delta" else "arguments"
                    events.append((f"response.function_call_arguments.{kind}",
                                   {"type": f"response.function_call_arguments.{kind}", "output_index": index,
                                    "item_id": item["id"], key: item["arguments"]}))
            events.append(("response.output_item.done",
                           {"type": "response.output_item.done", "output_index": index, "item": item}))
        wire_usage = {"input_tokens": usage["input"], "input_tokens_details": {"cached_tokens": usage["cached"]},
                      "output_tokens": usage["output"],
                      "output_tokens_details": {"reasoning_tokens": usage["reasoning"]},
                      "total_tokens": usage["input"] + usage["output"]}
        done = {**head, "status": "completed", "output": items, "usage": wire_usage}
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        return events

    def respond(self, handler, body: dict, step: Turn, seen: Seen) -> None:
        send_sse(handler, self._stream(body, self._items(body, step), seen.usage))

    def side_response(self, handler, body: dict, seen: Seen) -> None:
        turn = Turn(text="ok", usage={"input": 1, "output": 1})
        seen.usage = {"input": 1, "cached": 0, "output": 1, "reasoning": 0}
        send_sse(handler, self._stream(body, self._items(body, turn), seen.usage))

    def call_outputs(self) -> list[dict]:
        """The ``function_call_output`` items Codex sent back, in order (from the last main request)."""
        main = self.main_requests()
        if not main or not main[-1].body:
            return []
        return [item for item in main[-1].body.get("input") or [] if item.get("type") == "function_call_output"]
