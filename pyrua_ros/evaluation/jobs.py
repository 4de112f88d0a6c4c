"""What travels between the evaluation's coordinator and its workers (local processes or Ray actors), as JSON.

- a **job**: ``{"instance": {suite, task, seed}, "attempt": n, "config": <PlayConfig as JSON>}``; the config is
  ``play``'s own settings tree for that episode in the schema's nested JSON form (``schema.to_json`` /
  ``schema.from_json``), with ``output.out`` = the instance's run directory;
- **events** back: ``{"event": "ready" | "start" | "status" | "done" | "crash", "worker": i, ...}``; ``done`` carries
  :func:`episode_summary` of the result the episode wrote.

Every episode's truth stays its ``result.json``; events only drive progress and scheduling.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from pyrua_ros.settings import schema
from pyrua_ros.settings.config import PlayConfig

#: in ``--base-url``, the address of the node an episode runs on (its Ray actor's node; 127.0.0.1 for a local
#: worker): every node of a cluster points its episodes at a model server of its own
NODE_PLACEHOLDER = "{node}"
SUMMARY_KEYS = ("status", "reason", "environment_success", "tool_turns", "env_steps", "policy_wall_s",
                "total_wall_s")


def config_to_json(cfg: PlayConfig) -> dict[str, Any]:
    """The settings tree as nested JSON (the schema's own form)."""
    return schema.to_json(cfg)


def config_from_json(data: dict[str, Any], *, out: str | pathlib.Path | None = None) -> PlayConfig:
    """Inverse of :func:`config_to_json` (validated again by the settings classes); ``out`` replaces the run
    directory (a Ray actor that writes to scratch space first)."""
    cfg = schema.from_json(PlayConfig, data)
    if out is not None:
        cfg = dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, out=pathlib.Path(out)))
    return cfg


def make_job(instance_json: dict[str, Any], cfg: PlayConfig, attempt: int = 1) -> dict[str, Any]:
    """The job message of one episode attempt."""
    return {"instance": dict(instance_json), "attempt": attempt, "config": config_to_json(cfg)}


def episode_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The keys of a result.json that progress and scheduling use (missing ones are None)."""
    summary = {key: result.get(key) for key in SUMMARY_KEYS}
    summary["total_tokens"] = (result.get("generation") or {}).get("total_tokens")
    return summary
