"""The prompt a model reads: arm contract + API reference of the live ``robo`` class + knowledge + task card.

Laid out as PyRUA-Lean lays it out (PYRUALEAN-CONTRACT.md 3.8, 3.9, 4.3), because the seed model was trained on
that layout: the parts joined by blank lines in the order contract, ``# API reference (the `robo` object)`` +
reference, knowledge, task card. The reference is generated from the live class with ``inspect`` (never a
hand-kept copy): ``class Name`` and the indented class docstring, ``Constants:`` with indented ``robo.X = value``
lines (uppercase, not ``ClassVar``), ``Methods and attributes of `robo`:`` with every public member in definition
order (base classes first; a property as ``robo.name -> type  (read-only attribute)``; a signature on one line when
it fits in 88 characters, else one parameter per line), ``Result types (frozen dataclasses; access fields as
attributes):`` with ``class Name(field: type, ...)``, its docstring and its properties as ``    .name -> type:
doc``, and the ``Exceptions:`` block. Under the no-VLA primitive set the ``VLA_PRIMITIVES`` and the result types
only they return are left out.

Every fact the contract states is generated from the code that enforces it (the tool names, the names predefined
in the kernel, the cameras, the import allow-list, the rich-feedback limit, the finish statuses, the planar move
limit, the episode-end reasons, the guide names); ``test_prompt_facts`` fails when they drift apart. With
``reference_root`` (``--reference-root`` / ``$PYRUALEAN_REFERENCE_ROOT``) the docstrings, the exceptions block,
the contract templates and the knowledge file come from the user's PyRUA-Lean sources instead (parsed, never
imported: :mod:`pyrua_ros.agent.prompting.reference_source`), laid out the same way, so the model sees its training
prompt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.agent.records.records import CardRecord
from pyrua_ros.agent.settings.config import REFERENCE_ROOT_ENV
from pyrua_ros.agent.settings.modes import (
    FEEDBACK_MODES,
    FINISH_STATUSES,
    IMAGE_POLICIES,
    PRIMITIVE_SETS,
    RICH_CALL_LIMIT,
)
from pyrua_ros.agent.settings.modes import PROMPT_ARMS as ARMS

PACKAGE_DIR = Path(__file__).resolve().parents[2]
KNOWLEDGE_DIR = PACKAGE_DIR / "knowledge"
GUIDES_DIR = PACKAGE_DIR / "guides"
GUIDE_NAMES = ("strict_hybrid_guide.md", "pro_hybrid_guide.md", "env_calibration.md")
GUIDE_TOPICS = {   # what each guide covers, for the guides note
    "strict_hybrid_guide.md": "rules, localisation, command vocabulary, common failure modes",
    "pro_hybrid_guide.md": "LIBERO-PRO scene frames and perturbation gotchas",
    "env_calibration.md": "reachable workspace and reference heights",
}
RPENT_GUIDES_SUBDIR = ("robots", "libero", "guides")

REFERENCE_HEADING = "# API reference (the `robo` object)"
SINGLE_SHOT_REFERENCE_HEADING = "# API reference (generated from the library the host injects)"
NO_TOOLS_NOTE = "\n\nAnswer with the program directly. Do not run commands and do not create or read files."
WRAP_WIDTH = 88
ALWAYS_HIDDEN = frozenset({"ledger", "backend"})
MEMBERS_HEADING = "Methods and attributes of `robo`:"
RESULTS_HEADING = "Result types (frozen dataclasses; access fields as attributes):"
# Modules the sandbox sentence names: each must be importable in the kernel (or refused there, for the second
# list); test_prompt_facts checks both against the kernel's allow-list.
NAMED_MODULES = ("numpy", "math", "time", "json", "re", "PIL")
NAMED_REFUSED_MODULES = ("os", "sys", "subprocess", "pathlib", "socket")


def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


def _code_list(names: Sequence[str], last: str = "and") -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" {last} " + quoted[-1]


# --------------------------------------------------------------------------------------------------------------
# API reference rendering (generic: any class plus its frozen result dataclasses)
# --------------------------------------------------------------------------------------------------------------

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
    from pyrua_ros.robo.errors import EPISODE_END_REASONS

    return EPISODE_END_REASONS


def _planar_limit() -> float:
    from pyrua_ros.robo.arguments import MAX_PLANAR_MOVE_M

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


# --------------------------------------------------------------------------------------------------------------
# Arm contracts (the reference's headings and rules, our wording, every fact generated)
# --------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RobotWording:
    """How the contracts name a robot: ``blurb`` (what is controlled), ``services`` / ``services_novla`` (what
    stands behind ``robo``), the cameras ``robo.show`` accepts."""

    blurb: str
    services: str
    services_novla: str
    cameras: tuple[str, ...]


def _libero_cameras() -> tuple[str, ...]:
    from pyrua_ros.robo.libero import LiberoRobot

    return tuple(LiberoRobot.CAMERAS)


ROBOT_WORDING = {
    "libero": RobotWording(
        blurb="a simulated Franka arm in the LIBERO benchmark",
        services="a frozen Pi0.5 VLA and a segmentation service",
        services_novla="a segmentation service",
        cameras=_libero_cameras(),
    ),
}


@dataclasses.dataclass(frozen=True)
class PromptOptions:
    """Everything that changes the prompt. ``budget_s`` wall clock [s]; ``max_turns`` switches to the decision
    budget (its number is not told to the model); ``max_programs`` caps ``run_program`` calls; ``reference_root``
    a PyRUA-Lean checkout or installed package whose sources supply the text (parsed, not imported)."""

    arm: str = "cells"
    robot: str = "libero"
    primitives: str = "full"
    feedback: str = "rich"
    images: str = "on-motion"
    budget_s: float = 1200.0
    max_turns: int | None = None
    max_programs: int | None = None
    guides: bool = False
    transfer: bool = False
    reference_root: str | None = None

    def __post_init__(self) -> None:
        _check_choice("arm", self.arm, ARMS)
        _check_choice("robot", self.robot, tuple(ROBOT_WORDING))
        _check_choice("primitives", self.primitives, PRIMITIVE_SETS)
        _check_choice("feedback", self.feedback, FEEDBACK_MODES)
        _check_choice("images", self.images, IMAGE_POLICIES)
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer or None; got {self.max_turns!r}")
        if self.max_programs is not None and self.max_programs < 1:
            raise ValueError(f"max_programs must be a positive integer or None; got {self.max_programs!r}")

    @property
    def budget_mode(self) -> str:
        """``calls`` when a decision budget is set, else ``wall``."""
        return "calls" if self.max_turns is not None else "wall"

    @property
    def tool(self) -> str:
        """The arm's tool as the contract names it (the tools arm: one tool per primitive)."""
        return {"cells": "python", "program": "run_program"}.get(self.arm, "robot tool")


