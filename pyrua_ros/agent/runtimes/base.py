"""The Runtime seam of the agent loop and the typed records every runtime returns.

A runtime turns the conversation so far into the model's next decision. The cell loop calls
``start(prompt, images)`` once, then alternates ``respond(deadline)`` with ``add_tool_result(...)`` for every
tool call of the response (and ``add_user_message(text)`` when it needs to nudge the model). Deadlines are
``time.monotonic()`` seconds. Infrastructure failures that survive the runtime's retries raise
:class:`RuntimeFailure`; model mistakes (bad argument JSON, no tool call) are data in :class:`ModelResponse`.

Every runtime keeps ``events`` (JSON-serialisable dicts, one per request / attempt / response / error /
degradation) and calls an optional sink with each, which the episode host writes to ``openai_events.jsonl``.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable
from typing import Literal, Protocol

from pyrua_ros.records.outcome import StrategyOutcome

FailureKind = Literal["connection", "http", "timeout", "context", "budget"]
FAILURE_KINDS = ("connection", "http", "timeout", "context", "budget")
CallSource = Literal["tool_calls", "content_xml", "reasoning_xml"]
EventSink = Callable[[dict], None]


class RuntimeFailure(Exception):
    """The runtime could not get a response: retries exhausted, deadline passed, or the context cannot fit.

    ``kind``: ``connection`` (no TCP/HTTP exchange), ``http`` (error status or unreadable body),
    ``timeout`` (per-request timeouts), ``context`` (prompt too long even after degrading),
    ``budget`` (the episode deadline passed before a response).
    """

    def __init__(self, kind: str, message: str):
        if kind not in FAILURE_KINDS:
            raise ValueError(f"RuntimeFailure kind must be one of {', '.join(FAILURE_KINDS)}; got {kind!r}")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One tool call of a model response.

    - ``id``: the call id to answer with ``add_tool_result`` (server-given, or synthesised for XML calls).
    - ``name``: function name as the model wrote it (may be unknown; the loop answers with an error).
    - ``arguments``: parsed JSON object, or ``None`` when ``parse_error`` is set.
    - ``raw_arguments``: the arguments text exactly as received (JSON text; for XML calls, our JSON dump).
    - ``parse_error``: why the arguments could not be used (invalid JSON, not an object, malformed XML).
    - ``source``: ``tool_calls`` (the server's parser), ``content_xml`` (Qwen3 XML found in ``content``),
      ``reasoning_xml`` (Qwen3 XML found in ``reasoning_content``: a ``<tool_call>`` ends the thinking).
    """

    id: str
    name: str
    arguments: dict | None
    raw_arguments: str
    parse_error: str | None = None
    source: CallSource = "tool_calls"


