"""The two venvs of a pyrua_ros checkout (``.venv``: Kilted; ``.venv-jazzy``: Jazzy, from ``scripts/setup.sh
--jazzy``) and how to start a process of one from a process of the other.

Each ROS wheel venv re-executes its Python with its own ``LD_LIBRARY_PATH`` once, guarded by
``_ROS_WHEELS_BOOTSTRAP_COMPLETE``; a child inheriting the guard from the other venv would load the wrong
libraries, so :func:`child_env` strips both before starting one. The child applies its own Fast DDS profile
(``wire.rosenv.default_fastdds_profile``), which replaces one of pyrua_ros's profiles it inherited.
"""

from __future__ import annotations

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENVS = {"kilted": ROOT / ".venv", "jazzy": ROOT / ".venv-jazzy"}
REQUIRE_JAZZY_VAR = "PYRUA_REQUIRE_JAZZY"   # scripts/test.sh sets it: a missing Jazzy venv is then an error


def venv_python(distro: str) -> pathlib.Path | None:
    """The Python of the venv of ``distro``, or ``None`` when that venv was not made."""
    python = VENVS[distro] / "bin" / "python"
    return python if python.is_file() else None


def child_env(env: dict | None = None) -> dict:
    """A copy of ``env`` (``os.environ`` by default) that any of the venvs can start a Python from: without the
    wheel bootstrap's guard and library path, and without an ``AMENT_PREFIX_PATH`` that names one of the venvs
    (each venv's ``.pth`` sets its own; an inherited one would make ament look up the other distro's share/)."""
    out = dict(os.environ if env is None else env)
    out.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    out.pop("LD_LIBRARY_PATH", None)
    if out.get("AMENT_PREFIX_PATH") in {str(v) for v in VENVS.values()}:
        del out["AMENT_PREFIX_PATH"]
    return out


def require_venv(distro: str) -> pathlib.Path:
    """For tests: the venv of ``distro``; when it is missing, skip the test, or fail it where
    ``PYRUA_REQUIRE_JAZZY=1`` (scripts/test.sh, CI) says the cross-distro tests must run."""
    import pytest

    if venv_python(distro) is not None:
        return VENVS[distro]
    message = f"{VENVS[distro].name} is missing: scripts/setup.sh --jazzy makes it"
    if os.environ.get(REQUIRE_JAZZY_VAR) == "1":
        pytest.fail(message)
    pytest.skip(message)