def kernel_names() -> tuple[str, ...]:
    """The names the kernel defines before the first cell (its namespace, in order)."""
    from pyrua_ros.agent.kernel.policy import PREDEFINED_NAMES

    return PREDEFINED_NAMES


def sandbox_sentence(arm: str) -> str:
    """What the sandbox allows, from the kernel's allow-list and blocked names."""
    from pyrua_ros.agent.kernel.policy import ALLOWED_MODULES, REFERENCE_BLOCKED_NAMES

    allowed = [m for m in NAMED_MODULES if m in ALLOWED_MODULES]
    refused = [m for m in NAMED_REFUSED_MODULES if m not in ALLOWED_MODULES]
    internals = [n for n in ("__globals__", "__subclasses__") if n in REFERENCE_BLOCKED_NAMES]
    where = "your workspace" if arm == "cells" else "the workspace"
    return (f"you may import {_code_list(allowed)} and other pure-computation modules, but not "
            f"{_code_list(refused, 'or')} or networking, and `open` only works inside {where}; code that reaches "
            f"for Python internals ({', '.join(f'`{n}`' for n in internals)}, ...) is refused.")


def _feedback_note(options: PromptOptions) -> str:
    if options.arm == "tools":
        produced = ("the call number, the tool name, `value` (the method's result object as JSON, e.g. "
                    "`{\"type\": \"Move\", \"reached\": true, ...}`) or the `exception` text or `episode_finished`, "
                    "and elapsed seconds")
        if options.feedback == "pure":
            return f"A tool result holds only what the call produced: {produced}."
        return (f"A tool result holds {produced}; it also lists the robot calls made (the last {RICH_CALL_LIMIT}), "
                "whether the robot moved, the simulator steps used and the robot state.")
    unit = "your code" if options.arm == "cells" else "the program"
    value = ", and the value of a trailing expression" if options.arm == "cells" else ""
    if options.feedback == "pure":
        return (f"The tool returns exactly what {unit} produced: stdout, stderr, the exception if any{value}. "
                "Nothing else is added, so print what you want to know (for example `print(robo.state())` or a "
                "motion result).")
    return (f"The tool returns stdout, stderr, the exception if any{value}, the primitive calls made during the "
            f"call (the last {RICH_CALL_LIMIT}) and the robot state.")


