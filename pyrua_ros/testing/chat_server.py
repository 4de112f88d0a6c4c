"""A real OpenAI-compatible chat-completions HTTP server on 127.0.0.1 that replays a script (tests only).

``ChatServer(script)`` serves ``POST /v1/chat/completions`` and ``GET /v1/models`` from a stdlib
``ThreadingHTTPServer`` in one daemon thread. Each completion request consumes the next script step:

- :class:`Reply`: a 200 completion (content, ``reasoning_content``, any number of tool calls whose arguments
  may be a dict or raw text, usage with ``prompt_tokens_details.cached_tokens`` /
  ``completion_tokens_details.reasoning_tokens``, optional omission of usage), optionally after ``delay_s``
  (a slow server, to run past a client timeout);
- :class:`HttpError`: a status (429, 500, 503 ...) with an optional ``Retry-After`` header;
- :class:`Drop`: the socket is closed without a response;
- :class:`Malformed`: a 200 whose body is not valid JSON;
- a callable ``(request_body) -> step``: a step computed from the conversation so far (e.g. a ``move_to`` to
  where an earlier ``segment`` result said the object is), as a model would.

When ``context_limit`` is set, a request whose estimated prompt (``chars_per_token`` chars/token, ``image_tokens``
per image part) plus ``max_tokens`` exceeds it gets a 400 context-length error (vLLM's wording) and does not
consume a step. ``models_status`` other than 200: ``GET`` answers that status (501 is what a server built on
Python's ``http.server`` without ``do_GET`` says: a chat-only server). Every request is recorded (path,
headers, parsed body, outcome) in ``requests``. A request after the script is spent gets a 500 naming the
exhaustion. ``close()`` stops the thread; use as a context manager.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time

from .loopback_http import LoopbackHttpServer, QuietHandler

AFTER_WAIT_S = 120.0   # [s] longest a gated reply waits for its gate


@dataclasses.dataclass(frozen=True)
class Reply:
    """A successful completion. ``tool_calls``: (name, arguments) pairs; arguments dict -> JSON text, str -> as is.

    ``usage``: None = computed (prompt from the server's estimate, completion = content chars / 4);
    ``omit_usage``: send no ``usage`` key. ``finish_reason`` None = ``tool_calls`` if calls else ``stop``.
    """

    content: str | None = None
    tool_calls: tuple = ()
    reasoning_content: str | None = None
    finish_reason: str | None = None
    usage: dict | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    omit_usage: bool = False
    delay_s: float = 0.0
    after: threading.Event | None = None   # sent only once this is set (at most AFTER_WAIT_S), then after delay_s


@dataclasses.dataclass(frozen=True)
class HttpError:
    """An error status with a JSON error body and optional ``Retry-After`` seconds."""

    status: int
    retry_after: float | None = None
    message: str = "scripted error"
    delay_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Drop:
    """Close the connection without sending anything (after ``delay_s``)."""

    delay_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Malformed:
    """A 200 response with ``application/json`` content type but an invalid JSON body."""

    body: str = '{"choices": [ this is not json'
    delay_s: float = 0.0


@dataclasses.dataclass
class RecordedRequest:
    """One request as received: ``headers`` with lower-case names, ``body`` the parsed JSON (None if unparsable),
    ``outcome`` what the server did."""

    method: str
    path: str
    headers: dict
    body: dict | None
    outcome: str = ""


def estimate_prompt_tokens(body: dict, chars_per_token: float, image_tokens: int) -> int:
    """The server's own prompt estimate: text chars of the messages / chars_per_token + image_tokens per image."""
    chars = 0
    images = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    images += 1
                else:
                    chars += len(part.get("text", ""))
        chars += len(message.get("reasoning_content") or "")
        for call in message.get("tool_calls") or []:
            chars += len(json.dumps(call.get("function", {})))
    chars += len(json.dumps(body.get("tools") or []))
    return int(chars / chars_per_token) + image_tokens * images


class ChatServer(LoopbackHttpServer):
    """Scripted chat-completions server. ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, script: list, model: str = "scripted-model", context_limit: int | None = None,
                 chars_per_token: float = 3.0, image_tokens: int = 1200, *,
                 models_status: int = 200):
        self.model = model
        self.models_status = models_status
        self.context_limit = context_limit
        self.chars_per_token = chars_per_token
        self.image_tokens = image_tokens
        super().__init__(script, self._handler_class(), name="chat-server")
        self.base_url = f"{self.root_url}/v1"

    def completion_bodies(self) -> list[dict]:
        """Parsed bodies of every POST /v1/chat/completions received, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.path.endswith("/chat/completions") and r.body is not None]

    # --- request handling ---------------------------------------------------------------------------------
    def _completion(self, body: dict, step: Reply, index: int, prompt_tokens: int) -> dict:
        calls = []
        for k, (name, arguments) in enumerate(step.tool_calls):
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append({"id": f"call_{index}_{k}", "type": "function",
                          "function": {"name": name, "arguments": text}})
        message = {"role": "assistant", "content": step.content}
        if step.reasoning_content is not None:
            message["reasoning_content"] = step.reasoning_content
        if calls:
            message["tool_calls"] = calls
        finish = step.finish_reason or ("tool_calls" if calls else "stop")
        data = {"id": f"chatcmpl-{index}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", self.model),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        if not step.omit_usage:
            usage = step.usage
            if usage is None:
                completion = len(step.content or "") // 4 + len(step.reasoning_content or "") // 4 + 10 * len(calls)
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                         "total_tokens": prompt_tokens + completion}
                if step.cached_tokens is not None:
                    usage["prompt_tokens_details"] = {"cached_tokens": step.cached_tokens}
                if step.reasoning_tokens is not None:
                    usage["completion_tokens_details"] = {"reasoning_tokens": step.reasoning_tokens}
            data["usage"] = usage
        return data

    def _handler_class(self):
        server = self

        class Handler(QuietHandler):
            def _send_json(self, status: int, payload, headers: dict | None = None, raw: str | None = None):
                data = (raw if raw is not None else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True   # the client gave up (e.g. its timeout fired)

            def do_GET(self):
                record = RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None)
                with server._lock:
                    server.requests.append(record)
                if server.models_status != 200:   # a chat-only server: http.server's own error page
                    record.outcome = str(server.models_status)
                    self.send_error(server.models_status)
                elif self.path.rstrip("/") == "/v1/models":
                    record.outcome = "models"
                    self._send_json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    record.outcome = "404"
                    self._send_json(404, {"error": {"message": f"no route GET {self.path}; try GET /v1/models"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                record = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(record)
                    index = len(server.requests)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    record.outcome = "404"
                    self._send_json(404, {"error": {"message": f"no route POST {self.path}; "
                                                               "try POST /v1/chat/completions"}})
                    return
                if body is None:
                    record.outcome = "400 bad request json"
                    self._send_json(400, {"error": {"message": "request body is not JSON"}})
                    return
                prompt = estimate_prompt_tokens(body, server.chars_per_token, server.image_tokens)
                wanted = prompt + int(body.get("max_tokens") or 0)
                if server.context_limit is not None and wanted > server.context_limit:
                    record.outcome = "400 context length"
                    message = (f"This model's maximum context length is {server.context_limit} tokens. However, you "
                               f"requested {wanted} tokens ({prompt} in the messages, "
                               f"{int(body.get('max_tokens') or 0)} in the completion). Please reduce the length "
                               "of the messages or completion.")
                    self._send_json(400, {"object": "error", "message": message, "type": "BadRequestError",
                                          "code": 400})
                    return
                step = server.take_step(body)
                if step is None:
                    record.outcome = "500 script exhausted"
                    self._send_json(500, {"error": {"message": f"chat_server script exhausted after "
                                                               f"{len(server.script)} step(s)"}})
                    return
                gate = getattr(step, "after", None)
                if gate is not None and not gate.wait(AFTER_WAIT_S):
                    record.outcome = "gate not opened"
                    self._send_json(500, {"error": {"message": f"chat_server: the reply's gate stayed closed for "
                                                               f"{AFTER_WAIT_S} s"}})
                    return
                if step.delay_s and server.wait(step.delay_s):
                    record.outcome = "closed while delayed"
                    return
                if isinstance(step, Drop):
                    record.outcome = "dropped"
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if isinstance(step, HttpError):
                    record.outcome = f"{step.status}"
                    headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
                    self._send_json(step.status, {"error": {"message": step.message, "code": step.status}}, headers)
                    return
                if isinstance(step, Malformed):
                    record.outcome = "malformed"
                    self._send_json(200, None, raw=step.body)
                    return
                record.outcome = "reply"
                self._send_json(200, server._completion(body, step, index, prompt))

        return Handler
