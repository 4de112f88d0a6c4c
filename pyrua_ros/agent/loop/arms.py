"""The loop arms (``cells``, ``program``, ``tools``) as an agent strategy of an
:class:`~pyrua_ros.agent.run.episode.Episode`.

:class:`LoopAgent` builds the prompt from the live ``robo``, starts the kernel (code arms) and the runtime of
``cfg.agent.runtime``, runs the agent under the wall-clock budget while reporting progress (a line per turn, a live
line while a call runs), and writes the loop's records (tool_turns.json, transcript.json, last_message.md,
``<runtime>_events.jsonl``) and the play ``result.json`` (:class:`~pyrua_ros.records.records.EpisodeResult`).

The ``openai`` and ``replay`` runtimes answer :func:`pyrua_ros.agent.loop.loop.run_loop`'s requests; the ``codex`` and
``claude`` runtimes run their CLI's own loop against the same toolkit served by an MCP server on loopback
(:meth:`LoopAgent._run_cli`). ``pyrua-ros mcp`` (:class:`pyrua_ros.agent.run.mcp_episode.McpAgent`) is this strategy
with an outside MCP client in the runtime's place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time

from pyrua_ros import cputime
from pyrua_ros.agent.loop.loop import run_loop
from pyrua_ros.agent.loop.toolkit import ArmToolkit
from pyrua_ros.agent.prompting import contract as contract_mod
from pyrua_ros.agent.prompting import guides as guides_mod
from pyrua_ros.agent.prompting import prompt as prompt_mod
from pyrua_ros.agent.runtimes import cli_reasoning, make_cli_runtime, make_runtime
from pyrua_ros.agent.runtimes.base import JsonlEventSink
from pyrua_ros.records.outcome import StrategyOutcome
from pyrua_ros.records.records import EpisodeResult, Generation, HostInfo, PromptRecord, now_iso
from pyrua_ros.settings.modes import CODE_ARMS, MCP_RUNTIME
from pyrua_ros.settings.runtimes import RUNTIMES

TICK_S = 1.0   # how often the live status is refreshed while the loop runs [s]


TOOLS_SANDBOX = ("tools arm: no model-written code runs, so no cell kernel is started; each robot tool call runs "
                 "on the real robo in the agent process under the per-call deadline of a cell (--cell-timeout-s, "
                 "never past the budget): at the deadline motion stops and the call raises ToolError")


class LoopAgent:
    """The ``cells`` / ``program`` / ``tools`` arm over a runtime (``openai``, ``replay``, ``codex``, ``claude``),
    for a :class:`PlayConfig`."""

    def __init__(self, cfg):
        self.cfg = cfg
        # the runtime's declaration; None for pyrua-ros mcp (an outside MCP client in the runtime's place)
        self._spec = None if cfg.agent.runtime == MCP_RUNTIME else RUNTIMES[cfg.agent.runtime]
        self.kernel = self.runtime = self.toolkit = self.events = self.mcp = None
        self.outcome = None
        self.turns_written = None   # the tool turns tool_turns.json was written from: result.json counts the same
        self.guides = False
        self.deadline: float | None = None
        self._running_since: float | None = None
        self._tool: str | None = None
        self._ep = None

    # ------------------------------------------------------------------ AgentStrategy
    def start(self, ep) -> None:
        self._ep = ep
        agent = self.cfg.agent
        if self._spec is not None and self._spec.note:
            ep.notes.append(self._spec.note)
        ep.phase("prompt", f"arm {agent.arm}, images {agent.images}, feedback {agent.feedback}")
        if agent.uses_guides:
            self.guides = guides_mod.copy_guides(ep.workspace, agent.guides_dir, rpent_root=ep.compat.rpent_root)
            if self.guides["source"] != str(guides_mod.GUIDES_DIR):
                ep.notes.append(f"guides copied from {self.guides['source']}")
        reference_root = prompt_mod.reference_root_from_env(str(agent.reference_root) if agent.reference_root
                                                            else None)
        options = contract_mod.PromptOptions(arm=agent.arm, robot=ep.settings.robot,
                                           primitives=ep.settings.primitive_set, feedback=agent.feedback,
                                           images=agent.images, budget_s=agent.budget_s, max_turns=agent.max_turns,
                                           max_programs=agent.max_programs, guides=agent.uses_guides,
                                           reference_root=reference_root)
        with cputime.section("prompt"):
            ep.prompt = prompt_mod.build_prompt(ep.robot.robo, ep.card, options, card_dir=ep.out)
        if ep.prompt.sources != "live":
            ep.notes.append(f"prompt text rendered from the reference sources at {ep.prompt.sources}")
        ep.records.write_text("prompt.txt", ep.prompt.text)
        if agent.arm in CODE_ARMS:   # the tools arm runs no model-written code: no kernel
            self.kernel = ep.open_kernel(self.cfg.sandbox)
        self.toolkit = ArmToolkit(agent, ep.robot, self.kernel, ep.workspace, on_turn=self._on_turn,
                                  on_call=self._on_call)
        self.start_runtime(ep)

    def start_runtime(self, ep) -> None:
        """The runtime of ``cfg.agent.runtime``, offered the toolkit's tools (the CLI runtimes write their own
        ``<runtime>_events.jsonl``)."""

        agent = self.cfg.agent
        if self._spec.kind == "cli":
            self.runtime = make_cli_runtime(self.cfg, out_dir=ep.out, workspace=ep.workspace,
                                            tool_names=self.toolkit.tool_names(), kernel=self.kernel)
            return
        self.events = JsonlEventSink(ep.out / f"{agent.runtime}_events.jsonl")

        def sink(event: dict) -> None:
            self.events(event)
            self._announce_retry(ep, event)

        self.runtime = make_runtime(self.cfg, events=sink, tools=self.toolkit.tool_specs())

    def _announce_retry(self, ep, event: dict) -> None:
        """A model request that failed and will be retried, told to the person watching as it happens
        ("model server: connection refused, retry 3/5 in 4 s"), not after the retries are spent."""
        if event.get("event") != "error" or event.get("retry_in_s") is None or ep.progress is None:
            return
        with contextlib.suppress(Exception):   # a display problem never ends an episode
            ep.progress.message(f"model server: {retry_cause(event)}, retry {event.get('attempt')}/"
                                f"{self.cfg.model.max_retries} in {float(event['retry_in_s']):.0f} s",
                                elapsed_s=time.monotonic() - ep.t0)

    @property
    def wall_budget_s(self) -> float:
        """The agent's wall-clock budget [s], from its start (the episode's watchdog adds its margin)."""
        return self.cfg.agent.budget_s

    @property
    def model_calls(self) -> bool:
        """True when a model chooses the calls (a model runtime or an outside MCP client), so it could call a VLA
        skill the primitive set lacks; a replay plays back recorded code."""
        return self._spec is None or self._spec.uses_model

    @property
    def uses_model(self) -> bool:
        """True when a model made the calls (not a replay, not an outside MCP client)."""
        return self._spec is not None and self._spec.uses_model

    def run(self, ep) -> StrategyOutcome:
        agent = self.cfg.agent
        model = f", model {self.cfg.model.model}" if self.uses_model else ""
        ep.phase("agent", f"runtime {agent.runtime}{model}; budget {agent.budget_s:g} s"
                          + (f", {agent.max_turns} turns" if agent.max_turns else ""))
        started = time.monotonic()
        self.deadline = started + agent.budget_s
        self.toolkit.deadline = self.deadline   # no cell or program runs past the budget
        # at the budget the episode ends even inside a robo call: motion raises EpisodeFinished("timeout")
        watchdog = threading.Timer(agent.budget_s, ep.robot.stop, args=("timeout",))
        watchdog.daemon = True
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(stop,), name="progress", daemon=True)
        ticker.start()
        watchdog.start()
        try:
            self.outcome = self.drive(ep)
        finally:
            watchdog.cancel()
            stop.set()
            ticker.join(2 * TICK_S)
        if self.outcome.status == "timeout":
            ep.robot.stop("timeout")
        if self.outcome.status == "planner_error" and self.toolkit.finish is not None:   # the agent had finished
            return dataclasses.replace(self.outcome, status="completed")
        return self.outcome

    def drive(self, ep):
        """Run the agent until it finishes, the budget ends or the runtime fails; a
        :class:`~pyrua_ros.agent.runtimes.base.LoopOutcome`."""

        if self._spec is not None and self._spec.kind == "cli":
            return self._run_cli(ep)
        images = [ep.robot.artifact(f"{c}_high.png", step=0) for c in ep.host.backend.cameras]
        return run_loop(self.runtime, self.toolkit, deadline=self.deadline, first_prompt=ep.prompt.text,
                        first_images=images)

    def _run_cli(self, ep):
        """The codex / claude runtimes: serve the toolkit over MCP (streamable HTTP on loopback) and let the CLI run
        until it exits, the budget ends, or finish / the call budget ended the episode."""
        from pyrua_ros.agent.loop.mcp_server import ArmMcpServer  # noqa: PLC0415 (mcp: the MCP arm only)

        self.mcp = ArmMcpServer(self.toolkit)
        url = self.mcp.start_http()
        card_images = [ep.out / path for path in ep.card.images.values()]
        outcome = None
        try:
            outcome = self.runtime.run_episode(
                ep.prompt.text, card_images, url, self.deadline,
                finished=lambda: self.toolkit.finished or self.toolkit.turn_budget_exhausted, mcp_token=self.mcp.token)
        finally:
            if outcome is None or outcome.status == "timeout":
                ep.robot.stop("timeout")   # a cell still running in the server ends now
            self.mcp.stop()
        if self.toolkit.turn_budget_exhausted and outcome.status == "completed":
            outcome = dataclasses.replace(outcome, status="call_budget",
                                          reason=f"call budget exhausted ({self.cfg.agent.max_turns})")
        if getattr(self.runtime, "shell_commands", None):
            outcome = dataclasses.replace(outcome, notes=(
                *outcome.notes, f"{len(self.runtime.shell_commands)} shell command(s) used; audit "
                                f"{self.cfg.agent.runtime}_events.jsonl"))
        return outcome

    def close(self, ep) -> None:
        try:
            if self.mcp is not None:
                self.mcp.stop()
            if self.kernel is not None:
                self.kernel.close()
        finally:
            if self.events is not None:
                self.events.close()
                ep.records.failures.extend(self.events.failures)
            if hasattr(self.runtime, "close"):
                self.runtime.close()
            records = ep.records   # the one writer: texts made safe, a failed record noted, never raised
            if self.toolkit is not None:
                self.turns_written = list(self.toolkit.turns)
                records.write_json("tool_turns.json", [turn.to_json() for turn in self.turns_written])
            if self.runtime is not None:
                try:
                    transcript = self.runtime.transcript()
                except Exception as exc:
                    records.failures.append(f"transcript.json could not be made: {type(exc).__name__}: {exc}")
                else:
                    records.write_json("transcript.json", transcript)
            records.write_text("last_message.md", (self.outcome.last_message if self.outcome else "") or "")

    def result(self, ep, placeholder: bool = False) -> EpisodeResult:
        cfg, agent = self.cfg, self.cfg.agent
        calls = ep.calls_for_result()
        turns = self.turns_written if self.turns_written is not None else (
            list(self.toolkit.turns) if self.toolkit else [])
        usage = self.usage()
        is_model = self.uses_model
        cli = _cli_facts(self.runtime)
        generation = Generation(
            runtime=agent.runtime, model=cfg.model.model if is_model else None,
            input_tokens=usage.get("input_tokens"), cached_input_tokens=usage.get("cached_input_tokens"),
            output_tokens=usage.get("output_tokens"), reasoning_output_tokens=usage.get("reasoning_output_tokens"),
            total_tokens=usage.get("total_tokens"), requests=int(usage.get("requests") or 0),
            turns=len(turns),
            usage_source=cli.get("usage_source") or ("server usage" if is_model else "none"),
            sandbox_flags=tuple(self.toolkit.sandbox_flags) if self.toolkit else (),
            extra={"kernel_restarts": self.toolkit.kernel_restarts if self.toolkit else 0, **cli.get("audit", {})},
        )
        status, reason = ep.status, ep.reason
        if placeholder:
            status, reason = "error", ("killed: the episode host started but did not finish (this placeholder "
                                       "is replaced when the episode ends)")
        e = ep.settings
        return EpisodeResult(
            arm=agent.arm, backend="ros2", robot=e.robot, suite=e.suite, task=e.task, seed=e.seed,
            task_language=ep.task_language, model=cfg.model.model if is_model else None,
            reasoning_effort=cli_reasoning(cfg) if is_model else None, max_programs=agent.max_programs,
            images=agent.images, feedback=agent.feedback, guides=self.guides, max_turns=agent.max_turns,
            budget_mode=agent.budget_mode,
            environment_success=bool(ep.environment_success), status=status, reason=reason, error=ep.error,
            finish=self.toolkit.finish if self.toolkit else None,
            **ep.call_counts(calls), tool_turns=len(turns),
            policy_wall_s=ep.policy_wall_s, startup_s=ep.startup_s,
            total_wall_s=round(time.monotonic() - ep.t0, 3), timeout_s=agent.budget_s,
            max_episode_steps=e.max_episode_steps,
            prompt=PromptRecord(ep.prompt.chars, ep.prompt.sha256, tuple(ep.prompt.images)) if ep.prompt else None,
            generation=generation,
            host=HostInfo(python=sys.executable, cuda_device=ep.compat.cuda_device,
                          primitive_set=e.primitive_set, runtime=agent.runtime, boot_options=cfg.boot_options(),
                          sandbox=TOOLS_SANDBOX if agent.arm == "tools" else ep.sandbox_description(),
                          rpent_root=ep.compat.rpent_root,
                          **cli.get("host", {})),
            created_at=now_iso(), notes=ep.final_notes(placeholder),
            runtime_returncode=None if placeholder else cli.get("returncode", 0),
            planner_attempts=cli.get("attempts", 1), env_steps_total=ep.env_steps_total,
            state_digest=None if placeholder else ep.state_digest)

    # ------------------------------------------------------------------ status people watch
    def usage(self) -> dict:
        if self.runtime is None:
            return {}
        try:
            return self.runtime.usage_totals()
        except Exception:
            return {}

    def status(self, last: str = "") -> dict:
        """The agent status (``/agent/status`` JSON and the terminal progress): turn, budget, steps, tokens,
        the running tool, elapsed time on the episode's clock and the budget left [s]."""
        ep, agent = self._ep, self.cfg.agent
        now = time.monotonic()
        episode = ep.episode_status() if ep is not None else {}
        running = None
        if self._running_since is not None:
            running = {"tool": self._tool, "for_s": round(now - self._running_since, 1)}
        return {"turn": len(self.toolkit.turns) if self.toolkit else 0, "max_turns": agent.max_turns or 0,
                "steps": episode.get("step"), "tokens": self.usage().get("total_tokens"), "last": last,
                "elapsed_s": round(now - ep.t0, 1) if ep is not None else None,
                "budget_left_s": round(max(0.0, self.deadline - now), 1) if self.deadline else None,
                "running": running, "episode": episode}

    def _on_call(self, name: str) -> None:
        self._tool, self._running_since = name, time.monotonic()
        if self._ep is not None and self._ep.video is not None:
            self._ep.video.note_turn(len(self.toolkit.turns) + 1 if self.toolkit else 1)

    def _on_turn(self, record, reply) -> None:
        self._running_since = None
        payload = reply.payload
        last = payload.get("error") or payload.get("exception") or payload.get("episode_finished") \
            or (payload.get("stdout") or "").strip().splitlines()[-1:] or ""
        if isinstance(last, list):
            last = last[0] if last else ""
        status = self.status(f"{record.tool}: {last}" if last else record.tool)
        ep = self._ep
        if ep.progress is not None:
            ep.progress.turn(status)
        if ep.publisher is not None:
            with cputime.section("records: agent topics"):
                ep.publisher(status, record, reply, code=self.toolkit.last_code if self.toolkit else None)

    def _tick(self, stop: threading.Event) -> None:
        ep = self._ep
        while not stop.wait(TICK_S):
            if ep.progress is not None:
                try:
                    ep.progress.tick(self.status())
                except Exception:   # a display problem never ends an episode
                    pass


def retry_cause(event: dict) -> str:
    """A failed model request's cause in a few words: "connection refused", "HTTP 503", "timeout", ..."""
    message = " ".join(str(event.get("message") or "").split())
    lowered = message.lower()
    for marker in ("connection refused", "connection reset", "name or service not known", "timed out"):
        if marker in lowered:
            return marker
    if event.get("status"):
        return f"HTTP {event['status']}"
    return f"{event.get('kind') or 'error'}: {message[:80]}" if message else str(event.get("kind") or "error")


def _cli_facts(runtime) -> dict:
    """What a codex / claude runtime adds to result.json (empty for the loop runtimes): its event audit (under
    ``generation``), ``host`` fields, the CLI's exit status, planner attempts and the usage source."""
    if runtime is None or not hasattr(runtime, "audit"):
        return {}
    audit = runtime.audit()
    shadowed = {f.name for f in dataclasses.fields(Generation)}
    return {"audit": {k: v for k, v in audit.items() if k not in shadowed},
            "usage_source": audit.get("usage_source"), "host": runtime.host_fields(),
            "returncode": runtime.returncode, "attempts": max(1, runtime.attempts)}
