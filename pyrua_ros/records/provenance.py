"""How a run was made, for its records: the command line, the code version (package version, git commit, whether
the tree had uncommitted changes) and the effective sampling settings of the model runtime.

``eval`` keeps this in ``OUT/eval.json``; a single ``play`` or ``run`` keeps it under ``provenance`` in its
``result.json`` (:func:`stamp_result`, after the episode's own record was written, so a failure here never costs
the record).
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Sequence
from typing import Any

from pyrua_ros import __version__
from pyrua_ros.records.records import read_result, write_result

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(PACKAGE_ROOT), *args], capture_output=True, text=True, timeout=5,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def code_version() -> dict[str, Any]:
    """``{pyrua_ros, git_commit, git_dirty}``; the git keys are None outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        status = _git("status", "--porcelain", "--untracked-files=no")
        dirty = bool(status) if status is not None else None
    return {"pyrua_ros": __version__, "git_commit": commit, "git_dirty": dirty}


def provenance(argv: Sequence[str], sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{argv, version, commit, dirty, sampling}`` of this process (``sampling`` None: no model made the calls)."""
    code = code_version()
    return {"argv": list(argv), "version": code["pyrua_ros"], "commit": code["git_commit"],
            "dirty": code["git_dirty"], "sampling": dict(sampling) if sampling is not None else None}


def stamp_result(out: pathlib.Path | str, record: dict[str, Any]) -> str | None:
    """Add ``provenance`` = ``record`` to ``out/result.json`` (rewritten atomically); None when done, else why not."""
    try:
        data = read_result(out)
        data["provenance"] = record
        write_result(pathlib.Path(out) / "result.json", data)
    except (OSError, ValueError) as exc:
        return f"provenance not recorded: {exc}"
    return None


__all__ = ["code_version", "provenance", "stamp_result"]
