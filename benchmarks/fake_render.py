"""The fake arm's ray caster (``pyrua_ros/fake_arm/scene.py``) against the caster of another revision: the same
arrays, and the CPU each spends.

For each seed of fake_table task 0: the reset, then five states reached by 5 twists of a seeded random velocity
(the gripper closed from the fourth on); both cameras at 128, 256 and 1024 px. Both casters draw every view, the
order alternating; color, depth and segmentation must be equal bit for bit. The thread CPU of each side's renders is
summed per size. OpenBLAS runs on one thread, as in every pyrua_ros process (``blas.one_thread``).

    .venv/bin/python benchmarks/fake_render.py --baseline-rev REV [--seeds 0-2] [--json FILE]

The baseline's ``scene.py`` is loaded from ``git archive REV`` under a module name of its own (it imports only
NumPy) and draws the current package's shapes. The last line printed is JSON. Exit status 1 when any view differs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyrua_ros.sim_interfaces import blas  # noqa: E402

blas.one_thread()   # before NumPy loads

SIZES = (128, 256, 1024)
CAMERAS = ("agentview", "wrist")
STATES = 6


def baseline_scene(rev: str):
    """The ``scene`` module of revision ``rev``."""
    from pyrua_ros.testing import checkout_revision

    path = checkout_revision(rev, ROOT) / "pyrua_ros" / "fake_arm" / "scene.py"
    spec = importlib.util.spec_from_file_location("baseline_fake_scene", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> int:
    import numpy as np

    from pyrua_ros.evaluation.instances import parse_index_list
    from pyrua_ros.fake_arm import scene
    from pyrua_ros.fake_arm.episode import FakeEpisode
    from pyrua_ros.settings.schema import SettingError

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-rev", required=True, help="git revision whose caster is compared")
    parser.add_argument("--seeds", default="0-2", help="fake_table task 0 seeds, an index list (default 0-2)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the JSON result here")
    args = parser.parse_args()
    try:
        seeds = parse_index_list(args.seeds, "--seeds")
    except SettingError as exc:
        raise SystemExit(str(exc)) from None
    base = baseline_scene(args.baseline_rev)
    sides = {"baseline": base.render, "current": scene.render}
    cpu = {side: {size: 0.0 for size in SIZES} for side in sides}
    views = differ = 0
    rng = np.random.default_rng(0)
    print(f"fake caster, {len(seeds)} seed(s) x {STATES} states x {len(CAMERAS)} cameras x sizes {SIZES}: "
          f"baseline {args.baseline_rev} against the working tree", flush=True)
    for seed in seeds:
        ep = FakeEpisode(0, seed, 300)
        for state in range(STATES):
            if state:
                v, w = rng.uniform(-0.3, 0.3, 3), rng.uniform(-0.5, 0.5, 3)
                for _ in range(5):
                    ep.step_twist(v, w)
            if state == 3:
                ep.set_gripper_target(0.0)
            for camera in CAMERAS:
                for size in SIZES:
                    cam, shapes = ep.camera(camera, size), ep.shapes()
                    order = list(sides) if views % 2 else list(reversed(sides))
                    drawn = {}
                    for side in order:
                        t = time.thread_time()
                        drawn[side] = sides[side](shapes, cam)
                        cpu[side][size] += time.thread_time() - t
                    views += 1
                    same = all(a.dtype == b.dtype and np.array_equal(a, b)
                               for a, b in zip(drawn["baseline"], drawn["current"]))
                    if not same:
                        differ += 1
                        print(f"  differs: seed {seed} state {state} {camera} {size} px", flush=True)
        print(f"  seed {seed}: {views} views so far, {differ} differ", flush=True)
    for size in SIZES:
        b, c = cpu["baseline"][size], cpu["current"][size]
        print(f"{size:5d} px: baseline {b:6.2f} CPU s, current {c:6.2f} CPU s ({c / b:.2f}x)")
    total = {side: round(sum(cpu[side].values()), 3) for side in sides}
    print(f"all: baseline {total['baseline']:.2f} CPU s, current {total['current']:.2f} CPU s "
          f"({total['current'] / total['baseline']:.2f}x); {views} views, {differ} differ")
    result = {"baseline_rev": args.baseline_rev, "seeds": seeds, "views": views, "differ": differ,
              "cpu_s": {side: {str(size): round(v, 3) for size, v in per.items()} for side, per in cpu.items()},
              "total_cpu_s": total, "ratio": round(total["current"] / total["baseline"], 3)}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
