"""The ``codex`` runtime: OpenAI Codex CLI (``codex exec``) driving the arm through the episode's MCP server.

Command line (PYRUALEAN-CONTRACT.md 4.3, adapted to the pinned Codex):
``codex exec -m <model> -c model_reasoning_effort="<r>" -c mcp_servers.pyrualean.url="<url>"
-c mcp_servers.pyrualean.bearer_token_env_var="PYRUALEAN_MCP_TOKEN" -c mcp_servers.pyrualean.tool_timeout_sec=<s>
-c project_doc_max_bytes=0 <isolation> [<provider>]
-s danger-full-access -C <workspace> --skip-git-repo-check --json -o <CODEX_HOME>/last_message.md
[-i <CODEX_HOME>/images/card_N.png]... -`` with the whole prompt on stdin. The CLI runs inside
:mod:`.cli_sandbox` (the boundary: Codex's own shell sandbox needs user namespaces, which it refuses), so the card
images are copied into CODEX_HOME; under ``--unsafe-sandbox`` it runs as it is, with ``-s workspace-write``,
``-o <out>/last_message.md`` and the run directory's images. Isolation: ``approval_policy="never"``, no update
check, no analytics, no plugins (their start-up sync reaches the network), no web search, no memories, no shell
snapshot. With ``--base-url`` a custom provider ``pyrualean`` is configured (``wire_api="responses"``, ``env_key`` = the
``--api-key-env`` variable, retries from ``PYRUALEAN_CODEX_RETRIES``, default 10); the key is passed only in the
environment, and so is the MCP server's per-run token (``PYRUALEAN_MCP_TOKEN``, which Codex sends as
``Authorization: Bearer``); both variables are kept out of the shell commands Codex runs
(``shell_environment_policy.exclude``: Codex's own ``*KEY*``/``*TOKEN*`` filter is off by default).
``CODEX_HOME`` is a clean ``<out>/codex_home`` holding only ``config.toml``; with ``--codex-home`` it holds, inside
the sandbox, copies of that folder's ``config.toml`` and ``auth.json`` alone (:data:`.cli_sandbox.SEED_FILES`: the
model's tools never see the rest of it, and nothing is written back into it); under ``--unsafe-sandbox``
``--codex-home`` is used as it is.

Accounting (4.4, 4.5): the ``--json`` stream goes to ``codex_events.jsonl``; ``turn.completed`` carries the
usage (the last one wins, as in the reference), ``item.completed`` items of type ``mcp_tool_call`` count tool
calls per tool, ``command_execution`` items are shell commands (audited), ``error`` items mentioning model
metadata are warnings, other errors and ``turn.failed`` are errors. A session killed before
``turn.completed`` has its usage recovered from the rollout file under ``CODEX_HOME/sessions``
(``usage_source="codex_rollout"``). ``total_tokens = input_tokens + output_tokens``; ``requests`` counts the
model responses the rollout recorded.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib

from pyrua_ros.records import bounded
from pyrua_ros.settings.model import v1_endpoint

from .cli_agent import MCP_TOKEN_ENV, CliRuntime, base_environment

SERVER = "pyrualean"
ROLLOUT_WALK = 10_000   # entries of CODEX_HOME/sessions looked at for this run's rollout files
WARNING_MARKERS = ("Model metadata for", "Defaulting to fallback metadata")
ISOLATION = (
    'approval_policy="never"', "check_for_update_on_startup=false", "analytics.enabled=false",
    "features.plugins=false", 'web_search="disabled"', "features.memories=false", "features.shell_snapshot=false",
    "project_doc_max_bytes=0",
)
CONFIG_TOML = """# Written by pyrua_ros for one episode: nothing here reaches the network or persists between runs.
approval_policy = "never"
check_for_update_on_startup = false
web_search = "disabled"
project_doc_max_bytes = 0

[features]
memories = false
plugins = false
shell_snapshot = false

