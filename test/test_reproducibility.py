"""Reproducibility on one machine: the same program on the same instance takes the same trajectory, bit for bit.

``result.json`` records ``state_digest``: the driver's chain of per-step digests of the whole physics state
(MuJoCo qpos after every control step, :mod:`pyrua_ros.sim_interfaces.state_digest`). The packaged libero_goal task 8
program, replayed, must give one and the same digest:

- in-process on the driver core (:class:`~pyrua_ros.testing.inprocess.InProcessDriver`, the lean step);
- over ROS through a real eval worker (:class:`~pyrua_ros.evaluation.worker.EpisodeWorker`): its first episode on a
  freshly started sim node, its second on the same node reused (reset in between) with a busy loop on every core
  but one beside it (the episode's processes crowd onto what is left; a loop on the last core as well doubled the
  loops' CPU on a 2-core machine and took it from the rest of the suite, for no more crowding).

``benchmarks/reproducibility.py`` repeats it in fresh processes, more times and under other floating-point paths.

A mismatch names the first control step at which the trajectories part. Across CPUs the digest may differ
(docs/DESIGN.md, "Reproducibility"); what holds there is what the other tests assert (success, bounded steps).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pyrua_ros.sim_interfaces import state_digest as sd
from pyrua_ros.testing import busy_loops

SUITE, TASK, SEED = "libero_goal", 8, 0


def test_a_digest_chain_names_the_first_step_where_two_trajectories_part():
    import numpy as np

    states = [np.arange(5.0) + k for k in range(6)]

    def chain(states):
        d = [sd.start_digest(states[0])]
        for k, s in enumerate(states[1:], 1):
            d.append(sd.next_digest(d[-1], k, s))
        return d

    a = chain(states)
    b = chain([*states[:3], states[3] + 1e-15, *states[4:]])    # one ulp-scale change at step 3
    assert a[:3] == b[:3] and all(x != y for x, y in zip(a[3:], b[3:], strict=True))
    assert sd.first_difference(a, b) == 3
    assert sd.first_difference(a, a[:4]) == 4 and sd.first_difference(a, list(a)) is None
    assert sd.first_difference([*a[:3], None, *a[4:]], b) == 4     # a step one client missed is skipped
    ra = {"final": a[-1], "steps": 5, "per_step": a}
    assert sd.describe_difference(ra, dict(ra)) is None
    assert "first differ at control step 3" in sd.describe_difference(ra, {"final": b[-1], "steps": 5, "per_step": b})


def _in_process_digest() -> dict:
    """The packaged program replayed on an in-process driver."""
    from pyrua_ros.examples import EXAMPLES, run_program
    from pyrua_ros.robo.libero import libero_host
    from pyrua_ros.testing.inprocess import InProcessDriver

    driver = InProcessDriver()
    try:
        driver.reset(SUITE, TASK, SEED, 600)
        host = libero_host(driver, primitives="no-vla")
        end = run_program(EXAMPLES[(SUITE, TASK)], host.robo)
        assert end in ("returned", "terminated") and driver.status().success
        return driver.state_trace.summary()
    finally:
        driver.close()


def _worker_digests(tmp_path) -> list[dict]:
    """The same program replayed by ``pyrualean play --runtime replay`` through one eval worker, twice: a fresh sim
    node, then the same node reset (the second beside busy loops)."""
    from pyrua_ros.evaluation.jobs import config_to_json
    from pyrua_ros.evaluation.worker import EpisodeWorker
    from pyrua_ros.settings.config import PlayConfig
    from pyrua_ros.settings.schema import build

    worker = EpisodeWorker(0, tmp_path / "logs")
    results = []
    try:
        for k in range(2):
            out = tmp_path / f"run{k}"
            cfg = build(PlayConfig, {"suite": SUITE, "task": TASK, "seed": SEED, "robot": "sim", "runtime": "replay",
                                     "video": False, "record": False, "out": out, "max_episode_steps": 600})
            job = {"config": config_to_json(cfg), "out": str(out)}
            if k == 1:
                with busy_loops(max(1, (os.cpu_count() or 2) - 1)):
                    worker.run(job)
            else:
                worker.run(job)
            results.append(json.loads((out / "result.json").read_text()))
        assert worker.driver_starts == 1, "the second episode must reuse the worker's driver"
    finally:
        worker.close()
    return results


def test_the_same_program_takes_the_same_trajectory_in_process_over_ros_fresh_reused_and_under_load(tmp_path):
    reference = _in_process_digest()
    assert reference["missing"] == 0 and reference["steps"] > 100
    runs = []
    for k, result in enumerate(_worker_digests(tmp_path)):
        assert result["environment_success"] is True, result
        assert result["state_digest"] is not None, "result.json records the state digest"
        assert result["state_digest"]["steps"] == result["env_steps_total"]
        # the sim node says where its digest compares: its BLAS kernel, the same as this process's environment's
        assert result["state_digest"]["scope"] == reference["scope"] != ""
        label = "over ROS, " + ("fresh driver" if k == 0 else "reused driver, busy loops")
        runs.append((label, result["state_digest"]))
    for label, digest in runs:
        why = sd.describe_difference(reference, digest)
        assert why is None, f"{label}: {why}"


BLAS_THREADS = """
import json, os, sys
{entry}
import numpy
from threadpoolctl import threadpool_info
threads = sorted({{lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}})
print(json.dumps({{"env": os.environ.get("OPENBLAS_NUM_THREADS"), "threads": threads}}))
"""


def _blas_threads(entry: str, **env: str) -> dict:
    """The OpenBLAS thread counts of a fresh process after ``entry`` ran (and NumPy loaded), and the variable its
    children inherit; started without ``OPENBLAS_NUM_THREADS`` unless ``env`` gives it."""
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", BLAS_THREADS.format(entry=entry)], env={**base, **env},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.unit
def test_nodes_and_the_cli_run_blas_on_one_thread_unless_the_user_says_otherwise():
    """OpenBLAS spins a thread per core after every large product; our processes run it on one thread, and so
    do the processes they start, whether NumPy was loaded before or after; a user's own setting stands."""
    if (os.cpu_count() or 1) > 1:   # what the library does by itself: so the checks below can fail
        assert max(_blas_threads("")["threads"]) > 1
    preamble = "from pyrua_ros.wire.rosenv import node_preamble; node_preamble()"
    cli = "from pyrua_ros.cli.main import main\ntry: main(['--version'])\nexcept SystemExit: pass"
    late = "import numpy; from pyrua_ros.sim_interfaces import blas; blas.one_thread()"
    for entry in (preamble, cli, late):
        assert _blas_threads(entry) == {"env": "1", "threads": [1]}, entry
    user = {"env": "2", "threads": [min(2, os.cpu_count() or 1)]}   # OpenBLAS runs at most a thread per core
    assert _blas_threads(late, OPENBLAS_NUM_THREADS="2") == user


