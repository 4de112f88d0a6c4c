"""The ``robo`` object inside the kernel child: a proxy made from the agent's manifest, holding no robot handle.

The agent process sends a manifest of the real robo's public members (``host.build_manifest``). Here each
method becomes a function that sends ``{"op": "call", "name", "args", "kwargs"}`` to the agent process and
returns the decoded answer (result dataclasses rebuilt as the real ``pyrua_ros.robo.results`` classes), or
re-raises the error the real method raised, with the same type and message. Properties send ``{"op": "get"}``;
constants are copied. The proxy has no private members (``robo._backend`` does not exist), its members cannot
be assigned or deleted, and ``inspect.signature`` / ``help`` show the real signatures and docstrings.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any


class ToolError(RuntimeError):
    """Fallback for ``pyrua_ros.robo.errors.ToolError`` when that module cannot be imported."""


class EpisodeFinished(BaseException):
    """Fallback for ``pyrua_ros.robo.errors.EpisodeFinished`` when that module cannot be imported."""


_BUILTIN_ERRORS = frozenset((
    "ValueError", "TypeError", "RuntimeError", "KeyError", "IndexError", "AttributeError", "NotImplementedError",
    "TimeoutError", "PermissionError", "FileNotFoundError", "OSError", "ZeroDivisionError", "ArithmeticError",
    "LookupError", "AssertionError", "MemoryError",
))


def _robo_errors() -> tuple[type, type]:
    try:
        from pyrua_ros.robo.errors import EpisodeFinished as real_finished  # noqa: PLC0415 (optional: pyrua_ros.robo may be absent)
        from pyrua_ros.robo.errors import ToolError as real_tool_error  # noqa: PLC0415 (optional: pyrua_ros.robo may be absent)
    except ImportError:
        return ToolError, EpisodeFinished
    return real_tool_error, real_finished


def is_episode_finished(exc: BaseException) -> bool:
    """True for any ``EpisodeFinished`` (the real class, the fallback, or a test's own class of that name)."""
    return any(c.__name__ == "EpisodeFinished" for c in type(exc).__mro__)


def rebuild_error(error: dict) -> BaseException:
    """The exception the agent process reported (``manifest.describe_error``), as an object of the same type."""
    kind, text = str(error.get("type", "RuntimeError")), str(error.get("text", ""))
    tool_error, finished = _robo_errors()
    if kind in ("ToolError", "EpisodeFinished"):
        cls = tool_error if kind == "ToolError" else finished
        exc = cls.__new__(cls)
        BaseException.__init__(exc, text)
        attrs = {"tool": error.get("tool"), "message": error.get("message"), "payload": error.get("payload")}
        if kind == "EpisodeFinished":
            attrs = {"reason": error.get("reason")}
        for name, value in attrs.items():
            try:
                object.__setattr__(exc, name, value)
            except (AttributeError, TypeError):
                pass
        return exc
    if kind in _BUILTIN_ERRORS:
        args = error.get("args")
        return getattr(builtins, kind)(*args) if isinstance(args, list) else getattr(builtins, kind)(text)
    return RuntimeError(f"{kind}: {text}")


def result_factory() -> Callable[[str, dict], Any]:
    """Rebuilds ``{"__result__": name, "fields"}`` as the real result dataclass; an unknown name (or no
    ``pyrua_ros.robo.results``) becomes a frozen dataclass of that name and those fields."""
    try:
        from pyrua_ros.robo.results import RESULT_TYPES  # noqa: PLC0415 (optional: pyrua_ros.robo may be absent)
        known = {cls.__name__: cls for cls in RESULT_TYPES}
    except ImportError:
        known = {}
    made: dict[tuple[str, tuple[str, ...]], type] = {}

    def build(name: str, fields: dict) -> Any:
        cls = known.get(name)
        if cls is not None:
            return cls(**fields)
        key = (name if name.isidentifier() else "Result", tuple(k for k in fields if k.isidentifier()))
        if key not in made:
            made[key] = dataclasses.make_dataclass(key[0], list(key[1]), frozen=True)
        return made[key](**{k: fields[k] for k in key[1]})

    return build


class _DefaultText:
    """A default value that could not cross the boundary, shown by its repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _signature(params: list[dict], returns: str | None = None) -> inspect.Signature:
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in params:
        kwargs: dict[str, Any] = {}
        if "default" in p:
            kwargs["default"] = p["default"]
        elif "default_repr" in p:
            kwargs["default"] = _DefaultText(str(p["default_repr"]))
        if p.get("annotation"):
            kwargs["annotation"] = p["annotation"]
        parameters.append(inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]), **kwargs))
    if returns is None:
        return inspect.Signature(parameters)
    return inspect.Signature(parameters, return_annotation=returns)


class _ReadOnlyClass(type):
    def __setattr__(cls, name: str, value: Any) -> None:
        raise AttributeError(f"robo is read-only: {name!r} cannot be assigned")

    def __delattr__(cls, name: str) -> None:
        raise AttributeError(f"robo is read-only: {name!r} cannot be deleted")


def build_proxy(manifest: dict, request: Callable[[str, str, tuple, dict], Any]) -> Any:
    """The robo proxy instance for ``manifest``; ``request(op, name, args, kwargs)`` does the round trip."""
    class_name = str(manifest.get("class", "Robo"))
    body: dict[str, Any] = {"__doc__": manifest.get("doc"), "__module__": "robo", "__slots__": ()}

    def make_method(name: str, entry: dict) -> Callable[..., Any]:
        def method(self, *args, **kwargs):
            return request("call", name, args, kwargs)

        method.__name__ = name
        method.__qualname__ = f"{class_name}.{name}"
        method.__doc__ = entry.get("doc")
        method.__signature__ = _signature(entry.get("params", []), entry.get("returns"))
        return method

    def make_property(name: str, entry: dict) -> property:
        return property(lambda self: request("get", name, (), {}), doc=entry.get("doc"))

    for entry in manifest.get("members", []):
        name = entry["name"]
        if name.startswith("_"):
            continue
        if entry["kind"] == "method":
            body[name] = make_method(name, entry)
        elif entry["kind"] == "property":
            body[name] = make_property(name, entry)
        else:
            body[name] = entry.get("value")

    def __setattr__(self, name, value):
        raise AttributeError(f"robo is read-only: {name!r} cannot be assigned")

    def __delattr__(self, name):
        raise AttributeError(f"robo is read-only: {name!r} cannot be deleted")

    def __repr__(self):
        return f"<robo: {class_name}>"

    body.update(__setattr__=__setattr__, __delattr__=__delattr__, __repr__=__repr__)
    cls = _ReadOnlyClass(class_name, (), body)
    return cls()
