"""robo over ROS against the real LIBERO-PRO sim node (libero_goal task 8, "put the bowl on the plate").

As an external user would use it: one sim node process for the module (``python -m pyrua_ros.nodes.sim_node``),
one ``RosBackend`` and a ``RobotHost`` per episode (the ``sim_rig`` of :mod:`rigs.nodes`); the motion cases are
shared with the fake-arm tests (``robo_motion_cases.py``), the perception and ledger checks are here. The episode
is reset only where a test needs a fresh one (a reset takes ~0.5 s; the node start ~20-60 s builds LIBERO).
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from robo_motion_cases import CASES

from pyrua_ros.robo import results as R
from pyrua_ros.robo.errors import ToolError
from pyrua_ros.robo.libero import LiberoRobot
from pyrua_ros.rotations import wrap_angle

TABLE_Z = 0.90            # kitchen table top [m] (LIBERO-CALIBRATION.md)
AGENTVIEW_POS = (0.66, 0.0, 1.61)
BOWL = "the black bowl"


@pytest.fixture(scope="module")
def scene(sim_rig):
    """A fresh episode at step 0, only looked at (the perception tests below never move the arm)."""
    return sim_rig.reset()


# ------------------------------------------------------------------------------------- observation
def test_state_task_done_and_images_are_typed(sim_rig, scene):
    robo = scene
    s = robo.state()
    assert type(s) is R.State and s.step == 0 and s.task == robo.task == "put the bowl on the plate"
    assert s.object_names == ("akita_black_bowl_1", "cream_cheese_1", "plate_1", "wine_bottle_1")  # sorted
    assert np.allclose(s.eef_pos, (-0.21, 0.0, 1.17), atol=0.02) and abs(s.eef_pitch) < 0.05
    assert 0.07 < s.gripper_opening < 0.085 and s.gripper_opening == pytest.approx(sum(map(abs, s.gripper_qpos)))
    assert not (s.terminated or s.truncated or robo.done)
    for camera in ("agentview", "wrist"):
        for resolution, size in (("high", 1024), ("low", 256)):
            img = robo.image(camera, resolution=resolution)
            wmap = robo.world_map(camera, resolution=resolution)
            assert img.shape == (size, size, 3) and img.dtype == np.uint8 and img.std() > 10
            assert wmap.shape == (size, size, 3) and np.issubdtype(wmap.dtype, np.floating)
    with pytest.raises(ValueError, match="agentview, wrist"):
        robo.image("left")
    with pytest.raises(ValueError, match="high, low"):
        robo.world_map("agentview", resolution="mid")
    # show queues the camera once per turn; artifacts are the same pixels as image()
    assert robo.show("wrist") is None and robo.show("wrist") is None and robo.show("agentview") is None
    assert sim_rig.host.take_show_requests() == ["wrist", "agentview"] and sim_rig.host.take_show_requests() == []
    png = robo.artifact("agentview_high.png")
    from PIL import Image

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), robo.image())
    with np.load(io.BytesIO(robo.artifact("agentview_depth.npz"))) as depth:
        assert depth["array"].shape == (1024, 1024)
    with pytest.raises(ToolError, match=r"agentview_high\.png"):
        robo.artifact("nope.png")
    meta = robo.camera_meta("agentview")
    assert np.asarray(meta["K"]).shape == (3, 3) and np.asarray(meta["T_world_optical"]).shape == (4, 4)
    assert meta["image_size"] == [1024, 1024] and np.allclose(meta["position"], AGENTVIEW_POS, atol=0.1)
    # RPent's names for the same calibration (its camera metadata dict), the depth range from the simulator
    assert meta["intrinsic_K"] == meta["K"] and meta["extrinsic_cam2world"] == meta["T_world_optical"]
    assert (meta["height"], meta["width"]) == (1024, 1024)
    assert 0 < meta["depth_near"] < 0.1 and meta["depth_far"] > 10
    depth_m = robo.world_map("agentview")   # every valid depth lies inside that range
    assert np.all(np.linalg.norm(depth_m[np.any(depth_m != 0, axis=-1)] - meta["position"], axis=-1)
                  < meta["depth_far"])


def test_segment_found_not_found_and_point(scene):
    robo = scene
    bowl = robo.segment(BOWL)
    assert type(bowl) is R.Segment and bowl.found and bowl.error is None and bowl.step == 0
    assert bowl.score >= 0.5 and bowl.camera == "agentview"
    r0, c0, r1, c1 = bowl.box
    assert 0 <= r0 < r1 < 1024 and 0 <= c0 < c1 < 1024
    assert TABLE_Z < bowl.world_xyz[2] < TABLE_Z + 0.08
    assert "matched 'akita_black_bowl" in _segment_note(robo)   # the label is for operators (the ledger) only
    extras = json.loads(robo.artifact(bowl.overlay_artifact.replace(".png", ".json"), step=bowl.step))
    assert "label" not in extras and extras["n_pixels"] > 100
    assert robo.artifact(bowl.overlay_artifact, step=0)[:4] == b"\x89PNG"
    # the box centre, the visible-surface median and the bowl's extent agree to a bowl's size
    assert np.linalg.norm(np.subtract(extras["box_center_xyz"], bowl.world_xyz)) < 0.05
    missing = robo.segment("the purple elephant")
    assert type(missing) is R.Segment and not missing.found and missing.world_xyz is None
    assert missing.error == "SAM3 returned no candidate" and "the scene has" in _segment_note(robo)
    by_point = robo.segment(point=((r0 + r1) // 2, (c0 + c1) // 2))
    assert by_point.found and np.linalg.norm(np.subtract(by_point.world_xyz, bowl.world_xyz)) < 0.02
    with pytest.raises(ToolError, match="prompt"):
        robo.segment()
    with pytest.raises(ToolError, match=r"point \[row, col\] \[1024, 3\] is outside image shape \[1024, 1024\]"):
        robo.segment(point=(1024, 3))


def test_back_project_world_map_and_region_center_are_consistent(scene):
    robo = scene
    wmap = robo.world_map("agentview")
    bowl = robo.segment(BOWL)
    r0, c0, r1, c1 = bowl.box
    row, col = (r0 + r1) // 2, (c0 + c1) // 2
    bp = robo.back_project(row, col)
    assert type(bp) is R.BackProjection and bp.pixel == (row, col) and bp.image_size == (1024, 1024)
    assert bp.world_xyz == pytest.approx(tuple(wmap[row, col]), abs=1e-6)
    assert np.linalg.norm(np.subtract(bp.world_xyz, bowl.world_xyz)) < 0.06
    # a table pixel between robot and bowl lies on the table top
    table = robo.back_project(r0 - 40, col)
    assert table.world_xyz[2] == pytest.approx(TABLE_Z, abs=0.02)
    # the 256 map samples the same surface as the 1024 one
    low = robo.world_map("agentview", resolution="low")
    rows = np.arange(300, 1000, 64)
    diff = np.linalg.norm(low[rows // 4, rows // 4] - wmap[rows + 2, rows + 2], axis=1)
    assert np.median(diff) < 0.02, diff
    region = robo.region_center((r0, r1 + 1), (c0, c1 + 1), z_min=TABLE_Z + 0.01)
    assert type(region) is R.RegionCenter and region.n_valid > 100
    assert np.linalg.norm(np.subtract(region.center_xyz[:2], bowl.world_xyz[:2])) < 0.04
    # refusals: a pixel outside the image. (The LIBERO scenes are walled, so every pixel has depth; the
    # "no valid depth" refusal is checked against the fake arm, whose camera sees open background.)
    for bad in ((1024, 10), (-1, 10), (10, 4096)):
        with pytest.raises(ToolError, match=r"out of bounds; agentview image is 1024x1024"):
            robo.back_project(*bad)
    with pytest.raises(ToolError):
        robo.region_center((0, 0), (0, 10))


def test_wrist_world_map_sees_the_table_below(sim_rig):
    robo = sim_rig.reset()
    s = robo.state()
    robo.move_to([s.eef_pos[0] + 0.1, s.eef_pos[1], TABLE_Z + 0.20])
    wrist = robo.world_map("wrist")
    valid = wrist[np.any(wrist != 0, axis=2)]
    assert len(valid) > 0.5 * 1024 * 1024
    z = valid[:, 2]
    assert np.percentile(z, 10) == pytest.approx(TABLE_Z, abs=0.03), "the table fills most of the wrist view"
    eef = robo.state().eef_pos
    assert np.median(z) < eef[2] - 0.1, "the view is mostly the table far below the hand (fingers aside)"
    meta = robo.camera_meta("wrist")
    assert eef[2] < meta["position"][2] < eef[2] + 0.2, "the wrist camera rides on the hand, above the grip site"
    centre = robo.back_project(512, 512, camera="wrist")
    assert centre.world_xyz[2] == pytest.approx(TABLE_Z, abs=0.03)
    assert np.linalg.norm(np.subtract(centre.world_xyz[:2], eef[:2])) < 0.1, "it looks down, near the fingers"


def test_past_steps_and_ledger(sim_rig, tmp_path):
    robo = sim_rig.reset()
    ledger = sim_rig.host.ledger
    s0 = robo.state()
    robo.image()                                       # step 0 viewed
    robo.move_to([s0.eef_pos[0], s0.eef_pos[1], s0.eef_pos[2] - 0.03])
    robo.move_to([s0.eef_pos[0], s0.eef_pos[1], s0.eef_pos[2] - 0.06])
    assert robo.state().step == 2 and robo.state(1).step == 1
    assert robo.image(step=0).shape == (1024, 1024, 3)
    # a past step never viewed is rendered from the simulator's record of it (the reference records every step):
    # the wrist camera rides the gripper, so its pose at steps 1 and 2 differs by the gripper's own motion
    assert robo.image(step=1).shape == (1024, 1024, 3)
    cam1, cam2 = (np.array(robo.camera_meta("wrist", step=k)["position"]) for k in (1, 2))
    eef1, eef2 = np.array(robo.state(1).eef_pos), np.array(robo.state(2).eef_pos)
    assert np.allclose(cam2 - cam1, eef2 - eef1, atol=0.004) and np.linalg.norm(eef2 - eef1) > 0.02
    with pytest.raises(ToolError, match=r"0\.\.2"):
        robo.state(step=3)
    robo.set_gripper(robo.CLOSE, steps=5)
    tools = [r.tool for r in ledger.records]
    assert tools[:2] == ["view_env_state", "image"] and tools.count("move_to") == 2 and tools[-1] == "set_gripper"
    for rec in ledger.records:
        assert rec.index == ledger.records.index(rec) and rec.elapsed_s >= 0 and rec.started_at > 0
        if rec.tool in LiberoRobot.STATEFUL_TOOLS:
            assert rec.stateful and rec.env_steps > 0
        else:
            assert not rec.stateful and rec.env_steps == 0
    stateful = [r for r in ledger.records if r.stateful]
    assert ledger.stateful_calls() == len(stateful) == 3
    assert ledger.env_steps() == sum(r.env_steps for r in stateful) == sim_rig.env_step()
    state_rec = next(r for r in ledger.records if r.tool == "view_env_state" and r.ok)
    assert len(state_rec.summary["eef_pos"]) == 3
    failed = [r for r in ledger.records if not r.ok]
    assert [r.error.split(":")[0] for r in failed] == ["ToolError"]
    path = tmp_path / "calls.jsonl"
    ledger.write_jsonl(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["tool"] for line in lines] == tools


def _extras(robo, seg) -> dict:
    return json.loads(robo.artifact(seg.overlay_artifact.replace(".png", ".json"), step=seg.step))


def _segment_note(robo) -> str:
    """The operator note of the latest segment call (the ground-truth label behind it; never shown to the model)."""
    return next(r.note for r in reversed(robo._host.ledger.records) if r.tool == "segment")


def test_part_prompts_find_the_parts_the_api_promises(scene):
    """The reference's API promises part prompts ("stove burner", "top drawer handle"): they find the part's
    pixels (not the whole fixture), and a part the scene lacks is not found; the ledger's operator note names the
    label matched, or the scene's objects and parts on a miss."""
    robo = scene
    burner = robo.segment("stove burner")
    assert burner.found and "matched 'flat_stove_1_burner'" in _segment_note(robo)
    stove = robo.segment("the stove")
    assert stove.found and _extras(robo, stove)["n_pixels"] > _extras(robo, burner)["n_pixels"]
    top = robo.segment("top drawer handle")
    assert "matched 'wooden_cabinet_1_top_drawer_handle'" in _segment_note(robo)
    middle = robo.segment("middle drawer handle")
    assert "matched 'wooden_cabinet_1_middle_drawer_handle'" in _segment_note(robo)
    assert 0.05 < top.world_xyz[2] - middle.world_xyz[2] < 0.09      # the drawers are ~7 cm apart
    assert abs(top.world_xyz[0] - middle.world_xyz[0]) < 0.02 and abs(top.world_xyz[1] - middle.world_xyz[1]) < 0.02
    missing = robo.segment("plate handle")
    assert not missing.found and missing.error == "SAM3 returned no candidate"
    assert "wooden_cabinet_1 (parts: " in _segment_note(robo) and "middle drawer handle" in _segment_note(robo)


