"""What an episode over ROS 2 costs against the same program in-process: the packaged example programs, both ways.

Run: ``.venv/bin/python benchmarks/episode_overhead.py`` from the repository root (it sets the loopback DDS
environment itself, with its own domain id, before anything imports rclpy). Options: ``--programs`` (default:
the three libero_goal example programs), ``--rounds`` (default 1), ``--profile`` (also profile one episode over
ROS: the agent process and the sim node, top 10 functions by cumulative time each).

In one run, program by program and alternating the order (the machine is shared and its load drifts):

- **in-process**: the same ``LiberoRobot`` (a ``RobotHost``, its ledger and artifact store) on
  :class:`pyrua_ros.testing.inprocess.InProcessDriver`, the sim node's driver core and LIBERO in this process (the
  same control steps as over ROS, bit for bit). It steps with LIBERO's stock ``env.step`` (what a program calling
  LIBERO in-process pays), and again with the lean step the sim node uses (``inprocess_lean_*``, for reference).
  The env is built once.
- **over ROS**: ``pyrualean run --policy <program>`` as a user runs it: a fresh sim node, the sandboxed kernel,
  ``RosBackend``, default recording (``episode.mcap`` and ``episode.mp4``).

Policy time is the wall time of ``run(robo)`` (``policy_wall_s`` of the run record); per control step is the
``move_to`` calls' time over their steps (the robo servo loop, recording on); the first ``segment`` is the first
call's ``elapsed_s`` in the ledger. ``startup_s``: a sim node started on its own, until it logs that it is ready
(median over the ROS runs' own nodes is in ``episode_startup_s``: the run's boot, card images included).

The last line is JSON: ``inprocess_policy_s``, ``ros_policy_s``, ``ratio`` (ros / in-process, goal <= 1.3),
``ms_per_step_ros``, ``ms_per_step_inprocess``, ``first_segment_s``, ``startup_s``, and the details. With
``--baseline-rev REV`` the ROS side also runs with that revision of the package (``baseline_*`` keys; the same
in-process baseline), for before/after figures from one run.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pathlib
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyrua_ros.testing import apply_loopback_environment, checkout_revision, env_with_code  # noqa: E402

apply_loopback_environment()

from pyrua_ros.examples import EXAMPLES, load_program, run_program  # noqa: E402

PROGRAMS = [(suite, task) for suite, task in EXAMPLES if suite.startswith("libero")]


def _step_ms(records: list[dict]) -> tuple[float, int]:
    """Total seconds and control steps of the move_to calls (the servo loop)."""
    moves = [r for r in records if r["tool"] == "move_to" and r["env_steps"] > 0]
    return sum(r["elapsed_s"] for r in moves), sum(r["env_steps"] for r in moves)


def _first_segment_s(records: list[dict]) -> float | None:
    return next((r["elapsed_s"] for r in records if r["tool"] == "segment"), None)


class InProcess:
    """The example programs on LiberoRobot over the in-process backend (one env, reset per episode)."""

    def __init__(self, lean_step: bool):
        from pyrua_ros.testing.inprocess import InProcessDriver

        self.backend = InProcessDriver(lean_step=lean_step)

    def run(self, suite: str, task: int) -> dict:
        from pyrua_ros.robo.libero import libero_host

        self.backend.reset(suite, task, 0, 10000)
        host = libero_host(self.backend, primitives="no-vla")
        host.capture_boot_images("high")               # the card images, as an episode's boot takes them
        program = load_program(EXAMPLES[(suite, task)])
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            run_program(program, host.robo)   # EpisodeFinished when the task is solved early ends it
        wall = time.perf_counter() - t0
        records = [r.to_json() for r in host.ledger.records]
        move_s, move_steps = _step_ms(records)
        st = self.backend.status()
        return {"policy_s": wall, "steps": st.step, "success": st.success, "move_s": move_s,
                "move_steps": move_steps, "first_segment_s": _first_segment_s(records)}

    def close(self) -> None:
        self.backend.close()


def run_over_ros(suite: str, task: int, out: pathlib.Path, code: pathlib.Path | None = None) -> dict:
    """``pyrualean run`` of the example program, default recording, as a user runs it (with the package of
    ``code``, another checkout, when given)."""
    cmd = [sys.executable, "-m", "pyrua_ros.cli.main", "run", "--policy", str(EXAMPLES[(suite, task)]),
           "--suite", suite, "--task", str(task), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=code or ROOT, capture_output=True, text=True, check=False, env=env_with_code(code))
    result_path = out / "result.json"
    if not result_path.exists():
        raise RuntimeError(f"{' '.join(cmd)} wrote no result.json (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(result_path.read_text())
    records = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    move_s, move_steps = _step_ms(records)
    return {"policy_s": result["policy_wall_s"], "steps": result["env_steps_total"],
            "success": result["environment_success"], "status": result["status"], "move_s": move_s,
            "move_steps": move_steps, "first_segment_s": _first_segment_s(records),
            "episode_startup_s": result["startup_s"], "mcap_bytes": (out / "episode.mcap").stat().st_size
            if (out / "episode.mcap").exists() else 0,
            "mp4_bytes": (out / "episode.mp4").stat().st_size if (out / "episode.mp4").exists() else 0}


def sim_node_startup_s(code: pathlib.Path | None = None) -> float:
    """Seconds from starting a sim node process until it logs that it is ready (env built, episode reset)."""
    from pyrua_ros.testing import NodeProcess

    t0 = time.perf_counter()
    where = code or ROOT
    node = NodeProcess.module("pyrua_ros.nodes.sim_node", "--ros-args", "--params-file",
                              str(where / "config" / "sim.yaml"), cwd=str(where), env=env_with_code(code))
    try:
        if not node.wait_for_output("sim node ready", 300.0):
            raise RuntimeError("sim node did not start:\n" + node.output()[-3000:])
        return time.perf_counter() - t0
    finally:
        node.stop()


WRAPPERS = ("importlib", "<frozen", "runpy", "{built-in method builtins.exec}", "rclpy/executors.py",
            "threading.py", "cli/main.py", "nodes/sim_node.py", "<string>")


def _top(stats, top: int) -> list[str]:
    """The ``top`` entries by cumulative time, leaving out module loading and the executor / CLI wrappers whose
    cumulative time is the whole run (they say nothing about where the time goes)."""

    stream = io.StringIO()
    pstats.Stats(stats, stream=stream).sort_stats("cumulative").print_stats(200)
    lines = [line.rstrip() for line in stream.getvalue().splitlines() if line.strip()[:1].isdigit()]
    return [line for line in lines if not any(w in line for w in WRAPPERS)][:top]


def profile_episode(suite: str, task: int, out: pathlib.Path, top: int = 10) -> dict:
    """One episode over ROS with both processes under cProfile: the sim node started here (``--driver external``;
    the whole process, its startup included), the episode in this process (only the policy, ``run(robo)``: robo,
    RosBackend, the kernel host, recording). Returns the top ``top`` functions by cumulative time of each."""

    from pyrua_ros.agent.run.single_shot import SingleShotAgent
    from pyrua_ros.testing import NodeProcess

    sim_prof = out / "sim_node.prof"
    out.mkdir(parents=True, exist_ok=True)
    # main() under cProfile.run, not `python -m cProfile -m pyrua_ros.nodes.sim_node`: run as __main__ the node
    # ends with os._exit (exit_now), before cProfile writes its file; main() itself returns after a Ctrl-C
    profiled = f"import cProfile; from pyrua_ros.nodes.sim_node import main; cProfile.run('main()', {str(sim_prof)!r})"
    node = NodeProcess([sys.executable, "-c", profiled, "--ros-args", "--params-file",
                        str(ROOT / "config" / "sim.yaml")], cwd=str(ROOT))
    agent = cProfile.Profile()
    run_policy = SingleShotAgent.run

    def profiled_run(self, ep):
        agent.enable()
        try:
            return run_policy(self, ep)
        finally:
            agent.disable()

    try:
        if not node.wait_for_output("sim node ready", 300.0):
            raise RuntimeError("sim node did not start:\n" + node.output()[-3000:])
        from pyrua_ros.cli.main import main as cli_main

        SingleShotAgent.run = profiled_run
        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(["run", "--policy", str(EXAMPLES[(suite, task)]), "--suite", suite, "--task", str(task),
                      "--out", str(out / "episode"), "--driver", "external"])
    finally:
        SingleShotAgent.run = run_policy
        node.stop()
    found = {"agent (policy only)": _top(agent, top)}
    if not sim_prof.exists():
        raise RuntimeError(f"the sim node wrote no profile ({sim_prof}):\n" + node.output()[-3000:])
    found["sim_node (whole process, its startup included)"] = _top(str(sim_prof), top + 5)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="*", default=[f"{s}:{t}" for s, t in PROGRAMS],
                        help="suite:task of example programs (default: the libero_goal ones)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="also profile one episode over ROS")
    parser.add_argument("--out", default=None, help="folder for the ROS run directories (default: a temp dir)")
    parser.add_argument("--baseline-rev", default=None,
                        help="also run the ROS side with this git revision of the package (before/after in one run)")
    args = parser.parse_args()
    programs = [(p.split(":")[0], int(p.split(":")[1])) for p in args.programs]
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="episode_overhead_"))
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)

    baseline = checkout_revision(args.baseline_rev, ROOT) if args.baseline_rev else None
    startup = sim_node_startup_s()
    print(f"sim node ready after {startup:.2f} s", flush=True)
    baseline_startup = sim_node_startup_s(baseline) if baseline else None
    if baseline:
        print(f"baseline {args.baseline_rev}: sim node ready after {baseline_startup:.2f} s", flush=True)
    sides = {"inprocess": InProcess(lean_step=False), "inprocess_lean": InProcess(lean_step=True)}
    runs: dict[str, list[dict]] = {"inprocess": [], "inprocess_lean": [], "ros": [],
                                   **({"baseline_ros": []} if baseline else {})}
    try:
        k = 0
        for r in range(args.rounds):
            for suite, task in programs:
                order = list(runs)
                if k % 2:
                    order.reverse()
                k += 1
                for side in order:
                    if side == "ros":
                        run = run_over_ros(suite, task, out / f"ros_{suite}_{task}_{r}")
                    elif side == "baseline_ros":
                        run = run_over_ros(suite, task, out / f"baseline_{suite}_{task}_{r}", baseline)
                    else:
                        run = sides[side].run(suite, task)
                    run["program"] = f"{suite}:{task}"
                    runs[side].append(run)
                    print(f"{suite} task {task} {side:15s}: policy {run['policy_s']:.2f} s, {run['steps']} steps, "
                          f"success {run['success']}, first segment {run['first_segment_s']:.3f} s, "
                          f"move_to {1e3 * run['move_s'] / max(1, run['move_steps']):.1f} ms/step", flush=True)
        profile = profile_episode(*programs[0], out / "profile") if args.profile else None
    finally:
        for side in sides.values():
            side.close()

    def total(side: str, key: str) -> float:
        return sum(x[key] for x in runs[side])

    def per_step(side: str) -> float:
        return 1e3 * total(side, "move_s") / max(1, total(side, "move_steps"))

    result = {
        "inprocess_policy_s": round(total("inprocess", "policy_s"), 3),
        "ros_policy_s": round(total("ros", "policy_s"), 3),
        "ratio": round(total("ros", "policy_s") / total("inprocess", "policy_s"), 3),
        "ms_per_step_ros": round(per_step("ros"), 2),
        "ms_per_step_inprocess": round(per_step("inprocess"), 2),
        "first_segment_s": round(statistics.median(x["first_segment_s"] for x in runs["ros"]), 3),
        "startup_s": round(startup, 2),
        "inprocess_lean_policy_s": round(total("inprocess_lean", "policy_s"), 3),
        "ms_per_step_inprocess_lean": round(per_step("inprocess_lean"), 2),
        "ratio_vs_inprocess_lean": round(total("ros", "policy_s") / total("inprocess_lean", "policy_s"), 3),
        "step_ratio": round(per_step("ros") / per_step("inprocess"), 3),
        "first_segment_inprocess_s": round(statistics.median(x["first_segment_s"] for x in runs["inprocess"]), 3),
        "episode_startup_s": round(statistics.median(x["episode_startup_s"] for x in runs["ros"]), 2),
        "success": {side: [x["success"] for x in v] for side, v in runs.items()},
        "steps": {side: [x["steps"] for x in v] for side, v in runs.items()},
        "programs": [f"{s}:{t}" for s, t in programs], "rounds": args.rounds,
        "load_avg_1m": round(os.getloadavg()[0], 2), "runs_dir": str(out),
    }
    if baseline:
        result.update({
            "baseline_rev": args.baseline_rev,
            "baseline_ros_policy_s": round(total("baseline_ros", "policy_s"), 3),
            "baseline_ratio": round(total("baseline_ros", "policy_s") / total("inprocess", "policy_s"), 3),
            "baseline_ms_per_step_ros": round(per_step("baseline_ros"), 2),
            "baseline_first_segment_s": round(statistics.median(x["first_segment_s"] for x in runs["baseline_ros"]),
                                              3),
            "baseline_startup_s": round(baseline_startup, 2),
            "baseline_episode_startup_s": round(statistics.median(x["episode_startup_s"]
                                                                  for x in runs["baseline_ros"]), 2),
        })
    if profile:
        for who, lines in profile.items():
            print(f"--- profile of one episode over ROS, {who}: top {len(lines)} by cumulative time")
            print("\n".join(lines))
        result["profile"] = profile
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
