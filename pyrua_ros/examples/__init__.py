"""Scripted ``run(robo)`` programs for libero_goal tasks, written with segment, move_to / move_pose, set_gripper and
release.

They are plumbing checks and the embedded default of ``pyrualean play --runtime replay`` (no model server needed),
not method results: the geometry comes from docs/LIBERO-CALIBRATION.md-style measurements (grasp offsets, carry
heights). ``EXAMPLES`` maps (suite, task) to the program file that solves it from its official init state.

A program may be cut short by the benchmark itself: the task can count as solved while the program is still
lowering or releasing (when exactly depends on the machine's floating point, docs/DESIGN.md "Reproducibility"),
and the next motion call then raises ``EpisodeFinished("terminated")``. That is the program's end, not an error:
``pyrualean run``/``play`` report it as ``finished``, and :func:`run_program` does the same for a program run
in-process (tests, benchmarks).
"""

import importlib.util
import pathlib
from collections.abc import Callable

from pyrua_ros.robo.errors import EpisodeFinished

HERE = pathlib.Path(__file__).resolve().parent

EXAMPLES = {
    ("libero_goal", 8): HERE / "libero_goal_bowl_on_plate.py",
    ("libero_goal", 1): HERE / "libero_goal_bowl_on_stove.py",
    ("libero_goal", 6): HERE / "libero_goal_cream_cheese_in_bowl.py",
    ("libero_goal", 0): HERE / "libero_goal_open_middle_drawer.py",
    ("fake_table", 0): HERE / "fake_table_cube_on_plate.py",
}
DEFAULT = ("libero_goal", 8)


def program_for(suite: str, task: int) -> pathlib.Path:
    """The example program for (suite, task); ValueError listing the available ones."""
    try:
        return EXAMPLES[(suite, int(task))]
    except KeyError:
        known = ", ".join(f"{s} task {t}" for s, t in sorted(EXAMPLES))
        raise ValueError(f"no example program for {suite} task {task}; available: {known}") from None


def load_program(path: pathlib.Path | str) -> Callable:
    """The ``run(robo)`` function of a program file."""
    path = pathlib.Path(path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def run_program(program: Callable | pathlib.Path | str, robo) -> str:
    """Run a ``run(robo)`` program in this process to its end, as ``pyrualean run`` does in the kernel: returns
    ``"returned"``, or the reason of the ``EpisodeFinished`` that ended it (``terminated`` when the task was solved
    before the program's last motion call). Any other exception propagates."""

    run = program if callable(program) else load_program(program)
    try:
        run(robo)
    except EpisodeFinished as finished:
        return finished.reason
    return "returned"
