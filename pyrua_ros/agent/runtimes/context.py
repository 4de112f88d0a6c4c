"""Keep what the runtime sends inside the served context window (65,536 tokens for the seed card).

Measurement: no Qwen tokenizer is installed offline in this environment (neither ``tokenizers`` nor
``transformers``), so prompt size is *estimated*: text characters / ``chars_per_token`` (3.5), a fixed
``image_tokens`` per image part (1100: a 1024x1024 image is 32x32 = 1024 merged 32-pixel patches in
Qwen3-VL-style encoders, plus markers and slack), 4 tokens per message, and the tool schemas as JSON text.
After each response the estimate is calibrated by the server's ``usage.prompt_tokens`` (ratio actual /
estimated, clamped to [0.5, 4]); a context-length error from the server calibrates it to the prompt size
the error reports (vLLM / SGLang wording), or raises it by 25 % when the error gives no number.
A better measure can be plugged in as ``estimator(message) -> tokens``.

Budget: ``window - reserve`` where ``reserve`` = ``max_tokens`` (or 4096 when unset) is kept for the
completion. When the estimate exceeds it, the conversation is degraded until it is under 90 % of it
(hysteresis, so the prompt prefix stays stable for the server's cache), in this order, oldest first:
1. drop images (each replaced by a short text part),
2. trim tool outputs to their first and last ``TRIM_KEEP_CHARS`` characters,
3. drop old ``reasoning_content`` of assistant messages.
Degradations are sticky (a dropped image stays dropped) and only affect what is sent: ``transcript()``
keeps everything. Each step is returned as a note; if nothing is left to degrade, RuntimeFailure("context").
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

from .base import RuntimeFailure

DEFAULT_RESERVE_TOKENS = 4096
MESSAGE_OVERHEAD_TOKENS = 4
TRIM_KEEP_CHARS = 600
TARGET_FRACTION = 0.9
IMAGE_OMITTED = "[image omitted to fit the context window]"


def _text_chars(message: dict) -> int:
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif isinstance(content, list):
        chars += sum(len(p.get("text", "")) for p in content if p.get("type") == "text")
    chars += len(message.get("reasoning_content") or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        chars += len(function.get("name", "")) + len(function.get("arguments", "")) + 16
    return chars


def _image_count(message: dict) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for p in content if p.get("type") == "image_url")


def trim_text(text: str, keep: int = TRIM_KEEP_CHARS) -> str:
    """First and last ``keep`` characters of ``text`` with a marker saying how much was cut."""
    if len(text) <= 2 * keep + 100:
        return text
    omitted = len(text) - 2 * keep
    return f"{text[:keep]}\n[... {omitted} chars trimmed to fit the context window ...]\n{text[-keep:]}"


class ContextWindow:
    """Estimates prompt tokens and degrades the sent view of a conversation to fit ``window`` tokens."""

    def __init__(self, window: int, reserve_tokens: int | None = None, chars_per_token: float = 3.5,
                 image_tokens: int = 1100, estimator: Callable[[dict], int] | None = None):
        self.window = window
        self.reserve_tokens = reserve_tokens or DEFAULT_RESERVE_TOKENS
        if self.window <= self.reserve_tokens:
            raise ValueError(f"context window {window} must exceed the completion reserve {self.reserve_tokens}")
        self.chars_per_token = chars_per_token
        self.image_tokens = image_tokens
        self.estimator = estimator
        self.scale = 1.0                      # calibration: server tokens per estimated token
        self.dropped_images: set[int] = set()
        self.trimmed_tools: set[int] = set()
        self.dropped_reasoning: set[int] = set()

    @property
    def limit(self) -> int:
        """Prompt tokens allowed (window minus the completion reserve)."""
        return self.window - self.reserve_tokens

    def describe(self) -> dict:
        return {"window": self.window, "reserve_tokens": self.reserve_tokens, "limit": self.limit,
                "estimator": "custom" if self.estimator else f"chars/{self.chars_per_token} + "
                             f"{self.image_tokens}/image (no Qwen tokenizer installed offline)",
                "scale": round(self.scale, 3)}

    def raw_estimate_message(self, message: dict) -> int:
        if self.estimator is not None:
            return self.estimator(message)
        return (int(_text_chars(message) / self.chars_per_token) + MESSAGE_OVERHEAD_TOKENS
                + self.image_tokens * _image_count(message))

    def raw_estimate(self, messages: list[dict], tools: list[dict]) -> int:
        tools_tokens = int(len(json.dumps(tools)) / self.chars_per_token) if tools else 0
        return tools_tokens + sum(self.raw_estimate_message(m) for m in messages)

    def estimate(self, messages: list[dict], tools: list[dict]) -> int:
        """Calibrated estimate of the prompt tokens of ``messages`` + ``tools``."""
        return int(self.raw_estimate(messages, tools) * self.scale)

    def observe(self, raw_estimate: int, prompt_tokens: int) -> None:
        """Calibrate with the server's count of a prompt whose raw estimate was ``raw_estimate``."""
        if raw_estimate > 0 and prompt_tokens > 0:
            self.scale = min(4.0, max(0.5, prompt_tokens / raw_estimate))

    def tighten(self, raw_estimate: int, server_prompt_tokens: int | None = None) -> None:
        """The server said the prompt is too long. With its count of the prompt, calibrate to it plus 5 %;
        without one, assume 25 % more tokens than estimated from now on."""
        if server_prompt_tokens and raw_estimate > 0:
            self.scale = max(self.scale * 1.05, 1.05 * server_prompt_tokens / raw_estimate)
        else:
            self.scale *= 1.25

    def view(self, messages: list[dict]) -> list[dict]:
        """The messages as they are sent: sticky degradations applied to copies."""
        out = []
        for index, message in enumerate(messages):
            touched = index in self.dropped_images or index in self.trimmed_tools or index in self.dropped_reasoning
            if not touched:
                out.append(message)
                continue
            sent = copy.copy(message)
            if index in self.dropped_images and isinstance(sent.get("content"), list):
                sent["content"] = [{"type": "text", "text": IMAGE_OMITTED} if p.get("type") == "image_url" else p
                                   for p in sent["content"]]
            if index in self.trimmed_tools and isinstance(sent.get("content"), str):
                sent["content"] = trim_text(sent["content"])
            if index in self.dropped_reasoning:
                sent.pop("reasoning_content", None)
            out.append(sent)
        return out

    def fit(self, messages: list[dict], tools: list[dict]) -> tuple[list[dict], int, int, list[str]]:
        """(view to send, calibrated estimate, raw estimate, notes of new degradations).

        Raises RuntimeFailure("context") when the prompt cannot fit even with every step applied.
        """
        view = self.view(messages)
        estimate = self.estimate(view, tools)
        if estimate <= self.limit:
            return view, estimate, self.raw_estimate(view, tools), []
        target = int(self.limit * TARGET_FRACTION)
        notes = []
        steps = (
            ("image", self.dropped_images, lambda i, m: _image_count(m) > 0,
             "dropped the images of"),
            ("tool", self.trimmed_tools,
             lambda i, m: m.get("role") == "tool" and trim_text(m["content"]) != m["content"],
             f"trimmed to {TRIM_KEEP_CHARS}+{TRIM_KEEP_CHARS} chars the tool output of"),
            ("reasoning", self.dropped_reasoning,
             lambda i, m: m.get("role") == "assistant" and bool(m.get("reasoning_content")),
             "dropped the reasoning_content of"),
        )
        for _label, marks, eligible, wording in steps:
            if estimate <= target:
                break
            before = estimate
            touched = []
            for index, message in enumerate(messages):
                if estimate <= target:
                    break
                if index in marks or not eligible(index, message):
                    continue
                marks.add(index)
                touched.append(index)
                view = self.view(messages)
                estimate = self.estimate(view, tools)
            if touched:
                notes.append(f"context: {wording} {len(touched)} old message(s) (indices "
                             f"{', '.join(map(str, touched))}); estimated prompt {before} -> {estimate} tokens, "
                             f"limit {self.limit} of a {self.window}-token window")
        if estimate > self.limit:
            raise RuntimeFailure("context", f"estimated prompt {estimate} tokens exceeds the limit {self.limit} "
                                            f"({self.window}-token window minus {self.reserve_tokens} reserved) "
                                            "even with every image dropped, tool output trimmed and reasoning dropped")
        return view, estimate, self.raw_estimate(view, tools), notes
