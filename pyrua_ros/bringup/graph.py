"""The one description of the ``libero_sim`` node graph, read by ``launch/libero_sim.launch.py`` and the pip runner.

Everything a launch needs is here and nowhere else: the launch arguments (name, default, description, allowed
values, type), the nodes (package, executable, node name, parameter file from ``config/``), which argument
becomes which node parameter, remappings, environment, and the conditions that pick nodes:

- ``robot:=sim`` starts ``sim_node`` (node ``sim``), ``robot:=fake`` starts ``fake_arm_node`` (also node ``sim``,
  so the agent cannot tell them apart by name), ``robot:=external`` starts no driver: a real arm's drivers (or
  any other stack) already serve the interfaces of ``config/interfaces.yaml``.
- ``agent_node`` (node ``agent``) always runs; when it exits, the launch shuts down and its exit code is the launch's.
- The driver node shuts the launch down too when it exits (``on_exit=Shutdown`` semantics).
- ``rviz:=true`` adds ``rviz2 -d config/libero_sim.rviz``.

:func:`plan` turns launch argument values (strings, as both launch front ends deliver them) into a tuple of
:class:`PlannedNode`; the launch file turns each into a ``launch_ros.actions.Node``, the runner into a command line.
No rclpy or launch import happens here.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from pyrua_ros.agent.schema import convert_text
from pyrua_ros.driver import interfaces

PACKAGE = "pyrua_ros"
LAUNCH_NAMES = ("libero_sim",)
RVIZ_CONFIG = "libero_sim.rviz"

_BOOL = ("true", "false")


@dataclasses.dataclass(frozen=True)
class Argument:
    """One launch argument. ``default`` is the launch-level text; :meth:`convert` gives the typed value.

    ``kind`` is ``str``, ``int``, ``float``, ``bool`` or ``json`` (a string that must hold a JSON object).
    ``to`` names the graph nodes (keys of :data:`NODES`) that receive it as a parameter of the same name.
    ``optional``: the empty text means unset (None), and an unset argument is passed to no node.
    """

    name: str
    default: str
    description: str
    kind: str = "str"
    choices: tuple[str, ...] = ()
    to: tuple[str, ...] = ()
    optional: bool = False

    def convert(self, text: str) -> Any:
        """Validate ``text`` and return the typed value; a bad value raises ValueError naming what is accepted."""
        text = str(text)
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
EPISODE = ("sim", "agent")   # the sim starts on these; the agent resets the sim to them (DESIGN.md layer 2)
SCOPE_TARGETS = {"episode": EPISODE, "agent": AGENT, "driver": ("sim",), "graph": ()}
_KINDS = {"str": "str", "path": "str", "int": "int", "float": "float", "bool": "bool", "json": "json"}


def settings_arguments() -> tuple[Argument, ...]:
    """One launch argument per launch setting of the settings schema (``PlayConfig``), in schema order.

    Defaults, descriptions and choices are the schema's; an unset optional setting is the empty text and is not
    passed to any node (its parameter stays unset). Which nodes receive a setting follows its scope.
    """
    from pyrua_ros.agent import schema
    from pyrua_ros.agent.config import PlayConfig

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
    Argument("rviz", "false", "start rviz2 with config/libero_sim.rviz", kind="bool", choices=_BOOL),
    Argument("use_sim_time", "auto", "agent and rviz follow /clock: auto = true unless robot:=external",
             choices=("auto", "true", "false")),
    Argument("interfaces", "", "interfaces.yaml replacing the packaged one for every node (PYRUA_INTERFACES)"),
    Argument("remap", "", "agent remappings: from:=to pairs separated by commas (docs/BRINGUP.md has an example)"),
)
ARGUMENTS_BY_NAME: dict[str, Argument] = {a.name: a for a in ARGUMENTS}


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """A node the graph may start. ``when`` decides from the typed argument values whether it runs."""

    key: str
    package: str
    executable: str
    name: str
    params_file: str | None
    when: Callable[[Mapping[str, Any]], bool]
    shutdown_on_exit: bool
    sim_time_follower: bool


NODES: tuple[NodeSpec, ...] = (
    NodeSpec("sim", PACKAGE, "sim_node", "sim", "sim.yaml", lambda v: v["robot"] == "sim", True, False),
    NodeSpec("fake", PACKAGE, "fake_arm_node", "sim", "fake_arm.yaml", lambda v: v["robot"] == "fake", True, False),
    NodeSpec("agent", PACKAGE, "agent_node", "agent", "agent.yaml", lambda v: True, True, True),
    NodeSpec("rviz", "rviz2", "rviz2", "rviz2", None, lambda v: v["rviz"], False, True),
)
AGENT_KEY = "agent"

#: parameter names the agent node reads (config/agent.yaml holds their defaults): every argument sent to it,
#: plus use_sim_time.
AGENT_PARAMETERS: tuple[str, ...] = (*(a.name for a in ARGUMENTS if AGENT_KEY in a.to), "use_sim_time")


@dataclasses.dataclass(frozen=True)
class PlannedNode:
    """One node to start: everything both front ends need, already resolved.

    ``parameters`` are typed overrides applied after ``params_file``; ``remappings`` are ``(from, to)`` pairs;
    ``env`` holds extra environment variables; ``arguments`` are extra command-line arguments before
    ``--ros-args``.
    """

    key: str
    package: str
    executable: str
    name: str
    params_file: pathlib.Path | None
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
    from ament_index_python.packages import get_package_share_directory

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
    """Apply defaults to launch argument texts and return typed values of every argument."""
    unknown = set(values) - set(ARGUMENTS_BY_NAME)
    if unknown:
        raise ValueError(f"unknown launch arguments {sorted(unknown)}; valid: {', '.join(sorted(ARGUMENTS_BY_NAME))}")
    typed = {a.name: a.convert(values.get(a.name, a.default)) for a in ARGUMENTS}
    if typed["use_sim_time"] == "auto":
        typed["use_sim_time"] = typed["robot"] != "external"
    else:
        typed["use_sim_time"] = typed["use_sim_time"] == "true"
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


def plan(values: Mapping[str, str]) -> tuple[PlannedNode, ...]:
    """The nodes to start for these launch argument values (texts; missing ones take their defaults)."""
    typed = resolve(values)
    cfg = config_dir()
    env = {"PYRUA_INTERFACES": str(pathlib.Path(typed["interfaces"]).resolve())} if typed["interfaces"] else {}
    planned = []
    for spec in NODES:
        if not spec.when(typed):
            continue
        params = {a.name: typed[a.name] for a in ARGUMENTS if spec.key in a.to and typed[a.name] is not None}
        if spec.sim_time_follower:
            params["use_sim_time"] = typed["use_sim_time"]
        arguments: tuple[str, ...] = ()
        if spec.key == "rviz":
            arguments = ("-d", str(cfg / RVIZ_CONFIG))
        planned.append(PlannedNode(
            key=spec.key, package=spec.package, executable=spec.executable, name=spec.name,
            params_file=cfg / spec.params_file if spec.params_file else None, parameters=params,
            remappings=parse_remaps(typed["remap"]) if spec.key == AGENT_KEY else (),
            env=dict(env), arguments=arguments, shutdown_on_exit=spec.shutdown_on_exit,
            is_agent=spec.key == AGENT_KEY))
    return tuple(planned)


def yaml_scalar(value: Any) -> str:
    """A parameter value as the YAML text ``-p name:=<text>`` needs so it keeps its type (strings stay strings)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip().removesuffix("...").strip()
