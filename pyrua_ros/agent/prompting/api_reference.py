"""The API reference of the live ``robo`` class, rendered with ``inspect`` the way PyRUA-Lean lays it out
(PYRUALEAN-CONTRACT.md 3.9): ``class Name`` and its docstring, ``Constants:``, ``Methods and attributes of `robo`:``
(every public member in definition order, one-line signatures up to 88 characters), ``Result types ...`` and the
``Exceptions:`` block. Under the no-VLA primitive set the ``VLA_PRIMITIVES`` and the result types only they return
are left out. Never a hand-kept copy: ``test_prompt_facts`` fails when the text and the code drift apart.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Sequence
from typing import Any

from pyrua_ros.robo.arguments import MAX_PLANAR_MOVE_M
from pyrua_ros.robo.errors import EPISODE_END_REASONS
from pyrua_ros.settings.modes import PRIMITIVE_SETS

REFERENCE_HEADING = "# API reference (the `robo` object)"
SINGLE_SHOT_REFERENCE_HEADING = "# API reference (generated from the library the host injects)"
WRAP_WIDTH = 88
ALWAYS_HIDDEN = frozenset({"ledger", "backend"})
MEMBERS_HEADING = "Methods and attributes of `robo`:"
RESULTS_HEADING = "Result types (frozen dataclasses; access fields as attributes):"


def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


def format_annotation(annotation: Any) -> str:
    """Readable text of an annotation: strings as written, classes by name, generics without module paths."""
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__qualname__
    text = repr(annotation)
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)


def _format_parameter(param: inspect.Parameter) -> str:
    prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(param.kind, "")
    text = prefix + param.name
    annotation = format_annotation(param.annotation)
    if annotation:
        text += f": {annotation}"
    if param.default is not inspect.Parameter.empty:
        text += f" = {param.default!r}" if annotation else f"={param.default!r}"
    return text


def _wrap_call(head: str, parts: Sequence[str], tail: str) -> str:
    """``head(a, b)tail`` when ``head(a, b)`` fits WRAP_WIDTH, else one part per line indented by 4."""
    one_line = f"{head}({', '.join(parts)}){tail}"
    if len(one_line) <= WRAP_WIDTH:
        return one_line
    body = "".join(f"    {part},\n" for part in parts)
    return f"{head}(\n{body}){tail}"


def format_signature(name: str, func: Any, *, drop_first: bool = True) -> str:
    """``name(params) -> ret`` of a function, ``*`` before keyword-only parameters and ``/`` after
    positional-only ones; ``drop_first`` removes ``self``/``cls``."""
    signature = inspect.signature(func)
    params = list(signature.parameters.values())
    if drop_first and params:
        params = params[1:]
    parts: list[str] = []
    star_written = False
    for index, param in enumerate(params):
        if param.kind is inspect.Parameter.KEYWORD_ONLY and not star_written:
            parts.append("*")
            star_written = True
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            star_written = True
        parts.append(_format_parameter(param))
        next_kind = params[index + 1].kind if index + 1 < len(params) else None
        if param.kind is inspect.Parameter.POSITIONAL_ONLY and next_kind is not inspect.Parameter.POSITIONAL_ONLY:
            parts.append("/")
    returns = format_annotation(signature.return_annotation)
    return _wrap_call(name, parts, f" -> {returns}" if returns else "")


def _indent(text: str | None, prefix: str = "    ") -> str:
    if not text:
        return ""
    return "\n".join((prefix + line) if line.strip() else "" for line in text.splitlines())


def _own_docstring(cls: type) -> str | None:
    """The class's own docstring, None when absent or the one ``dataclasses`` generates (``Name(field, ...)``)."""
    doc = cls.__dict__.get("__doc__")
    if not doc or doc.startswith(cls.__name__ + "("):
        return None
    return inspect.cleandoc(doc)


