"""The ``openai`` runtime: OpenAI-compatible chat completions (SGLang / vLLM / OpenAI), PYRUALEAN-CONTRACT.md 4b.

Decisions:
- **Client and retries.** The ``openai`` package is the HTTP client (``with_raw_response``, so the body is
  read and parsed here: a malformed body is a retryable fault, and server extras such as
  ``reasoning_content`` are kept). Its own retries are disabled (``max_retries=0``); this module retries
  connection errors, timeouts, 429, 5xx and unreadable bodies up to ``max_retries`` times with exponential
  backoff (``Retry-After`` honoured, capped at ``backoff_max_s``), logging every attempt, and never past the
  deadline given to ``respond``. Other 4xx fail at once (``http``).
- **Timeout.** Each attempt gets ``min(request_timeout_s, deadline - now)`` as the client timeout (httpx
  connect/read/write limits; a non-streaming completion sends nothing until done, so the read limit bounds
  the attempt). An attempt cut short by the deadline ends the turn with ``budget``.
- **Images.** Card images ride in the first user message as ``image_url`` parts with ``data:`` URLs. Tool
  results go back as ``role: tool`` messages (text only: most servers reject images there); their images are
  sent in one following ``user`` message, a text part naming the call before each call's images, once every
  call of the response has been answered (the chat API wants the tool messages contiguous).
- **Reasoning.** ``message.reasoning_content`` (SGLang; ``reasoning`` from vLLM) is returned and kept on the
  assistant message in the transcript and in what is sent back. Without a reasoning parser, text before
  ``</think>`` in ``content`` is taken as the reasoning.
- **Tool calls.** Several per response are returned in order. Arguments that are not a JSON object give
  ``ToolCall.parse_error`` (the loop answers with an error tool message); the assistant message sent back then
  carries ``{"invalid_arguments": <raw text>}`` as its arguments, because servers that render templates parse
  the arguments JSON of history messages and would reject the raw text (a raw text over 8000 chars is sent back
  as its first and last 4000 around an omission marker: 200 KB of brackets would fill the context). Arguments
  are parsed with bounds (``records.bounded``): nested deeper than 64, over ``MAX_ARGUMENT_BYTES``, ``NaN`` or
  ``1e400`` are invalid arguments like any other. Qwen3 XML calls in ``content`` (or in
  ``reasoning_content``) are recognised when there are no structured calls, recorded as an event and a note,
  and sent back as structured ``tool_calls`` with the XML removed from the content.
- **Context.** See context.py: measured (estimated) before every request, degraded oldest-first.
- **Secrets.** The key is read from the env var named by ``api_key_env`` when the client is built, kept only
  inside the client, and redacted from every event as a second guard.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import time
from collections.abc import Callable

from pyrua_ros.records import bounded
from pyrua_ros.settings.model import NO_KEY_PLACEHOLDER, ModelSettings

from .base import EventSink, ModelResponse, RuntimeFailure, ToolCall, Usage, UsageTotals
from .context import ContextWindow
from .qwen_xml import has_xml_call, param_types_of, parse_xml_calls, split_think
from .tools import tool_specs

CONTEXT_ERROR_MARKERS = ("context length", "context_length", "maximum context", "too long", "too many tokens",
                         "exceeds the model")
MAX_CONTEXT_RETRIES = 3
MAX_ARGUMENT_BYTES = 4 * 2**20   # a tool call's arguments text; longer is the model's invalid call
INVALID_ECHO_CHARS = 4000        # invalid arguments sent back in history: this many first and last chars


def image_mime(data: bytes) -> str:
    """MIME type of PNG or JPEG bytes; ValueError for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    raise ValueError("images must be PNG or JPEG bytes (accepted: image/png, image/jpeg); "
                     f"got data starting with {data[:8]!r}")


