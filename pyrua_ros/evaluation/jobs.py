"""What travels between the evaluation's coordinator and its workers (local processes or Ray actors), as JSON.

- a **job**: ``{"instance": {suite, task, seed}, "attempt": n, "config": <PlayConfig as JSON>}``; the config is
  ``play``'s own settings object for that episode, with ``out`` = the instance's run directory;
- **events** back: ``{"event": "ready" | "start" | "status" | "done" | "crash", "worker": i, ...}``; ``done`` carries
  :func:`episode_summary` of the result the episode wrote.

Every episode's truth stays its ``result.json``; events only drive progress and scheduling.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import typing
from typing import Any

from pyrua_ros.agent.config import PlayConfig

SUMMARY_KEYS = ("status", "reason", "environment_success", "tool_turns", "env_steps", "policy_wall_s",
                "total_wall_s")


@functools.cache
def _path_fields() -> frozenset[str]:
    hints = typing.get_type_hints(PlayConfig)
    return frozenset(name for name, hint in hints.items()
                     if hint is pathlib.Path or pathlib.Path in typing.get_args(hint))


def config_to_json(cfg: PlayConfig) -> dict[str, Any]:
    """Every PlayConfig field as a JSON value (paths as strings)."""
    return {f.name: (str(v) if isinstance(v := getattr(cfg, f.name), pathlib.PurePath) else v)
            for f in dataclasses.fields(cfg)}


def config_from_json(data: dict[str, Any], **changes: Any) -> PlayConfig:
    """Inverse of :func:`config_to_json` (validated again by PlayConfig itself), with ``changes`` applied."""
    values = {**data, **changes}
    for name in _path_fields():
        if isinstance(values.get(name), str):
            values[name] = pathlib.Path(values[name])
    return PlayConfig(**values)


def make_job(instance_json: dict[str, Any], cfg: PlayConfig, attempt: int = 1) -> dict[str, Any]:
    """The job message of one episode attempt."""
    return {"instance": dict(instance_json), "attempt": attempt, "config": config_to_json(cfg)}


def episode_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The keys of a result.json that progress and scheduling use (missing ones are None)."""
    summary = {key: result.get(key) for key in SUMMARY_KEYS}
    summary["total_tokens"] = (result.get("generation") or {}).get("total_tokens")
    return summary
