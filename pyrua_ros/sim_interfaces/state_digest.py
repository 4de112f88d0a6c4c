"""A chained digest of an episode's physics state, step by step: how two runs prove they took the same trajectory.

The driver hashes the whole physics state after the reset and after every control step, chaining each step's hash
onto the previous one: ``d_0 = H(b"reset" | state_0)``, ``d_k = H(d_{k-1} | k | state_k)``, with ``H`` SHA-256 and
``state`` the model's :meth:`~pyrua_ros.driver.model.ArmModel.physics_state` (LIBERO: MuJoCo ``qpos`` of the whole
scene, float64 bytes). The episode status carries ``d_step`` (the first :data:`DIGEST_HEX` hex digits), so:

- one string, the final status's digest, says whether two runs ended in bit-identical states along bit-identical
  trajectories;
- the per-step digests a client observed (:class:`StateTrace`) name the first control step at which two runs
  differ (:func:`first_difference`): once the chain differs it differs for good.

Bit identity is a property of one machine's floating-point paths (MuJoCo's and NumPy's SIMD kernels, the BLAS):
the same program on the same instance reproduces it there, whatever the load; another CPU may legitimately differ
(docs/DESIGN.md, "Reproducibility").
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np

DIGEST_HEX = 16          # hex digits kept per step (64 bits): plenty to tell trajectories apart
ALGORITHM = "sha256 chain over the physics state (float64 bytes) per control step"


def start_digest(state: np.ndarray) -> str:
    """``d_0``: the digest of the state right after a reset."""
    return hashlib.sha256(b"reset" + _bytes(state)).hexdigest()[:DIGEST_HEX]


def next_digest(previous: str, step: int, state: np.ndarray) -> str:
    """``d_step`` from ``d_{step-1}`` and the state after control step ``step``."""
    h = hashlib.sha256(previous.encode("ascii"))
    h.update(int(step).to_bytes(8, "little", signed=False))
    h.update(_bytes(state))
    return h.hexdigest()[:DIGEST_HEX]


def _bytes(state: np.ndarray) -> bytes:
    return np.ascontiguousarray(state, dtype=np.float64).tobytes()


class StateTrace:
    """The per-step digests one client saw in the episode statuses of one episode (``None`` = a step it missed).

    ``observe(status)`` takes every status as it arrives (any order, repeats ignored); a new ``episode_id``
    starts a new trace. ``summary()`` is what ``result.json`` records as ``state_digest``.
    """

    def __init__(self) -> None:
        self.episode_id: int | None = None
        self.scope = ""                   # the driver's digest scope (blas.digest_scope), from its statuses
        self._by_step: dict[int, str] = {}
        self._lock = threading.Lock()     # observed in a client's executor thread, read by the episode's

    def observe(self, status) -> None:
        digest = getattr(status, "state_digest", "")
        if not digest:
            return
        with self._lock:
            if status.episode_id != self.episode_id:
                self.episode_id, self._by_step = status.episode_id, {}
            self.scope = getattr(status, "digest_scope", "") or self.scope
            self._by_step.setdefault(int(status.step), digest)

    def per_step(self) -> list[str | None]:
        """Digest by step index 0..last (None for a step whose status this client did not see)."""
        with self._lock:
            last = max(self._by_step, default=-1)
            return [self._by_step.get(k) for k in range(last + 1)]

    def summary(self) -> dict | None:
        """``{"algorithm", "scope", "final", "steps", "missing", "per_step"}`` (``scope``: where the digest compares,
        e.g. ``"openblas 0.3.31 Haswell on x86_64"``; empty from a driver that does not say), or None when no
        status carried a digest."""
        per_step = self.per_step()
        if not per_step:
            return None
        return {"algorithm": ALGORITHM, "scope": self.scope, "final": per_step[-1], "steps": len(per_step) - 1,
                "missing": sum(1 for d in per_step if d is None), "per_step": per_step}


def first_difference(a: Sequence[str | None], b: Sequence[str | None]) -> int | None:
    """The first control step whose digests differ between two per-step lists (a step missing from one list is
    skipped), the shorter list's end + 1 when one trajectory is a prefix of the other, None when they agree."""
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x is not None and y is not None and x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def describe_difference(a: dict | None, b: dict | None) -> str | None:
    """None when two ``state_digest`` records agree, else a sentence naming the first differing control step."""
    if a is None or b is None:
        return "a run recorded no state digest"
    k = first_difference(a["per_step"], b["per_step"])
    if k is None and a["final"] == b["final"]:
        return None
    scopes = (a.get("scope") or "", b.get("scope") or "")
    if all(scopes) and scopes[0] != scopes[1]:   # another BLAS kernel: bits were never expected to agree
        return (f"the runs were made under different digest scopes ({scopes[0]} vs {scopes[1]}): digests compare "
                "bit for bit only within one (blas_kernel haswell pins one across x86-64 CPUs)")
    if k is None:
        return f"final digests differ ({a['final']} vs {b['final']}) though every common step agrees"
    if k >= min(len(a["per_step"]), len(b["per_step"])):
        return (f"one run has {len(a['per_step']) - 1} steps, the other {len(b['per_step']) - 1}; "
                f"equal up to step {k - 1}")
    return (f"the trajectories first differ at control step {k} "
            f"({a['per_step'][k]} vs {b['per_step'][k]}; {a['steps']} and {b['steps']} steps in all)")
