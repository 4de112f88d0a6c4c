"""libero_goal task 1, "put the bowl on the stove": segment, move_to, set_gripper and release only.

Same rim grasp as the plate example. The target is the stove's burner: the "stove burner" part segment, whose
visible-surface median lies about 3.5 cm toward the camera (+x) from the cook region's centre; the bowl is set
down with the gripper 6 cm above the burner surface. The cook region accepts +-7.5 cm around the burner. The bowl
is carried high and moved in x before y: in the swapped layout (libero_goal_swap) the wine rack (top 1.21 m)
stands beside the stove and the bottle between bowl and stove, so the bowl is set down on the burner's side away
from the rack (the rack's segment box).
"""

import json
import math

CARRY_DZ = 0.25       # above the wine bottle (top 1.06) and clear of the rack's side
RIM_DY = 0.045
MEDIAN_BIAS_X = 0.02
BURNER_BIAS_X = 0.035
BOWL_CLEARANCE = 0.065   # m from the bowl's centre to a neighbour's side
COOK_SLACK_X = 0.04      # m the bowl may sit +x of the burner median and still be in the cook region


def go(robo, xyz, gripper):
    """move_to in planar legs of at most 0.25 m (a single move is limited to 0.30 m in x/y)."""
    s = robo.state()
    x0, y0 = s.eef_pos[0], s.eef_pos[1]
    n = max(1, math.ceil(math.hypot(xyz[0] - x0, xyz[1] - y0) / 0.25))
    for i in range(1, n + 1):
        result = robo.move_to([x0 + (xyz[0] - x0) * i / n, y0 + (xyz[1] - y0) * i / n, xyz[2]], gripper)
    return result


def run(robo):
    bowl = robo.segment("the black bowl")
    burner = robo.segment("the stove burner")
    if not burner.found:
        burner = robo.segment("the stove")
    if not (bowl.found and burner.found):
        print("segment failed:", bowl.error, burner.error)
        return
    bx, by, bz = bowl.world_xyz
    sx, sy, sz = burner.world_xyz
    gx, gy = bx + MEDIAN_BIAS_X, by + RIM_DY
    print(f"bowl median {bowl.world_xyz}, burner median {burner.world_xyz}")
    go(robo, [gx, gy, bz + 0.10], robo.OPEN)
    robo.move_to([gx, gy, bz], robo.OPEN, step_clip=0.015, tol=0.008)
    robo.set_gripper(robo.CLOSE, steps=12)
    robo.move_to([gx, gy, bz + CARRY_DZ], robo.CLOSE)
    tx, ty = sx - BURNER_BIAS_X, sy + RIM_DY
    rack = robo.segment("wine rack")
    if rack.found:   # the bowl (~5 cm radius, hanging at the gripper's x) must pass beside the rack, not over it
        box = json.loads(robo.artifact(rack.overlay_artifact.replace(".png", ".json"), step=rack.step))
        (_, ry0, _), (rx1, ry1, _) = box["xyz_min"], box["xyz_max"]
        if ry0 - BOWL_CLEARANCE < ty - RIM_DY < ry1 + BOWL_CLEARANCE and tx - BOWL_CLEARANCE < rx1:
            tx = min(rx1 + BOWL_CLEARANCE, sx + COOK_SLACK_X)
    go(robo, [tx, gy, bz + CARRY_DZ], robo.CLOSE)      # x first, then y: the rack stands beside the stove
    go(robo, [tx, ty, bz + CARRY_DZ], robo.CLOSE)
    robo.move_to([tx, ty, sz + 0.06], robo.CLOSE, step_clip=0.015, tol=0.008)
    released = robo.release(max_steps=20)
    print("released:", released, "done:", robo.done)
