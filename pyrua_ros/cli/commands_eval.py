"""``pyrualean eval``: many episodes, in parallel on this machine or on a Ray cluster, resumable, with a report.

The agent options are exactly ``play``'s: the same settings schema generates them (``cli.args.add_settings`` of
:class:`~pyrua_ros.settings.config.PlayConfig`), except the per-episode ones that eval replaces
(``manifest.PER_EPISODE``): ``--suite``, ``--task``, ``--seed`` take lists here, ``--out`` is the evaluation
directory, and run directories are kept or moved aside by the evaluation (no ``--overwrite`` / ``--resume``)::

    OUT/eval.json                      manifest: options, code version, instances, invocations
    OUT/<suite>/<task>/<seed>/         one play run directory per episode (result.json, prompt.txt, ...)
    OUT/.eval/logs/                    worker and driver logs; OUT/.eval/attempts/ earlier failed attempts

Running the same command again skips finished episodes and runs the rest; other agent options are refused.
Everything the input decides (episodes, files, the replay programs, the model server, the Ray head, the manifest) is
checked by ``agent.run.validate`` before any worker or node starts. Exit status: 0 all episodes have a result that is
an agent outcome, 1 some ended in an infrastructure failure (after retries) or the engine failed, 2 bad input, 4
stopped after ``--max-provider-failures`` model-server failures in a row, 130 interrupted (finished episodes are
kept; the same command resumes).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import pathlib
import signal
import sys
from typing import Any

from pyrua_ros.agent.run.interrupts import FirstSignalInterrupts
from pyrua_ros.agent.run.validate import (
    check_play,
    check_play_model,
    check_ray_address,
    check_run_directory,
    probe_writable,
)
from pyrua_ros.cli import exit_codes
from pyrua_ros.cli.args import add_settings, settings_from_args
from pyrua_ros.cli.common import prepare_ros_environment, refuse
from pyrua_ros.evaluation.instances import NAMED_SETS, Instance, build_instances, load_instance_file
from pyrua_ros.evaluation.jobs import NODE_PLACEHOLDER
from pyrua_ros.evaluation.manifest import PER_EPISODE, Manifest
from pyrua_ros.records.records import read_result
from pyrua_ros.reports.metrics import metrics_from_result
from pyrua_ros.reports.report import format_report
from pyrua_ros.reports.summarize import summary_json
from pyrua_ros.settings import outcomes, schema
from pyrua_ros.settings.config import PlayConfig
from pyrua_ros.settings.runtimes import spoken
from pyrua_ros.sim_interfaces.drivers import DRIVERS

SettingError = schema.SettingError
EXIT_OK, EXIT_INFRA, EXIT_BAD_INPUT = exit_codes.OK, exit_codes.ERROR, exit_codes.BAD_INPUT
EXIT_INTERRUPTED = exit_codes.INTERRUPTED + signal.SIGINT
BACKENDS = ("local", "ray")
RESULT_MODES = ("auto", "shared", "gather")   # how Ray actors' run directories reach OUT (see ray_engine)
MEMORY_PER_WORKER_GB = 2.0   # a sim node, the episode host and its kernel, with room (measured ~1.3 GB)


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    """``play``'s settings from the schema (less the per-episode ones), then the evaluation's own flags."""
    add_settings(p, PlayConfig, replaced=PER_EPISODE)
    group = p.add_argument_group("evaluation")
    sets = ", ".join(NAMED_SETS)
    group.add_argument("--suite", action="append", default=None, metavar="SUITE[,SUITE...]",
                       help=f"suites or named sets to evaluate ({sets}; repeat or comma-separate)")
    group.add_argument("--task", default="all", help="tasks of every suite: all (default) or a list like 0-4,7")
    group.add_argument("--seed", default="0", help="seeds (official init state = seed mod 50): a list like 0-9 "
                                                   "(default 0: one episode per task instance)")
    group.add_argument("--instances", type=pathlib.Path, default=None, metavar="FILE",
                       help="YAML/JSON file listing {suite, task, seed} entries (instead of --suite/--task/--seed)")
    group.add_argument("--out", type=pathlib.Path, required=True,
                       help="evaluation directory: episode (s, t, n) writes OUT/s/t/n/; re-running resumes")
    group.add_argument("--workers", type=int, default=None,
                       help="episodes at once (default: what this machine holds, by cores and memory; with --backend "
                            "ray the cluster's CPUs / --cpus-per-episode)")
    group.add_argument("--backend", default="local", choices=BACKENDS,
                       help="local worker processes (default) or Ray actors")
    group.add_argument("--address", default=None,
                       help="Ray cluster to join (e.g. 10.0.0.5:6379 or auto); default: a private Ray on this machine")
    group.add_argument("--cpus-per-episode", type=float, default=1.0, help="Ray CPUs reserved per episode (default 1)")
    group.add_argument("--gpus-per-episode", type=float, default=0.0,
                       help="Ray GPUs reserved per episode, where a model or VLA server is co-located (default 0)")
    group.add_argument("--ray-results", default="auto", choices=RESULT_MODES,
                       help="Ray: write run directories in place (shared), return them to OUT (gather), or detect")
    group.add_argument("--retries", type=int, default=1,
                       help="re-run an episode that ended in an infrastructure failure up to N times (default 1)")
    group.add_argument("--max-provider-failures", type=int, default=3, metavar="K",
                       help="stop the evaluation after K episodes in a row whose model server failed after its "
                            "retries (planner_error); resumable; 0 never stops (default 3)")
    group.add_argument("--allow-code-change", action="store_true",
                       help="resume an evaluation made by another code version")
    group.add_argument("--count-errors-as-failures", action="store_true",
                       help="final report: count infrastructure failures in the success rate")
    group.add_argument("--json", action="store_true", help="print the final report as JSON on stdout")


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``eval`` on the CLI's subparsers."""
    parser = subparsers.add_parser("eval", help="evaluate many episodes (parallel, resumable, local or Ray)",
                                   description=__doc__.splitlines()[0].replace("``", ""))
    add_eval_arguments(parser)
    parser.set_defaults(func=cmd_eval)
    return parser


