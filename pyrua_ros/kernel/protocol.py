"""The wire between the agent process and the kernel child: length-prefixed frames of JSON plus raw buffers.

Never pickle: the child runs untrusted code, so everything it sends is parsed as data. One frame is

    header  ">II"  (json_len, n_buffers)
    json    json_len bytes, UTF-8 (``NaN``/``Infinity`` allowed, as Python's json writes them)
    buffer  ">Q" length, then the bytes; repeated n_buffers times

Values that JSON cannot carry are tagged objects inside the JSON, pointing at buffers by index:

- ``numpy.ndarray`` -> ``{"__ndarray__": i, "dtype": "<f4", "shape": [h, w]}`` (numeric/bool dtypes only)
- ``bytes`` -> ``{"__bytes__": i}``; ``tuple`` -> ``{"__tuple__": [...]}``; ``set``/``frozenset`` ->
  ``{"__set__": [...], "frozen": bool}``
- a dict with a non-str key or a ``__``-prefixed key -> ``{"__dict__": [[k, v], ...]}``
- a frozen result dataclass (``pyrua_ros.robo.results``) -> ``{"__result__": "Move", "fields": {...}}``,
  rebuilt into the real class by the receiver's ``result_factory`` (see ``manifest.py`` / ``proxy.py``).
- numpy scalars become Python scalars.

Anything else raises ``TypeError`` naming the type: it cannot cross the kernel boundary. Values nest at most
``MAX_DEPTH`` deep. A reader can be given a smaller frame limit and a ``text_filter`` applied to every string it
decodes (the agent process makes the kernel's text safe that way: a lone surrogate cannot reach a record).
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

_HEADER = struct.Struct(">II")
_BUFLEN = struct.Struct(">Q")
MAX_FRAME_BYTES = 512 * 2**20  # one frame (JSON + buffers) may be at most 512 MiB
MAX_DEPTH = 64                 # lists / dicts / tuples nest at most this deep
MAX_BUFFERS = 4096
_DTYPE_KINDS = "biufc"  # bool, int, uint, float, complex: no object / void / string dtypes from a peer

ResultFactory = Callable[[str, dict], Any]


class ProtocolError(RuntimeError):
    """The peer sent bytes that are not a valid frame (or closed the pipe in the middle of one)."""


class PeerClosed(ProtocolError):
    """The pipe was closed by the other side (the child exited or died)."""


class FrameRejected(ProtocolError):
    """A whole frame arrived but its content is invalid (not JSON, too deep, a bad tagged value). The frame was
    consumed, so the stream is still in step and the reader can go on."""


def _encode(value: Any, buffers: list[bytes], depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise TypeError(f"a value nested more than {MAX_DEPTH} levels deep cannot cross the kernel boundary")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    np = sys.modules.get("numpy")   # numpy is imported lazily in the kernel: no numpy module, no numpy values
    if np is not None and isinstance(value, np.generic):
        return _encode(value.item(), buffers, depth)
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype.kind not in _DTYPE_KINDS:
            raise TypeError(f"numpy arrays of dtype {value.dtype} cannot cross the kernel boundary "
                            f"(numeric and bool dtypes only)")
        arr = np.ascontiguousarray(value)
        buffers.append(arr.tobytes())
        return {"__ndarray__": len(buffers) - 1, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(value, bytes | bytearray | memoryview):
        buffers.append(bytes(value))
        return {"__bytes__": len(buffers) - 1}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, buffers, depth + 1) for v in value]}
    if isinstance(value, set | frozenset):
        return {"__set__": [_encode(v, buffers, depth + 1) for v in value], "frozen": isinstance(value, frozenset)}
    if isinstance(value, list):
        return [_encode(v, buffers, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _encode(v, buffers, depth + 1) for k, v in value.items()}
        return {"__dict__": [[_encode(k, buffers, depth + 1), _encode(v, buffers, depth + 1)]
                             for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name), buffers, depth + 1) for f in dataclasses.fields(value)}
        return {"__result__": type(value).__name__, "fields": fields}
    raise TypeError(f"a {type(value).__name__} value cannot cross the kernel boundary "
                    f"(send numbers, strings, lists, tuples, dicts, bytes, numpy arrays or result dataclasses)")


def _decode(obj: Any, buffers: list[bytes], result_factory: ResultFactory | None,
            text: Callable[[str], str] | None = None, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise ProtocolError(f"a value nests more than {MAX_DEPTH} levels deep")
    if isinstance(obj, str):
        return text(obj) if text is not None else obj
    if isinstance(obj, list):
        return [_decode(v, buffers, result_factory, text, depth + 1) for v in obj]
    if not isinstance(obj, dict):
        return obj

    def sub(v: Any) -> Any:
        return _decode(v, buffers, result_factory, text, depth + 1)

    if "__ndarray__" in obj:
        import numpy as np  # noqa: PLC0415 (numpy: arrays only; the kernel child)

        dtype = np.dtype(str(obj["dtype"]))
        if dtype.kind not in _DTYPE_KINDS:
            raise ProtocolError(f"refusing an array of dtype {dtype}")
        shape = tuple(int(n) for n in obj["shape"])
        arr = np.frombuffer(_buffer(buffers, obj["__ndarray__"]), dtype=dtype)
        return arr.reshape(shape).copy()
    if "__bytes__" in obj:
        return _buffer(buffers, obj["__bytes__"])
    if "__tuple__" in obj:
        return tuple(sub(v) for v in obj["__tuple__"])
    if "__set__" in obj:
        items = [_hashable(sub(v)) for v in obj["__set__"]]
        return frozenset(items) if obj.get("frozen") else set(items)
    if "__dict__" in obj:
        return {_hashable(sub(k)): sub(v) for k, v in obj["__dict__"]}
    if "__result__" in obj:
        fields = {sub(str(k)): sub(v) for k, v in obj["fields"].items()}
        if result_factory is None:
            return fields
        return result_factory(sub(str(obj["__result__"])), fields)
    return {sub(k): sub(v) for k, v in obj.items()}


def _hashable(key: Any) -> Any:
    np = sys.modules.get("numpy")
    if isinstance(key, list | dict) or (np is not None and isinstance(key, np.ndarray)):
        raise ProtocolError(f"unhashable dict key of type {type(key).__name__}")
    return key


def _buffer(buffers: list[bytes], index: Any) -> bytes:
    if not isinstance(index, int) or not 0 <= index < len(buffers):
        raise ProtocolError(f"buffer index {index!r} out of range (frame has {len(buffers)})")
    return buffers[index]


def encode_frame(message: dict) -> bytes:
    """One frame (bytes) for ``message``; raises ``TypeError`` if a value cannot cross the boundary."""
    buffers: list[bytes] = []
    body = json.dumps(_encode(message, buffers), separators=(",", ":")).encode()
    parts = [_HEADER.pack(len(body), len(buffers)), body]
    for buf in buffers:
        parts += [_BUFLEN.pack(len(buf)), buf]
    return b"".join(parts)


def write_frame(fd: int, message: dict) -> None:
    """Encode and write one frame to ``fd`` completely (blocking)."""
    data = memoryview(encode_frame(message))
    while data:
        n = os.write(fd, data)
        data = data[n:]


class FrameReader:
    """Reads frames from a pipe fd, with an optional deadline (``time.monotonic()`` seconds) per frame.

    ``max_frame_bytes``: a frame (JSON + buffers) larger than this is a protocol error. ``text_filter``: applied to
    every decoded string (dict keys included)."""

    def __init__(self, fd: int, result_factory: ResultFactory | None = None, *,
                 max_frame_bytes: int = MAX_FRAME_BYTES, text_filter: Callable[[str], str] | None = None) -> None:
        self.fd = fd
        self.result_factory = result_factory
        self.max_frame_bytes = int(max_frame_bytes)
        self.text_filter = text_filter
        self._buf = bytearray()

    def _fill(self, need: int, deadline: float | None) -> bool:
        """Read until ``need`` bytes are buffered; False when the deadline passed first."""
        while len(self._buf) < need:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    return False
            chunk = os.read(self.fd, max(65536, min(need - len(self._buf), 2**24)))
            if not chunk:
                raise PeerClosed("the other side closed the pipe")
            self._buf += chunk
        return True

    def read(self, deadline: float | None = None) -> dict | None:
        """The next message, or None if ``deadline`` passed before a whole frame arrived (partial bytes are kept)."""
        if not self._fill(_HEADER.size, deadline):
            return None
        json_len, n_buffers = _HEADER.unpack_from(self._buf)
        offset = _HEADER.size + json_len
        if json_len > self.max_frame_bytes or n_buffers > MAX_BUFFERS:
            raise ProtocolError(f"frame header out of range (json {json_len} bytes, {n_buffers} buffers)")
        if not self._fill(offset, deadline):
            return None
        lengths = []
        total = json_len
        for _ in range(n_buffers):
            if not self._fill(offset + _BUFLEN.size, deadline):
                return None
            (n,) = _BUFLEN.unpack_from(self._buf, offset)
            total += n
            if total > self.max_frame_bytes:
                raise ProtocolError(f"frame of more than {self.max_frame_bytes} bytes")
            if not self._fill(offset + _BUFLEN.size + n, deadline):
                return None
            lengths.append((offset + _BUFLEN.size, n))
            offset += _BUFLEN.size + n
        raw = bytes(self._buf[_HEADER.size:_HEADER.size + json_len])
        buffers = [bytes(self._buf[start:start + n]) for start, n in lengths]
        del self._buf[:offset]
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise FrameRejected(f"frame body is not JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
        if not isinstance(body, dict):
            raise FrameRejected("a frame must hold a JSON object")
        try:
            return _decode(body, buffers, self.result_factory, self.text_filter)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError, ProtocolError) as exc:
            raise FrameRejected(f"malformed tagged value in frame: {type(exc).__name__}: {str(exc)[:200]}") from None