def test_the_reference_default_motion_is_not_clipped_by_the_sim(sim_rig):
    """``libero.py::LiberoRobot.move_to`` (per-axis step_clip 0.025 m: a diagonal step is 0.043 m, 0.87 m/s) and
    ``rotate_wrist`` run as the reference's primitives: the sim's default safety limits are the OSC action range's,
    so they clip none of their steps (the old 0.5 m/s default cut every diagonal step)."""
    robo = sim_rig.reset()
    x, y, z = robo.state().eef_pos
    move = robo.move_to([x + 0.08, y - 0.08, z - 0.08])   # diagonal: all three axes at step_clip
    turn = robo.rotate_wrist(delta_yaw=0.6, gripper=-1.0)
    assert move.reached and turn.reached, (move, turn)
    assert sim_rig.backend.clipped_steps() == 0


# ------------------------------------------------------------------------------------- fidelity to LIBERO's OSC
def _reference_actions() -> list[np.ndarray]:
    """The reference's OSC actions [pos(3), rot(3), gripper]: full-scale translations, yaw and pitch turns at the
    rotation clip, a close while the arm moves down, an open while it turns, arm-held gripper steps."""
    seq = []
    seq += [np.array([0.5, -0.4, -0.3, 0, 0, 0, -1.0])] * 6
    seq += [np.array([0, 0, 0, 0, 0, 1.0, -1.0])] * 8             # yaw at the clip: 0.5 rad commanded per step
    seq += [np.array([0, 0, -0.6, 0, 0, 0, 1.0])] * 8             # close while moving down
    seq += [np.array([0, 0, 0, -0.8, 0, 0, 1.0])] * 5             # pitch, holding closed
    seq += [np.array([0, 0, 0, 0, 0, -1.0, -1.0])] * 6            # open while turning back
    seq += [np.array([0, 0, 0, 0, 0, 0, 1.0])] * 5                # set_gripper: arm held
    return seq


