"""An evaluation worker: one driver node kept alive and reset between episodes, a fresh episode host per job.

:class:`EpisodeWorker` is the part shared by both engines: a local worker process (``python -m
pyrua_ros.evaluation.worker``, driven over two pipes by :mod:`pyrua_ros.evaluation.local`) and a Ray actor
(:mod:`pyrua_ros.evaluation.ray_engine`). Each job is one ``play`` episode on the worker's own driver: robo, the cell
kernel and the runtime are new for every episode; the driver (sim node or fake arm) is started once, reset by the
episode to its (suite, task, seed), restarted when it died or after an episode that could not boot. The slice of
the driver's log written during an episode is appended to that episode's ``host.log``.

Every worker process runs on loopback DDS and claims a ROS domain of its own *before* rclpy is imported
(:func:`isolate_ros_domain`), so parallel workers never see each other's nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from pyrua_ros.driver.rosenv import claim_domain_id, default_to_localhost, die_with_parent
from pyrua_ros.evaluation.jobs import config_from_json, episode_summary


def isolate_ros_domain() -> int:
    """Loopback discovery (unless set) and a ROS domain id claimed by this process; must precede ``import rclpy``.

    An inherited ``ROS_DOMAIN_ID`` is replaced: workers that shared one would see each other's drivers."""
    if "rclpy" in sys.modules:
        raise RuntimeError("rclpy was imported before this worker chose its ROS domain")
    default_to_localhost()
    domain = claim_domain_id()
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    return domain


class _StatusRelay:
    """The ``progress`` object ``play`` updates after every turn; forwards each status to a callback."""

    def __init__(self, callback: Callable[[dict[str, Any]], None]):
        self.callback = callback

    def update(self, status: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            self.callback(status)


class EpisodeWorker:
    """Runs episode jobs one after another on a driver of its own (see the module docstring)."""

    def __init__(self, worker_id: int, log_dir: pathlib.Path):
        self.worker_id = worker_id
        self.log_dir = pathlib.Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.driver = None
        self._driver_key: tuple | None = None
        self.driver_starts = 0

    @property
    def driver_log(self) -> pathlib.Path:
        return self.log_dir / f"worker-{self.worker_id}-driver.log"

    def _stop_driver(self) -> None:
        if self.driver is not None:
            with contextlib.suppress(Exception):
                self.driver.stop()
        self.driver, self._driver_key = None, None

    def _ensure_driver(self, cfg) -> None:
        from pyrua_ros.agent.episode import DriverProcess

        key = (cfg.driver, cfg.clock, cfg.robot)
        if self.driver is not None and (key != self._driver_key or self.driver.proc.poll() is not None):
            self._stop_driver()
        if self.driver is None:
            self.driver = DriverProcess(cfg, self.driver_log)
            self._driver_key = key
            self.driver_starts += 1

    def run(self, job: dict[str, Any], on_status: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Run one job's episode; returns :func:`episode_summary` of the result.json it wrote."""
        from pyrua_ros.agent.episode import play
        from pyrua_ros.agent.records import read_result

        cfg = config_from_json(job["config"])
        progress = _StatusRelay(on_status) if on_status else None
        t0 = time.monotonic()
        if cfg.driver == "external":
            play(cfg, progress=progress)
        else:
            self._ensure_driver(cfg)
            offset = self.driver_log.stat().st_size if self.driver_log.exists() else 0
            try:
                play(cfg, progress=progress, driver=self.driver)
            finally:
                self._copy_driver_log(offset, pathlib.Path(cfg.out) / "host.log")
        summary = episode_summary(read_result(cfg.out))
        if summary["status"] == "boot_error" and self.driver is not None:
            self._stop_driver()   # it may be wedged; the next episode starts a fresh one
        summary["worker_wall_s"] = round(time.monotonic() - t0, 3)
        summary["driver_starts"] = self.driver_starts
        return summary

    def _copy_driver_log(self, offset: int, target: pathlib.Path) -> None:
        with contextlib.suppress(OSError):
            with open(self.driver_log, "rb") as src:
                src.seek(offset)
                chunk = src.read()
            if chunk:
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "ab") as dst:
                    dst.write(chunk)

    def close(self) -> None:
        """Stop the driver (a clean ROS shutdown first)."""
        self._stop_driver()


# ---------------------------------------------------------------------------------------------------- process
def _raise_interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """A local worker process: read job lines from ``--jobs-fd`` until EOF, write event lines to ``--events-fd``."""
    parser = argparse.ArgumentParser(prog="python -m pyrua_ros.evaluation.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=int, required=True, help="worker index")
    parser.add_argument("--jobs-fd", type=int, required=True, help="file descriptor job lines arrive on")
    parser.add_argument("--events-fd", type=int, required=True, help="file descriptor event lines go to")
    parser.add_argument("--log-dir", type=pathlib.Path, required=True, help="folder of the worker's driver log")
    args = parser.parse_args(argv)
    die_with_parent()   # PR_SET_PDEATHSIG: the coordinator's death ends this worker (and so its driver)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    domain = isolate_ros_domain()
    events = os.fdopen(args.events_fd, "w", buffering=1, encoding="utf-8")
    jobs = os.fdopen(args.jobs_fd, "r", encoding="utf-8")

    def emit(event: str, **fields: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            events.write(json.dumps({"event": event, "worker": args.worker, **fields}, default=str) + "\n")

    worker = EpisodeWorker(args.worker, args.log_dir)
    emit("ready", pid=os.getpid(), ros_domain_id=domain)
    try:
        for line in jobs:
            job = json.loads(line)
            emit("start", instance=job["instance"], attempt=job.get("attempt", 1))
            try:
                summary = worker.run(job, on_status=lambda st, inst=job["instance"]: emit("status", instance=inst,
                                                                                         status=st))
            except Exception as exc:   # the episode writes its own record; this is the worker's failure
                emit("done", instance=job["instance"], error=f"{type(exc).__name__}: {exc}", summary=None)
                continue
            emit("done", instance=job["instance"], summary=summary)
    except KeyboardInterrupt:
        pass
    finally:
        worker.close()
        with contextlib.suppress(OSError):
            events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
