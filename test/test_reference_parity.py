"""Parity with PyRUA-Lean: each behaviour the trained model's code relies on, as a case with the reference's
expected outcome. Every test's docstring cites the reference file and function (package ``pyrualean``, or RPent's
LIBERO primitive driver for motion) whose behaviour it pins (facts: ../shared/docs/PYRUALEAN-CONTRACT.md 2, 3.9).

robo runs on the in-process kinematic double of :mod:`rigs.kinematic` (the real driver core over a world that
tracks twists exactly; its ``host`` and ``robo`` fixtures); the tool results go through the real kernel and
toolkit. The same behaviours on the real LIBERO sim are in test_robo_ros.py (motion, parts, past steps,
camera_meta) and test_sim_parts.py / test_sim_env.py (past steps).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rigs.kinematic import HOME

from pyrua_ros.agent.loop.toolkit import ArmToolkit
from pyrua_ros.kernel import Kernel, KernelLimits
from pyrua_ros.kernel.policy import ALLOWED_MODULES, blocked_names, refusal_text
from pyrua_ros.records.records import CardRecord, TurnRecord
from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.settings.config import AgentSettings

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


# ------------------------------------------------------------------------------------------ casts
def test_pixels_and_steps_are_cast_with_int(robo):
    """``libero.py::LiberoRobot.back_project`` sends ``int(row)``, ``int(col)``, ``int(step)``: floats, numpy scalars
    and one-element arrays work (``robo.back_project(*np.median(pixels, 0))``), and a float inside the image is
    not "outside"."""
    pixels = np.array([[40, 10], [50, 12], [48, 11]])
    by_median = robo.back_project(*np.median(pixels, 0))
    assert by_median.pixel == (48, 11) and by_median.world_xyz == robo.back_project(48, 11).world_xyz
    assert robo.back_project(np.int64(48), np.array([11]), step=np.float32(0.0)).pixel == (48, 11)
    assert robo.back_project(47.9, 11.2).pixel == (47, 11)
    with pytest.raises(ToolError, match=r"pixel \(96,3\) out of bounds"):
        robo.back_project(96.0, 3.0)


def test_segment_point_and_region_ranges_are_cast_with_int(robo):
    """``libero.py::LiberoRobot.segment`` sends ``[int(point[0]), int(point[1])]``; ``region_center`` sends
    ``int(row_range[0])`` ...; ``_robot.py::RobotBase.state`` sends ``int(step)``."""
    seg = robo.segment(point=(np.float64(48.0), np.int32(40)))
    assert seg.found and seg.score == 1.0
    rc = robo.region_center((np.int64(40), 56.0), [np.float32(30), 50])
    assert rc.n_valid > 3
    assert robo.state(0.0).step == robo.state(np.array([0])).step == 0


# ------------------------------------------------------------------------------------------ pass-through values
@pytest.mark.parametrize(("call", "tool", "what"), [
    (lambda r: r.move_to([-0.2, 0.0, 1.1], tol=-1), "move_to", "tol must be a finite number >= 0"),
    (lambda r: r.move_to([-0.2, 0.0, 1.1], step_clip=0), "move_to", "step_clip must be a finite number > 0"),
    (lambda r: r.move_to([-0.2, 0.0, 1.1], max_steps=0), "move_to", "max_steps must be at least 1"),
    (lambda r: r.set_gripper(1.0, steps=0), "set_gripper", "steps must be at least 1"),
    (lambda r: r.release(max_steps=-1), "release", "max_steps must be at least 1"),
    (lambda r: r.segment(), "segment", "give a prompt"),
    (lambda r: r.segment("plate", min_score=float("nan")), "segment", "min_score must be a finite number"),
    (lambda r: r.camera_meta("side"), "view_camera_meta", "unknown camera 'side'"),
    (lambda r: r.back_project(3, 3, resolution="mid"), "back_project", "unknown resolution 'mid'"),
])
def test_values_the_reference_passes_to_its_backend_come_back_as_tool_errors(robo, call, tool, what):
    """``libero.py`` passes ``tol``, ``step_clip``, ``max_steps``, ``steps``, ``min_score``, the camera of
    ``camera_meta`` / ``segment`` / ``back_project`` and a segment without prompt or point straight to RPent with
    ``float()`` / ``int()``; what comes back is a ``ToolError`` the model can read, not a ValueError."""
    with pytest.raises(ToolError, match=f"^{tool}: {what}"):
        call(robo)


def test_min_score_outside_0_1_is_a_threshold_not_an_error(robo):
    """``libero.py::LiberoRobot.segment`` sends ``float(min_score)`` unchecked: above 1 nothing passes, below 0 all."""
    assert not robo.segment("plate", min_score=1.5).found
    assert robo.segment("plate", min_score=-1).found


@pytest.mark.parametrize(("call", "text"), [
    (lambda r: r.move_to([0.0, 0.0]), "xyz must be 3 finite numbers"),
    (lambda r: r.move_to([-0.2, 0.0, 1.1], gripper=2), r"gripper must be in \[-1, 1\]"),
    (lambda r: r.move_to([0.2, 0.0, 1.1]), "planar move of 0.410 m exceeds 0.30 m"),
    (lambda r: r.rotate_wrist(), "exactly one of target_yaw or delta_yaw"),
    (lambda r: r.image("side"), "camera must be one of agentview, wrist"),
])
def test_the_checks_the_reference_makes_itself_stay_value_errors(robo, call, text):
    """``libero.py``: ``_xyz``, ``_gripper``, ``_check_planar_move`` (0.30 m + 1e-6), the exactly-one rule of
    ``rotate_wrist`` / ``rotate_pitch`` and ``_robot.py::RobotBase._image_name`` raise ValueError before dispatch."""
    with pytest.raises(ValueError, match=text):
        call(robo)
    with pytest.raises(TypeError):   # float(None), as the reference's cast raises
        robo.move_to([-0.2, 0.0, 1.1], tol=None)


# ------------------------------------------------------------------------------------------ motion
def test_move_to_clips_per_axis_and_counts_iterations_like_the_primitive(robo, host):
    """RPent's LIBERO ``move_to``: each step ``np.clip(target - pos, -step_clip, step_clip) / action_scale`` (a
    diagonal is not slowed to the straight-line norm), stop when ``dist < tol``, ``steps_used = len(traj)`` (the
    converged check counts), positions and distances rounded to 4 decimals; ``reached = final_dist_m <= tol``."""
    target = [HOME[0] + 0.10, HOME[1] + 0.10, HOME[2] - 0.10]
    move = robo.move_to(target)
    env_steps = host.ledger.records[-1].env_steps
    assert env_steps == 4                 # 0.10 per axis at 0.025 per step and axis (the norm would need 7)
    assert move.steps_used == env_steps + 1 and move.reached
    assert move.final_dist_m == round(move.final_dist_m, 4)
    assert all(v == round(v, 4) for v in move.final_eef_pos) and list(move.target_xyz) == pytest.approx(target)
    short = robo.move_to([target[0] + 0.2, target[1], target[2]], max_steps=3)
    assert short.steps_used == 3 and not short.reached   # out of budget: iterations == steps


def test_rotation_command_and_the_turn_result(robo):
    """RPent's LIBERO ``rotate_wrist``: action ``clip(clip(err, -step_clip, step_clip) / 0.10, -1, 1)`` about world
    z, stop when ``abs(err) < tol``, ``start``/``target``/``final``/``final_err`` rounded to 4 decimals."""
    rot = robo.rotate_wrist(delta_yaw=0.35, gripper=-1.0)
    assert rot.reached and rot.target == pytest.approx(0.35) and rot.steps_used == 5   # 0.1, 0.1, 0.1, 0.05, check
    assert all(v == round(v, 4) for v in (rot.start, rot.target, rot.final, rot.final_err))


def test_set_gripper_reports_the_steps_asked_for(robo):
    """RPent's LIBERO ``set_gripper`` returns ``steps: n`` (the command held for n steps)."""
    assert robo.set_gripper(1.0, steps=7).steps == 7


