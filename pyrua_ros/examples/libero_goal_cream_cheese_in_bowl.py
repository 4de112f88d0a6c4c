"""libero_goal task 6, "put the cream cheese in the bowl": segment, move_to, set_gripper and release only.

The cream cheese box (8 x 4 x 1.9 cm, long axis along x) is grasped across its 4 cm width (the fingers close
along y) 1 cm behind its visible-surface median, just below the median height. It is dropped from 5 cm above
the bowl's median, 2 cm in front of it (the bowl median sits behind the bowl centre).
"""

import math

CARRY_DZ = 0.15


def go(robo, xyz, gripper):
    """move_to in planar legs of at most 0.25 m (a single move is limited to 0.30 m in x/y)."""
    s = robo.state()
    x0, y0 = s.eef_pos[0], s.eef_pos[1]
    n = max(1, math.ceil(math.hypot(xyz[0] - x0, xyz[1] - y0) / 0.25))
    for i in range(1, n + 1):
        result = robo.move_to([x0 + (xyz[0] - x0) * i / n, y0 + (xyz[1] - y0) * i / n, xyz[2]], gripper)
    return result


def run(robo):
    cheese = robo.segment("the cream cheese box")
    bowl = robo.segment("the black bowl")
    if not (cheese.found and bowl.found):
        print("segment failed:", cheese.error, bowl.error)
        return
    cx, cy, cz = cheese.world_xyz
    bx, by, bz = bowl.world_xyz
    print(f"cheese median {cheese.world_xyz}, bowl median {bowl.world_xyz}")
    go(robo, [cx - 0.01, cy, cz + 0.10], robo.OPEN)
    robo.move_to([cx - 0.01, cy, cz - 0.005], robo.OPEN, step_clip=0.015, tol=0.008)
    robo.set_gripper(robo.CLOSE, steps=10)
    robo.move_to([cx - 0.01, cy, cz + CARRY_DZ], robo.CLOSE)
    go(robo, [bx + 0.02, by, cz + CARRY_DZ], robo.CLOSE)
    robo.move_to([bx + 0.02, by, bz + 0.05], robo.CLOSE, step_clip=0.015, tol=0.008)
    released = robo.release(max_steps=20)
    print("released:", released, "done:", robo.done)
