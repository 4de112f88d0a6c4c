"""The pure robo layer (LiberoRobot, results, errors, ledger, host) on an in-process kinematic backend.

The backend is the kinematic double of :mod:`rigs.kinematic` (its ``backend``, ``host`` and ``robo`` fixtures): the
real driver core in process, over a small world; the real-sim tests live elsewhere.
"""

import dataclasses
import inspect
import json
import math
import re
import types

import numpy as np
import pytest
from rigs.kinematic import HOME, OBJECTS, R_HOME, SUCCESS_OPENING_M, TABLE_Z, KinematicBackend

from pyrua_ros.robo import results as R
from pyrua_ros.robo.backend import BackendRefused, RobotBackend
from pyrua_ros.robo.codecs import decode_npz, decode_png
from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.robo.ledger import CallRecord, Ledger
from pyrua_ros.robo.libero import MAX_PLANAR_MOVE_M, PI0_CHUNK_STEPS, LiberoRobot, libero_host
from pyrua_ros.rotations import pitch_of, quat_to_matrix, rot_x, rot_z, wrap_angle, yaw_of
from pyrua_ros.wire.convert import matrix_to_quat

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


class ScriptedPolicy:
    """An openpi-like policy: descend, close, lift (7-D OSC actions in [-1, 1])."""

    def __init__(self):
        self.calls = 0
        self.observations = []

    def infer(self, obs):
        self.observations.append(obs)
        self.calls += 1
        if self.calls <= 4:
            a = [0, 0, -0.6, 0, 0, 0, -1]
        elif self.calls <= 5:
            a = [0, 0, 0, 0, 0, 0, 1]
        else:
            a = [0, 0, 0.6, 0, 0, 0, 1]
        return {"actions": np.tile(np.array(a, float), (10, 1))}


# -- contract surface -------------------------------------------------------------------------------------------
CONTRACT_FIELDS = {
    "State": ["step", "task", "eef_pos", "eef_quat", "gripper_qpos", "gripper_opening", "object_names", "terminated",
              "truncated"],
    "Move": ["target_xyz", "final_eef_pos", "final_dist_m", "reached", "steps_used", "max_steps", "terminated",
             "truncated"],
    "MovePose": ["final_eef_pos", "final_dist_m", "final_pitch", "reached", "steps_used", "terminated", "truncated"],
    "Rotation": ["start", "target", "final", "final_err", "reached", "steps_used", "terminated", "truncated"],
    "Gripper": ["gripper", "steps", "terminated", "truncated"],
    "Release": ["steps_used", "start_gripper_opening", "peak_gripper_opening", "final_gripper_opening", "terminated",
                "truncated"],
    "Pick": ["success", "chunks_used", "max_chunks", "peak_lift_m", "min_gripper_opening", "final_gripper_opening",
             "terminated", "truncated", "diagnostics"],
    "Contact": ["success", "chunks_used", "max_chunks", "terminated", "truncated"],
    "Segment": ["found", "world_xyz", "score", "box", "camera", "step", "overlay_artifact", "error"],
    "BackProjection": ["world_xyz", "pixel", "camera", "resolution", "step", "image_size"],
    "RegionCenter": ["center_xyz", "median_xyz", "n_valid", "camera", "step"],
}

