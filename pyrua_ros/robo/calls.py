"""How one ``robo`` call runs: the episode guard, the call ledger and the recorded states.

``CallRunner`` is shared by every verb of a robot. A read-only call (``readonly``) runs its body and appends one
ledger record; a motion call (``stateful``) first checks that the episode may still move (``EpisodeFinished``
otherwise), runs its body, records the new state (one recorded step per motion call) and appends a record whose
``env_steps`` is the driver's step counter delta. Backend failures become ``ToolError``; refusals because the
episode ended latch ``terminated`` / ``truncated`` so the running loop stops and the next motion raises.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from pyrua_ros import cputime
from pyrua_ros.robo.backend import BackendRefused, BackendTimeout, RobotBackend
from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.robo.ledger import summarize
from pyrua_ros.robo.results import State


def _kwargs_with_args(args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, **({"args": list(args)} if args else {})}


def ledger_refusals(tool: str) -> Callable:
    """Decorator of a verb: ledger a ValueError / TypeError raised by its argument checks or casts before the call
    reached the robot (ok False, not stateful). Calls that got further ledger themselves."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            ledger = self._calls.ledger
            started, n = time.time(), len(ledger)
            try:
                return fn(self, *args, **kwargs)
            except (ValueError, TypeError) as exc:
                if len(ledger) == n:
                    ledger.append(tool=tool, kwargs=_kwargs_with_args(args, kwargs), started_at=started,
                                  elapsed_s=time.time() - started, ok=False, stateful=False,
                                  error=f"{type(exc).__name__}: {exc}")
                raise
        return call
    return wrap


