"""``pyrua-ros mcp``: one episode whose agent is any MCP client (an IDE agent, a desktop assistant, a script).

The episode is ``play``'s (:class:`~pyrua_ros.agent.run.episode.Episode` over an
:class:`~pyrua_ros.agent.run.episode.EpisodeHost`: driver node, robo, budgets, ledger, recorder, run directory, the
benchmark's verdict) and so is the agent strategy (:class:`~pyrua_ros.agent.loop.arms.LoopAgent`: prompt, kernel,
toolkit, progress, records); only the runtime differs: instead of a model, the arm's tools are served by
:class:`~pyrua_ros.agent.loop.mcp_server.ArmMcpServer` until the episode ends. The server's MCP ``instructions`` are the
episode's prompt (contract, API reference, knowledge, task card), so a client that shows server instructions to its
model gives it what ``play`` would.

The episode ends (and result.json is written) when:
- stdio: the client closes its end (end of input);
- HTTP (every request with ``Authorization: Bearer <mcp_token>``, the per-run token printed once on stderr next
  to the URL): the process gets SIGINT or SIGTERM before the client called ``finish`` (status and reason
  ``interrupted``: the user stopped it, so it is no measurement and in no rate; ``settings.outcomes``);
- either: ``finish`` was called (the reply is delivered first), or the wall-clock budget ran out (``timeout``;
  the robot is stopped, later calls get ``EpisodeFinished``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time

from pyrua_ros.agent.loop.arms import LoopAgent
from pyrua_ros.agent.run.episode import Episode
from pyrua_ros.agent.runtimes.base import LoopOutcome

FINISH_DELIVERY_S = 0.5   # time the finish reply gets to reach the client before the server ends


class McpAgent(LoopAgent):
    """The loop strategy of an :class:`~pyrua_ros.settings.config.McpConfig`, an outside MCP client in the
    runtime's place. ``wire``: the ``(stdin_fd, stdout_fd)`` of the stdio transport (:func:`serve` sets it up)."""

    def __init__(self, cfg, *, wire: tuple[int, int] | None = None):
        super().__init__(cfg)
        self.wire = wire

    def start_runtime(self, ep) -> None:
        from pyrua_ros.agent.loop.mcp_server import ArmMcpServer  # noqa: PLC0415 (mcp)

        ep.notes.append(f"agent: an MCP client over {self.cfg.serve.transport}; pyrua_ros did not run a model")
        self.mcp = ArmMcpServer(self.toolkit, instructions=ep.prompt.text)

    def _ended(self) -> str | None:
        if self.toolkit.finished:
            return "finished"
        if time.monotonic() >= self.deadline:
            return "timeout"
        return None

    def drive(self, ep) -> LoopOutcome:
        ending = self._serve_stdio() if self.cfg.serve.transport == "stdio" else self._serve_http(ep)
        notes: tuple[str, ...] = ()
        if ending == "timeout":
            status, reason = "timeout", "timeout"
        elif ending == "signal":   # its user stopped the server before the client finished: no measurement
            status, reason = "interrupted", "interrupted"
            notes = ("the server was stopped by a signal before the MCP client called finish",)
        else:
            status, reason = "completed", {"finished": None, "client": "the MCP client disconnected"}[ending]
        if self.toolkit.turn_budget_exhausted and status == "completed":
            status, reason = "call_budget", f"call budget exhausted ({self.cfg.agent.max_turns})"
        return LoopOutcome(status, reason, notes=notes, requests=self.mcp.calls)

    def _serve_stdio(self) -> str:
        import anyio  # noqa: PLC0415 (anyio: stdio serving only)

        ending = {"why": "client"}
        stdin_fd, stdout_fd = self.wire

        async def main() -> None:
            async with anyio.create_task_group() as group:
                async def watch() -> None:
                    while (why := self._ended()) is None:
                        await anyio.sleep(0.1)
                    await anyio.sleep(FINISH_DELIVERY_S if why == "finished" else 0)
                    ending["why"] = why
                    group.cancel_scope.cancel()

                async def serve() -> None:
                    await self.mcp.serve_stdio(stdin_fd, stdout_fd)
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                group.start_soon(serve)

        anyio.run(main)
        return ending["why"]

    def _serve_http(self, ep) -> str:
        url = self.mcp.start_http(self.cfg.serve.port)
        # the token is printed once, on this line, and written nowhere (mcp.json says only that one is needed)
        ep.records.write_json("mcp.json", {"url": url, "transport": "http",
                                           "auth": "Authorization: Bearer <the mcp_token printed on stderr>"})
        print(json.dumps({"mcp_url": url, "mcp_token": self.mcp.token}), file=sys.stderr, flush=True)
        try:
            while (why := self._ended()) is None:
                time.sleep(0.1)
            if why == "finished":
                time.sleep(FINISH_DELIVERY_S)
            return why
        except KeyboardInterrupt:   # SIGINT, or SIGTERM/SIGHUP turned into it by Episode.run
            return "signal"
        finally:
            self.mcp.stop()


def serve(cfg, *, progress=None, host=None):
    """Run one MCP-served episode of an :class:`~pyrua_ros.settings.config.McpConfig` (``cfg.out`` set) and return
    its result (also written to ``<cfg.out>/result.json``). ``host``: a lent, open EpisodeHost (kept open).

    Over stdio the whole episode runs with fd 0 on /dev/null and fd 1 on stderr (the real ones are the MCP wire),
    so nothing the episode, its kernel or a library prints can corrupt the protocol."""
    from pyrua_ros.agent.loop.mcp_server import wire_on_private_fds  # noqa: PLC0415 (mcp)

    stdio = cfg.serve.transport == "stdio"
    with wire_on_private_fds() if stdio else contextlib.nullcontext() as wire:
        agent = McpAgent(cfg, wire=wire)
        return Episode(cfg.episode, agent, out=cfg.out, output=cfg.output, compat=cfg.compat, host=host,
                       progress=progress).run()