def test_motion_matches_plain_libero_for_the_reference_actions(sim_rig):
    """The reference's actions sent through robo over ROS (twist = action * the sim's osc_action_scale / dt, the
    gripper as the driver's gripper target) move the arm and fingers as the same actions through LIBERO's own
    ``env.step`` in this process, step by step: 0.05 m and 0.5 rad per unit action, the gripper with the arm."""
    from pyrua_ros.robo.servo import gripper_gap
    from pyrua_ros.sim.env import LiberoEpisode

    assert sim_rig.backend.osc_action_scale == (0.05, 0.5)
    actions = _reference_actions()
    sim_rig.backend.reset("libero_goal", 8, 0, 600)
    dt = sim_rig.backend.control_period_s
    over_ros = []
    for a in actions:
        assert sim_rig.backend.gripper_target(gripper_gap(a[6])) is True
        pose = sim_rig.backend.servo(a[:3] * 0.05 / dt, a[3:6] * 0.5 / dt)
        over_ros.append((np.asarray(pose.pos), np.asarray(pose.quat_xyzw), sim_rig.backend.gripper_opening()))
    plain = LiberoEpisode(lean_step=False)          # LIBERO's stock env.step
    try:
        plain.reset("libero_goal", 8, 0, 600)
        in_process = []
        for a in actions:
            plain.step(a)
            pos, quat = plain.eef_pose()
            in_process.append((pos, quat, plain.gripper_opening()))
    finally:
        plain.close()
    d_pos = max(float(np.linalg.norm(r[0] - p[0])) for r, p in zip(over_ros, in_process))
    d_rot = max(2 * math.acos(min(1.0, abs(float(np.dot(r[1], p[1]))))) for r, p in zip(over_ros, in_process))
    d_gap = max(abs(r[2] - p[2]) for r, p in zip(over_ros, in_process))
    print(f"\nper-step difference vs plain LIBERO over {len(actions)} steps: position {d_pos:.2e} m, "
          f"rotation {d_rot:.2e} rad, finger gap {d_gap:.2e} m")
    assert d_pos < 1e-6 and d_rot < 1e-6 and d_gap < 1e-6, (d_pos, d_rot, d_gap)
    # and the motion is LIBERO's OSC's: the yaw block turned far more than 0.1 rad per unit would, the fingers
    # closed during the descent (not before it)
    yaw = [math.atan2(*_yaw_terms(q)) for _, q, _ in in_process]
    assert abs(wrap_angle(yaw[13] - yaw[5])) > 0.3, yaw
    assert in_process[21][2] < in_process[13][2] - 0.02


