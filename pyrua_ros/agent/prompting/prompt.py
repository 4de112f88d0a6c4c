"""The prompt a model reads: arm contract + API reference of the live ``robo`` class + knowledge + task card.

Laid out as PyRUA-Lean lays it out (PYRUALEAN-CONTRACT.md 3.8, 3.9, 4.3), because the seed model was trained on
that layout: the parts joined by blank lines in the order contract, ``# API reference (the `robo` object)`` +
reference, knowledge, task card. The reference is generated from the live class with ``inspect`` (never a
hand-kept copy): ``class Name`` and the indented class docstring, ``Constants:`` with indented ``robo.X = value``
lines (uppercase, not ``ClassVar``), ``Methods and attributes of `robo`:`` with every public member in definition
order (base classes first; a property as ``robo.name -> type  (read-only attribute)``; a signature on one line when
it fits in 88 characters, else one parameter per line), ``Result types (frozen dataclasses; access fields as
attributes):`` with ``class Name(field: type, ...)``, its docstring and its properties as ``    .name -> type:
doc``, and the ``Exceptions:`` block. Under the no-VLA primitive set the ``VLA_PRIMITIVES`` and the result types
only they return are left out.

Every fact the contract states is generated from the code that enforces it (the tool names, the names predefined
in the kernel, the cameras, the import allow-list, the rich-feedback limit, the finish statuses, the planar move
limit, the episode-end reasons, the guide names); ``test_prompt_facts`` fails when they drift apart. With
``reference_root`` (``--reference-root`` / ``$PYRUALEAN_REFERENCE_ROOT``) the docstrings, the exceptions block, the
contract templates and the knowledge file come from the user's PyRUA-Lean sources instead (parsed, never imported:
:mod:`pyrua_ros.agent.prompting.reference_source`), laid out the same way, so the model sees its training prompt.

The parts live in their own modules: :mod:`.contract` (the arm contract), :mod:`.api_reference` (the
reference), :mod:`.guides` (knowledge and guide files), :mod:`.card` (the task card); this one joins them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

from pyrua_ros.agent.prompting.api_reference import (
    REFERENCE_HEADING,
    SINGLE_SHOT_REFERENCE_HEADING,
    LiveDocs,
    _check_choice,
    effective_primitives,
    render_reference,
)
from pyrua_ros.agent.prompting.card import render_card
from pyrua_ros.agent.prompting.contract import ROBOT_WORDING, PromptOptions, contract_text
from pyrua_ros.agent.prompting.guides import KNOWLEDGE_DIR
from pyrua_ros.agent.prompting.reference_source import ReferenceDocs, ReferenceSource
from pyrua_ros.records.records import CardRecord
from pyrua_ros.settings.config import REFERENCE_ROOT_ENV
from pyrua_ros.settings.modes import PRIMITIVE_SETS


def knowledge_text(robot: str = "libero", primitives: str = "full", *, reference_root: str | None = None) -> str:
    """The robot's knowledge file: ``knowledge/<robot>.md``, or ``<robot>-novla.md`` for the no-VLA set; from the
    reference's package when ``reference_root`` is given and has it."""
    _check_choice("robot", robot, tuple(ROBOT_WORDING))
    _check_choice("primitives", primitives, PRIMITIVE_SETS)
    name = f"{robot}.md" if primitives == "full" else f"{robot}-novla.md"
    if reference_root:

        text = ReferenceSource.locate(reference_root).knowledge(name)
        if text is not None:
            return text.strip()
    return (KNOWLEDGE_DIR / name).read_text(encoding="utf-8").strip()


@dataclasses.dataclass(frozen=True)
class PromptBundle:
    """A built prompt: ``system`` (contract + reference + knowledge), ``user`` (task card), ``images`` (paths of
    the card images, attached to the first message), ``primitives`` (the set the prompt describes), ``sources``
    (where the text came from: ``live`` or the reference root). ``text`` is the whole prompt as one string."""

    system: str
    user: str
    images: tuple[str, ...] = ()
    primitives: str = "full"
    sources: str = "live"

    @property
    def text(self) -> str:
        """System and user parts joined by a blank line (the play prompt, written to ``prompt.txt``)."""
        return "\n\n".join(p for p in (self.system, self.user) if p)

    @property
    def chars(self) -> int:
        """Length of ``text`` in characters."""
        return len(self.text)

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of ``text`` (UTF-8)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def record(self) -> dict[str, Any]:
        """``result.json``'s ``prompt`` entry: ``{chars, sha256, images}``."""
        return {"chars": self.chars, "sha256": self.sha256, "images": list(self.images)}

    def messages(self) -> list[dict[str, str]]:
        """Chat messages: a system message (when there is a system part) and a user message."""
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return [*messages, {"role": "user", "content": self.user}]


def reference_root_from_env(value: str | None = None) -> str | None:
    """``value`` (``--reference-root``), else ``$PYRUALEAN_REFERENCE_ROOT``, else None."""
    return value or os.environ.get(REFERENCE_ROOT_ENV) or None


def build_prompt(robot: Any, card: CardRecord | None, options: PromptOptions, *,
                 card_dir: Path | None = None) -> PromptBundle:
    """Join contract, ``# API reference`` + the reference of ``robot`` (class or instance), knowledge and the
    rendered ``card`` with blank lines. ``card_dir`` resolves relative card image paths. Without a card only
    the system part is built. A robot whose class has no VLA skill gets the no-VLA prompt even when ``full``
    was requested (``bundle.primitives`` says which was used)."""
    cls = robot if isinstance(robot, type) else type(robot)
    primitives = effective_primitives(robot, options.primitives)
    if primitives != options.primitives:
        options = dataclasses.replace(options, primitives=primitives)
    max_env_steps = card.max_env_steps if card is not None else 10000
    heading = SINGLE_SHOT_REFERENCE_HEADING if options.arm == "single-shot" else REFERENCE_HEADING
    docs: LiveDocs = LiveDocs()
    contract = None
    if options.reference_root:

        source = ReferenceSource.locate(options.reference_root)
        docs = ReferenceDocs(source)
        if options.arm != "single-shot":
            contract = source.contract(options, class_name=cls.__name__, max_env_steps=max_env_steps,
                                       wording=ROBOT_WORDING[options.robot])
    if contract is None:
        contract = contract_text(options, class_name=cls.__name__, max_env_steps=max_env_steps)
    reference = render_reference(robot, primitives=options.primitives, docs=docs)
    system = "\n\n".join([
        contract.rstrip(),
        heading + "\n\n" + reference.rstrip(),
        knowledge_text(options.robot, options.primitives, reference_root=options.reference_root),
    ])
    sources = "live" if docs.origin == "live" else str(docs.origin)
    if card is None:
        return PromptBundle(system=system, user="", primitives=primitives, sources=sources)
    images = tuple(str(Path(card_dir) / p) if card_dir is not None else str(p) for p in card.images.values())
    return PromptBundle(system=system, user=render_card(card, transfer=options.transfer), images=images,
                        primitives=primitives, sources=sources)
