"""The task card as the model reads it: the instruction, the scene and the episode facts of a ``CardRecord``.
"""

from __future__ import annotations

from pathlib import Path

from pyrua_ros.records.records import CardRecord


def render_card(card: CardRecord, *, transfer: bool | None = None) -> str:
    """The task card in the reference's LIBERO layout (PYRUALEAN-CONTRACT.md 3.8); ``transfer`` defaults to the
    card's."""
    transfer = card.transfer if transfer is None else transfer
    eef = ", ".join(f"{float(v):.3f}" for v in card.eef_pos)
    lines = [
        "# Task card",
        f"- suite: {card.suite}",
        f"- task: {card.task}",
        f"- seed: {card.seed}",
        f"- task instruction (authoritative): {card.task_language!r}",
        f"- movable objects in the scene: {', '.join(card.object_names)}",
        f"- initial gripper position [x, y, z]: [{eef}] m, opening {card.gripper_opening:.3f} (open, pointing down)",
    ]
    lines.extend(f"- {key}: {value}" for key, value in card.facts.items())
    lines.append(f"- simulator step budget: {card.max_env_steps}")
    if card.images:
        names = ", ".join(f"{camera} ({Path(path).name})" for camera, path in card.images.items())
        if transfer:
            lines.append(f"- attached images: {names}. They show ONE example layout (seed {card.seed}) of this "
                         "task; your program will run on OTHER seeds, where objects stand elsewhere, so use them "
                         "only to learn what the objects look like. Do not hard-code pixels or positions read off "
                         "them; localise at run time with `robo.segment`, `robo.back_project`, `robo.region_center` "
                         "and `robo.world_map`.")
        else:
            first = next(iter(card.images))
            lines.append(f"- attached images: {names}. They are step 0 of your run, exactly what "
                         + " / ".join(f"`robo.image('{c}')`" for c in card.images)
                         + f" return before any motion; a pixel (row, col) read off the {first} image turns into "
                         "world coordinates at run time with `robo.back_project(row, col, step=0)`.")
    return "\n".join(lines)
