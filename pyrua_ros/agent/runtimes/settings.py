"""Settings of the ``openai`` chat-completions runtime (PYRUALEAN-CONTRACT.md section 4b).

A field set to ``None`` is *not sent*: the request body only carries what the user asked for, so the
server's own defaults apply otherwise. ``extra_body`` is merged into the request body verbatim (the openai
client's ``extra_body``), e.g. ``{"top_p": 0.95, "top_k": 20}`` for the seed model card.

The api key is never stored here: ``api_key_env`` names the environment variable that holds it and
:meth:`ModelSettings.api_key` reads it at client construction time only.
"""

from __future__ import annotations

import dataclasses
import json
import os

from pyrua_ros.agent.modes import TOOL_CHOICES

NO_KEY_PLACEHOLDER = "not-needed"   # sent when no --api-key-env is given (local servers ignore the key)


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """What the ``openai`` runtime sends and how it retries.

    Fields (``None`` = not sent / server default):
    - ``model``: model id sent as ``model``.
    - ``base_url``: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:30000/v1`` (``/v1`` appended if missing).
    - ``api_key_env``: name of the env var holding the key (``None``: a placeholder key is sent).
    - ``max_tokens``: completion token cap sent as ``max_tokens``; also reserved out of the context window.
    - ``tool_choice``: ``auto`` | ``required`` | ``none``.
    - ``temperature``: sampling temperature.
    - ``extra_body``: dict merged into the request body verbatim (later keys win over the fields above).
    - ``system_prompt``: optional system message; default none (the reference sends the whole prompt as
      the first user message).
    - ``request_timeout_s``: hard limit of one HTTP attempt, seconds (also cut to the episode deadline).
    - ``max_retries``: retries after the first attempt on connection errors, timeouts, 429, 5xx, bad JSON.
    - ``backoff_initial_s`` / ``backoff_max_s``: exponential backoff 1x, 2x, 4x ... capped, seconds;
      a server's ``Retry-After`` (seconds) is honoured up to ``backoff_max_s``.
    - ``context_window``: tokens the server serves (65,536 for the seed card's SGLang).
    - ``image_tokens``: estimated prompt tokens of one attached image (fixed cost; see context.py).
    - ``chars_per_token``: text characters per estimated token (3.5).
    """

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int | None = None
    tool_choice: str | None = None
    temperature: float | None = None
    extra_body: dict | None = None
    system_prompt: str | None = None
    request_timeout_s: float = 600.0
    max_retries: int = 5
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    context_window: int = 65536
    image_tokens: int = 1100
    chars_per_token: float = 3.5

    def __post_init__(self):
        if not self.model:
            raise ValueError("model must be a non-empty model id")
        if self.tool_choice is not None and self.tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)} (or unset); "
                             f"got {self.tool_choice!r}")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive integer; got {self.max_tokens!r}")
        if self.extra_body is not None and not isinstance(self.extra_body, dict):
            raise ValueError(f"extra_body must be a JSON object (dict); got {type(self.extra_body).__name__}")
        if self.request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0 seconds; got {self.request_timeout_s!r}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {self.max_retries!r}")
        if self.context_window <= (self.max_tokens or 0):
            raise ValueError(f"context_window ({self.context_window}) must exceed max_tokens ({self.max_tokens})")

    def endpoint(self) -> str | None:
        """``base_url`` with a trailing ``/`` removed and ``/v1`` appended when missing (as the reference does)."""
        return None if self.base_url is None else v1_endpoint(self.base_url)

    def api_key(self) -> str:
        """The key from the environment variable named by ``api_key_env`` (placeholder when unset).

        Raises ValueError naming the variable (never its value) when it is named but not set.
        """
        return key_from_env(self.api_key_env) or NO_KEY_PLACEHOLDER

    def sampling_fields(self) -> dict:
        """The optional request fields that are set, for logs and result.json (no key, no messages)."""
        fields = {"model": self.model}
        for name in ("max_tokens", "tool_choice", "temperature"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        if self.extra_body:
            fields["extra_body"] = dict(self.extra_body)
        return fields


def v1_endpoint(base_url: str) -> str:
    """An OpenAI-compatible base URL as clients want it: trailing ``/`` removed, ``/v1`` appended when missing."""
    url = base_url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def key_from_env(api_key_env: str | None) -> str | None:
    """The API key held by the environment variable named ``api_key_env`` (``--api-key-env``); None when no
    variable is named. ValueError naming the variable (never a value) when it is named but unset or empty."""
    if api_key_env is None:
        return None
    value = os.environ.get(api_key_env)
    if not value:
        raise ValueError(f"--api-key-env names {api_key_env!r}, but that environment variable is not set")
    return value


def parse_extra_body(text: str | None) -> dict | None:
    """Parse ``--openai-extra-body`` JSON text into a dict; a clear ValueError when it is not a JSON object."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--openai-extra-body must be a JSON object, e.g. '{{\"top_p\": 0.95}}': {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"--openai-extra-body must be a JSON object, got {type(value).__name__}")
    return value
