"""A small TF buffer: ``/tf`` + ``/tf_static`` into a frame tree, looked up by composing the chain.

``tf2_ros`` is not on PyPI, so drivers and robo use this. :class:`TransformStore` is the pure core (no rclpy);
:class:`TfBuffer` subscribes it on a node. ``lookup(target, source, stamp)`` returns ``T_target_source`` (4x4),
the matrix that maps a point given in ``source`` coordinates into ``target`` coordinates. With ``stamp=None`` the
latest transform of every edge is used; with a stamp (seconds) each dynamic edge uses its newest sample at or
before ``stamp + tolerance_s``; a stamp older than an edge's cache, or newer than its newest sample (not arrived
yet: tf2 would call it extrapolation), raises :class:`TransformError`.

Threading: subscription callbacks run in the node's executor thread, lookups come from any thread; one lock
guards the store.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

import numpy as np

from pyrua_ros.wire.convert import quat_to_matrix, stamp_to_seconds
from pyrua_ros.wire.interfaces import load


class TransformError(LookupError):
    """A transform between two frames is not (or not yet) known."""


class _Edge:
    """History of ``T_parent_child`` for one child frame (a frame has one parent in a TF tree)."""

    def __init__(self, parent: str, static: bool):
        self.parent = parent
        self.static = static
        self.stamps: list[float] = []
        self.mats: list[np.ndarray] = []

    def add(self, stamp: float, T: np.ndarray, cache_s: float) -> None:
        if self.static:
            self.stamps, self.mats = [stamp], [T]
            return
        if self.stamps and stamp < self.stamps[-1]:  # out of order (or a reset of sim time): start over
            self.stamps, self.mats = [], []
        if self.stamps and stamp == self.stamps[-1]:
            self.mats[-1] = T
        else:
            self.stamps.append(stamp)
            self.mats.append(T)
        cut = bisect.bisect_left(self.stamps, stamp - cache_s)
        if cut:
            del self.stamps[:cut], self.mats[:cut]

    def at(self, stamp: float | None, tolerance_s: float, child: str) -> np.ndarray:
        if self.static or stamp is None:
            return self._matrix(len(self.mats) - 1)
        if stamp > self.stamps[-1] + tolerance_s:
            # Like tf2's ExtrapolationException: the sample for this time has not arrived yet, so wait_for keeps
            # waiting instead of answering with an older pose.
            raise TransformError(f"{self.parent} -> {child}: no transform at t={stamp:.4f} s yet (newest "
                                 f"{self.stamps[-1]:.4f} s)")
        i = bisect.bisect_right(self.stamps, stamp + tolerance_s) - 1
        if i < 0:
            raise TransformError(f"{self.parent} -> {child}: no transform at or before t={stamp:.4f} s "
                                 f"(cache holds {self.stamps[0]:.4f} .. {self.stamps[-1]:.4f} s)")
        return self._matrix(i)

    def _matrix(self, i: int) -> np.ndarray:
        """Sample ``i`` as a 4x4 matrix; a sample stored as (translation, quaternion) is converted on first use."""
        T = self.mats[i]
        if isinstance(T, tuple):
            T = self.mats[i] = _tq_matrix(*T)
        return T


def _tq_matrix(t, q_xyzw) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = quat_to_matrix(q_xyzw)
    T[:3, 3] = t
    return T


class TransformStore:
    """The frame tree: add transforms, look up chains. Pure Python + numpy."""

    def __init__(self, cache_s: float = 10.0, tolerance_s: float = 1e-6):
        self.cache_s = cache_s
        self.tolerance_s = tolerance_s
        self._edges: dict[str, _Edge] = {}
        self._lock = threading.Lock()

    def add(self, parent: str, child: str, stamp: float, T_parent_child: np.ndarray | tuple,
            static: bool = False) -> None:
        """Add a sample: a 4x4 matrix, or (translation [m], (x, y, z, w) quaternion), which is converted only
        when a lookup uses it (a lockstep client receives every step's /tf and looks up a few of them)."""
        if not isinstance(T_parent_child, tuple):
            T_parent_child = np.asarray(T_parent_child, dtype=float)
        with self._lock:
            edge = self._edges.get(child)
            if edge is None or edge.parent != parent or edge.static != static:
                edge = self._edges[child] = _Edge(parent, static)
            edge.add(stamp, T_parent_child, self.cache_s)

    def frames(self) -> set[str]:
        with self._lock:
            return set(self._edges) | {e.parent for e in self._edges.values()}

    def _chain(self, frame: str) -> list[str]:
        chain = [frame]
        while chain[-1] in self._edges:
            chain.append(self._edges[chain[-1]].parent)
            if len(chain) > 1000:
                raise TransformError(f"TF loop above frame {frame!r}")
        return chain

    def lookup(self, target: str, source: str, stamp: float | None = None) -> np.ndarray:
        """``T_target_source`` (4x4) at ``stamp`` [s] (``None`` = latest)."""
        with self._lock:
            up_s, up_t = self._chain(source), self._chain(target)
            common = next((f for f in up_s if f in set(up_t)), None)
            if common is None:
                known = sorted(set(self._edges) | {e.parent for e in self._edges.values()})
                raise TransformError(f"no TF chain between {target!r} and {source!r}; known frames: {known}")
            T_common_source = np.eye(4)
            for f in up_s[:up_s.index(common)]:
                T_common_source = self._edges[f].at(stamp, self.tolerance_s, f) @ T_common_source
            T_common_target = np.eye(4)
            for f in up_t[:up_t.index(common)]:
                T_common_target = self._edges[f].at(stamp, self.tolerance_s, f) @ T_common_target
        return np.linalg.inv(T_common_target) @ T_common_source


class TfBuffer(TransformStore):
    """A :class:`TransformStore` fed by ``/tf`` and ``/tf_static`` subscriptions on ``node``."""

    def __init__(self, node, cache_s: float = 10.0, callback_group=None,
                 on_update: Callable[[], None] | None = None):
        super().__init__(cache_s=cache_s)
        from tf2_msgs.msg import TFMessage

        from pyrua_ros.wire import qos

        names = load().driver
        self._node = node
        self._on_update = on_update
        self._cond = threading.Condition()
        self._subs = [
            node.create_subscription(TFMessage, names.tf, lambda m: self._take(m, False), qos.EVENTS,
                                     callback_group=callback_group),
            node.create_subscription(TFMessage, names.tf_static, lambda m: self._take(m, True), qos.TF_STATIC,
                                     callback_group=callback_group),
        ]

    def _take(self, msg, static: bool) -> None:
        for tf in msg.transforms:
            t, r = tf.transform.translation, tf.transform.rotation
            self.add(tf.header.frame_id, tf.child_frame_id, stamp_to_seconds(tf.header.stamp),
                     ((t.x, t.y, t.z), (r.x, r.y, r.z, r.w)), static=static)
        with self._cond:
            self._cond.notify_all()
        if self._on_update:
            self._on_update()

    def destroy(self) -> None:
        """Remove the two subscriptions from the node."""
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs = []

    def wait_for(self, target: str, source: str, stamp: float | None, timeout_s: float) -> np.ndarray:
        """Like :meth:`lookup`, waiting up to ``timeout_s`` for the transform to arrive; raises TransformError."""

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.lookup(target, source, stamp)
            except TransformError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TransformError(f"{exc} (waited {timeout_s} s)") from None
                with self._cond:
                    self._cond.wait(min(left, 0.05))
