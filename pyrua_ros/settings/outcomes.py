"""The one outcome taxonomy: every way an episode ends, the bucket it falls in, and which buckets a success rate
counts. ``play``, ``run``, ``mcp``, eval's workers and coordinator, its live line, ``summarize`` (table, JSON,
HTML, Markdown) and ``compare`` all classify an episode with :func:`classify` and count with :func:`rate_counts`;
docs/USAGE.md ("Outcomes and the success rate") has the same table in words.

Buckets:

- ``success`` / ``failure`` — an **agent outcome**: the episode ended for a reason the agent (the model, its
  program) caused or could have avoided; success is the benchmark's check (``environment_success``), never the
  agent's claim. Always in the rate's denominator.
- ``infra`` — an **infrastructure failure**: the driver could not boot, the model server failed after its
  retries, the simulator or host died, the episode was killed. Counted apart; ``eval`` runs them again; in the
  rate only with ``count_errors_as_failures``, then judged by the benchmark's check as the reference does (a
  crash before success is a failure; a model server that died after the task was solved leaves a success).
- ``interrupted`` — the user's Ctrl-C or SIGTERM. Never a success, in no rate, resumed by ``eval``.
- ``unknown`` — the outcome is not known (an RPent transcript without ``states.json``); in no rate.

The reference's ``native_sr`` (PYRUALEAN-CONTRACT.md 6.5) is successes over every episode whose
``environment_success`` is known, and its code arm records that as a boolean for every ending ("a crash, a
timeout or a boot failure is a failed episode"): the reference counts agent outcomes *and* infrastructure failures,
each by its ``environment_success``.
``count_errors_as_failures=True`` is that rule exactly (the reference has no interrupted status; an interrupt is
not a measurement, so it is left out either way); the default leaves infrastructure failures out, because eval
retries them and what is left is a fault of the machine, not a result of the model. Every output prints one rate,
named by :func:`rate_rule`, with each bucket's count beside it; ``native_sr`` in ``--json`` is that same rate.

Records keep the reference's status strings (``status`` + ``reason``); old run directories are read with the same
rules (``error``/``boot_error`` with reason ``interrupted`` were interrupts; a single-shot ``error`` with reason
``load`` or ``exception`` was always the program's own failure).
"""

from __future__ import annotations

import dataclasses

SUCCESS, FAILURE, INFRA, INTERRUPTED, UNKNOWN = "success", "failure", "infra", "interrupted", "unknown"
BUCKETS = (SUCCESS, FAILURE, INFRA, INTERRUPTED, UNKNOWN)
AGENT, INFRASTRUCTURE, USER = "agent", "infrastructure", "user"   # who ended the episode


@dataclasses.dataclass(frozen=True)
class OutcomeKind:
    """One way an episode ends: ``name`` (what reports print), ``side`` (agent | infrastructure | user), how it is
    recorded (``status`` of result.json, ``reason`` where the status alone does not tell) and what it means."""

    name: str
    side: str
    status: str
    reason: str
    meaning: str


