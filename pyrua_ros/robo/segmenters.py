"""Segmenters: turn a prompt or a pixel into a mask on a recorded camera image.

``robo.segment`` asks a :class:`Segmenter` for a mask and computes the world point itself (median of the
visible surface from depth), so every segmenter returns the same :class:`MaskResult`.

- :class:`GroundTruthSegmenter` (simulation): matches the prompt against the names in the simulator's instance
  segmentation label map (objects, fixtures, ``table``, parts such as ``flat_stove_1_burner``).
- :class:`HttpSegmenter`: client of an HTTP mask service (a SAM-like model server) for real cameras.

How the ground-truth matcher scores a prompt against a label (score in 0..1):

1. Tokens. The label is lower-cased and split on ``_`` / non-letters, instance numbers are dropped
   (``akita_black_bowl_1`` -> ``akita black bowl``); prompt words likewise, without articles. Plurals are
   singularised and aliases map to one word (``mug`` -> ``cup``, ``frypan``/``skillet`` -> ``pan``,
   ``cupboard`` -> ``cabinet``, ``bin`` -> ``basket``, ...).
2. Relation. The prompt is split at the first relation phrase (``on``, ``in``, ``next to``, ``near``,
   ``between``, ``behind``, ``in front of``, ...) into the head ("the black bowl") and the reference
   ("the stove"; ``between A and B`` gives two references).
3. Head score. Generic shape words (``box``, ``can``, ``object``, ...) count only when the label has them. The
   last remaining word is the noun: noun in the label -> 0.6 + 0.4 x (fraction of the other words in the
   label); noun missing -> 0.4 x (fraction of the other words) (so "stove burner" still finds a stove without
   part labels). A colour in the prompt that contradicts a colour in the label halves the score. Each label
   word the prompt does not mention costs 0.02 (at most 0.1), so the most specific label wins.
4. Candidates are the visible labels within 0.05 of the best score. Without a relation the one with the most
   visible pixels wins; with one, the candidate nearest (world x/y) to the best-matching reference object
   (or to the midpoint of two references) wins.
5. A label that extends another (``flat_stove_1_burner`` of ``flat_stove_1``) is a part: an object's mask
   includes its parts, a part prompt ("stove burner", "top drawer handle") keeps only the part's pixels. A prompt
   that names a part word (handle, burner, knob, door, drawer, ...: ``sim_interfaces.labels.PART_WORDS``) matches
   only labels that have that part; when none has, nothing is found (never the whole object instead).
6. Nothing found answers what RPent's SAM3 segment answers (``NO_CANDIDATE``, or ``below_min_score`` with the
   best score): a real detector never lists the scene, so the model is not told the labels. Which labels were
   considered (and on a miss every object and part the scene has) goes to ``MaskResult.detail``, which robo keeps
   in the call's ledger record for operators (calls.jsonl) and never shows the model.

A point (row, col) selects the object under that pixel (score 1.0); with a prompt as well, the prompt's
candidate that contains the point.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import urllib.error
import urllib.request
from typing import Protocol, runtime_checkable

import numpy as np

from pyrua_ros.robo.backend import SegmentationFrame
from pyrua_ros.robo.codecs import decode_png, encode_png
from pyrua_ros.sim_interfaces.labels import PART_WORDS, is_part_of

STOPWORDS = frozenset({"the", "a", "an", "of", "please", "this", "that", "its", "some", "one", "object's"})
GENERIC = frozenset({"box", "can", "object", "thing", "item", "container", "carton", "package", "pack", "tin"})
COLOURS = frozenset({"black", "white", "red", "green", "blue", "yellow", "brown", "grey", "gray", "pink",
                     "purple", "silver"})
ALIASES = {
    "mug": "cup", "frypan": "pan", "skillet": "pan", "cupboard": "cabinet", "bin": "basket", "gray": "grey",
    "cooktop": "stove", "stovetop": "stove", "hob": "stove", "ketchup": "ketchup", "catsup": "ketchup",
    "fridge": "refrigerator", "dish": "plate", "bbq": "barbecue", "pudding": "pudding", "moka": "moka",
    "button": "knob", "dial": "knob", "layer": "drawer",
}
RELATIONS = ("to the left of", "to the right of", "in front of", "on top of", "left of", "right of", "next to",
             "close to", "near", "between", "beside", "behind", "inside", "under", "on", "in", "at", "by")
HIDDEN_TOKENS = frozenset({"robot", "gripper"})
TIE_MARGIN = 0.05
# what RPent's SAM3 segment says when no mask comes back (robots/libero/sam3_server.py, _select_top)
NO_CANDIDATE = "SAM3 returned no candidate"


def below_min_score(score: float, min_score: float) -> str:
    """RPent's SAM3 text for a top mask scoring under ``min_score``."""
    return f"top score {score:.3f} is below min_score {min_score:.3f}"


