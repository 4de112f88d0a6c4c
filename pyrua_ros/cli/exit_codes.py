"""Exit codes scripts can trust, one table for ``pyrualean`` / ``pyrua-ros`` and the agent node.

0 means the episode ran to its end (the agent finished, or stopped calling tools), whether the task succeeded or
not: success is in result.json (``environment_success``), never in the exit code. Every other ending has its own
code, so ``pyrualean play ... || handle $?`` can tell a bad command line from a dead simulator, a dead model server,
a spent budget and an interrupt.
"""

from __future__ import annotations

import signal

OK = 0             # the episode ran to its end (success or not)
ERROR = 1          # the host failed mid-episode (simulator died, an internal error); see result.json
BAD_INPUT = 2      # refused before anything booted: bad flag, unknown suite, task, seed, file, --out, model server
BOOT_ERROR = 3     # the robot could not be brought up (driver node, reset, card capture)
PLANNER_ERROR = 4  # the model server or runtime failed mid-episode (after its retries)
BUDGET = 5         # the wall-clock or decision budget ran out before the agent finished
INTERRUPTED = 128  # + the signal number: 130 for Ctrl-C (SIGINT), 143 for SIGTERM

TABLE = (
    (OK, "the episode ran to its end (success or not: see environment_success)"),
    (ERROR, "the host failed mid-episode (simulator died, internal error)"),
    (BAD_INPUT, "refused before anything booted (bad flag, suite, task, seed, file, --out, model server)"),
    (BOOT_ERROR, "the robot could not be brought up (driver node, reset, card)"),
    (PLANNER_ERROR, "the model server or runtime failed mid-episode"),
    (BUDGET, "the wall-clock or decision budget ran out before the agent finished"),
    (130, "interrupted by Ctrl-C (SIGINT); 143 for SIGTERM (128 + signal)"),
)


def help_epilog() -> str:
    """The exit-code table as ``--help`` shows it."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in TABLE)


def for_result(status: str, reason: str | None = None, *, interrupted_by: int | None = None) -> int:
    """The exit code of a finished ``play`` / ``run`` (a result.json ``status`` and ``reason``)."""
    reason = reason or ""
    if status == "interrupted" or reason == "interrupted" or interrupted_by is not None:
        return INTERRUPTED + int(interrupted_by or signal.SIGINT)
    if status == "boot_error":
        return BOOT_ERROR
    if status == "planner_error":
        return PLANNER_ERROR
    if status in ("timeout", "call_budget"):
        return BUDGET
    if status == "error" and reason not in ("load", "exception"):
        return ERROR
    return OK   # completed; single shot: finished, or the program's own failure (a measured outcome)