# Agent outcomes first, then infrastructure failures, then the interrupt (docs/USAGE.md prints them in this order).
KINDS: tuple[OutcomeKind, ...] = (
    OutcomeKind("ended", AGENT, "completed", "-",
                "the agent called finish (success or failure claimed: the benchmark's check decides), or the "
                "model replied without a tool call (its final message); run: run(robo) returned"),
    OutcomeKind("episode_finished", AGENT, "finished", "terminated / truncated / ...",
                "run: the episode ended under the program (EpisodeFinished: success latched, step budget spent)"),
    OutcomeKind("budget_exhausted", AGENT, "call_budget", "call budget exhausted (N)",
                "the turn / decision budget (--max-turns, Claude's turn ceiling) ran out"),
    OutcomeKind("timeout", AGENT, "timeout", "timeout",
                "the wall-clock budget (--budget-s) or the program's watchdog (--timeout-s) ran out; a cell past "
                "its --cell-timeout-s is a cell error the model sees, and the loop goes on"),
    OutcomeKind("program_raised", AGENT, "error", "exception",
                "run: run(robo) raised (the program's own bug), or the kernel died of the program's code"),
    OutcomeKind("program_refused", AGENT, "error", "load",
                "run: the program was refused at load (syntax, audit, no run(robo))"),
    OutcomeKind("context_exhausted", AGENT, "planner_error", "provider error mid-episode: context: ...",
                "the conversation outgrew the model's context window even after old images and turns were dropped"),
    OutcomeKind("boot_failed", INFRASTRUCTURE, "boot_error", "why",
                "the driver could not boot, reset or capture the card; the agent never started"),
    OutcomeKind("model_server_failed", INFRASTRUCTURE, "planner_error", "provider error mid-episode: ...",
                "the model server failed after its retries (connection refused, HTTP errors) and no finish came"),
    OutcomeKind("host_failed", INFRASTRUCTURE, "error", "the exception (and the driver's last error line)",
                "the simulator or the episode host died mid-episode, or a record could not be written"),
    OutcomeKind("killed", INFRASTRUCTURE, "killed", "killed: ...",
                "the host process was killed before it wrote its record (eval writes this record for it)"),
    OutcomeKind("interrupted", USER, "interrupted", "interrupted",
                "the user's Ctrl-C (SIGINT) or SIGTERM/SIGHUP; resumed by running the same eval command again"),
)
KIND_BY_NAME = {k.name: k for k in KINDS}
PROGRAM_REASONS = {"exception": "program_raised", "load": "program_refused"}
_BY_STATUS = {"completed": "ended", "finished": "episode_finished", "call_budget": "budget_exhausted",
              "timeout": "timeout", "boot_error": "boot_failed", "planner_error": "model_server_failed",
              "killed": "killed", "interrupted": "interrupted"}
