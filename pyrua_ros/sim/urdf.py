"""The simulated Panda's frame tree (for TF) and a URDF generated from the MuJoCo model (for /robot_description).

One table, :data:`FRAMES`, names every published robot and camera frame, its parent, what it is read from in
MuJoCo and which joint (if any) moves it. :func:`world_poses` evaluates it on live MuJoCo data (the sim's TF);
:func:`generate` evaluates it at joint values 0 to write the URDF, so the URDF and the TF tree cannot disagree.

URDF visuals are simple primitives sized from the MuJoCo geoms (boxes around meshes), good enough for rviz.
MuJoCo has no joint velocity limits; the URDF states :data:`NOMINAL_VELOCITY` for every joint.
"""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET

import numpy as np

from pyrua_ros.sim.cameras import MUJOCO_TO_OPTICAL, wxyz_to_xyzw
from pyrua_ros.wire.convert import quat_to_matrix

NOMINAL_VELOCITY = 2.0  # rad/s or m/s written into <limit velocity=...>; MuJoCo models carry no velocity limit


@dataclasses.dataclass(frozen=True)
class FrameSpec:
    """One published frame.

    ``kind``: ``body`` (a MuJoCo body's frame), ``site`` (a site's position with its parent frame's axes),
    ``camera`` (a MuJoCo camera, turned into its REP-103 optical frame: z forward, x right, y down).
    ``joint``: the MuJoCo joint between ``parent`` and this frame, or None where the pair is rigid (static TF).
    """

    name: str
    parent: str
    kind: str
    source: str
    joint: str | None = None


def robot_frames(world: str, base: str, end_effector: str, optical: dict[str, str]) -> tuple[FrameSpec, ...]:
    """The frame tree of LIBERO's mounted Panda; names of world/base/eef/optical frames come from interfaces.yaml.

    ``optical`` maps an optical frame name to its MuJoCo camera; the camera on the hand hangs off the hand
    body, every other camera off the world. The end-effector frame sits at the grip site with the hand's axes,
    so its pose equals LIBERO's observation (``robot0_eef_pos`` is the grip site, ``robot0_eef_quat`` the hand).
    """
    frames = [FrameSpec(base, world, "body", "robot0_link0")]
    parent = base
    for i in range(1, 8):
        frames.append(FrameSpec(f"robot0_link{i}", parent, "body", f"robot0_link{i}", f"robot0_joint{i}"))
        parent = f"robot0_link{i}"
    frames += [
        FrameSpec("robot0_right_hand", "robot0_link7", "body", "robot0_right_hand"),
        FrameSpec("gripper0_right_gripper", "robot0_right_hand", "body", "gripper0_right_gripper"),
        FrameSpec("gripper0_leftfinger", "gripper0_right_gripper", "body", "gripper0_leftfinger",
                  "gripper0_finger_joint1"),
        FrameSpec("gripper0_rightfinger", "gripper0_right_gripper", "body", "gripper0_rightfinger",
                  "gripper0_finger_joint2"),
        FrameSpec(end_effector, "robot0_right_hand", "site", "gripper0_grip_site"),
    ]
    for name, camera in optical.items():
        parent = "robot0_right_hand" if camera == "robot0_eye_in_hand" else world
        frames.append(FrameSpec(name, parent, "camera", camera))
    return tuple(frames)


