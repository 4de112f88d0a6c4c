"""The prompt: reference rendered from a live class, contracts per arm/option, knowledge, guides, task card."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
from typing import ClassVar

import pytest

from pyrua_ros.agent.prompting import api_reference as api_ref
from pyrua_ros.agent.prompting import card as card_mod
from pyrua_ros.agent.prompting import contract as contract_mod
from pyrua_ros.agent.prompting import guides as guides_mod
from pyrua_ros.agent.prompting import prompt as P
from pyrua_ros.records.records import CardRecord
from pyrua_ros.robo.results import RESULT_TYPES

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


@dataclasses.dataclass(frozen=True)
class Dot:
    """A measured point: ``xyz`` m, ``ok`` whether it was found."""

    xyz: tuple[float, float, float]
    ok: bool

    @property
    def norm(self) -> float:
        """Distance from the origin in m."""
        return sum(v * v for v in self.xyz) ** 0.5


@dataclasses.dataclass(frozen=True)
class Hit:
    """Outcome of ``grab``."""

    success: bool


class ToyBase:
    """A toy robot.

    Metres and radians."""

    OPEN = -1.0
    CLOSE = 1.0
    NAME: ClassVar[str] = "toy"
    VLA_PRIMITIVES: ClassVar[tuple[str, ...]] = ("grab",)
    RESULT_TYPES: ClassVar[tuple[type, ...]] = (Dot, Hit)

    @property
    def task(self) -> str:
        """The instruction."""
        return "t"

    def look(self, camera: str = "agentview") -> Dot:
        """Base version."""
        raise NotImplementedError

    def ledger(self) -> None:
        """Host-facing; never rendered."""

    def _private(self) -> None:
        """Never rendered."""


class Toy(ToyBase):
    def move(self, xyz: list[float], gripper: float = -1.0, *, tol: float = 0.012, step_clip: float = 0.025,
             max_steps: int = 80) -> Dot:
        """Servo to ``xyz``.

        Second paragraph."""
        raise NotImplementedError

    def look(self, camera: str = "agentview", *, step: int = -1) -> Dot:
        """Look through ``camera``."""
        raise NotImplementedError

    def grab(self, prompt: str) -> Hit:
        """A VLA skill."""
        raise NotImplementedError



CARD = CardRecord(suite="libero_goal_swap", task=3, seed=0, task_language="open the top drawer and put the bowl inside",
                  object_names=("akita_black_bowl_1", "plate_1"), eef_pos=(-0.2103, 0.0, 1.1712),
                  eef_quat=(1.0, 0.0, 0.0, 0.0), gripper_opening=0.0792,
                  images={"agentview": "card/agentview_high.png", "wrist": "card/wrist_high.png"},
                  max_env_steps=10000)


def test_reference_renders_the_reference_layout():
    """Layout of PyRUA-Lean's ``prompt.py::api_reference``: class header and indented docstring, ``Constants:`` with
    indented ``robo.X = value`` lines, the members heading, ``(read-only attribute)``, one-line signatures up to 88
    characters (one parameter per line beyond), sections separated by one blank line."""
    ref = api_ref.render_reference(Toy)
    assert ref.startswith("class Toy\n    A toy robot.\n\n    Metres and radians.\n\nConstants:\n"
                          "    robo.OPEN = -1.0\n    robo.CLOSE = 1.0\n\nMethods and attributes of `robo`:\n\n")
    assert "NAME" not in ref and "VLA_PRIMITIVES" not in ref and "RESULT_TYPES" not in ref  # ClassVars hidden
    assert "_private" not in ref and "robo.ledger" not in ref
    assert "robo.task -> str  (read-only attribute)\n    The instruction.\n\n" in ref
    # override keeps the base position and takes the derived signature and docstring
    assert "robo.look(camera: str = 'agentview', *, step: int = -1) -> Dot\n    Look through ``camera``." in ref
    assert "Base version" not in ref
    assert ref.index("robo.task") < ref.index("robo.look(") < ref.index("robo.move(") < ref.index("robo.grab(")
    wrapped = ("robo.move(\n    xyz: list[float],\n    gripper: float = -1.0,\n    *,\n    tol: float = 0.012,\n"
               "    step_clip: float = 0.025,\n    max_steps: int = 80,\n) -> Dot\n    Servo to ``xyz``.\n\n"
               "    Second paragraph.")
    assert wrapped in ref


def test_reference_renders_result_types_and_the_exceptions_block():
    """``Result types (...)`` with ``class Name(field: type, ...)``, the docstring and ``    .prop -> type: doc``;
    the ``Exceptions:`` block as three indented lines naming every EpisodeFinished reason (from the code)."""
    ref = api_ref.render_reference(Toy)
    assert ("\n\nResult types (frozen dataclasses; access fields as attributes):\n\nclass Dot(xyz: tuple[float, float, "
            "float], ok: bool)\n    A measured point: ``xyz`` m, ``ok`` whether it was found.\n"
            "    .norm -> float: Distance from the origin in m.\n\nclass Hit(success: bool)") in ref
    exceptions = ref[ref.index("\n\nExceptions:\n"):].strip().splitlines()
    assert exceptions[0] == "Exceptions:" and len(exceptions) == 4
    assert [line.split(":")[0].strip() for line in exceptions[1:]] == [
        "ToolError(RuntimeError)", "ValueError", "EpisodeFinished(BaseException)"]
    from pyrua_ros.robo.errors import EPISODE_END_REASONS
    assert f"(reason: {' | '.join(EPISODE_END_REASONS)})" in exceptions[3]
    assert "0.30 m" in exceptions[2]


def test_no_vla_hides_vla_methods_and_their_only_result_types():
    full, novla = api_ref.render_reference(Toy), api_ref.render_reference(Toy, primitives="no-vla")
    assert "robo.grab" in full and "class Hit" in full
    assert "robo.grab" not in novla and "class Hit" not in novla
    assert "class Dot(" in novla  # still returned by look/move
    # a class that declares VLA_PRIMITIVES but has none of them renders as no-vla whatever was asked
    base = api_ref.render_reference(ToyBase, primitives="full")
    assert "class Hit" not in base and "class Dot(" in base
    assert api_ref.effective_primitives(ToyBase, "full") == "no-vla"
    assert api_ref.render_reference(Toy()) == full  # an instance renders like its class
    bundle = P.build_prompt(ToyBase, CARD, contract_mod.PromptOptions(primitives="full"))
    assert bundle.primitives == "no-vla" and "pi0" not in bundle.text and "Pi0.5" not in bundle.text
    with pytest.raises(ValueError, match="primitives must be one of full, no-vla"):
        api_ref.render_reference(Toy, primitives="none")


def test_undocumented_members_are_reported():
    class Bare:
        def go(self, x):
            pass

    assert api_ref.undocumented_members(Bare) == ["go: no docstring", "go: no return annotation",
                                            "go: parameter x has no annotation"]
    assert api_ref.undocumented_members(Toy) == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"arm": "notebook"}, "arm must be one of cells, program, tools, single-shot"),
    ({"images": "always"}, "images must be one of on-motion, on-demand, none"),
    ({"feedback": "loud"}, "feedback must be one of pure, rich"),
    ({"robot": "robotwin"}, "robot must be one of libero"),
    ({"max_turns": 0}, "max_turns must be a positive integer"),
])
def test_bad_options_list_valid_choices(kwargs, message):
    with pytest.raises(ValueError, match=message):
        contract_mod.PromptOptions(**kwargs)


def _contract(**kwargs) -> str:
    return contract_mod.contract_text(contract_mod.PromptOptions(**kwargs), class_name="Toy", max_env_steps=10000)


def test_cells_contract_has_the_reference_headings_and_follows_options():
    """PyRUA-Lean's cells contract (``arms.py::CELLS_CONTRACT``): ``# How you control the robot``, then ``# How the
    episode is scored`` and the workspace paragraph; the feedback/image/ending notes follow the options."""
    text = _contract(images="on-demand", feedback="pure")
    assert text.startswith("# How you control the robot\n\nYou control a simulated Franka arm in the LIBERO "
                           "benchmark through ONE tool, `python(code)`.")
    assert text.index("# How you control the robot") < text.index("# How the episode is scored")
    assert "`Toy`" in text and "`robo.show('agentview')` or `robo.show('wrist')`" in text
    assert "exactly what your code produced" in text
    assert "1200 s of wall clock" in text and "10000 simulator steps" in text
    assert "Pi0.5" in text and "Pi0.5" not in _contract(primitives="no-vla")
    # the cell time limit and kernel restarts are told when they happen (in the tool result), not up front
    assert "300 s" not in text and "restart" not in text
    rich = _contract()
    assert "the last 40" in rich and "images are attached" in rich
    assert "never attached" in _contract(images="none")
    calls = _contract(max_turns=37)
    assert "is limited" in calls and "37" not in calls  # the number is not told
    assert "guides/" not in rich and "env_calibration.md" in _contract(guides=True)


def test_program_and_single_shot_contracts():
    program = _contract(arm="program", max_programs=1)
    assert "ONE tool, `run_program`" in program and "EXACTLY ONCE" in program
    assert "at most 3 times" in _contract(arm="program", max_programs=3)
    assert "as many times as the budget allows" in _contract(arm="program")
    single = _contract(arm="single-shot", budget_s=600)
    assert "exactly once" in single and "600 s" in single and "fenced code block tagged `python`" in single


def test_build_prompt_joins_parts_in_the_reference_order(tmp_path):
    """PyRUA-Lean's ``build_prompt``: contract, ``# API reference (the `robo` object)`` + reference, knowledge, card,
    joined by blank lines."""
    bundle = P.build_prompt(Toy, CARD, contract_mod.PromptOptions(), card_dir=tmp_path)
    text = bundle.text
    assert text.startswith("# How you control the robot")
    ref_at = text.index("\n\n" + api_ref.REFERENCE_HEADING + "\n\nclass Toy\n")
    assert text.index("\n\n# Operating knowledge for LIBERO") > ref_at
    assert text.index("\n\n# Task card") > text.index("## Placing and recovery")
    assert bundle.user == card_mod.render_card(CARD) and text == bundle.system + "\n\n" + bundle.user
    assert bundle.images == (str(tmp_path / "card/agentview_high.png"), str(tmp_path / "card/wrist_high.png"))
    assert bundle.record() == {"chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest(),
                               "images": list(bundle.images)}
    assert [m["role"] for m in bundle.messages()] == ["system", "user"] and bundle.sources == "live"
    single = P.build_prompt(Toy, CARD, contract_mod.PromptOptions(arm="single-shot"))
    assert api_ref.SINGLE_SHOT_REFERENCE_HEADING in single.system and api_ref.REFERENCE_HEADING not in single.system
    assert P.build_prompt(Toy, None, contract_mod.PromptOptions()).user == ""


def test_card_rendering_and_round_trip(tmp_path):
    """The reference's LIBERO card (``prompt.py::TaskCard.render``): its bullet labels, 3-decimal positions, facts as
    ``- key: value`` bullets from a dict."""
    text = card_mod.render_card(CARD)
    assert "- task instruction (authoritative): 'open the top drawer and put the bowl inside'" in text
    assert "- movable objects in the scene: akita_black_bowl_1, plate_1" in text
    assert "- initial gripper position [x, y, z]: [-0.210, 0.000, 1.171] m, opening 0.079 (open, pointing down)" in text
    assert "- simulator step budget: 10000\n" in text
    assert "- attached images: agentview (agentview_high.png), wrist (wrist_high.png). They are step 0" in text
    assert "robo.back_project(row, col, step=0)" in text and "hard-code" not in text
    assert "Do not hard-code pixels or positions" in card_mod.render_card(CARD, transfer=True)
    with_facts = dataclasses.replace(CARD, facts={"table top z": 0.9})
    assert "- table top z: 0.9\n- simulator step budget" in card_mod.render_card(with_facts)
    with_facts.write(tmp_path)
    assert CardRecord.read(tmp_path) == with_facts


def test_knowledge_numbers_and_no_vla_variant():
    full, novla = P.knowledge_text("libero", "full"), P.knowledge_text("libero", "no-vla")
    for fact in ("~1.17", "~0.68", "~0.26", "plate_y + 0.045", "0.30 m in x/y", "+y is the robot's LEFT",
                 "region_center", "world_map", "back_project", "top\n  drawer handle"):
        assert fact in full and fact in novla, fact
    assert "## The VLA skills" in full and "pi0_pick" in full
    assert "pi0" not in novla and "VLA skills\n" not in novla
    # the no-VLA file is the full one minus the VLA section, with at most two lines edited (no drift)
    start, end = full.index("## The VLA skills"), full.index("## Perception")
    expected = (full[:start] + full[end:]).splitlines()
    got = novla.splitlines()
    assert len(got) == len(expected)
    assert sum(a != b for a, b in zip(got, expected)) <= 4  # two edited bullets of two lines each


def test_guides_exist_and_copy_with_hashes(tmp_path):
    record = guides_mod.copy_guides(tmp_path)
    assert sorted(record["files"]) == sorted(guides_mod.GUIDE_NAMES)
    for name, digest in record["files"].items():
        copied = (tmp_path / "guides" / name).read_bytes()
        assert hashlib.sha256(copied).hexdigest() == digest and len(copied) > 1500
    pro = (tmp_path / "guides" / "pro_hybrid_guide.md").read_text()
    assert "_swap" in pro and "_lan" in pro and "_task" in pro and "robo.task" in pro
    with pytest.raises(ValueError, match=r"lacks strict_hybrid_guide\.md, pro_hybrid_guide\.md, env_calibration\.md"):
        guides_mod.copy_guides(tmp_path / "x", source_dir=tmp_path / "guides" / "none")


def test_a_guides_dir_without_one_of_the_named_guides_is_refused(tmp_path):
    """The guides note names three files; a folder lacking one would make the note false: refused, naming it."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in guides_mod.GUIDE_NAMES[:2]:
        (folder / name).write_text("# guide\n")
    (folder / "extra.md").write_text("# mine\n")
    with pytest.raises(ValueError, match=r"lacks env_calibration.md: the guides note names strict_hybrid_guide.md"):
        guides_mod.copy_guides(tmp_path / "ws", source_dir=folder)
    assert not (tmp_path / "ws" / "guides").exists()
    (folder / "env_calibration.md").write_text("# guide\n")
    record = guides_mod.copy_guides(tmp_path / "ws", source_dir=folder)
    assert sorted(record["files"]) == sorted([*guides_mod.GUIDE_NAMES, "extra.md"])


