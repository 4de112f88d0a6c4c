"""Run directories that travel: an actor on another machine packs its scratch run directory (:func:`pack`), the
coordinator unpacks it at the instance's place in ``OUT`` (:func:`unpack_into`), paths in its record moved there.
``--ray-results gather`` (see :mod:`pyrua_ros.evaluation.ray_engine`)."""

from __future__ import annotations

import contextlib
import io
import pathlib
import shutil
import tarfile
from typing import Any

from pyrua_ros.records.records import read_result, write_json


def pack(folder: pathlib.Path) -> bytes:
    """``folder`` as a gzipped tar (an actor's scratch run directory, for the coordinator)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buffer.getvalue()


def unpack_into(archive: bytes, target: pathlib.Path, origin: dict[str, str] | None = None) -> None:
    """Unpack a gathered run directory into ``target`` (replacing it; only regular files and folders below it).
    Paths in its result.json that pointed into the actor's scratch folder (``origin["path"]``) are made to point
    into ``target``, and a note says where the episode ran."""

    target = pathlib.Path(target)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(target, filter="data")
    if origin is None or not (target / "result.json").is_file():
        return
    with contextlib.suppress(OSError, ValueError):
        data = _relocate(read_result(target), origin["path"], str(target))
        data.setdefault("notes", []).append(f"run on {origin['host']} in {origin['path']}; gathered by Ray")
        write_json(target / "result.json", data)


def _relocate(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old):] if value == old or value.startswith(old + "/") else value
    if isinstance(value, list):
        return [_relocate(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _relocate(v, old, new) for k, v in value.items()}
    return value