def _image_note(options: PromptOptions) -> str:
    cameras = ROBOT_WORDING[options.robot].cameras
    if options.arm == "tools":
        if options.images == "on-motion":
            return (f"After every tool call that moved the robot, the current {' and '.join(cameras)} images are "
                    "attached.")
        if options.images == "on-demand":
            shows = " / ".join(f"`show(camera=\"{c}\")`" for c in cameras)
            return (f"No camera image is attached unless you ask for one: {shows} attaches that camera's current "
                    "image to its result. Images cost context: look when it matters.")
        return "Camera images are never attached; perceive with `segment`, `back_project` and `region_center`."
    if options.images == "on-motion":
        return (f"Whenever the robot moved during the call, the current {' and '.join(cameras)} images are attached "
                "as well. Write short calls when you need to look before deciding, and loops when you do not.")
    if options.images == "on-demand":
        shows = " or ".join(f"`robo.show('{c}')`" for c in cameras)
        return (f"Images are NOT attached on their own: call {shows} to see a current camera view, or "
                "`display(image)` to show any image array you made (a crop, an overlay, a view you kept), when you "
                "need to look before the next call. Prefer calls that carry out several steps with checks in code "
                "(segment, back_project, gripper opening, `Move.reached`) and look only when a decision depends on "
                "the picture.")
    return "Camera images are never attached; rely on the returned results and state."


def _ending_note(options: PromptOptions, max_env_steps: int) -> str:
    if options.budget_mode == "calls" and options.arm == "tools":
        return ("- The number of robot tool calls (every tool but `finish`) is limited, and every call counts, also "
                f"calls that only look; the episode also ends after {max_env_steps} simulator steps. Either limit "
                "counts as a failure.")
    if options.budget_mode == "calls":
        return (f"- The number of `{options.tool}` calls in an episode is limited (every call counts, also calls "
                f"that only look, print or display); the episode also ends after {max_env_steps} simulator steps. "
                "Either limit counts as a failure, so make every call do useful work and check results in code.")
    return (f"- The episode ends after {options.budget_s:g} s of wall clock in all (your thinking included) or "
            f"{max_env_steps} simulator steps; either counts as a failure.")


def _program_budget(options: PromptOptions) -> str:
    if options.max_programs == 1:
        return ("You may call it EXACTLY ONCE: there is no second attempt and no feedback before it runs, so the "
                "program must localise, verify and recover on its own.")
    if options.max_programs:
        return f"You may call it at most {options.max_programs} times; use the feedback between calls."
    return "You may call it as many times as the budget allows."


def guides_note() -> str:
    """The note on ``guides/`` (names and topics from GUIDE_NAMES)."""
    listed = ", ".join(f"`{name}` ({GUIDE_TOPICS[name]})" for name in GUIDE_NAMES)
    return (f"Reference guides: `guides/` in your working directory holds the three operating guides the "
            f"tool-calling version of this system reads, written for its tool interface: {listed}. Their tool "
            "names are the `robo` methods of the same name; remarks about the runner, MCP or servers do not "
            "apply here. Reading them is optional.")


