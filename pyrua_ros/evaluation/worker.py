"""An evaluation worker: one episode host (driver node and ROS backend) kept open across episodes.

:class:`EpisodeWorker` is the part shared by both engines: a local worker process (``python -m
pyrua_ros.evaluation.worker``, driven over two pipes by :mod:`pyrua_ros.evaluation.local`) and a Ray actor
(:mod:`pyrua_ros.evaluation.ray_engine`). Each job is one ``play`` episode to which the worker lends its open
:class:`~pyrua_ros.agent.run.episode.EpisodeHost` (``play(cfg, host=...)``): the episode resets the driver to its
(suite, task, seed) and gets a fresh robot host, cell kernel and runtime; the host stays open. It is opened again
when its driver died, when an episode needs another driver or clock, and after an episode that could not boot.
The slice of the driver's log written during an episode is appended to that episode's ``host.log``.

Every worker process runs on loopback DDS and claims a ROS domain of its own *before* rclpy is imported
(:func:`isolate_ros_domain`), so parallel workers never see each other's nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import pathlib
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from pyrua_ros import cputime
from pyrua_ros.agent.run.episode import EpisodeHost, play
from pyrua_ros.agent.run.interrupts import SIGNALS, FirstSignalInterrupts
from pyrua_ros.evaluation.jobs import NODE_PLACEHOLDER, config_from_json, episode_summary
from pyrua_ros.records.records import read_result
from pyrua_ros.wire.rosenv import claim_domain_id, default_to_localhost, die_with_parent


def isolate_ros_domain() -> int:
    """Loopback discovery (unless set) and a ROS domain id claimed by this process; must precede ``import rclpy``.

    An inherited ``ROS_DOMAIN_ID`` is replaced: workers that shared one would see each other's drivers."""
    if "rclpy" in sys.modules:
        raise RuntimeError("rclpy was imported before this worker chose its ROS domain")
    default_to_localhost()
    domain = claim_domain_id()
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    return domain


#: the episode phases as an evaluation's workers show them (the episode's ``shutdown`` writes the records)
PHASE_NAMES = {"shutdown": "records"}


class _StatusRelay:
    """The ``progress`` object ``play`` reports to: forwards the agent status after every turn, each phase (boot,
    reset, card, prompt, agent, records) as ``{"phase", "phase_detail"}``, and a message (a model request being
    retried) as the status's ``last``, to a callback (the per-second ticks stay in the worker)."""

    def __init__(self, callback: Callable[[dict[str, Any]], None]):
        self.callback = callback
        self._last: dict[str, Any] = {}

    def turn(self, status: dict[str, Any]) -> None:
        self._last = dict(status)
        with contextlib.suppress(Exception):
            self.callback(dict(status))

    def phase(self, name: str, detail: str = "", *, elapsed_s: float | None = None) -> None:
        with contextlib.suppress(Exception):
            self.callback({"phase": PHASE_NAMES.get(name, name), "phase_detail": detail})

    def tick(self, status: dict[str, Any]) -> None:
        pass

    def message(self, text: str, *, elapsed_s: float | None = None) -> None:
        with contextlib.suppress(Exception):
            self.callback({**self._last, "last": text})


def on_node(cfg, node_address: str):
    """``cfg`` with ``{node}`` in its model server's base URL replaced by ``node_address``: each node of a cluster
    points its episodes at its own model server (``http://{node}:30000/v1``). A loopback URL
    (``http://127.0.0.1:30000/v1``) needs no placeholder: an episode runs where its actor runs, so it already
    reaches the server on its own node."""

    model = getattr(cfg, "model", None)
    if model is None or not model.base_url or NODE_PLACEHOLDER not in model.base_url:
        return cfg
    host = f"[{node_address}]" if ":" in node_address else node_address
    return dataclasses.replace(cfg, model=dataclasses.replace(
        model, base_url=model.base_url.replace(NODE_PLACEHOLDER, host)))