def default_workers(episodes: int, cpus_per_episode: float = 1.0) -> int:
    """Workers this machine holds: its usable cores / CPUs per episode, bounded by available memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    by_cpu = int(cores / max(cpus_per_episode, 1e-3))
    by_memory = by_cpu
    try:
        import psutil

        by_memory = int(psutil.virtual_memory().available / 2**30 / MEMORY_PER_WORKER_GB)
    except ImportError:
        pass
    return max(1, min(episodes, by_cpu, by_memory))


def plan_instances(args: argparse.Namespace, driver: str) -> list[Instance]:
    """The requested instances from ``--instances`` or ``--suite/--task/--seed`` (SettingError on bad input)."""
    if args.instances is not None:
        if args.suite:
            raise SettingError("give --instances FILE or --suite/--task/--seed, not both")
        return load_instance_file(args.instances, driver)
    if not args.suite:
        raise SettingError(f"choose episodes with --suite (a suite, or a named set: {', '.join(NAMED_SETS)}) "
                           "or --instances FILE")
    suites = [name.strip() for value in args.suite for name in value.split(",") if name.strip()]
    return build_instances(driver, suites, args.task, args.seed)


def episode_config(base: PlayConfig, instance: Instance, out: pathlib.Path) -> PlayConfig:
    """``base`` (the command's settings tree) for one instance, writing to its run directory under ``out``."""
    episode = dataclasses.replace(base.episode, suite=instance.suite, task=instance.task, seed=instance.seed)
    return dataclasses.replace(base, episode=episode, output=dataclasses.replace(base.output,
                                                                                 out=instance.run_dir(out)))


def episode_configs(base: PlayConfig, instances: list[Instance], out: pathlib.Path) -> dict[Instance, PlayConfig]:
    """Each instance's PlayConfig, checked by ``play``'s own checks (episode, replay source, guides)."""
    configs = {}
    for instance in instances:
        configs[instance] = cfg = episode_config(base, instance, out)
        check_play(cfg)
    return configs


def manifest_options(base: PlayConfig) -> dict[str, Any]:
    """The agent options the manifest records: every setting by leaf name, less the per-episode ones."""
    return {name: value for name, value in schema.flatten(base).items() if name not in PER_EPISODE}


def _check_engine_flags(args: argparse.Namespace, driver: str) -> None:
    if args.workers is not None and args.workers < 1:
        raise SettingError(f"--workers must be at least 1; got {args.workers}")
    if args.retries < 0:
        raise SettingError(f"--retries must be 0 or more; got {args.retries}")
    if args.max_provider_failures < 0:
        raise SettingError(f"--max-provider-failures must be 0 (never stop) or more; got {args.max_provider_failures}")
    if not (math.isfinite(args.cpus_per_episode) and math.isfinite(args.gpus_per_episode)) \
            or args.cpus_per_episode <= 0 or args.gpus_per_episode < 0:
        raise SettingError("--cpus-per-episode must be > 0 and --gpus-per-episode >= 0")
    if not DRIVERS[driver].starts_node and (args.workers or 1) > 1:
        raise SettingError(f"--driver {driver} (drivers you run) serves one episode at a time: use --workers 1")
    if args.backend == "ray":

        if importlib.util.find_spec("ray") is None:
            raise SettingError("--backend ray needs Ray (pip install 'ray==2.60.0'; scripts/setup.sh installs it)")
        if not DRIVERS[driver].starts_node:
            raise SettingError("--backend ray starts its drivers on the cluster: use --driver "
                               + spoken([d.name for d in DRIVERS.nodes()]))
        if args.address:
            check_ray_address(args.address)
    elif args.address:
        raise SettingError("--address is for --backend ray")


def cmd_eval(args: argparse.Namespace) -> int:
    """Validate everything, then run the evaluation and print its report (see the module docstring)."""

    warnings: list[str] = []
    try:
        base = settings_from_args(PlayConfig, args)
        _check_engine_flags(args, base.episode.driver)
        instances = plan_instances(args, base.episode.driver)
        configs = episode_configs(base, instances, args.out.resolve())
        if NODE_PLACEHOLDER in (base.model.base_url or ""):   # a server per node: each episode checks its own
            warnings.append(f"note: --base-url {base.model.base_url}: {NODE_PLACEHOLDER} is the address of the node "
                            "each episode runs on (127.0.0.1 for local workers); not checked from here")
        else:
            check_play_model(base, warn=warnings.append)
        check_eval_out(args.out)
        manifest = Manifest.open(args.out, manifest_options(base), allow_code_change=args.allow_code_change)
    except ValueError as exc:   # SettingError, ManifestMismatch
        return refuse("eval", str(exc))
    except OSError as exc:   # --out that cannot hold the manifest (read-only, /sys, a race)
        return refuse("eval", f"--out {args.out}: cannot be used ({exc.strerror or type(exc).__name__})")
    for line in warnings:
        print(f"pyrualean eval: {line}", file=sys.stderr)
    return run_evaluation(args, manifest, instances, configs, progress_mode=base.output.progress)


def check_eval_out(out: pathlib.Path) -> None:
    """``--out`` of an evaluation: a folder (or nothing yet) under a folder where files can be made; SettingError
    with one line otherwise (what exists is kept: eval resumes from it)."""

    out = pathlib.Path(out)
    if not (out / "eval.json").is_file():   # an evaluation directory resumes (the manifest checks it); else: a
        check_run_directory("--out", out, resume=True)   # file, an unwritable parent, another non-empty folder
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe_writable("--out", out)
    except OSError as exc:
        raise SettingError(f"--out {out}: cannot be used as an evaluation directory "
                           f"({exc.strerror or type(exc).__name__})") from None


def run_evaluation(args: argparse.Namespace, manifest, instances: list[Instance], configs: dict, *,
                   progress_mode: str = "auto") -> int:
    """Skip finished instances, run the rest on the chosen engine, record the invocation, print the report.
    ``progress_mode`` is play's ``--progress`` (auto: the live view on a terminal, plain lines otherwise)."""
    from pyrua_ros.evaluation.progress import EvalProgress
    from pyrua_ros.evaluation.runner import Coordinator, finished_summary

    out = args.out.resolve()
    finished = {i: s for i in instances if (s := finished_summary(i, out)) is not None}
    todo = [i for i in instances if i not in finished]
    if args.backend == "ray" and args.address and not args.workers:
        workers = None   # the cluster's CPUs / --cpus-per-episode, known once joined
    else:
        workers = max(1, min(args.workers or default_workers(len(todo), args.cpus_per_episode), len(todo) or 1))
    run = manifest.begin_run([i.key for i in instances], argv=sys.argv[1:], backend=args.backend,
                             workers=workers or "cluster",
                             skipped=len(finished))
    prepare_ros_environment()   # loopback discovery for every worker and driver this process starts
    engine = _engine(args, workers, out, max(1, len(todo)))
    stream = open(os.devnull, "w") if progress_mode == "off" else sys.stderr   # closed below
    progress = EvalProgress(len(instances), workers, finished_before=len(finished),
                            successes_before=sum(bool(s.get("environment_success")) for s in finished.values()),
                            stream=stream, tty={"rich": True, "plain": False, "off": False}.get(progress_mode),
                            count_errors_as_failures=args.count_errors_as_failures)
    progress.start()
    try:
        with FirstSignalInterrupts("the evaluation stops its workers").installed():
            outcome = Coordinator(out, configs, engine, progress, retries=args.retries,
                                  max_provider_failures=args.max_provider_failures).run(todo)
    finally:
        progress.close()
        if stream is not sys.stderr:
            stream.close()
    run["workers_info"] = list(engine.worker_info)
    run["engine_timings"] = dict(getattr(engine, "timings", {}))   # Ray: instance start, actors, close
    ended = "interrupted" if outcome.interrupted else (f"failed: {outcome.error}" if outcome.error else "finished")
    manifest.end_run(run, outcome=ended, episodes_run=outcome.episodes_run)
    if outcome.error:
        print(f"pyrualean eval: error: {outcome.error}; finished episodes are kept, resume with the same command "
              f"(exit {_exit_code(outcome, False)})", file=sys.stderr)
    return _report(args, out, instances, outcome)


def _exit_code(outcome, infra_left: bool) -> int:
    """130 interrupted; 4 stopped on model-server failures; 1 an engine failure, an infrastructure failure or an
    episode left without a record; else 0."""
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    if outcome.provider_stop:
        return exit_codes.PLANNER_ERROR
    return EXIT_INFRA if outcome.error or infra_left else EXIT_OK


def _engine(args: argparse.Namespace, workers: int | None, out: pathlib.Path, max_slots: int):
    if args.backend == "ray":
        from pyrua_ros.evaluation.ray_engine import RayEngine

        return RayEngine(workers, out, address=args.address, cpus_per_episode=args.cpus_per_episode,
                         gpus_per_episode=args.gpus_per_episode, results=args.ray_results, max_slots=max_slots)
    from pyrua_ros.evaluation.local import LocalEngine

    return LocalEngine(workers or 1, out / ".eval" / "logs")


def _report(args: argparse.Namespace, out: pathlib.Path, instances: list[Instance], outcome) -> int:
    metrics, missing = [], []
    for instance in instances:
        try:
            metrics.append(metrics_from_result(read_result(instance.run_dir(out)), str(instance.run_dir(out))))
        except (OSError, ValueError):
            missing.append(instance.key)
    summary = summary_json(metrics, count_errors_as_failures=args.count_errors_as_failures)
    summary["evaluation"] = {"out": str(out), "requested": len(instances), "missing": missing,
                             "episodes_run_now": outcome.episodes_run, "interrupted": outcome.interrupted,
                             "error": outcome.error, "stopped_on_provider_failures": outcome.provider_stop}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_report(summary))
        if outcome.interrupted:
            print("interrupted: finished episodes are kept; run the same command again to resume")
        if outcome.error:
            print(f"stopped: {outcome.error}; finished episodes are kept; run the same command again to resume")
        if missing:
            print(f"not run yet: {len(missing)} episode(s) ({', '.join(missing[:5])}"
                  f"{', ...' if len(missing) > 5 else ''}); run the same command again to resume")
        print(f"per-episode table: pyrualean summarize {out}   HTML: pyrualean summarize {out} --html report.html")
    left = bool(missing) or any(m.classified().bucket in (outcomes.INFRA, outcomes.INTERRUPTED) for m in metrics)
    return _exit_code(outcome, left)
