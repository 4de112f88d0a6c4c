"""The PyRUA-Lean reference's own prompt text, read from its source files (parsed with ``ast``, never imported).

When a user has the reference (``--reference-root DIR`` or ``$PYRUALEAN_REFERENCE_ROOT``: a checkout with
``src/pyrualean/`` or the installed ``pyrualean`` package folder), the prompt shows the model the text it was
trained on: the docstrings of ``LiberoRobot``, its ``RobotBase`` and the result dataclasses, the ``Exceptions:``
block, the arm contract templates and the knowledge file. Our code still decides what exists (members,
signatures, result types, primitive set); only the words come from the reference, laid out by
:func:`pyrua_ros.agent.prompting.api_reference.render_reference`. Text the reference does not have falls back to ours.

Files and names read (facts of the reference's layout): ``libero.py`` (class ``LiberoRobot``, the result
dataclasses, ``VLA_REFERENCE_EDITS``, the ``ADAPTER`` wording), ``_robot.py`` (class ``RobotBase``),
``prompt.py`` (the string constant that starts ``Exceptions:``), ``arms.py`` (``CELLS_CONTRACT``,
``PROGRAM_CONTRACT``, ``IMAGE_NOTES``, ``FEEDBACK_NOTES``, ``ENDING_NOTES``, ``GUIDES_NOTE``, ``LIBERO_ROBOT``) and
``knowledge/<robot>[-novla].md``.
"""

from __future__ import annotations

import ast
import functools
import string
from pathlib import Path
from typing import Any

from pyrua_ros.agent.prompting import api_reference as api_ref
from pyrua_ros.agent.prompting import contract as contract_mod
from pyrua_ros.agent.prompting import guides as guides_mod

PACKAGE = "pyrualean"
ROBOT_CLASS = "LiberoRobot"
BASE_CLASS = "RobotBase"