CONTEXT_REASON = "provider error mid-episode: context:"   # the loop's reason when the prompt cannot fit any more
INFRA_STATUSES = ("boot_error", "planner_error", "error", "killed")   # statuses that may be infrastructure


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one episode ended: its :class:`OutcomeKind` name, its bucket (:data:`BUCKETS`) and, for an
    infrastructure failure, what the benchmark's check said (``solved``; counted only with
    ``count_errors_as_failures``)."""

    kind: str
    bucket: str
    solved: bool = False

    @property
    def side(self) -> str:
        return KIND_BY_NAME[self.kind].side


def kind_of(status: str | None, reason: str | None = None) -> str:
    """The outcome kind of a result.json ``status`` and ``reason`` (old records included, see the module docstring).
    A status that is missing or not known is an infrastructure failure (``host_failed``): a record that says
    nothing is not a measurement."""
    reason = str(reason or "")
    if status == "interrupted" or reason == "interrupted" or reason.startswith("interrupted"):
        return "interrupted"
    if status == "error":
        return PROGRAM_REASONS.get(reason, "killed" if reason.startswith("killed") else "host_failed")
    if status == "planner_error" and reason.startswith(CONTEXT_REASON):
        return "context_exhausted"
    return _BY_STATUS.get(str(status), "host_failed")


def classify(status: str | None, reason: str | None = None, environment_success: bool | None = False) -> Outcome:
    """The :class:`Outcome` of an episode. Agent outcomes are ``success`` when the benchmark's check passed,
    ``unknown`` when it is not known (``None``), else ``failure``; an interrupt is never a success."""
    return outcome_of_kind(kind_of(status, reason), environment_success)


def outcome_of_kind(kind: str, environment_success: bool | None = False) -> Outcome:
    """The :class:`Outcome` of an episode whose kind is known (see :func:`classify`); an unknown kind name is an
    infrastructure failure (``host_failed``)."""
    kind = kind if kind in KIND_BY_NAME else "host_failed"
    side = KIND_BY_NAME[kind].side
    if side == USER:
        return Outcome(kind, INTERRUPTED)
    if side == INFRASTRUCTURE:
        return Outcome(kind, INFRA, solved=bool(environment_success))
    if environment_success is None:
        return Outcome(kind, UNKNOWN)
    return Outcome(kind, SUCCESS if environment_success else FAILURE)


def is_infra(status: str | None, reason: str | None = None) -> bool:
    """True when the episode ended by an infrastructure failure (eval runs it again)."""
    return KIND_BY_NAME[kind_of(status, reason)].side == INFRASTRUCTURE


def is_final(status: str | None, reason: str | None = None) -> bool:
    """True when the episode is a measurement eval keeps (an agent outcome); infrastructure failures and
    interrupts run again."""
    return KIND_BY_NAME[kind_of(status, reason)].side == AGENT


@dataclasses.dataclass(frozen=True)
class RateCounts:
    """Bucket counts of a group of episodes and the one success rate over them.

    ``successes`` / ``failures`` are the agent outcomes; ``infra_solved`` the infrastructure failures whose benchmark
    check had passed. The rate counts ``rate_successes`` over ``denominator``: successes over successes + failures,
    and with ``count_errors_as_failures`` every infrastructure failure too, judged by its check (the reference's
    rule). ``rate`` is None when the denominator is 0.
    """

    episodes: int
    successes: int
    failures: int
    infra: int
    interrupted: int
    unknown: int
    count_errors_as_failures: bool
    infra_solved: int = 0

    @property
    def denominator(self) -> int:
        return self.successes + self.failures + (self.infra if self.count_errors_as_failures else 0)

    @property
    def rate_successes(self) -> int:
        return self.successes + (self.infra_solved if self.count_errors_as_failures else 0)

    @property
    def rate(self) -> float | None:
        return self.rate_successes / self.denominator if self.denominator else None

    def buckets(self) -> dict[str, int]:
        """``{success, failure, infra, interrupted, unknown}`` counts (each episode in exactly one)."""
        return {SUCCESS: self.successes, FAILURE: self.failures, INFRA: self.infra, INTERRUPTED: self.interrupted,
                UNKNOWN: self.unknown}

    def text(self) -> str:
        """``"3/5 (60.0%); infra 1, interrupted 1"``: the rate with every non-empty bucket outside it beside it."""
        rate = "-" if self.rate is None else f"{100 * self.rate:.1f}%"
        infra_word = "infra (in the rate)" if self.count_errors_as_failures else "infra"
        apart = [f"{name} {n}" for name, n in ((infra_word, self.infra), ("interrupted", self.interrupted),
                                               ("unknown", self.unknown)) if n]
        return f"{self.rate_successes}/{self.denominator} ({rate})" + (f"; {', '.join(apart)}" if apart else "")


def rate_counts(outcomes, *, count_errors_as_failures: bool = False) -> RateCounts:
    """Count :class:`Outcome` s (an iterable) into a :class:`RateCounts`."""
    counts = dict.fromkeys(BUCKETS, 0)
    solved = 0
    for outcome in outcomes:
        counts[outcome.bucket] += 1
        solved += outcome.bucket == INFRA and outcome.solved
    return RateCounts(episodes=sum(counts.values()), successes=counts[SUCCESS], failures=counts[FAILURE],
                      infra=counts[INFRA], interrupted=counts[INTERRUPTED], unknown=counts[UNKNOWN],
                      count_errors_as_failures=count_errors_as_failures, infra_solved=solved)


def rate_rule(count_errors_as_failures: bool = False) -> str:
    """The rule the rate was counted by, in words (printed beside every rate)."""
    if count_errors_as_failures:
        return ("successes / (agent outcomes + infrastructure failures, each judged by the benchmark's check), "
                "interrupts left out: the reference's native_sr rule")
    return "successes / agent outcomes; infrastructure failures and interrupts counted apart, left out"


__all__ = ["AGENT", "BUCKETS", "FAILURE", "INFRA", "INFRASTRUCTURE", "INFRA_STATUSES", "INTERRUPTED", "KINDS",
           "KIND_BY_NAME", "SUCCESS", "UNKNOWN", "USER", "Outcome", "OutcomeKind", "RateCounts", "classify",
           "is_final", "is_infra", "kind_of", "outcome_of_kind", "rate_counts", "rate_rule"]