HAVE_LIBERO_ROBOT = importlib.util.find_spec("pyrua_ros.robo.libero") is not None


def libero_robot_class(primitives: str) -> type:
    """The real LiberoRobot class of a primitive set (the tests below skip until the module exists)."""
    return importlib.import_module("pyrua_ros.robo.libero").robot_class(primitives)


@pytest.mark.skipif(not HAVE_LIBERO_ROBOT, reason="pyrua_ros.robo.libero not written yet")
class TestRealLiberoRobot:
    def test_full_reference_lists_every_public_member_and_result_type(self):
        full_cls = libero_robot_class("full")
        ref = api_ref.render_reference(full_cls)
        assert "robo.OPEN = -1.0" in ref and "robo.CLOSE = 1.0" in ref
        assert ref.startswith("class LiberoRobot\n    A LIBERO tabletop Franka arm")
        for member in api_ref.public_members(full_cls):
            assert f"robo.{member.name}" in ref, member.name
        order = ["task", "done", "state", "image", "world_map", "show", "artifact", "camera_meta", "segment",
                 "back_project", "region_center", "move_to", "move_pose", "rotate_wrist", "rotate_pitch",
                 "set_gripper", "release", "pi0_pick", "pi0_doubled"]
        positions = [ref.index(f"\nrobo.{name}") for name in order]
        assert positions == sorted(positions)  # the reference order of PYRUALEAN-CONTRACT.md 2.2
        for cls in RESULT_TYPES:
            assert f"class {cls.__name__}(" in ref
        assert api_ref.undocumented_members(full_cls) == []

    @pytest.mark.parametrize("primitives", ["full", "no-vla"])
    def test_no_vla_reference_has_no_vla_members(self, primitives):
        ref = api_ref.render_reference(libero_robot_class(primitives), primitives="no-vla")
        assert "pi0_" not in ref and "Pick" not in ref and "Contact" not in ref
        assert "robo.move_to(" in ref and "class Move(" in ref and "class RegionCenter(" in ref

    @pytest.mark.parametrize("arm", ["cells", "program", "single-shot"])
    @pytest.mark.parametrize("primitives", ["full", "no-vla"])
    def test_full_prompt_is_under_40000_chars(self, arm, primitives):
        options = contract_mod.PromptOptions(arm=arm, primitives=primitives, guides=True)
        bundle = P.build_prompt(libero_robot_class(primitives), CARD, options)
        assert bundle.primitives == primitives
        assert bundle.chars < 40_000, bundle.chars