def tokens(text: str) -> list[str]:
    """Lower-case word tokens of a label or prompt: split on non-letters, numbers and stopwords dropped,
    plurals singularised, aliases applied."""
    out = []
    for raw in re.split(r"[^a-z]+", text.lower()):
        if not raw or raw in STOPWORDS:
            continue
        word = raw
        if len(raw) > 3 and raw.endswith("es") and raw[:-2].endswith(("sh", "ch", "x")):
            word = raw[:-2]
        elif len(raw) > 3 and raw.endswith("s") and not raw.endswith("ss"):
            word = raw[:-1]
        out.append(ALIASES.get(word, word))
    return out


def split_relation(prompt: str) -> tuple[str, str | None, list[str]]:
    """(head, relation, reference phrases) of a prompt; relation None when there is none."""
    text = " " + re.sub(r"\s+", " ", prompt.lower().strip()) + " "
    best = None
    for rel in RELATIONS:
        idx = text.find(f" {rel} ")
        if idx > 0 and (best is None or idx < best[0] or (idx == best[0] and len(rel) > len(best[1]))):
            best = (idx, rel)
    if best is None:
        return prompt.strip(), None, []
    idx, rel = best
    head, rest = text[:idx].strip(), text[idx + len(rel) + 2:].strip()
    refs = [r for r in re.split(r"\band\b", rest) if r.strip()] if rel == "between" else [rest]
    return head, rel, [r.strip() for r in refs]


def score_label(head: str, label: str) -> float:
    """Score (0..1) of a label name for a head phrase (see the module docstring)."""
    words = tokens(head)
    label_words = tokens(label)
    if not words or not label_words:
        return 0.0
    have = set(label_words)
    content = [w for w in words if w not in GENERIC or w in have] or words
    noun, mods = content[-1], content[:-1]
    frac = (sum(m in have for m in mods) / len(mods)) if mods else 1.0
    score = 0.6 + 0.4 * frac if noun in have else (0.4 * frac if mods else 0.0)
    want_colours, have_colours = COLOURS & set(words), COLOURS & have
    if want_colours and have_colours and not (want_colours & have_colours):
        score *= 0.5
    extra = len(have - set(words))
    score -= min(0.1, 0.02 * extra)
    return float(min(1.0, max(0.0, score)))