@pytest.mark.unit
def test_blas_kernel_haswell_pins_the_driver_process_only_and_digests_name_their_scope():
    from pyrua_ros.bringup import graph
    from pyrua_ros.sim_interfaces import blas
    from pyrua_ros.sim_interfaces.status import EpisodeStatus

    pinned = {n.key: n.env for n in graph.plan({"blas_kernel": "haswell"})}
    assert pinned["sim"]["OPENBLAS_CORETYPE"] == "Haswell" and "OPENBLAS_CORETYPE" not in pinned["agent"]
    fake = {n.key: n.env for n in graph.plan({"blas_kernel": "haswell", "robot": "fake"})}
    assert fake["fake"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert all("OPENBLAS_CORETYPE" not in n.env for n in graph.plan({}))   # native: the environment as it is
    with pytest.raises(ValueError, match="haswell"):
        blas.environment("skylake")
    # this process's kernel is what the digest scope names; asking for another one is refused, not ignored
    scope = blas.digest_scope()
    assert (scope.startswith("openblas ") and scope.endswith(" on x86_64")) or "unknown" in scope
    if scope.split(" on ")[0].endswith(" Haswell"):
        blas.require("haswell")
    else:
        with pytest.raises(blas.BlasKernelError, match="OPENBLAS_CORETYPE=Haswell"):
            blas.require("haswell")
    # a status carries the scope, and one of an earlier driver (no key) still parses
    status = {"episode_id": 1, "suite": "s", "task": 0, "seed": 0, "task_language": "", "step": 0, "sim_time": 0.0,
              "success": False, "terminated": False, "truncated": False, "max_episode_steps": 1,
              "object_names": [], "clock_mode": "lockstep", "estop": False, "gripper_opening": 0.0,
              "gripper_target": 0.0, "state_digest": "ab"}
    assert EpisodeStatus.from_dict(status).digest_scope == ""
    trace = sd.StateTrace()
    trace.observe(EpisodeStatus.from_dict({**status, "digest_scope": scope}))
    assert trace.summary()["scope"] == scope
    a = trace.summary()
    b = {**a, "final": "cd", "per_step": ["cd"], "scope": "openblas 0.3.31 SkylakeX on x86_64"}
    assert "different digest scopes" in sd.describe_difference({**a, "scope": "openblas 0.3.31 Haswell on x86_64"}, b)
