"""The ``claude`` runtime: Claude Code (``claude -p``) driving the arm through the episode's MCP server.

Command line: ``claude -p --input-format stream-json --output-format stream-json --verbose --model <model>
--mcp-config <json> --strict-mcp-config --tools Read,Glob,Grep --allowedTools Read,Glob,Grep,<mcp tools>
--setting-sources "" --max-turns <N+5 | 10000> (--effort <r> | --thinking disabled)``, run in the workspace.
As in the reference (PYRUALEAN-CONTRACT.md 4.3): the built-in tools are only Read, Glob and Grep, the MCP tools
are pre-approved by their ``mcp__pyrualean__<tool>`` names, no settings file or other MCP server is loaded, and
Claude Code keeps its default system prompt. The input is one stream-json user message whose content is the
prompt text and one base64 image block per card image. ``--reasoning none`` turns thinking off; any other level
is passed as ``--effort``. The model server is ``ANTHROPIC_BASE_URL`` (``--base-url`` without a trailing
``/v1``), the key ``ANTHROPIC_API_KEY`` (from ``--api-key-env``), ``CLAUDE_CONFIG_DIR`` a clean
``<out>/claude_config``. The MCP server's per-run token is in ``PYRUALEAN_MCP_TOKEN`` and the MCP config's
``headers`` say ``"Authorization": "Bearer ${PYRUALEAN_MCP_TOKEN}"`` (Claude Code expands ``${VAR}`` in headers),
so the token is in no argv and no file.

Accounting (4.5): one model request = one assistant ``message.id``; its prompt tokens are ``input_tokens +
cache_read_input_tokens + cache_creation_input_tokens`` (the Codex convention: cached tokens are part of the
input). Totals come from the final ``result`` message's ``usage`` (``usage_source="result+stream"``); without
one, prompt tokens are summed over the stream's requests and output tokens are unknown
(``usage_source="stream"``). ``error_max_turns`` is the turn ceiling (status ``call_budget``), other error
results are errors. Every stdout message is kept in ``claude_events.jsonl`` (image data replaced by sizes).
"""

from __future__ import annotations

import base64
import json
import pathlib

from .cli_agent import MCP_TOKEN_ENV, CliRuntime, base_environment

SERVER = "pyrualean"
BUILTIN_TOOLS = ("Read", "Glob", "Grep")
UNBOUNDED_TURNS = 10_000
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1", "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
}


