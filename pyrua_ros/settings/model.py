"""Settings of the ``openai`` chat-completions runtime (PYRUALEAN-CONTRACT.md section 4b).

A field set to ``None`` is *not sent*: the request body only carries what the user asked for, so the
server's own defaults apply otherwise. ``extra_body`` is merged into the request body verbatim (the openai
client's ``extra_body``), e.g. ``{"top_p": 0.95, "top_k": 20}`` for the seed model card.

The api key is never stored here: ``api_key_env`` names the environment variable that holds it and
:meth:`ModelSettings.api_key` reads it at client construction time only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import math
import os
import urllib.parse

from pyrua_ros.settings.modes import TOOL_CHOICES
from pyrua_ros.settings.schema import SettingError, setting

DEFAULT_MODEL = "DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B"   # the seed's model (PyRUA-Lean Coder v0.1-4B)
MAX_REQUEST_TIMEOUT_S = 86400.0   # [s] one HTTP attempt at most a day (a timer refuses far larger values)
MAX_RETRIES = 1000
NO_KEY_PLACEHOLDER = "not-needed"   # sent when no --api-key-env is given (local servers ignore the key)


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """What the ``openai`` runtime sends, how it retries and how the model server is checked before a run.

    The user-facing fields are settings of the schema (:mod:`pyrua_ros.settings.schema`): their help text below is
    what ``--help``, the launch arguments and ``config/agent.yaml`` show. ``None`` = not sent (the server's
    default applies). Internal fields (no front end offers them): ``backoff_initial_s`` / ``backoff_max_s``
    (exponential backoff 1x, 2x, 4x ... capped [s]; a server's ``Retry-After`` is honoured up to the cap),
    ``image_tokens`` (estimated prompt tokens of one attached image, see context.py) and ``chars_per_token``
    (text characters per estimated token).
    """

    model: str = setting(DEFAULT_MODEL, help="model id sent to the server")
    reasoning: str | None = setting(None, help="reasoning effort: Codex's model_reasoning_effort, Claude Code's "
                                               "--effort (none: thinking off); the openai runtime records it (send "
                                               "it through --openai-extra-body)",
                                    unset="xhigh for codex and claude, else not set")
    base_url: str | None = setting(None, help="model server: OpenAI-compatible (openai; Responses API for codex), "
                                              "e.g. http://127.0.0.1:30000/v1 (/v1 is appended when missing), or "
                                              "Anthropic Messages API (claude)", metavar="URL")
    api_key_env: str | None = setting(None, help="name of the environment variable that holds the API key (the "
                                                 "key itself is never written anywhere)",
                                      unset="a placeholder key", metavar="VAR")
    max_tokens: int | None = setting(None, help="max_tokens per model response; also reserved out of the "
                                                "context window", flag="--openai-max-tokens",
                                     name="openai_max_tokens", unset="not sent")
    tool_choice: str | None = setting(None, help="tool_choice sent with every request", choices=TOOL_CHOICES,
                                      flag="--openai-tool-choice", name="openai_tool_choice", unset="not sent")
    temperature: float | None = setting(None, help="sampling temperature", flag="--openai-temperature",
                                        name="openai_temperature", unset="not sent")
    extra_body: dict | None = setting(None, help="JSON object merged into every request body verbatim, e.g. "
                                                 "'{\"top_p\": 0.95, \"top_k\": 20}'",
                                      flag="--openai-extra-body", name="openai_extra_body", unset="none",
                                      metavar="JSON")
    system_prompt: str | None = setting(None, help="optional system message (without one the whole prompt is the "
                                                   "first user message, as the reference sends it)",
                                        flag="--openai-system-prompt", name="openai_system_prompt")
    request_timeout_s: float = setting(600.0, help="hard limit of one HTTP attempt [s] (also cut to the budget)",
                                       flag="--openai-request-timeout-s", name="openai_request_timeout_s")
    max_retries: int = setting(5, help="retries after the first attempt on connection errors, timeouts, 429, "
                                       "5xx and bad JSON (exponential backoff)", flag="--openai-max-retries",
                               name="openai_max_retries")
    context_window: int = setting(65536, help="tokens the server accepts per request (old images, then old tool "
                                              "outputs are dropped to fit)")
    preflight: bool = setting(True, help="before anything boots, check the model server with one short GET of "
                                         "<base-url>/models (--no-preflight skips it)")
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    image_tokens: int = 1100
    chars_per_token: float = 3.5

    def __post_init__(self):
        """Refuse a setting that is not finite or out of range, naming the flag (before anything is built)."""
        if not self.model:
            raise SettingError("--model must be a non-empty model id")
        if self.tool_choice is not None and self.tool_choice not in TOOL_CHOICES:
            raise SettingError(f"--openai-tool-choice must be one of {', '.join(TOOL_CHOICES)} (or unset); "
                               f"got {self.tool_choice!r}")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise SettingError(f"--openai-max-tokens must be a positive integer; got {self.max_tokens!r}")
        if self.extra_body is not None and not isinstance(self.extra_body, dict):
            raise SettingError(f"--openai-extra-body must be a JSON object; got {type(self.extra_body).__name__}")
        for flag, value in (("--openai-request-timeout-s", self.request_timeout_s),
                            ("--openai-temperature", self.temperature), ("backoff_initial_s", self.backoff_initial_s),
                            ("backoff_max_s", self.backoff_max_s), ("chars_per_token", self.chars_per_token)):
            if isinstance(value, float) and not math.isfinite(value):   # nan passes every comparison below
                raise SettingError(f"{flag} must be a finite number; got {value!r}")
        if not 0 < self.request_timeout_s <= MAX_REQUEST_TIMEOUT_S:
            raise SettingError(f"--openai-request-timeout-s must be > 0 and at most {MAX_REQUEST_TIMEOUT_S:g} "
                               f"seconds; got {self.request_timeout_s!r}")
        if not 0 <= self.max_retries <= MAX_RETRIES:
            raise SettingError(f"--openai-max-retries must be 0..{MAX_RETRIES}; got {self.max_retries!r}")
        if self.context_window <= (self.max_tokens or 0):
            raise SettingError(f"--context-window ({self.context_window}) must exceed --openai-max-tokens "
                               f"({self.max_tokens})")
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise SettingError(f"--base-url must be an http:// or https:// URL, e.g. http://127.0.0.1:30000/v1; "
                               f"got {self.base_url!r}")

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


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is a loopback name or address."""
    host = urllib.parse.urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    if host in LOOPBACK_NAMES:
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False
