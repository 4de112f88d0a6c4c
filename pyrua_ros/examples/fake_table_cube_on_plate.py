"""fake_table task 0 (the kinematic fake arm), "put the red cube on the plate".

The same primitives as the LIBERO examples; used to check the whole agent path against a second driver.
"""


def run(robo):
    cube = robo.segment("the red cube")
    plate = robo.segment("the plate")
    if not (cube.found and plate.found):
        print("segment failed:", cube.error, plate.error)
        return
    x, y, z = cube.world_xyz
    px, py, _pz = plate.world_xyz
    robo.move_to([x, y, z + 0.10], robo.OPEN)
    robo.move_to([x, y, z], robo.OPEN)
    robo.set_gripper(robo.CLOSE, steps=8)
    robo.move_to([x, y, z + 0.10], robo.CLOSE)
    robo.move_to([px, py, z + 0.10], robo.CLOSE)
    print("release:", robo.release(max_steps=20), "done:", robo.done)