[analytics]
enabled = false
"""


def codex_retries() -> int:
    """``PYRUALEAN_CODEX_RETRIES`` (an empty value counts as set, meaning 0), default 10."""
    value = os.environ.get("PYRUALEAN_CODEX_RETRIES")
    if value is None:
        return 10
    return int(value) if value.strip() else 0


class CodexRuntime(CliRuntime):
    """``codex exec`` over the episode's MCP server (see the module docstring)."""

    name = "codex"

    def __init__(self, settings, **kwargs):
        super().__init__(settings, **kwargs)
        # in the sandbox CODEX_HOME is the run directory's folder; a --codex-home only seeds it (cli_sandbox)
        self.home = (pathlib.Path(settings.home) if settings.home and not self.isolated
                     else self.out / "codex_home")
        self.usage: dict | None = None
        self.usage_source = "none"
        self.turns = 0
        self.thread_ids: list[str] = []
        self.tool_counts: collections.Counter[str] = collections.Counter()
        self.shell_commands: list[str] = []
        self.file_changes = 0
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._attempt_errors = 0
        self._attempt_tools = 0
        self._rollout_key: tuple = ()
        self._prepared = False
        self._images: list[pathlib.Path] | None = None
        self._rollout_value: tuple = (None, 0)

    @property
    def config_home(self) -> pathlib.Path:
        return self.home

    def prepare_home(self) -> None:
        """Create a clean CODEX_HOME with only config.toml (a ``--codex-home``: its own config.toml, placed by the
        sandbox; unsandboxed, the folder is used as it is). Once,
        before the first attempt: afterwards the folder is the model's to write (the CLI's shell runs there), so
        this process writes nothing into it again (a link planted at config.toml would be followed)."""
        if not self._prepared and (self.settings.home is None or self.home != pathlib.Path(self.settings.home)):
            self.home.mkdir(parents=True, exist_ok=True)
            if self.settings.home is None:
                (self.home / "config.toml").write_text(CONFIG_TOML)
        self._prepared = True

    def _card_images(self, images) -> list[pathlib.Path]:
        """The card images as the CLI sees them: inside its sandbox the run directory is out of view, so copies in
        CODEX_HOME/images, made once (like config.toml); else the run directory's own files."""
        if not self.isolated:
            return [pathlib.Path(image) for image in images]
        if self._images is None:
            self._images = []
            for index, card in enumerate(images):
                copy = self.home / "images" / f"card_{index}{pathlib.Path(card).suffix}"
                copy.parent.mkdir(exist_ok=True)
                copy.write_bytes(pathlib.Path(card).read_bytes())
                os.chmod(copy.parent, 0o755)   # readable by the sandbox's uid
                os.chmod(copy, 0o644)
                self._images.append(copy)
        return self._images

    def command(self, prompt, images, mcp_url, proxy_url, mcp_token=None):
        self.prepare_home()
        s = self.settings
        argv = [s.executable, "exec", "-m", s.model]
        if s.reasoning:
            argv += ["-c", f"model_reasoning_effort={json.dumps(s.reasoning)}"]
        argv += ["-c", f"mcp_servers.{SERVER}.url={json.dumps(mcp_url)}",
                 "-c", f"mcp_servers.{SERVER}.tool_timeout_sec={s.tool_timeout_s:g}",
                 "-c", f"mcp_servers.{SERVER}.startup_timeout_sec=60"]
        if mcp_token:
            argv += ["-c", f"mcp_servers.{SERVER}.bearer_token_env_var={json.dumps(MCP_TOKEN_ENV)}"]
        hidden = [name for name in (MCP_TOKEN_ENV if mcp_token else None, s.api_key_env) if name]
        if hidden:
            argv += ["-c", f"shell_environment_policy.exclude={json.dumps(hidden)}"]
        for item in ISOLATION:
            argv += ["-c", item]
        limit = os.environ.get("CODEX_AUTO_COMPACT_TOKEN_LIMIT")
        if limit:
            argv += ["-c", f"model_auto_compact_token_limit={int(limit)}"]
        if s.base_url:
            prefix = f"model_providers.{SERVER}"
            argv += ["-c", f"model_provider={json.dumps(SERVER)}", "-c", f"{prefix}.name={json.dumps(SERVER)}",
                     "-c", f"{prefix}.base_url={json.dumps(v1_endpoint(s.base_url))}",
                     "-c", f'{prefix}.wire_api="responses"',
                     "-c", f"{prefix}.request_max_retries={codex_retries()}",
                     "-c", f"{prefix}.stream_max_retries={codex_retries()}"]
            if s.api_key_env:
                argv += ["-c", f"{prefix}.env_key={json.dumps(s.api_key_env)}"]
        if self.isolated:   # inside cli_sandbox, which is the boundary (Codex's own needs user namespaces)
            argv += ["-s", "danger-full-access", "-C", str(self.workspace), "--skip-git-repo-check", "--json",
                     "-o", str(self.home / "last_message.md")]
        else:
            argv += ["-s", "workspace-write", "-C", str(self.workspace), "--skip-git-repo-check", "--json",
                     "-o", str(self.out / "last_message.md")]
        for image in self._card_images(images):
            argv += ["-i", str(image)]
        argv.append("-")
        env = base_environment(s, proxy_url)
        env.update(SHELL="/bin/bash", CODEX_HOME=str(self.home))
        if mcp_token:
            env[MCP_TOKEN_ENV] = mcp_token
        return argv, env, prompt.encode("utf-8")

    # -- the --json event stream ---------------------------------------------------------------------------
    def start_attempt(self) -> None:
        self._attempt_errors = 0
        self._attempt_tools = 0

    def on_event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "thread.started" and event.get("thread_id"):
            self.thread_ids.append(str(event["thread_id"]))
        elif kind == "turn.completed":
            self.turns += 1
            if isinstance(event.get("usage"), dict):
                self.usage = event["usage"]
                self.usage_source = "codex_events"
        elif kind in ("turn.failed", "error"):
            detail = event.get("error", {}).get("message") if kind == "turn.failed" else event.get("message")
            self.errors.append(json.dumps({"type": kind, "message": detail}, default=str)[:300])
            self._attempt_errors += 1
        elif kind == "item.completed":
            self._item(event.get("item") or {})

    def _item(self, item: dict) -> None:
        kind = item.get("type")
        if kind == "mcp_tool_call":
            self.tool_counts[str(item.get("tool"))] += 1
            self._attempt_tools += 1
        elif kind == "command_execution":
            self.shell_commands.append(str(item.get("command", ""))[:200])
        elif kind == "file_change":
            self.file_changes += 1
        elif kind == "agent_message" and item.get("text"):
            self.last_message = str(item["text"])
        elif kind == "error":
            message = str(item.get("message", ""))
            if any(marker in message for marker in WARNING_MARKERS):
                self.warnings.append(message[:300])
            else:
                self.errors.append(message[:300])
                self._attempt_errors += 1

    def attempt_failed(self) -> bool:
        return self._attempt_errors > 0 or self.returncode not in (0, None)

    def tool_calls_in_attempt(self) -> int:
        return self._attempt_tools

    # -- accounting ----------------------------------------------------------------------------------------
    def _rollout(self) -> tuple[dict | None, int]:
        """From this run's rollout files under CODEX_HOME/sessions: usage summed over its threads (the last
        ``token_count`` event of each) and the number of model responses (``token_count`` events)."""
        paths = self._rollout_paths()
        key = tuple((str(p), p.lstat().st_size) for p in paths)
        if key == self._rollout_key:   # progress views ask after every turn; read a file only when it grew
            return self._rollout_value
        totals: dict[str, int] = {}
        responses = 0
        found = False
        for path in paths:
            last = None
            try:   # (the CLI's folder is the model's to write: no link, FIFO or huge file is followed)
                text = bounded.read_bytes(path).decode("utf-8", errors="replace")
            except (OSError, ValueError):
                continue
            for line in text.splitlines():
                try:
                    record = bounded.loads(line, finite=False)
                except ValueError:
                    continue
                payload = record.get("payload") if isinstance(record, dict) else None
                if isinstance(payload, dict) and payload.get("type") == "token_count":
                    info = payload.get("info") or {}
                    if info.get("last_token_usage"):
                        responses += 1
                    last = info.get("total_token_usage") or last
            if last:
                found = True
                for name, value in last.items():
                    if isinstance(value, int):
                        totals[name] = totals.get(name, 0) + value
        self._rollout_key, self._rollout_value = key, ((totals if found else None), responses)
        return self._rollout_value

    def _rollout_paths(self) -> list[pathlib.Path]:
        """This run's rollout files under CODEX_HOME/sessions, found without following a link, at most
        ``ROLLOUT_WALK`` entries looked at."""
        wanted = tuple(f"{thread}.jsonl" for thread in self.thread_ids)
        found, seen = [], 0
        for folder, dirs, files in os.walk(self.home / "sessions"):   # (os.walk follows no linked folder)
            seen += len(dirs) + len(files)
            found += [pathlib.Path(folder, name) for name in files
                      if name.startswith("rollout-") and name.endswith(wanted)]
            if seen > ROLLOUT_WALK:
                break
        return sorted(found)

    def usage_totals(self) -> dict:
        recovered, responses = self._rollout() if self.thread_ids else (None, 0)
        usage = self.usage
        if usage is None and recovered:
            usage, self.usage_source = recovered, "codex_rollout"
        if usage is None:
            return {"requests": responses}
        inp, out = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        return {"input_tokens": inp, "cached_input_tokens": int(usage.get("cached_input_tokens") or 0),
                "output_tokens": out, "reasoning_output_tokens": int(usage.get("reasoning_output_tokens") or 0),
                "total_tokens": inp + out, "requests": responses or self.turns}

    def audit(self) -> dict:
        """The event audit kept in result.json's ``generation``."""
        return {"usage_source": self.usage_source, "codex_turns": self.turns, "thread_ids": self.thread_ids,
                "tool_calls": dict(self.tool_counts), "shell_commands": self.shell_commands,
                "file_changes": self.file_changes, "errors": self.errors, "warnings": self.warnings,
                "attempts": self.attempts}

    def host_fields(self) -> dict:
        """``host.codex_home`` and ``host.codex_context`` of result.json."""
        limit = os.environ.get("CODEX_AUTO_COMPACT_TOKEN_LIMIT")
        return {"codex_home": str(self.home),
                "codex_context": {"model_context_window": None,
                                  "model_auto_compact_token_limit": int(limit) if limit else None,
                                  "source": "CODEX_AUTO_COMPACT_TOKEN_LIMIT" if limit else "codex default"}}
