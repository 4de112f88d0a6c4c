"""libero_goal task 0, "open the middle drawer of the cabinet": segment and move_pose, set_gripper only.

The cabinet faces +y and its handles run along x, one above the other (~7 cm apart): a hand pointing down meets the
top drawer's handle before its grip site reaches the middle one. So the hand is pitched toward the cabinet
(``target_pitch`` -1.2: the fingers point toward -y and close vertically), comes to the middle handle's front at
its height, closes on the bar and pulls the drawer out along +y until the benchmark's check fires. The handle's
centre and front are the part segment's box (its ``box_center_xyz`` and ``xyz_max`` extras).
"""

import json

PITCH = -1.2            # rad: fingers toward the cabinet (-y), tilted 0.37 rad below horizontal
STANDOFF = 0.12         # m in front of the handle where the pitched hand lines up
PULL = (0.05, 0.10, 0.15, 0.20, 0.25)   # m of pull along +y, in legs


def run(robo):
    handle = robo.segment("middle drawer handle")
    if not handle.found:
        print("segment failed:", handle.error)
        return
    box = json.loads(robo.artifact(handle.overlay_artifact.replace(".png", ".json"), step=handle.step))
    x, y, z = box["box_center_xyz"]
    front = box["xyz_max"][1]
    print(f"handle centre {(round(x, 3), round(y, 3), round(z, 3))}, front y {front:.3f}")
    robo.move_pose([x, front + STANDOFF, z + 0.02], target_pitch=PITCH, gripper=robo.OPEN)
    robo.move_pose([x, front + 0.05, z], target_pitch=PITCH, gripper=robo.OPEN, max_steps=80)
    robo.move_pose([x, y - 0.005, z], target_pitch=PITCH, gripper=robo.OPEN, step_clip=0.01, max_steps=60)
    robo.set_gripper(robo.CLOSE, steps=15)
    for dy in PULL:
        pulled = robo.move_pose([x, y + dy, z], target_pitch=PITCH, gripper=robo.CLOSE, step_clip=0.01, max_steps=60)
        print("pulled to y", pulled.final_eef_pos[1], "done:", robo.done)
        if robo.done:
            return