CONTRACT_SIGNATURES = {
    "state": "(step: int = -1) -> State",
    "image": "(camera: str = 'agentview', *, resolution: str = 'high', step: int = -1) -> Any",
    "world_map": "(camera: str = 'agentview', *, resolution: str = 'high', step: int = -1) -> Any",
    "show": "(camera: str = 'agentview') -> None",
    "artifact": "(name: str, *, step: int = -1) -> bytes",
    "camera_meta": "(camera: str = 'agentview', *, step: int = -1) -> dict[str, Any]",
    "segment": "(prompt: str | None = None, *, camera: str = 'agentview', point: tuple[int, int] | None = None, "
               "min_score: float = 0.2, step: int = -1) -> Segment",
    "back_project": "(row: int, col: int, *, camera: str = 'agentview', resolution: str = 'high', step: int = -1) "
                    "-> BackProjection",
    "region_center": "(row_range: tuple[int, int], col_range: tuple[int, int], *, camera: str = 'agentview', "
                     "resolution: str = 'high', z_min: float | None = None, z_max: float | None = None, "
                     "step: int = -1) -> RegionCenter",
    "move_to": "(xyz: list[float], gripper: float = -1.0, *, tol: float = 0.012, step_clip: float = 0.025, "
               "max_steps: int = 80, target_yaw: float | None = None, yaw_step_clip: float = 0.1, "
               "action_scale: float = 0.05) -> Move",
    "move_pose": "(xyz: list[float], *, target_pitch: float | None = None, target_yaw: float | None = None, "
                 "gripper: float = -1.0, step_clip: float = 0.02, pitch_step: float = 0.08, yaw_step: float = 0.08, "
                 "tol: float = 0.012, ori_tol: float = 0.05, max_steps: int = 150, action_scale: float = 0.05) "
                 "-> MovePose",
    "rotate_wrist": "(*, target_yaw: float | None = None, delta_yaw: float | None = None, gripper: float = 1.0, "
                    "max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.1) -> Rotation",
    "rotate_pitch": "(*, target_pitch: float | None = None, delta_pitch: float | None = None, gripper: float = 1.0, "
                    "max_steps: int = 40, tol: float = 0.02, step_clip: float = 0.1) -> Rotation",
    "set_gripper": "(gripper: float, steps: int = 5) -> Gripper",
    "release": "(max_steps: int = 20) -> Release",
    "pi0_pick": "(prompt: str, *, max_chunks: int = 24, lift_thresh: float = 0.05, gripper_closed_thresh: float = "
                "0.06, gripper_open_thresh: float = 0.0, descent_thresh: float = 0.1) -> Pick",
    "pi0_doubled": "(prompt: str, *, max_chunks: int = 20) -> Contact",
}


def test_result_types_have_exactly_the_contract_fields_in_order():
    assert [t.__name__ for t in R.RESULT_TYPES] == list(CONTRACT_FIELDS)
    for cls in R.RESULT_TYPES:
        assert [f.name for f in dataclasses.fields(cls)] == CONTRACT_FIELDS[cls.__name__], cls.__name__
        assert cls.__dataclass_params__.frozen, cls.__name__
        assert cls.__doc__ and len(cls.__doc__) > 40


def test_public_signatures_match_the_contract():
    cls = LiberoRobot.__new__(LiberoRobot, KinematicBackend(), primitives="full", vla=ScriptedPolicy())
    full = type(cls)
    for name, expected in CONTRACT_SIGNATURES.items():
        sig = str(inspect.signature(getattr(full, name))).replace("self, ", "").replace("(self)", "()")
        sig = re.sub(r"(: |-> )'([^']*)'", r"\1\2", sig)  # annotations are kept as source strings
        assert sig == expected, name


def test_constants_and_class_configuration():
    assert LiberoRobot.OPEN == -1.0 and LiberoRobot.CLOSE == 1.0
    assert MAX_PLANAR_MOVE_M == 0.30 and PI0_CHUNK_STEPS == 5
    assert LiberoRobot.CAMERAS == ("agentview", "wrist")
    assert LiberoRobot.ON_MOTION_IMAGES == ("agentview_high.png", "wrist_high.png")
    assert LiberoRobot.IMAGE_ARTIFACTS[("agentview", "low")] == "agentview.png"
    assert LiberoRobot.WORLD_MAP_ARTIFACTS[("wrist", "high")] == "wrist_world_high.npz"
    assert LiberoRobot.STATEFUL_TOOLS == {"move_to", "move_pose", "rotate_wrist", "rotate_pitch", "set_gripper",
                                          "release", "pi0_pick", "pi0_doubled"}
    assert LiberoRobot.STATE_TOOL == "view_env_state"


def test_every_public_member_is_documented_and_annotated():
    full = type(LiberoRobot(KinematicBackend(), vla=ScriptedPolicy()))
    assert full.__name__ == "LiberoRobot" and "pi0_pick" in vars(full) and full.__doc__ == LiberoRobot.__doc__
    for name, member in inspect.getmembers(full):
        if name.startswith("_") or name.isupper():
            continue
        fn = member.fget if isinstance(member, property) else member
        assert fn.__doc__ and len(fn.__doc__.strip()) > 30, name
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, name
        for p in list(sig.parameters.values())[1:]:
            assert p.annotation is not inspect.Parameter.empty, f"{name}.{p.name}"