def _yaw_terms(q) -> tuple[float, float]:
    x, y, z, w = q
    return 2 * (x * y + z * w), 1 - 2 * (y * y + z * z)


def test_set_gripper_runs_exactly_its_steps_and_a_motion_moves_the_fingers(sim_rig):
    """set_gripper(g, steps) is ``steps`` control steps, as the reference reports it; a motion whose gripper value
    differs closes the fingers during the motion, with no steps of its own."""
    robo = sim_rig.reset()
    step0 = sim_rig.env_step()
    g = robo.set_gripper(robo.CLOSE, steps=3)
    assert g.steps == 3 == sim_rig.env_step() - step0
    robo.set_gripper(robo.OPEN, steps=10)
    assert robo.state().gripper_opening > 0.07
    s = robo.state()
    step1 = sim_rig.env_step()
    move = robo.move_to([s.eef_pos[0], s.eef_pos[1], s.eef_pos[2] - 0.06], robo.CLOSE)
    assert move.reached
    _iterations_match_steps = move.steps_used - (sim_rig.env_step() - step1)
    assert _iterations_match_steps in (0, 1), (move, sim_rig.env_step() - step1)
    assert robo.state().gripper_opening < 0.04, "the fingers closed while the arm moved down"


# ------------------------------------------------------------------------------------- motion (shared)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__.removeprefix("case_"))
def test_motion(sim_rig, case):
    case(sim_rig)