def anthropic_base_url(base_url: str) -> str:
    """``--base-url`` as Claude Code wants it: the server root (a trailing ``/`` and ``/v1`` removed)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ClaudeRuntime(CliRuntime):
    """``claude -p`` over the episode's MCP server (see the module docstring)."""

    name = "claude"
    wants_tool_names = True

    def __init__(self, settings, *, tool_names: list[str], **kwargs):
        super().__init__(settings, **kwargs)
        self.tool_names = list(tool_names)
        self.config_dir = pathlib.Path(settings.home) if settings.home else self.out / "claude_config"
        self.max_turns = settings.max_turns + 5 if settings.max_turns is not None else UNBOUNDED_TURNS
        self.init: dict | None = None
        self.result: dict | None = None
        self.request_usage: dict[str, dict] = {}    # message id -> usage of that request
        self.tool_requests: list[int] = []          # request index (1-based) of each MCP tool call
        self.tool_calls = 0
        self.tool_results = 0
        self.tool_errors = 0
        self.compactions = 0
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._attempt_tools = 0

    @property
    def config_home(self) -> pathlib.Path:
        return self.config_dir

    def command(self, prompt, images, mcp_url, proxy_url, mcp_token=None):
        s = self.settings
        self.config_dir.mkdir(parents=True, exist_ok=True)
        server = {"type": "http", "url": mcp_url}
        if mcp_token:
            server["headers"] = {"Authorization": f"Bearer ${{{MCP_TOKEN_ENV}}}"}
        mcp_config = {"mcpServers": {SERVER: server}}
        allowed = [*BUILTIN_TOOLS, *(f"mcp__{SERVER}__{name}" for name in self.tool_names)]
        argv = [s.executable, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
                "--model", s.model, "--mcp-config", json.dumps(mcp_config), "--strict-mcp-config",
                "--tools", ",".join(BUILTIN_TOOLS), "--allowedTools", ",".join(allowed),
                "--setting-sources", "", "--max-turns", str(self.max_turns)]
        if s.reasoning == "none":
            argv += ["--thinking", "disabled"]
        elif s.reasoning:
            argv += ["--effort", s.reasoning]
        env = base_environment(s, proxy_url)
        env.update(QUIET_ENV)
        env.update(CLAUDE_CONFIG_DIR=str(self.config_dir), MCP_TIMEOUT="60000",
                   MCP_TOOL_TIMEOUT=str(int(s.tool_timeout_s * 1000)),
                   ANTHROPIC_API_KEY=s.api_key() or "not-needed")
        if mcp_token:
            env[MCP_TOKEN_ENV] = mcp_token
        if s.base_url:
            env["ANTHROPIC_BASE_URL"] = anthropic_base_url(s.base_url)
        content = [{"type": "text", "text": prompt}]
        for image in images:
            content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                        "data": base64.b64encode(image.read_bytes()).decode()}})
        message = {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None,
                   "session_id": ""}
        return argv, env, (json.dumps(message) + "\n").encode("utf-8")

    # -- the stream-json output ----------------------------------------------------------------------------
    def start_attempt(self) -> None:
        self.result = None
        self._attempt_tools = 0

    def on_event(self, event: dict) -> None:
        kind, subtype = event.get("type"), event.get("subtype")
        if kind == "system" and subtype == "init":
            self.init = {k: event.get(k) for k in ("model", "claude_code_version", "permissionMode", "tools",
                                                   "mcp_servers")}
            for server in event.get("mcp_servers") or []:
                if server.get("status") != "connected":
                    self.errors.append(f"MCP server {server.get('name')} is {server.get('status')}")
        elif kind == "system" and subtype == "compact_boundary":
            self.compactions += 1
        elif kind == "assistant":
            self._assistant(event.get("message") or {})
        elif kind == "user":
            for block in (event.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self.tool_results += 1
                    self.tool_errors += bool(block.get("is_error"))
        elif kind == "result":
            self.result = event
            if event.get("is_error") or (subtype and subtype != "success"):
                text = f"result {subtype}: {str(event.get('result') or event.get('errors') or '')[:300]}"
                (self.warnings if subtype in ("error_max_turns", "error_max_budget_usd") else self.errors).append(text)

    def _assistant(self, message: dict) -> None:
        message_id = str(message.get("id") or f"anon-{len(self.request_usage)}")
        if message_id not in self.request_usage:
            self.request_usage[message_id] = message.get("usage") or {}
        request_index = list(self.request_usage).index(message_id) + 1
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                self.tool_calls += 1
                if str(block.get("name", "")).startswith(f"mcp__{SERVER}__"):
                    self.tool_requests.append(request_index)
                    self._attempt_tools += 1
            elif block.get("type") == "text" and block.get("text"):
                self.last_message = str(block["text"])

    def attempt_failed(self) -> bool:
        if self.result is None:
            return True
        return bool(self.result.get("is_error")) and self.result.get("subtype") != "error_max_turns"

    def tool_calls_in_attempt(self) -> int:
        return self._attempt_tools

    def ceiling_hit(self) -> str | None:
        if self.result is not None and self.result.get("subtype") == "error_max_turns":
            return f"sdk turn ceiling exhausted ({self.max_turns})"
        return None

    # -- accounting ----------------------------------------------------------------------------------------
    @staticmethod
    def _prompt_tokens(usage: dict) -> int:
        return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                      "cache_creation_input_tokens"))

    def request_profile(self) -> list[int]:
        """Prompt tokens of each model request, in order."""
        return [self._prompt_tokens(u) for u in self.request_usage.values()]

    def usage_totals(self) -> dict:
        requests = len(self.request_usage)
        usage = (self.result or {}).get("usage")
        if isinstance(usage, dict):
            inp = self._prompt_tokens(usage)
            out = int(usage.get("output_tokens") or 0)
            details = usage.get("output_tokens_details") or {}
            return {"input_tokens": inp, "cached_input_tokens": int(usage.get("cache_read_input_tokens") or 0),
                    "cache_creation_input_tokens": int(usage.get("cache_creation_input_tokens") or 0),
                    "output_tokens": out, "reasoning_output_tokens": int(details.get("thinking_tokens") or 0),
                    "total_tokens": inp + out, "requests": requests, "usage_source": "result+stream"}
        if not requests:
            return {"requests": 0, "usage_source": "none"}
        inp = sum(self.request_profile())
        cached = sum(int(u.get("cache_read_input_tokens") or 0) for u in self.request_usage.values())
        return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": None,
                "reasoning_output_tokens": None, "total_tokens": None, "requests": requests,
                "usage_source": "stream"}

    def audit(self) -> dict:
        result = self.result or {}
        return {"usage_source": self.usage_totals().get("usage_source"), "init": self.init,
                "session_id": result.get("session_id"), "turns": result.get("num_turns"),
                "tool_calls": self.tool_calls, "tool_results": self.tool_results, "tool_errors": self.tool_errors,
                "tool_requests": self.tool_requests, "request_profile": self.request_profile(),
                "result_subtype": result.get("subtype"), "is_error": result.get("is_error"),
                "max_turns": self.max_turns, "max_turns_hit": result.get("subtype") == "error_max_turns",
                "stop_reason": result.get("stop_reason"), "duration_ms": result.get("duration_ms"),
                "duration_api_ms": result.get("duration_api_ms"), "total_cost_usd": result.get("total_cost_usd"),
                "model_usage": result.get("modelUsage"), "permission_denials": result.get("permission_denials"),
                "compactions": self.compactions, "errors": self.errors, "warnings": self.warnings,
                "attempts": self.attempts}

    def host_fields(self) -> dict:
        return {"claude_cli": self.settings.executable}
