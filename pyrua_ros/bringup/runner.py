"""The pip-only launch runner: ``pyrua-ros launch libero_sim key:=value ...`` without ``ros2 launch``.

It starts the nodes of :func:`pyrua_ros.bringup.graph.plan` as child processes, each in its own process group,
with the same ``--ros-args`` a launch_ros ``Node`` would give (``-r __node:=<name> --params-file <yaml>
-p k:=v -r from:=to``), and prefixes every output line with the node name. It ends the whole graph when the
agent exits, when a node marked ``shutdown_on_exit`` (the driver) exits, on Ctrl-C or on SIGTERM: SIGINT to each
child's process group, then SIGTERM after ``sigterm_timeout``, then SIGKILL ``sigkill_timeout`` later (the launch
arguments ``ros2 launch`` reads, 5 s each by default). The exit code is the agent's
(signals as 128 + signal number); if the agent ended with 0 only because another node died first, it is 1.

DDS discovery defaults to loopback (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) when the variable is unset,
since every node of this graph runs on this machine; an explicit value is left alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from pyrua_ros.bringup import graph
from pyrua_ros.bringup.process import stop_process_groups
from pyrua_ros.sim_interfaces.episodes import check_episode
from pyrua_ros.wire.rosenv import PARENT_PID_VAR, claim_domain_id, default_to_localhost

POLL_S = 0.05            # how often the supervisor looks at its children [s]
SIGINT_GRACE_S = 10.0    # time each child gets to end after SIGINT [s]
SIGTERM_GRACE_S = 5.0    # then after SIGTERM, before SIGKILL [s]


class LaunchError(RuntimeError):
    """The graph cannot be started as asked (missing executable or parameter file)."""


@dataclasses.dataclass(frozen=True)
class Child:
    """A process the runner supervises: a label for its output, its argv, extra env and its exit semantics."""

    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    shutdown_on_exit: bool = True
    is_agent: bool = False


def node_executable(node: graph.PlannedNode, prefix: str | os.PathLike = sys.prefix) -> list[str]:
    """argv prefix that runs ``node``: its installed executable (graph.find_executable), else ``python -m`` for
    pyrua_ros's own nodes; LaunchError for another package's missing executable."""
    found = graph.find_executable(node, prefix)
    if found:
        return [found]
    if node.package == graph.PACKAGE:
        return [sys.executable, "-m", f"pyrua_ros.nodes.{node.executable}"]
    raise LaunchError(graph.missing_executables([node])[0])


def ros_arguments(node: graph.PlannedNode) -> list[str]:
    """The ``--ros-args`` part of a node's command line, what launch_ros would pass."""
    args = ["--ros-args", "-r", f"__node:={node.name}"]
    if node.namespace:
        args += ["-r", f"__ns:={node.namespace}"]
    for path in node.params_files:
        args += ["--params-file", str(path)]
    for name, value in node.parameters.items():
        args += ["-p", f"{name}:={graph.yaml_scalar(value)}"]
    for src, dst in node.remappings:
        args += ["-r", f"{src}:={dst}"]
    return args


def command(node: graph.PlannedNode, prefix: str | os.PathLike = sys.prefix) -> list[str]:
    """Full argv of one planned node."""
    for path in node.params_files:
        if not path.is_file():
            raise LaunchError(f"parameter file {path} of node {node.name!r} does not exist")
    return [*node_executable(node, prefix), *node.arguments, *ros_arguments(node)]


