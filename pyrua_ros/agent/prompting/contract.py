"""The arm contract: what the model is told about its tools, the kernel, feedback, images, the budget and how
an episode ends (PYRUALEAN-CONTRACT.md 3.8). Every fact it states comes from the code that enforces it (tool
names, predefined kernel names, cameras, the import allow-list, the rich-feedback limit, finish statuses).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pyrua_ros.agent.prompting.api_reference import _check_choice
from pyrua_ros.agent.prompting.guides import guides_note
from pyrua_ros.kernel.policy import ALLOWED_MODULES, PREDEFINED_NAMES, REFERENCE_BLOCKED_NAMES
from pyrua_ros.robo.libero import LiberoRobot
from pyrua_ros.settings.modes import (
    FEEDBACK_MODES,
    FINISH_STATUSES,
    IMAGE_POLICIES,
    PRIMITIVE_SETS,
    RICH_CALL_LIMIT,
)
from pyrua_ros.settings.modes import PROMPT_ARMS as ARMS

NO_TOOLS_NOTE = "\n\nAnswer with the program directly. Do not run commands and do not create or read files."
# Modules the sandbox sentence names: each must be importable in the kernel (or refused there, for the second
# list); test_prompt_facts checks both against the kernel's allow-list.
NAMED_MODULES = ("numpy", "math", "time", "json", "re", "PIL")
NAMED_REFUSED_MODULES = ("os", "sys", "subprocess", "pathlib", "socket")


def _code_list(names: Sequence[str], last: str = "and") -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" {last} " + quoted[-1]


@dataclasses.dataclass(frozen=True)
class RobotWording:
    """How the contracts name a robot: ``blurb`` (what is controlled), ``services`` / ``services_novla`` (what
    stands behind ``robo``), the cameras ``robo.show`` accepts."""

    blurb: str
    services: str
    services_novla: str
    cameras: tuple[str, ...]


def _libero_cameras() -> tuple[str, ...]:
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

    return PREDEFINED_NAMES


def sandbox_sentence(arm: str) -> str:
    """What the sandbox allows, from the kernel's allow-list and blocked names."""

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
