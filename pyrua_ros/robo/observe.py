"""What the perception verbs compute on recorded views: camera geometry, masks, back-projected points.

Each function works on the robot host's artifact store (the captured colour, depth and geometry of a recorded
step) and returns the verb's result; ``LiberoRobot`` checks the arguments and ledgers the call. World points are
computed here from depth + intrinsics + camera pose (the simulator is never asked where a pixel is).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pyrua_ros.robo import arguments as check
from pyrua_ros.robo import perception
from pyrua_ros.robo.artifacts import ArtifactStore
from pyrua_ros.robo.errors import ToolError
from pyrua_ros.robo.results import BackProjection, RegionCenter, Segment
from pyrua_ros.robo.segmenters import NO_CANDIDATE, Segmenter, SegmentRequest


def camera_meta(store: ArtifactStore, camera: str, step: int, cameras: Sequence[str]) -> dict[str, Any]:
    """Geometry of ``camera``'s high-res view at ``step`` (see ``LiberoRobot.camera_meta``): our names and the
    RPent names for the same matrices (``intrinsic_K`` = ``K``, ``extrinsic_cam2world`` = ``T_world_optical``)."""
    check.view_on_robot("view_camera_meta", camera, "high", cameras)
    k, t, _ = store.geometry("view_camera_meta", camera, "high", step)
    h, w = store.shape("view_camera_meta", camera, "high", step)
    near, far = store.depth_range("view_camera_meta", camera, "high", step)
    return {"camera": camera, "step": store.resolve_step(step), "resolution": "high", "image_size": [h, w],
            "K": k.tolist(), "T_world_optical": t.tolist(), "position": t[:3, 3].tolist(),
            "intrinsic_K": k.tolist(), "extrinsic_cam2world": t.tolist(), "height": h, "width": w,
            "depth_near": near, "depth_far": far}


def back_project(store: ArtifactStore, row: int, col: int, *, camera: str, resolution: str, step: int,
                 cameras: Sequence[str]) -> BackProjection:
    """The world point seen at one pixel; ToolError outside the image or without depth, worded as RPent's
    ``back_project`` tool words them (the low-resolution view is checked on its depth, as RPent's is)."""
    check.view_on_robot("back_project", camera, resolution, cameras)
    wmap = store.world("back_project", camera, resolution, step)
    h, w = wmap.shape[:2]
    if not (0 <= row < h and 0 <= col < w):
        raise ToolError("back_project", f"pixel ({row},{col}) out of bounds; {camera} image is {h}x{w}")
    if resolution == "low":
        d = float(store.depth("back_project", camera, resolution, step)[int(row), int(col)])
        if not math.isfinite(d) or d <= 0 or d > 10:
            raise ToolError("back_project", f"invalid {camera} depth {d:.3f}m at pixel ({row},{col}); "
                                            "pick a different pixel")
    p = wmap[int(row), int(col)]
    if not (np.all(np.isfinite(p)) and np.any(p != 0)):
        raise ToolError("back_project", f"invalid {camera} world xyz at pixel ({row},{col})")
    return BackProjection(world_xyz=(float(p[0]), float(p[1]), float(p[2])), pixel=(int(row), int(col)),
                          camera=camera, resolution=resolution, step=store.resolve_step(step), image_size=(h, w))


def region_center(store: ArtifactStore, row_range: tuple[int, int], col_range: tuple[int, int], *, camera: str,
                  resolution: str, z_min: float | None, z_max: float | None, step: int,
                  cameras: Sequence[str]) -> RegionCenter:
    """The centre of the surface in a pixel window; ToolError for an empty window or too few valid pixels."""
    check.view_on_robot("back_project", camera, resolution, cameras)
    wmap = store.world("back_project", camera, resolution, step)
    try:
        centre, med, n = perception.region_center(wmap, row_range, col_range, z_min=z_min, z_max=z_max)
    except ValueError as exc:
        raise ToolError("back_project", str(exc)) from None
    return RegionCenter(center_xyz=centre, median_xyz=med, n_valid=n, camera=camera, step=store.resolve_step(step))


MIN_MASK_DEPTH_PIXELS = 10   # RPent's segment gives no world_xyz for a mask with fewer valid depth pixels


def segment(store: ArtifactStore, segmenter: Segmenter, *, prompt: str | None, camera: str, resolution: str,
            pixel: tuple[int, int] | None, min_score: float, step: int, index: int,
            cameras: Sequence[str], notes: list[str] | None = None) -> Segment:
    """Run ``segmenter`` on the recorded view and locate the mask in the world. A found mask is stored as the
    overlay artifact ``segment_<index>_<camera>.png`` with a JSON twin of surface statistics (no labels: a real
    detector has none). What the segmenter knows beyond the mask (the ground truth's label match) is appended to
    ``notes`` for the call's ledger record, never put where the model can read it."""
    check.view_on_robot("segment", camera, resolution, cameras)
    check.require("segment", bool(prompt and prompt.strip()) or pixel is not None,
                  "give a prompt (e.g. 'the black bowl') or a point (row, col) of the image")
    check.require("segment", math.isfinite(min_score), f"min_score must be a finite number, got {min_score!r}")
    color = store.color("segment", camera, resolution, step)
    if pixel is not None:
        h, w = color.shape[:2]
        check.require("segment", 0 <= pixel[0] < h and 0 <= pixel[1] < w,   # RPent's SAM3 server's words
                      f"point [row, col] {list(pixel)} is outside image shape [{h}, {w}]")
    if prompt is not None and not prompt.strip():
        prompt = None
    world = store.world("segment", camera, resolution, step)
    seg = store.segmentation("segment", camera, resolution, step) if segmenter.needs_segmentation else None
    step = store.resolve_step(step)
    answer = segmenter.segment(SegmentRequest(camera=camera, resolution=resolution, color=color, prompt=prompt,
                                              point=pixel, min_score=min_score, world=world, segmentation=seg))
    if notes is not None and answer.detail:
        notes.append(answer.detail)
    if not answer.found or answer.mask is None:
        return Segment(found=False, world_xyz=None, score=answer.score, box=None, camera=camera, step=step,
                       overlay_artifact=None, error=answer.error or NO_CANDIDATE)
    stats = perception.surface_stats(world, answer.mask)
    name = f"segment_{index:03d}_{camera}.png"
    store.put_image(step, name, overlay(color, answer.mask))
    extras: dict[str, Any] = {"score": answer.score, "n_pixels": 0, "instances": []}
    if stats is not None:
        extras.update(median_xyz=list(stats.median), box_center_xyz=list(stats.box_center),
                      xyz_min=list(stats.xyz_min), xyz_max=list(stats.xyz_max), top_z=stats.top_z,
                      n_pixels=stats.n_pixels)
    for cand in answer.instances:
        cs = perception.surface_stats(world, cand.mask)
        extras["instances"].append({"score": cand.score,
                                    "world_xyz": None if cs is None else list(cs.median),
                                    "box_center_xyz": None if cs is None else list(cs.box_center)})
    store.put(step, name.replace(".png", ".json"), json.dumps(extras).encode())
    n_valid = 0 if stats is None else stats.n_pixels
    located = n_valid >= MIN_MASK_DEPTH_PIXELS
    return Segment(found=True, world_xyz=stats.median if located else None, score=answer.score,
                   box=perception.mask_box(answer.mask), camera=camera, step=step, overlay_artifact=name,
                   error=None if located else f"too few valid depth pixels ({n_valid})")


def overlay(color: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The image with the mask tinted green and the rest dimmed."""
    out = (color.astype(np.float32) * 0.6).astype(np.uint8)
    tint = np.array([40, 220, 60], dtype=np.float32)
    out[mask] = (color[mask].astype(np.float32) * 0.45 + tint * 0.55).astype(np.uint8)
    return out