@dataclasses.dataclass(frozen=True)
class Usage:
    """Tokens of one request as the server reported them (0 when a field was absent).

    ``prompt_tokens`` includes ``cached_tokens`` (``prompt_tokens_details.cached_tokens``);
    ``completion_tokens`` includes ``reasoning_tokens`` (``completion_tokens_details.reasoning_tokens``).
    ``reported`` is False when the response carried no ``usage`` at all.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    reported: bool = False

    @classmethod
    def from_payload(cls, usage: dict | None) -> Usage:
        """Read an OpenAI ``usage`` object (missing or null details count as 0)."""
        if not isinstance(usage, dict):
            return cls()
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        return cls(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                   completion_tokens=int(usage.get("completion_tokens") or 0),
                   cached_tokens=int(prompt_details.get("cached_tokens") or 0),
                   reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
                   reported=True)


@dataclasses.dataclass(frozen=True)
class ModelResponse:
    """One model decision.

    - ``tool_calls``: the calls in order (empty tuple = no tool call).
    - ``content``: assistant text (XML tool-call blocks removed when they were recognised as calls).
    - ``reasoning``: ``reasoning_content`` (or the text before ``</think>`` when the server had no parser).
    - ``usage``: tokens of this request (all zero for replay).
    - ``finish_reason``: the server's (``tool_calls``, ``stop``, ``length`` ...), ``None`` if absent.
    - ``request_index``: 1-based index of this response within the episode.
    - ``latency_s``: seconds from the first attempt to the response, retries and backoff included.
    """

    tool_calls: tuple[ToolCall, ...]
    content: str | None
    reasoning: str | None
    usage: Usage
    finish_reason: str | None
    request_index: int
    latency_s: float


class UsageTotals:
    """Running token totals under the reference's names (PYRUALEAN-CONTRACT.md 4.5).

    ``total_tokens = input_tokens + output_tokens`` (cached tokens are part of input, reasoning of output).
    """

    def __init__(self):
        self.input_tokens = 0
        self.cached_input_tokens = 0
        self.output_tokens = 0
        self.reasoning_output_tokens = 0
        self.requests = 0
        self.requests_without_usage = 0

    def add(self, usage: Usage) -> None:
        self.requests += 1
        if not usage.reported:
            self.requests_without_usage += 1
        self.input_tokens += usage.prompt_tokens
        self.cached_input_tokens += usage.cached_tokens
        self.output_tokens += usage.completion_tokens
        self.reasoning_output_tokens += usage.reasoning_tokens

    def as_dict(self) -> dict:
        return {"input_tokens": self.input_tokens, "cached_input_tokens": self.cached_input_tokens,
                "output_tokens": self.output_tokens, "reasoning_output_tokens": self.reasoning_output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens, "requests": self.requests,
                "requests_without_usage": self.requests_without_usage}


class Runtime(Protocol):
    """What the cell loop needs from a model runtime (docs/DESIGN.md, runtime seam)."""

    events: list[dict]
    notes: list[str]

    def start(self, prompt: str, images: list[bytes]) -> None:
        """Open the conversation: first user message = prompt text + one image part per card image (PNG/JPEG)."""

    def respond(self, deadline: float) -> ModelResponse:
        """The model's next response; raises RuntimeFailure when none can be had before ``deadline``."""

    def add_tool_result(self, call_id: str, name: str, text: str, images: list[bytes]) -> None:
        """Answer one tool call of the last response with its result text and attached images."""

    def add_user_message(self, text: str) -> None:
        """Append a user message (e.g. "call a tool" after a response without one)."""

    def transcript(self) -> list[dict]:
        """The full conversation as chat messages (reasoning_content kept, nothing trimmed)."""

    def usage_totals(self) -> dict:
        """Token totals (input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens,
        total_tokens, requests)."""


class JsonlEventSink:
    """An event sink appending one JSON line per event to ``path`` (thread-safe; flushed per line), in a file only
    this process wrote (:class:`~pyrua_ros.records.records.JsonlRecord`: whatever was at the name is replaced, a
    line is always one line, a failed write is repaired at ``close()``)."""

    def __init__(self, path: str | pathlib.Path):
        from pyrua_ros.records.records import JsonlRecord  # noqa: PLC0415 (the CLI sandbox's package: bare Python)

        self.path = pathlib.Path(path)
        self._record = JsonlRecord(self.path)

    @property
    def failures(self) -> list[str]:
        """What could not be written (for result.json notes)."""
        return self._record.failures

    def __call__(self, event: dict) -> None:
        self._record.append(event)

    def close(self) -> None:
        self._record.close()


@dataclasses.dataclass(frozen=True)
class LoopOutcome(StrategyOutcome):
    """How a loop ended (:func:`~pyrua_ros.agent.loop.loop.run_loop`, a CLI runtime's ``run_episode``, the MCP
    server's wait): the :class:`~pyrua_ros.records.outcome.StrategyOutcome` the episode applies (``status``
    completed|timeout|call_budget|planner_error|interrupted, ``reason``, ``notes``; ``error`` stays None: a loop's
    failure is its status and reason) plus what only the loop knows: ``requests`` (model requests made),
    ``last_message`` (the model's last text, for last_message.md) and ``failure`` (the runtime failure that ended
    it). Frozen: the loop builds it once when it ends; the arm returns it, changed only by
    ``dataclasses.replace``."""

    requests: int = 0
    last_message: str = ""
    failure: RuntimeFailure | None = None
