"""Compiled MuJoCo models kept between processes: a scene's MJCF compiled once, then loaded as MJB.

Building a LIBERO env compiles its MJCF (``mujoco.MjModel.from_xml_string``). The first compile in a process
decodes every mesh and texture (6.5 CPU s on a loaded 2-core Xeon, against 1.2 s to load the same model as MJB);
MuJoCo keeps the decoded assets for the process's later compiles (1.3 s), so a fresh sim node, which every ``play``
starts, is what this saves most. MuJoCo's binary model format (MJB: ``mj_saveModel``,
``MjModel.from_binary_path``) holds the compiled model exactly, so a model loaded from it steps bit for bit like
the compiled one (``test_sim_env.py``). The key is the MJCF text, the MuJoCo version and the size and modification
time of every file the MJCF names (meshes, textures); a scene that names a relative or missing file is compiled
every time.

A LIBERO scene is about 200 MB as MJB (its textures, decoded, are 140 MB of it), so the folder is kept under a
size (least recently used first out). The folder must be the user's own and closed to others (mode 0700, as it is
made); otherwise nothing is read from it or written to it. A file that does not load is compiled over.

- ``PYRUA_MODEL_CACHE``: the folder (default ``$XDG_CACHE_HOME/pyrua_ros/mjb``, i.e. ``~/.cache/pyrua_ros/mjb``),
  or ``off`` to compile every time;
- ``PYRUA_MODEL_CACHE_MB``: the most it keeps [MB] (default 2048: ten LIBERO scenes).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import re
import stat
import tempfile

import mujoco

ENV = "PYRUA_MODEL_CACHE"
SIZE_ENV = "PYRUA_MODEL_CACHE_MB"
DEFAULT_MB = 2048
_FILES = re.compile(r'\bfile\s*=\s*"([^"]*)"')


def folder() -> pathlib.Path | None:
    """The cache folder (None: caching is off)."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return pathlib.Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "pyrua_ros" / "mjb"


def limit_bytes() -> int:
    """The most the folder keeps [bytes] (``PYRUA_MODEL_CACHE_MB``; a value that is no number: the default)."""
    try:
        return max(0, int(float(os.environ.get(SIZE_ENV, DEFAULT_MB)) * 1e6))
    except ValueError:
        return int(DEFAULT_MB * 1e6)


def key(xml: str) -> str | None:
    """The cache key of ``xml`` (None: it names a relative or missing file, so it is not cached)."""
    digest = hashlib.sha256()
    digest.update(mujoco.__version__.encode())
    digest.update(b"\0" + xml.encode())
    for name in sorted(set(_FILES.findall(xml))):
        if not os.path.isabs(name):
            return None
        try:
            info = os.stat(name)
        except OSError:
            return None
        digest.update(f"\0{name}\0{info.st_size}\0{info.st_mtime_ns}".encode())
    return digest.hexdigest()


def _own_folder(where: pathlib.Path) -> bool:
    """Make ``where`` (mode 0700) if missing; whether it is a folder of this user that no one else can write."""
    with contextlib.suppress(OSError):
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = where.lstat()
        return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022
    return False


def compile_model(xml: str) -> mujoco.MjModel:
    """``mujoco.MjModel.from_xml_string(xml)``, loaded from the cache when it holds this scene."""
    where = folder()
    name = None if where is None or limit_bytes() == 0 or not _own_folder(where) else key(xml)
    if name is None:   # off, a folder not to trust, or a scene naming what may change unseen
        return mujoco.MjModel.from_xml_string(xml)
    path = where / f"{name}.mjb"
    if path.is_file():
        with contextlib.suppress(Exception):   # unreadable or damaged: compiled over below
            model = mujoco.MjModel.from_binary_path(str(path))
            with contextlib.suppress(OSError):
                os.utime(path)   # recently used: evicted last
            return model
    model = mujoco.MjModel.from_xml_string(xml)
    _store(model, where, path)
    return model


def _store(model: mujoco.MjModel, where: pathlib.Path, path: pathlib.Path) -> None:
    """Write ``model`` to ``path`` whole or not at all, then keep the folder under its size."""
    with contextlib.suppress(OSError):
        fd, temp = tempfile.mkstemp(dir=where, prefix=".", suffix=".mjb")
        os.close(fd)
        try:
            mujoco.mj_saveModel(model, temp, None)
            os.replace(temp, path)   # (another process writing the same key meanwhile writes the same bytes)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        _evict(where, keep=path)


def _evict(where: pathlib.Path, keep: pathlib.Path) -> None:
    """Remove the least recently used models until the folder is within its size (``keep`` stays)."""
    entries = []
    for entry in where.glob("*.mjb"):
        with contextlib.suppress(OSError):
            info = entry.stat()
            entries.append((info.st_mtime, info.st_size, entry))
    total, limit = sum(size for _, size, _ in entries), limit_bytes()
    for _, size, entry in sorted(entries):
        if total <= limit:
            break
        if entry != keep:
            with contextlib.suppress(OSError):
                entry.unlink()
                total -= size


@contextlib.contextmanager
def cached_compiles():
    """While open, robosuite compiles its scenes through :func:`compile_model` (its ``MjSim.from_xml_string``)."""
    from robosuite.utils.binding_utils import MjSim

    original = MjSim.__dict__["from_xml_string"]
    MjSim.from_xml_string = classmethod(lambda cls, xml: cls(compile_model(xml)))
    try:
        yield
    finally:
        MjSim.from_xml_string = original
