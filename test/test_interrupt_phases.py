"""An interrupt at every phase of an episode on a reused host (as an eval worker reuses its driver) ends the episode
``interrupted``, never a success, with only this episode's facts in its record, and the report counts it apart.

The bug this pins: an episode interrupted during its reset read the reused host's status, which still held the
previous episode's latched success and step count, into its own record (``summarize --count-errors-as-failures``
then reported 5/6 for 4 real successes). The interrupt is raised exactly where the episode announces a phase (the
progress object the episode reports to raises KeyboardInterrupt, as SIGINT would there), on the real fake arm
driver node and the real episode code, in this process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyrua_ros.reports import summarize as S

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "pyrua_ros" / "examples" / "fake_table_cube_on_plate.py"


class InterruptAt:
    """A progress object that raises KeyboardInterrupt (as Ctrl-C would) when the episode reaches ``where``: a phase
    name, or ``turn`` (the first tool turn, mid-episode)."""

    def __init__(self, where: str | None):
        self.where = where

    def phase(self, name: str, detail: str = "", *, elapsed_s: float | None = None) -> None:
        if name == self.where:
            raise KeyboardInterrupt

    def turn(self, status) -> None:
        if self.where == "turn":
            raise KeyboardInterrupt

    def tick(self, status) -> None:
        pass

    def message(self, text: str, *, elapsed_s: float | None = None) -> None:
        pass


@pytest.fixture(scope="module")
def episode_host(tmp_path_factory):
    """One fake arm driver host for the module's episodes, reused as an eval worker reuses it."""
    from pyrua_ros.agent.run.episode import EpisodeHost

    tmp = tmp_path_factory.mktemp("host")
    opened = EpisodeHost(_config(tmp / "unused").episode)
    opened.open(tmp / "driver.log")
    try:
        yield opened
    finally:
        opened.close()


def _config(out: Path, seed: int = 0):
    from pyrua_ros.settings.config import AgentSettings, EpisodeSettings, OutputSettings, PlayConfig

    return PlayConfig(episode=EpisodeSettings(driver="fake", suite="fake_table", task=0, seed=seed),
                      agent=AgentSettings(replay=PROGRAM, images="none"),
                      output=OutputSettings(out=out, video=False, record=False, progress="off"))


def test_an_interrupt_at_every_phase_is_interrupted_and_carries_nothing_of_the_episode_before(tmp_path, episode_host):
    from pyrua_ros.agent.run.episode import play

    runs = tmp_path / "runs"
    phases = ["reset", "card", "prompt", "agent", "turn", "shutdown"]
    order = [None, *phases, None]   # a success first: the host's status then holds a latched success
    for k, where in enumerate(order):
        play(_config(runs / f"{k}-{where or 'whole'}", seed=k), progress=InterruptAt(where), host=episode_host)
    records = {p.parent.name: json.loads(p.read_text()) for p in runs.glob("*/result.json")}
    assert len(records) == len(order)
    whole = [records["0-whole"], records[f"{len(order) - 1}-whole"]]
    assert all(r["status"] == "completed" and r["environment_success"] for r in whole), whole
    for k, where in enumerate(phases, start=1):
        r = records[f"{k}-{where}"]
        assert (r["status"], r["reason"], r["environment_success"], r["error"]) == \
            ("interrupted", "interrupted", False, None), (where, r)
        if where == "reset":   # no reset of its own answered: no step count, no digest (the previous one's were 400+)
            assert r["env_steps_total"] is None and r["state_digest"] is None, r
        else:                  # measured in this episode: at most what this episode stepped
            assert r["env_steps_total"] is not None and r["env_steps_total"] <= (r["env_steps"] or 0), (where, r)
    # the report counts by the records: 2 successes over 2 measured episodes, 6 interrupted in no rate
    for flag in ([], ["--count-errors-as-failures"]):
        data = _summarize(runs, flag)
        assert (data["native_sr"], data["native_sr_denominator"]) == (1.0, 2)
        assert data["outcomes"] == {"success": 2, "failure": 0, "infra": 0, "interrupted": 6, "unknown": 0}


