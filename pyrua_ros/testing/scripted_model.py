"""What the scripted model servers for the agent CLIs share: the script, the HTTP plumbing and the records.

A script is a list of steps, one per *main* model request (a request that offers the episode's MCP tools):

- :class:`Turn`: what the model "says": ``calls`` ((tool, arguments) pairs, tool by its bare name, e.g.
  ``"python"``; the server sends it under the name the CLI offered it, e.g. ``mcp__pyrualean__python`` or the
  ``python`` function of the ``mcp__pyrualean`` namespace), ``text``, ``reasoning``, token ``usage`` and an
  optional ``delay_s`` before answering (a model that thinks too long, to run a CLI past its budget);
- a callable ``(request_body) -> Turn``: a turn computed from the conversation so far (e.g. a ``move_to`` to
  the position a ``segment`` result reported), as a model would;
- :class:`HttpFailure`: an error status instead of a response.

Requests that do not offer the MCP tools (a CLI's own side calls: titles, summaries, token counts) are
answered with a short text and do not consume the script; ``GET /v1/models`` (the check before boot) gets an empty
model list. Every request is recorded (:class:`Seen`) with the
usage the server reported for it, so a test can check the run directory's token totals against what the
server actually said. A request after the script is spent gets a 500 naming the exhaustion.
"""

from __future__ import annotations

import dataclasses
import json
from http.server import BaseHTTPRequestHandler

from .loopback_http import LoopbackHttpServer, QuietHandler


@dataclasses.dataclass(frozen=True)
class Turn:
    """One scripted model response. ``usage``: ``{"input": n, "cached": n, "output": n, "reasoning": n}``
    (missing keys: input estimated from the request size, output from the text, the others 0)."""

    calls: tuple = ()
    text: str | None = None
    reasoning: str | None = None
    usage: dict | None = None
    delay_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class HttpFailure:
    """An error status with a JSON error body."""

    status: int
    message: str = "scripted failure"


@dataclasses.dataclass
class Seen:
    """One request as received: ``path``, lower-case ``headers``, parsed ``body``, whether it was a ``main``
    request (offered the MCP tools), the ``outcome`` and the ``usage`` the server reported
    (``{"input", "cached", "output", "reasoning"}``)."""

    method: str
    path: str
    headers: dict
    body: dict | None
    main: bool = False
    outcome: str = ""
    usage: dict | None = None


def estimate_tokens(data) -> int:
    """A rough token count of a JSON value (4 characters per token)."""
    return max(1, len(json.dumps(data, default=str)) // 4)


def resolved_usage(turn: Turn, body: dict) -> dict:
    """The usage a turn reports: its own numbers where given, estimates otherwise."""
    given = turn.usage or {}
    produced = (turn.text or "") + (turn.reasoning or "") + json.dumps([list(c) for c in turn.calls], default=str)
    return {"input": int(given.get("input", estimate_tokens(body))), "cached": int(given.get("cached", 0)),
            "output": int(given.get("output", max(1, len(produced) // 4))),
            "reasoning": int(given.get("reasoning", 0))}


class ScriptedModelServer(LoopbackHttpServer):
    """Base of the scripted servers (HTTP on 127.0.0.1 from :class:`LoopbackHttpServer`).

    Subclasses implement ``is_main(body)``, ``route(path)`` (which POST paths are model requests),
    ``respond(handler, body, step, seen)`` and ``side_response(handler, body, seen)``.
    """

    def __init__(self, script: list, *, tool_prefix: str = ""):
        self.tool_prefix = tool_prefix
        super().__init__(script, self._handler_class(), name=type(self).__name__)

    def main_requests(self) -> list[Seen]:
        """The requests that consumed (or tried to consume) a script step, in order."""
        with self._lock:
            return [r for r in self.requests if r.main]

    def reported_usage(self, *, main_only: bool = True) -> dict:
        """Sum of the usage this server reported (``input``, ``cached``, ``output``, ``reasoning``)."""
        total = {"input": 0, "cached": 0, "output": 0, "reasoning": 0}
        with self._lock:
            for seen in self.requests:
                if seen.usage and (seen.main or not main_only):
                    for key in total:
                        total[key] += seen.usage[key]
        return total

    # -- subclass hooks ------------------------------------------------------------------------------------
    def route(self, path: str) -> bool:
        raise NotImplementedError

    def is_main(self, body: dict) -> bool:
        raise NotImplementedError

    def respond(self, handler: BaseHTTPRequestHandler, body: dict, step, seen: Seen) -> None:
        raise NotImplementedError

    def side_response(self, handler: BaseHTTPRequestHandler, body: dict, seen: Seen) -> None:
        raise NotImplementedError

    # -- HTTP ----------------------------------------------------------------------------------------------
    def _handler_class(self):
        server = self

        class Handler(QuietHandler):
            def _record(self, body) -> Seen:
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(seen)
                return seen

            def do_GET(self):
                seen = self._record(None)
                if self.path.split("?")[0].rstrip("/") == "/v1/models":   # both APIs list models here
                    seen.outcome = "models"
                    send_json(self, 200, {"object": "list", "data": [], "has_more": False})
                    return
                seen.outcome = "404"
                send_json(self, 404, {"error": {"message": f"no route GET {self.path}"}})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                seen = self._record(body)
                if not server.route(self.path.split("?")[0]) or not isinstance(body, dict):
                    seen.outcome = "404" if isinstance(body, dict) else "400"
                    send_json(self, 404 if isinstance(body, dict) else 400,
                              {"error": {"message": f"no route POST {self.path} for this body"}})
                    return
                if not server.is_main(body):
                    seen.outcome = "side"
                    server.side_response(self, body, seen)
                    return
                seen.main = True
                step = server.take_step(body)
                if step is None:
                    seen.outcome = "500 script exhausted"
                    send_json(self, 500, {"error": {"message": f"script exhausted after {len(server.script)} "
                                                               "step(s)"}})
                    return
                if isinstance(step, HttpFailure):
                    seen.outcome = str(step.status)
                    send_json(self, step.status, {"type": "error", "error": {"type": "scripted_error",
                                                                             "message": step.message}})
                    return
                if step.delay_s and server.wait(step.delay_s):
                    seen.outcome = "closed while delayed"
                    return
                seen.outcome = "turn"
                seen.usage = resolved_usage(step, body)
                try:
                    server.respond(self, body, step, seen)
                except (BrokenPipeError, ConnectionResetError):
                    seen.outcome = "client gone"
                    self.close_connection = True
                except ValueError as exc:   # a script that does not fit the request (e.g. a tool not offered)
                    seen.outcome = f"script error: {exc}"
                    send_json(self, 500, {"error": {"message": f"script error: {exc}"}})

        return Handler


def send_json(handler: BaseHTTPRequestHandler, status: int, payload) -> None:
    """One JSON response (errors of a gone client are ignored)."""
    data = json.dumps(payload).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


def send_sse(handler: BaseHTTPRequestHandler, events: list[tuple[str, dict]]) -> None:
    """A ``text/event-stream`` response of ``(event name, data)`` pairs, chunked, then the end of the stream."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for name, data in events:
        chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def offered_tool(names: list[str], wanted: str, prefix: str) -> str | None:
    """The offered tool name for bare ``wanted``: exact, or ``<prefix>...__<wanted>``."""
    for name in names:
        if name == wanted or (name.startswith(prefix) and name.rsplit("__", 1)[-1] == wanted):
            return name
    return None

