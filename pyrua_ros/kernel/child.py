"""The child process of the kernel: how it boots (isolated interpreter, the kernel's sources first), its
environment, finding its PID under bubblewrap, and the words for how it exited.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from pathlib import Path

# The child starts with -I (no env vars, no cwd on sys.path: a workspace file cannot shadow a module) and -S (no
# site processing: the venv's .pth hooks re-exec with LD_LIBRARY_PATH and set AMENT_PREFIX_PATH, which the child
# must not have); the bootstrap puts the kernel's sources first and the allowed packages after them.
BOOT = ("import sys; sys.path[:0] = {paths!r}; import runpy; "
         "runpy.run_module('pyrua_ros.kernel.worker', run_name='__main__', alter_sys=True)")


def child_environment(workspace: Path) -> dict[str, str]:
    """The child's whole environment: no ROS_*, AMENT_*, API keys or PYTHONPATH; one BLAS/OpenMP thread."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "TMPDIR": str(workspace), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8"}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS"):
        env[var] = "1"
    return env


def read_bwrap_info(fd: int, deadline: float) -> int:
    """The sandbox's child pid from bubblewrap's ``--info-fd`` JSON."""
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            return int(json.loads(data)["child-pid"])
    raise ValueError(f"bubblewrap reported no child pid ({data[:200]!r})")


def only_child(pid: int) -> int:
    """The one child of the sandbox's init process (the kernel's Python)."""
    for _ in range(100):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise ValueError(f"the sandbox process {pid} has no child")


def describe_exit(rc: int | None, *, bwrap: bool = False) -> str:
    """How the kernel process ended; under bubblewrap a status of 128 + N means the kernel died of signal N."""
    if rc is None:
        return "did not exit"
    if bwrap and 128 < rc < 128 + 65:
        rc = -(rc - 128)
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        why = {"SIGXCPU": " (CPU-time limit)", "SIGKILL": " (killed)", "SIGSEGV": " (segmentation fault)"}
        return f"ended by {sig}{why.get(sig, '')}"
    return f"exited with status {rc}"