# ------------------------------------------------------------------------------------------ exceptions, results
def test_episode_finished_reads_as_its_reason():
    """``_backend.py::EpisodeFinished.__init__`` calls ``super().__init__(reason)``: ``str(exc) == reason``."""
    for reason in ("terminated", "truncated", "timeout", "cancelled"):
        assert str(EpisodeFinished(reason)) == reason == EpisodeFinished(reason).reason


def test_camera_meta_has_the_rpent_names(robo):
    """RPent's LIBERO camera metadata names ``intrinsic_K``, ``extrinsic_cam2world``, ``depth_near``, ``depth_far``
    and the image size; ``libero.py::LiberoRobot.camera_meta`` returns that dict (ours keeps K and T too)."""
    meta = robo.camera_meta("agentview")
    assert meta["intrinsic_K"] == meta["K"] and meta["extrinsic_cam2world"] == meta["T_world_optical"]
    assert (meta["height"], meta["width"]) == (96, 96) and "depth_near" in meta and "depth_far" in meta


def test_part_prompts_find_parts(robo, host):
    """``libero.py::LiberoRobot.segment`` promises part prompts; a part the scene lacks is not found (not the whole
    object). The model reads no label (the overlay's twin holds surface statistics only); the ledger record says
    which label matched, and on a miss what the scene has, for operators."""
    burner = robo.segment("stove burner")
    extras = json.loads(robo.artifact(burner.overlay_artifact.replace(".png", ".json")))
    assert burner.found and "label" not in extras and "flat_stove_1" not in json.dumps(extras)
    assert "'flat_stove_1_burner'" in host.ledger.records[-2].note
    missing = robo.segment("bowl handle")
    assert not missing.found and missing.error == "SAM3 returned no candidate"
    assert "flat_stove_1 (parts: burner)" in host.ledger.records[-1].note


