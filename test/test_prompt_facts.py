"""The prompt against its sources: sizes next to the reference's, every stated fact against the code that enforces
it (drift tests), and rendering from a user's PyRUA-Lean sources and RPent guides.

The reference-shaped tree below is written here with our own text: it has the reference's file layout and names
(``src/pyrualean/libero.py`` ...), never its words, so the tests check that whatever those files say is what the
model gets.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from pyrua_ros.agent.prompting import api_reference as api_ref
from pyrua_ros.agent.prompting import card as card_mod
from pyrua_ros.agent.prompting import contract as contract_mod
from pyrua_ros.agent.prompting import guides as guides_mod
from pyrua_ros.agent.prompting import prompt as P
from pyrua_ros.agent.runtimes.tools import tool_specs
from pyrua_ros.kernel.policy import ALLOWED_MODULES, PREDEFINED_NAMES
from pyrua_ros.records.records import CardRecord
from pyrua_ros.robo.arguments import MAX_PLANAR_MOVE_M
from pyrua_ros.robo.errors import EPISODE_END_REASONS
from pyrua_ros.robo.libero import LiberoRobot, robot_class
from pyrua_ros.settings.config import REFERENCE_ROOT_ENV
from pyrua_ros.settings.modes import FINISH_STATUSES, RICH_CALL_LIMIT
from pyrua_ros.wire.interfaces import load

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

# A libero_goal_swap card like the seed command's (the reference's size figure uses a libero_goal card of 685 chars).
CARD = CardRecord(suite="libero_goal_swap", task=3, seed=0,
                  task_language="put the wine bottle on top of the cabinet",
                  object_names=("akita_black_bowl_1", "plate_1", "wine_bottle_1", "cream_cheese_1", "bowl_drainer_1",
                                "ketchup_1"),
                  eef_pos=(-0.2103, 0.0, 1.1712), eef_quat=(1.0, 0.0, 0.0, 0.0), gripper_opening=0.0792,
                  images={"agentview": "card/agentview_high.png", "wrist": "card/wrist_high.png"}, max_env_steps=10000)
SEED_FLAGS = {"arm": "cells", "images": "on-demand", "feedback": "pure", "guides": True, "max_turns": 40,
              "budget_s": 5400.0}


def seed_prompt(primitives: str, **extra) -> P.PromptBundle:
    options = contract_mod.PromptOptions(primitives=primitives, **{**SEED_FLAGS, **extra})
    return P.build_prompt(robot_class(primitives), CARD, options)


# ----------------------------------------------------------------------------------------------------- sizes
@pytest.mark.parametrize(("primitives", "reference_chars"), [("full", 26_203), ("no-vla", 22_000)])
def test_seed_prompt_is_no_larger_than_the_reference(primitives, reference_chars):
    """PYRUALEAN-CONTRACT.md 3.9: the reference's prompt for the seed flags is 26,203 characters with the VLA skills
    (contract 3,085, API reference 16,766, knowledge 5,667, card 685) and about 22,000 without."""
    bundle = seed_prompt(primitives)
    assert bundle.chars <= reference_chars, bundle.chars
    text = bundle.text
    contract = text.index(api_ref.REFERENCE_HEADING)
    reference = text.index("# Operating knowledge") - contract
    assert contract <= 3_200 and reference <= 16_766


# ----------------------------------------------------------------------------------------------------- drift
def test_cameras_named_in_the_prompt_are_the_robots():
    """Cameras come from ``LiberoRobot.CAMERAS`` (reference: ``ADAPTER.show_examples``)."""
    text = seed_prompt("full").text
    shown = re.findall(r"`robo\.show\('(\w+)'\)`", text)
    assert tuple(dict.fromkeys(shown)) == LiberoRobot.CAMERAS
    on_motion = contract_mod.contract_text(contract_mod.PromptOptions(images="on-motion"), class_name="LiberoRobot",
                                           max_env_steps=1)
    assert " and ".join(LiberoRobot.CAMERAS) + " images" in on_motion
    description = tool_specs("cells", "rich", "on-motion")[0]["function"]["description"]
    assert "(" + " and ".join(LiberoRobot.CAMERAS) + ")" in description


def test_resolutions_in_the_docstrings_are_the_drivers():
    """``image`` promises the sizes of ``interfaces.yaml`` sim.resolutions (reference: 1024 high, 256 low)."""
    text = seed_prompt("full").text
    for name, size in load().sim.resolutions.items():
        assert f'``"{name}"`` ({size}x{size})' in text


def test_planar_limit_and_episode_end_reasons_come_from_the_code():
    text = seed_prompt("full").text
    limits = set(re.findall(r"(\d+\.\d+) m in x/y", text))
    assert limits == {f"{MAX_PLANAR_MOVE_M:.2f}"}, limits
    assert f"(reason: {' | '.join(EPISODE_END_REASONS)})" in text


def test_finish_statuses_and_rich_limit_come_from_the_code():
    finish = tool_specs("cells", "pure", "on-demand")[1]["function"]
    assert finish["parameters"]["properties"]["status"]["enum"] == list(FINISH_STATUSES)
    rich = contract_mod.contract_text(contract_mod.PromptOptions(), class_name="LiberoRobot", max_env_steps=1)
    assert f"the last {RICH_CALL_LIMIT}" in rich
    for status in FINISH_STATUSES:
        assert f"`{status}`" in rich or f'status="{status}"' in rich


def test_guides_note_names_the_guides_that_are_copied(tmp_path):
    note = guides_mod.guides_note()
    assert re.findall(r"`(\w+\.md)`", note) == list(guides_mod.GUIDE_NAMES)
    assert sorted(guides_mod.copy_guides(tmp_path)["files"]) == sorted(guides_mod.GUIDE_NAMES)


def test_predefined_names_are_the_kernels(kinematic_kernel):
    """The names the contract and the tool description promise are exactly those a first cell finds."""
    found = kinematic_kernel.run_cell("sorted(k for k in globals() if not k.startswith('__'))", timeout_s=30).value
    assert found == repr(sorted(PREDEFINED_NAMES))
    contract = contract_mod.contract_text(contract_mod.PromptOptions(), class_name="LiberoRobot", max_env_steps=1)
    for name in PREDEFINED_NAMES:
        if name != "numpy":
            assert f"`{name}`" in contract, name
    description = tool_specs("cells", "pure", "none")[0]["function"]["description"]
    assert all(name in description for name in PREDEFINED_NAMES)


def test_modules_the_sandbox_sentence_names_import_or_are_refused_as_it_says(kinematic_kernel):
    """Each module the contract allows imports in the kernel; each it refuses is refused (reference sandbox)."""
    sentence = contract_mod.sandbox_sentence("cells")
    allowed = re.findall(r"`(\w+)`", sentence.split("but not")[0])
    refused = re.findall(r"`(\w+)`", sentence.split("but not")[1].split(";")[0])
    assert allowed and refused and set(allowed) <= set(ALLOWED_MODULES) and not set(refused) & set(ALLOWED_MODULES)
    for module in allowed:
        out = kinematic_kernel.run_cell(f"import {module}", timeout_s=60)
        assert out.exception is None, (module, out.exception)
    for module in refused:
        out = kinematic_kernel.run_cell(f"import {module}", timeout_s=30)
        assert out.exception and "ImportError" in out.exception, module


# ----------------------------------------------------------------------------------------------------- reference
REF_LIBERO = '''
from dataclasses import dataclass

class LiberoRobot(RobotBase):
    """Zebra class text, our own words.

    Second paragraph of the zebra class text."""

    VLA_REFERENCE_EDITS = (("zebra skill sentence.", "zebra no-vla sentence."),)

    @property
    def task(self) -> str:
        """Zebra task text."""

    def move_to(self, xyz, gripper=-1.0):
        """Zebra move_to text.

        Args:
            xyz: zebra xyz line. A zebra skill sentence.
        """

    def pi0_pick(self, prompt):
        """Zebra pick text."""


@dataclass(frozen=True)
class State:
    """Zebra state text."""

    @property
    def eef_yaw(self) -> float:
        """Zebra yaw text."""


ADAPTER = RobotAdapter(name="libero", blurb="a zebra arm", services="a zebra VLA and a zebra mask service",
                       services_novla="a zebra mask service", show_examples="`robo.show('agentview')`")
'''
REF_ROBOT = '''
class RobotBase:
    def image(self, camera, *, resolution="high", step=-1):
        """Zebra image text from the base class."""
'''
REF_PROMPT = '''
def api_reference():
    sections = []
    sections.append(
        "Exceptions:\\n"
        "    ZebraError: zebra line one.\\n"
        "    ValueError: zebra line two."
    )
'''
REF_ARMS = '''
CELLS_CONTRACT = """\\
# Zebra control heading

