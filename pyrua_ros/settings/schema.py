"""Settings declared once: field metadata for the settings tree, and the flat views every front end is made from.

A *settings class* is a frozen dataclass. A field made with :func:`setting` is a **leaf** (one user-facing setting:
its help text, choices, CLI flag, launch/parameter name and scope); a field whose type is another settings class is
a **section**. Fields with neither are internal (they keep their dataclass default and no front end offers them).

:func:`leaves` walks a tree class and returns its :class:`Leaf` list in declaration order. From it are generated:
the CLI flags (``pyrua_ros.cli.args``), the launch arguments (``pyrua_ros.bringup.graph``), the agent node's
declared parameters (``pyrua_ros.nodes.agent_node``) and ``config/agent.yaml`` (:func:`yaml_text`).
:func:`build` makes a tree instance from flat values keyed by leaf name; :func:`to_json` is the nested JSON form
(run manifests, result files, evaluation jobs) and :func:`from_json` reads it back. Adding a setting is a one-place
change: one ``setting(...)`` field in the tree.

Scopes say who reads a leaf: ``episode`` (the driver node and the agent: suite, task, ...), ``agent`` (the agent
only), ``driver`` (the driver node only, e.g. its clock) and ``graph`` (what the launch graph itself decides, e.g.
which driver runs). ``launch=False`` keeps a leaf out of the launch arguments and node parameters (CLI-only
compatibility flags, terminal options).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import pathlib
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

SCOPES = ("episode", "agent", "driver", "graph")
KINDS = {str: "str", int: "int", float: "float", bool: "bool", dict: "json", pathlib.Path: "path"}


class SettingError(ValueError):
    """A setting's value is invalid; the message names the setting (as the user spells it) and the valid values."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """How one setting is offered. ``flag``/``name`` default to the field name (``--field-name`` / ``field_name``);
    ``env`` names an environment variable whose non-empty value replaces the default on the CLI; ``unset`` says
    what ``None`` means (shown as the default); ``metavar`` is the CLI placeholder."""

    help: str
    choices: tuple = ()
    flag: str | None = None
    name: str | None = None
    env: tuple[str, ...] = ()
    scope: str = "agent"
    launch: bool = True
    unset: str | None = None
    metavar: str | None = None
    cli_required: bool = False


def setting(default: Any = dataclasses.MISSING, *, help: str, choices: tuple = (), flag: str | None = None,
            name: str | None = None, env: str | tuple[str, ...] = (), scope: str = "agent", launch: bool = True,
            unset: str | None = None, metavar: str | None = None, cli_required: bool = False) -> Any:
    """A dataclass field that is a user-facing setting (no ``default``: required everywhere; ``cli_required``:
    required on the command line, as the reference's CLI requires it, with ``default`` for the launch)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")
    spec = Spec(help=help, choices=tuple(choices), flag=flag, name=name, env=(env,) if isinstance(env, str) else env,
                scope=scope, launch=launch, unset=unset, metavar=metavar, cli_required=cli_required)
    return dataclasses.field(default=default, metadata={"setting": spec})


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One setting of a tree: ``path`` of field names from the root, its value ``kind`` (str, int, float, bool,
    json, path), whether ``None`` is allowed, whether it is ``required``, its ``default`` and its :class:`Spec`."""

    path: tuple[str, ...]
    kind: str
    optional: bool
    required: bool
    default: Any
    spec: Spec

    @property
    def name(self) -> str:
        """Launch argument / node parameter / YAML key (snake_case)."""
        return self.spec.name or self.path[-1]

    @property
    def flag(self) -> str:
        """The CLI flag, e.g. ``--openai-max-tokens``."""
        return self.spec.flag or "--" + self.path[-1].replace("_", "-")

    @property
    def choices(self) -> tuple:
        return self.spec.choices

    def env_default(self, environ: Mapping[str, str] | None = None) -> Any:
        """The default, replaced by the first set (non-empty) variable of ``spec.env``."""
        environ = os.environ if environ is None else environ
        for var in self.spec.env:
            if environ.get(var):
                return self.parse(environ[var])
        return self.default

    def parse(self, text: Any) -> Any:
        """The typed value of a text (CLI argument, launch argument, environment variable).

        An empty text is ``None`` for optional settings; a bad text raises :class:`SettingError` naming the flag
        and what is accepted.
        """
        if not isinstance(text, str):
            text = str(text)
        if text == "" and self.optional:
            return None
        if self.choices and self.kind == "str" and text not in self.choices:
            raise SettingError(f"{self.flag} must be one of {', '.join(map(str, self.choices))}; got {text!r}")
        if self.kind == "json":
            return parse_json_object(self.flag, text)
        try:
            return convert_text(self.kind, text)
        except ValueError:
            expected = {"int": "an integer", "float": "a finite number", "bool": "true or false"}.get(self.kind,
                                                                                                       "a value")
            raise SettingError(f"{self.flag} expects {expected}; got {text!r}") from None

    def text(self, value: Any) -> str:
        """The launch/YAML text of a value (``""`` for None); :meth:`parse` reads it back."""
        if value is None:
            return ""
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "json":
            return json.dumps(value, separators=(", ", ": "))
        return str(value)

    def shown_default(self, environ: Mapping[str, str] | None = None) -> str:
        """The default as ``--help`` shows it (environment variables named)."""
        base = (self.spec.unset or "none") if self.default is None else self.text(self.default)
        if self.default is not None and self.kind == "str" and self.default == "":
            base = "''"
        if self.spec.env:
            return " or ".join(f"${v}" for v in self.spec.env) + f", else {base}"
        return base


TRUE_TEXTS = ("true", "1", "yes", "on")
FALSE_TEXTS = ("false", "0", "no", "off")


def convert_text(kind: str, text: str) -> Any:
    """The value of ``text`` as ``kind`` (str, int, float, bool, path, json object); ValueError when it is not."""
    if kind == "int":
        return int(text)
    if kind == "float":
        value = float(text)
        if not math.isfinite(value):   # nan passes every range check (nan < 0 is False) and is not JSON
            raise ValueError(f"not a finite number: {text!r}")
        return value
    if kind == "bool":
        low = text.strip().lower()
        if low not in TRUE_TEXTS + FALSE_TEXTS:
            raise ValueError(f"not a boolean: {text!r}")
        return low in TRUE_TEXTS
    if kind == "path":
        return pathlib.Path(text)
    if kind == "json":
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        return value
    return text


def parse_json_object(flag: str, text: str | None) -> dict | None:
    """A JSON object text as a dict (None for an empty text); :class:`SettingError` naming ``flag`` otherwise."""
    if text is None or not str(text).strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingError(f"{flag} is not valid JSON ({exc}); expected an object such as "
                           "'{\"top_p\": 0.95}'") from None
    if not isinstance(value, dict):
        raise SettingError(f"{flag} must be a JSON object such as '{{\"top_p\": 0.95}}'; got {type(value).__name__}")
    return value


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(inner type, optional) of ``X`` or ``X | None``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def is_section(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


@functools.cache
def leaves(cls: type) -> tuple[Leaf, ...]:
    """Every setting of the tree rooted at ``cls``, depth first in declaration order; names must be unique."""
    found = tuple(_walk(cls, ()))
    seen: dict[str, tuple[str, ...]] = {}
    for leaf in found:
        for key in (leaf.name, leaf.flag):
            if key in seen:
                raise TypeError(f"{cls.__name__}: {'.'.join(leaf.path)} and {'.'.join(seen[key])} share {key!r}")
            seen[key] = leaf.path
    return found


def _walk(cls: type, prefix: tuple[str, ...]) -> Iterator[Leaf]:
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint, optional = _unwrap(hints[field.name])
        spec = field.metadata.get("setting")
        if spec is None:
            if is_section(hint):
                yield from _walk(hint, (*prefix, field.name))
            continue
        if hint not in KINDS:
            raise TypeError(f"{cls.__name__}.{field.name}: settings are str, int, float, bool, dict or Path")
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        default = None if required else field.default
        yield Leaf(path=(*prefix, field.name), kind=KINDS[hint], optional=optional, required=required,
                   default=default, spec=spec)


def leaf(cls: type, name: str) -> Leaf:
    """The leaf of ``cls`` called ``name`` (launch name); KeyError listing the names otherwise."""
    for item in leaves(cls):
        if item.name == name:
            return item
    raise KeyError(f"{cls.__name__} has no setting {name!r}; settings: {', '.join(x.name for x in leaves(cls))}")


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of tree ``cls`` from flat ``values`` keyed by leaf name (missing: the default; unknown: error).

    Values are used as given (already typed); each settings class validates itself on construction.
    """
    known = {item.name for item in leaves(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingError(f"unknown settings {unknown}; known: {', '.join(sorted(known))}")
    missing = [item.flag for item in leaves(cls) if item.required and values.get(item.name) is None]
    if missing:
        raise SettingError(f"missing required settings: {', '.join(missing)}")
    return _build(cls, (), values)


def _build(cls: type, prefix: tuple[str, ...], values: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        hint, _optional = _unwrap(hints[field.name])
        spec = field.metadata.get("setting")
        if spec is None:
            if is_section(hint):
                kwargs[field.name] = _build(hint, (*prefix, field.name), values)
            continue
        name = spec.name or field.name
        if name in values:
            kwargs[field.name] = values[name]
    return cls(**kwargs)


def flatten(instance: Any) -> dict[str, Any]:
    """Leaf name -> value of a tree instance (the inverse of :func:`build`)."""
    out = {}
    for item in leaves(type(instance)):
        value = instance
        for part in item.path:
            value = getattr(value, part)
        out[item.name] = value
    return out


def to_json(instance: Any) -> dict[str, Any]:
    """Nested JSON-ready dict of a tree instance's settings (paths as strings); internal fields left out."""
    out: dict[str, Any] = {}
    for item in leaves(type(instance)):
        value = instance
        for part in item.path:
            value = getattr(value, part)
        node = out
        for part in item.path[:-1]:
            node = node.setdefault(part, {})
        node[item.path[-1]] = str(value) if isinstance(value, pathlib.Path) else value
    return out


def from_json(cls: type, data: Mapping[str, Any]) -> Any:
    """The tree ``cls`` from :func:`to_json`'s nested form (the inverse; path settings become Paths again, a
    missing setting takes its default, a key that is no setting of ``cls`` is a SettingError)."""
    values: dict[str, Any] = {}
    known: dict[tuple[str, ...], Leaf] = {item.path: item for item in leaves(cls)}

    def walk(node: Mapping[str, Any], prefix: tuple[str, ...]) -> None:
        for key, value in node.items():
            path = (*prefix, key)
            item = known.get(path)
            if item is None and isinstance(value, Mapping):
                walk(value, path)
            elif item is None:
                raise SettingError(f"{'.'.join(path)} is not a setting of {cls.__name__}")
            else:
                values[item.name] = pathlib.Path(value) if item.kind == "path" and isinstance(value, str) else value

    walk(data, ())
    return build(cls, values)


def yaml_text(cls: type, node: str, *, scopes: tuple[str, ...] = ("episode", "agent"), header: str = "") -> str:
    """A ROS parameter file for node ``node``: every launch leaf of ``scopes`` with its default and help.

    Optional settings without a default are written commented out (a ROS parameter cannot hold "unset").
    """
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += [f"{node}:", "  ros__parameters:"]
    for item in leaves(cls):
        if not item.spec.launch or item.spec.scope not in scopes:
            continue
        comment = item.spec.help
        if item.choices and not all(str(c) in comment for c in item.choices):
            comment += f" ({' | '.join(map(str, item.choices))})"
        if item.default is None:
            lines.append(f"    # {item.name}:   # unset: {item.spec.unset or 'none'}; {comment}")
            continue
        value = _yaml_scalar(item.kind, item.text(item.default))
        lines.append(f"    {item.name}: {value}   # {comment}")
    return "\n".join(lines) + "\n"


def _yaml_scalar(kind: str, text: str) -> str:
    if kind in ("str", "path", "json"):
        return json.dumps(text)     # a JSON string is a YAML string that stays a string
    return text
