"""The schema of every frame the child sends: keys, types and the request id of the current job; a frame that
does not fit is refused, and a finished job's frame is reduced to the keys the host reads.
"""

from __future__ import annotations

from pyrua_ros.kernel import policy

_TEXT_KEYS = ("stdout", "stderr", "value", "exception", "episode_finished", "status", "reason")
_DONE_KEYS = frozenset(("op", "id", "interrupted", "load_failed", *_TEXT_KEYS))
_CALL_KEYS = frozenset(("op", "id", "name", "args", "kwargs"))
_PROGRAM_STATUSES = ("completed", "finished", "error")


def frame_problem(msg: dict, job: int) -> str | None:
    """Why ``msg`` (a decoded frame from the child during job ``job``) must be discarded, or None when it is a
    well-formed frame of this job."""
    op = msg.get("op")
    if op not in ("done", "call", "get", "display"):
        return f"unknown op {str(op)[:40]!r}"
    frame_id = msg.get("id")
    if not isinstance(frame_id, int) or isinstance(frame_id, bool) or frame_id != job:
        return f"{op} frame of job {str(frame_id)[:20]} arrived during job {job} (stale or forged)"
    if op == "done":
        extra = set(msg) - _DONE_KEYS
        if extra:
            return f"done frame with unknown keys {sorted(map(str, extra))[:5]}"
        for key in _TEXT_KEYS:
            if msg.get(key) is not None and not isinstance(msg[key], str):
                return f"done frame: {key} is a {type(msg[key]).__name__}, not text"
        for key in ("interrupted", "load_failed"):
            if not isinstance(msg.get(key, False), bool):
                return f"done frame: {key} is not a bool"
        if msg.get("status") is not None and msg["status"] not in _PROGRAM_STATUSES:
            return f"done frame: unknown status {msg['status'][:40]!r}"
        return None
    if op in ("call", "get"):
        extra = set(msg) - _CALL_KEYS
        if extra:
            return f"{op} frame with unknown keys {sorted(map(str, extra))[:5]}"
        name = msg.get("name")
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 100:
            return f"{op} frame names no method: {str(name)[:40]!r}"
        if not isinstance(msg.get("args", []), list) or not isinstance(msg.get("kwargs", {}), dict):
            return f"{op} frame: malformed arguments"
        return None
    if set(msg) - {"op", "id", "png"} or not isinstance(msg.get("png"), bytes):
        return "display frame without image bytes"
    return None


def clean_done(msg: dict) -> dict:
    """A validated done frame with its text trimmed to the contract's sizes."""
    out = dict(msg)
    for key in ("stdout", "stderr"):
        text = out.get(key) or ""   # the kernel trims already (head + marker + tail); a forged frame may not
        out[key] = text if len(text) <= policy.STREAM_HEAD + policy.STREAM_TAIL + 64 else policy.trim_middle(text)
    value = out.get("value")
    if value is not None and len(value) > policy.VALUE_CHARS + 64:   # the kernel keeps head + marker + tail
        out["value"] = policy.trim_middle(value, policy.VALUE_CHARS // 2, policy.VALUE_CHARS // 2)
    if out.get("exception") is not None:
        out["exception"] = out["exception"][-(policy.TRACEBACK_CHARS + 400):]
    for key in ("episode_finished", "reason"):
        if out.get(key) is not None:
            out[key] = out[key][:200]
    return out