def contract_text(options: PromptOptions, *, class_name: str, max_env_steps: int) -> str:
    """The arm contract: how the robot is controlled, then how the episode is scored (the reference's headings)."""
    wording = ROBOT_WORDING[options.robot]
    services = wording.services if options.primitives == "full" else wording.services_novla
    if options.arm == "single-shot":
        return _single_shot_contract(options, class_name=class_name, services=services)
    statuses = [s for s in FINISH_STATUSES if s != "success"]
    if options.arm == "cells":
        control = (f"You control {wording.blurb} through ONE tool, `python(code)`. Each call runs your code in a "
                   f"persistent Python session (like a notebook): `robo` (a `{class_name}` bound to the live "
                   f"simulator, {services}), {_code_list([n for n in kernel_names() if n not in ('robo', 'numpy')])}"
                   " are predefined, and every variable, function or import you create stays available in later "
                   "calls: helpers you define once can be called in any later call without defining or importing "
                   f"them again. {_feedback_note(options)}\n{_image_note(options)}\n"
                   f"The session is sandboxed: {sandbox_sentence('cells')}")
        scored_extra = ""
    elif options.arm == "tools":
        control = (f"You control {wording.blurb} through one tool per robot primitive: each method of `robo` "
                   f"documented below (a `{class_name}` bound to the live simulator, {services}) is a tool of the "
                   "same name whose arguments are the method's parameters, passed by name as JSON (e.g. "
                   "`move_to(xyz=[0.1, 0.2, 1.0], gripper=1.0)`; defaults apply to what you leave out). Each call "
                   "runs that one method on the robot and returns its result. There is no code execution: "
                   "arithmetic between calls is yours to do. Constants: `OPEN` = -1.0 and `CLOSE` = 1.0 (the "
                   f"gripper values). {_feedback_note(options)}\n{_image_note(options)}")
        scored_extra = ""
    else:
        control = (f"You control {wording.blurb} through ONE tool, `run_program`. Each call runs a complete Python "
                   "program that defines `run(robo)`: pass the whole source as `code`, or write a `.py` file into "
                   f"your working directory and pass its `path`. `robo` is a `{class_name}` bound to the live "
                   f"simulator, {services}. Every program starts from a fresh namespace (workspace files persist "
                   "and can be imported); no language model runs while a program executes, so every decision in it "
                   f"is made in code from the return values documented below. {_feedback_note(options)} "
                   f"{_image_note(options)}\n{_program_budget(options)}\n"
                   f"Programs run in a sandbox: {sandbox_sentence('program')}")
        scored_extra = "\n  A program that raises stops there; the episode goes on with the robot where it stopped."
    scored = [
        "- Success = the benchmark's own task predicate fires (`terminated`) at any moment"
        + (" while a program runs" if options.arm == "program" else "")
        + ". The simulator checks it, not you; motion results carry a `terminated` field and `robo.done` reports "
        "it.",
        _ending_note(options, max_env_steps) + scored_extra,
        f"- Once the task terminates, motion calls raise `EpisodeFinished`: call `finish(status=\"success\", ...)` "
        f"and stop. If you cannot make progress, call `finish` with {_code_list(statuses, 'or')}.",
    ]
    through = "these tools" if options.arm == "tools" else f"`{options.tool}`"
    workspace = ("Your working directory is a scratch workspace: keep notes or helper files there. Do not read "
                 f"files outside it and do not try to reach the simulator any other way; every action goes through "
                 f"{through}.")
    parts = ["# How you control the robot", control, "# How the episode is scored", "\n".join(scored), workspace]
    if options.guides:
        parts.append(guides_note())
    return "\n\n".join(parts)


def _single_shot_contract(options: PromptOptions, *, class_name: str, services: str) -> str:
    wording = ROBOT_WORDING[options.robot]
    return "\n\n".join([
        "# Task: write one policy program",
        (f"Write one Python file that defines `run(robo)`. The host builds `robo`, a `{class_name}` bound to "
         f"{wording.blurb} ({services}), and calls `run(robo)` exactly once. No language model runs while it "
         "executes and nothing is reported back before it ends, so the program must localise the objects, check "
         "its own progress and recover on its own."),
        ("Success means the benchmark's success check fires while `run` executes; the return value is ignored. "
         f"The run fails on an uncaught exception, when its wall-clock budget ({options.budget_s:g} s) runs out "
         "or when the simulator step budget runs out. Once the task is solved, motion calls raise "
         "`EpisodeFinished`: let it propagate, or return."),
        ("Output format: the complete `policy.py` in a single fenced code block tagged `python`. Import only "
         "math, time and numpy (as np); no file reads, no threads. Print short progress lines."),
    ])


