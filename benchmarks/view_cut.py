"""The view cut (``pyrua_ros/sim/view_cull.py``) against the full scene: the same pixels, and what it saves.

For each scene (suite:task), four states (the reset, then three times 12 control steps of a random action, seeded),
both cameras, at 128 px and at 256 + 1024 px (reset and last state): the sim's :class:`~pyrua_ros.sim.render.Renderer`
draws each view with the cut on and a second renderer of the same model with it off, which goes first alternating
(both draw a 64 px view of each camera before anything is counted). Every color and
depth must be equal bit for bit; the process CPU of each side's renders (the GL rasteriser threads included) is
summed, with how many geoms and reflection passes the cut left out.

    .venv/bin/python benchmarks/view_cut.py [--scenes "libero_goal:0-9;libero_spatial:0,5;..."] [--json FILE]

The last line printed is JSON. Exit status 1 when any render differs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_SCENES = "libero_goal:0-9;libero_spatial:0,5;libero_object:0,3;libero_10:0,4,8;libero_90:0,20,40,60,80"


def parse_scenes(text: str) -> list[tuple[str, int]]:
    """``suite:tasks`` items separated by ``;``, the tasks an index list as eval's ``--task`` takes (``0-9,12``)."""
    from pyrua_ros.evaluation.instances import parse_index_list
    from pyrua_ros.settings.schema import SettingError

    scenes = []
    for item in text.split(";"):
        suite, sep, tasks = item.partition(":")
        if not sep or not suite.strip():
            raise SystemExit(f"--scenes: {item!r} names no suite (write suite:tasks, items separated by ;)")
        try:
            scenes += [(suite.strip(), t) for t in parse_index_list(tasks, f"--scenes {suite.strip()}")]
        except SettingError as exc:
            raise SystemExit(f"--scenes: {exc}") from None
    return scenes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", default=DEFAULT_SCENES)
    parser.add_argument("--json", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")

    import numpy as np

    from pyrua_ros.sim.env import LiberoEpisode
    from pyrua_ros.sim.render import Renderer, RenderSettings, StateCopy, ViewRequest

    rng = np.random.default_rng(0)
    ep = LiberoEpisode()
    cpu = {"full": 0.0, "cut": 0.0}
    renders = differ = 0
    t0 = time.monotonic()
    try:
        for suite, task in parse_scenes(args.scenes):
            ep.reset(suite, task, 0)
            ours = ep.renderer
            full = Renderer(ep._model, RenderSettings(skip_unseen=False), max_resolution=1024, nice=0)
            for camera in ep.CAMERAS:   # both contexts draw once before the count (the GL compiles its shaders)
                warm = [ViewRequest(ep._camera_ids[ep._camera(camera)], 64, frozenset({"color", "depth"}))]
                full.render(StateCopy.of(ep._data), warm, timeout=120.0)
                ours.render(StateCopy.of(ep._data), warm, timeout=120.0)
            skipped, reflections = ours.skipped, ours.reflections_skipped
            try:
                for k in range(4):
                    if k:
                        action = np.concatenate([rng.uniform(-1, 1, 6), [rng.choice([-1.0, 1.0])]])
                        for _ in range(12):
                            ep.step(action)
                    state = StateCopy.of(ep._data)
                    for camera in ep.CAMERAS:
                        for res in (256, 1024) if k in (0, 3) else (128,):
                            ask = [ViewRequest(ep._camera_ids[ep._camera(camera)], res, frozenset({"color", "depth"}))]
                            views = {}
                            sides = (("full", full), ("cut", ours))
                            for side, renderer in sides if renders % 2 else sides[::-1]:   # alternate the order
                                c0 = time.process_time()
                                (views[side],) = renderer.render(state, ask, timeout=120.0)
                                cpu[side] += time.process_time() - c0
                            renders += 1
                            if not (np.array_equal(views["full"].color, views["cut"].color)
                                    and np.array_equal(views["full"].depth, views["cut"].depth)):
                                differ += 1
                                print(f"DIFFERS: {suite}:{task} state {k} {camera} {res} px", flush=True)
            finally:
                full.close()
            print(f"[{time.monotonic() - t0:6.1f}s] {suite}:{task}: {renders} renders so far, {differ} differ; "
                  f"geoms left out {ours.skipped - skipped}, reflection passes left out "
                  f"{ours.reflections_skipped - reflections}; CPU full {cpu['full']:.2f} s, cut {cpu['cut']:.2f} s",
                  flush=True)
    finally:
        ep.close()
    saving = 1 - cpu["cut"] / cpu["full"] if cpu["full"] else 0.0
    print(f"{renders} renders, {differ} differ; render CPU full {cpu['full']:.2f} s, cut {cpu['cut']:.2f} s "
          f"({100 * saving:.1f} % less)")
    summary = {"renders": renders, "differ": differ, "cpu_full_s": round(cpu["full"], 3),
               "cpu_cut_s": round(cpu["cut"], 3), "saving": round(saving, 4)}
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
