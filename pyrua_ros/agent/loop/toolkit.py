"""``ArmToolkit``: what one tool call does (``python``, ``run_program``, a ``robo`` primitive of the tools arm,
``finish``), and what the model gets back.

One turn = one tool call. The toolkit saves the source into the workspace, runs it in the cell kernel, builds
the tool result under the ``--feedback`` mode (``pure``: only what the code produced; ``rich``: plus the
primitive calls of the turn, whether the robot moved, env steps and a state summary), attaches images under the
``--images`` policy, counts the decision budget, and appends a :class:`~pyrua_ros.records.records.TurnRecord`.
Facts: PYRUALEAN-CONTRACT.md 3.2-3.7. Unlike the reference, ``finish`` ends the loop (the loop checks
:attr:`finished`), and the decision budget counts every ``python``/``run_program`` call. On the tools arm
(``--arm tools``, :mod:`pyrua_ros.agent.loop.primitive_tools`) every primitive call is one decision: it counts against
the same budget and gets the same feedback and images as a cell that made that one call.

The toolkit is also what every runtime serves: ``tool_specs()`` are the chat-completions function specs of the
arm (the MCP server publishes the same list), ``execute()`` runs one call.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time
from typing import Any

from pyrua_ros.agent.loop import primitive_tools
from pyrua_ros.agent.runtimes.tools import finish_spec, tool_specs
from pyrua_ros.records.records import FinishRecord, TurnRecord
from pyrua_ros.records.text import safe_text
from pyrua_ros.settings.config import AgentSettings
from pyrua_ros.settings.modes import FINISH_STATUSES, RICH_CALL_LIMIT

RESULT_TEXT_LIMIT = 20_000
CALL_BUDGET_ERROR = "call budget exhausted: the episode is over, call finish"


def tool_name(name: str) -> str:
    """A tool name as the toolkit knows it: MCP clients (Claude Code) call ``mcp__<server>__<tool>``; the part after
    the last ``__`` is the tool (as the reference's MCP server reduces it)."""
    return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name


@dataclasses.dataclass
class ToolReply:
    """What goes back to the model for one call: the JSON ``text`` and PNG ``images`` (name, bytes)."""

    payload: dict
    images: list[tuple[str, bytes]]

    @property
    def text(self) -> str:
        text = safe_text(json.dumps(self.payload, indent=2, ensure_ascii=False, default=str))
        if len(text) > RESULT_TEXT_LIMIT:
            text = text[:RESULT_TEXT_LIMIT] + "\n[truncated]"
        return text

    @property
    def ok(self) -> bool:
        return not self.payload.get("error")


def _usage_dict(usage) -> dict | None:
    if usage is None or not getattr(usage, "reported", False):
        return None
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens, "reasoning_tokens": usage.reasoning_tokens}