def test_past_steps_are_available_for_every_recorded_step(robo, host):
    """``_robot.py::RobotBase.image`` loads ``artifact(name, step)`` of any recorded step (RPent records every
    step's images): here the driver renders a step never viewed from its record of it."""
    robo.move_to([HOME[0] + 0.05, 0.0, HOME[2]])
    robo.move_to([HOME[0] + 0.05, 0.0, HOME[2] - 0.05])
    env_step_1 = host.artifacts.env_steps[1]
    assert robo.image(step=1)[0, 0, 1] == env_step_1 and robo.world_map(step=1).shape == (96, 96, 3)
    assert robo.segment("plate", step=1).step == 1 and robo.back_project(48, 10, step=1).step == 1


# ------------------------------------------------------------------------------------------ the cell tool
@pytest.fixture
def toolkit(tmp_path, host):
    kernel = Kernel(host.robo, tmp_path / "ws", limits=KernelLimits())
    yield ArmToolkit(AgentSettings(feedback="pure", images="none"), host, kernel, tmp_path / "ws")
    kernel.close()


def test_cell_results_keep_the_reference_key_order_and_truncation(toolkit):
    """``arms.py::ArmToolkit._python``: keys ``cell``, then ``value`` / ``exception`` / ``episode_finished``, then
    ``stdout``, ``stderr``, ``elapsed_s``; ``arms.py::_trim(text, 4000)`` keeps the first and last 2,000
    characters around ``\\n... [N chars omitted] ...\\n``."""
    reply = toolkit.execute("python", {"code": "print('hi')\n'a' * 5000"})
    assert list(reply.payload) == ["cell", "value", "stdout", "stderr", "elapsed_s"]
    value = reply.payload["value"]
    assert value.startswith("'" + "a" * 1999 + "\n... [1002 chars omitted] ...\n") and value.endswith("a" * 1999 + "'")
    error = toolkit.execute("python", {"code": "raise ValueError('x' * 3000 + 'y' * 3000)"}).payload
    assert list(error) == ["cell", "exception", "stdout", "stderr", "elapsed_s"]
    head, _, tail = error["exception"].partition(" chars omitted] ...\n")
    assert head.startswith("Traceback") and tail.endswith("y" * 1999 + "\n") and len(tail) == 2000


def test_mcp_prefixed_tool_names_are_the_tools_and_turns_are_numbered_from_zero(toolkit):
    """``mcp_server.py`` reduces ``mcp__<server>__<tool>`` to the last ``__`` part; ``arms.py::ArmToolkit.
    execute_tool`` numbers turns ``len(self.turns)`` (0-based) and sandbox flags by that index."""
    assert toolkit.execute("mcp__pyrualean__python", {"code": "getattr(robo, 'task')"}).ok
    assert toolkit.execute("python", {"code": "1 + 1"}).payload["value"] == "2"
    assert [t.index for t in toolkit.turns] == [0, 1]
    assert toolkit.sandbox_flags == [{"turn": 0, "flags": ["probe:getattr"]}]
    assert TurnRecord(index=0, tool="python", elapsed_s=0.1, ok=True, moved=False, env_steps=0,
                      terminated=False).to_json()["index"] == 0


