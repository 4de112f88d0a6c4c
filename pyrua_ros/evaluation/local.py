"""The local engine: N worker processes on this machine, each with its own driver node and ROS domain.

Each worker is ``python -m pyrua_ros.evaluation.worker`` in a session of its own (a terminal's Ctrl-C reaches only
the coordinator, which then stops the workers in order), tied to the coordinator by ``PR_SET_PDEATHSIG`` (if the
coordinator is killed outright, the workers and through them their drivers go too). Jobs go down one pipe per
worker, events come up another, read by one thread per worker into a queue the coordinator polls. A worker that
dies is reported (``exit`` event) and replaced unless the engine is closing.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from pyrua_ros.bringup.process import stop_process_groups
from pyrua_ros.evaluation.runner import EngineError
from pyrua_ros.wire.rosenv import PARENT_PID_VAR

STOP_GRACE_S = 60.0   # a worker ends its episode's records and its driver (SIGINT grace 15 s) before this
MAX_STRIKES = 3       # a slot whose worker dies this often in a row without finishing an episode is given up


class _WorkerProcess:
    def __init__(self, index: int, log_dir: pathlib.Path, events: queue.Queue):
        self.index = index
        jobs_r, self._jobs_w = os.pipe()
        events_r, events_w = os.pipe()
        env = dict(os.environ)
        env[PARENT_PID_VAR] = str(os.getpid())
        env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"worker-{index}.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pyrua_ros.evaluation.worker", "--worker", str(index), "--jobs-fd",
                 str(jobs_r), "--events-fd", str(events_w), "--log-dir", str(log_dir)],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(jobs_r, events_w),
                start_new_session=True)
        os.close(jobs_r)
        os.close(events_w)
        self.job: dict[str, Any] | None = None
        self._reader = threading.Thread(target=self._read, args=(events_r, events), daemon=True,
                                        name=f"eval-worker-{index}-events")
        self._reader.start()

    def _read(self, fd: int, events: queue.Queue) -> None:
        with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if isinstance(event, dict):
                        event["worker"] = self.index   # the slot is ours to say, not the child's
                        events.put(event)
        events.put({"event": "exit", "worker": self.index, "returncode": self.proc.wait()})

    def send(self, job: dict[str, Any]) -> bool:
        """Write one job line; False when the worker is gone."""
        try:
            os.write(self._jobs_w, (json.dumps(job) + "\n").encode())
        except (BrokenPipeError, OSError):
            return False
        self.job = job
        return True

    def close_jobs(self) -> None:
        """End of jobs: the worker finishes its episode, stops its driver and exits."""
        with contextlib.suppress(OSError):
            os.close(self._jobs_w)
        self._jobs_w = -1

    def interrupt(self) -> None:
        """SIGTERM to the worker itself: its episode ends as ``interrupted`` with a full record."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)


class LocalEngine:
    """``slots`` worker processes; :meth:`submit` a job to an idle slot, :meth:`poll` the events."""

    name = "local"

    def __init__(self, slots: int, log_dir: pathlib.Path):
        self.slots = slots
        self.log_dir = pathlib.Path(log_dir)
        self.events: queue.Queue = queue.Queue()
        self.workers: dict[int, _WorkerProcess] = {}
        self.worker_info: list[dict[str, Any]] = []   # one entry per worker process started: slot, pid, ROS domain
        self.strikes: dict[int, int] = {}
        self.closing = False
        self.timings: dict[str, float] = {}   # ``close_s``: the workers' end (their drivers' included)

    def start(self) -> None:
        for index in range(self.slots):
            self.workers[index] = _WorkerProcess(index, self.log_dir, self.events)

    def submit(self, slot: int, job: dict[str, Any]) -> bool:
        worker = self.workers.get(slot)
        return worker is not None and worker.send(job)

    def poll(self, timeout: float) -> list[dict[str, Any]]:
        """The events waiting now, else the first to arrive within ``timeout`` s (returned as soon as it did, so a
        worker that finished gets its next job at once); a dead worker is replaced (its job reported as crashed)."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                wait = max(0.0, deadline - time.monotonic()) if not out else 0.0
                event = self.events.get(timeout=wait) if wait > 0 else self.events.get_nowait()
            except queue.Empty:
                break
            if event.get("event") == "exit":
                slot = event["worker"]
                worker = self.workers.get(slot)
                if worker is not None and worker.job is not None:
                    out.append({"event": "crash", "worker": slot, "instance": worker.job["instance"],
                                "detail": f"worker process exited with status {event.get('returncode')} (see "
                                          f"{worker.log_path})"})
                self.strikes[slot] = self.strikes.get(slot, 0) + 1
                if self.closing:
                    pass
                elif self.strikes[slot] < MAX_STRIKES:
                    self.workers[slot] = _WorkerProcess(slot, self.log_dir, self.events)
                else:
                    self.workers.pop(slot, None)
                    if not self.workers:
                        raise EngineError(f"every worker process died {MAX_STRIKES} times in a row without finishing "
                                          f"an episode; see {self.log_dir}/worker-*.log")
            else:
                if event.get("event") == "ready":
                    self.worker_info.append({"slot": event["worker"], "pid": event.get("pid"),
                                             "ros_domain_id": event.get("ros_domain_id")})
                if event.get("event") == "done" and event["worker"] in self.workers:
                    self.workers[event["worker"]].job = None
                    self.strikes[event["worker"]] = 0
                out.append(event)
            if time.monotonic() >= deadline:
                break
        return out

    def close(self, *, interrupted: bool) -> None:
        """Stop every worker: interrupt their episodes first when ``interrupted``; then end of jobs, wait, and end
        what is left by process group (SIGINT, SIGTERM, SIGKILL)."""
        self.closing = True
        t0 = time.monotonic()
        workers = list(self.workers.values())
        if interrupted:
            for worker in workers:
                worker.interrupt()
        for worker in workers:
            worker.close_jobs()
        deadline = time.monotonic() + STOP_GRACE_S
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
        stop_process_groups([w.proc for w in workers], sigint_grace_s=5.0)
        self.timings["close_s"] = round(time.monotonic() - t0, 2)
