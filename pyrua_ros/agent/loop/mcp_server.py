"""The arm's tools as an MCP server (official ``mcp`` Python SDK), over stdio or streamable HTTP on loopback.

``ArmMcpServer(toolkit)`` publishes exactly what the arm's :class:`~pyrua_ros.agent.loop.toolkit.ArmToolkit` serves
(``python`` / ``run_program`` / one tool per ``robo`` primitive, and ``finish``), so the Codex and Claude Code
runtimes, and any MCP client (an IDE agent, a desktop assistant), drive the robot through the same kernel,
budgets, ledger and records as ``play``'s own loop. Facts followed (PYRUALEAN-CONTRACT.md 3.3, 4.4):

- every tool carries the annotations ``readOnlyHint=True, destructiveHint=False, openWorldHint=False`` (so Codex
  runs them under ``approval_policy="never"`` without a reviewer);
- a tool name arrives with or without the ``mcp__<server>__`` prefix Claude Code and Codex put on MCP tools;
  the last ``__``-separated part is the tool;
- a result is one JSON text block (the same text the openai runtime sends) followed by one image content block
  per attached PNG; ``isError`` is set when the result has an ``error`` key;
- calls are serialised (one at a time, in arrival order) and run in a worker thread, so the event loop keeps
  answering while a cell runs;
- streamable HTTP is stateless with JSON responses, bound to 127.0.0.1 only, at ``http://127.0.0.1:<port>/mcp``;
  a request whose ``Host`` is not that address or whose ``Origin`` is another site is refused (DNS rebinding),
  and so is one without ``Authorization: Bearer <token>``, the per-run token :meth:`ArmMcpServer.start_http`
  draws (``secrets.token_urlsafe``): 401, whatever the request (another local process or user can reach the
  port; only the one who started the server learns the token). stdio needs no token: the wire is the pipe.

A client that disconnects mid-call does not stop the call: the cell runs to its end (its turn is recorded like
any other), and the server goes on serving the next client (HTTP) or ends cleanly (stdio: end of input).
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

import anyio
import anyio.to_thread
import uvicorn
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from pyrua_ros import __version__
from pyrua_ros.agent.loop.toolkit import ToolReply

SERVER_NAME = "pyrualean"
AFTER_FINISH_ERROR = "the episode already finished; this call was not run"
DEFAULT_INSTRUCTIONS = "Tools of one robot arm episode (pyrua_ros); each tool's description says what it does."
ANNOTATIONS = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
UNAUTHORIZED = ("this MCP server needs the per-run token: send 'Authorization: Bearer <token>' with the token "
                "printed where the server announced its URL (pyrua-ros mcp: the mcp_token of its stderr line)")


class BearerGate:
    """ASGI middleware: an HTTP request whose ``Authorization`` header is not ``Bearer <token>`` gets 401 with
    a JSON body saying what is missing; everything else (and the lifespan) goes to ``app``."""

    def __init__(self, app, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode("latin-1")

    def _authorized(self, scope) -> bool:
        sent = [value for name, value in scope.get("headers") or [] if name.lower() == b"authorization"]
        return len(sent) == 1 and hmac.compare_digest(sent[0].strip(), self._expected)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "message": UNAUTHORIZED}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="pyrualean"')]})
        await send({"type": "http.response.body", "body": body})


def tool_name(name: str) -> str:
    """The tool a possibly prefixed MCP name refers to: ``mcp__pyrualean__python`` -> ``python``."""
    return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name


def mcp_tools(specs: list[dict]) -> list[types.Tool]:
    """Chat-completions function specs as MCP tools (same name, description and JSON schema)."""
    tools = []
    for spec in specs:
        function = spec["function"]
        tools.append(types.Tool(name=function["name"], description=function.get("description"),
                                input_schema=function["parameters"], annotations=ANNOTATIONS))
    return tools


class ArmMcpServer:
    """Serves ``toolkit`` (``tool_specs()`` and ``execute(name, arguments)``) as MCP tools.

    ``instructions``: the MCP server instructions a client may show its model (``pyrua-ros mcp`` passes the
    episode's prompt; the CLI runtimes get the prompt as their input instead, so the default is one line).
    ``on_call(name, reply)``: called after every executed call (progress views). ``calls`` counts served calls.
    """

    def __init__(self, toolkit, *, name: str = SERVER_NAME, instructions: str | None = None,
                 on_call: Callable | None = None):
        self.toolkit = toolkit
        self.name = name
        self.calls = 0
        self._on_call = on_call
        self._lock = threading.Lock()
        self.server = Server(name, version=__version__,
                             instructions=instructions or DEFAULT_INSTRUCTIONS,
                             on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        self._uvicorn = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None
        self.token: str | None = None

    # ------------------------------------------------------------------ handlers
    async def _list_tools(self, _ctx, _params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools(self.toolkit.tool_specs()))

    async def _call_tool(self, _ctx, params) -> types.CallToolResult:
        name = tool_name(params.name)
        # Not cancellable: a client that goes away mid-call does not interrupt a cell half way; the call runs
        # to its end and is recorded, and the next call waits for it.
        text, images, is_error = await anyio.to_thread.run_sync(self._execute, name, params.arguments or {})
        content: list = [types.TextContent(text=text)]
        content.extend(types.ImageContent(data=base64.b64encode(png).decode("ascii"), mime_type="image/png")
                       for png in images)
        return types.CallToolResult(content=content, is_error=is_error)

    def _execute(self, name: str, arguments: dict) -> tuple[str, list[bytes], bool]:
        with self._lock:
            if self.toolkit.finished:
                reply = ToolReply({"error": AFTER_FINISH_ERROR}, [])
            else:
                reply = self.toolkit.execute(name, arguments)
                self.calls += 1
                if self._on_call is not None:
                    self._on_call(name, reply)
        return reply.text, [png for _n, png in reply.images], not reply.ok

    # ------------------------------------------------------------------ transports
    async def serve_stdio(self, stdin_fd: int | None = None, stdout_fd: int | None = None) -> None:
        """Serve one client over stdio until its input ends. ``stdin_fd`` / ``stdout_fd``: file descriptors of
        the wire (default: the process's own stdin/stdout, which the SDK diverts while serving)."""

        streams = {}
        if stdin_fd is not None:
            streams["stdin"] = anyio.wrap_file(open(stdin_fd, encoding="utf-8", errors="replace", closefd=False))
        if stdout_fd is not None:
            streams["stdout"] = anyio.wrap_file(open(stdout_fd, "w", encoding="utf-8", closefd=False))
        async with stdio_server(**streams) as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

    def start_http(self, port: int = 0, timeout_s: float = 30.0) -> str:
        """Serve streamable HTTP on ``127.0.0.1:port`` (0: a free port) in a background thread; returns the URL
        (``http://127.0.0.1:<port>/mcp``) once the server accepts connections. Every request must carry
        ``Authorization: Bearer <self.token>``, a token drawn here for this run only: the caller hands it to its
        client and writes it to no file."""

        if self._thread is not None:
            raise RuntimeError("the HTTP server is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        port = sock.getsockname()[1]
        # DNS rebinding: only requests addressed to this very socket (Host) from no page or a loopback page of
        # this port (Origin) are served; a browser tab on another name gets 421 / 403

        security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                             allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
                                             allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"])
        app = self.server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1",
                                              transport_security=security)
        self.token = secrets.token_urlsafe(32)
        config = uvicorn.Config(BearerGate(app, self.token), log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2)
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, kwargs={"sockets": [sock]},
                                        name=f"mcp-http-{sock.getsockname()[1]}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the MCP HTTP server did not start within {timeout_s:g} s")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        return self.url

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the HTTP server (waits for a running call to end, at most ``timeout_s``)."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        self._thread = self._uvicorn = None


@contextlib.contextmanager
def wire_on_private_fds():
    """For a stdio server: keep the real stdin/stdout as private descriptors for the MCP wire and point fd 0 at
    /dev/null and fd 1 at stderr meanwhile, so nothing else the process (or a child) prints can corrupt the
    wire. Yields ``(stdin_fd, stdout_fd)``; restores both on exit."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (devnull, saved_in, saved_out, wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.close(fd)
