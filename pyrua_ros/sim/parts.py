"""Part names of LIBERO's articulated fixtures, for the instance segmentation's label map.

PyRUA-Lean's API promises part prompts ("stove burner", "top drawer handle"). LIBERO's scenes carry the parts in
their MJCF: a cabinet's drawers are the bodies ``<cabinet>_cabinet_top|middle|bottom`` and their handles are
meshes named ``..._top_handle_vis``; the stove's burner is the geom ``<stove>_burner`` and its knob the mesh
``..._stove_knob_button_vis``; the microwave's door is the body ``<microwave>_microdoorroot``. A visual geom of a
named object gets the label ``<object>_<part>`` (``wooden_cabinet_1_middle_drawer_handle``,
``flat_stove_1_burner``), which extends the object's own label, so the segmenter treats it as a part of that
object: the object's mask includes it, a part prompt selects only it. Geoms without a part word stay the object.

Pure Python over names (no MuJoCo import): the episode hands in, per visual geom, its object, body, geom and mesh
names.
"""

from __future__ import annotations

import re

from pyrua_ros.sim_interfaces.labels import PART_WORDS  # in order of preference: the stove's knob is "knob_button"

_BODY_PARTS = (
    (re.compile(r"^cabinet_(top|middle|bottom)$"), r"\1_drawer"),   # LIBERO cabinets: one body per drawer
    (re.compile(r"door"), "door"),                                  # microwave: microdoorroot
)


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z]+", name.lower()) if t]


def body_part(obj: str, body: str) -> str | None:
    """The part a body of ``obj`` is (``top_drawer``, ``door``), or None for the object's own bodies."""
    suffix = body.removeprefix(obj + "_")
    if suffix == body:
        return None
    for pattern, part in _BODY_PARTS:
        if pattern.search(suffix):
            return pattern.sub(part, suffix) if pattern.pattern.startswith("^") else part
    return None


def geom_part(obj: str, *names: str) -> str | None:
    """The part word a geom's own name or mesh name carries (``handle``, ``burner``, ...), or None."""
    found: set[str] = set()
    for name in names:
        if name:
            found.update(_tokens(name.removeprefix(obj + "_")))
    found -= set(_tokens(obj))   # the object's own words (a wine rack's mesh says "rack": not a part)
    found.update(word for word in PART_WORDS for token in list(found) if word in token)  # burnerplate, microdoor
    return next((word for word in PART_WORDS if word in found), None)


def part_label(obj: str, body: str, geom: str, mesh: str) -> str | None:
    """``<obj>_<part>`` of one visual geom of ``obj``, None when it is just the object.

    The body gives the structural part (a drawer, a door), the geom or mesh name the finer one (a handle):
    ``wooden_cabinet_1`` + body ``wooden_cabinet_1_cabinet_middle`` + mesh ``..._middle_handle_vis`` ->
    ``wooden_cabinet_1_middle_drawer_handle``."""
    coarse, fine = body_part(obj, body), geom_part(obj, geom, mesh)
    if coarse and fine and fine not in coarse.split("_"):
        return f"{obj}_{coarse}_{fine}"
    if coarse or fine:
        return f"{obj}_{coarse or fine}"
    return None
