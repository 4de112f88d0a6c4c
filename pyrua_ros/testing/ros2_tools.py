"""The real ROS 2 command-line tools of a checkout, for tests that use the package as a ROS 2 user does.

``scripts/setup.sh`` builds ``.venv-launch/`` where ``../shared/ros2-launch`` (the unmodified upstream sources of
launch, launch_ros and the ros2cli verbs) sits beside the checkout: ``ros2`` (launch, run, node, param, topic,
service, action, pkg) and ``colcon`` (colcon-core, colcon-ros) on top of ``.venv``. :func:`tools_env` is the
environment its ``env.sh`` makes; :func:`require_tools` skips a test only where those sources are absent, and fails
it where they exist but the build is missing.

``ros2 action list`` and ``ros2 node list`` start a ROS 2 daemon, a detached process that outlives them; tests pass
``--no-daemon`` where a verb has it and stop the daemon of their domain (:func:`stop_daemon`) where it does not.
"""

from __future__ import annotations

import functools
import itertools
import pathlib
import subprocess
import sys
import time

from .venvs import child_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ROOT.parent / "shared" / "ros2-launch"
PREFIX = ROOT / ".venv-launch"
ENV_SCRIPT = PREFIX / "env.sh"


@functools.cache
def _sourced(base: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    out = subprocess.run(["bash", "-c", f'source "{ENV_SCRIPT}" && env -0'], env=dict(base), capture_output=True,
                         check=True)
    pairs = (item.partition("=") for item in out.stdout.decode().split("\0") if "=" in item)
    return tuple((k, v) for k, _, v in pairs)


def tools_env(base: dict | None = None) -> dict | None:
    """``base`` (``os.environ`` by default, loopback DDS settings included) with ``env.sh`` of ``.venv-launch``
    sourced: ``ros2`` and ``colcon`` on PATH; None when ``.venv-launch`` was not built."""
    if not ENV_SCRIPT.is_file():
        return None
    return dict(_sourced(tuple(sorted(child_env(base).items()))))


def require_tools() -> dict:
    """For tests: :func:`tools_env`; skips where ``../shared/ros2-launch`` is absent (a machine without the
    sources), fails where it exists and ``.venv-launch`` was not built."""
    import pytest

    env = tools_env()
    if env is not None:
        return env
    if not SOURCES.is_dir():
        pytest.skip(f"{SOURCES} is absent: no ros2 launch / colcon on this machine (scripts/setup.sh builds them "
                    "into .venv-launch/ from it)")
    pytest.fail(f"{SOURCES} exists but {PREFIX} was not built: run scripts/setup.sh")


def extend_python_path() -> None:
    """Make launch and launch_ros importable in this process (tests of the launch description itself): the
    Python folders of ``.venv-launch`` go to the end of ``sys.path``, so nothing of ``.venv`` is shadowed."""

    for folder in (*sorted(PREFIX.glob("lib/python3*/site-packages")), PREFIX / "deps"):
        if str(folder) not in sys.path:
            sys.path.append(str(folder))


def stop_daemon(env: dict, timeout: float = 60.0) -> None:
    """``ros2 daemon stop`` for the domain of ``env`` (the daemon a verb without ``--no-daemon`` started), repeated
    until no daemon of that domain is left or ``timeout`` [s] has passed. A verb spawns its daemon and goes on
    without waiting for it; until the daemon serves, ``stop`` answers that none is running while it goes on starting
    (seen on a loaded machine: the daemon outlived the test)."""
    domain = env.get("ROS_DOMAIN_ID", "0")
    deadline = time.monotonic() + timeout
    while True:
        subprocess.run(["ros2", "daemon", "stop"], env=env, capture_output=True, timeout=60, check=False)
        if not daemons(domain) or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def daemons(domain: str) -> list[int]:
    """PIDs of the ROS 2 daemons of ``domain`` running on this machine (ros2cli starts one as
    ``python -c <prog> --name ros2-daemon --ros-domain-id N ...``)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        pairs = dict(itertools.pairwise(argv))
        if pairs.get("--name") == "ros2-daemon" and pairs.get("--ros-domain-id") == str(domain):
            found.append(int(entry.name))
    return found
