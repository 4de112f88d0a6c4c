"""What the agent side and the robot side signal each other during an episode: the stop switch (first reason
wins) and the cameras ``robo.show`` asked for.
"""

from __future__ import annotations

import threading

from pyrua_ros.robo.errors import EPISODE_END_REASONS


class StopSwitch:
    """Thread-safe episode stop: ``set(reason)`` once (first reason wins); ``reason`` is None while running."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None

    def set(self, reason: str) -> None:
        if reason not in EPISODE_END_REASONS:
            raise ValueError(f"stop reason must be one of {', '.join(EPISODE_END_REASONS)}, got {reason!r}")
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    @property
    def reason(self) -> str | None:
        return self._reason if self._event.is_set() else None


class ShowQueue:
    """Cameras ``robo.show`` asked for during the current turn (de-duplicated, in request order)."""

    def __init__(self) -> None:
        self._cameras: list[str] = []
        self._lock = threading.Lock()

    def request(self, camera: str) -> None:
        with self._lock:
            if camera not in self._cameras:
                self._cameras.append(camera)

    def take(self) -> list[str]:
        """The requested cameras, emptying the queue (called once per turn by the host)."""
        with self._lock:
            cameras, self._cameras = self._cameras, []
            return cameras
