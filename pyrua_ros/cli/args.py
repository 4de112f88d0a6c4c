"""CLI flags generated from the settings schema (``pyrua_ros.settings.config``), never written by hand.

:func:`add_settings` adds one argument group per section of a settings tree, each flag with its help text, its
choices and its default shown (environment variables named); :func:`settings_from_args` builds the tree back from
the parsed namespace. A bad value is an argparse error (one line naming the valid values, exit 2) raised before
anything boots.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection

from pyrua_ros.settings import schema

SECTION_TITLES = {
    "episode": "episode and robot stack",
    "agent": "agent loop",
    "model": "model server (--runtime openai, codex, claude)",
    "cli": "agent CLIs (--runtime codex, claude)",
    "serve": "MCP server",
    "output": "run directory and display",
    "sandbox": "cell sandbox",
    "compat": "accepted for PyRUA-Lean compatibility (recorded; --cuda-device and --rpent-root act as said)",
    "single": "single shot",
    "generate": "single-shot generation",
}


def _dest(leaf: schema.Leaf) -> str:
    return "setting__" + "__".join(leaf.path)


def _type(leaf: schema.Leaf):
    def convert(text: str):
        try:
            return leaf.parse(text)
        except schema.SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = leaf.kind
    return convert


def add_settings(parser: argparse.ArgumentParser, cls: type, *, environ=None, replaced: Collection[str] = (),
                 ) -> None:
    """One flag per leaf of tree ``cls``, grouped by section, with help text, choices and the default shown.

    ``replaced``: leaf names a command offers through flags of its own (``eval`` takes lists of suites, tasks and
    seeds and an evaluation directory); they get no flag here and :func:`settings_from_args` leaves them at their
    defaults.
    """
    environ = os.environ if environ is None else environ
    unknown = sorted(set(replaced) - {leaf.name for leaf in schema.leaves(cls)})
    if unknown:
        raise TypeError(f"{cls.__name__} has no settings {unknown}")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for leaf in schema.leaves(cls):
        if leaf.name in replaced:
            continue
        section = leaf.path[0] if len(leaf.path) > 1 else ""
        if section not in groups:
            groups[section] = parser.add_argument_group(SECTION_TITLES.get(section, section or "settings"))
        group = groups[section]
        help_text = leaf.spec.help.replace("%", "%%")
        required = leaf.required or leaf.spec.cli_required
        if required:
            help_text += " (required)"
        else:
            help_text += f" (default: {leaf.shown_default(environ).replace('%', '%%')})"
        kwargs = {"dest": _dest(leaf), "help": help_text}
        if leaf.kind == "bool":
            group.add_argument(leaf.flag, action=argparse.BooleanOptionalAction,
                               default=leaf.env_default(environ), **kwargs)
            continue
        kwargs["type"] = _type(leaf)
        if leaf.choices:
            kwargs["choices"] = leaf.choices
            kwargs["metavar"] = "{" + ",".join(map(str, leaf.choices)) + "}"
        else:
            kwargs["metavar"] = leaf.spec.metavar or {"int": "N", "float": "X", "path": "PATH", "json": "JSON"}.get(
                leaf.kind, "TEXT")
        if required:
            group.add_argument(leaf.flag, required=True, **kwargs)
        else:
            group.add_argument(leaf.flag, default=leaf.env_default(environ), **kwargs)


def settings_from_args(cls: type, args: argparse.Namespace):
    """The tree ``cls`` from a namespace that :func:`add_settings` filled (SettingError on a bad combination);
    ``replaced`` leaves (no flag on this parser) keep their defaults."""
    values = {leaf.name: getattr(args, _dest(leaf)) for leaf in schema.leaves(cls) if hasattr(args, _dest(leaf))}
    return schema.build(cls, values)