def test_the_reference_sandbox_modules_import(toolkit):
    """``sandbox.py::ALLOWED_MODULES`` includes ``traceback`` and ``operator``; every allowed module is installed."""
    code = "import traceback, operator\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    text = traceback.format_exc()\n"
    code += "operator.itemgetter(1)([4, 5]), 'ZeroDivisionError' in text"
    assert toolkit.execute("python", {"code": code}).payload["value"] == "(5, True)"
    every = "\n".join(f"import {m}" for m in ALLOWED_MODULES) + "\n'ok'"
    reply = toolkit.execute("python", {"code": every}).payload
    assert reply.get("value") == "'ok'", reply


def test_blocked_names_are_refused_when_used_not_when_mentioned(toolkit):
    """``sandbox.py`` matches blocked names as attribute, bare name or whole string constant: a string that only
    mentions one runs. Ours also refuses a constant format string's field that reads one (``str.format`` looks it
    up past the guarded ``getattr``)."""
    mention = "print('do not touch __globals__ or f_back'); 'x.__code__ {}'.format(1)"
    reply = toolkit.execute("python", {"code": mention}).payload
    assert reply.get("stdout") == "do not touch __globals__ or f_back\n" and reply.get("value") == "'x.__code__ 1'"
    assert blocked_names("getattr(len, '__self__')") == ["__self__"]
    assert blocked_names("'{0.__globals__}'.format(f)") == ["__globals__"]
    assert blocked_names("'{0:{1.gi_frame}}'.format(1, g)") == ["gi_frame"]
    assert blocked_names("'{0.f_back} {'.format(f)") == ["f_back"]  # not a valid format string: scanned whole
    refused = toolkit.execute("python", {"code": "getattr(len, '__self__')"}).payload
    assert refused["exception"] == refusal_text(["__self__"])


def test_card_facts_are_a_dict():
    """``prompt.py::TaskCard.facts`` is ``dict[str, Any]`` rendered as ``- key: value`` bullets."""
    card = CardRecord(suite="s", task=0, seed=0, task_language="t", object_names=(), eef_pos=(0, 0, 0),
                      eef_quat=(0, 0, 0, 1), gripper_opening=0.08, images={}, max_env_steps=10,
                      facts={"table top z": 0.9})
    assert card.to_json()["facts"] == {"table top z": 0.9} and CardRecord.from_json(card.to_json()) == card
    assert math.isclose(card.facts["table top z"], 0.9)


# ------------------------------------------------------------------------------------------ texts the model reads
# Each expected value is the reference's wording (pyrualean runner.py ``load_policy``, arms.py ``_blocked_message``
# and ``_run_program``; RPent robots/libero/tools.py ``back_project``, sam3_server.py ``_select_top``), written
# from those facts; ``{ws}`` is the workspace, as the program's absolute path shows it.
@pytest.fixture
def program_toolkit(tmp_path, host):
    kernel = Kernel(host.robo, tmp_path / "ws", limits=KernelLimits())
    yield ArmToolkit(AgentSettings(arm="program", feedback="pure", images="none"), host, kernel, tmp_path / "ws")
    kernel.close()


PROGRAM_TEXTS = [
    ("x = 1", "{ws}/program_01.py does not define a callable 'run'"),
    ("x = 1 / 0\ndef run(robo):\n    pass", "importing {ws}/program_01.py failed: division by zero"),
    ("import os\ndef run(robo):\n    pass",
     "importing {ws}/program_01.py failed: module 'os' is not available inside the policy sandbox; available: "),
    ("def run(robo)\n    pass", "importing {ws}/program_01.py failed: expected ':' (program_01.py, line 1)"),
    ("def run(robo):\n    return run.__globals__, robo.__self__",
     "SandboxError: __globals__, __self__ may not be used by policy code; the program was not run.  Stay within "
     "the documented `robo` API."),
]


@pytest.mark.parametrize(("code", "expected"), PROGRAM_TEXTS)
def test_a_program_that_does_not_run_reads_as_the_reference_words_it(program_toolkit, code, expected):
    """A refused program, or one that does not load (``PolicyLoadError``: one line, no traceback), returns only
    ``program``, ``file`` and ``exception``: no status, stdout, stderr, elapsed_s or programs_left."""
    payload = program_toolkit.execute("run_program", {"code": code}).payload
    ws = (program_toolkit.workspace).resolve()
    assert list(payload) == ["program", "file", "exception"], payload
    assert payload["exception"].startswith(expected.format(ws=ws)), payload["exception"]