class CallRunner:
    """Guard, ledger and recorded states of one robot on ``backend``; ``host`` is its RobotHost."""

    def __init__(self, backend: RobotBackend, host: Any) -> None:
        self.backend = backend
        self.host = host
        self.ledger = host.ledger
        self.latched: dict[str, bool] = {"terminated": False, "truncated": False}

    # -- running a call ---------------------------------------------------------------------------------------
    def readonly(self, tool: str, kwargs: dict[str, Any], fn: Callable[[], Any], *,
                 note: Callable[[], str | None] | None = None) -> Any:
        """Run a read-only call and ledger it; ``note()`` (after ``fn``) is the record's operator note."""
        started = time.time()
        try:
            with cputime.section("robo: read-only calls"):
                result = fn()
        except BaseException as exc:
            self.ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started,
                               ok=False, stateful=False, error=f"{type(exc).__name__}: {exc}",
                               note=note() if note else None)
            if isinstance(exc, BackendTimeout | BackendRefused | ConnectionError):
                raise ToolError(tool, str(exc)) from exc
            raise
        self.ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started, ok=True,
                           stateful=False, summary=summarize(tool, result), note=note() if note else None)
        return result

    def stateful(self, tool: str, kwargs: dict[str, Any], fn: Callable[[], Any]) -> Any:
        """Guard, run one motion, record the new state and the ledger entry (env_steps from the status step)."""
        started = time.time()
        step0 = self.env_step()
        clipped0 = self.clipped_steps()
        dispatched = False
        try:
            self.guard()
            dispatched = True
            with cputime.section("robo: motion calls"):
                result = fn()
        except BaseException as exc:
            if dispatched and self.env_step() != step0:   # a call refused before any step records no new state
                self.record_state()
            self.ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started,
                               ok=False, stateful=dispatched, env_steps=self.env_step() - step0,
                               error=f"{type(exc).__name__}: {exc}")
            if isinstance(exc, BackendTimeout):
                raise ToolError(tool, str(exc)) from exc
            raise
        self.record_state()
        summary = summarize(tool, result)
        clipped = self.clipped_steps() - clipped0
        if clipped:   # the driver's safety filter changed some of this motion's steps: say so
            summary["clipped_steps"] = clipped
        self.ledger.append(tool=tool, kwargs=kwargs, started_at=started, elapsed_s=time.time() - started, ok=True,
                           stateful=True, env_steps=self.env_step() - step0, summary=summary)
        return result

    def clipped_steps(self) -> int:
        """Control steps the driver's safety filter clipped so far (0 for a backend that does not report them)."""
        count = getattr(self.backend, "clipped_steps", None)
        return int(count()) if callable(count) else 0

    def unavailable(self, name: str, args: tuple, kwargs: dict[str, Any], message: str) -> None:
        """Ledger and raise the refusal of a verb this run does not offer (RuntimeError)."""
        started = time.time()
        self.ledger.append(tool=name, kwargs=_kwargs_with_args(args, kwargs), started_at=started,
                           elapsed_s=time.time() - started, ok=False, stateful=False, error=f"RuntimeError: {message}")
        raise RuntimeError(message)

    # -- episode flags ----------------------------------------------------------------------------------------
    def env_step(self) -> int:
        """The driver's control step counter."""
        return int(getattr(self.backend.status(), "step", 0))

    def latch(self, status: Any) -> None:
        """Latch terminated (task success) / truncated (step budget spent) from a driver status."""
        if getattr(status, "terminated", False) or getattr(status, "success", False):
            self.latched["terminated"] = True
        if getattr(status, "truncated", False):
            self.latched["truncated"] = True

    def flags(self) -> tuple[bool, bool]:
        """(terminated, truncated) now, latched."""
        self.latch(self.backend.status())
        return self.latched["terminated"], self.latched["truncated"]

    @property
    def done(self) -> bool:
        """The task predicate has fired (sticky)."""
        if not self.latched["terminated"]:
            self.latch(self.backend.status())
        return self.latched["terminated"]

    def check_stop(self) -> None:
        """EpisodeFinished when the host stopped the episode (timeout, cancelled, call budget)."""
        reason = self.host.stop_reason
        if reason is not None:
            raise EpisodeFinished(reason)

    def guard(self) -> None:
        """EpisodeFinished before dispatch when the host stopped the episode or it terminated / truncated."""
        self.check_stop()
        term, trunc = self.flags()
        if term:
            raise EpisodeFinished("terminated")
        if trunc:
            raise EpisodeFinished("truncated")

    def refused(self, tool: str, exc: BackendRefused) -> None:
        """Handle a driver refusal inside a motion: an ended episode is latched (the loop stops, None), a
        cancel ends the episode, anything else is a ToolError."""
        self.check_stop()
        if exc.reason in ("terminated", "truncated"):
            self.latched[exc.reason] = True
            return
        if exc.reason == "cancelled":
            raise EpisodeFinished("cancelled") from exc
        raise ToolError(tool, f"driver refused: {exc}") from exc

    # -- recorded states --------------------------------------------------------------------------------------
    def build_state(self, step: int) -> State:
        """A State of the robot now, recorded as ``step``."""
        status = self.backend.status()
        self.latch(status)
        pose = self.backend.ee_pose()
        joints = self.backend.joints()
        fingers = [float(p) for n, p in zip(joints.names, joints.positions) if "finger" in n]
        qpos = [*fingers, 0.0, 0.0][:2]
        opening = abs(qpos[0]) + abs(qpos[1]) if fingers else float(self.backend.gripper_opening())
        return State(step=step, task=str(getattr(status, "task_language", "")),
                     eef_pos=(float(pose.pos[0]), float(pose.pos[1]), float(pose.pos[2])),
                     eef_quat=tuple(float(v) for v in pose.quat_xyzw), gripper_qpos=(qpos[0], qpos[1]),
                     gripper_opening=float(opening), object_names=tuple(getattr(status, "object_names", ()) or ()),
                     terminated=self.latched["terminated"], truncated=self.latched["truncated"])

    def current_state(self) -> State:
        """The latest recorded state (step 0 is recorded on first use)."""
        state = self.host.latest_state
        if state is None:
            step = self.env_step()
            state = self.build_state(0)
            self.host.record_state(state, env_step=step)
        return state

    def record_state(self) -> None:
        """Record the state after a motion call as the next step."""
        self.current_state()
        step = self.env_step()
        self.host.record_state(self.build_state(len(self.host.states)), env_step=step)

    def state_at(self, step: int) -> State:
        """The recorded state of ``step`` (-1 = latest)."""
        latest = self.current_state()
        if step == -1:
            return latest
        if not 0 <= step <= latest.step:
            raise ToolError("view_env_state", f"step {step} is not a recorded step: recorded steps are "
                                              f"0..{latest.step} (-1 = the latest)")
        return self.host.states[step]