class EpisodeWorker:
    """Runs episode jobs one after another on an episode host of its own (see the module docstring).
    ``node_address``: what ``{node}`` in a base URL becomes (:func:`on_node`)."""

    def __init__(self, worker_id: int, log_dir: pathlib.Path, node_address: str = "127.0.0.1"):
        self.worker_id = worker_id
        self.node_address = node_address
        self.log_dir = pathlib.Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.host = None
        self._host_key: tuple | None = None
        self.driver_starts = 0

    @property
    def driver_log(self) -> pathlib.Path:
        return self.log_dir / f"worker-{self.worker_id}-driver.log"

    def _close_host(self) -> None:
        if self.host is not None:
            with contextlib.suppress(Exception):
                self.host.close()
        self.host, self._host_key = None, None

    def _open_host(self, episode, cuda_device: str | None = None, on_phase=None) -> None:
        """An open host for ``episode`` (EpisodeSettings): the current one, or a new one when the driver, its
        clock or the VLA server command differ or the driver died (``cuda_device``: the server's GPU)."""

        key = (episode.driver, episode.clock, episode.blas_kernel, episode.vla_server_cmd, cuda_device)
        driver = self.host.driver if self.host is not None else None
        if self.host is not None and (key != self._host_key or (driver is not None and not driver.alive())):
            self._close_host()
        if self.host is None:
            host = EpisodeHost(episode, cuda_device=cuda_device, on_phase=on_phase)
            try:
                host.open(self.driver_log)
            except BaseException:
                with contextlib.suppress(Exception):
                    host.close()
                raise
            self.host, self._host_key = host, key
            self.driver_starts += host.driver is not None

    def run(self, job: dict[str, Any], on_status: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Run one job's episode (``job["out"]``, if given, replaces its run directory); returns
        :func:`episode_summary` of the result.json it wrote."""

        cfg = on_node(config_from_json(job["config"], out=job.get("out")), self.node_address)
        progress = _StatusRelay(on_status) if on_status else None
        t0 = time.monotonic()
        offset = self.driver_log.stat().st_size if self.driver_log.exists() else 0
        try:
            self._open_host(cfg.episode, cfg.compat.cuda_device,
                            on_phase=(lambda name, detail="": progress.phase(name, detail)) if progress else None)
            play(cfg, progress=progress, host=self.host)
        finally:
            if self.host is not None and self.host.driver is not None:
                self._copy_driver_log(offset, pathlib.Path(cfg.out) / "host.log")
        # An episode's objects hold one another (callbacks on rclpy entities, hooks on the host), so only the cyclic
        # collector frees them, and it makes a full pass rarely: until then a worker kept every finished episode's
        # images, bag buffers and ledger (about 50 MB an episode on the fake arm, growing for tens of episodes).
        # Freed here, between episodes, a worker holds one episode's memory; a full pass costs milliseconds.
        gc.collect()
        summary = episode_summary(read_result(cfg.out))
        if summary["status"] == "boot_error":
            self._close_host()   # it may be wedged; the next episode opens a fresh one
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
        """Close the host: the ROS backend, then the driver (a clean ROS shutdown first)."""
        self._close_host()


# ---------------------------------------------------------------------------------------------------- process
def main(argv: list[str] | None = None) -> int:
    """A local worker process: read job lines from ``--jobs-fd`` until EOF, write event lines to ``--events-fd``."""
    parser = argparse.ArgumentParser(prog="python -m pyrua_ros.evaluation.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=int, required=True, help="worker index")
    parser.add_argument("--jobs-fd", type=int, required=True, help="file descriptor job lines arrive on")
    parser.add_argument("--events-fd", type=int, required=True, help="file descriptor event lines go to")
    parser.add_argument("--log-dir", type=pathlib.Path, required=True, help="folder of the worker's driver log")
    args = parser.parse_args(argv)
    die_with_parent()   # PR_SET_PDEATHSIG: the coordinator's death ends this worker (and so its driver)
    interrupts = FirstSignalInterrupts("the worker ends its episode and its driver")
    for sig in SIGNALS:
        signal.signal(sig, interrupts)
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
            cputime.mark("worker: job")
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
        cputime.mark("worker: closing")
        worker.close()
        cputime.mark("worker: closed")
        with contextlib.suppress(OSError):
            events.close()
    return 0


if __name__ == "__main__":
    from pyrua_ros.bringup.process import exit_now

    exit_now(main())   # host and driver are closed: skip freeing the ROS client libraries object by object