def image_part(data: bytes) -> dict:
    """An ``image_url`` content part holding ``data`` as a base64 data URL."""
    mime = image_mime(data)
    return {"type": "image_url",
            "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}}


def sanitize(message: dict) -> dict:
    """A copy of a message for logs: data URLs replaced by their decoded size."""
    content = message.get("content")
    if not isinstance(content, list):
        return copy.copy(message)
    parts = []
    for part in content:
        url = part.get("image_url", {}).get("url", "") if part.get("type") == "image_url" else ""
        if url.startswith("data:"):
            head, _, data = url.partition(",")
            parts.append({"type": "image_url", "mime": head[5:].split(";")[0], "data_bytes": len(data) * 3 // 4})
        else:
            parts.append(part)
    return {**message, "content": parts}


class _Retryable(Exception):
    def __init__(self, kind: str, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind, self.message, self.status, self.retry_after = kind, message, status, retry_after


class OpenAIRuntime:
    """Chat-completions runtime. ``events`` holds the JSON-lines log; ``notes`` the result.json notes.

    ``tools``: chat-completions function specs (``tools.tool_specs``). ``event_sink``: called with every event.
    ``clock`` / ``sleep``: monotonic seconds and the backoff sleep (injectable for tests).
    """

    def __init__(self, settings: ModelSettings, tools: list[dict], event_sink: EventSink | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        import openai  # noqa: PLC0415 (openai)

        self.settings = settings
        self.tools = tools
        self.events: list[dict] = []
        self.notes: list[str] = []
        self._sink = event_sink
        self._clock = clock
        self._sleep = sleep
        self._t0 = clock()
        key = settings.api_key()
        self._secret = None if key == NO_KEY_PLACEHOLDER else key
        self._client = openai.OpenAI(api_key=key, base_url=settings.endpoint(), max_retries=0,
                                     timeout=settings.request_timeout_s)
        self._openai = openai
        self._context = ContextWindow(settings.context_window, settings.max_tokens, settings.chars_per_token,
                                      settings.image_tokens)
        self._param_types = param_types_of(tools)
        self._messages: list[dict] = []
        self._pending_images: list[tuple[str, str, list[bytes]]] = []
        self._logged_upto = 0
        self._request_index = 0
        self._totals = UsageTotals()

    @classmethod
    def from_config(cls, cfg, events: EventSink | None = None, tools: list[dict] | None = None) -> OpenAIRuntime:
        """The runtime of a PlayConfig: ``cfg.model`` as is (the schema's ModelSettings) and ``tools`` (default:
        the code arm's own specs)."""

        agent = cfg.agent
        if tools is None:
            tools = tool_specs(agent.arm, agent.feedback, agent.images, agent.max_programs)
        return cls(settings=cfg.model, tools=tools, event_sink=events)

    # --- events -------------------------------------------------------------------------------------------
    def _emit(self, event: str, **fields) -> dict:
        record = {"event": event, "t": round(self._clock() - self._t0, 3), "wall": round(time.time(), 3), **fields}
        if self._secret:
            text = json.dumps(record, default=str)
            if self._secret in text:
                record = json.loads(text.replace(self._secret, "[redacted]"))
        self.events.append(record)
        if self._sink is not None:
            self._sink(record)
        return record

    def _note(self, text: str) -> None:
        self.notes.append(text)
        self._emit("note", note=text)

    def describe(self) -> dict:
        """Runtime facts for result.json (no key)."""
        return {"runtime": "openai", "endpoint": self.settings.endpoint(), "api_key_env": self.settings.api_key_env,
                **self.settings.sampling_fields(), "request_timeout_s": self.settings.request_timeout_s,
                "max_retries": self.settings.max_retries, "system_prompt": self.settings.system_prompt is not None,
                "context": self._context.describe(), "tools": [t["function"]["name"] for t in self.tools]}

    # --- conversation -------------------------------------------------------------------------------------
    def start(self, prompt: str, images: list[bytes]) -> None:
        if self._messages:
            raise RuntimeError("start() was already called for this runtime")
        if self.settings.system_prompt is not None:
            self._messages.append({"role": "system", "content": self.settings.system_prompt})
        content = [{"type": "text", "text": prompt}, *(image_part(b) for b in images)] if images else prompt
        self._messages.append({"role": "user", "content": content})
        self._emit("start", **self.describe(), prompt_chars=len(prompt), images=len(images))

    def add_tool_result(self, call_id: str, name: str, text: str, images: list[bytes]) -> None:
        if call_id not in self._open_call_ids():
            raise ValueError(f"no unanswered tool call {call_id!r}; open calls: {sorted(self._open_call_ids())}")
        self._messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        if images:
            parts = [image_part(b) for b in images]   # validate now, at the caller
            self._pending_images.append((call_id, name, parts))

    def add_user_message(self, text: str) -> None:
        self._flush_images()
        self._messages.append({"role": "user", "content": text})

    def transcript(self) -> list[dict]:
        """The full conversation; images of answered tool results are included once every call is answered."""
        if not self._open_call_ids():
            self._flush_images()
        return copy.deepcopy(self._messages)

    def usage_totals(self) -> dict:
        return self._totals.as_dict()

    def _open_call_ids(self) -> set[str]:
        for index in range(len(self._messages) - 1, -1, -1):
            message = self._messages[index]
            if message["role"] == "assistant":
                answered = {m["tool_call_id"] for m in self._messages[index + 1:] if m["role"] == "tool"}
                return {c["id"] for c in message.get("tool_calls") or []} - answered
        return set()

    def _flush_images(self) -> None:
        if not self._pending_images:
            return
        open_ids = self._open_call_ids()
        if open_ids:
            raise ValueError(f"tool calls {sorted(open_ids)} are unanswered; answer every call of the response "
                             "with add_tool_result before adding a user message")
        content = []
        for call_id, name, parts in self._pending_images:
            content.append({"type": "text", "text": f"Images attached to the result of the {name} call {call_id}:"})
            content.extend(parts)
        self._pending_images = []
        self._messages.append({"role": "user", "content": content})

    # --- requests -----------------------------------------------------------------------------------------
    def respond(self, deadline: float) -> ModelResponse:
        if not self._messages:
            raise RuntimeError("respond() called before start()")
        open_ids = self._open_call_ids()
        if open_ids:
            raise ValueError(f"tool calls {sorted(open_ids)} are unanswered; call add_tool_result for each first")
        self._flush_images()
        self._request_index += 1
        index = self._request_index
        started = self._clock()
        attempt = 0
        context_retries = 0
        logged = False
        while True:
            try:
                view, estimate, raw_estimate, notes = self._context.fit(self._messages, self.tools)
            except RuntimeFailure as failure:
                self._emit("failure", request_index=index, kind=failure.kind, message=failure.message)
                raise
            for note in notes:
                self._note(f"request {index}: {note}")
            if not logged:
                self._emit("request", request_index=index, messages=len(view),
                           new_messages=[sanitize(m) for m in self._messages[self._logged_upto:]],
                           estimated_prompt_tokens=estimate, prompt_limit=self._context.limit,
                           params=self.settings.sampling_fields())
                self._logged_upto = len(self._messages)
                logged = True
            remaining = deadline - self._clock()
            if remaining <= 0:
                self._fail(index, "budget", f"the episode deadline passed before request {index} "
                                            f"(attempt {attempt + 1}) could be sent")
            attempt += 1
            timeout = min(self.settings.request_timeout_s, remaining)
            self._emit("attempt", request_index=index, attempt=attempt, timeout_s=round(timeout, 3),
                       estimated_prompt_tokens=estimate)
            try:
                data = self._post(view, timeout)
            except RuntimeFailure as failure:
                self._emit("error", request_index=index, attempt=attempt, kind=failure.kind, status=None,
                           message=failure.message, retry_in_s=None)
                self._fail(index, failure.kind, failure.message)
            except _Retryable as err:
                cut_by_deadline = timeout < self.settings.request_timeout_s and self._clock() >= deadline - 1e-3
                if err.kind == "context":
                    context_retries += 1
                    self._emit("error", request_index=index, attempt=attempt, kind="context", status=err.status,
                               message=err.message, retry_in_s=0.0)
                    if context_retries > MAX_CONTEXT_RETRIES:
                        self._fail(index, "context", f"the server still rejects the prompt as too long after "
                                                     f"{MAX_CONTEXT_RETRIES} tighter estimates: {err.message}")
                    reported = _reported_prompt_tokens(err.message)
                    self._context.tighten(raw_estimate, reported)
                    self._note(f"request {index}: the server rejected the prompt as too long (estimated {estimate} "
                               f"tokens, server count {reported if reported else 'not given'}); estimates scaled "
                               f"by {self._context.scale:.2f} from now on")
                    continue
                if err.kind == "timeout" and cut_by_deadline:
                    self._emit("error", request_index=index, attempt=attempt, kind="timeout", status=None,
                               message=err.message, retry_in_s=None)
                    self._fail(index, "budget", f"request {index} attempt {attempt} was still running when the "
                                                f"episode deadline passed ({timeout:.1f} s allowed)")
                delay = self._backoff(attempt, err.retry_after)
                exhausted = attempt > self.settings.max_retries
                past_deadline = self._clock() + delay >= deadline
                self._emit("error", request_index=index, attempt=attempt, kind=err.kind, status=err.status,
                           message=err.message, retry_in_s=None if exhausted or past_deadline else round(delay, 3))
                if exhausted:
                    self._fail(index, err.kind, f"request {index} failed after {attempt} attempt(s); last error: "
                                                f"{err.message}")
                if past_deadline:
                    self._fail(index, "budget", f"request {index}: retrying after {delay:.1f} s would pass the "
                                                f"episode deadline; last error: {err.message}")
                self._sleep(delay)
                continue
            return self._accept(index, attempt, data, started, raw_estimate)

    def _fail(self, index: int, kind: str, message: str):
        self._emit("failure", request_index=index, kind=kind, message=message)
        raise RuntimeFailure(kind, message)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = self.settings.backoff_max_s
        if retry_after is not None:
            return min(cap, max(0.0, retry_after))
        return min(cap, self.settings.backoff_initial_s * 2 ** (attempt - 1))

    def _post(self, messages: list[dict], timeout: float) -> dict:
        """One HTTP attempt; the parsed body, or _Retryable / RuntimeFailure."""
        openai = self._openai
        kwargs = {"model": self.settings.model, "messages": messages, "timeout": timeout}
        if self.tools:
            kwargs["tools"] = self.tools
        for name in ("tool_choice", "max_tokens", "temperature"):
            if getattr(self.settings, name) is not None:
                kwargs[name] = getattr(self.settings, name)
        if self.settings.extra_body:
            kwargs["extra_body"] = self.settings.extra_body
        try:
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
            text = raw.text
        except openai.APITimeoutError as exc:
            raise _Retryable("timeout", f"no response within {timeout:.1f} s ({exc})") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__
            detail = f" ({type(cause).__name__}: {cause})" if cause else ""
            raise _Retryable("connection", f"{exc}{detail}") from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            body = exc.response.text[:1000]
            if status == 429 or status >= 500:
                raise _Retryable("http", f"HTTP {status}: {body}", status,
                                 _retry_after(exc.response.headers.get("retry-after"))) from None
            if status in (400, 413) and any(m in body.lower() for m in CONTEXT_ERROR_MARKERS):
                raise _Retryable("context", f"HTTP {status}: {body}", status) from None
            raise RuntimeFailure("http", f"HTTP {status} (not retried): {body}") from None
        try:
            data = bounded.loads(text, max_depth=bounded.MAX_DEPTH + 16, finite=False)
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retryable("http", f"unreadable response body ({type(exc).__name__}: {exc}): {text[:300]!r}",
                             raw.status_code) from None
        return data

    def _accept(self, index: int, attempt: int, data: dict, started: float, raw_estimate: int) -> ModelResponse:
        choice = data["choices"][0]
        message = choice["message"]
        content = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content)
        calls = []
        for k, raw_call in enumerate(message.get("tool_calls") or []):
            calls.append(self._structured_call(index, k, raw_call, {c.id for c in calls}))
        if not calls and content and reasoning is None and "</think>" in content:
            reasoning, content = split_think(content)
            self._note(f"request {index}: reasoning arrived in content before </think> (no reasoning parser?)")
        if not calls:
            for where, source in (("content", "content_xml"), ("reasoning_content", "reasoning_xml")):
                text = content if where == "content" else reasoning
                if not has_xml_call(text):
                    continue
                xml_calls, remainder = parse_xml_calls(text, self._param_types)
                calls = [ToolCall(id=f"xml_{index}_{k}", name=c.name, arguments=None if c.error else c.arguments,
                                  raw_arguments=json.dumps(c.arguments, ensure_ascii=False), parse_error=c.error,
                                  source=source) for k, c in enumerate(xml_calls)]
                if where == "content":
                    content = remainder or None
                else:
                    reasoning = remainder or None
                self._emit("xml_tool_calls", request_index=index, where=where, count=len(calls),
                           names=[c.name for c in calls])
                self._note(f"request {index}: {len(calls)} Qwen3 XML tool call(s) recognised in {where} "
                           "(server without a tool-call parser?)")
                break
        usage = Usage.from_payload(data.get("usage"))
        self._totals.add(usage)
        if usage.reported:
            self._context.observe(raw_estimate, usage.prompt_tokens)
        assistant = {"role": "assistant", "content": content or ""}
        if reasoning:
            assistant["reasoning_content"] = reasoning
        if calls:
            assistant["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": _history_arguments(c)}}
                                       for c in calls]
        self._messages.append(assistant)
        latency = self._clock() - started
        response = ModelResponse(tool_calls=tuple(calls), content=content, reasoning=reasoning, usage=usage,
                                 finish_reason=choice.get("finish_reason"), request_index=index, latency_s=latency)
        self._emit("response", request_index=index, attempts=attempt, latency_s=round(latency, 3),
                   finish_reason=response.finish_reason, message=message, usage=data.get("usage"),
                   tool_calls=[{"id": c.id, "name": c.name, "source": c.source, "parse_error": c.parse_error}
                               for c in calls], totals=self._totals.as_dict())
        return response

    def _structured_call(self, index: int, k: int, call: dict, taken: set[str]) -> ToolCall:
        function = call.get("function") or {}
        name = function.get("name") or ""
        raw = function.get("arguments")
        call_id = call.get("id") or f"call_{index}_{k}"
        error = None
        arguments = None
        if isinstance(raw, dict) and not bounded.depth_over(raw):
            arguments, raw = raw, json.dumps(raw, ensure_ascii=False)
        elif raw is None or (isinstance(raw, str) and not raw.strip()):
            arguments, raw = {}, raw or ""
        else:
            raw = raw if isinstance(raw, str) else json.dumps(raw)
            try:   # (bounded: a model's arguments nested 100000 deep are its own invalid call, not a crash)
                value = bounded.loads(raw, max_bytes=MAX_ARGUMENT_BYTES)
            except bounded.JSONRefused as exc:
                error = f"the arguments are not usable JSON: {exc}"
            else:
                if isinstance(value, dict):
                    arguments = value
                else:
                    error = f"the arguments must be a JSON object, got {type(value).__name__}"
        if not name:
            error = "the tool call has no function name"
        seen = {c["id"] for m in self._messages if m["role"] == "assistant" for c in m.get("tool_calls") or []}
        if call_id in seen or call_id in taken:
            call_id = f"{call_id}_{index}_{k}"
        return ToolCall(id=call_id, name=name, arguments=None if error else arguments, raw_arguments=raw,
                        parse_error=error, source="tool_calls")


def _history_arguments(call: ToolCall) -> str:
    """Arguments as sent back in the assistant message: always a JSON object text (see module docstring)."""
    if call.parse_error is not None:
        raw = call.raw_arguments
        if len(raw) > 2 * INVALID_ECHO_CHARS:
            raw = f"{raw[:INVALID_ECHO_CHARS]}\n... [{len(raw) - 2 * INVALID_ECHO_CHARS} chars omitted] ...\n" \
                  f"{raw[-INVALID_ECHO_CHARS:]}"
        return json.dumps({"invalid_arguments": raw}, ensure_ascii=False)
    return call.raw_arguments if call.raw_arguments.strip() else "{}"


def _reported_prompt_tokens(message: str) -> int | None:
    """The prompt size a context-length error reports (vLLM "N in the messages", SGLang "input (N tokens)")."""
    match = re.search(r"(\d+) in the messages", message) or re.search(r"input \((\d+) tokens\)", message)
    return int(match.group(1)) if match else None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
