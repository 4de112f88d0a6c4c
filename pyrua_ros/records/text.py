"""Text that can always be written: model and kernel output made safe for files, JSON and rclpy.

Python strings may hold lone surrogates (``chr(0xD800)``, ``"\\ud800"`` in JSON from a model server or a kernel);
UTF-8 cannot encode them, so a file write, ``json.dump(..., ensure_ascii=False)`` to a file, or an rclpy String
publish would raise and could end an episode or lose a record. Every text that leaves the agent goes through
``safe_text`` / ``safe_data`` first. Pure Python, no imports: the kernel host imports it too.
"""

from __future__ import annotations

import re
from typing import Any

# C0 and C1 controls, DEL, the line and paragraph separators and the bidirectional overrides: what a terminal
# or a viewer would act on (OSC 52 clipboard writes, CSI 2J, a reordered line) instead of showing
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str) -> str:
    """``text`` with every code point UTF-8 cannot carry (a lone surrogate such as ``chr(0xD800)``) written as its
    escape (``\\ud800``), so model or kernel output can always reach a file, JSON or rclpy."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def safe_data(value: Any) -> Any:
    """``value`` with :func:`safe_text` applied to every string in it (dict keys included)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_data(k) if isinstance(k, str) else k: safe_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_data(v) for v in value]
    return value


def printable(text: str) -> str:
    """``text`` (made safe) with every control character written as its escape (``\\x1b``, ``\\n``,
    ``\\u2028``): what a report prints of a run directory's strings, which a hostile ``result.json`` may fill
    with terminal escape sequences."""
    text = safe_text(text)
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
