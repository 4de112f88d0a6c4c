"""robo's motion tests against the kinematic fake arm (``python -m pyrua_ros.nodes.fake_arm_node``, fake_table
task 0, "put the red cube on the plate"): the SAME case functions as ``test_robo_ros.py`` runs against the LIBERO
sim node (``robo_motion_cases.py``), through the same RosBackend, so both drivers are held to one behaviour.
Plus the one perception refusal only this scene can show: a pixel without depth (the fake camera sees open sky).
"""

from __future__ import annotations

import numpy as np
import pytest
from robo_motion_cases import CASES

from pyrua_ros.robo.errors import ToolError


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__.removeprefix("case_"))
def test_motion(fake_arm_rig, case):
    case(fake_arm_rig)


def test_back_project_refuses_a_pixel_without_depth(fake_arm_rig):
    robo = fake_arm_rig.reset()
    wmap = robo.world_map("agentview")
    invalid = np.argwhere(~np.any(wmap != 0, axis=2))
    assert len(invalid) > 0, "the fake agentview sees sky above the table"
    row, col = (int(v) for v in invalid[len(invalid) // 2])
    with pytest.raises(ToolError, match=r"invalid agentview world xyz at pixel \(\d+,\d+\)") as info:
        robo.back_project(row, col)
    assert info.value.tool == "back_project"
    rec = fake_arm_rig.host.ledger.records[-1]
    assert rec.tool == "back_project" and not rec.ok and rec.error.startswith("ToolError")
    valid = np.argwhere(np.any(wmap != 0, axis=2))[0]
    assert robo.back_project(int(valid[0]), int(valid[1])).world_xyz == pytest.approx(tuple(wmap[tuple(valid)]))


def test_clipping_by_the_drivers_safety_filter_is_counted_per_call(fake_arm_rig):
    """Any clipping that does happen is reported: a move driving the hand below this arm's workspace floor (z 0.91,
    config/fake_arm.yaml) is cut there and carries ``clipped_steps`` in its ledger summary, which rich feedback
    shows with the call; a move within the limits carries none. (robo's commands never exceed 1 m/s per axis, the
    per-axis speed limit itself, so the box is what clips.)"""
    robo = fake_arm_rig.reset()
    x, y, z = robo.state().eef_pos
    robo.move_to([x + 0.02, y, z], step_clip=0.01)
    calm = fake_arm_rig.host.ledger.records[-1]
    assert "clipped_steps" not in calm.summary and fake_arm_rig.backend.clipped_steps() == 0
    robo.move_to([x, y, 0.85], step_clip=0.05, max_steps=20)
    fast = fake_arm_rig.host.ledger.records[-1]
    assert fast.summary["clipped_steps"] > 0 and fast.summary["clipped_steps"] <= fast.env_steps
    assert fake_arm_rig.backend.clipped_steps() == fast.summary["clipped_steps"]   # counted per episode (reset clears)
