"""The prompt a model reads: arm contract + API reference of the live ``robo`` class + knowledge + task card.

The API reference is never a hand-kept copy: ``render_reference`` walks the class (or an instance) with
``inspect`` at prompt time (PYRUALEAN-CONTRACT.md 4.3): class docstring, uppercase constants that are not
``ClassVar``, public methods and properties in definition order (base classes first), signatures with
annotations and defaults (``*`` before keyword-only parameters, one parameter per line when the one-line form is
longer than 88 characters), docstrings indented by 4, the result dataclasses as ``class Name(field: type, ...)``
with their docstrings and public properties, and a fixed Exceptions section. Under the no-VLA primitive set the
class's ``VLA_PRIMITIVES`` and the result types only they return are left out.

``build_prompt`` joins the four parts with blank lines into a ``PromptBundle`` (``system`` = contract, reference
and knowledge; ``user`` = the task card) whose ``record()`` is ``result.json``'s ``prompt`` entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.agent.modes import FEEDBACK_MODES, IMAGE_POLICIES, PRIMITIVE_SETS
from pyrua_ros.agent.modes import PROMPT_ARMS as ARMS
from pyrua_ros.agent.records import CardRecord

PACKAGE_DIR = Path(__file__).resolve().parent.parent
KNOWLEDGE_DIR = PACKAGE_DIR / "knowledge"
GUIDES_DIR = PACKAGE_DIR / "guides"
GUIDE_NAMES = ("strict_hybrid_guide.md", "pro_hybrid_guide.md", "env_calibration.md")


REFERENCE_HEADING = "# API reference (the `robo` object)"
SINGLE_SHOT_REFERENCE_HEADING = "# API reference (generated from the library the host injects)"
NO_TOOLS_NOTE = "\n\nAnswer with the program directly. Do not run commands and do not create or read files."
WRAP_WIDTH = 88
ALWAYS_HIDDEN = frozenset({"ledger", "backend"})


def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


# --------------------------------------------------------------------------------------------------------------
# API reference rendering (generic: any class plus any frozen result dataclasses)
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


def _wrap_call(head: str, parts: Sequence[str], tail: str, indent: str = "") -> str:
    """``head(a, b) tail`` on one line when it fits WRAP_WIDTH, else one part per line (indented by 4)."""
    one_line = f"{head}({', '.join(parts)}){tail}"
    if len(indent + one_line) <= WRAP_WIDTH:
        return indent + one_line
    body = "".join(f"{indent}    {part},\n" for part in parts)
    return f"{indent}{head}(\n{body}{indent}){tail}"


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


def _docstring(obj: Any, indent: str) -> str:
    doc = inspect.cleandoc(obj) if isinstance(obj, str) else (inspect.getdoc(obj) if obj is not None else None)
    if not doc:
        return ""
    return "\n".join((indent + line) if line.strip() else "" for line in doc.splitlines())


def _own_docstring(cls: type) -> str | None:
    """The class's own docstring, None when absent or the one ``dataclasses`` generates (``Name(field, ...)``)."""
    doc = cls.__dict__.get("__doc__")
    if not doc or doc.startswith(cls.__name__ + "("):
        return None
    return doc


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


def _render_member(prefix: str, member: Member, indent: str = "") -> str:
    if member.kind == "property":
        returns = format_annotation(inspect.signature(member.obj.fget).return_annotation)
        access = "property" if member.obj.fset is not None else "read-only property"
        head = f"{indent}{prefix}{member.name}" + (f" -> {returns}" if returns else "") + f"  ({access})"
        doc_target = member.obj.fget
    else:
        func = member.obj
        drop_first = not isinstance(func, staticmethod)
        if isinstance(func, staticmethod | classmethod):
            func = func.__func__
        head = format_signature(prefix + member.name, func, drop_first=drop_first)
        head = "\n".join(indent + line for line in head.splitlines())
        doc_target = func
    doc = _docstring(doc_target, indent + "    ")
    return head + ("\n" + doc if doc else "")


def render_result_type(cls: type) -> str:
    """``class Name(field: type, ...)``, its docstring indented by 4 and its public properties."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass; result types must be frozen dataclasses")
    fields = [f"{f.name}: {format_annotation(f.type)}" for f in dataclasses.fields(cls)]
    lines = [_wrap_call(f"class {cls.__name__}", fields, "")]
    doc = _own_docstring(cls)
    if doc:
        lines.append(_docstring(doc, "    "))
    for member in public_members(cls):
        if member.kind == "property":
            lines.append(_render_member(f"{cls.__name__}.", member, indent="    "))
    return "\n".join(lines)


EXCEPTIONS_SECTION = """## Exceptions
- `ToolError` (a `RuntimeError`; attributes `tool`, `message`, `payload`; text "<tool>: <message>"): the robot side
  could not serve a call (no answer, a bad reply, a pixel without depth, an image of a step that was never viewed).
  A measured outcome (nothing found, a servo that stopped short, a lift that failed) is a result, never an error.
