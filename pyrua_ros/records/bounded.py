"""JSON from hostile hands, parsed with bounds: depth, size and finite numbers, and one clear error for the rest.

Model output (tool-call arguments), model servers' replies and run directories (a hostile ``result.json``) are
parsed here. ``json.loads`` alone raises ``RecursionError`` on ``[[[[...`` 100000 deep, returns ``inf`` for
``1e400`` (which ``json.dumps`` then writes as ``Infinity``, not JSON) and hands back values nested as deep as the
stack allowed, which the next recursive consumer (``safe_data``, a report) cannot walk. :func:`loads` refuses all
three with :class:`JSONRefused`, a ``ValueError`` whose text is one line a person or a model can act on.
Pure Python; the depth check is iterative.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

MAX_DEPTH = 64               # lists and objects nest at most this deep (protocol.MAX_DEPTH likewise)
MAX_FILE_BYTES = 64 * 2**20  # a record file read by a report at most


class JSONRefused(ValueError):
    """The text is not JSON, nests too deep, is too large or holds a number out of range; the message says which
    in one line."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONRefused(f"the number {text[:40]} is out of range (not a finite float)")
    return value


def _constant(name: str) -> float:
    raise JSONRefused(f"{name} is not a JSON number")


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH, max_bytes: int | None = None,
          finite: bool = True) -> Any:
    """``json.loads(text)`` with bounds: at most ``max_depth`` levels of lists/objects, at most ``max_bytes`` of
    text (None: no limit), and (``finite``) no ``NaN``/``Infinity``/``1e400``. Raises :class:`JSONRefused`."""
    if max_bytes is not None and len(text) > max_bytes:
        raise JSONRefused(f"{len(text)} bytes is over the {max_bytes} byte limit")
    hooks = {"parse_float": _finite, "parse_constant": _constant} if finite else {}
    try:
        value = json.loads(text, **hooks)
    except JSONRefused:
        raise
    except json.JSONDecodeError as exc:
        raise JSONRefused(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise JSONRefused(f"nested more than {max_depth} levels deep") from None
    except (ValueError, MemoryError) as exc:   # bad UTF-8 in bytes; a value too large for memory
        raise JSONRefused(f"not valid JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    if depth_over(value, max_depth):
        raise JSONRefused(f"nested more than {max_depth} levels deep")
    return value


def depth_over(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """True when lists/tuples/dicts in ``value`` nest more than ``max_depth`` levels deep (iterative: any depth
    is measured without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def read_bytes(path: str | os.PathLike, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the file ``path``, opened without following a link in its last component (and without
    blocking on a FIFO); it must be a regular file of at most ``max_bytes``. Raises ``OSError`` (cannot be read)
    or :class:`JSONRefused` naming the file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JSONRefused(f"{os.fspath(path)}: not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise JSONRefused(f"{os.fspath(path)}: larger than the {max_bytes} byte limit")
    return data


def read_file(path: str | os.PathLike, *, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON in the file ``path`` with :func:`loads`' bounds, read by :func:`read_bytes`. Raises ``OSError``
    (cannot be read) or :class:`JSONRefused` naming the file."""
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return loads(data, max_depth=max_depth)
    except JSONRefused as exc:
        raise JSONRefused(f"{os.fspath(path)}: {exc}") from None