# --------------------------------------------------------------------------------------------------------------
# Task card, knowledge, guides, the joined prompt
# --------------------------------------------------------------------------------------------------------------

def render_card(card: CardRecord, *, transfer: bool | None = None) -> str:
    """The task card in the reference's LIBERO layout (PYRUALEAN-CONTRACT.md 3.8); ``transfer`` defaults to the
    card's."""
    transfer = card.transfer if transfer is None else transfer
    eef = ", ".join(f"{float(v):.3f}" for v in card.eef_pos)
    lines = [
        "# Task card",
        f"- suite: {card.suite}",
        f"- task: {card.task}",
        f"- seed: {card.seed}",
        f"- task instruction (authoritative): {card.task_language!r}",
        f"- movable objects in the scene: {', '.join(card.object_names)}",
        f"- initial gripper position [x, y, z]: [{eef}] m, opening {card.gripper_opening:.3f} (open, pointing down)",
    ]
    lines.extend(f"- {key}: {value}" for key, value in card.facts.items())
    lines.append(f"- simulator step budget: {card.max_env_steps}")
    if card.images:
        names = ", ".join(f"{camera} ({Path(path).name})" for camera, path in card.images.items())
        if transfer:
            lines.append(f"- attached images: {names}. They show ONE example layout (seed {card.seed}) of this "
                         "task; your program will run on OTHER seeds, where objects stand elsewhere, so use them "
                         "only to learn what the objects look like. Do not hard-code pixels or positions read off "
                         "them; localise at run time with `robo.segment`, `robo.back_project`, `robo.region_center` "
                         "and `robo.world_map`.")
        else:
            first = next(iter(card.images))
            lines.append(f"- attached images: {names}. They are step 0 of your run, exactly what "
                         + " / ".join(f"`robo.image('{c}')`" for c in card.images)
                         + f" return before any motion; a pixel (row, col) read off the {first} image turns into "
                         "world coordinates at run time with `robo.back_project(row, col, step=0)`.")
    return "\n".join(lines)


def knowledge_text(robot: str = "libero", primitives: str = "full", *, reference_root: str | None = None) -> str:
    """The robot's knowledge file: ``knowledge/<robot>.md``, or ``<robot>-novla.md`` for the no-VLA set; from the
    reference's package when ``reference_root`` is given and has it."""
    _check_choice("robot", robot, tuple(ROBOT_WORDING))
    _check_choice("primitives", primitives, PRIMITIVE_SETS)
    name = f"{robot}.md" if primitives == "full" else f"{robot}-novla.md"
    if reference_root:
        from pyrua_ros.agent.prompting.reference_source import ReferenceSource

        text = ReferenceSource.locate(reference_root).knowledge(name)
        if text is not None:
            return text.strip()
    return (KNOWLEDGE_DIR / name).read_text(encoding="utf-8").strip()


def rpent_guides_dir(rpent_root: str | os.PathLike | None = None) -> Path | None:
    """``$RPENT_ROOT/robots/libero/guides`` when RPENT_ROOT (or ``rpent_root``) is set and holds the three guides."""
    root = rpent_root or os.environ.get("RPENT_ROOT") or os.environ.get("RPENT_REPO_ROOT")
    if not root:
        return None
    folder = Path(root).joinpath(*RPENT_GUIDES_SUBDIR)
    return folder if all((folder / name).is_file() for name in GUIDE_NAMES) else None