@dataclasses.dataclass(frozen=True)
class SegmentRequest:
    """What a segmenter gets: the recorded ``color`` (H, W, 3) uint8 of ``camera`` at ``resolution``; ``prompt``
    and/or ``point`` (row, col) in this image's pixels; ``min_score``; the view's ``world`` map (H, W, 3) m for
    relations (may be None); ``segmentation``: the simulator's instance ids of the same view (ground truth only)."""

    camera: str
    resolution: str
    color: np.ndarray
    prompt: str | None
    point: tuple[int, int] | None
    min_score: float
    world: np.ndarray | None = None
    segmentation: SegmentationFrame | None = None


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One matching instance: ``label``, ``score`` 0..1, ``mask`` (H, W) bool."""

    label: str
    score: float
    mask: np.ndarray


@dataclasses.dataclass(frozen=True)
class MaskResult:
    """A segmenter's answer: ``found``, the chosen ``mask`` (H, W) bool, ``score`` 0..1, ``label`` (matched name
    when known), ``error`` (why nothing was found, as the model reads it), ``instances`` (every candidate, chosen
    one first), ``detail`` (for operators only: the ground truth behind the answer, labels included)."""

    found: bool
    mask: np.ndarray | None = None
    score: float | None = None
    label: str | None = None
    error: str | None = None
    instances: tuple[Candidate, ...] = ()
    detail: str | None = None


@runtime_checkable
class Segmenter(Protocol):
    """Turns a SegmentRequest into a MaskResult. ``needs_segmentation``: robo must render the simulator's
    instance segmentation into the request (ground truth only)."""

    needs_segmentation: bool

    def segment(self, request: SegmentRequest) -> MaskResult:
        ...


class GroundTruthSegmenter:
    """Prompt / point matching on the simulator's instance-id image and label map (see the module docstring)."""

    needs_segmentation = True

    def segment(self, request: SegmentRequest) -> MaskResult:
        seg = request.segmentation
        if seg is None:
            raise ValueError("GroundTruthSegmenter needs request.segmentation (the simulator's instance ids)")
        ids = np.asarray(seg.ids)
        if ids.shape != request.color.shape[:2]:
            raise ValueError(f"segmentation {ids.shape} and image {request.color.shape[:2]} differ in size")
        labels = {int(k): str(v) for k, v in seg.labels.items()}
        groups = _label_groups(labels)
        present = set(np.unique(ids).tolist())
        visible = {name: idset & present for name, idset in groups.items() if idset & present}

        def mask_of(name: str) -> np.ndarray:
            return np.isin(ids, list(visible[name]))

        if request.prompt is None or not request.prompt.strip():
            return self._by_point(request, ids, labels, groups, mask_of)
        head, relation, refs = split_relation(request.prompt)
        wants_robot = bool(HIDDEN_TOKENS & set(tokens(head)))
        wants_parts = [w for w in tokens(head) if w in PART_WORDS]
        owner_words = [w for w in tokens(head) if w not in PART_WORDS and w not in GENERIC]

        def eligible(name: str) -> bool:
            words = tokens(name)
            if HIDDEN_TOKENS & set(words) and not wants_robot:
                return False
            # a part prompt needs a label with that part, of an object the other words name ("plate handle" is no
            # cabinet's handle)
            return all(w in words for w in wants_parts) and (not wants_parts or not owner_words
                                                             or any(w in words for w in owner_words))

        scored = {name: score_label(head, name) for name in groups if eligible(name)}
        if not scored or max(scored.values()) <= 0.0:
            what = f"no {'/'.join(wants_parts)} part" if wants_parts else "nothing"
            return MaskResult(False, error=NO_CANDIDATE, detail=f"{what} in the scene matches {request.prompt!r}; "
                                                                f"the scene has {scene_inventory(labels)}")
        best_name = max(scored, key=lambda n: (scored[n], n in visible))
        best = scored[best_name]
        if best < request.min_score:
            return MaskResult(False, score=best, label=best_name, error=below_min_score(best, request.min_score),
                              detail=f"best match {best_name!r} scores {best:.2f} < min_score {request.min_score}")
        names = [n for n, s in scored.items() if s >= best - TIE_MARGIN and n in visible]
        if not names:   # what a detector cannot see, it does not find
            return MaskResult(False, label=best_name, error=NO_CANDIDATE,
                              detail=f"{best_name!r} matches {request.prompt!r} but is not visible in {request.camera}")
        cands = [Candidate(n, scored[n], mask_of(n)) for n in names]
        if request.point is not None:
            r, c = request.point
            hit = [cand for cand in cands if cand.mask[r, c]]
            if not hit:
                return self._by_point(request, ids, labels, groups, mask_of, prompt_head=head)
            cands = hit + [cand for cand in cands if cand not in hit]
        elif relation is not None and len(cands) > 1:
            cands = _order_by_relation(cands, refs, mask_of=mask_of, visible=visible, world=request.world)
        else:
            cands.sort(key=lambda cand: (-cand.score, -int(cand.mask.sum())))
        chosen = cands[0]
        return MaskResult(True, chosen.mask, chosen.score, chosen.label, None, tuple(cands),
                          detail=f"{request.prompt!r} matched {chosen.label!r} (score {chosen.score:.2f})")

    @staticmethod
    def _by_point(request, ids, labels, groups, mask_of, *, prompt_head: str | None = None) -> MaskResult:
        if request.point is None:
            return MaskResult(False, error="give a prompt or a point")
        r, c = request.point
        pid = int(ids[r, c])
        if pid == 0 or pid not in labels:
            return MaskResult(False, error=NO_CANDIDATE, detail=f"nothing segmented at pixel ({r}, {c}) of "
                                                                f"{request.camera}")
        name = labels[pid]
        owner = min((n for n, idset in groups.items() if pid in idset), key=len, default=name)
        # a point picks the whole object (its parts included), not just the part under the pixel
        root = min((n for n, idset in groups.items() if pid in idset and not any(is_part_of(n, o) for o in groups)),
                   key=len, default=owner)
        score = 1.0 if prompt_head is None else score_label(prompt_head, root)
        mask = mask_of(root)
        return MaskResult(True, mask, score, root, None, (Candidate(root, score, mask),),
                          detail=f"pixel ({r}, {c}) is on {root!r}")