def test_backend_double_satisfies_the_protocol(backend):
    assert isinstance(backend, RobotBackend)


def test_bad_primitive_set_lists_choices(backend):
    with pytest.raises(ValueError, match="full, no-vla"):
        LiberoRobot(backend, primitives="vla")


# -- no-vla ------------------------------------------------------------------------------------------------------
def test_no_vla_surface_has_no_pi0_and_calls_raise_and_are_ledgered(robo, host):
    assert type(robo) is LiberoRobot
    assert not [n for n in dir(type(robo)) if n.startswith("pi0")]
    assert not [n for n, _ in inspect.getmembers(robo) if n.startswith("pi0")]
    with pytest.raises(RuntimeError, match=r"^pi0_pick is not available in this run \(no-VLA primitive set\)$"):
        robo.pi0_pick("pick up the bowl", max_chunks=3)
    rec = host.ledger.records[-1]
    assert (rec.tool, rec.ok, rec.stateful, rec.kwargs) == ("pi0_pick", False, False,
                                                            {"max_chunks": 3, "args": ["pick up the bowl"]})
    with pytest.raises(AttributeError):
        robo.no_such_method  # noqa: B018


def test_full_mode_without_a_vla_client_is_no_vla(backend):
    assert not hasattr(type(LiberoRobot(backend)), "pi0_pick")


# -- motion --------------------------------------------------------------------------------------------------------
def test_move_to_reaches_target_records_state_and_ledger(robo, host, backend):
    target = [-0.05, 0.05, 1.05]
    move = robo.move_to(target)
    assert isinstance(move, R.Move) and move.reached and move.final_dist_m <= 0.012
    # steps_used counts the servo's iterations as the reference does: the converged check is one more than the steps
    assert move.steps_used == backend.step + 1 > 5 and move.max_steps == 80
    assert not move.terminated and not move.truncated
    assert np.allclose(move.final_eef_pos, target, atol=0.012)
    assert robo.state().step == 1 and robo.state(0).step == 0
    assert np.allclose(robo.state(0).eef_pos, HOME)
    rec = next(r for r in reversed(host.ledger.records) if r.tool == "move_to")
    assert (rec.ok, rec.stateful, rec.env_steps) == (True, True, move.steps_used - 1)
    assert rec.summary["final_dist_m"] == move.final_dist_m and "reached" not in rec.summary
    # per-axis cap (the reference's np.clip(diff, -step_clip, step_clip)): the longest axis sets the pace, a
    # diagonal is not slowed to the straight-line norm
    diff = np.array(target) - HOME
    assert math.ceil((np.abs(diff).max() - 0.012) / 0.025) <= backend.step
    assert backend.step < math.ceil((np.linalg.norm(diff) - 0.012) / 0.025)
    # orientation held pointing down
    assert abs(robo.state().eef_pitch) < 1e-3 and abs(robo.state().eef_yaw) < 1e-3


def test_move_to_stops_at_max_steps(robo):
    move = robo.move_to([0.05, 0.0, 0.95], max_steps=3)
    assert not move.reached and move.steps_used == 3 and move.final_dist_m > 0.012


def test_move_to_with_target_yaw(robo, backend):
    """Reference (RPent's LIBERO move_to): the yaw servo rides on the position servo, which alone decides when to
    stop; each step turns at most yaw_step_clip."""
    move = robo.move_to([-0.15, 0.0, 1.10], target_yaw=0.6, yaw_step_clip=0.1)
    assert move.reached and backend.step >= 3
    assert robo.state().eef_yaw == pytest.approx(min(0.6, 0.1 * backend.step), abs=1e-6)


