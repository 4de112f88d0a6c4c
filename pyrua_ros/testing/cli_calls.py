"""Many command lines of ``pyrualean`` in one child process, for tables of refusals.

Each refusal a test table checks used to start its own interpreter (``python -m pyrua_ros.cli.main ...``), about
0.4 s of CPU each, almost all of it imports. :func:`run_in_one_child` starts one child that calls the CLI's entry
point (``python -m pyrua_ros.cli.main`` is ``sys.exit(main())``) once per command line, with stdout and stderr
captured per call, and returns what each call did.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

CHILD = """
import contextlib, io, json, resource, sys, time
from pyrua_ros.cli.main import main
def cpu():
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))
for k, argv in enumerate(json.load(sys.stdin)):
    out, err, started, cpu0 = io.StringIO(), io.StringIO(), time.monotonic(), cpu()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    print(json.dumps({"call": k, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                      "elapsed_s": time.monotonic() - started, "cpu_s": cpu() - cpu0}), flush=True)
"""


@dataclasses.dataclass(frozen=True)
class CliCall:
    """One command line's outcome: its exit status, what it wrote, and how long the call took: ``elapsed_s`` wall
    [s], ``cpu_s`` CPU of the child and of the processes it waited for [s] (the child's start-up not included)."""

    argv: tuple[str, ...]
    code: int | str | None
    stdout: str
    stderr: str
    elapsed_s: float
    cpu_s: float


def run_in_one_child(argvs: list[list[str]], *, cwd: str | os.PathLike | None = None, env: dict | None = None,
                     timeout_s: float = 120.0) -> list[CliCall]:
    """Run every ``pyrualean`` command line of ``argvs`` (without the program name), in order, in one child."""
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(argvs), capture_output=True, text=True,
                          timeout=timeout_s, cwd=cwd, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the CLI child exited with status {proc.returncode}: {proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"call"')]
    if [row["call"] for row in rows] != list(range(len(argvs))):
        raise RuntimeError(f"the CLI child answered {len(rows)} of {len(argvs)} calls: {proc.stderr[-3000:]}")
    return [CliCall(tuple(argv), row["code"], row["stdout"], row["stderr"], row["elapsed_s"], row["cpu_s"])
            for argv, row in zip(argvs, rows, strict=True)]
