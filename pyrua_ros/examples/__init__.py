"""Scripted ``run(robo)`` programs for libero_goal tasks, written with segment, move_to / move_pose, set_gripper and
release.

They are plumbing checks and the embedded default of ``pyrualean play --runtime replay`` (no model server needed),
not method results: the geometry comes from docs/LIBERO-CALIBRATION.md-style measurements (grasp offsets, carry
heights). ``EXAMPLES`` maps (suite, task) to the program file that solves it from its official init state.
"""

import pathlib

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