@pytest.mark.parametrize(("call", "match"), [
    (lambda r: r.move_to([0.15, 0.0, 1.0]), "split into waypoints"),
    (lambda r: r.move_pose([-0.21, 0.31, 1.0]), "split into waypoints"),
    (lambda r: r.move_to([0.0, 0.0]), "3 finite numbers"),
    (lambda r: r.move_to([0.0, float("nan"), 1.0]), "3 finite numbers"),
    (lambda r: r.move_to([-0.2, 0.0, 1.0], gripper=1.5), r"gripper must be in \[-1, 1\]"),
    (lambda r: r.rotate_wrist(), "exactly one of target_yaw or delta_yaw"),
    (lambda r: r.rotate_wrist(target_yaw=0.1, delta_yaw=0.1), "exactly one of target_yaw or delta_yaw"),
    (lambda r: r.rotate_pitch(), "exactly one of target_pitch or delta_pitch"),
    (lambda r: r.set_gripper(2.0), r"gripper must be in \[-1, 1\]"),
    (lambda r: r.image("side"), "camera must be one of agentview, wrist"),
    (lambda r: r.image(resolution="mid"), "resolution one of high, low"),
])
def test_bad_arguments_are_refused_before_dispatch(robo, backend, call, match):
    with pytest.raises(ValueError, match=match):
        call(robo)
    assert backend.servo_calls == 0 and backend.gripper_goals == [] and backend.step == 0


@pytest.mark.parametrize(("call", "match"), [
    (lambda r: r.move_to([-0.2, 0.0, 1.0], step_clip=0), "move_to: step_clip must be a finite number > 0"),
    (lambda r: r.release(max_steps=0), "release: max_steps must be at least 1"),
    (lambda r: r.segment(), "segment: give a prompt"),
    (lambda r: r.segment(point=(500, 3)), r"segment: point \[row, col\] \[500, 3\] is outside image shape \[96, 96\]"),
    (lambda r: r.state(5), r"view_env_state: step 5 is not a recorded step: recorded steps are 0..0"),
])
def test_values_the_reference_passes_through_are_tool_errors_and_nothing_moves(robo, backend, call, match):
    with pytest.raises(ToolError, match=match):
        call(robo)
    assert backend.servo_calls == 0 and backend.gripper_goals == [] and backend.step == 0


def test_planar_limit_is_inclusive_with_tolerance(robo):
    assert robo.move_to([-0.21 + 0.30, 0.0, 1.17], max_steps=1).steps_used == 1


def test_gripper_value_is_sent_once_and_held(robo, backend):
    robo.move_to([-0.2, 0.0, 1.1], gripper=robo.OPEN)
    assert backend.gripper_goals == []          # starts open: nothing to send
    robo.move_to([-0.2, 0.0, 1.05], gripper=robo.CLOSE)
    assert backend.gripper_goals == [0.0] and backend.gap < 0.005
    robo.move_to([-0.2, 0.0, 1.10], gripper=1.0)
    assert backend.gripper_goals == [0.0]
    robo.move_to([-0.2, 0.0, 1.10], gripper=0.0)
    assert backend.gripper_goals == [0.0, pytest.approx(0.04)]


def test_set_gripper_and_release_until_success(robo, backend):
    g = robo.set_gripper(robo.CLOSE, steps=12)
    assert isinstance(g, R.Gripper) and g.gripper == 1.0 and g.steps == 12 and backend.gap < 0.005
    robo.move_to([-0.05, 0.10, 1.0], gripper=1.0, max_steps=150)
    robo.move_to([0.05, 0.20, 1.0], gripper=1.0, max_steps=150)
    rel = robo.release(max_steps=40)
    assert rel.terminated and rel.steps_used < 40
    assert rel.start_gripper_opening < 0.005 and rel.final_gripper_opening >= SUCCESS_OPENING_M  # status: to 1 um
    assert rel.peak_gripper_opening >= rel.final_gripper_opening
    assert robo.done and robo.state().terminated


def test_rotate_wrist_and_pitch_keep_position(robo):
    rot = robo.rotate_wrist(delta_yaw=0.5, gripper=robo.OPEN)
    assert isinstance(rot, R.Rotation) and rot.reached and abs(rot.final - 0.5) <= 0.02
    assert rot.start == pytest.approx(0.0, abs=1e-6) and rot.target == pytest.approx(0.5)
    pit = robo.rotate_pitch(target_pitch=0.4, gripper=robo.OPEN, max_steps=60)
    assert pit.reached, pit
    state = robo.state()
    assert abs(state.eef_pitch - 0.4) <= 0.02 and abs(state.eef_yaw - 0.5) <= 0.05
    assert np.allclose(state.eef_pos, HOME, atol=0.01)


