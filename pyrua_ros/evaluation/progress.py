"""What an evaluation shows while it runs: done/total, success so far, ETA, and what each worker is doing.

On a terminal a rich live view (a progress bar and one row per worker: instance, turn, steps, tokens, elapsed) is
redrawn in place; anywhere else (a pipe, a log file, CI) one plain line is printed per episode start and end. Both
count episodes finished by earlier runs of the same evaluation as done. "success so far" is the report's one rate
(``settings.outcomes``): agent outcomes in it, infrastructure failures and interrupts counted apart beside it;
an episode line names the cause of an infrastructure failure.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from pyrua_ros.agent.run.progress import _tokens
from pyrua_ros.settings import outcomes

REASON_CHARS = 160   # an infrastructure failure's cause, as long as one line shows it


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


class EvalProgress:
    """Counts and shows an evaluation's progress; thread-safe; ``tty`` overrides terminal detection. ``slots`` is
    None for a Ray cluster whose size is known only once joined (the coordinator sets it then)."""

    def __init__(self, total: int, slots: int | None, *, finished_before: int = 0, successes_before: int = 0,
                 stream: TextIO | None = None, tty: bool | None = None, count_errors_as_failures: bool = False):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.total, self.slots = total, slots
        # episodes finished by earlier runs are never infrastructure failures (those are run again)
        self.done, self.successes, self.infra, self.interrupted = finished_before, successes_before, 0, 0
        self.infra_solved = 0   # infrastructure failures whose benchmark check had passed
        self.count_errors_as_failures = count_errors_as_failures   # the final report's rule, here too
        self.failures = finished_before - successes_before
        self.run_now = 0
        self.durations: list[float] = []   # wall time of each episode that ended in this run [s]
        self.t0 = time.monotonic()
        self.workers: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._live = None
        self._note = ""

    # ------------------------------------------------------------------ state
    @property
    def eta_s(self) -> float | None:
        """Time left at this run's mean episode duration: what the running episodes still need plus the waiting
        ones, spread over the workers (None before the first episode ends)."""
        remaining = self.total - self.done
        if remaining <= 0:
            return 0.0
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        now = time.monotonic()
        running = [max(0.0, mean - (now - w["t0"])) for w in self.workers.values()]
        waiting = max(0, remaining - len(running))
        return (sum(running) + waiting * mean) / max(1, self.slots or 1)

    def counts(self) -> outcomes.RateCounts:
        """The buckets so far (finished episodes of earlier runs included) and the rate over them."""
        return outcomes.RateCounts(episodes=self.done, successes=self.successes, failures=self.failures,
                                   infra=self.infra, interrupted=self.interrupted, unknown=0,
                                   count_errors_as_failures=self.count_errors_as_failures,
                                   infra_solved=self.infra_solved)

    def headline(self) -> str:
        return (f"{self.done}/{self.total} done | success {self.counts().text()} | "
                f"elapsed {_duration(time.monotonic() - self.t0)} | ETA {_duration(self.eta_s)}")

    # ------------------------------------------------------------------ events
    def start(self) -> None:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self, console=Console(file=self.stream), refresh_per_second=2, transient=False)
            self._live.start()
        else:
            on = f"{self.slots} worker(s)" if self.slots else "the cluster's workers (counted once joined)"
            self._line(f"starting: {self.total - self.done} episode(s) to run on {on}, {self.done} already finished")

    def note(self, text: str) -> None:
        """Something the evaluation is doing before any episode runs (starting a private Ray instance): a plain
        line, or the live view's headline until the first episode starts."""
        with self._lock:
            self._note = text
        if not self.tty:
            self._line(text)

    def episode_started(self, slot: int, instance: str, attempt: int = 1) -> None:
        with self._lock:
            self._note = ""
            # the worker's host may still boot its driver: a phase from the first second
            self.workers[slot] = {"instance": instance, "attempt": attempt, "t0": time.monotonic(),
                                  "status": {"phase": "boot"}}
        if not self.tty:
            retry = f" (attempt {attempt})" if attempt > 1 else ""
            self._line(f"w{slot} start {instance}{retry}: boot")

    def episode_status(self, slot: int, status: dict[str, Any]) -> None:
        """A worker's agent status or phase; a plain stream gets a line for each new phase (``w0 reset
        libero_goal:8:0 (detail) at 4s``), so a log shows where every episode is, boot to records."""
        line = None
        with self._lock:
            worker = self.workers.get(slot)
            if worker is not None:   # a phase and the agent status arrive apart: the latest of each is kept
                phase = status.get("phase")
                if phase and phase != worker["status"].get("phase"):
                    detail = " ".join(str(status.get("phase_detail") or "").split())[:REASON_CHARS]
                    line = (f"w{slot} {phase} {worker['instance']}{f' ({detail})' if detail else ''} at "
                            f"{_duration(time.monotonic() - worker['t0'])}")
                worker["status"].update(status)
        if line and not self.tty:
            self._line(line)

    def episode_done(self, slot: int, instance: str, summary: dict[str, Any] | None, *, final: bool = True,
                     detail: str = "") -> None:
        """One episode ended; ``final`` False when it will be retried (not counted as done yet)."""
        summary = summary or {}
        status = summary.get("status") or "killed"
        outcome = outcomes.classify(status, summary.get("reason"), bool(summary.get("environment_success")))
        with self._lock:
            started = self.workers.pop(slot, None)
            if started is not None:
                self.durations.append(time.monotonic() - started["t0"])
            if final:
                self.done += 1
                self.run_now += 1
                if outcome.bucket == outcomes.INFRA:
                    self.infra += 1
                    self.infra_solved += outcome.solved
                elif outcome.bucket == outcomes.INTERRUPTED:
                    self.interrupted += 1
                elif outcome.bucket == outcomes.SUCCESS:
                    self.successes += 1
                else:
                    self.failures += 1
        if not self.tty:
            wall = summary.get("worker_wall_s")
            what = f"{status} {outcome.bucket if outcome.bucket != outcomes.FAILURE else 'no success'}"
            if outcome.bucket == outcomes.INFRA and summary.get("reason") and not detail:
                detail = " ".join(str(summary["reason"]).split())[:REASON_CHARS]
            retry = " -> retrying" if not final else ""
            extra = f" ({detail})" if detail else ""
            self._line(f"w{slot} done {instance}: {what} in {_duration(wall)}{extra}{retry} | {self.headline()}")
        elif outcome.bucket == outcomes.INFRA and self._live is not None:   # the cause above the live view
            from rich.text import Text

            cause = " ".join(str(summary.get("reason") or detail or "no reason recorded").split())[:REASON_CHARS]
            retry = " -> retrying" if not final else ""
            self._live.console.print(Text(f"w{slot} {instance}: {status}: {cause}{retry}"), soft_wrap=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # ------------------------------------------------------------------ output
    def _line(self, text: str) -> None:
        self.stream.write(f"[eval] {text}\n")
        self.stream.flush()

    def __rich__(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            table = Table(box=None, padding=(0, 1), show_edge=False)
            for column in ("worker", "instance", "phase", "turn", "steps", "tokens", "elapsed", "last"):
                table.add_column(column, no_wrap=True, overflow="ellipsis",
                                 max_width=48 if column == "last" else None)
            for slot in range(self.slots or 0):
                w = self.workers.get(slot)
                if w is None:
                    table.add_row(f"w{slot}", "idle", "", "", "", "", "", "")
                    continue
                st = w["status"]
                attempt = f" (try {w['attempt']})" if w["attempt"] > 1 else ""
                table.add_row(f"w{slot}", w["instance"] + attempt, str(st.get("phase", "-")), str(st.get("turn", "-")),
                              str(st.get("steps") if st.get("steps") is not None else "-"),
                              _tokens(st.get("tokens")), _duration(time.monotonic() - w["t0"]),
                              " ".join(str(st.get("last") or st.get("phase_detail") or "").split()))
            bar = Table.grid(padding=(0, 1))
            bar.add_row(ProgressBar(total=max(1, self.total), completed=self.done, width=60),
                        Text(f"{self.done}/{self.total}"))
            head = Text(self.headline() + (f" | {self._note}" if self._note else ""), style="bold")
            return Group(head, bar, table)