- `ValueError`: bad arguments (wrong camera name, non-finite target, a planar move that is too long, ...). It is
  raised before anything is sent to the robot, so the robot has not moved.
- `EpisodeFinished` (a `BaseException`, so `except Exception` does not catch it): the episode is over; every
  motion call raises it from then on, read-only calls keep working. Its `reason` is one of
  {reasons}."""


def _reasons_text() -> str:
    from pyrua_ros.robo.errors import EPISODE_END_REASONS

    return ", ".join(f"`{r}`" for r in EPISODE_END_REASONS)


def _returned_names(members: Sequence[Member]) -> set[str]:
    names: set[str] = set()
    for member in members:
        func = member.obj.fget if member.kind == "property" else getattr(member.obj, "__func__", member.obj)
        if member.kind == "constant":
            continue
        names.update(re.findall(r"[A-Za-z_]\w*", format_annotation(inspect.signature(func).return_annotation)))
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


def render_reference(target: Any, result_types: Sequence[type] | None = None, *,
                     primitives: str | None = None, instance_name: str = "robo") -> str:
    """The API reference of a robot class or instance (see the module docstring).

    ``result_types`` defaults to the class's ``RESULT_TYPES`` or its module's. ``primitives`` defaults to what
    the class offers (``effective_primitives``); under ``no-vla`` the class's ``VLA_PRIMITIVES`` are hidden and
    only the result types some rendered member returns (directly or through a field) are kept.
    """
    cls = target if isinstance(target, type) else type(target)
    primitives = effective_primitives(target, primitives)
    if result_types is None:
        result_types = getattr(cls, "RESULT_TYPES", None) or getattr(inspect.getmodule(cls), "RESULT_TYPES", ())
    hidden = tuple(getattr(cls, "VLA_PRIMITIVES", ())) if primitives == "no-vla" else ()
    members = public_members(cls, hidden=hidden)
    if primitives == "no-vla":
        result_types = _reachable_types(members, result_types)

    # under no-vla the class text comes from the nearest base without the skills (its docstring omits them)
    doc_cls = next((k for k in cls.__mro__ if k is not object and not any(hasattr(k, n) for n in hidden)), cls)
    out = [f"class {cls.__name__}  (the object is `{instance_name}`)"]
    class_doc = _docstring(doc_cls, "    ")
    if class_doc:
        out.append(class_doc)
    constants = [m for m in members if m.kind == "constant"]
    if constants:
        out.append("\n## Constants\n" + "\n".join(f"{instance_name}.{m.name} = {m.obj!r}" for m in constants))
    out.append("\n## Members")
    out.extend(_render_member(f"{instance_name}.", m) + "\n" for m in members if m.kind != "constant")
    if result_types:
        out.append("## Result types (frozen dataclasses: read fields as attributes, e.g. `result.reached`)\n")
        out.extend(render_result_type(t) + "\n" for t in result_types)
    out.append(EXCEPTIONS_SECTION.format(reasons=_reasons_text()))
    return "\n".join(out).rstrip() + "\n"


def undocumented_members(cls: type) -> list[str]:
    """Public methods/properties with no docstring or a missing annotation (the reference would be silent)."""
    problems = []
    for member in public_members(cls):
        if member.kind == "constant":
            continue
        func = member.obj.fget if member.kind == "property" else getattr(member.obj, "__func__", member.obj)
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
# Arm contracts
# --------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RobotWording:
    """How the contracts name a robot: ``blurb`` (what is controlled), ``services`` / ``services_novla`` (what
    stands behind ``robo``), the cameras ``robo.show`` accepts."""

    blurb: str
    services: str
    services_novla: str
    cameras: tuple[str, ...]


ROBOT_WORDING = {
    "libero": RobotWording(
        blurb="a simulated Franka Panda arm in the LIBERO-PRO benchmark, driven over ROS 2",
        services="the arm's ROS 2 drivers, a segmentation service and a frozen Pi0.5 VLA policy server",
        services_novla="the arm's ROS 2 drivers and a segmentation service",
        cameras=("agentview", "wrist"),
    ),
}


@dataclasses.dataclass(frozen=True)
class PromptOptions:
    """Everything that changes the contract text. ``budget_s`` wall clock [s]; ``max_turns`` switches to the
    decision budget (its number is not told to the model); ``max_programs`` caps ``run_program`` calls;
    ``cell_timeout_s`` the kernel's per-cell (per-program) wall-clock limit [s]; ``allowed_modules`` the
    kernel's import allow-list when the caller has it."""

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
    cell_timeout_s: float | None = None
    allowed_modules: tuple[str, ...] | None = None

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


