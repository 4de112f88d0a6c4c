"""The segmentation label map's naming convention, shared by the simulator (which writes it) and robo (which reads).

``/sim/segmentation_labels`` maps each instance id to a name: an object or fixture (``wooden_cabinet_1``), the
arena (``table``, ``robot``), or a part of an object, named ``<object>_<part>`` (``wooden_cabinet_1_top_drawer``,
``wooden_cabinet_1_top_drawer_handle``, ``flat_stove_1_burner``). A part label extends its object's label, so a
reader can tell parts from objects by the prefix alone. ``PART_WORDS`` are the words a part name ends in, in the
order a name carrying several of them prefers.
"""

from __future__ import annotations

PART_WORDS: tuple[str, ...] = ("handle", "burner", "knob", "button", "door", "window", "lid", "rack", "shelf", "slot",
                               "drawer")


def is_part_of(label: str, owner: str) -> bool:
    """True when ``label`` names a part of ``owner`` (``owner_<words>``, not an instance number)."""
    return label != owner and label.startswith(owner + "_") and not label[len(owner) + 1:].isdigit()