class HttpSegmenter:
    """Client of an HTTP segmentation service (a SAM-like server) that returns a mask.

    Request: ``POST <url>`` with JSON ``{"image_png_b64": str, "prompt": str | null, "point": [row, col] | null,
    "min_score": float}``. Reply: JSON ``{"found": bool, "score": float | null, "mask_png_b64": str | null
    (PNG, nonzero = object, same size as the image), "label": str | null, "error": str | null}``.
    ``timeout_s`` bounds each request; connection failures raise ``ConnectionError`` naming the url.
    """

    needs_segmentation = False

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        self.url = url
        self.timeout_s = timeout_s

    def segment(self, request: SegmentRequest) -> MaskResult:
        body = json.dumps({
            "image_png_b64": base64.b64encode(encode_png(request.color)).decode("ascii"),
            "prompt": request.prompt,
            "point": list(request.point) if request.point is not None else None,
            "min_score": request.min_score,
        }).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                reply = json.loads(resp.read())
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ConnectionError(f"segmentation service {self.url}: {exc}") from exc
        if not isinstance(reply, dict) or "found" not in reply:
            raise ConnectionError(f"segmentation service {self.url}: reply without 'found': {str(reply)[:200]}")
        if not reply["found"] or not reply.get("mask_png_b64"):
            return MaskResult(False, score=reply.get("score"), label=reply.get("label"),
                              error=reply.get("error") or "no mask")
        mask = decode_png(base64.b64decode(reply["mask_png_b64"]))[..., 0] > 0
        if mask.shape != request.color.shape[:2]:
            raise ConnectionError(f"segmentation service {self.url}: mask {mask.shape} for image "
                                  f"{request.color.shape[:2]}")
        score = None if reply.get("score") is None else float(reply["score"])
        label = reply.get("label")
        return MaskResult(True, mask, score, label, None, (Candidate(label or "", score or 0.0, mask),))


def _label_groups(labels: dict[int, str]) -> dict[str, set[int]]:
    """Label name -> ids of that label and of its parts (labels that extend it with ``_<word>``)."""
    groups: dict[str, set[int]] = {}
    for pid, name in labels.items():
        groups.setdefault(name, set()).add(pid)
    names = list(groups)
    for parent in names:
        for child in names:
            if is_part_of(child, parent):
                groups[parent] |= groups[child]
    return groups


def scene_inventory(labels: dict[int, str], limit: int = 700) -> str:
    """The objects of a label map with their parts: ``wooden_cabinet_1 (parts: top drawer, top drawer handle),
    plate_1`` (the arena and the robot left out), cut at ``limit`` characters."""
    names = sorted(set(labels.values()))
    objects = [n for n in names if not any(is_part_of(n, o) for o in names) and not HIDDEN_TOKENS & set(tokens(n))
               and n not in ("table", "floor")]
    parts = []
    for obj in objects:
        own = [n[len(obj) + 1:].replace("_", " ") for n in names if is_part_of(n, obj)]
        parts.append(f"{obj} (parts: {', '.join(own)})" if own else obj)
    text = ", ".join(parts) or "no objects"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _order_by_relation(cands, refs, *, mask_of, visible, world) -> list[Candidate]:
    cand_names = {cand.label for cand in cands}
    points = []
    for ref in refs:
        ref_scores = {n: score_label(ref, n) for n in visible if n not in cand_names}
        if not ref_scores or max(ref_scores.values()) <= 0.0:
            continue
        points.append(_centre(mask_of(max(ref_scores, key=ref_scores.get)), world))
    if not points:
        return sorted(cands, key=lambda cand: (-cand.score, -int(cand.mask.sum())))
    target = np.mean(points, axis=0)
    return sorted(cands, key=lambda cand: float(np.linalg.norm(_centre(cand.mask, world) - target)))


def _centre(mask: np.ndarray, world: np.ndarray | None) -> np.ndarray:
    """World x/y median of a mask when a world map is there, else its pixel centroid (row, col)."""
    if world is not None:
        pts = world[mask]
        pts = pts[np.any(pts != 0, axis=-1)]
        if len(pts):
            return np.median(pts[:, :2], axis=0)
    rows, cols = np.nonzero(mask)
    return np.array([rows.mean(), cols.mean()])