def test_move_pose_covaries_position_and_pitch(robo):
    res = robo.move_pose([-0.10, 0.05, 1.05], target_pitch=0.5)
    assert isinstance(res, R.MovePose) and res.reached and abs(res.final_pitch - 0.5) <= 0.05


# -- episode end -------------------------------------------------------------------------------------------------
def test_termination_freezes_motion_but_not_reads(robo, host, backend):
    robo.set_gripper(robo.CLOSE)
    robo.move_to([-0.05, 0.10, 1.0], gripper=1.0, max_steps=150)
    robo.move_to([0.05, 0.20, 1.0], gripper=1.0, max_steps=150)
    assert not robo.done
    rel = robo.release()
    assert rel.terminated
    calls = backend.servo_calls
    with pytest.raises(EpisodeFinished) as info:
        robo.move_to([0.05, 0.20, 1.05])
    assert info.value.reason == "terminated" and backend.servo_calls == calls
    assert not isinstance(info.value, Exception)
    rec = host.ledger.records[-1]
    assert (rec.tool, rec.ok, rec.stateful) == ("move_to", False, False) and rec.error.startswith("EpisodeFinished")
    assert robo.state().terminated and robo.image().shape == (96, 96, 3)
    assert robo.segment("plate").found


def test_truncation_mid_move_returns_then_refuses():
    backend = KinematicBackend(max_episode_steps=4)
    robo = LiberoRobot(backend, primitives="no-vla")
    move = robo.move_to([-0.05, 0.0, 1.05])
    assert move.truncated and move.steps_used == 4 and not move.reached
    with pytest.raises(EpisodeFinished, match="truncated"):
        robo.set_gripper(1.0)


def test_host_stop_ends_the_running_motion_with_its_reason(host, robo, backend):
    def stop_after_three(b):
        if b.step == 3:
            host.stop("timeout")

    backend.on_servo = stop_after_three
    with pytest.raises(EpisodeFinished) as info:
        robo.move_to([-0.05, 0.0, 1.05])
    assert info.value.reason == "timeout" and backend.step == 3 and backend.cancelled
    assert robo.state().step == 1   # the partial motion is still recorded
    with pytest.raises(EpisodeFinished, match="timeout"):
        robo.release()


def test_episode_finished_reasons_are_validated():
    assert EpisodeFinished("call_budget").reason == "call_budget"
    with pytest.raises(ValueError, match="terminated, truncated, timeout, cancelled, call_budget"):
        EpisodeFinished("bored")


def test_tool_error_shape():
    err = ToolError("segment", "no mask", {"error": "x"})
    assert isinstance(err, RuntimeError) and str(err) == "segment: no mask"
    assert (err.tool, err.message, err.payload) == ("segment", "no mask", {"error": "x"})


def test_estop_refusal_is_a_tool_error(robo, backend):
    def refuse(*_):
        raise BackendRefused("e-stop active", "estop")

    backend.servo = refuse
    with pytest.raises(ToolError, match="move_to: driver refused: e-stop active"):
        robo.move_to([-0.2, 0.0, 1.1])


# -- VLA ------------------------------------------------------------------------------------------------------
def test_pi0_pick_runs_chunks_through_servo_and_reports_heuristic():
    backend, policy = KinematicBackend(), ScriptedPolicy()
    host = libero_host(backend, primitives="full", vla=policy)
    robo = host.robo
    assert "pi0_pick" in dir(type(robo)) and isinstance(robo, LiberoRobot)
    pick = robo.pi0_pick("pick up the black bowl", max_chunks=12, lift_thresh=0.05, descent_thresh=0.10)
    assert isinstance(pick, R.Pick) and pick.success
    assert pick.peak_lift_m >= 0.05 and pick.min_gripper_opening < 0.06
    assert 6 <= pick.chunks_used < 12 and backend.gripper_goals == [0.0]
    obs = policy.observations[0]
    assert obs["observation/image"].shape == (224, 224, 3) and obs["observation/wrist_image"].dtype == np.uint8
    assert obs["observation/state"].shape == (8,) and obs["prompt"] == "pick up the black bowl"
    assert np.allclose(obs["observation/state"][:3], HOME, atol=1e-6)
    rec = host.ledger.records[-1]
    assert rec.tool == "pi0_pick" and rec.stateful and rec.summary["chunks_used"] == pick.chunks_used
    # every chunk is PI0_CHUNK_STEPS servo steps except the last, cut when the heuristic fired
    assert backend.servo_calls <= pick.chunks_used * PI0_CHUNK_STEPS


