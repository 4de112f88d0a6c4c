"""When a driver steps: the ``Clock`` seam, lockstep or realtime (docs/DESIGN.md, "Driver surface behaviour").

- :class:`LockstepClock`: every servo command is exactly one control step, run at once; nothing steps on its own.
  Stream cameras are throttled in sim time.
- :class:`RealtimeClock`: a wall-clock timer steps at ``control_freq``; it runs the last command, which drops to
  zero after ``command_timeout_s`` without a new one (the node filters it at each tick, from the pose then).
  Stream cameras are throttled in wall time.

Pure Python; the driver core asks the clock what to do and does it. Commands are motion 6-vectors
``[vx, vy, vz, wx, wy, wz]`` (m/s, rad/s, world); the core runs the safety filter on what the clock returns and
adds the gripper.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Clock(Protocol):
    mode: str

    def on_command(self, motion: np.ndarray, wall_s: float) -> np.ndarray | None:
        """A servo command arrived: return the motion to step now, or None to leave it to :meth:`on_tick`."""

    def on_tick(self, wall_s: float) -> np.ndarray | None:
        """The control timer fired: return the motion to step now, or None for no step."""

    def camera_time(self, sim_s: float, wall_s: float) -> float:
        """The time base camera throttling uses [s]."""

    def clear(self) -> None:
        """Forget any held command (e-stop, reset)."""


class LockstepClock:
    mode = "lockstep"

    def on_command(self, motion: np.ndarray, wall_s: float) -> np.ndarray | None:
        return motion

    def on_tick(self, wall_s: float) -> np.ndarray | None:
        return None

    def camera_time(self, sim_s: float, wall_s: float) -> float:
        return sim_s

    def clear(self) -> None:
        """Nothing is held in lockstep."""


class RealtimeClock:
    mode = "realtime"

    def __init__(self, command_timeout_s: float):
        self.command_timeout_s = command_timeout_s
        self._last: np.ndarray | None = None
        self._last_wall = -np.inf

    def on_command(self, motion: np.ndarray, wall_s: float) -> np.ndarray | None:
        self._last, self._last_wall = np.asarray(motion, dtype=float), wall_s
        return None

    def on_tick(self, wall_s: float) -> np.ndarray | None:
        """The held command, or zero motion once it is older than ``command_timeout_s``."""
        if self._last is None or wall_s - self._last_wall > self.command_timeout_s:
            return np.zeros(6)
        return self._last

    def clear(self) -> None:
        """Forget the held command (e-stop, reset)."""
        self._last = None

    def camera_time(self, sim_s: float, wall_s: float) -> float:
        return wall_s


def make_clock(mode: str, command_timeout_s: float) -> Clock:
    if mode == "lockstep":
        return LockstepClock()
    if mode == "realtime":
        return RealtimeClock(command_timeout_s)
    raise ValueError(f"clock_mode {mode!r} is not one of ['lockstep', 'realtime']")


class RateGate:
    """Lets an event through at most ``rate_hz`` times per second of the given time base."""

    def __init__(self, rate_hz: float):
        self.period = 1.0 / rate_hz if rate_hz > 0 else float("inf")
        self._next = -np.inf

    def ready(self, now_s: float) -> bool:
        if now_s + 1e-9 < self._next:
            return False
        self._next = now_s + self.period
        return True

    def reset(self) -> None:
        self._next = -np.inf