def test_a_program_that_ran_has_the_reference_keys(program_toolkit):
    """``_run_program``: ``reason`` and ``exception`` only when set; the timeout's reason is ``timeout``."""
    ran = program_toolkit.execute("run_program", {"code": "def run(robo):\n    print(robo.OPEN)"}).payload
    assert list(ran) == ["program", "file", "status", "stdout", "stderr", "elapsed_s", "programs_left"]
    assert (ran["status"], ran["stdout"]) == ("completed", "-1.0\n")
    failed = program_toolkit.execute("run_program", {"code": "def run(robo):\n    1 / 0"}).payload
    assert list(failed)[:4] == ["program", "file", "status", "exception"] and failed["status"] == "error"


def test_cells_that_do_not_run_carry_only_cell_and_exception(toolkit):
    """``_python``: a refused cell and a cell with a SyntaxError are ``{cell, exception}``."""
    refused = toolkit.execute("python", {"code": "getattr(robo, '__self__').x.__globals__"}).payload
    assert refused == {"cell": 1, "exception": "SandboxError: __globals__, __self__ may not be used by policy code; "
                                               "the cell was not run.  Stay within the documented `robo` API."}
    broken = toolkit.execute("python", {"code": "x = (1,"}).payload
    assert list(broken) == ["cell", "exception"] and broken["exception"].startswith("SyntaxError: ")
    assert broken["exception"].endswith("(cell_002.py, line 1)")


@pytest.mark.parametrize(("call", "expected"), [
    (lambda r: r.back_project(96, 3), "back_project: pixel (96,3) out of bounds; agentview image is 96x96"),
    (lambda r: r.back_project(-1, 3), "back_project: pixel (-1,3) out of bounds; agentview image is 96x96"),
    (lambda r: r.back_project(300, 3, resolution="low"),
     "back_project: pixel (300,3) out of bounds; agentview image is 32x32"),
    (lambda r: r.region_center((10, 10), (0, 5)),
     "back_project: empty region after clamping to image 96x96: rows [10,10] cols [0,5]"),
    (lambda r: r.region_center((40, 56), (30, 50), z_min=5.0),
     "back_project: too few valid pixels in region after z-filter (0); widen the window or the z band"),
    (lambda r: r.segment(point=(500, 3)), "segment: point [row, col] [500, 3] is outside image shape [96, 96]"),
])
def test_perception_errors_are_the_reference_tool_errors(robo, call, expected):
    with pytest.raises(ToolError) as info:
        call(robo)
    assert str(info.value) == expected


def test_a_segment_miss_says_what_sam3_says_and_never_lists_the_scene(robo, host):
    """RPent's segment on no mask: ``found`` False, no ``world_xyz``, ``error`` = SAM3's reason. The scene's labels
    are kept in the call's ledger record (calls.jsonl, for operators), never in what the model reads."""
    miss = robo.segment("the purple unicorn")
    assert (miss.found, miss.world_xyz, miss.error) == (False, None, "SAM3 returned no candidate")
    assert "plate_1" not in repr(miss) and "plate_1" in host.ledger.records[-1].note
    low = robo.segment("round plate", min_score=0.99)
    assert not low.found and low.error == f"top score {low.score:.3f} is below min_score 0.990"


def test_the_audit_flags_blocked_names_reached_through_getattr_strings(toolkit):
    """``sandbox.py::audit_source`` adds ``escape:<name>`` for a string constant naming an escape name, so the
    turn's record shows what ``getattr(x, '__globals__')`` reached for (the cell itself is refused)."""
    toolkit.execute("python", {"code": "f = robo.state\ngetattr(f, '__globals__')"})
    assert toolkit.sandbox_flags == [{"turn": 0, "flags": ["probe:getattr", "escape:__globals__"]}]


def test_tool_call_errors_are_the_reference_words(program_toolkit):
    """``arms.py::ArmToolkit.execute_tool`` / ``_run_program``: an unknown tool and a run_program without source."""
    assert program_toolkit.execute("python", {"code": "1"}).payload == {"error": "unknown tool: python"}
    assert program_toolkit.execute("run_program", {}).payload == {"error": "run_program needs `code` or `path`"}