def copy_guides(workspace: Path, source_dir: Path | None = None, *, rpent_root: str | None = None) -> dict[str, Any]:
    """Copy the guides into ``workspace/guides/`` and return ``result.json``'s ``guides`` entry
    ``{source, files: {name: sha256}}``: every ``*.md`` of ``source_dir`` when given, else the three guides of
    RPent (``$RPENT_ROOT/robots/libero/guides``, as the reference copies them) when it has them, else ours."""
    if source_dir is not None:
        sources = sorted(Path(source_dir).glob("*.md"))
        source = str(source_dir)
        if not sources:
            raise ValueError(f"guides dir {source_dir} holds no *.md files")
    else:
        folder = rpent_guides_dir(rpent_root) or GUIDES_DIR
        sources = [folder / name for name in GUIDE_NAMES]
        source = str(folder)
    target = Path(workspace) / "guides"
    target.mkdir(parents=True, exist_ok=True)
    files = {}
    for path in sources:
        shutil.copyfile(path, target / path.name)
        files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"source": source, "files": files}


@dataclasses.dataclass(frozen=True)
class PromptBundle:
    """A built prompt: ``system`` (contract + reference + knowledge), ``user`` (task card), ``images`` (paths of
    the card images, attached to the first message), ``primitives`` (the set the prompt describes), ``sources``
    (where the text came from: ``live`` or the reference root). ``text`` is the whole prompt as one string."""

    system: str
    user: str
    images: tuple[str, ...] = ()
    primitives: str = "full"
    sources: str = "live"

    @property
    def text(self) -> str:
        """System and user parts joined by a blank line (the play prompt, written to ``prompt.txt``)."""
        return "\n\n".join(p for p in (self.system, self.user) if p)

    @property
    def chars(self) -> int:
        """Length of ``text`` in characters."""
        return len(self.text)

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of ``text`` (UTF-8)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def record(self) -> dict[str, Any]:
        """``result.json``'s ``prompt`` entry: ``{chars, sha256, images}``."""
        return {"chars": self.chars, "sha256": self.sha256, "images": list(self.images)}

    def messages(self) -> list[dict[str, str]]:
        """Chat messages: a system message (when there is a system part) and a user message."""
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return [*messages, {"role": "user", "content": self.user}]


def reference_root_from_env(value: str | None = None) -> str | None:
    """``value`` (``--reference-root``), else ``$PYRUALEAN_REFERENCE_ROOT``, else None."""
    return value or os.environ.get(REFERENCE_ROOT_ENV) or None


def build_prompt(robot: Any, card: CardRecord | None, options: PromptOptions, *,
                 card_dir: Path | None = None) -> PromptBundle:
    """Join contract, ``# API reference`` + the reference of ``robot`` (class or instance), knowledge and the
    rendered ``card`` with blank lines. ``card_dir`` resolves relative card image paths. Without a card only
    the system part is built. A robot whose class has no VLA skill gets the no-VLA prompt even when ``full``
    was requested (``bundle.primitives`` says which was used)."""
    cls = robot if isinstance(robot, type) else type(robot)
    primitives = effective_primitives(robot, options.primitives)
    if primitives != options.primitives:
        options = dataclasses.replace(options, primitives=primitives)
    max_env_steps = card.max_env_steps if card is not None else 10000
    heading = SINGLE_SHOT_REFERENCE_HEADING if options.arm == "single-shot" else REFERENCE_HEADING
    docs: LiveDocs = LiveDocs()
    contract = None
    if options.reference_root:
        from pyrua_ros.agent.prompting.reference_source import ReferenceDocs, ReferenceSource

        source = ReferenceSource.locate(options.reference_root)
        docs = ReferenceDocs(source)
        if options.arm != "single-shot":
            contract = source.contract(options, class_name=cls.__name__, max_env_steps=max_env_steps,
                                       wording=ROBOT_WORDING[options.robot])
    if contract is None:
        contract = contract_text(options, class_name=cls.__name__, max_env_steps=max_env_steps)
    reference = render_reference(robot, primitives=options.primitives, docs=docs)
    system = "\n\n".join([
        contract.rstrip(),
        heading + "\n\n" + reference.rstrip(),
        knowledge_text(options.robot, options.primitives, reference_root=options.reference_root),
    ])
    sources = "live" if docs.origin == "live" else str(docs.origin)
    if card is None:
        return PromptBundle(system=system, user="", primitives=primitives, sources=sources)
    images = tuple(str(Path(card_dir) / p) if card_dir is not None else str(p) for p in card.images.values())
    return PromptBundle(system=system, user=render_card(card, transfer=options.transfer), images=images,
                        primitives=primitives, sources=sources)
