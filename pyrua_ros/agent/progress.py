"""Terminal progress of one episode, for ``pyrualean play`` and the agent node under the launch runner.

Input is the agent status (the JSON the agent publishes on ``/agent/status``), as a mapping with the keys
``turn`` (tool calls so far), ``max_turns`` (0 or absent: unbounded), ``steps`` (simulator control steps),
``tokens`` (total tokens so far), ``last`` (one-line summary of the last cell result), ``elapsed_s`` [s] and
``episode`` (the episode status: ``success``, ``terminated``, ``truncated``). Missing keys show as ``-``.

On a terminal one status line is rewritten in place at every update; otherwise (a pipe, a log file, the
runner's prefixed output) one line is printed per turn. :meth:`ProgressView.finish` ends with a short summary.
No ROS import.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from typing import Any, TextIO

LAST_WIDTH = 60   # characters of the last cell result kept in a line


def _tokens(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(int(n))


def _oneline(text: Any, width: int = LAST_WIDTH) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _episode_state(episode: Mapping[str, Any]) -> str:
    if episode.get("success"):
        return "success"
    if episode.get("truncated"):
        return "truncated"
    if episode.get("terminated"):
        return "terminated"
    return "running" if episode else "-"


def status_line(status: Mapping[str, Any]) -> str:
    """One line for a status mapping (see the module docstring for the keys)."""
    turn = status.get("turn", "-")
    max_turns = status.get("max_turns") or 0
    turns = f"{turn}/{max_turns}" if max_turns else f"{turn}"
    elapsed = status.get("elapsed_s")
    parts = [f"turn {turns}", f"steps {status.get('steps', '-')}", f"tokens {_tokens(status.get('tokens'))}",
             f"episode {_episode_state(status.get('episode') or {})}"]
    if isinstance(elapsed, (int, float)):
        parts.append(f"{elapsed:.0f}s")
    line = " | ".join(parts)
    if status.get("last"):
        line += f" | last: {_oneline(status['last'])}"
    return line


def summary_line(summary: Mapping[str, Any]) -> str:
    """The closing line from a result summary (``status``, ``environment_success``, ``tool_turns``,
    ``env_steps``, ``total_tokens``, ``policy_wall_s``, ``out``; names as in result.json)."""
    wall = summary.get("policy_wall_s")
    parts = [f"status {summary.get('status', '-')}",
             f"success {'yes' if summary.get('environment_success') else 'no'}",
             f"turns {summary.get('tool_turns', '-')}", f"steps {summary.get('env_steps', '-')}",
             f"tokens {_tokens(summary.get('total_tokens'))}",
             f"wall {wall:.1f}s" if isinstance(wall, (int, float)) else "wall -"]
    if summary.get("out"):
        parts.append(f"run {summary['out']}")
    return "episode done: " + " | ".join(parts)


class ProgressView:
    """Shows agent status updates on ``stream`` (stderr by default); ``tty`` overrides terminal detection."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._last_turn: Any = None
        self._live = False

    def update(self, status: Mapping[str, Any]) -> None:
        """Show one status: rewrite the live line (terminal) or print a line when the turn changed (otherwise)."""
        line = status_line(status)
        if self.tty:
            width = shutil.get_terminal_size((120, 20)).columns - 1
            self.stream.write("\r" + line[:width] + "\x1b[K")
            self._live = True
        elif status.get("turn") != self._last_turn:
            self.stream.write(line + "\n")
        self._last_turn = status.get("turn")
        self.stream.flush()

    def finish(self, summary: Mapping[str, Any]) -> str:
        """End the live line and print the summary; returns the summary line."""
        line = summary_line(summary)
        if self._live:
            self.stream.write("\n")
            self._live = False
        self.stream.write(line + "\n")
        self.stream.flush()
        return line
