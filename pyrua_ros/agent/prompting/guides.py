"""The knowledge and guide files shipped with the package (``knowledge/``, ``guides/``), where RPent keeps its
guides, and the note that tells the model about them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[2]
KNOWLEDGE_DIR = PACKAGE_DIR / "knowledge"
GUIDES_DIR = PACKAGE_DIR / "guides"
GUIDE_NAMES = ("strict_hybrid_guide.md", "pro_hybrid_guide.md", "env_calibration.md")
GUIDE_TOPICS = {   # what each guide covers, for the guides note
    "strict_hybrid_guide.md": "rules, localisation, command vocabulary, common failure modes",
    "pro_hybrid_guide.md": "LIBERO-PRO scene frames and perturbation gotchas",
    "env_calibration.md": "reachable workspace and reference heights",
}
RPENT_GUIDES_SUBDIR = ("robots", "libero", "guides")


def guides_note() -> str:
    """The note on ``guides/`` (names and topics from GUIDE_NAMES)."""
    listed = ", ".join(f"`{name}` ({GUIDE_TOPICS[name]})" for name in GUIDE_NAMES)
    return (f"Reference guides: `guides/` in your working directory holds the three operating guides the "
            f"tool-calling version of this system reads, written for its tool interface: {listed}. Their tool "
            "names are the `robo` methods of the same name; remarks about the runner, MCP or servers do not "
            "apply here. Reading them is optional.")


def rpent_guides_dir(rpent_root: str | os.PathLike | None = None) -> Path | None:
    """``$RPENT_ROOT/robots/libero/guides`` when RPENT_ROOT (or ``rpent_root``) is set and holds the three guides."""
    root = rpent_root or os.environ.get("RPENT_ROOT") or os.environ.get("RPENT_REPO_ROOT")
    if not root:
        return None
    folder = Path(root).joinpath(*RPENT_GUIDES_SUBDIR)
    return folder if all((folder / name).is_file() for name in GUIDE_NAMES) else None


def missing_guides(folder: str | os.PathLike) -> list[str]:
    """The GUIDE_NAMES that ``folder`` does not hold as files (the guides note names all three)."""
    return [name for name in GUIDE_NAMES if not (Path(folder) / name).is_file()]


def copy_guides(workspace: Path, source_dir: Path | None = None, *, rpent_root: str | None = None) -> dict[str, Any]:
    """Copy the guides into ``workspace/guides/`` and return ``result.json``'s ``guides`` entry
    ``{source, files: {name: sha256}}``: every ``*.md`` of ``source_dir`` when given (it must hold the three guides
    the note names, GUIDE_NAMES; ValueError naming the missing ones otherwise), else the three guides of RPent
    (``$RPENT_ROOT/robots/libero/guides``, as the reference copies them) when it has them, else ours."""
    if source_dir is not None:
        missing = missing_guides(source_dir)
        if missing:
            raise ValueError(f"guides dir {source_dir} lacks {', '.join(missing)}: the guides note names "
                             f"{', '.join(GUIDE_NAMES)}")
        sources = sorted(Path(source_dir).glob("*.md"))
        source = str(source_dir)
    else:
        folder = rpent_guides_dir(rpent_root) or GUIDES_DIR
        sources = [folder / name for name in GUIDE_NAMES]
        source = str(folder)
    target = Path(workspace) / "guides"
    target.mkdir(parents=True, exist_ok=True)
    files = {}
    for path in sources:
        shutil.copyfile(path, target / path.name)
        files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"source": source, "files": files}