class WrappedInterruptAt(InterruptAt):
    """The interrupt as a library may hand it on: an error of its own raised from the KeyboardInterrupt (numba's
    ``SystemError ... returned a result with an exception set``), or an exception group holding it (a task group)."""

    def __init__(self, where: str, how: str):
        super().__init__(where)
        self.how = how

    def _raise(self):
        try:
            raise KeyboardInterrupt("signal 15")
        except KeyboardInterrupt as exc:
            if self.how == "group":
                raise ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError("a sibling task")]) from exc
            raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from exc

    def phase(self, name: str, detail: str = "", *, elapsed_s: float | None = None) -> None:
        if name == self.where:
            self._raise()

    def turn(self, status) -> None:
        if self.where == "turn":
            self._raise()


@pytest.mark.parametrize("where", ["card", "turn", "shutdown"])
@pytest.mark.parametrize("how", ["chained", "group"])
def test_an_interrupt_a_library_wrapped_in_its_error_is_still_interrupted(tmp_path, episode_host, where, how):
    """Not an infrastructure error left out of every rate by mistake, nor a fault: the user's interrupt, by the
    signal that raised it."""
    from pyrua_ros.agent.run.episode import play

    play(_config(tmp_path / "run"), progress=WrappedInterruptAt(where, how), host=episode_host)
    r = json.loads((tmp_path / "run" / "result.json").read_text())
    assert (r["status"], r["reason"], r["environment_success"], r["error"]) == \
        ("interrupted", "interrupted", False, None), r
    assert "interrupted by SIGTERM" in r["notes"], r


def _summarize(path: Path, flags: list[str]) -> dict:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert S.main([str(path), "--json", *flags]) == 0
    return json.loads(buffer.getvalue())


class SignalAt(InterruptAt):
    """A progress object that sends this process a real SIGINT at each phase in ``where``."""

    def __init__(self, *where: str):
        super().__init__(None)
        self.phases = where

    def phase(self, name: str, detail: str = "", *, elapsed_s: float | None = None) -> None:
        if name in self.phases:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGINT)


def test_a_second_ctrl_c_while_the_records_are_written_is_ignored(tmp_path, episode_host, capfd):
    """`timeout -s INT` signals the process and then its group, and an impatient user presses Ctrl-C twice: the
    second SIGINT arrives while the episode writes its records. It is reported and ignored, the episode's status
    stays ``interrupted`` and its records are all written (it used to escape the shutdown, once leaving the
    status the episode started with: ``error`` with no reason)."""
    from pyrua_ros.agent.run.episode import play

    out = tmp_path / "run"
    play(_config(out), progress=SignalAt("agent", "shutdown"), host=episode_host)
    record = json.loads((out / "result.json").read_text())
    assert (record["status"], record["reason"]) == ("interrupted", "interrupted"), record
    assert [n for n in record["notes"] if n.startswith("interrupted")] == ["interrupted by SIGINT"], record
    assert "signal 2 while the episode writes its records: ignored" in capfd.readouterr().err
    assert (out / "calls.jsonl").exists()


def test_one_interrupt_per_process_however_many_signals_and_scopes(capfd):
    """The first signal raises once; the same process's later signals, in the scope or the one around it (an
    eval worker around its episode, the agent node around play), are ignored; an ignored signal stays ignored."""
    import os
    import signal

    from pyrua_ros.agent.run.interrupts import FirstSignalInterrupts

    outer = FirstSignalInterrupts("the worker stops")
    previous = {s: signal.signal(s, outer) for s in (signal.SIGINT, signal.SIGHUP)}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt, match="signal 2"):
            with FirstSignalInterrupts("the episode writes its records").installed():
                assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN   # nohup's choice is kept
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):   # the handler runs between bytecodes of the main thread
                    pass
        assert signal.getsignal(signal.SIGINT) is outer and outer.done
        os.kill(os.getpid(), signal.SIGINT)   # the outer scope learnt of the interrupt: no second one
        os.kill(os.getpid(), signal.SIGHUP)
        assert "signal 2 while the worker stops: ignored" in capfd.readouterr().err
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
