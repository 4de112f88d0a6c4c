"""``pyrua-ros mcp``: one episode whose agent is any MCP client (an IDE agent, a desktop assistant, a script).

The host is ``play``'s (:class:`~pyrua_ros.agent.episode.Episode`: driver node, robo, kernel, budgets, ledger,
recorder, run directory, the benchmark's verdict); only the agent differs: instead of a model runtime, the
arm's tools are served by :class:`~pyrua_ros.agent.mcp_server.ArmMcpServer` until the episode ends. The
server's MCP ``instructions`` are the episode's prompt (contract, API reference, knowledge, task card), so a
client that shows server instructions to its model gives it what ``play`` would.

The episode ends (and result.json is written) when:
- stdio: the client closes its end (end of input);
- HTTP: the process gets SIGINT or SIGTERM (status ``completed``, reason ``server stopped by signal``);
- either: ``finish`` was called (the reply is delivered first), or the wall-clock budget ran out (``timeout``;
  the robot is stopped, later calls get ``EpisodeFinished``).
"""

from __future__ import annotations

import json
import sys
import time

from pyrua_ros.agent.episode import Episode
from pyrua_ros.agent.loop import LoopOutcome

TRANSPORTS = ("stdio", "http")
FINISH_DELIVERY_S = 0.5   # time the finish reply gets to reach the client before the server ends


class McpEpisode(Episode):
    """An episode served over MCP. ``transport``: ``stdio`` | ``http``; ``port``: HTTP port (0: free)."""

    def __init__(self, cfg, *, transport: str = "stdio", port: int = 0, progress=None):
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}; got {transport!r}")
        super().__init__(cfg, progress=progress)
        self.transport = transport
        self.port = port

    def prepare_run_directory(self) -> None:
        super().prepare_run_directory()
        self.notes.append(f"agent: an MCP client over {self.transport}; pyrua_ros did not run a model")

    def start_agent(self) -> None:
        from pyrua_ros.agent.kernel import Kernel, KernelLimits
        from pyrua_ros.agent.mcp_server import ArmMcpServer
        from pyrua_ros.agent.modes import CODE_ARMS
        from pyrua_ros.agent.toolkit import ArmToolkit

        if self.cfg.arm in CODE_ARMS:
            self.kernel = Kernel(self.host.robo, self.workspace, limits=KernelLimits(),
                                 dynamic_methods=tuple(self.host.robo.VLA_PRIMITIVES))
        self.toolkit = ArmToolkit(self.cfg, self.host, self.kernel, self.workspace, on_turn=self._on_turn)
        self.mcp = ArmMcpServer(self.toolkit, instructions=self.prompt.text)

    def _ended(self, deadline: float) -> str | None:
        if self.toolkit.finished:
            return "finished"
        if time.monotonic() >= deadline:
            return "timeout"
        return None

    def run_loop(self) -> None:
        started = time.monotonic()
        deadline = started + self.cfg.budget_s
        outcome = LoopOutcome()
        try:
            ending = self._serve_stdio(deadline) if self.transport == "stdio" else self._serve_http(deadline)
        finally:
            self.policy_wall_s = round(time.monotonic() - started, 3)
        if ending == "timeout":
            self.host.stop("timeout")
            outcome.status, outcome.reason = "timeout", "timeout"
        else:
            outcome.reason = {"finished": None, "client": "the MCP client disconnected",
                              "signal": "server stopped by signal"}[ending]
        if self.toolkit.turn_budget_exhausted and outcome.status == "completed":
            outcome.status, outcome.reason = "call_budget", f"call budget exhausted ({self.cfg.max_turns})"
        outcome.requests = self.mcp.calls
        self.outcome = outcome
        self.status, self.reason = outcome.status, outcome.reason

    def _serve_stdio(self, deadline: float) -> str:
        import anyio

        from pyrua_ros.agent.mcp_server import wire_on_private_fds

        ending = {"why": "client"}

        async def main() -> None:
            async with anyio.create_task_group() as group:
                async def watch() -> None:
                    while (why := self._ended(deadline)) is None:
                        await anyio.sleep(0.1)
                    await anyio.sleep(FINISH_DELIVERY_S if why == "finished" else 0)
                    ending["why"] = why
                    group.cancel_scope.cancel()

                async def serve() -> None:
                    await self.mcp.serve_stdio(stdin_fd, stdout_fd)
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                group.start_soon(serve)

        with wire_on_private_fds() as (stdin_fd, stdout_fd):
            anyio.run(main)
        return ending["why"]

    def _serve_http(self, deadline: float) -> str:
        url = self.mcp.start_http(self.port)
        (self.out / "mcp.json").write_text(json.dumps({"url": url, "transport": "http"}) + "\n")
        print(json.dumps({"mcp_url": url}), file=sys.stderr, flush=True)
        try:
            while (why := self._ended(deadline)) is None:
                time.sleep(0.1)
            if why == "finished":
                time.sleep(FINISH_DELIVERY_S)
            return why
        except KeyboardInterrupt:   # SIGINT, or SIGTERM/SIGHUP turned into it by Episode.run
            return "signal"
        finally:
            self.mcp.stop()


def serve(cfg, *, transport: str = "stdio", port: int = 0, progress=None):
    """Run one MCP-served episode and return its result (also written to ``<cfg.out>/result.json``)."""
    return McpEpisode(cfg, transport=transport, port=port, progress=progress).run()
