"""What changes a trajectory: the same program on the same instance under other floating-point paths and loads.

Each variant runs the packaged libero_goal task 8 program (``--program suite:task``) on the in-process driver core
(:class:`pyrua_ros.testing.inprocess.InProcessDriver`, the same control steps as over ROS) in a fresh process and
reports the episode's ``state_digest`` (the chain of per-step qpos digests), its step count and success. Variants:

- ``default`` three times, and ``busy`` with one busy loop per core beside it: reproducibility on one machine;
- ``openblas=<core>``: OpenBLAS forced to another CPU kernel (``OPENBLAS_CORETYPE``), as a CPU of that family
  would pick it: robosuite's OSC controller does its small matrix algebra through NumPy, whose BLAS results
  depend on the kernel's SIMD width and summation order;
- ``numpy-no-x86-v3``: NumPy's own AVX2/FMA dispatch turned off (``NPY_DISABLE_CPU_FEATURES=X86_V3``);
- ``blas_kernel=haswell``: the setting that makes digests compare across x86-64 CPUs (its environment, as the
  launch graph gives it to a driver process: :func:`pyrua_ros.sim_interfaces.blas.environment`): on any x86-64 CPU
  with AVX2 it must give the digest an AVX2 machine gives by default (docs/DESIGN.md records both machines').

Each row also gives the policy's wall time per control step [ms] (``run(robo)`` over the in-process driver core,
no recording), so the pin's cost in step time reads off the ``default`` and ``blas_kernel=haswell`` rows; this
benchmark may set ``OPENBLAS_CORETYPE`` in its own child processes (tests and CI never do).

MuJoCo's own SIMD paths are fixed when its wheel is built and cannot be switched at run time, so a CPU with other
MuJoCo code paths is not emulated here. The last line is JSON: per variant the digest, steps, success and the first
control step at which it departs from the first ``default`` run (null when identical).

Usage: ``.venv/bin/python benchmarks/reproducibility.py [--program libero_goal:8] [--repeats 3] [--only LABELS]``
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyrua_ros.sim_interfaces import blas  # noqa: E402
from pyrua_ros.sim_interfaces.state_digest import first_difference  # noqa: E402
from pyrua_ros.testing import busy_loops  # noqa: E402

OPENBLAS_CORES = ("Haswell", "SandyBridge", "Nehalem", "Prescott")
CHILD = """
import json, sys, time
from pyrua_ros.examples import EXAMPLES, run_program
from pyrua_ros.robo.host import RobotHost
from pyrua_ros.robo.libero import libero_host
from pyrua_ros.testing.inprocess import InProcessDriver
suite, task = sys.argv[1], int(sys.argv[2])
driver = InProcessDriver()
driver.reset(suite, task, 0, 600)
host = libero_host(driver, primitives="no-vla")
start = time.perf_counter()
end = run_program(EXAMPLES[(suite, task)], host.robo)
wall = time.perf_counter() - start
status = driver.status()
print(json.dumps({"end": end, "steps": status.step, "success": status.success,
                  "ms_per_step": 1000 * wall / max(1, status.step), "digest": driver.state_trace.summary()}))
driver.close()
"""


def run_variant(suite: str, task: int, env_extra: dict[str, str]) -> dict:
    """One episode in a fresh process with ``env_extra`` added to its environment."""
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MUJOCO_GL="egl", **env_extra)
    proc = subprocess.run([sys.executable, "-c", CHILD, suite, str(task)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"variant {env_extra} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default="libero_goal:8", help="suite:task of a packaged example program")
    parser.add_argument("--repeats", type=int, default=3, help="quiet default runs (default 3)")
    parser.add_argument("--only", default=None, help="comma list of variant labels to run (default #0 always "
                                                     "runs first, as the reference), e.g. blas_kernel=haswell")
    args = parser.parse_args(argv)
    suite, task = args.program.split(":")[0], int(args.program.split(":")[1])

    variants: list[tuple[str, dict[str, str], bool]] = [(f"default#{k}", {}, False) for k in range(args.repeats)]
    variants.append(("busy", {}, True))
    variants += [(f"openblas={core}", {"OPENBLAS_CORETYPE": core}, False) for core in OPENBLAS_CORES]
    variants.append(("numpy-no-x86-v3", {"NPY_DISABLE_CPU_FEATURES": "X86_V3"}, False))
    pinned = blas.environment("haswell")
    variants.append(("blas_kernel=haswell", pinned, False))

    if args.only:
        wanted = set(args.only.split(","))
        variants = [v for v in variants if v[0] == "default#0" or v[0] in wanted]
    rows, reference = {}, None
    for label, extra, busy in variants:
        if busy:
            with busy_loops():
                run = run_variant(suite, task, extra)
        else:
            run = run_variant(suite, task, extra)
        per_step = run["digest"]["per_step"]
        reference = reference or per_step
        departs = first_difference(reference, per_step)
        rows[label] = {"final": run["digest"]["final"], "scope": run["digest"].get("scope"), "steps": run["steps"],
                       "success": run["success"], "end": run["end"], "departs_at_step": departs,
                       "ms_per_step": round(run["ms_per_step"], 2)}
        print(f"{label:32s} steps {run['steps']:4d}  success {run['success']!s:5s}  end {run['end']:10s}  "
              f"digest {run['digest']['final']}  departs at {departs if departs is not None else '-':>3}  "
              f"{run['ms_per_step']:6.2f} ms/step  {run['digest'].get('scope', '')}", flush=True)
    print(json.dumps({"program": args.program, "variants": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