def test_pi0_doubled_runs_max_chunks():
    backend = KinematicBackend()
    robo = LiberoRobot(backend, vla=types.SimpleNamespace(infer=lambda obs: {"actions": np.zeros((8, 7))}))
    res = robo.pi0_doubled("turn on the stove", max_chunks=3)
    assert isinstance(res, R.Contact) and res.chunks_used == 3 and not res.success
    assert backend.servo_calls == 3 * PI0_CHUNK_STEPS


def test_pi0_bad_policy_reply_is_a_tool_error():
    robo = LiberoRobot(KinematicBackend(), vla=types.SimpleNamespace(infer=lambda obs: {"oops": 1}))
    with pytest.raises(ToolError, match="pi0_doubled: VLA policy server"):
        robo.pi0_doubled("push", max_chunks=1)


# -- images and artifacts -------------------------------------------------------------------------------------
def test_images_are_captured_lazily_per_step(robo, backend):
    img = robo.image()
    assert img.shape == (96, 96, 3) and img.dtype == np.uint8
    assert robo.image(resolution="low").shape == (32, 32, 3)
    robo.move_to([-0.2, 0.0, 1.15])
    after_first = backend.step
    robo.move_to([-0.2, 0.0, 1.13])
    assert robo.image(step=0).shape == (96, 96, 3)          # step 0 was viewed while current
    assert robo.image(step=1)[0, 0, 1] == after_first        # a past step: the driver renders it from its record
    assert robo.image()[0, 0, 1] == backend.step            # current step rendered now
    assert [c for c in backend.captures if c[:2] == ("agentview", "high")] == [
        ("agentview", "high", 0), ("agentview", "high", after_first), ("agentview", "high", backend.step)]


def test_a_driver_without_a_record_of_the_past_says_so():
    robo = libero_host(KinematicBackend(keeps_history=False), primitives="no-vla").robo
    robo.move_to([-0.2, 0.0, 1.15])
    with pytest.raises(ToolError, match="no image was captured at step 0 and agentview: this driver renders the "
                                        "current state only"):
        robo.image(step=0)


def _artifact_session(raw_bytes: int, max_bytes: int) -> dict:
    """A short session on a fresh host whose store keeps ``raw_bytes`` of raw arrays before encoding: every byte
    and array the model or the records could get, and what the byte cap dropped."""
    host = libero_host(KinematicBackend(), primitives="no-vla")
    host.artifacts.raw_bytes, host.artifacts.max_bytes = raw_bytes, max_bytes
    robo = host.robo
    host.capture_boot_images()
    seen = {"card": host.artifact("agentview_high.png", step=0), "image0": robo.image("agentview").tobytes()}
    x, y, z = robo.state().eef_pos
    for k in range(3):
        robo.move_to([x + 0.01 * (k + 1), y, z])
        seen[f"image{k + 1}"] = robo.image("agentview").tobytes()
        seen[f"world{k + 1}"] = robo.world_map("wrist").tobytes()
    for step in sorted({0, host.artifacts.current_step}):
        for name in ("agentview_high.png", "agentview_depth.npz", "agentview_world_high.npz"):
            seen[f"{name}@{step}"] = robo.artifact(name, step=step)
    seen["evicted"] = sorted(host.artifacts.evicted_steps)
    return seen


@pytest.mark.parametrize("max_bytes", [1, 512 * 2**20])
def test_artifacts_encoded_only_when_needed_are_the_same_bytes(monkeypatch, max_bytes):
    """Captures are kept raw and encoded only when their bytes are asked for (or past the raw budget): every
    artifact, image and eviction is what encoding each capture at once in the background (raw budget 0) gives."""
    from pyrua_ros.robo import artifacts

    encoded = []
    real_png = artifacts.encode_png
    monkeypatch.setattr(artifacts, "encode_png", lambda rgb: encoded.append(rgb.shape) or real_png(rgb))
    eager = _artifact_session(0, max_bytes)
    encoded.clear()
    lazy = _artifact_session(96 * 2**20, max_bytes)
    assert lazy == eager
    if max_bytes > 1:   # nothing dropped: of the colour captures (8) only the 2 asked for as PNG bytes were encoded
        assert len(encoded) == 2, encoded


