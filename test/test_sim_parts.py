"""Part labels of LIBERO fixtures (``sim/parts.py``) from the names LIBERO's MJCF gives them, and the segmenter's
part prompts on a label map that has them. The names below are the ones a libero_goal scene loads (printed from
the model); the end-to-end check on the real simulator is in test_robo_ros.py."""

import numpy as np
import pytest

from pyrua_ros.robo.backend import SegmentationFrame
from pyrua_ros.robo.segmenters import GroundTruthSegmenter, SegmentRequest, scene_inventory
from pyrua_ros.sim.parts import part_label
from pyrua_ros.sim_interfaces.labels import is_part_of

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


@pytest.mark.parametrize(("obj", "body", "geom", "mesh", "label"), [
    ("wooden_cabinet_1", "wooden_cabinet_1_cabinet_middle", "wooden_cabinet_1_g28",
     "wooden_cabinet_1_wooden_cabinet_middle_handle_vis", "wooden_cabinet_1_middle_drawer_handle"),
    ("wooden_cabinet_1", "wooden_cabinet_1_cabinet_top", "wooden_cabinet_1_g10",
     "wooden_cabinet_1_wooden_cabinet_top_vis", "wooden_cabinet_1_top_drawer"),
    ("wooden_cabinet_1", "wooden_cabinet_1_base", "wooden_cabinet_1_g0", "wooden_cabinet_1_wooden_cabinet_base_vis",
     None),
    ("flat_stove_1", "flat_stove_1_burner_plate", "flat_stove_1_burner", "flat_stove_1_burnerplate",
     "flat_stove_1_burner"),
    ("flat_stove_1", "flat_stove_1_burner", "flat_stove_1_base_vis", "", None),      # the stove's base, not a burner
    ("flat_stove_1", "flat_stove_1_button", "flat_stove_1_g4", "flat_stove_1_stove_knob_button_vis",
     "flat_stove_1_knob"),
    ("microwave_1", "microwave_1_microdoorroot", "microwave_1_g9", "microwave_1_microdoor", "microwave_1_door"),
    ("microwave_1", "microwave_1_main", "microwave_1_g1", "microwave_1_microbutton", "microwave_1_button"),
    ("wine_rack_1", "wine_rack_1_main", "wine_rack_1_g0", "wine_rack_1_wine_rack_vis", None),   # its own word
    ("new_salad_dressing_1", "new_salad_dressing_1_sald_dressing_body", "new_salad_dressing_1_g0",
     "new_salad_dressing_1_textured_vis", None),
])
def test_part_labels_from_libero_names(obj, body, geom, mesh, label):
    assert part_label(obj, body, geom, mesh) == label
    if label:
        assert is_part_of(label, obj) and not is_part_of(obj + "_2", obj)


LABELS = {1: "wooden_cabinet_1", 2: "wooden_cabinet_1_top_drawer", 3: "wooden_cabinet_1_top_drawer_handle",
          4: "wooden_cabinet_1_middle_drawer", 5: "wooden_cabinet_1_middle_drawer_handle", 6: "flat_stove_1",
          7: "flat_stove_1_burner", 8: "flat_stove_1_knob", 9: "plate_1", 10: "table", 11: "robot"}


def _segment(prompt: str):
    ids = np.zeros((30, 30), np.int32)
    for pid in LABELS:                      # one 2x30 stripe per label
        ids[2 * pid:2 * pid + 2] = pid
    frame = SegmentationFrame(ids, LABELS, 0.0, "agentview", "high")
    return GroundTruthSegmenter().segment(SegmentRequest("agentview", "high", np.zeros((30, 30, 3), np.uint8),
                                                         prompt, None, 0.2, None, frame))


@pytest.mark.parametrize(("prompt", "label"), [
    ("middle drawer handle", "wooden_cabinet_1_middle_drawer_handle"),
    ("the handle of the top drawer", "wooden_cabinet_1_top_drawer_handle"),
    ("middle drawer", "wooden_cabinet_1_middle_drawer"),
    ("stove burner", "flat_stove_1_burner"),
    ("stove button", "flat_stove_1_knob"),
    ("the cabinet", "wooden_cabinet_1"),
])
def test_part_prompts_find_the_part(prompt, label):
    found = _segment(prompt)
    assert found.found and found.label == label, found
    if label == "wooden_cabinet_1":   # an object's mask includes its parts
        assert found.mask.sum() == 2 * 30 * 5


def test_a_part_that_does_not_exist_is_not_found_and_only_operators_see_the_scene():
    """Not the whole plate for "plate handle": nothing. The model reads what RPent's SAM3 segment says (no mask,
    no list of the scene: a real detector has none); the operator's detail says what objects and parts exist."""
    missing = _segment("plate handle")
    assert not missing.found and missing.error == "SAM3 returned no candidate"
    assert missing.detail.startswith("no handle part in the scene matches 'plate handle'; the scene has ")
    assert "wooden_cabinet_1 (parts: middle drawer, middle drawer handle, top drawer, top drawer handle)" in \
        missing.detail and "flat_stove_1 (parts: burner, knob)" in missing.detail and "plate_1" in missing.detail
    assert "robot" not in scene_inventory(LABELS) and "table" not in scene_inventory(LABELS)
    elephant = _segment("purple elephant")
    assert elephant.error == "SAM3 returned no candidate" and "the scene has" in elephant.detail
