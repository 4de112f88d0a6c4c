"""Function-tool schemas served to the model (PYRUALEAN-CONTRACT.md section 3.3), in chat-completions form.

Unlike the reference (section 9 item 5), the ``python`` / ``run_program`` descriptions follow the episode's
``--feedback`` and ``--images`` settings, so the tool description never promises what the contract text
says will not come back (state under ``pure``, camera images under ``none``/``on-demand``).
"""

from __future__ import annotations

from pyrua_ros.kernel.policy import PREDEFINED_NAMES
from pyrua_ros.robo.libero import LiberoRobot
from pyrua_ros.settings.modes import CODE_ARMS as ARMS
from pyrua_ros.settings.modes import FEEDBACK_MODES, FINISH_STATUSES
from pyrua_ros.settings.modes import IMAGE_POLICIES as IMAGE_MODES

_RETURNS = {
    "pure": "It returns only what the code produced: stdout, stderr, elapsed seconds, the value of a trailing "
            "expression and the exception if one was raised.",
    "rich": "It returns stdout, stderr, elapsed seconds, the value of a trailing expression, the exception if "
            "one was raised, the robot calls made, whether the robot moved, simulator steps used, the robot "
            "state and whether the episode is done.",
}
_IMAGES = {
    "on-motion": f"Camera images ({' and '.join(LiberoRobot.CAMERAS)}) are attached whenever the robot moved "
                 "during the call; images passed to display() are attached too.",
    "on-demand": "Camera images are attached only for cameras requested with robo.show(camera) during the "
                 "call; images passed to display() are attached too.",
    "none": "No camera images are attached; only images passed to display() are.",
}


def _check(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _function(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function",
            "function": {"name": name, "description": description,
                         "parameters": {"type": "object", "properties": properties, "required": required}}}


def finish_spec() -> dict:
    """The ``finish`` tool: a status (FINISH_STATUSES) and a one- or two-sentence summary, both required."""
    return _function(
        "finish",
        "End the episode: call it once a result showed terminated=true, or when no further progress is "
        "possible, then stop.",
        {"status": {"type": "string", "enum": list(FINISH_STATUSES)},
         "summary": {"type": "string", "description": "one or two sentences"}},
        ["status", "summary"])


def tool_specs(arm: str, feedback: str, images: str, max_programs: int | None = None) -> list[dict]:
    """Tools for one episode: ``[python, finish]`` (cells arm) or ``[run_program, finish]`` (program arm).

    ``feedback`` (pure|rich) and ``images`` (on-motion|on-demand|none) shape the description of the code
    tool; ``max_programs`` (program arm) adds "You may call it at most N time(s)." The tools arm's specs are
    generated from the live robot (``ArmToolkit.tool_specs``, :mod:`pyrua_ros.agent.loop.primitive_tools`).
    """
    _check("arm", arm, ARMS)
    _check("feedback", feedback, FEEDBACK_MODES)
    _check("images", images, IMAGE_MODES)
    if max_programs is not None and max_programs < 1:
        raise ValueError(f"max_programs must be >= 1 or unset; got {max_programs!r}")
    tail = f"{_RETURNS[feedback]} {_IMAGES[images]}"
    if arm == "cells":
        code_tool = _function(
            "python",
            f"Execute Python in a persistent session where {', '.join(PREDEFINED_NAMES[:-1])} and "
            f"{PREDEFINED_NAMES[-1]} are defined; variables, functions and imports persist between calls. {tail}",
            {"code": {"type": "string", "description": "Python source"}},
            ["code"])
    else:
        description = ("Run a complete program that defines run(robo): pass its source as code, or a "
                       "workspace-relative .py file as path. Each run gets a fresh namespace; workspace files "
                       f"persist and are importable. {tail}")
        if max_programs is not None:
            description += f" You may call it at most {max_programs} time(s)."
        code_tool = _function(
            "run_program", description,
            {"code": {"type": "string", "description": "full program source"},
             "path": {"type": "string", "description": "workspace-relative .py file"}},
            [])
    return [code_tool, finish_spec()]