def children(planned: Sequence[graph.PlannedNode], prefix: str | os.PathLike = sys.prefix) -> list[Child]:
    return [Child(label=n.name, argv=tuple(command(n, prefix)), env=n.env, shutdown_on_exit=n.shutdown_on_exit,
                  is_agent=n.is_agent) for n in planned]


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class Runner:
    """Starts :class:`Child` processes, streams their output, and ends them all together.

    Threading: one reader thread per child copies lines to ``out`` under a lock; the calling thread supervises.
    """

    def __init__(self, kids: Sequence[Child], *, env: Mapping[str, str] | None = None, out: TextIO | None = None,
                 sigint_grace_s: float | None = None, sigterm_grace_s: float | None = None):
        if sum(k.is_agent for k in kids) != 1:
            raise ValueError("the graph must hold exactly one agent child")
        self.kids = list(kids)
        self.env = dict(os.environ if env is None else env)
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen] = {}
        self._readers: list[threading.Thread] = []
        self._stop = threading.Event()
        self.ended_by: str | None = None   # label of the child whose exit ended the graph, or "signal"
        # the escalation times [s] (None: SIGINT_GRACE_S, SIGTERM_GRACE_S)
        self.sigint_grace_s = SIGINT_GRACE_S if sigint_grace_s is None else sigint_grace_s
        self.sigterm_grace_s = SIGTERM_GRACE_S if sigterm_grace_s is None else sigterm_grace_s

    def say(self, label: str, line: str) -> None:
        with self._lock:
            self.out.write(f"[{label}] {line.rstrip()}\n")
            self.out.flush()

    def _pump(self, label: str, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.say(label, raw.decode(errors="replace"))
        stream.close()

    def start(self) -> None:
        width = max(len(k.label) for k in self.kids)
        for kid in self.kids:
            # PYRUA_PARENT_PID: a pyrua_ros node dies with this runner even if the runner is SIGKILLed
            env = {**self.env, **kid.env, "PYTHONUNBUFFERED": "1", PARENT_PID_VAR: str(os.getpid())}
            proc = subprocess.Popen(list(kid.argv), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            self._procs[kid.label] = proc
            reader = threading.Thread(target=self._pump, args=(kid.label.ljust(width), proc.stdout),
                                      name=f"out-{kid.label}", daemon=True)
            reader.start()
            self._readers.append(reader)
            self.say("launch", f"started {kid.label} (pid {proc.pid}): {shlex.join(kid.argv)}")

    def request_stop(self, *_sig) -> None:
        """Ask the supervisor to end the graph (signal handlers call this)."""
        self._stop.set()

    def supervise(self, timeout: float | None = None) -> None:
        """Wait until the agent or a shutdown-on-exit child ends, a stop is requested, or ``timeout`` [s] passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop.is_set():
            for kid in self.kids:
                code = self._procs[kid.label].poll()
                if code is not None and (kid.is_agent or kid.shutdown_on_exit):
                    self.ended_by = kid.label
                    self.say("launch", f"{kid.label} exited with {_exit_status(code)}; shutting down")
                    return
            if deadline is not None and time.monotonic() >= deadline:
                self.ended_by = "timeout"
                return
            self._stop.wait(POLL_S)
        self.ended_by = "signal"

    def shutdown(self) -> None:
        """SIGINT, then SIGTERM, then SIGKILL to every child still alive, by its process group id (its PID)."""
        stop_process_groups(self._procs.values(), sigint_grace_s=self.sigint_grace_s,
                            sigterm_grace_s=self.sigterm_grace_s)
        for reader in self._readers:
            reader.join(timeout=2.0)

    def exit_code(self) -> int:
        agent = next(k for k in self.kids if k.is_agent)
        code = self._procs[agent.label].returncode
        status = 1 if code is None else _exit_status(code)
        if status == 0 and self.ended_by not in (agent.label, None):
            return 1
        return status

    def run(self) -> int:
        """Start, supervise until the end, shut down; return the exit code (see the module docstring)."""
        previous = {s: signal.signal(s, self.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            self.supervise()
        finally:
            self.shutdown()
            for s, handler in previous.items():
                signal.signal(s, handler)
        code = self.exit_code()
        self.say("launch", f"done (ended by {self.ended_by}); exit code {code}")
        return code


def arguments_text() -> str:
    lines = []
    for arg in graph.ARGUMENTS:
        choices = f" (one of {', '.join(arg.choices)})" if arg.choices else ""
        unset = f"; unset: the parameter file decides (node default {arg.default!r})" if arg.to else ""
        lines.append(f"  {arg.name}:={arg.launch_default!r}\n      {arg.description}{choices}{unset}")
    return "\n".join(lines) + "\n"


def _show_arguments(out: TextIO) -> None:
    out.write(arguments_text())


def check_episode_arguments(values: Mapping[str, str]) -> None:
    """Refuse, before anything starts, an episode the chosen driver does not serve (ValueError naming the valid
    suites / tasks / seeds): the episode the agent will reset to (given, else the driver's or the agent's parameter
    file's); ``robot:=external`` leaves the suites to the external driver."""

    typed = graph.resolve(values)
    episode = graph.agent_episode(graph.plan(values))
    check_episode(episode["suite"], episode["task"], episode["seed"], typed["robot"])


def main(argv: Sequence[str] | None = None) -> int:
    """``pyrua-ros launch <launch> [name:=value ...]``; returns the process exit code."""
    ap = argparse.ArgumentParser(prog="pyrua-ros launch",
                                 description="Start the libero_sim node graph (driver, agent, optional rviz) "
                                             "without ros2 launch.",
                                 epilog="launch arguments of libero_sim (name:=value):\n" + arguments_text(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("launch", choices=graph.LAUNCH_NAMES, help="launch description to run")
    ap.add_argument("arguments", nargs="*", help="launch arguments as name:=value")
    ap.add_argument("-s", "--show-args", action="store_true", help="list the launch arguments and exit")
    ap.add_argument("--print", dest="print_only", action="store_true", help="print the commands, start nothing")
    args = ap.parse_intermixed_args(argv)
    if args.show_args:
        _show_arguments(sys.stdout)
        return 0
    try:
        values = graph.parse_launch_args(args.arguments)
        kids = children(graph.plan(values))
        typed = graph.resolve(values)
        check_episode_arguments(values)
    except (ValueError, LaunchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.print_only:
        for kid in kids:
            print(shlex.join(kid.argv))
        return 0
    env = default_to_localhost(dict(os.environ))
    if not env.get("ROS_DOMAIN_ID"):   # every node of this graph on a domain of its own
        env["ROS_DOMAIN_ID"] = str(claim_domain_id())
    return Runner(kids, env=env, sigint_grace_s=typed["sigterm_timeout"],
                  sigterm_grace_s=typed["sigkill_timeout"]).run()


if __name__ == "__main__":
    raise SystemExit(main())
