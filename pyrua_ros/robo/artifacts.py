"""Per-step captures of a ``robo`` object and the named artifacts a model can read back.

Artifacts: images and depth of a step are captured lazily, the first time that step is viewed (``ensure``): the
current step is rendered now, a past one is rendered by the driver from its record of that control step (the
simulator keeps one; a driver without raises ToolError). Only what was looked at is stored.
Colour is kept PNG-encoded and depth compressed, so a long episode stays small; the last few decoded frames are
cached. Encoding (about 0.3 s of CPU for a 1024x1024 capture) is done only when it is needed: when the bytes are
asked for (an artifact read, a card file, an image for the model), and, in a background thread, once the raw
arrays held exceed ``raw_bytes`` (the oldest first), so a short episode whose captures nobody reads as bytes never
pays for it. Until an item is encoded its raw array serves every read; the bytes are the same whenever they are
made (PNG and npz are lossless and deterministic), so nothing the model or the records see depends on when.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pyrua_ros.robo import perception
from pyrua_ros.robo.backend import BackendRefused, CaptureFrame, RobotBackend, SegmentationFrame
from pyrua_ros.robo.codecs import decode_npz, decode_png, encode_npz, encode_png
from pyrua_ros.robo.errors import ToolError


@dataclasses.dataclass(frozen=True)
class ArtifactNames:
    """Artifact file names per (camera, resolution) for colour, world maps and depth."""

    images: dict[tuple[str, str], str]
    world_maps: dict[tuple[str, str], str]
    depths: dict[tuple[str, str], str]

    def parse(self, name: str) -> tuple[str, tuple[str, str]] | None:
        """("image" | "world" | "depth", (camera, resolution)) of a capture artifact name, else None."""
        for kind, table in (("image", self.images), ("world", self.world_maps), ("depth", self.depths)):
            for key, value in table.items():
                if value == name:
                    return kind, key
        return None


class _Encoded:
    """An array kept encoded (PNG or compressed npz); the raw array is held until the encoding is done.

    ``data()`` returns the bytes (encoding now if the background encoder has not got to it yet); ``array()``
    returns the raw array while it is held, else None (the store then decodes the bytes).
    """

    def __init__(self, raw: np.ndarray, encode: Callable[[np.ndarray], bytes]):
        self._raw, self._encode, self._bytes = raw, encode, None
        self._lock = threading.Lock()

    def data(self) -> bytes:
        with self._lock:
            if self._bytes is None:
                self._bytes = self._encode(self._raw)
                self._raw = None
            return self._bytes

    def array(self) -> np.ndarray | None:
        return self._raw

    def size(self) -> int:
        """Bytes held now: the raw array's until it is encoded, then the encoded bytes'."""
        raw, data = self._raw, self._bytes
        return len(data) if data is not None else (int(raw.nbytes) if raw is not None else 0)


class _Encoder:
    """One daemon thread that encodes :class:`_Encoded` items in the order they were stored."""

    def __init__(self):
        self._queue: collections.deque[_Encoded] = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, item: _Encoded) -> None:
        with self._cond:
            self._queue.append(item)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="artifact-encoder", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                item = self._queue.popleft()
            try:
                item.data()
            except Exception:   # reported when the bytes are asked for (encoded again there)
                continue


@dataclasses.dataclass(frozen=True)
class _Stored:
    color: _Encoded
    depth: _Encoded
    K: np.ndarray
    T_world_optical: np.ndarray
    env_step: int
    shape: tuple[int, int]
    depth_range: tuple[float | None, float | None]


class ArtifactStore:
    """Per-step captures and named artifacts. ``current_step`` is the latest recorded state's step."""

    def __init__(self, backend: RobotBackend, names: ArtifactNames, *, decoded_cache: int = 6,
                 max_bytes: int = 512 * 2**20, raw_bytes: int = 96 * 2**20) -> None:
        self._backend = backend
        self.names = names
        self.max_bytes = int(max_bytes)   # encoded captures kept; the oldest (never step 0) go first past it
        self.stored_bytes = 0
        self.evicted_steps: set[int] = set()
        self.current_step = 0
        self.env_steps: dict[int, int] = {}     # recorded step -> the driver's control step it shows
        self._captures: dict[tuple[int, str, str], _Stored] = {}
        self._extra: dict[tuple[int, str], bytes | _Encoded] = {}
        self._segs: dict[tuple[int, str, str], tuple[_Encoded, dict[int, str], float]] = {}
        self._encoder = _Encoder()
        self.raw_bytes = int(raw_bytes)   # raw arrays held before the oldest go to the background encoder
        self._raw: collections.deque[tuple[_Encoded, int]] = collections.deque()   # (item, raw bytes) kept raw
        self._raw_held = 0
        self._decoded: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
        self._cache_size = decoded_cache
        self._lock = threading.RLock()

    def resolve_step(self, step: int, tool: str = "artifact") -> int:
        """-1 -> current step; otherwise ``step`` itself (ToolError of ``tool`` for a step not recorded)."""
        if step == -1:
            return self.current_step
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or step > self.current_step:
            raise ToolError(tool, f"step {step!r} is not a recorded step: recorded steps are 0..{self.current_step} "
                                  "(-1 = the latest)")
        return step

    def ensure(self, tool: str, camera: str, resolution: str, step: int = -1) -> int:
        """Make sure the capture of (camera, resolution) at ``step`` exists (rendering it now if ``step`` is
        current); returns the resolved step. ToolError for a past step never viewed."""
        with self._lock:
            step = self.resolve_step(step, tool)
            key = (step, camera, resolution)
            if key in self._captures:
                return step
            if step in self.evicted_steps:
                raise ToolError(tool, f"the captures of step {step} were dropped to keep the episode's images under "
                                      f"{self.max_bytes // 2**20} MiB; view the latest step instead")
            frame = self._render_step(tool, "image", step,
                                      lambda env_step: self._backend.capture(camera, resolution, env_step))
            self._store(step, frame)
            return step

    def _render_step(self, tool: str, what: str, step: int, render):
        """Render the current step now, or a past step from the driver's record of it (a simulator keeps one);
        ToolError when the driver cannot show the past."""
        if step == self.current_step:
            return render(None)
        env_step = self.env_steps.get(step)
        why = "the driver cannot render past steps"
        if env_step is not None:
            try:
                return render(env_step)
            except BackendRefused as exc:
                why = str(exc)
        raise ToolError(tool, f"no {what} was captured at step {step} and {why} (on such a driver an image is kept "
                              "only when its step is viewed while it is the latest)")

    def _keep(self, raw: np.ndarray, encode: Callable[[np.ndarray], bytes]) -> _Encoded:
        """Keep ``raw`` to be encoded when needed (see the module doc)."""
        item = _Encoded(raw, encode)
        with self._lock:
            self._raw.append((item, item.size()))
            self._raw_held += item.size()
            while self._raw_held > self.raw_bytes and self._raw:
                oldest, size = self._raw.popleft()
                self._raw_held -= size
                self._encoder.submit(oldest)
        return item

    def _encode_all_now(self) -> None:
        """Encode every raw item here (before sizes are compared with ``max_bytes``: what is counted is then the
        same whatever the background encoder had reached)."""
        while self._raw:
            item, size = self._raw.popleft()
            self._raw_held -= size
            with contextlib.suppress(Exception):   # reported when the bytes are asked for (encoded again there)
                item.data()

    def _store(self, step: int, frame: CaptureFrame) -> None:
        depth = np.asarray(frame.depth, dtype=np.float32)
        color = np.asarray(frame.color, dtype=np.uint8)
        stored = _Stored(
            color=self._keep(color, encode_png), depth=self._keep(depth, encode_npz),
            K=np.asarray(frame.K, dtype=float), T_world_optical=np.asarray(frame.T_world_optical, dtype=float),
            env_step=int(frame.env_step), shape=tuple(depth.shape), depth_range=(frame.depth_near, frame.depth_far),
        )
        self._captures[(step, frame.camera, frame.resolution)] = stored
        self.stored_bytes += stored.color.size() + stored.depth.size()
        if self.stored_bytes > self.max_bytes:
            self._evict()
        self._remember(("color", step, frame.camera, frame.resolution), color)
        self._remember(("depth", step, frame.camera, frame.resolution), depth)

    def _evict(self) -> None:
        """Past ``max_bytes``, drop the captures of the oldest steps (never step 0, the card, nor the current one).
        Everything still raw is encoded first (so a capture counts its encoded bytes, or its raw arrays while the
        background encoder is at them), then the running total is recounted before anything is dropped."""
        self._encode_all_now()
        self.stored_bytes = sum(s.color.size() + s.depth.size() for s in self._captures.values())
        while self.stored_bytes > self.max_bytes:
            old = sorted({k[0] for k in self._captures if k[0] not in (0, self.current_step)})
            if not old:
                return
            step = old[0]
            for key in [k for k in self._captures if k[0] == step]:
                stored = self._captures.pop(key)
                self.stored_bytes -= stored.color.size() + stored.depth.size()
            for key in [k for k in self._decoded if len(k) > 1 and k[1] == step]:
                del self._decoded[key]
            self.evicted_steps.add(step)

    @staticmethod
    def _decoded_from(item: _Encoded, decode: Callable[[bytes], np.ndarray]) -> np.ndarray:
        raw = item.array()
        return raw if raw is not None else decode(item.data())

    def _remember(self, key: tuple, value: Any) -> Any:
        self._decoded[key] = value
        self._decoded.move_to_end(key)
        while len(self._decoded) > self._cache_size:
            self._decoded.popitem(last=False)
        return value

    def _cached(self, key: tuple, make) -> Any:
        with self._lock:
            if key in self._decoded:
                self._decoded.move_to_end(key)
                return self._decoded[key]
            return self._remember(key, make())

    def color(self, tool: str, camera: str, resolution: str, step: int = -1) -> np.ndarray:
        """(H, W, 3) uint8 RGB of that view at that step."""
        step = self.ensure(tool, camera, resolution, step)
        stored = self._captures[(step, camera, resolution)]
        return self._cached(("color", step, camera, resolution), lambda: self._decoded_from(stored.color, decode_png))

    def depth(self, tool: str, camera: str, resolution: str, step: int = -1) -> np.ndarray:
        """(H, W) float32 depth m (0 invalid)."""
        step = self.ensure(tool, camera, resolution, step)
        stored = self._captures[(step, camera, resolution)]
        return self._cached(("depth", step, camera, resolution), lambda: self._decoded_from(stored.depth, decode_npz))

    def world(self, tool: str, camera: str, resolution: str, step: int = -1) -> np.ndarray:
        """(H, W, 3) float32 world map m (zeros invalid)."""
        step = self.ensure(tool, camera, resolution, step)
        stored = self._captures[(step, camera, resolution)]
        return self._cached(
            ("world", step, camera, resolution),
            lambda: perception.world_map(self.depth(tool, camera, resolution, step), stored.K, stored.T_world_optical),
        )

    def geometry(self, tool: str, camera: str, resolution: str, step: int = -1) -> tuple[np.ndarray, np.ndarray, int]:
        """(K, T_world_optical, env_step) of that capture."""
        step = self.ensure(tool, camera, resolution, step)
        stored = self._captures[(step, camera, resolution)]
        return stored.K.copy(), stored.T_world_optical.copy(), stored.env_step

    def shape(self, tool: str, camera: str, resolution: str, step: int = -1) -> tuple[int, int]:
        """(height, width) in pixels of that capture."""
        step = self.ensure(tool, camera, resolution, step)
        return self._captures[(step, camera, resolution)].shape

    def depth_range(self, tool: str, camera: str, resolution: str, step: int = -1) -> tuple[float | None, float | None]:
        """(near, far) m of the depth camera for that capture, None where the driver did not report it."""
        step = self.ensure(tool, camera, resolution, step)
        return self._captures[(step, camera, resolution)].depth_range

    def segmentation(self, tool: str, camera: str, resolution: str, step: int = -1) -> SegmentationFrame:
        """The simulator's instance segmentation of that view at ``step`` (rendered lazily like captures)."""
        with self._lock:
            step = self.resolve_step(step, tool)
            key = (step, camera, resolution)
            if key not in self._segs:
                frame = self._render_step(tool, "segmentation", step,
                                          lambda env_step: self._backend.segmentation(camera, resolution, env_step))
                ids = np.asarray(frame.ids, dtype=np.int32)
                self._segs[key] = (self._keep(ids, encode_npz), dict(frame.labels), float(frame.stamp))
                self._remember(("seg", *key), ids)
            item, labels, stamp = self._segs[key]
            ids = self._cached(("seg", *key), lambda: self._decoded_from(item, decode_npz))
            return SegmentationFrame(ids=ids, labels=labels, stamp=stamp, camera=camera, resolution=resolution)

    def put(self, step: int, name: str, data: bytes) -> None:
        """Store a named artifact (segment overlays, JSON extras) at ``step``."""
        with self._lock:
            self._extra[(step, name)] = bytes(data)

    def put_image(self, step: int, name: str, rgb: np.ndarray) -> None:
        """Store an image artifact at ``step``; it is PNG-encoded in the background (see module doc)."""
        with self._lock:
            self._extra[(step, name)] = self._keep(np.asarray(rgb), encode_png)

    def get(self, tool: str, name: str, step: int = -1) -> bytes:
        """Raw bytes of a named artifact at ``step`` (capture artifacts are rendered lazily as above)."""
        parsed = self.names.parse(name)
        with self._lock:
            resolved = self.resolve_step(step, tool)
            if parsed is None:
                if (resolved, name) in self._extra:
                    item = self._extra[(resolved, name)]
                    return item if isinstance(item, bytes) else item.data()
                known = sorted({*self.names.images.values(), *self.names.world_maps.values(),
                                *self.names.depths.values()})
                extra = sorted(n for s, n in self._extra if s == resolved)
                raise ToolError(tool, f"no artifact {name!r} at step {resolved}; capture artifacts are "
                                      f"{', '.join(known)}" + (f"; also here: {', '.join(extra)}" if extra else ""))
        kind, (camera, resolution) = parsed
        if kind == "image":
            resolved = self.ensure(tool, camera, resolution, resolved)
            return self._captures[(resolved, camera, resolution)].color.data()
        if kind == "depth":
            resolved = self.ensure(tool, camera, resolution, resolved)
            return self._captures[(resolved, camera, resolution)].depth.data()
        return encode_npz(self.world(tool, camera, resolution, resolved))
