"""The episode's last line of defence: a wall-clock watchdog in a process of its own, outside the agent process.

Inside the agent process the budget is kept by timers and deadlines (``arms.py``, the kernel's cell limits); they
need that process to be responsive. Whatever holds it instead (a decoder, a C call that never returns, a stuck
lock), this watchdog ends it: ``Watchdog.start(out, after_s)`` starts ``python -m pyrua_ros.agent.run.watchdog``
in a session of its own, joined to the agent process by a pipe. When the agent process closes the pipe (``stop()``,
or its own exit, however it dies) the watchdog exits. When ``after_s`` seconds pass first, it SIGKILLs the agent
process, waits for it to be gone, and turns the placeholder ``result.json`` the episode reserved at its start
(every key of the record, status ``error`` and a ``killed:`` reason) into a full record: status ``timeout``, the
reason naming the watchdog, a note. A ``result.json`` the episode already finished is left as it is.

Pure standard library plus the records writer; the child imports nothing of ROS.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import select
import signal
import subprocess
import sys
import time

from pyrua_ros.records.records import now_iso, read_result, write_json

MARGIN_S = 120.0   # past the budget: stopping the robot, the shutdown of the recorder and video, the records
PLACEHOLDER_REASON = "killed:"   # how the reserved result.json's reason starts until the episode replaces it


class Watchdog:
    """A running watchdog child; ``stop()`` ends it (the episode ended by itself)."""

    def __init__(self, proc: subprocess.Popen, write_fd: int) -> None:
        self.proc, self._fd = proc, write_fd

    @classmethod
    def start(cls, out: pathlib.Path, after_s: float) -> Watchdog:
        """Watch this process: SIGKILL it and finish ``out/result.json`` if it still runs ``after_s`` s from now."""
        read_fd, write_fd = os.pipe()
        os.set_inheritable(write_fd, False)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pyrua_ros.agent.run.watchdog", "--pid", str(os.getpid()), "--after-s",
                 f"{after_s:.3f}", "--out", str(pathlib.Path(out).resolve()), "--fd", str(read_fd)],
                pass_fds=(read_fd,), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        return cls(proc, write_fd)

    def stop(self) -> None:
        """The episode ended by itself: the watchdog exits without touching anything."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError):   # a zombie no one has reaped yet is gone as far as the episode goes
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    return False


def is_placeholder(record: dict) -> bool:
    """Whether ``record`` is still the placeholder an episode reserves at its start (its host never finished it)."""
    return record.get("status") == "error" and str(record.get("reason") or "").startswith(PLACEHOLDER_REASON)


def end_placeholder(record: dict, status: str, reason: str, note: str) -> dict:
    """The placeholder ``record`` ended from outside its host (the watchdog, the eval coordinator): its facts so
    far kept, ``status`` and ``reason`` set, ``note`` appended to its notes with the time."""
    notes = record.get("notes") if isinstance(record.get("notes"), list) else []
    return {**record, "status": status, "reason": reason, "notes": [*notes, f"{now_iso()}: {note}"]}


def finish_record(out: pathlib.Path, after_s: float) -> bool:
    """Turn the placeholder ``out/result.json`` into the watchdog's record; False when the episode's own final
    record is there (left as it is) or none can be read."""

    try:
        record = read_result(out)
    except (OSError, ValueError):
        return False
    if not is_placeholder(record):
        return False
    reason = (f"watchdog: the agent process was still running {after_s:g} s after the agent started (the budget "
              f"plus {MARGIN_S:g} s) and was killed")
    write_json(out / "result.json", end_placeholder(
        record, "timeout", reason, "ended by the episode watchdog (a process outside the agent process); counts "
                                   "and the environment outcome are those of the placeholder"))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyrua_ros.agent.run.watchdog", description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True, help="the agent process")
    parser.add_argument("--after-s", type=float, required=True, help="seconds it may still run")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="its run directory")
    parser.add_argument("--fd", type=int, required=True, help="the pipe the agent process holds open")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # (a Ctrl-C is the episode's to handle)
    deadline = time.monotonic() + args.after_s
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([args.fd], [], [], min(left, 1.0))
        if ready and not os.read(args.fd, 64):
            return 0   # the agent process ended, by itself or not
        if _gone(args.pid):
            return 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(args.pid, signal.SIGKILL)
    end = time.monotonic() + 30.0
    while not _gone(args.pid) and time.monotonic() < end:
        time.sleep(0.05)
    return 0 if finish_record(args.out, args.after_s) else 1


if __name__ == "__main__":
    sys.exit(main())
