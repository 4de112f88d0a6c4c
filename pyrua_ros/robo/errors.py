"""The exceptions of the ``robo`` API: refusals are exceptions, measured outcomes are results.

- ``ToolError`` (a ``RuntimeError``): the backend could not serve a call (no answer, bad payload, a past step
  that was never viewed, a pixel without depth). Message ``"<tool>: <msg>"``.
- ``ValueError``: bad arguments, raised before anything is sent to the robot.
- ``EpisodeFinished`` (a ``BaseException``, so ``except Exception`` cannot swallow it): the episode is over.
"""

from __future__ import annotations

from typing import Any

EPISODE_END_REASONS = ("terminated", "truncated", "timeout", "cancelled", "call_budget")


class ToolError(RuntimeError):
    """A ``robo`` call failed on the robot side. ``tool``: ledger tool name, ``message``: what went wrong,
    ``payload``: the raw answer (dict) when there was one. ``str(err)`` is ``"<tool>: <message>"``."""

    def __init__(self, tool: str, message: str, payload: Any = None) -> None:
        super().__init__(f"{tool}: {message}")
        self.tool = tool
        self.message = message
        self.payload = payload


class EpisodeFinished(BaseException):
    """The episode is over; motion is refused from now on. ``reason`` is one of ``terminated`` (task success),
    ``truncated`` (simulator step budget spent), ``timeout`` (wall clock), ``cancelled``, ``call_budget``
    (decision budget spent). Read-only calls (state, image, segment, ...) keep working. ``str(exc)`` is the bare
    reason, as in PyRUA-Lean."""

    def __init__(self, reason: str) -> None:
        if reason not in EPISODE_END_REASONS:
            raise ValueError(f"EpisodeFinished reason must be one of {', '.join(EPISODE_END_REASONS)}, got {reason!r}")
        super().__init__(reason)
        self.reason = reason