def _pose(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = np.asarray(R, dtype=np.float64).reshape(3, 3)
    T[:3, 3] = p
    return T


def source_ids(model, frames: tuple[FrameSpec, ...]) -> tuple[int, ...]:
    """The MuJoCo id of each frame's source (body, site or camera), for :func:`world_poses` on every step."""
    lookup = {"body": model.body, "site": model.site, "camera": model.camera}
    ids = []
    for f in frames:
        if f.kind not in lookup:
            raise ValueError(f"frame {f.name!r}: unknown kind {f.kind!r}; valid: body, site, camera")
        ids.append(lookup[f.kind](f.source).id)
    return tuple(ids)


def world_poses(model, data, frames: tuple[FrameSpec, ...], world: str,
                ids: tuple[int, ...] | None = None) -> dict[str, np.ndarray]:
    """4x4 world pose of every frame in ``frames`` (plus ``world`` = identity) from MuJoCo ``model``/``data``.

    ``model``/``data`` are raw ``mujoco.MjModel``/``MjData`` after kinematics (``mj_forward`` or a step);
    ``ids`` is :func:`source_ids` of the same model (looked up here when not given).
    """
    poses = {world: np.eye(4)}
    for f, i in zip(frames, ids if ids is not None else source_ids(model, frames)):
        if f.kind == "body":
            poses[f.name] = _pose(data.xmat[i], data.xpos[i])
        elif f.kind == "site":
            poses[f.name] = _pose(poses[f.parent][:3, :3], data.site_xpos[i])
        else:
            poses[f.name] = _pose(data.cam_xmat[i].reshape(3, 3) @ MUJOCO_TO_OPTICAL, data.cam_xpos[i])
    return poses


def relative(poses: dict[str, np.ndarray], parent: str, child: str) -> np.ndarray:
    """T_parent_child from two world poses."""
    return np.linalg.inv(poses[parent]) @ poses[child]


def _rpy(R: np.ndarray) -> tuple[float, float, float]:
    """URDF roll/pitch/yaw (fixed axes X, Y, Z: R = Rz(yaw) Ry(pitch) Rx(roll)) of a rotation matrix."""
    pitch = math.asin(-max(-1.0, min(1.0, R[2, 0])))
    if abs(math.cos(pitch)) > 1e-9:
        roll = math.atan2(R[2, 1], R[2, 2])
        yaw = math.atan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: put everything in yaw
        roll, yaw = 0.0, math.atan2(-R[0, 1], R[1, 1])
    return roll, pitch, yaw


def _origin(parent: ET.Element, T: np.ndarray) -> None:
    xyz = " ".join(f"{v:.6g}" for v in T[:3, 3])
    rpy = " ".join(f"{v:.6g}" for v in _rpy(T[:3, :3]))
    ET.SubElement(parent, "origin", xyz=xyz, rpy=rpy)


def _visuals(link: ET.Element, model, body_id: int) -> None:
    """Primitive <visual>s for the visual geoms (MuJoCo group 1, or all geoms if none) of one body."""
    import mujoco

    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body_id]
    visual = [g for g in geoms if model.geom_group[g] == 1] or geoms
    for g in visual:
        T = _pose(quat_to_matrix(wxyz_to_xyzw(model.geom_quat[g])), model.geom_pos[g])
        size = model.geom_size[g]
        gtype = model.geom_type[g]
        el = ET.Element("visual", name=model.geom(g).name or f"geom{g}")
        if gtype == mujoco.mjtGeom.mjGEOM_SPHERE:
            shape = ("sphere", {"radius": f"{size[0]:.6g}"})
        elif gtype in (mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_CYLINDER):
            length = 2 * size[1] + (2 * size[0] if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0)
            shape = ("cylinder", {"radius": f"{size[0]:.6g}", "length": f"{length:.6g}"})
        elif gtype == mujoco.mjtGeom.mjGEOM_BOX:
            shape = ("box", {"size": " ".join(f"{2 * s:.6g}" for s in size)})
        else:  # mesh, ellipsoid, ...: the geom's axis-aligned bounding box (centre, half sizes) in its own frame
            centre, half = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
            T = T @ _pose(np.eye(3), centre)
            shape = ("box", {"size": " ".join(f"{2 * s:.6g}" for s in half)})
        _origin(el, T)
        geometry = ET.SubElement(el, "geometry")
        ET.SubElement(geometry, shape[0], **shape[1])
        rgba = model.geom_rgba[g]
        material = ET.SubElement(el, "material", name=f"rgba_{g}")
        ET.SubElement(material, "color", rgba=" ".join(f"{v:.3g}" for v in rgba))
        link.append(el)


def generate(model, frames: tuple[FrameSpec, ...], world: str, robot_name: str = "libero_panda") -> str:
    """URDF text of ``frames`` on ``model`` (raw ``mujoco.MjModel``), root link ``world``.

    Joint origins are the parent->child transforms at joint value 0; revolute/prismatic axes and limits come from
    MuJoCo's ``jnt_axis``/``jnt_range``; efforts from the actuators driving the joint where there is one.
    """
    import mujoco

    data = mujoco.MjData(model)
    for f in frames:
        if f.joint is not None:
            data.qpos[model.jnt_qposadr[model.joint(f.joint).id]] = 0.0
    mujoco.mj_kinematics(model, data)
    mujoco.mj_camlight(model, data)
    poses = world_poses(model, data, frames, world)

    effort = {}
    for a in range(model.nu):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        if model.actuator_forcelimited[a]:
            lo, hi = model.actuator_forcerange[a]
        elif model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE and model.actuator_ctrllimited[a]:
            lo, hi = model.actuator_ctrlrange[a]  # a motor: the control is the force/torque
        else:
            continue
        effort[int(model.actuator_trnid[a, 0])] = max(abs(lo), abs(hi))

    robot = ET.Element("robot", name=robot_name)
    ET.SubElement(robot, "link", name=world)
    for f in frames:
        link = ET.SubElement(robot, "link", name=f.name)
        if f.kind == "body":
            _visuals(link, model, model.body(f.source).id)
        if f.joint is None:
            joint = ET.SubElement(robot, "joint", name=f"{f.name}_fixed", type="fixed")
        else:
            j = model.joint(f.joint).id
            kind = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic"}.get(
                int(model.jnt_type[j]))
            if kind is None:
                raise ValueError(f"joint {f.joint!r}: only hinge and slide joints become URDF joints")
            joint = ET.SubElement(robot, "joint", name=f.joint, type=kind)
        ET.SubElement(joint, "parent", link=f.parent)
        ET.SubElement(joint, "child", link=f.name)
        _origin(joint, relative(poses, f.parent, f.name))
        if f.joint is not None:
            ET.SubElement(joint, "axis", xyz=" ".join(f"{v:.6g}" for v in model.jnt_axis[j]))
            lo, hi = model.jnt_range[j]
            ET.SubElement(joint, "limit", lower=f"{lo:.6g}", upper=f"{hi:.6g}",
                          effort=f"{effort.get(j, 0.0):.6g}", velocity=f"{NOMINAL_VELOCITY:.6g}")
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"