def test_world_map_and_artifacts(robo):
    wmap = robo.world_map()
    assert wmap.shape == (96, 96, 3) and np.all(wmap[0, 0] == 0)
    assert wmap[48, 10, 2] == pytest.approx(TABLE_Z, abs=1e-4)
    png = robo.artifact("agentview_high.png")
    assert np.array_equal(decode_png(png), robo.image())
    assert np.allclose(decode_npz(robo.artifact("agentview_world_high.npz")), wmap)
    assert decode_npz(robo.artifact("agentview_depth.npz")).shape == (96, 96)
    with pytest.raises(ToolError, match=r"no artifact 'nope\.png'.*agentview_high\.png"):
        robo.artifact("nope.png")


def test_host_boot_images_summary_and_show_queue(host, robo):
    host.capture_boot_images()
    assert decode_png(host.artifact("wrist_high.png")).shape == (96, 96, 3)
    summary = host.summary()
    assert set(summary) == {"step", "eef_pos", "eef_yaw", "eef_pitch", "gripper_opening", "terminated", "truncated"}
    assert summary["eef_pos"] == [-0.21, 0.0, 1.17] and summary["gripper_opening"] == 0.08
    n = len(host.ledger)
    robo.show("wrist")
    robo.show("wrist")
    robo.show()
    assert host.take_show_requests() == ["wrist", "agentview"] and host.take_show_requests() == []
    assert len(host.ledger) == n + 3
    with pytest.raises(ValueError, match="agentview, wrist"):
        robo.show("top")


def test_camera_meta(robo):
    meta = robo.camera_meta()
    assert meta["image_size"] == [96, 96] and np.allclose(meta["position"], [0.0, 0.05, 1.60])
    assert np.array(meta["K"]).shape == (3, 3) and np.array(meta["T_world_optical"]).shape == (4, 4)
    assert robo.state().task == robo.task == "put the black bowl on the plate"


def test_segment_world_xyz_and_overlay_json(robo):
    seg = robo.segment("the plate")
    assert isinstance(seg, R.Segment) and seg.found and seg.score > 0.9 and seg.error is None
    cx, cy, _, _, top = OBJECTS["plate_1"]
    assert np.allclose(seg.world_xyz, [cx, cy, top], atol=0.01)
    extras = json.loads(robo.artifact(seg.overlay_artifact.replace(".png", ".json"), step=seg.step))
    assert np.allclose(extras["box_center_xyz"], [cx, cy, top], atol=0.01) and "label" not in extras
    assert decode_png(robo.artifact(seg.overlay_artifact)).shape == (96, 96, 3)
    miss = robo.segment("purple elephant")
    assert not miss.found and miss.world_xyz is None and miss.error


def test_back_project_and_region_center(robo):
    bp = robo.back_project(48, 10)
    assert bp.world_xyz[2] == pytest.approx(TABLE_Z, abs=1e-4) and bp.image_size == (96, 96)
    with pytest.raises(ToolError, match=r"back_project: pixel \(200,3\) out of bounds; agentview image is 96x96"):
        robo.back_project(200, 3)
    with pytest.raises(ToolError, match=r"invalid agentview world xyz at pixel \(0,0\)"):
        robo.back_project(0, 0)
    rc = robo.region_center((0, 96), (0, 96), z_min=0.915, z_max=0.925)
    assert rc.n_valid > 10 and np.allclose(rc.center_xyz[:2], OBJECTS["plate_1"][:2], atol=0.01)
    with pytest.raises(ToolError, match="back_project: empty region after clamping"):
        robo.region_center((10, 10), (0, 5))


