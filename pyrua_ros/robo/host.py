"""The host-side handle of a ``robo`` object: ledger, show queue, stop switch, recorded states and artifacts.

The model-facing ``LiberoRobot`` exposes only the reference API. Everything the episode host needs (the call
ledger, which cameras ``robo.show`` asked for, stopping the episode from a watchdog, the rich-feedback state
summary, card/on-motion images) lives here, so host code never reaches into ``robo._...``::

    host = libero_host(backend, primitives="no-vla")   # pyrua_ros.robo.libero
    robo = host.robo                      # give this to the kernel
    host.capture_boot_images()            # step-0 card images
    ...; host.summary(); host.take_show_requests(); host.stop("timeout")

Its parts: :mod:`.artifacts` (per-step captures), :mod:`.host_signals` (stop switch, show queue),
:mod:`.codecs` (PNG and npz bytes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrua_ros.robo.artifacts import ArtifactNames, ArtifactStore
from pyrua_ros.robo.backend import RobotBackend
from pyrua_ros.robo.host_signals import ShowQueue, StopSwitch
from pyrua_ros.robo.ledger import Ledger

if TYPE_CHECKING:
    from pyrua_ros.robo.libero import LiberoRobot
    from pyrua_ros.robo.results import State


class RobotHost:
    """Everything about a ``robo`` object that the episode host (not the policy) uses."""

    def __init__(self, backend: RobotBackend, names: ArtifactNames, *, ledger: Ledger | None = None) -> None:
        self.backend = backend
        self.ledger = ledger if ledger is not None else Ledger()
        self.artifacts = ArtifactStore(backend, names)
        self.show_queue = ShowQueue()
        self.stop_switch = StopSwitch()
        self.states: list[State] = []
        self.robo: LiberoRobot | None = None
        self._initial_state: Callable[[], State] | None = None
        self.idle_states = 0            # states recorded by motion calls that stepped the simulator zero times
        self._last_env_step: int | None = None
        self._lock = threading.Lock()

    # -- called by the robot -------------------------------------------------------------------------------
    def attach(self, robo: LiberoRobot, initial_state: Callable[[], State]) -> None:
        """Bind the robot this host belongs to; ``initial_state()`` records step 0 when nothing is recorded."""
        self.robo = robo
        self._initial_state = initial_state

    def record_state(self, state: State, env_step: int | None = None) -> None:
        """Append a new recorded state (its step must be the next index) and make it current; ``env_step`` is the
        driver's control step it shows (so its images can be rendered later).

        A state recorded without the simulator stepping (``move_to(current, max_steps=1)`` in a loop) costs one
        step of the episode's step budget: once simulator steps plus such states reach ``max_episode_steps``
        the episode is stopped as ``truncated``, so a policy cannot grow the host's states and images for free."""
        with self._lock:
            if state.step != len(self.states):
                raise RuntimeError(f"recorded state step {state.step} but {len(self.states)} states exist")
            self.states.append(state)
            self.artifacts.current_step = state.step
            if env_step is not None:
                self.artifacts.env_steps[state.step] = int(env_step)
        self._charge_idle_state()

    def _charge_idle_state(self) -> None:
        try:
            status = self.backend.status()
            env_step, budget = int(status.step), int(getattr(status, "max_episode_steps", 0) or 0)
        except Exception:   # no status: nothing to charge against
            return
        if self._last_env_step is not None and env_step == self._last_env_step:
            self.idle_states += 1
            if budget and env_step + self.idle_states >= budget:
                self.stop_switch.set("truncated")
        self._last_env_step = env_step

    # -- used by the host ----------------------------------------------------------------------------------
    @property
    def latest_state(self) -> State | None:
        """The current recorded state (None before the robot recorded step 0)."""
        with self._lock:
            return self.states[-1] if self.states else None

    def stop(self, reason: str) -> None:
        """End the episode (``timeout``, ``cancelled``, ``call_budget``...): the next or running motion raises
        EpisodeFinished(reason); the backend's in-flight command is cancelled."""
        self.stop_switch.set(reason)
        self.backend.cancel()

    @property
    def stop_reason(self) -> str | None:
        return self.stop_switch.reason

    def set_deadline(self, deadline: float | None) -> None:
        """Bound the robot's next calls by ``deadline`` (``time.monotonic()`` seconds; None lifts it): the cell
        kernel sets the running cell's deadline before it serves a robo call, so no call outlives its cell or the
        episode's budget (motion stops at the deadline, the call raises ``ToolError``)."""
        setter = getattr(self.backend, "set_deadline", None)
        if setter is not None:
            setter(deadline)

    def take_show_requests(self) -> list[str]:
        """Cameras requested by ``robo.show`` this turn (emptied)."""
        return self.show_queue.take()

    def artifact(self, name: str, step: int = -1) -> bytes:
        """Artifact bytes for the host (card images, on-motion images); not ledgered."""
        return self.artifacts.get("artifact", name, step=step)

    def capture_boot_images(self, resolution: str = "high") -> None:
        """Capture every camera of the current step (the step-0 task-card images at boot)."""
        if self.latest_state is None and self._initial_state is not None:
            self._initial_state()
        for camera in self.backend.cameras:
            self.artifacts.ensure("artifact", camera, resolution)

    def summary(self) -> dict[str, Any]:
        """The rich-feedback robot summary (PyRUA-Lean 3.5): step, eef_pos (4 dp), eef_yaw / eef_pitch (3 dp),
        gripper_opening (4 dp), terminated, truncated; ``{"error": "state unavailable: ..."}`` without a state."""
        try:
            state = self.latest_state or (self._initial_state() if self._initial_state else None)
        except Exception as exc:  # the summary must never break a turn
            return {"error": f"state unavailable: {type(exc).__name__}: {exc}"}
        if state is None:
            return {"error": "state unavailable: no robot attached"}
        return {
            "step": state.step,
            "eef_pos": [round(v, 4) for v in state.eef_pos],
            "eef_yaw": round(state.eef_yaw, 3),
            "eef_pitch": round(state.eef_pitch, 3),
            "gripper_opening": round(state.gripper_opening, 4),
            "terminated": state.terminated,
            "truncated": state.truncated,
        }

    def close(self) -> None:
        """Close the backend."""
        self.backend.close()
