"""The safety filter every driver runs before moving: workspace box, speed limits and the e-stop latch.

Pure Python + numpy. Units: metres, seconds, m/s, rad/s, all in the world frame.
A command that would leave the box or exceeds a limit is clipped (and executed clipped); a command that must not
run at all (e-stop, episode over, ...) is refused. Every arm command passes here: twists (:meth:`SafetyFilter.
filter_twist`) and joint set points (:meth:`SafetyFilter.filter_joint_step`, judged by the end-effector motion they
give through the model's forward kinematics). Both produce a :class:`SafetyEvent`, which drivers publish on
``/safety/events`` as JSON ``{"kind", "requested", "executed", "reason", "step"}``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class SafetyLimits:
    """workspace_min/max: corners of the box the end effector must stay in [m, world].
    max_linear_speed [m/s] and max_angular_speed [rad/s]: limits of each axis of the commanded twist (a per-axis
    clip, the way LIBERO's OSC_POSE clips each action component to [-1, 1], so a driver whose limits equal its
    controller's range never cuts what the benchmark itself allows)."""

    workspace_min: tuple[float, float, float]
    workspace_max: tuple[float, float, float]
    max_linear_speed: float
    max_angular_speed: float

    def __post_init__(self):
        if len(self.workspace_min) != 3 or len(self.workspace_max) != 3:
            raise ValueError(f"workspace_min/max need 3 values [x, y, z], got {self.workspace_min}, "
                             f"{self.workspace_max}")
        if any(lo >= hi for lo, hi in zip(self.workspace_min, self.workspace_max)):
            raise ValueError(f"workspace_min {self.workspace_min} must be below workspace_max {self.workspace_max} "
                             "on every axis")
        if self.max_linear_speed <= 0 or self.max_angular_speed <= 0:
            raise ValueError("max_linear_speed and max_angular_speed must be > 0, got "
                             f"{self.max_linear_speed}, {self.max_angular_speed}")


@dataclasses.dataclass(frozen=True)
class SafetyEvent:
    """kind: ``clipped`` (executed changed) or ``refused`` (not executed). requested/executed: the twist as
    ``[vx, vy, vz, wx, wy, wz]`` (executed is all zero when refused). reason: human-readable. step: control step."""

    kind: str
    requested: tuple[float, ...]
    executed: tuple[float, ...]
    reason: str
    step: int

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self) | {"requested": list(self.requested),
                                                      "executed": list(self.executed)})


@dataclasses.dataclass(frozen=True)
class FilteredTwist:
    """The twist to execute (v [m/s], w [rad/s]) and the event describing a clip, if any."""

    v: np.ndarray
    w: np.ndarray
    event: SafetyEvent | None


def _six(v, w) -> tuple[float, ...]:
    return tuple(round(float(x), 6) for x in (*v, *w))


def rotation_vector(q_from: Sequence[float], q_to: Sequence[float]) -> np.ndarray:
    """The rotation (axis times angle [rad], world frame) that turns orientation ``q_from`` into ``q_to`` (x, y, z, w
    quaternions), the short way round."""
    x0, y0, z0, w0 = (float(c) for c in q_from)
    x1, y1, z1, w1 = (float(c) for c in q_to)
    # q_to * conj(q_from)
    w = w1 * w0 + x1 * x0 + y1 * y0 + z1 * z0
    xyz = np.array([x1 * w0 - w1 * x0 - y1 * z0 + z1 * y0,
                    y1 * w0 - w1 * y0 - z1 * x0 + x1 * z0,
                    z1 * w0 - w1 * z0 - x1 * y0 + y1 * x0])
    if w < 0:
        w, xyz = -w, -xyz
    norm = float(np.linalg.norm(xyz))
    if norm < 1e-12:
        return np.zeros(3)
    return xyz / norm * (2.0 * np.arctan2(norm, w))


def refusal(v: Sequence[float], w: Sequence[float], reason: str, step: int) -> SafetyEvent:
    """The event for a command that is not executed at all."""
    return SafetyEvent("refused", _six(v, w), (0.0,) * 6, reason, step)