def _is_classvar(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        annotation = inspect.get_annotations(klass).get(name)
        if annotation is not None:
            return "ClassVar" in format_annotation(annotation) or "ClassVar" in str(annotation)
    return False


@dataclasses.dataclass(frozen=True)
class Member:
    """One public entry of a class: ``kind`` is ``constant``, ``property`` or ``method``; ``obj`` is the raw
    attribute (value, property object or function)."""

    name: str
    kind: str
    obj: Any

    @property
    def function(self) -> Any:
        """The function whose signature and docstring describe the member (None for a constant)."""
        if self.kind == "property":
            return self.obj.fget
        if self.kind == "method":
            return getattr(self.obj, "__func__", self.obj)
        return None


def public_members(cls: type, *, hidden: Sequence[str] = ()) -> list[Member]:
    """Public constants, properties and methods of ``cls`` in definition order, base classes first; names
    starting with ``_``, ``ledger``/``backend``, ``hidden`` and ``ClassVar`` constants are left out. An
    override keeps the base position and takes the most derived definition."""
    skip = ALWAYS_HIDDEN | set(hidden)
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        for name in vars(klass):
            if name.startswith("_") or name in skip or name in names:
                continue
            names.append(name)
    members = []
    for name in names:
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, property):
            members.append(Member(name, "property", attr))
        elif isinstance(attr, staticmethod | classmethod) or inspect.isfunction(attr):
            members.append(Member(name, "method", attr))
        elif name.isupper() and not _is_classvar(cls, name):
            members.append(Member(name, "constant", attr))
    return members


class LiveDocs:
    """Docstrings as the live classes define them (the default source of the reference's text)."""

    origin = "live"

    def class_doc(self, cls: type) -> str | None:
        return inspect.getdoc(cls)

    def member_doc(self, cls: type, member: Member) -> str | None:
        return inspect.getdoc(member.function)

    def result_doc(self, cls: type) -> str | None:
        return _own_docstring(cls)

    def property_doc(self, cls: type, name: str, fget: Any) -> str | None:
        return inspect.getdoc(fget)

    def exceptions(self, reasons: Sequence[str], planar_limit_m: float) -> str:
        return exceptions_block(reasons, planar_limit_m)

    def no_vla_edits(self, cls: type) -> tuple[tuple[str, str], ...]:
        return ()


def exceptions_block(reasons: Sequence[str], planar_limit_m: float) -> str:
    """The ``Exceptions:`` block: the three exceptions a policy meets, one indented line each."""
    return ("Exceptions:\n"
            "    ToolError(RuntimeError): the robot refused a call or could not serve it (text \"<tool>: "
            "<message>\"); catch it where you have a fallback.\n"
            f"    ValueError: a bad argument (e.g. a move longer than {planar_limit_m:.2f} m in x/y); nothing was "
            "sent to the robot.\n"
            f"    EpisodeFinished(BaseException): the episode is over (reason: {' | '.join(reasons)}); stop and "
            "finish.")


def _render_member(var: str, member: Member, doc: str | None) -> str:
    if member.kind == "property":
        returns = format_annotation(inspect.signature(member.obj.fget).return_annotation)
        head = f"{var}.{member.name}" + (f" -> {returns}" if returns else "") + "  (read-only attribute)"
    else:
        drop_first = not isinstance(member.obj, staticmethod)
        head = format_signature(f"{var}.{member.name}", member.function, drop_first=drop_first)
    return head + ("\n" + _indent(doc) if doc else "")


def render_result_type(cls: type, docs: LiveDocs | None = None) -> str:
    """``class Name(field: type, ...)``, its docstring indented by 4 and its public properties as
    ``    .name -> type: doc``."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass; result types must be frozen dataclasses")
    docs = docs or LiveDocs()
    fields = [f"{f.name}: {format_annotation(f.type)}" for f in dataclasses.fields(cls)]
    lines = [_wrap_call(f"class {cls.__name__}", fields, "")]
    doc = docs.result_doc(cls)
    if doc:
        lines.append(_indent(doc))
    for name, attr in vars(cls).items():
        if isinstance(attr, property) and not name.startswith("_"):
            returns = format_annotation(inspect.signature(attr.fget).return_annotation)
            text = " ".join((docs.property_doc(cls, name, attr.fget) or "").split())
            lines.append(f"    .{name} -> {returns}: {text}")
    return "\n".join(lines)


def _returned_names(members: Sequence[Member]) -> set[str]:
    names: set[str] = set()
    for member in members:
        if member.kind != "constant":
            returns = format_annotation(inspect.signature(member.function).return_annotation)
            names.update(re.findall(r"[A-Za-z_]\w*", returns))
    return names


def effective_primitives(target: Any, requested: str | None = None) -> str:
    """The primitive set a class or instance really offers: ``no-vla`` when it declares ``VLA_PRIMITIVES`` but
    none of them is a member of its class (the live robot decides, whatever was requested), else ``requested``
    (default ``full``)."""
    if requested is not None:
        _check_choice("primitives", requested, PRIMITIVE_SETS)
    cls = target if isinstance(target, type) else type(target)
    vla = tuple(getattr(cls, "VLA_PRIMITIVES", ()))
    if vla and not any(hasattr(cls, name) for name in vla):
        return "no-vla"
    return requested or "full"


def _reachable_types(members: Sequence[Member], result_types: Sequence[type]) -> list[type]:
    """Result types named by the members' return annotations, plus those named by the fields of those."""
    by_name = {t.__name__: t for t in result_types}
    keep = _returned_names(members) & set(by_name)
    frontier = set(keep)
    while frontier:
        names: set[str] = set()
        for name in frontier:
            for field in dataclasses.fields(by_name[name]):
                names.update(re.findall(r"[A-Za-z_]\w*", format_annotation(field.type)))
        frontier = (names & set(by_name)) - keep
        keep |= frontier
    return [t for t in result_types if t.__name__ in keep]


