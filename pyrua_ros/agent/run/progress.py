"""Terminal progress of an episode, from its first second to its summary, on one clock.

What is shown (every time is seconds since the episode started, ``[ 12.3s]``):
- **phases** as they begin: ``check`` (validation, model server), ``boot`` (driver started, its pid and log),
  ``reset``, ``card``, ``prompt``, ``agent`` (runtime, model, budget), ``shutdown``;
- **one line per turn**: turn (of the decision budget), simulator steps, tokens, wall budget left, the episode
  state and a one-line summary of the result;
- **a live line inside long cells** (which tool, for how long, steps so far);
- **the summary** (status, success, turns, steps, tokens, time, exit code, run directory).

:class:`PlainProgress` writes whole lines only, no control characters (pipes, log files, the launch runner's
prefixed output); inside a long cell it adds a line every :data:`LIVE_EVERY_S`. :class:`RichProgress` (a terminal)
prints the same lines above a live status line that ``rich`` refreshes. :func:`make_progress` picks one
(``auto``: rich on a terminal). Status mappings are the agent status published on ``/agent/status``
(:meth:`pyrua_ros.agent.loop.arms.LoopAgent.status`). No ROS import.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

LAST_WIDTH = 60      # characters of the last cell result kept in a line
LIVE_EVERY_S = 10.0  # plain output: one live line per this many seconds while a tool runs


def _tokens(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(int(n))


def _oneline(text: Any, width: int = LAST_WIDTH) -> str:
    flat = "".join(ch if ch.isprintable() else " " for ch in str(text))
    flat = " ".join(flat.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _clock(elapsed: Any) -> str:
    return f"[{elapsed:6.1f}s]" if isinstance(elapsed, (int, float)) else "[     -s]"


def _episode_state(episode: Mapping[str, Any]) -> str:
    if episode.get("success"):
        return "success"
    if episode.get("truncated"):
        return "truncated"
    if episode.get("terminated"):
        return "terminated"
    return "running" if episode else "-"


def status_line(status: Mapping[str, Any]) -> str:
    """One turn line (no clock prefix) of a status mapping."""
    turn = status.get("turn", "-")
    max_turns = status.get("max_turns") or 0
    parts = [f"turn {turn}/{max_turns}" if max_turns else f"turn {turn}",
             f"steps {status.get('steps') if status.get('steps') is not None else '-'}",
             f"tokens {_tokens(status.get('tokens'))}"]
    left = status.get("budget_left_s")
    if isinstance(left, (int, float)):
        parts.append(f"budget {left:.0f}s left")
    parts.append(f"episode {_episode_state(status.get('episode') or {})}")
    line = " | ".join(parts)
    if status.get("last"):
        line += f" | last: {_oneline(status['last'])}"
    return line


def live_line(status: Mapping[str, Any]) -> str:
    """What is happening right now: the running tool and for how long, or waiting for the model."""
    running = status.get("running")
    steps = status.get("steps") if status.get("steps") is not None else "-"
    left = status.get("budget_left_s")
    budget = f" | budget {left:.0f}s left" if isinstance(left, (int, float)) else ""
    if running:
        return (f"turn {int(status.get('turn') or 0) + 1} running {running.get('tool')} for "
                f"{running.get('for_s', 0):.0f}s | steps {steps}{budget}")
    return f"waiting for the model (turn {int(status.get('turn') or 0) + 1}) | steps {steps}{budget}"


def summary_line(summary: Mapping[str, Any]) -> str:
    """The closing line of a result summary (``status``, ``environment_success``, ``tool_turns``, ``env_steps``,
    ``total_tokens``, ``total_wall_s``, ``startup_s``, ``exit_code``, ``out``; names as in result.json)."""
    total, startup = summary.get("total_wall_s"), summary.get("startup_s")
    time_part = f"time {total:.1f}s" if isinstance(total, (int, float)) else "time -"
    if isinstance(startup, (int, float)):
        time_part += f" (boot {startup:.1f}s)"
    parts = [f"status {summary.get('status', '-')}",
             f"success {'yes' if summary.get('environment_success') else 'no'}",
             f"turns {summary.get('tool_turns', '-')}", f"steps {summary.get('env_steps', '-')}",
             f"tokens {_tokens(summary.get('total_tokens'))}", time_part]
    if summary.get("exit_code") is not None:
        parts.append(f"exit {summary['exit_code']}")
    if summary.get("out"):
        parts.append(f"run {summary['out']}")
    line = "episode done: " + " | ".join(parts)
    if summary.get("reason") and summary.get("status") != "completed":
        line += f"\n  reason: {_oneline(summary['reason'], 400)}"
    return line


class PlainProgress:
    """Whole lines on ``stream``: phases, one line per turn, a live line per :data:`LIVE_EVERY_S` in long tools."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()
        self._last_live = 0.0
        self.t0 = time.monotonic()   # the one clock: an episode shown here counts from the command's start

    def _elapsed(self, elapsed_s: float | None) -> float:
        return time.monotonic() - self.t0 if elapsed_s is None else elapsed_s

    def _write(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def phase(self, name: str, detail: str = "", *, elapsed_s: float | None = None) -> None:
        self._write(f"{_clock(self._elapsed(elapsed_s))} {name}" + (f": {_oneline(detail, 200)}" if detail else ""))

    def message(self, text: str, *, elapsed_s: float | None = None) -> None:
        self._write(f"{_clock(self._elapsed(elapsed_s))} {_oneline(text, 300)}")

    def turn(self, status: Mapping[str, Any]) -> None:
        self._last_live = 0.0
        self._write(f"{_clock(status.get('elapsed_s'))} {status_line(status)}")

    def tick(self, status: Mapping[str, Any]) -> None:
        running = status.get("running") or {}
        for_s = running.get("for_s") or 0.0
        if running and for_s >= self._last_live + LIVE_EVERY_S:
            self._last_live = for_s - for_s % LIVE_EVERY_S
            self._write(f"{_clock(status.get('elapsed_s'))}   {live_line(status)}")
        elif not running:
            self._last_live = 0.0

    def finish(self, summary: Mapping[str, Any]) -> str:
        line = summary_line(summary)
        self._write(line)
        return line

    def close(self) -> None:
        """End the view without a summary (a refused command)."""


class RichProgress(PlainProgress):
    """The same lines printed by ``rich`` above a live status line (a terminal)."""

    def __init__(self, stream: TextIO | None = None):
        super().__init__(stream)
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._text = Text
        self.console = Console(file=self.stream, highlight=False, soft_wrap=False)
        self._live = Live(Text("starting"), console=self.console, refresh_per_second=4, transient=True)
        self._live.start()

    def _write(self, text: str) -> None:
        with self._lock:
            self.console.print(self._text(text))

    def phase(self, name: str, detail: str = "", *, elapsed_s: float | None = None) -> None:
        super().phase(name, detail, elapsed_s=elapsed_s)
        self._live.update(self._text(f"{name}..." + (f" {_oneline(detail, 100)}" if detail else ""), style="dim"))

    def tick(self, status: Mapping[str, Any]) -> None:
        self._live.update(self._text(f"{_clock(status.get('elapsed_s'))} {live_line(status)}", style="cyan"))

    def finish(self, summary: Mapping[str, Any]) -> str:
        self._live.stop()
        return super().finish(summary)

    def close(self) -> None:
        self._live.stop()


def make_progress(mode: str = "auto", stream: TextIO | None = None):
    """The progress view for ``--progress`` (``auto``, ``rich``, ``plain``, ``off``: None)."""
    stream = stream or sys.stderr
    if mode == "off":
        return None
    if mode == "rich" or (mode == "auto" and stream.isatty()):
        try:
            return RichProgress(stream)
        except ImportError:
            pass
    return PlainProgress(stream)
