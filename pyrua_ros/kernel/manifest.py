"""What the child learns of the real robo, and how values and exceptions are described for the wire: the manifest
of the target's public members (nothing else is callable), ``describe_error`` for an exception a robo call raised,
and the result types a frame may carry back.
"""

from __future__ import annotations

import inspect
from typing import Any

from pyrua_ros.kernel import protocol


def encodable(value: Any) -> bool:
    try:
        protocol.encode_frame({"v": value})
    except (TypeError, ValueError):
        return False
    return True


def build_manifest(target: Any, dynamic_methods: tuple[str, ...] = ()) -> dict:
    """Public members of ``target``: methods (signature parameters + docstring), properties (read live) and
    uppercase constants (copied). Anything starting with ``_`` is left out.

    ``dynamic_methods``: names the target answers only through ``__getattr__`` (robo's no-VLA shadows, which
    raise a RuntimeError saying the skill is not available and are ledgered); they are listed as methods taking
    ``(*args, **kwargs)`` so a call reaches the target and gets its own answer, not an AttributeError."""
    members = []
    listed = set(dir(target))
    for name in dynamic_methods:
        if name not in listed and not name.startswith("_"):
            members.append({"name": name, "kind": "method", "doc": None, "params": [
                {"name": "args", "kind": "VAR_POSITIONAL"}, {"name": "kwargs", "kind": "VAR_KEYWORD"}]})
    for name in sorted(dir(target)):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(target, name)
        if isinstance(static, property):
            members.append({"name": name, "kind": "property", "doc": inspect.getdoc(static)})
            continue
        value = getattr(target, name)
        if callable(value) and not isinstance(value, type):
            params = []
            try:
                signature = inspect.signature(value)
            except (TypeError, ValueError):
                signature = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                                               inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])
            for p in signature.parameters.values():
                entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
                if p.annotation is not inspect.Parameter.empty:
                    entry["annotation"] = p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(
                        p.annotation)
                if p.default is not inspect.Parameter.empty:
                    if encodable(p.default):
                        entry["default"] = p.default
                    else:
                        entry["default_repr"] = repr(p.default)
                params.append(entry)
            entry = {"name": name, "kind": "method", "doc": inspect.getdoc(value), "params": params}
            if signature.return_annotation is not inspect.Signature.empty:
                ret = signature.return_annotation
                entry["returns"] = ret if isinstance(ret, str) else inspect.formatannotation(ret)
            members.append(entry)
        elif name.isupper():
            if encodable(value):
                members.append({"name": name, "kind": "constant", "value": value})
        elif not isinstance(value, type):
            members.append({"name": name, "kind": "property", "doc": None})
    return {"class": type(target).__name__, "doc": inspect.getdoc(type(target)), "members": members}


def describe_error(exc: BaseException) -> dict:
    """The wire form of an exception raised by the real robo (rebuilt by ``proxy.rebuild_error``)."""
    names = [c.__name__ for c in type(exc).__mro__]
    kind = next((n for n in ("EpisodeFinished", "ToolError") if n in names), type(exc).__name__)
    error: dict[str, Any] = {"type": kind, "text": str(exc)}
    if kind == "ToolError":
        payload = getattr(exc, "payload", None)
        error.update(tool=str(getattr(exc, "tool", "")), message=str(getattr(exc, "message", "")),
                     payload=payload if encodable(payload) else repr(payload))
    elif kind == "EpisodeFinished":
        error["reason"] = str(getattr(exc, "reason", "unknown"))
    elif encodable(list(exc.args)):
        error["args"] = list(exc.args)
    return error


def host_results(name: str, fields: dict) -> Any:
    """Result dataclasses the child sends back (e.g. as an argument) become the real class when known."""
    try:
        from pyrua_ros.robo.results import RESULT_TYPES  # noqa: PLC0415 (optional: pyrua_ros.robo may be absent)
    except ImportError:
        return fields
    cls = next((c for c in RESULT_TYPES if c.__name__ == name), None)
    return cls(**fields) if cls is not None else fields