class ArmToolkit:
    """Executes the tools of one arm against a kernel whose ``robo`` proxies ``host.robo``."""

    def __init__(self, cfg: AgentSettings, host, kernel, workspace: pathlib.Path, *, on_turn=None, on_call=None):
        self.cfg = cfg
        self.host = host
        self.kernel = kernel
        self.workspace = workspace
        self.turns: list[TurnRecord] = []
        self.sandbox_flags: list[dict] = []
        self.finish: FinishRecord | None = None
        self.turn_budget_exhausted = False
        self.kernel_restarts = 0
        self.primitive_calls = 0
        self.last_code: str | None = None
        self.deadline: float | None = None   # the loop's wall-clock budget (time.monotonic()); bounds every job
        self._on_turn = on_turn
        self._on_call = on_call
        self._primitives = tuple(primitive_tools.primitive_methods(host.robo)) if cfg.arm == "tools" else ()

    def tool_specs(self) -> list[dict]:
        """The arm's tools as chat-completions function specs: ``python`` or ``run_program`` (descriptions
        following ``--feedback`` / ``--images``), or one per ``robo`` primitive (tools arm); then ``finish``."""
        if self.cfg.arm == "tools":
            return [*primitive_tools.primitive_specs(self.host.robo), finish_spec()]
        return tool_specs(self.cfg.arm, self.cfg.feedback, self.cfg.images, self.cfg.max_programs)

    def tool_names(self) -> list[str]:
        """Names of the tools this arm serves, ``finish`` last."""
        return [spec["function"]["name"] for spec in self.tool_specs()]

    def _counted(self, name: str) -> bool:
        """True for the calls that count as decisions and get feedback and images (everything but finish)."""
        if self.cfg.arm == "tools":
            return name in self._primitives
        return name == ("python" if self.cfg.arm == "cells" else "run_program")

    # ------------------------------------------------------------------ dispatch
    @property
    def finished(self) -> bool:
        return self.finish is not None

    def execute(self, name: str, arguments: dict | None, parse_error: str | None = None, *, usage=None,
                latency_s: float | None = None) -> ToolReply:
        """Run one tool call; never raises for the model's mistakes (they become an ``error`` result).

        ``usage``/``latency_s``: of the model request that made the call, kept in the turn record.
        """
        started = time.monotonic()
        name = tool_name(name)
        if self._on_call:
            self._on_call(name)
        ledger_mark = len(self.host.ledger.records)
        steps_mark = self._env_step()
        flags: list[str] = []
        if parse_error is not None:
            reply = ToolReply({"error": f"invalid tool arguments: {parse_error}"}, [])
        elif name == "finish":
            reply = self._finish(arguments or {})
        elif name == "python" and self.cfg.arm == "cells":
            reply, flags = self._python(arguments or {})
        elif name == "run_program" and self.cfg.arm == "program":
            reply, flags = self._program(arguments or {})
        elif name in self._primitives:
            reply = self._primitive(name, arguments or {})
        else:
            reply = ToolReply({"error": f"unknown tool: {name}"}, [])   # the reference's words
        moved, env_steps = self._motion_since(ledger_mark, steps_mark)
        if self._counted(name) and self.cfg.feedback == "rich" and "error" not in reply.payload:
            self._add_rich(reply.payload, ledger_mark, moved, env_steps)
        if self._counted(name) and "error" not in reply.payload:
            self._attach_images(reply, moved)
        record = TurnRecord(index=len(self.turns), tool=name, elapsed_s=round(time.monotonic() - started, 3),
                            ok=reply.ok, moved=moved, env_steps=env_steps, terminated=self._done(),
                            sandbox_flags=tuple(flags), usage=_usage_dict(usage), model_latency_s=latency_s,
                            first_call=ledger_mark, calls=len(self.host.ledger.records) - ledger_mark)
        self.turns.append(record)
        if flags:
            self.sandbox_flags.append({"turn": record.index, "flags": flags})
        if self._on_turn:
            self._on_turn(record, reply)
        return reply

    # ------------------------------------------------------------------ tools
    @property
    def programs(self) -> int:
        """run_program calls that ran (the kernel numbers them); cells likewise via ``kernel.cells``."""
        return self.kernel.programs

    def _budget_error(self) -> ToolReply | None:
        used = (self.kernel.cells + self.kernel.programs if self.kernel is not None else 0) + self.primitive_calls
        if self.cfg.max_turns is not None and used >= self.cfg.max_turns:
            self.turn_budget_exhausted = True
            self.host.stop("call_budget")
            return ToolReply({"error": CALL_BUDGET_ERROR}, [])
        return None

    def _job_timeout(self, limit: float) -> float:
        """A cell's or program's time limit: ``limit``, but never past the episode's wall-clock budget."""
        if self.deadline is None:
            return limit
        return max(0.05, min(limit, self.deadline - time.monotonic()))

    def _python(self, args: dict) -> tuple[ToolReply, list[str]]:
        code = args.get("code")
        if not isinstance(code, str):
            return ToolReply({"error": "python needs a string argument `code`"}, []), []
        refused = self._budget_error()
        if refused:
            return refused, []
        self.last_code = code
        outcome = self.kernel.run_cell(code, timeout_s=self._job_timeout(self.cfg.cell_timeout_s))
        if outcome.restarted:
            self.kernel_restarts += 1
        # the reference's key order: cell, value | exception | episode_finished, stdout, stderr, elapsed_s
        # (a refused cell is only cell + exception)
        payload: dict[str, Any] = {"cell": outcome.cell}
        if outcome.value is not None:
            payload["value"] = outcome.value
        if outcome.exception:
            payload["exception"] = outcome.exception
        if outcome.episode_finished:
            payload["episode_finished"] = outcome.episode_finished
        if not outcome.refused:
            payload.update(stdout=outcome.stdout, stderr=outcome.stderr, elapsed_s=round(outcome.elapsed_s, 2))
        if outcome.notice:
            payload["notice"] = outcome.notice
        reply = ToolReply(payload, [(f"display_{i}", png) for i, png in enumerate(outcome.images)])
        return reply, list(outcome.sandbox_flags)

    def _program(self, args: dict) -> tuple[ToolReply, list[str]]:
        refused = self._budget_error()
        if refused:
            return refused, []
        if self.cfg.max_programs is not None and self.programs >= self.cfg.max_programs:
            payload = {"error": f"program budget exhausted ({self.cfg.max_programs}); call finish",
                       "state": self.host.summary()}
            return ToolReply(payload, []), []
        code, rel = args.get("code"), args.get("path")
        if not code and not rel:
            return ToolReply({"error": "run_program needs `code` or `path`"}, []), []
        if not isinstance(code or "", str) or not isinstance(rel or "", str):
            return ToolReply({"error": "run_program: `code` and `path` must be strings"}, []), []
        try:
            outcome = self.kernel.run_program(code=code or None, path=None if code else str(rel),
                                              timeout_s=self._job_timeout(self.cfg.budget_s))
        except ValueError as exc:   # path outside the workspace, missing file: not counted
            return ToolReply({"error": str(exc)}, []), []
        self.last_code = outcome.code
        if outcome.restarted:
            self.kernel_restarts += 1
        # the reference's keys: a program that was refused or did not load is only program, file, exception;
        # one that ran adds status, reason and exception when set, stdout, stderr, elapsed_s, programs_left
        payload: dict[str, Any] = {"program": outcome.program, "file": outcome.file}
        if outcome.refused or not outcome.loaded:
            payload["exception"] = outcome.exception
        else:
            payload["status"] = outcome.status
            payload.update({k: getattr(outcome, k) for k in ("reason", "exception") if getattr(outcome, k)})
            payload.update(stdout=outcome.stdout, stderr=outcome.stderr, elapsed_s=outcome.elapsed_s)
        if outcome.notice:
            payload["notice"] = outcome.notice
        if not (outcome.refused or not outcome.loaded):
            payload["programs_left"] = (None if self.cfg.max_programs is None
                                        else self.cfg.max_programs - self.programs)
        images = [(f"display_{i}", png) for i, png in enumerate(outcome.images)]
        return ToolReply(payload, images), list(outcome.sandbox_flags)

    def _primitive(self, name: str, args: dict) -> ToolReply:
        """One ``robo.<name>(**args)`` call on the real robot (tools arm): the result dataclass as JSON, or the
        exception text a cell making the same call would end with."""
        if not isinstance(args, dict):
            return ToolReply({"error": f"{name} needs a JSON object of arguments"}, [])
        refused = self._budget_error()
        if refused:
            return refused
        self.primitive_calls += 1
        payload: dict[str, Any] = {"call": self.primitive_calls, "tool": name}
        started = time.monotonic()
        # the deadline of a cell making this one call: motion stops there and the call raises ToolError
        self.host.set_deadline(started + self._job_timeout(self.cfg.cell_timeout_s))
        try:
            payload["value"] = primitive_tools.result_json(getattr(self.host.robo, name)(**args))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:   # EpisodeFinished is a BaseException, like in a cell
            if primitive_tools.error_text(exc).startswith("EpisodeFinished"):
                payload["episode_finished"] = str(getattr(exc, "reason", exc))
            else:
                payload["exception"] = primitive_tools.error_text(exc)
        finally:
            self.host.set_deadline(None)
        payload["elapsed_s"] = round(time.monotonic() - started, 2)
        self.last_code = f"robo.{name}(**{args!r})"
        return ToolReply(payload, [])

    def _finish(self, args: dict) -> ToolReply:
        status = args.get("status")
        summary = args.get("summary", "")
        if status not in FINISH_STATUSES:
            return ToolReply({"error": f"finish: status must be one of {', '.join(FINISH_STATUSES)}; got {status!r}"},
                             [])
        self.finish = FinishRecord(status=status, summary=str(summary), environment_terminated=self._done())
        return ToolReply({"ok": True, **self.finish.to_json()}, [])

    # ------------------------------------------------------------------ feedback and images
    def _env_step(self) -> int:
        try:
            return int(self.host.backend.status().step)
        except Exception:
            return 0

    def _done(self) -> bool:
        try:
            return bool(self.host.robo.done)
        except Exception:
            return False

    def _motion_since(self, ledger_mark: int, steps_mark: int) -> tuple[bool, int]:
        records = self.host.ledger.records[ledger_mark:]
        moved = any(r.stateful for r in records)
        return moved, max(0, self._env_step() - steps_mark)

    def _add_rich(self, payload: dict, ledger_mark: int, moved: bool, env_steps: int) -> None:
        calls = [r for r in self.host.ledger.records[ledger_mark:] if r.tool != "artifact"][-RICH_CALL_LIMIT:]
        payload["primitive_calls"] = [
            {"tool": r.tool, "kwargs": r.kwargs, "ok": r.ok, "error": r.error,
             **{k: v for k, v in (r.summary or {}).items() if k != "eef_pos"}}
            for r in calls
        ]
        payload["moved"] = moved
        payload["env_steps"] = env_steps
        payload["state"] = self.host.summary()
        payload["episode_done"] = self._done()

    def _attach_images(self, reply: ToolReply, moved: bool) -> None:
        names: list[str] = []
        if self.cfg.images == "on-motion" and moved:
            names = list(self.host.robo.ON_MOTION_IMAGES)
        elif self.cfg.images == "on-demand":
            names = [f"{camera}_high.png" for camera in self.host.take_show_requests()]
        else:
            self.host.take_show_requests()
        errors = []
        for name in names:
            try:
                reply.images.append((name, self.host.artifact(name)))
            except Exception as exc:  # a capture that failed is reported, the turn goes on
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
        if reply.images:
            reply.payload["images"] = [n for n, _ in reply.images]
        if errors:
            reply.payload["display_errors"] = errors
