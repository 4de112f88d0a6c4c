"""Recognise Qwen3 XML tool calls that arrive as text (a server without ``--tool-call-parser``).

Syntax (PYRUALEAN-CONTRACT.md 4b): ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function>
</tool_call>``, one block per call. Values are raw text; one leading and one trailing newline are dropped (the
way the model lays them out). A value whose schema type is not ``string`` is read as JSON when it parses.

Also splits thinking that arrives in ``content`` without a reasoning parser: Qwen3.5's template puts ``<think>``
in the prompt, so the generated text holds only ``</think>``; everything before it is the reasoning.
"""

from __future__ import annotations

import dataclasses
import re

from pyrua_ros.records import bounded

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)\s*>(.*?)(?:</function>|\Z)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)\s*>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)",
                        re.DOTALL)


@dataclasses.dataclass(frozen=True)
class XmlCall:
    """One recognised block: ``name`` ('' when missing), ``arguments``, and ``error`` when it is malformed."""

    name: str
    arguments: dict
    error: str | None


def has_xml_call(text: str | None) -> bool:
    return bool(text) and "<tool_call>" in text


def _strip_newlines(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _convert(value: str, schema_type: str | None):
    if schema_type in (None, "string"):
        return value
    try:
        return bounded.loads(value)   # (too deep, NaN or not JSON: the text itself, which the tool then refuses)
    except bounded.JSONRefused:
        return value


def parse_xml_calls(text: str, param_types: dict[str, dict[str, str]] | None = None) -> tuple[list[XmlCall], str]:
    """All ``<tool_call>`` blocks of ``text`` and the text with those blocks removed (stripped).

    ``param_types`` maps tool name -> {parameter: JSON schema type} for value conversion. A block without
    ``</tool_call>`` (e.g. cut by ``max_tokens``), without ``<function=...>`` or with an unterminated
    parameter yields an XmlCall with ``error`` set, so the loop can answer it with an error message.
    """
    calls: list[XmlCall] = []
    for block in _BLOCK.finditer(text):
        body = block.group(1)
        closed = block.group(0).endswith("</tool_call>")
        function = _FUNCTION.search(body)
        if function is None:
            calls.append(XmlCall("", {}, "malformed <tool_call>: no <function=NAME> element"))
            continue
        name = function.group(1)
        types = (param_types or {}).get(name, {})
        arguments = {}
        errors = []
        for param in _PARAMETER.finditer(function.group(2)):
            if not param.group(0).endswith("</parameter>"):
                errors.append(f"parameter {param.group(1)!r} has no </parameter>")
            arguments[param.group(1)] = _convert(_strip_newlines(param.group(2)), types.get(param.group(1)))
        if not closed:
            errors.append("the <tool_call> block has no </tool_call> (output cut off?)")
        calls.append(XmlCall(name, arguments, "malformed <tool_call>: " + "; ".join(errors) if errors else None))
    remainder = _BLOCK.sub("", text).strip()
    return calls, remainder


def split_think(content: str) -> tuple[str | None, str]:
    """(reasoning, rest) when ``content`` holds ``</think>``, else (None, content)."""
    head, sep, rest = content.partition("</think>")
    if not sep:
        return None, content
    return head.replace("<think>", "", 1).strip(), rest.strip()


def param_types_of(tools: list[dict]) -> dict[str, dict[str, str]]:
    """tool name -> {parameter: schema type} from chat-completions function specs."""
    table = {}
    for tool in tools:
        function = tool.get("function", {})
        props = function.get("parameters", {}).get("properties", {})
        table[function.get("name", "")] = {k: v.get("type") for k, v in props.items()}
    return table
