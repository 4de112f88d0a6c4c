"""The tools arm: one function tool per ``robo`` primitive, generated from the live class (never hand-copied).

This is the other side of the paper's A/B: instead of writing code cells, the model makes one tool call per
primitive, on the same robot, with the same ledger, records, budgets, images and success check.

- **Which methods.** The public methods of the live ``robo`` object's class (``prompt.public_members``, so the
  reference order and the no-VLA set follow the robot) whose return annotation is a result dataclass, a
  ``dict`` or ``None``: results that fit in a JSON tool result. ``image`` / ``world_map`` / ``artifact`` return
  pixels or bytes and are left out: a tool agent sees images through the ``--images`` policy (``show`` under
  ``on-demand``). Properties (``task``, ``done``) are in the task card and in every state.
- **Schemas.** Each parameter's JSON schema comes from its annotation (``float`` -> number, ``int`` ->
  integer, ``list[float]`` / ``tuple[int, int]`` -> arrays with their item types and lengths, ``X | None`` ->
  nullable) with its default; parameters without a default are required. The description is the method's
  docstring, so the tool text and the API reference of the cells arm are the same words.
- **Calls.** Arguments are passed by keyword to the real method, exactly as a cell's ``robo.<name>(**args)``
  would pass them through the kernel proxy, so a wrong argument gets the same error text (``ValueError: ...``,
  ``TypeError: ...``). Results are the result dataclass as a JSON object (``{"type": "Move", ...fields}``).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any

from pyrua_ros.agent.prompting.api_reference import public_members

#: Members that return pixels or raw bytes: served through the ``--images`` policy instead of as tools.
NOT_TOOLS = frozenset({"image", "world_map", "artifact"})

_SCALARS = {float: "number", int: "integer", str: "string", bool: "boolean"}


def _schema(annotation: Any) -> dict:
    """The JSON schema of one parameter annotation (unknown annotations accept any JSON value)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        inner = _schema(options[0]) if len(options) == 1 else {"anyOf": [_schema(a) for a in options]}
        if type(None) in args:
            if "type" in inner and isinstance(inner["type"], str):
                return {**inner, "type": [inner["type"], "null"]}
            return {"anyOf": [inner, {"type": "null"}]}
        return inner
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if origin in (list, tuple) or annotation in (list, tuple):
        schema: dict[str, Any] = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:
            item_schemas = [_schema(a) for a in args]
            if all(s == item_schemas[0] for s in item_schemas):
                schema["items"] = item_schemas[0]
            schema["minItems"] = schema["maxItems"] = len(args)
        elif args:
            schema["items"] = _schema(args[0])
        return schema
    if origin is dict or annotation is dict:
        return {"type": "object"}
    return {}


def _json_default(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


def _is_tool(member, result_types: tuple[type, ...]) -> bool:
    if member.kind != "method" or member.name in NOT_TOOLS:
        return False
    returns = inspect.signature(member.obj, eval_str=True).return_annotation
    return returns is None or returns in (dict, type(None)) or returns in result_types


def primitive_methods(robo: Any) -> list[str]:
    """Names of the live robot's methods that become tools, in the API reference's order."""
    cls = type(robo)
    result_types = tuple(getattr(cls, "RESULT_TYPES", ()))
    return [m.name for m in public_members(cls) if _is_tool(m, result_types)]


def primitive_spec(robo: Any, name: str) -> dict:
    """The chat-completions function spec of one primitive (JSON schema from the signature, docstring as text)."""
    func = getattr(type(robo), name)
    signature = inspect.signature(func, eval_str=True)
    properties: dict[str, dict] = {}
    required: list[str] = []
    for param in list(signature.parameters.values())[1:]:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        schema = _schema(param.annotation)
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        else:
            schema["default"] = _json_default(param.default)
        properties[param.name] = schema
    description = inspect.getdoc(func) or f"robo.{name}"
    return {"type": "function",
            "function": {"name": name, "description": description,
                         "parameters": {"type": "object", "properties": properties, "required": required,
                                        "additionalProperties": False}}}


def primitive_specs(robo: Any) -> list[dict]:
    """One function spec per primitive of the live robot."""
    return [primitive_spec(robo, name) for name in primitive_methods(robo)]


def result_json(value: Any) -> Any:
    """A primitive's return value as JSON-ready data: a result dataclass becomes ``{"type": Name, **fields}``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: result_json(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple | list):
        return [result_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): result_json(v) for k, v in value.items()}
    if hasattr(value, "tolist"):   # numpy scalars and small arrays
        return value.tolist()
    return value


def error_text(exc: BaseException) -> str:
    """``Type: message``, the last line the cells arm's traceback ends with for the same call."""
    names = [c.__name__ for c in type(exc).__mro__]
    kind = next((n for n in ("ToolError", "EpisodeFinished") if n in names), type(exc).__name__)
    return f"{kind}: {exc}"