def _episode_reasons() -> tuple[str, ...]:
    return EPISODE_END_REASONS


def _planar_limit() -> float:
    return MAX_PLANAR_MOVE_M


def render_reference(target: Any, result_types: Sequence[type] | None = None, *, primitives: str | None = None,
                     var: str = "robo", docs: LiveDocs | None = None) -> str:
    """The API reference of a robot class or instance (see the module docstring).

    ``result_types`` defaults to the class's ``RESULT_TYPES`` or its module's. ``primitives`` defaults to what
    the class offers (``effective_primitives``); under ``no-vla`` the class's ``VLA_PRIMITIVES`` are hidden and
    only the result types some rendered member returns (directly or through a field) are kept. ``docs`` supplies
    the text (default: the live docstrings; a :class:`~pyrua_ros.agent.prompting.reference_source.ReferenceDocs`
    gives the
    reference's own).
    """
    cls = target if isinstance(target, type) else type(target)
    docs = docs or LiveDocs()
    primitives = effective_primitives(target, primitives)
    if result_types is None:
        result_types = getattr(cls, "RESULT_TYPES", None) or getattr(inspect.getmodule(cls), "RESULT_TYPES", ())
    hidden = tuple(getattr(cls, "VLA_PRIMITIVES", ())) if primitives == "no-vla" else ()
    members = public_members(cls, hidden=hidden)
    if primitives == "no-vla":
        result_types = _reachable_types(members, result_types)
    # under no-vla the class text comes from the nearest base without the skills (its docstring omits them)
    doc_cls = next((k for k in cls.__mro__ if k is not object and not any(hasattr(k, n) for n in hidden)), cls)
    sections = [f"class {cls.__name__}" + ("\n" + _indent(docs.class_doc(doc_cls)) if docs.class_doc(doc_cls)
                                           else "")]
    constants = [m for m in members if m.kind == "constant"]
    if constants:
        sections.append("Constants:\n" + "\n".join(f"    {var}.{m.name} = {m.obj!r}" for m in constants))
    rendered = [_render_member(var, m, docs.member_doc(cls, m)) for m in members if m.kind != "constant"]
    sections.append(MEMBERS_HEADING + "\n\n" + "\n\n".join(rendered))
    if result_types:
        sections.append(RESULTS_HEADING + "\n\n" + "\n\n".join(render_result_type(t, docs) for t in result_types))
    sections.append(docs.exceptions(_episode_reasons(), _planar_limit()))
    text = "\n\n".join(sections)
    if primitives == "no-vla":
        for old, new in docs.no_vla_edits(cls):
            if text.count(old) == 1:
                text = text.replace(old, new)
    return text


def undocumented_members(cls: type) -> list[str]:
    """Public methods/properties with no docstring or a missing annotation (the reference would be silent)."""
    problems = []
    for member in public_members(cls):
        if member.kind == "constant":
            continue
        func = member.function
        if not inspect.getdoc(func):
            problems.append(f"{member.name}: no docstring")
        signature = inspect.signature(func)
        if signature.return_annotation is inspect.Parameter.empty:
            problems.append(f"{member.name}: no return annotation")
        for param in list(signature.parameters.values())[1:]:
            if param.annotation is inspect.Parameter.empty:
                problems.append(f"{member.name}: parameter {param.name} has no annotation")
    return problems
