"""Part prompts: the ground-truth segmenter's point against a SAM3-like mask's median and the part geom's centre.

For each part the knowledge file names ("stove burner", "top drawer handle", "microwave door") this resets a LIBERO
scene that has it, renders a view at step 0 and compares three points:

- ``answer``: what ``robo.segment(<part prompt>)`` answers (the ground-truth segmenter over the same capture);
- ``mask median``: the per-axis median of the world points of the part's visible pixels, i.e. what RPent's
  segment computes from a SAM3 mask that covers exactly the visible part (``_mask_to_world``);
- ``geom centre``: the mean world position of the part's geoms (``data.geom_xpos``), where the part "is".

A part's own parts count as the part (the microwave door's handle), as a mask of the whole door would.

Run: ``python benchmarks/part_points.py`` (CPU rendering, about a minute). DESIGN.md quotes its output.
"""

from __future__ import annotations

import numpy as np

from pyrua_ros.robo import perception
from pyrua_ros.robo.backend import SegmentationFrame
from pyrua_ros.robo.segmenters import GroundTruthSegmenter, SegmentRequest
from pyrua_ros.sim.env import LiberoEpisode
from pyrua_ros.sim_interfaces.labels import is_part_of

CASES = (  # (suite, task, prompt, part label suffix)
    ("libero_goal", 1, "stove burner", "_burner"),
    ("libero_goal", 1, "top drawer handle", "_top_drawer_handle"),
    ("libero_10", 9, "microwave door", "_door"),
    ("libero_90", 35, "microwave door", "_door"),
)
VIEWS = (("agentview", 1024), ("wrist", 1024))


def main() -> None:
    ep = LiberoEpisode()
    gt = GroundTruthSegmenter()
    try:
        for suite, task, prompt, suffix in CASES:
            ep.reset(suite, task, 0)
            model, data = ep._model, ep._data
            for camera, size in VIEWS:
                cap = ep.capture(camera, size)
                ids, labels = ep.segmentation(camera, size)
                label = next((n for n in labels.values() if n.endswith(suffix)), None)
                if label is None:
                    print(f"{suite} t{task} {prompt!r}: no part label ending {suffix}")
                    break
                # the part with its own parts (the door with its handle), as a mask of "microwave door" covers both
                pids = [k for k, n in labels.items() if n == label or is_part_of(n, label)]
                geoms = [g for g in range(model.ngeom) if ep._geom_label[g + 1] in pids]
                centre = data.geom_xpos[geoms].mean(axis=0)
                world = perception.world_map(cap.depth, cap.K, cap.T_world_optical)
                stats = perception.surface_stats(world, np.isin(ids, pids))
                answer = gt.segment(SegmentRequest(camera, "high", cap.color, prompt, None, 0.2, world,
                                                   SegmentationFrame(ids=ids, labels=labels, stamp=0.0,
                                                                     camera=camera, resolution="high")))
                robo_point = perception.surface_stats(world, answer.mask).median if answer.found else None
                if stats is None:
                    print(f"{suite} t{task} {camera:9s} {prompt!r}: part not visible")
                    continue
                med = np.array(stats.median)
                print(f"{suite} t{task} {camera:9s} {prompt!r:21s} label {label}: {stats.n_pixels} px; "
                      f"mask median {np.round(med, 3).tolist()}, geom centre {np.round(centre, 3).tolist()}, "
                      f"median - centre {np.round(med - centre, 3).tolist()} (|d| {np.linalg.norm(med - centre):.3f}"
                      f" m, xy {np.linalg.norm((med - centre)[:2]):.3f} m); answer "
                      f"{'= mask median' if robo_point is not None and np.allclose(robo_point, med) else robo_point}")
    finally:
        ep.close()


if __name__ == "__main__":
    main()
