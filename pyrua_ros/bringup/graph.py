"""The one description of the ``libero_sim`` node graph, read by ``launch/libero_sim.launch.py`` and the pip runner.

Everything a launch needs is here and nowhere else: the launch arguments (name, default, description, allowed
values, type), the nodes (package, executable, node name, parameter file from ``config/``, the argument and values
that enable it, remappings), which argument becomes which node parameter, and the environment:

- ``robot:=<driver>`` starts the node of that registered driver (:data:`pyrua_ros.sim_interfaces.drivers.DRIVERS`,
  which the driver nodes of :data:`NODES` are made from): ``robot:=sim`` starts ``sim_node``, ``robot:=fake``
  ``fake_arm_node``, each named ``sim`` so the agent cannot tell them apart by name; ``robot:=external`` starts no
  driver: a real arm's drivers (or any other stack) already serve the interfaces of ``config/interfaces.yaml``.
- ``agent_node`` (node ``agent``) always runs; when it exits, its robot's graph shuts down and its exit code is the
  launch's (under ``ros2 launch``, where one launch file may include several robots, the launch ends once every
  agent has exited: ``launch/libero_sim.launch.py``).
- The driver node shuts its robot's graph down too when it exits (``shutdown_on_exit``).
- ``rviz:=true`` adds ``rviz2 -d config/libero_sim.rviz``.
- ``namespace:=robot1`` puts every node under ``/robot1``: interface names are relative, so one graph (one ROS
  domain) can hold several robots, each with its own agent. ``/clock`` (rclpy's time source) and rviz's ``/tf``,
  ``/tf_static`` are remapped to the namespace's own.

**Parameter files take effect.** A node-parameter argument left unset (the default, shown as ``''``) is not passed
at all, so the node's parameter files decide: the packaged one (``config/sim.yaml``, ``fake_arm.yaml``,
``agent.yaml``), then the file given by ``driver_params:=`` / ``agent_params:=``, which changes only the values it
names; a value given on the command line overrides both. With a driver, the episode (suite, task, seed, step budget)
comes from one place, the driver's files (or the command line): the agent resets the driver to it.

:func:`plan` turns launch argument values (strings, as both launch front ends deliver them) into a tuple of
:class:`PlannedNode`; the launch file builds one static ``launch_ros.actions.Node`` per :data:`NODES` entry (so
``ros2 launch -p`` lists them) whose parameters are resolved by :func:`plan` at launch time, the runner one command
line per planned node. No rclpy or launch import happens here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from pyrua_ros.settings import schema
from pyrua_ros.settings.config import PlayConfig
from pyrua_ros.settings.schema import convert_text
from pyrua_ros.sim_interfaces import blas
from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.wire import interfaces

PACKAGE = "pyrua_ros"
LAUNCH_NAMES = ("libero_sim",)
RVIZ_CONFIG = "libero_sim.rviz"

_BOOL = ("true", "false")


@dataclasses.dataclass(frozen=True)
class Argument:
    """One launch argument. ``default`` is the documented default text; :meth:`convert` gives the typed value.

    ``kind`` is ``str``, ``int``, ``float``, ``bool`` or ``json`` (a string that must hold a JSON object).
    ``to`` names the graph roles (``driver``, ``agent``: :attr:`NodeSpec.role`) whose node receives it as a
    parameter of the same name; such an argument is unset by default (``''``: the node's parameter file decides,
    and ``default`` is the value the node declares when no file sets it). ``optional``: the setting itself may be
    unset (None), so even a node's declared default is "unset".
    """

    name: str
    default: str
    description: str
    kind: str = "str"
    choices: tuple[str, ...] = ()
    to: tuple[str, ...] = ()
    optional: bool = False

    @property
    def launch_default(self) -> str:
        """The default the launch front ends declare: ``''`` (unset) for node parameters, else :attr:`default`."""
        return "" if self.to else self.default

    def typed_default(self) -> Any:
        """The typed value of :attr:`default` (what a node declares)."""
        return self._typed(self.default)

    def convert(self, text: str) -> Any:
        """Validate ``text`` and return the typed value (None for an unset node parameter); a bad value raises
        ValueError naming what is accepted."""
        text = str(text)
        if (self.to or self.optional) and text == "":
            return None
        return self._typed(text)

    def _typed(self, text: str) -> Any:
        if self.optional and text == "":
            return None
        if self.choices and text not in self.choices:
            raise ValueError(f"{self.name}:={text!r} is not valid; choose one of {', '.join(self.choices)}")
        try:
            value = convert_text(self.kind, (text or "{}") if self.kind == "json" else text)
        except ValueError:
            expected = {"int": "an integer", "float": "a number", "bool": "true or false",
                        "json": "a JSON object such as '{\"top_p\": 0.95}'"}[self.kind]
            raise ValueError(f"{self.name}:={text!r} is not valid; expected {expected}") from None
        return (text or "{}") if self.kind == "json" else value


AGENT = ("agent",)
EPISODE = ("driver", "agent")   # the driver starts on these; the agent resets it to them (DESIGN.md, "Sim interfaces")
SCOPE_TARGETS = {"episode": EPISODE, "agent": AGENT, "driver": ("driver",), "graph": ()}
_KINDS = {"str": "str", "path": "str", "int": "int", "float": "float", "bool": "bool", "json": "json"}


def settings_arguments() -> tuple[Argument, ...]:
    """One launch argument per launch setting of the settings schema (``PlayConfig``), in schema order.

    Defaults, descriptions and choices are the schema's; which nodes receive a setting follows its scope. A
    setting that reaches a node is unset unless given (the node's parameter file decides).
    """

    out = []
    for leaf in schema.leaves(PlayConfig):
        if not leaf.spec.launch:
            continue
        choices = tuple(map(str, leaf.choices)) or (_BOOL if leaf.kind == "bool" else ())
        out.append(Argument(leaf.name, leaf.text(leaf.default), leaf.spec.help, kind=_KINDS[leaf.kind],
                            choices=choices, to=SCOPE_TARGETS[leaf.spec.scope], optional=leaf.optional))
    return tuple(out)


ARGUMENTS: tuple[Argument, ...] = (
    *settings_arguments(),
    Argument("namespace", "", "namespace of every node of this robot, e.g. robot1 (empty: the root namespace)"),
    Argument("driver_params", "", "parameter file of the driver (empty: "
             + " or ".join(f"config/{d.params_file}" for d in DRIVERS.nodes()) + ")"),
    Argument("agent_params", "", "parameter file of the agent (empty: config/agent.yaml)"),
    Argument("rviz", "false", "start rviz2 with config/libero_sim.rviz (checked before anything starts)",
             kind="bool", choices=_BOOL),
    Argument("use_sim_time", "auto", "agent and rviz follow the driver's clock: auto = true unless "
             + " or ".join(f"robot:={d.name}" for d in DRIVERS if not d.sim_clock),
             choices=("auto", "true", "false")),
    Argument("remap", "", "agent remappings, from:=to pairs separated by commas, applied to its node (docs/"
             "BRINGUP.md has an example)", to=AGENT),
    Argument("interfaces", "", "interfaces.yaml replacing the packaged one for every node (PYRUA_INTERFACES)"),
    # launch's own process-escalation settings (ExecuteLocal reads them by these names, default 5 s each): on
    # shutdown each node gets SIGINT, then SIGTERM after sigterm_timeout, then SIGKILL sigkill_timeout later.
    Argument("sigterm_timeout", "5", "[s] launch's wait after SIGINT before it sends a node SIGTERM (the pip "
             "runner's too)", kind="float"),
    Argument("sigkill_timeout", "5", "[s] launch's wait after SIGTERM before it sends a node SIGKILL (the pip "
             "runner's too)", kind="float"),
)
ARGUMENTS_BY_NAME: dict[str, Argument] = {a.name: a for a in ARGUMENTS}

# Names other programs use absolute, remapped to this robot's (relative) interface names: rclpy's time source
# subscribes the root clock, rviz2 the root TF topics. Each picks a name of the driver section of interfaces.yaml.
CLOCK_REMAP: tuple[Callable[[interfaces.Driver], str], ...] = (lambda d: d.clock,)
TF_REMAPS: tuple[Callable[[interfaces.Driver], str], ...] = (lambda d: d.tf, lambda d: d.tf_static)


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """A node the graph may start, as data both front ends read.

    ``role``: ``driver``, ``agent`` or ``viewer`` (what the arguments' ``to`` names). ``enable``: the argument
    and the values of it that start this node (None: always). ``remaps`` name driver interfaces whose root name
    the node uses and is remapped to the robot's (:func:`remappings`); ``sim_time_follower`` nodes get
    ``use_sim_time``.
    """

    key: str
    role: str
    package: str
    executable: str
    name: str
    params_file: str | None
    enable: tuple[str, tuple[str, ...]] | None
    remaps: tuple[Callable[[interfaces.Driver], str], ...]
    shutdown_on_exit: bool
    sim_time_follower: bool

    def remappings(self, names: interfaces.Interfaces | None = None) -> tuple[tuple[str, str], ...]:
        """``(root name, interface name)`` pairs, e.g. ``("/clock", "clock")``."""
        driver = (names or interfaces.load()).driver
        return tuple((interfaces.resolve(pick(driver)), pick(driver)) for pick in self.remaps)

    def enabled(self, typed: Mapping[str, Any]) -> bool:
        if self.enable is None:
            return True
        arg, values = self.enable
        return str(typed[arg]).lower() in values


DRIVER_NODE_NAME = "sim"   # every driver's node is named so (the sim interfaces'): the agent cannot tell them apart

NODES: tuple[NodeSpec, ...] = (
    # one per registered driver that we start (pyrua_ros.sim_interfaces.drivers), keyed by its --driver name
    *(NodeSpec(d.name, "driver", PACKAGE, d.executable, DRIVER_NODE_NAME, d.params_file, ("robot", (d.name,)), (),
               True, False) for d in DRIVERS.nodes()),
    NodeSpec("agent", "agent", PACKAGE, "agent_node", "agent", "agent.yaml", None, CLOCK_REMAP, True, True),
    NodeSpec("rviz", "viewer", "rviz2", "rviz2", "rviz2", None, ("rviz", ("true",)), TF_REMAPS + CLOCK_REMAP,
             False, True),
)
NODES_BY_KEY: dict[str, NodeSpec] = {n.key: n for n in NODES}
AGENT_KEY = "agent"

#: parameter names the agent node reads (config/agent.yaml holds their defaults): every argument sent to it,
#: plus use_sim_time.
AGENT_PARAMETERS: tuple[str, ...] = (*(a.name for a in ARGUMENTS if AGENT_KEY in a.to), "use_sim_time")


@dataclasses.dataclass(frozen=True)
class PlannedNode:
    """One node to start: everything both front ends need, already resolved.

    ``params_files`` are loaded in order (the packaged file, then ``driver_params``/``agent_params``: a later file
    changes only the values it names); ``parameters`` are typed overrides applied after them (only what the command
    line gave, plus what the graph decides: the agent's episode from the driver's files, ``use_sim_time``);
    ``remappings`` are
    ``(from, to)`` pairs; ``env`` holds extra environment variables; ``arguments`` are extra command-line
    arguments before ``--ros-args``.
    """

    key: str
    package: str
    executable: str
    name: str
    namespace: str
    params_files: tuple[pathlib.Path, ...]
    parameters: dict[str, Any]
    remappings: tuple[tuple[str, str], ...]
    env: dict[str, str]
    arguments: tuple[str, ...]
    shutdown_on_exit: bool
    is_agent: bool


def config_dir() -> pathlib.Path:
    """``config/`` of the source tree, else ``share/pyrua_ros/config`` of an installed package."""
    source = interfaces.PACKAGE_CONFIG.parent
    if source.is_dir():
        return source
    from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415 (a ROS install)

    return pathlib.Path(get_package_share_directory(PACKAGE)) / "config"


def parse_launch_args(tokens: Iterable[str]) -> dict[str, str]:
    """``["task:=3", "rviz:=true"]`` -> ``{"task": "3", "rviz": "true"}``; unknown names list the valid ones."""
    values: dict[str, str] = {}
    for token in tokens:
        name, sep, value = token.partition(":=")
        if not sep or not name:
            raise ValueError(f"launch argument {token!r} is not name:=value")
        if name not in ARGUMENTS_BY_NAME:
            raise ValueError(f"unknown launch argument {name!r}; valid: {', '.join(sorted(ARGUMENTS_BY_NAME))}")
        values[name] = value
    return values


def resolve(values: Mapping[str, str]) -> dict[str, Any]:
    """Apply defaults to launch argument texts and return typed values of every argument (None = unset)."""
    unknown = set(values) - set(ARGUMENTS_BY_NAME)
    if unknown:
        raise ValueError(f"unknown launch arguments {sorted(unknown)}; valid: {', '.join(sorted(ARGUMENTS_BY_NAME))}")
    typed = {a.name: a.convert(values.get(a.name, a.launch_default)) for a in ARGUMENTS}
    if typed["use_sim_time"] == "auto":
        typed["use_sim_time"] = DRIVERS[typed["robot"]].sim_clock
    else:
        typed["use_sim_time"] = typed["use_sim_time"] == "true"
    ns = typed["namespace"].strip("/")
    if ns and not all(part.replace("_", "a").isalnum() and not part[0].isdigit() for part in ns.split("/")):
        raise ValueError(f"namespace:={typed['namespace']!r} is not valid; use letters, digits and underscores, "
                         "parts separated by '/', not starting with a digit (e.g. robot1)")
    if typed["remap"]:
        parse_remaps(typed["remap"])
    return typed


def parse_remaps(text: str) -> tuple[tuple[str, str], ...]:
    """``"/a:=/b,/c:=/d"`` -> ``(("/a", "/b"), ("/c", "/d"))``."""
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        src, sep, dst = item.partition(":=")
        if not sep or not src or not dst:
            raise ValueError(f"remap entry {item!r} is not from:=to (entries are separated by commas)")
        pairs.append((src, dst))
    return tuple(pairs)


def remap_arguments(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """``-r from:=to`` command-line arguments of remapping pairs."""
    return [arg for src, dst in pairs for arg in ("-r", f"{src}:={dst}")]


def node_parameters(path: pathlib.Path, node_name: str) -> dict[str, Any]:
    """The ``ros__parameters`` a ROS 2 parameter file gives node ``node_name`` (keys ``/**``, ``/**/<name>``,
    ``<name>``, ``/<name>``; later, more specific keys win)."""
    data = yaml.safe_load(pathlib.Path(path).read_text()) or {}
    out: dict[str, Any] = {}
    for key in ("/**", node_name, f"/{node_name}", f"/**/{node_name}"):
        section = data.get(key)
        if isinstance(section, dict):
            out.update(section.get("ros__parameters") or {})
    return out


def files_parameters(paths: Iterable[pathlib.Path], node_name: str) -> dict[str, Any]:
    """What parameter files loaded in order give node ``node_name`` (a later file wins for the names it sets;
    a missing file gives nothing: the front ends refuse it before starting)."""
    out: dict[str, Any] = {}
    for path in paths:
        if path.is_file():
            out.update(node_parameters(path, node_name))
    return out


def _params_files(spec: NodeSpec, typed: Mapping[str, Any], cfg: pathlib.Path) -> tuple[pathlib.Path, ...]:
    """The packaged parameter file of ``spec``, then the one ``driver_params``/``agent_params`` gives."""
    given = typed["driver_params"] if spec.role == "driver" else typed["agent_params"] if spec.role == "agent" \
        else None
    packaged = (cfg / spec.params_file,) if spec.params_file else ()
    return (*packaged, pathlib.Path(given).resolve()) if given else packaged


def plan(values: Mapping[str, str]) -> tuple[PlannedNode, ...]:
    """The nodes to start for these launch argument values (texts; missing ones take their defaults)."""
    typed = resolve(values)
    cfg = config_dir()
    env = {"PYRUA_INTERFACES": str(pathlib.Path(typed["interfaces"]).resolve())} if typed["interfaces"] else {}
    namespace = "/" + typed["namespace"].strip("/") if typed["namespace"].strip("/") else ""
    specs = [s for s in NODES if s.enabled(typed)]
    driver = next((s for s in specs if s.role == "driver"), None)
    planned = []
    for spec in specs:
        params = {a.name: typed[a.name] for a in ARGUMENTS if spec.role in a.to and typed[a.name] is not None}
        if spec.role == "agent" and driver is not None:
            # the agent resets the driver to the episode of the driver's files
            from_driver = files_parameters(_params_files(driver, typed, cfg), driver.name)
            for name in (a.name for a in ARGUMENTS if a.to == EPISODE):
                if name not in params and name in from_driver:
                    params[name] = from_driver[name]
        if spec.sim_time_follower:
            params["use_sim_time"] = typed["use_sim_time"]
        arguments: tuple[str, ...] = ("-d", str(cfg / RVIZ_CONFIG)) if spec.key == "rviz" else ()
        # the driver's physics on the BLAS kernel asked for: set before its NumPy loads (sim_interfaces/blas.py)
        node_env = {**env, **(blas.environment(typed["blas_kernel"]) if spec.role == "driver" else {})}
        planned.append(PlannedNode(
            key=spec.key, package=spec.package, executable=spec.executable, name=spec.name, namespace=namespace,
            params_files=_params_files(spec, typed, cfg), parameters=params, remappings=spec.remappings(),
            env=node_env, arguments=arguments, shutdown_on_exit=spec.shutdown_on_exit,
            is_agent=spec.key == AGENT_KEY))
    return tuple(planned)


def agent_episode(planned: Iterable[PlannedNode]) -> dict[str, Any]:
    """The episode (suite, task, seed, max_episode_steps) the planned agent resets the driver to: its parameter
    overrides, else its parameter files, else the schema's defaults."""
    agent = next(n for n in planned if n.is_agent)
    from_file = files_parameters(agent.params_files, agent.name)
    names = [a.name for a in ARGUMENTS if a.to == EPISODE]
    return {n: agent.parameters.get(n, from_file.get(n, ARGUMENTS_BY_NAME[n].typed_default())) for n in names}


def find_executable(node: PlannedNode | NodeSpec, prefix: str | os.PathLike = sys.prefix) -> str | None:
    """Where a node's executable is: ``<prefix>/lib/<package>/<executable>`` (where ``ros2 run`` and launch_ros
    look; the ament index gives the prefix of other packages), else the executable on ``PATH``; None if nowhere."""
    prefixes = [pathlib.Path(prefix)]
    if node.package != PACKAGE:
        with contextlib.suppress(Exception):
            from ament_index_python.packages import get_package_prefix  # noqa: PLC0415 (a ROS install)

            prefixes.insert(0, pathlib.Path(get_package_prefix(node.package)))
    for base in prefixes:
        path = base / "lib" / node.package / node.executable
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None if node.package == PACKAGE else shutil.which(node.executable)


def missing_executables(planned: Iterable[PlannedNode]) -> list[str]:
    """Messages for planned nodes whose executable cannot be found (pyrua_ros's own run as ``python -m``)."""
    return [f"{n.executable} ({n.package}) is not installed: it comes with a ROS 2 install; without one, launch "
            f"with {n.key}:=false" for n in planned if n.package != PACKAGE and find_executable(n) is None]


def overrides_yaml(node: PlannedNode) -> str:
    """A ROS 2 parameter file holding ``node.parameters`` for this node in any namespace (the launch file's
    overrides; the runner passes the same values as ``-p``)."""
    return yaml.safe_dump({f"/**/{node.name}": {"ros__parameters": dict(node.parameters)}}, sort_keys=False)


def yaml_scalar(value: Any) -> str:
    """A parameter value as the YAML text ``-p name:=<text>`` needs so it keeps its type (strings stay strings)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip().removesuffix("...").strip()