def _unit(options: PromptOptions) -> str:
    """What one decision is called in the contract text."""
    return {"cells": "cell", "program": "program", "tools": "tool call"}[options.arm]


def _feedback_note(options: PromptOptions) -> str:
    unit = _unit(options)
    if options.arm == "tools":
        produced = ("the call number, the tool name, `value` (the method's result object as JSON, e.g. "
                    "`{\"type\": \"Move\", \"reached\": true, ...}`) or the `exception` text or `episode_finished`, "
                    "and elapsed seconds")
        if options.feedback == "pure":
            return f"A tool result holds only what the call produced: {produced}."
        return (f"A tool result holds {produced}; it also lists the robot calls made, whether the robot moved, the "
                "simulator steps used, a state summary (step, eef_pos, eef_yaw, eef_pitch, gripper_opening, "
                "terminated, truncated) and `episode_done`.")
    if options.arm == "cells":
        produced = ("the cell number, stdout, stderr, elapsed seconds and, when there is one, the value of a trailing "
                    "expression, the exception traceback or `episode_finished`")
    else:
        produced = ("the program's status (completed, finished, error or timeout), the reason, stdout, stderr, the "
                    "exception traceback if it raised, elapsed seconds and the programs left")
    if options.feedback == "pure":
        return (f"A {unit} result holds only what your code produced: {produced}. Nothing about the robot is added, "
                "so print what you need to know (for example `robo.state()` or the result of a motion call).")
    return (f"A {unit} result holds {produced}; it also lists the robot calls the {unit} made (the last 40), whether "
            "the robot moved, the simulator steps used, a state summary (step, eef_pos, eef_yaw, eef_pitch, "
            "gripper_opening, terminated, truncated) and `episode_done`.")


def _image_note(options: PromptOptions) -> str:
    wording = ROBOT_WORDING[options.robot]
    cams = " and ".join(wording.cameras)
    shows = " / ".join(f"`robo.show('{c}')`" for c in wording.cameras)
    unit = _unit(options)
    display = ("`display(image)` attaches any image you compute (a crop, an overlay, a mask), named `display_0`, "
               "`display_1` and so on")
    if options.arm == "tools":
        shows = " / ".join(f"`show(camera=\"{c}\")`" for c in wording.cameras)
        if options.images == "on-motion":
            return f"After every tool call that moved the robot, the current {cams} images (1024x1024) are attached."
        if options.images == "on-demand":
            return (f"No camera image is attached unless you ask for one: {shows} attaches that camera's current "
                    "image (1024x1024) to its result. Images cost context: look when it matters.")
        return "Camera images are never attached; perceive with `segment`, `back_project` and `region_center`."
    if options.images == "on-motion":
        return (f"After every {unit} that moved the robot, the current {cams} images (1024x1024) are attached to the "
                f"result. {display}.")
    if options.images == "on-demand":
        return (f"No camera image is attached unless you ask for one: {shows} in a {unit} attaches that camera's "
                f"image (1024x1024, as it is when the {unit} ends) to the result, and {display}. Images cost "
                "context, so prefer multi-step code that checks its own progress (motion results, `robo.state()`, "
                "`robo.segment(...)`) over looking after every move.")
    return (f"Camera images are never attached; perceive with `robo.segment`, `robo.back_project`, "
            f"`robo.region_center` and `robo.world_map`. {display}.")


def _sandbox_note(options: PromptOptions) -> str:
    unit = "cell" if options.arm == "cells" else "program"
    text = ("Your code runs in a separate sandbox process. It holds no handle on the robot except `robo`, a proxy "
            "whose calls are carried to the robot host and return the same result objects. ")
    if options.cell_timeout_s is not None:
        text += (f"One {unit} may run for at most {options.cell_timeout_s:g} s of wall clock; a longer one is stopped "
                 "and reported as timed out. If the sandbox has to be restarted, everything it held is gone (the "
                 "result says so): rebuild your variables. ")
    if options.allowed_modules:
        text += f"You may import only {', '.join(options.allowed_modules)} and `.py` files of your workspace. "
    else:
        text += ("You may import numpy, math, time, json, re, PIL and other pure-computation modules, and `.py` files "
                 "of your workspace; not os, sys, subprocess, pathlib, socket or anything else that reaches the "
                 "system or the network. ")
    return text + "`open()` works only inside the workspace, and `robo`'s private internals are refused."