class SafetyFilter:
    """Clips twists to the speed limits and to the workspace box (see :class:`SafetyLimits`)."""

    def __init__(self, limits: SafetyLimits):
        self.limits = limits
        self._lo = np.asarray(limits.workspace_min, dtype=float)
        self._hi = np.asarray(limits.workspace_max, dtype=float)

    def filter_twist(self, v: Sequence[float], w: Sequence[float], eef_pos: Sequence[float], dt: float,
                     step: int) -> FilteredTwist:
        """Return the twist to run for ``dt`` seconds from ``eef_pos``: each axis clipped to its speed limit, then
        each linear axis cut so that ``eef_pos + v*dt`` stays in the box (motion back into the box is allowed)."""
        v_req, w_req = np.asarray(v, dtype=float), np.asarray(w, dtype=float)
        v_out, w_out = v_req.copy(), w_req.copy()
        reasons = []
        for name, vec, limit, unit in (("linear", v_out, self.limits.max_linear_speed, "m/s"),
                                       ("angular", w_out, self.limits.max_angular_speed, "rad/s")):
            over = [f"{axis} {vec[i]:+.3f}" for i, axis in enumerate("xyz") if abs(vec[i]) > limit]
            if over:
                np.clip(vec, -limit, limit, out=vec)
                reasons.append(f"{name} speed {', '.join(over)} {unit} beyond the per-axis limit {limit} {unit}")
        pos = np.asarray(eef_pos, dtype=float)
        nxt = pos + v_out * dt
        for i, axis in enumerate("xyz"):
            if nxt[i] > self._hi[i] and v_out[i] > 0:
                v_out[i] = max(0.0, (self._hi[i] - pos[i]) / dt)
                reasons.append(f"{axis} would reach {nxt[i]:.3f} m > workspace max {self._hi[i]} m")
            elif nxt[i] < self._lo[i] and v_out[i] < 0:
                v_out[i] = min(0.0, (self._lo[i] - pos[i]) / dt)
                reasons.append(f"{axis} would reach {nxt[i]:.3f} m < workspace min {self._lo[i]} m")
        event = None
        if reasons:
            event = SafetyEvent("clipped", _six(v_req, w_req), _six(v_out, w_out), "; ".join(reasons), step)
        return FilteredTwist(v_out, w_out, event)

    def _step_problems(self, p0: np.ndarray, p1: np.ndarray, v: np.ndarray, w: np.ndarray) -> list[str]:
        """Why an end-effector step from ``p0`` to ``p1`` at twist (``v``, ``w``) breaks a limit (empty: it does
        not). Moving back toward the box is allowed."""
        out = []
        for name, vec, limit, unit in (("linear", v, self.limits.max_linear_speed, "m/s"),
                                       ("angular", w, self.limits.max_angular_speed, "rad/s")):
            over = [f"{axis} {vec[i]:+.3f}" for i, axis in enumerate("xyz") if abs(vec[i]) > limit * (1 + 1e-9)]
            if over:
                out.append(f"{name} speed {', '.join(over)} {unit} beyond the per-axis limit {limit} {unit}")
        for i, axis in enumerate("xyz"):
            if p1[i] > self._hi[i] and p1[i] > p0[i]:
                out.append(f"{axis} would reach {p1[i]:.3f} m > workspace max {self._hi[i]} m")
            elif p1[i] < self._lo[i] and p1[i] < p0[i]:
                out.append(f"{axis} would reach {p1[i]:.3f} m < workspace min {self._lo[i]} m")
        return out

    def filter_joint_step(self, q_from: Sequence[float], q_to: Sequence[float],
                          pose_at: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], dt: float,
                          step: int) -> tuple[np.ndarray, SafetyEvent | None]:
        """The joint set point [rad] to run for ``dt`` seconds from posture ``q_from`` toward ``q_to``: all of it
        when the end-effector motion it gives (``pose_at(q)``: position [m] and orientation (x, y, z, w) by forward
        kinematics) keeps every axis within its speed limit and the box, else the largest fraction of the step
        that does (bisection), with a ``clipped`` event whose twists are the end-effector motion per second."""
        q0, q1 = np.asarray(q_from, dtype=float), np.asarray(q_to, dtype=float)
        p0, r0 = (np.asarray(x, dtype=float) for x in pose_at(q0))

        def motion(fraction: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            p, r = pose_at(q0 + fraction * (q1 - q0))
            p = np.asarray(p, dtype=float)
            return p, (p - p0) / dt, rotation_vector(r0, r) / dt

        p, v_req, w_req = motion(1.0)
        reasons = self._step_problems(p0, p, v_req, w_req)
        if not reasons:
            return q1, None
        lo, hi = 0.0, 1.0
        for _ in range(20):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if not self._step_problems(p0, *motion(mid)) else (lo, mid)
        _p, v_out, w_out = motion(lo)
        event = SafetyEvent("clipped", _six(v_req, w_req), _six(v_out, w_out),
                            f"joint set point: {'; '.join(reasons)}; {lo:.0%} of the step executed", step)
        return q0 + lo * (q1 - q0), event


class EStop:
    """The e-stop latch: ``trip()`` holds until ``release()``; drivers check :attr:`active` every control step."""

    def __init__(self):
        self.active = False

    def set(self, stop: bool) -> bool:
        """Apply a ``/estop`` message; return True if the latch changed."""
        changed = self.active != bool(stop)
        self.active = bool(stop)
        return changed