Zebra {robot_blurb} via `python` with `{cls}`{svc}. {feedback_note}
{image_note}

# Zebra scoring heading
{ending_note}
"""
PROGRAM_CONTRACT = "Zebra program {program_budget} {cls}"
IMAGE_NOTES = {"on-motion": "zebra motion", "on-demand": "zebra show {show_examples}", "none": "zebra none"}
FEEDBACK_NOTES = {"cells": {"pure": "zebra pure", "rich": "zebra rich"},
                  "program": {"pure": "zebra ppure", "rich": "zebra prich"}}
ENDING_NOTES = {"wall": "- zebra wall {budget_s} s, {max_env_steps} steps",
                "calls": "- zebra calls `{tool}`, {max_env_steps} steps"}
GUIDES_NOTE = "Zebra guides note."
LIBERO_ROBOT = {"robot_blurb": "a zebra arm", "cls": "LiberoRobot", "svc": "", "svc_nl": "",
                "show_examples": "`robo.show('agentview')`"}
'''


@pytest.fixture
def reference_tree(tmp_path):
    package = tmp_path / "PyRUA-Lean" / "src" / "pyrualean"
    (package / "knowledge").mkdir(parents=True)
    for name, text in (("libero.py", REF_LIBERO), ("_robot.py", REF_ROBOT), ("prompt.py", REF_PROMPT),
                       ("arms.py", REF_ARMS)):
        (package / name).write_text(textwrap.dedent(text))
    (package / "knowledge" / "libero.md").write_text("# Zebra knowledge\n- zebra fact with the skills\n")
    (package / "knowledge" / "libero-novla.md").write_text("# Zebra knowledge\n- zebra fact\n")
    return tmp_path / "PyRUA-Lean"


def test_reference_sources_render_in_our_layout(reference_tree):
    """``--reference-root``: the reference's docstrings (``libero.py``/``_robot.py``), exceptions block
    (``prompt.py::api_reference``), contract templates (``arms.py::_arm_contract``, ``robot_words``) and knowledge
    file (``knowledge/libero.md``) are what the model gets, in the reference layout; what they lack keeps ours."""
    bundle = seed_prompt("full", reference_root=str(reference_tree))
    text = bundle.text
    assert bundle.sources == str(reference_tree)
    # contract: the template filled as the reference fills it (svc from ADAPTER, on-demand note, calls ending)
    assert text.startswith("# Zebra control heading\n\nZebra a zebra arm via `python` with `LiberoRobot`, "
                           "a zebra VLA and a zebra mask service. zebra pure\nzebra show `robo.show('agentview')`\n\n"
                           "# Zebra scoring heading\n- zebra calls `python`, 10000 steps\n\nZebra guides note.")
    ref = text[text.index(api_ref.REFERENCE_HEADING):]
    assert ("class LiberoRobot\n    Zebra class text, our own words.\n\n    Second paragraph of the zebra class "
            "text.") in ref
    assert "robo.task -> str  (read-only attribute)\n    Zebra task text.\n" in ref
    assert "\n    Zebra image text from the base class.\n" in ref            # a base-class docstring
    assert "-> Move\n    Zebra move_to text.\n\n    Args:\n        xyz: zebra xyz line. A zebra skill sentence." in ref
    assert "robo.pi0_pick(" in ref and "Zebra pick text." in ref
    assert "    Zebra state text.\n    .eef_yaw -> float: Zebra yaw text." in ref
    assert ref.rstrip().endswith("# Zebra knowledge\n- zebra fact with the skills\n\n" + card_mod.render_card(CARD))
    assert "Exceptions:\n    ZebraError: zebra line one.\n    ValueError: zebra line two." in ref
    # members the reference tree does not document keep our docstrings
    assert LiberoRobot.release.__doc__.strip().splitlines()[0] in ref


def test_reference_sources_under_no_vla_apply_its_edits(reference_tree, monkeypatch):
    """Under no-vla the reference's ``VLA_REFERENCE_EDITS`` apply and its ``services_novla`` and
    ``libero-novla.md`` are used; ``$PYRUALEAN_REFERENCE_ROOT`` works like the flag."""
    monkeypatch.setenv(REFERENCE_ROOT_ENV, str(reference_tree))
    bundle = seed_prompt("no-vla", reference_root=P.reference_root_from_env(None))
    text = bundle.text
    assert "xyz: zebra xyz line. A zebra no-vla sentence." in text and "pi0_pick" not in text
    assert "with `LiberoRobot`, a zebra mask service." in text and "# Zebra knowledge\n- zebra fact\n" in text


def test_a_root_without_sources_is_refused_naming_where_it_looked(tmp_path):
    with pytest.raises(ValueError, match=r"no PyRUA-Lean sources found \(looked for libero.py in .*src/pyrualean"):
        seed_prompt("full", reference_root=str(tmp_path))


def test_prompt_command_prints_the_reference_rendering(reference_tree, capsys):
    from pyrua_ros.cli.main import main

    assert main(["prompt", "--arm", "cells", "--system-only", "--reference-root", str(reference_tree)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Zebra control heading") and "Zebra class text" in out
    assert main(["api", "--reference-root", str(reference_tree)]) == 0
    assert capsys.readouterr().out.startswith("class LiberoRobot\n    Zebra class text")


def test_guides_come_from_rpent_root_when_it_has_them(tmp_path, monkeypatch):
    """The reference copies ``<RPENT_ROOT>/robots/libero/guides`` (``arms`` guides note, contract 3.8); without
    them ours are copied."""
    rpent = tmp_path / "RPent"
    guides = rpent.joinpath(*guides_mod.RPENT_GUIDES_SUBDIR)
    guides.mkdir(parents=True)
    for name in guides_mod.GUIDE_NAMES:
        (guides / name).write_text(f"zebra guide {name}\n")
    monkeypatch.setenv("RPENT_ROOT", str(rpent))
    record = guides_mod.copy_guides(tmp_path / "ws")
    assert record["source"] == str(guides)
    assert (tmp_path / "ws" / "guides" / "env_calibration.md").read_text() == "zebra guide env_calibration.md\n"
    (guides / "env_calibration.md").unlink()   # incomplete: ours
    assert guides_mod.copy_guides(tmp_path / "ws2")["source"] == str(guides_mod.GUIDES_DIR)


@pytest.mark.parametrize(("flags", "served"), [
    ([], "no-vla"),                                            # play without a VLA server serves no-vla
    (["--primitives", "no-vla"], "no-vla"),
    (["--vla-endpoint", "127.0.0.1:8000"], "full"),           # with one, the full set the seed was trained on
    (["--vla-server-cmd", "serve --port {port}"], "full"),
])
def test_the_prompt_names_exactly_the_primitives_the_episode_serves(capsys, flags, served):
    """``pyrualean prompt`` derives the primitive set as ``play`` does (``EpisodeSettings.primitive_set``): the
    methods its reference lists are the served robot class's public members, and the VLA is mentioned only when
    the episode has one."""
    from pyrua_ros.agent.loop import primitive_tools
    from pyrua_ros.cli.main import main

    assert main(["prompt", "--arm", "cells", "--system-only", *flags]) == 0
    text = capsys.readouterr().out
    named = set(re.findall(r"^robo\.(\w+)", text, flags=re.MULTILINE))
    cls = robot_class(served)
    assert named == {m.name for m in api_ref.public_members(cls) if not m.name.isupper()}   # constants: OPEN, CLOSE
    tools = set(primitive_tools.primitive_methods(object.__new__(cls)))
    assert tools <= named and ({"pi0_pick", "pi0_doubled"} <= tools) == (served == "full")
    assert ("Pi0.5" in text) == (served == "full") and ("pi0_" in text) == (served == "full")