def _budget_note(options: PromptOptions, max_env_steps: int) -> str:
    tool = {"cells": "`python`", "program": "`run_program`", "tools": "robot tool"}[options.arm]
    if options.budget_mode == "calls" and options.arm == "tools":
        return ("The number of robot tool calls (every tool but `finish`) is limited, and every call counts, "
                f"including calls that only look. The episode also ends after {max_env_steps} simulator steps.")
    if options.budget_mode == "calls":
        return (f"The number of {tool} calls is limited, and every call counts, including calls that only look. "
                f"Put several steps into one call. The episode also ends after {max_env_steps} simulator steps.")
    return (f"You have {options.budget_s:g} s of wall clock (your thinking included) or {max_env_steps} simulator "
            "steps, whichever runs out first.")


def _program_budget_sentence(options: PromptOptions) -> str:
    if options.max_programs == 1:
        return ("You may run exactly one program: there is no second attempt and no feedback before it runs, so it "
                "must localise the objects, verify its own progress and recover on its own.")
    if options.max_programs:
        return (f"You may call `run_program` at most {options.max_programs} times; use the feedback between calls.")
    return "You may call `run_program` as many times as the budget allows; use the feedback between calls."


def _guides_note() -> str:
    return ("Guides: the workspace folder `guides/` holds three notes written for this robot interface: "
            "`strict_hybrid_guide.md` (rules, localisation, vocabulary, failure modes), `pro_hybrid_guide.md` "
            "(LIBERO-PRO frames and perturbation gotchas) and `env_calibration.md` (reachable workspace and "
            "heights). They use the `robo` method names. Reading them is optional, e.g. "
            "`print(open('guides/env_calibration.md').read())`.")


def contract_text(options: PromptOptions, *, class_name: str, max_env_steps: int) -> str:
    """The arm contract: how the episode works, what results hold, sandbox, budget, scoring and ending."""
    wording = ROBOT_WORDING[options.robot]
    services = wording.services if options.primitives == "full" else wording.services_novla
    if options.arm == "single-shot":
        return _single_shot_contract(options, class_name=class_name, services=services)
    if options.arm == "cells":
        intro = (f"You control {wording.blurb} through ONE tool, `python(code)`. Each call runs `code` as a cell "
                 "of a persistent Python session, like a notebook: variables, functions and imports stay defined "
                 "for later cells, so write helpers once and reuse them. The session already holds:\n"
                 f"- `robo`, a `{class_name}` bound to the live robot ({services}); its API is documented below;\n"
                 "- `np` (numpy), `math`, `time`;\n"
                 "- `log(value)` (prints a value) and `display(image)` (attaches a numpy array, PIL image or PNG "
                 "bytes as an image).")
    elif options.arm == "tools":
        intro = (f"You control {wording.blurb} through one tool per robot primitive: each method of `robo` "
                 f"documented below (a `{class_name}` bound to the live robot: {services}) is a tool of the same "
                 "name whose arguments are the method's parameters, passed by name as JSON (e.g. "
                 "`move_to(xyz=[0.1, 0.2, 1.0], gripper=1.0)`; defaults apply to what you leave out). Each call "
                 "runs that one method on the robot and returns its result. There is no code execution: "
                 "arithmetic between calls is yours to do. Constants: `OPEN` = -1.0 and `CLOSE` = 1.0 (the "
                 "gripper values).")
    else:
        intro = (f"You control {wording.blurb} by writing complete Python programs and running them with the tool "
                 "`run_program(code=...)` (or `path=` a `.py` file of the workspace). A program is a whole file "
                 "that defines `run(robo)`; each run imports it into a fresh namespace and calls `run(robo)` once, "
                 f"where `robo` is a `{class_name}` bound to the live robot ({services}); its API is documented "
                 "below. Variables do not survive between programs; workspace files do, and `.py` files there can "
                 f"be imported. {_program_budget_sentence(options)} A program that raises stops there, and the "
                 "robot stays where it stopped.")
    sections = [
        "# How this episode works",
        intro,
        "Results. " + _feedback_note(options),
        "Images. " + _image_note(options),
        *([] if options.arm == "tools" else ["Sandbox. " + _sandbox_note(options)]),
        "Budget. " + _budget_note(options, max_env_steps),
        ("Scoring and ending. The episode counts as a success when the benchmark's own success check fires at "
         "any moment; what you claim does not count. Motion results carry `terminated`, and `robo.done` turns "
         "true once the check has fired. From then on motion calls raise `EpisodeFinished` (read-only calls keep "
         "working): call `finish(status=\"success\", summary=...)` and stop. If no progress is possible, call "
         "`finish` with status `failure` or `stuck` and a one- or two-sentence summary. `finish` ends the "
         "episode at once: nothing runs after it, so call it only when you are done."),
        ("Workspace. The current directory is a scratch workspace for your own files. Do not read outside it; the "
         "robot is reachable only through " + ("these tools." if options.arm == "tools" else "`robo`.")),
    ]
    if options.guides:
        sections.append(_guides_note())
    return "\n\n".join(sections)


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