# -- ledger ------------------------------------------------------------------------------------------------
def test_ledger_counts_and_jsonl(robo, host, tmp_path):
    robo.state()
    robo.move_to([-0.2, 0.0, 1.12])
    robo.set_gripper(1.0, steps=6)
    with pytest.raises(ValueError):
        robo.move_to([1.0, 1.0, 1.0])
    ledger = host.ledger
    assert [r.tool for r in ledger] == ["view_env_state", "move_to", "set_gripper", "move_to"]
    assert ledger.stateful_calls() == 2
    assert ledger.env_steps() == sum(r.env_steps for r in ledger) == host.backend.step
    assert ledger.records[0].summary == {"step": 0, "terminated": False, "truncated": False,
                                         "eef_pos": [-0.21, 0.0, 1.17]}
    assert ledger.records[-1].error.startswith("ValueError: planar move")
    path = tmp_path / "calls.jsonl"
    ledger.write_jsonl(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["tool"] for line in lines] == [r.tool for r in ledger]
    assert list(lines[1]) == [f.name for f in dataclasses.fields(CallRecord)]


def test_ledger_kwargs_are_json_safe():
    ledger = Ledger()
    rec = ledger.append(tool="x", kwargs={"a": np.float32(1.5), "b": (1, 2), "c": object()}, started_at=0,
                        elapsed_s=0, ok=True, stateful=False, env_steps=-3)
    assert rec.kwargs["a"] == 1.5 and rec.kwargs["b"] == [1, 2] and rec.kwargs["c"].startswith("<object")
    assert rec.env_steps == 0


# -- orientation helpers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("yaw", [0.0, 0.7, -2.5])
@pytest.mark.parametrize("pitch", [0.0, 0.4, -1.2])
def test_state_yaw_pitch_conventions(yaw, pitch):
    r = rot_x(pitch) @ R_HOME if yaw == 0 else rot_z(yaw) @ R_HOME
    q = tuple(matrix_to_quat(r))
    state = R.State(0, "", (0, 0, 0), q, (0.04, -0.04), 0.08, (), False, False)
    if yaw == 0:
        assert state.eef_pitch == pytest.approx(pitch) and state.eef_yaw == pytest.approx(0.0, abs=1e-9)
    else:
        assert state.eef_yaw == pytest.approx(yaw) and state.eef_pitch == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(quat_to_matrix(q), r)
    assert yaw_of(r) == pytest.approx(state.eef_yaw) and pitch_of(r) == pytest.approx(state.eef_pitch)


def test_pitch_half_pi_points_along_plus_y():
    r = rot_x(math.pi / 2) @ R_HOME
    assert np.allclose(r[:, 2], [0, 1, 0])   # approach axis
    assert pitch_of(r) == pytest.approx(math.pi / 2)


def test_wrap_angle():
    assert wrap_angle(3 * math.pi / 2) == pytest.approx(-math.pi / 2)
    assert wrap_angle(math.pi) == pytest.approx(-math.pi)
    assert wrap_angle(-0.25) == -0.25


# -- bounds on what the host keeps (issue 9) --------------------------------------------------------------------
def test_motion_calls_that_step_nothing_are_charged_to_the_step_budget():
    """``move_to(current, max_steps=1)`` in a loop once recorded states forever at no simulator cost; each such
    state now costs one step of the episode's budget, and the episode ends as truncated at the budget."""
    backend = KinematicBackend(max_episode_steps=30)
    host = libero_host(backend, primitives="no-vla")
    robo = host.robo
    here = list(robo.state().eef_pos)
    with pytest.raises(EpisodeFinished) as ended:
        for _ in range(100):
            robo.move_to(here, max_steps=1)
    assert ended.value.reason == "truncated"
    assert backend.step + host.idle_states == 30 and len(host.states) <= 31


def test_the_artifact_store_keeps_its_captures_under_a_byte_cap(robo, host, backend):
    host.artifacts.max_bytes = 1   # every capture beyond the card's and the current one's is dropped
    robo.image("agentview")
    x, y, z = robo.state().eef_pos
    for k in range(3):
        robo.move_to([x + 0.01 * (k + 1), y, z])
        robo.image("agentview")
    assert {1, 2} <= host.artifacts.evicted_steps and 0 not in host.artifacts.evicted_steps
    with pytest.raises(ToolError, match="were dropped to keep the episode's images under"):
        robo.image("agentview", step=1)
    assert robo.image("agentview", step=0).shape[0] == 96 and robo.image("agentview").shape[0] == 96