class ReferenceSource:
    """The parsed sources of one PyRUA-Lean package folder ``package`` (holding ``libero.py``)."""

    def __init__(self, package: Path) -> None:
        self.package = Path(package)
        self.root = self.package
        self._trees: dict[str, ast.Module | None] = {}

    @classmethod
    @functools.lru_cache(maxsize=8)
    def locate(cls, root: str | Path) -> ReferenceSource:
        """The package under ``root``: ``root`` itself, ``root/pyrualean`` or ``root/src/pyrualean``; ValueError
        naming the places looked at when none holds ``libero.py``."""
        root = Path(root).expanduser()
        candidates = [root, root / PACKAGE, root / "src" / PACKAGE]
        for folder in candidates:
            if (folder / "libero.py").is_file():
                source = cls(folder)
                source.root = root
                return source
        raise ValueError(f"--reference-root {root}: no PyRUA-Lean sources found (looked for libero.py in "
                         f"{', '.join(str(c) for c in candidates)})")

    # -- parsing --------------------------------------------------------------------------------------------
    def tree(self, name: str) -> ast.Module | None:
        """The parsed module ``name`` (e.g. ``libero.py``), None when the file is missing or does not parse."""
        if name not in self._trees:
            path = self.package / name
            try:
                self._trees[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            except (OSError, SyntaxError, ValueError):
                self._trees[name] = None
        return self._trees[name]

    def _class(self, module: str, name: str) -> ast.ClassDef | None:
        tree = self.tree(module)
        if tree is None:
            return None
        return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)

    def _find_class(self, name: str) -> ast.ClassDef | None:
        return self._class("libero.py", name) or self._class("_robot.py", name)

    def class_doc(self, name: str) -> str | None:
        """The docstring of class ``name`` (libero.py, then _robot.py)."""
        node = self._find_class(name)
        return ast.get_docstring(node) if node is not None else None

    def method_doc(self, name: str) -> str | None:
        """The docstring of member ``name`` of ``LiberoRobot``, else of ``RobotBase`` (an override re-documents)."""
        for module, cls in (("libero.py", ROBOT_CLASS), ("_robot.py", BASE_CLASS)):
            node = self._class(module, cls)
            for item in node.body if node is not None else ():
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                    doc = ast.get_docstring(item)
                    if doc:
                        return doc
        return None

    def property_doc(self, cls: str, name: str) -> str | None:
        """The docstring of property ``name`` of class ``cls`` (a result dataclass)."""
        node = self._find_class(cls)
        for item in node.body if node is not None else ():
            if isinstance(item, ast.FunctionDef) and item.name == name:
                return ast.get_docstring(item)
        return None

    def _assignment(self, module: str, name: str, owner: str | None = None) -> Any:
        """The literal value assigned to ``name`` (module level, or in class ``owner``), None when absent."""
        tree = self.tree(module)
        body = tree.body if tree is not None else []
        if owner is not None:
            node = self._class(module, owner)
            body = node.body if node is not None else []
        for item in body:
            targets = (item.targets if isinstance(item, ast.Assign)
                       else [item.target] if isinstance(item, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and item.value is not None:
                try:
                    return ast.literal_eval(item.value)
                except ValueError:
                    return None
        return None

    def no_vla_edits(self) -> tuple[tuple[str, str], ...]:
        """``LiberoRobot.VLA_REFERENCE_EDITS`` ((old, new) pairs applied under no-vla), or ()."""
        edits = self._assignment("libero.py", "VLA_REFERENCE_EDITS", owner=ROBOT_CLASS)
        return tuple(tuple(pair) for pair in edits) if isinstance(edits, list | tuple) else ()

    def adapter_words(self) -> dict[str, str]:
        """The keyword strings of ``ADAPTER = RobotAdapter(...)`` in libero.py (blurb, services, show_examples)."""
        tree = self.tree("libero.py")
        for item in tree.body if tree is not None else ():
            named = isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ADAPTER"
                                                         for t in item.targets)
            if named and isinstance(item.value, ast.Call):
                words = {}
                for keyword in item.value.keywords:
                    if keyword.arg and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                        words[keyword.arg] = keyword.value.value
                return words
        return {}

    def exceptions(self) -> str | None:
        """The reference's ``Exceptions:`` block (the string constant of prompt.py that starts with it)."""
        tree = self.tree("prompt.py")
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("Exceptions:"):
                return node.value
        return None

    def knowledge(self, name: str) -> str | None:
        """``knowledge/<name>`` of the package, None when absent."""
        path = self.package / "knowledge" / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    # -- the contract -----------------------------------------------------------------------------------------
    def contract(self, options: contract_mod.PromptOptions, *, class_name: str, max_env_steps: int,
                 wording: contract_mod.RobotWording) -> str | None:
        """The arm contract from arms.py's templates, filled as the reference fills them; None when a template
        is missing or asks for a value this renderer does not know (and for the tools arm, which it lacks)."""
        if options.arm not in ("cells", "program"):
            return None
        template = self._assignment("arms.py", "CELLS_CONTRACT" if options.arm == "cells" else "PROGRAM_CONTRACT")
        images = self._assignment("arms.py", "IMAGE_NOTES")
        feedback = self._assignment("arms.py", "FEEDBACK_NOTES")
        ending = self._assignment("arms.py", "ENDING_NOTES")
        words = dict(self._assignment("arms.py", "LIBERO_ROBOT") or {})
        if not (isinstance(template, str) and isinstance(images, dict) and isinstance(feedback, dict)
                and isinstance(ending, dict)):
            return None
        adapter = self.adapter_words()
        phrase = adapter.get("services" if options.primitives == "full" else "services_novla")
        if phrase is None:
            phrase = wording.services if options.primitives == "full" else wording.services_novla
        head, _, tail = phrase.partition(" ")
        words.update(cls=class_name, svc=f", {phrase}" if phrase else "",
                     svc_nl=f", {head}\n{tail}" if tail else (f", {phrase}" if phrase else ""))
        words.setdefault("robot_blurb", adapter.get("blurb", wording.blurb))
        words.setdefault("show_examples", adapter.get("show_examples", " or ".join(
            f"`robo.show('{c}')`" for c in wording.cameras)))
        budget = int(options.budget_s) if float(options.budget_s).is_integer() else options.budget_s
        values = dict(words, budget_s=budget, max_env_steps=max_env_steps,
                      program_budget=contract_mod._program_budget(options))
        try:
            values["image_note"] = images[options.images].format(**values)
            values["feedback_note"] = feedback[options.arm][options.feedback]
            values["ending_note"] = ending[options.budget_mode].format(**values, tool=options.tool)
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            if not fields <= set(values):
                return None
            text = template.format(**values)
        except (KeyError, IndexError, ValueError):
            return None
        guides = self._assignment("arms.py", "GUIDES_NOTE")
        if options.guides:
            text = text.rstrip() + "\n\n" + (guides if isinstance(guides, str) else guides_mod.guides_note()) + "\n"
        return text


class ReferenceDocs(api_ref.LiveDocs):
    """The text of the reference's sources for
    :func:`~pyrua_ros.agent.prompting.api_reference.render_reference`; whatever the
    reference does not document keeps our docstring."""

    def __init__(self, source: ReferenceSource) -> None:
        self.source = source
        self.origin = str(source.root)

    def class_doc(self, cls: type) -> str | None:
        return self.source.class_doc(cls.__name__) or super().class_doc(cls)

    def member_doc(self, cls: type, member: api_ref.Member) -> str | None:
        return self.source.method_doc(member.name) or super().member_doc(cls, member)

    def result_doc(self, cls: type) -> str | None:
        return self.source.class_doc(cls.__name__) or super().result_doc(cls)

    def property_doc(self, cls: type, name: str, fget: Any) -> str | None:
        return self.source.property_doc(cls.__name__, name) or super().property_doc(cls, name, fget)

    def exceptions(self, reasons, planar_limit_m: float) -> str:
        return self.source.exceptions() or super().exceptions(reasons, planar_limit_m)

    def no_vla_edits(self, cls: type) -> tuple[tuple[str, str], ...]:
        return self.source.no_vla_edits()
