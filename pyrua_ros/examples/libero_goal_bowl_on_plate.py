"""libero_goal task 8, "put the bowl on the plate": segment, move_to, set_gripper and release only.

The bowl is grasped by its +y rim (the fingers close along world y): the gripper goes 2 cm in front of the
bowl's visible-surface median (that median sits behind the centre because the inner far wall is visible) and
4.5 cm to its +y side, at the median height. It is carried 15 cm up and set down with the gripper 4.5 cm to the
+y side of the plate, 5 cm above the plate's surface median.
"""

import math

CARRY_DZ = 0.15          # carry height above the grasp height [m]
RIM_DY = 0.045           # gripper offset from the bowl centre to its +y rim [m]
MEDIAN_BIAS_X = 0.02     # bowl median lies this far behind (-x) the bowl centre [m]


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
    plate = robo.segment("the plate")
    if not (bowl.found and plate.found):
        print("segment failed:", bowl.error, plate.error)
        return
    bx, by, bz = bowl.world_xyz
    px, py, pz = plate.world_xyz
    gx, gy = bx + MEDIAN_BIAS_X, by + RIM_DY
    print(f"bowl median {bowl.world_xyz}, plate median {plate.world_xyz}")
    go(robo, [gx, gy, bz + 0.10], robo.OPEN)
    robo.move_to([gx, gy, bz], robo.OPEN, step_clip=0.015, tol=0.008)
    robo.set_gripper(robo.CLOSE, steps=12)
    robo.move_to([gx, gy, bz + CARRY_DZ], robo.CLOSE)
    go(robo, [px, py + RIM_DY, bz + CARRY_DZ], robo.CLOSE)
    robo.move_to([px, py + RIM_DY, pz + 0.05], robo.CLOSE, step_clip=0.015, tol=0.008)
    released = robo.release(max_steps=20)
    print("released:", released, "done:", robo.done)