def _xyz(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{float(v):.3f}" for v in values) + "]"


def render_card(card: CardRecord, *, transfer: bool | None = None) -> str:
    """The task card in the LIBERO layout (PYRUALEAN-CONTRACT.md 3.8); ``transfer`` defaults to the card's."""
    transfer = card.transfer if transfer is None else transfer
    cams = ", ".join(card.images) or "none"
    lines = [
        "# Task card",
        f"- suite: {card.suite}",
        f"- task: {card.task}",
        f"- seed: {card.seed}",
        f"- task instruction (authoritative, also `robo.task`): {card.task_language!r}",
        f"- movable objects: {', '.join(card.object_names) or 'none listed'}",
        f"- initial gripper position: {_xyz(card.eef_pos)} m, opening {card.gripper_opening:.3f} m "
        "(open, pointing down)",
        f"- simulator step budget: {card.max_env_steps} steps",
    ]
    lines.extend(f"- {fact}" for fact in card.facts)
    if transfer:
        lines.append(f"- attached images: {cams} (1024x1024) of one example layout. The program will run on other "
                     "seeds, where objects stand elsewhere: do not hard-code pixels or positions; localise at "
                     "runtime with `robo.segment`, `robo.back_project`, `robo.region_center` and `robo.world_map`.")
    else:
        lines.append(f"- attached images: {cams} (1024x1024) at step 0, before any motion; they are identical to "
                     "`robo.image(camera, step=0)`. A pixel (row, col) read off the agentview image converts to a "
                     "world point at runtime with `robo.back_project(row, col, step=0)`.")
    return "\n".join(lines)


def knowledge_text(robot: str = "libero", primitives: str = "full") -> str:
    """The robot's knowledge file: ``knowledge/<robot>.md``, or ``<robot>-novla.md`` for the no-VLA set."""
    _check_choice("robot", robot, tuple(ROBOT_WORDING))
    _check_choice("primitives", primitives, PRIMITIVE_SETS)
    name = f"{robot}.md" if primitives == "full" else f"{robot}-novla.md"
    return (KNOWLEDGE_DIR / name).read_text(encoding="utf-8").strip()


def copy_guides(workspace: Path, source_dir: Path | None = None) -> dict[str, Any]:
    """Copy the guides into ``workspace/guides/`` (the packaged three, or every ``*.md`` of ``source_dir``) and
    return ``result.json``'s ``guides`` entry ``{source, files: {name: sha256}}``."""
    if source_dir is None:
        sources = [GUIDES_DIR / name for name in GUIDE_NAMES]
        source = str(GUIDES_DIR)
    else:
        sources = sorted(Path(source_dir).glob("*.md"))
        source = str(source_dir)
        if not sources:
            raise ValueError(f"guides dir {source_dir} holds no *.md files")
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
    the card images, attached to the first message), ``primitives`` (the set the prompt describes). ``text`` is
    the whole prompt as one string."""

    system: str
    user: str
    images: tuple[str, ...] = ()
    primitives: str = "full"

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
    reference = render_reference(robot, primitives=options.primitives)
    system = "\n\n".join([
        contract_text(options, class_name=cls.__name__, max_env_steps=max_env_steps),
        heading + "\n\n" + reference.rstrip(),
        knowledge_text(options.robot, options.primitives),
    ])
    if card is None:
        return PromptBundle(system=system, user="", primitives=primitives)
    images = tuple(str(Path(card_dir) / p) if card_dir is not None else str(p) for p in card.images.values())
    return PromptBundle(system=system, user=render_card(card, transfer=options.transfer), images=images,
                        primitives=primitives)
