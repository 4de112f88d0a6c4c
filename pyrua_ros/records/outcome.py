"""What an agent strategy's ``run`` returns: a frozen :class:`StrategyOutcome` (status, reason, error, notes) that
the :class:`~pyrua_ros.agent.run.episode.Episode` applies in one place (:meth:`~pyrua_ros.agent.run.episode.Episode.
apply_outcome`), after which it reads the benchmark's verdict once. The statuses and what each means are the
outcome taxonomy of :mod:`pyrua_ros.settings.outcomes`."""

from __future__ import annotations

import dataclasses

from pyrua_ros.records.records import ErrorInfo


@dataclasses.dataclass(frozen=True)
class StrategyOutcome:
    """How the agent's part of an episode ended: ``status`` (a result.json status: ``completed``, ``timeout``,
    ``call_budget``, ``planner_error``, ``interrupted``, ``finished``, ``error``), ``reason`` (None where the
    status says all), ``error`` (the failure's record, if one) and ``notes`` (lines for result.json)."""

    status: str
    reason: str | None = None
    error: ErrorInfo | None = None
    notes: tuple[str, ...] = ()
