"""The ``replay`` runtime: plays back recorded code as tool calls, with no model (zero usage).

Sources:
- **a run directory** (has ``workspace/``): cells arm replays ``workspace/cell_NNN.py`` in order as ``python``
  calls, program arm replays ``workspace/program_NN.py`` as ``run_program`` calls; then ``finish`` with the
  ``finish`` recorded in its ``result.json``, or ``finish(status="stuck")`` when there is none.
- **a program file** defining ``run(robo)``: cells arm sends one ``python`` call with the file's source plus a
  trailing ``run(robo)``; program arm one ``run_program`` call with the code. Then ``finish``: ``success`` if a
  tool result reported the episode terminated, else ``failure``.

Responses are the same :class:`ModelResponse` records as the openai runtime's (``finish_reason`` ``tool_calls``,
``usage`` all zero, ``latency_s`` 0). After ``finish`` the script is spent: a further ``respond`` raises
RuntimeFailure("budget").
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import time
from collections.abc import Callable

from pyrua_ros.examples import program_for
from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.records import bounded
from pyrua_ros.settings.paths import check_input_path
from pyrua_ros.settings.schema import SettingError

from .base import EventSink, ModelResponse, RuntimeFailure, ToolCall, Usage, UsageTotals
from .tools import ARMS

_CELL = re.compile(r"cell_(\d{3})\.py")
_PROGRAM = re.compile(r"program_(\d{2})\.py")
SOURCE_BYTES = 4 * 2**20   # a recorded cell or program read at most (the kernel's own program limit)


def _defines_run(source: str, path: pathlib.Path) -> None:
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ValueError(f"replay source {path} is not valid Python: {exc}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "run" and node.args.args:
            return
    raise ValueError(f"replay source {path} must define a top-level function run(robo)")


def _reports_termination(text: str) -> bool:
    """True when a tool result (JSON text) says the episode ended (terminated / episode_done / episode_finished)."""
    try:
        result = json.loads(text)
    except ValueError:
        return False
    if not isinstance(result, dict):
        return False
    state = result.get("state") if isinstance(result.get("state"), dict) else {}
    return bool(result.get("terminated") or result.get("episode_done") or "episode_finished" in result
                or state.get("terminated"))


class ReplayRuntime:
    """Replays ``source`` (run directory or ``run(robo)`` program file) for ``arm`` (cells | program)."""

    def __init__(self, source: str | pathlib.Path, arm: str, event_sink: EventSink | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if arm not in ARMS:
            raise ValueError(f"arm must be one of {', '.join(ARMS)}; got {arm!r}")
        self.source = pathlib.Path(source)
        self.arm = arm
        self.events: list[dict] = []
        self.notes: list[str] = []
        self._sink = event_sink
        self._clock = clock
        self._t0 = clock()
        self._messages: list[dict] = []
        self._index = 0
        self._terminated = False
        self._calls, self._recorded_finish = self._load()

    @classmethod
    def from_config(cls, cfg, events: EventSink | None = None, tools: list[dict] | None = None) -> ReplayRuntime:
        """The runtime of a PlayConfig: the source :func:`replay_source` resolves (``tools`` is not used: the
        recording names its calls)."""
        return cls(source=replay_source(cfg.agent, cfg.episode), arm=cfg.agent.arm, event_sink=events)

    @classmethod
    def check_config(cls, cfg) -> None:
        """The replay source exists, can be read and holds what this runtime's loader accepts."""
        source = replay_source(cfg.agent, cfg.episode)
        check_input_path("--replay", source, kind="any")
        try:
            cls(source, cfg.agent.arm)   # the loader reads and checks the source
        except (ValueError, OSError, SyntaxError) as exc:
            raise SettingError(f"--replay {source}: {exc}") from None

    def _load(self) -> tuple[list[tuple[str, dict]], dict | None]:
        src = self.source
        tool = "python" if self.arm == "cells" else "run_program"
        if src.is_dir():
            return self._load_run_directory(src, tool)
        if src.is_file():
            source = src.read_text()
            _defines_run(source, src)
            code = source.rstrip("\n") + "\n\nrun(robo)\n" if self.arm == "cells" else source
            return [(tool, {"code": code})], None
        raise ValueError(f"replay source {src} does not exist (give a run directory or a .py file defining run(robo))")

    def _load_run_directory(self, src: pathlib.Path, tool: str) -> tuple[list[tuple[str, dict]], dict | None]:
        """The recorded calls and finish of the run directory ``src``, read as hostile: every file is opened
        relative to ``src`` with no link followed on the way (``kernel.workspace.read_file``), sizes bounded,
        ``result.json`` parsed with ``records.bounded``."""
        root = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                ws = os.open("workspace", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
            except OSError:
                raise ValueError(f"replay source {src} is a directory without workspace/ (expected a run "
                                 "directory; a link is not followed)") from None
            try:
                names = os.listdir(ws)
            finally:
                os.close(ws)
            pattern = _CELL if self.arm == "cells" else _PROGRAM
            files = sorted((n for n in names if pattern.fullmatch(n)), key=lambda n: int(pattern.fullmatch(n).group(1)))
            if not files:
                kind = "cell_NNN.py" if self.arm == "cells" else "program_NN.py"
                raise ValueError(f"replay source {src}: workspace/ holds no {kind} files for the {self.arm} arm")
            calls = []
            for name in files:
                try:
                    code = wsfiles.read_file(root, f"workspace/{name}", SOURCE_BYTES).decode("utf-8", "replace")
                except wsfiles.UnsafePath as exc:
                    raise ValueError(f"replay source {src}: {exc}") from None
                calls.append((tool, {"code": code}))
            finish = None
            try:
                recorded = bounded.loads(wsfiles.read_file(root, "result.json", bounded.MAX_FILE_BYTES))
            except wsfiles.UnsafePath as exc:
                if "No such file" not in str(exc):
                    raise ValueError(f"replay source {src}: {exc}") from None
                recorded = None
            except bounded.JSONRefused as exc:
                raise ValueError(f"replay source {src}: result.json: {exc}") from None
            recorded = recorded.get("finish") if isinstance(recorded, dict) else None
            if isinstance(recorded, dict) and recorded.get("status"):
                finish = {"status": recorded["status"], "summary": recorded.get("summary") or ""}
            return calls, finish
        finally:
            os.close(root)

    def _emit(self, event: str, **fields) -> None:
        record = {"event": event, "t": round(self._clock() - self._t0, 3), "wall": round(time.time(), 3), **fields}
        self.events.append(record)
        if self._sink is not None:
            self._sink(record)

    def describe(self) -> dict:
        return {"runtime": "replay", "source": str(self.source), "arm": self.arm, "calls": len(self._calls),
                "recorded_finish": self._recorded_finish}

    def start(self, prompt: str, images: list[bytes]) -> None:
        self._messages.append({"role": "user", "content": prompt, "images": len(images)})
        self._emit("start", **self.describe(), prompt_chars=len(prompt), images=len(images))

    def respond(self, deadline: float) -> ModelResponse:
        if self._clock() >= deadline:
            self._emit("failure", kind="budget", message="deadline passed")
            raise RuntimeFailure("budget", f"the episode deadline passed before replay response {self._index + 1}")
        if self._index > len(self._calls):
            raise RuntimeFailure("budget", f"replay script exhausted after {self._index} response(s) "
                                           "(finish was already sent)")
        self._index += 1
        if self._index <= len(self._calls):
            name, arguments = self._calls[self._index - 1]
        else:
            name = "finish"
            arguments = self._recorded_finish or self._default_finish()
        call = ToolCall(id=f"replay_{self._index}", name=name, arguments=arguments,
                        raw_arguments=json.dumps(arguments, ensure_ascii=False), parse_error=None, source="tool_calls")
        self._messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": name, "arguments": call.raw_arguments}}]})
        self._emit("response", request_index=self._index, tool_calls=[{"id": call.id, "name": name}])
        return ModelResponse(tool_calls=(call,), content=None, reasoning=None, usage=Usage(),
                             finish_reason="tool_calls", request_index=self._index, latency_s=0.0)

    def _default_finish(self) -> dict:
        if self.source.is_dir():
            return {"status": "stuck", "summary": f"replay of {self.source}: no finish was recorded"}
        status = "success" if self._terminated else "failure"
        return {"status": status, "summary": f"replayed {self.source.name}; the episode "
                                             f"{'terminated' if self._terminated else 'did not terminate'}"}

    def add_tool_result(self, call_id: str, name: str, text: str, images: list[bytes]) -> None:
        self._terminated = self._terminated or _reports_termination(text)
        self._messages.append({"role": "tool", "tool_call_id": call_id, "content": text, "images": len(images)})

    def add_user_message(self, text: str) -> None:
        self._messages.append({"role": "user", "content": text})

    def transcript(self) -> list[dict]:
        return [dict(m) for m in self._messages]

    def usage_totals(self) -> dict:
        """All zero (no model requests were made) plus ``replayed_responses``."""
        return {**UsageTotals().as_dict(), "replayed_responses": self._index}


def replay_source(agent, episode) -> pathlib.Path:
    """The replay runtime's source: ``--replay``, else the packaged example program of (suite, task)."""
    if agent.replay is not None:
        return pathlib.Path(agent.replay)

    try:
        return program_for(episode.suite, episode.task)
    except ValueError as exc:
        raise SettingError(f"{exc}; pass --replay FILE (a run directory or a run(robo) program) or --runtime "
                           "openai") from None
