"""Panda kinematics: forward kinematics from the published DH parameters, damped least-squares IK.

Franka's modified (Craig) DH table, lengths in metres, angles in radians. The hand sits on the flange rotated
-pi/4 about z; the grip site (TCP) is 0.1034 m along the hand's z axis. The base (``robot0_link0``) is placed in the
world by ``T_world_base``. Everything here is pure numpy.
"""

from __future__ import annotations

import numpy as np

from pyrua_ros.rotations import rot_x, rot_z

# (a_{i-1}, d_i, alpha_{i-1}) of joints 1..7, then the flange (fixed).
DH = np.array([
    [0.0, 0.333, 0.0],
    [0.0, 0.0, -np.pi / 2],
    [0.0, 0.316, np.pi / 2],
    [0.0825, 0.0, np.pi / 2],
    [-0.0825, 0.384, -np.pi / 2],
    [0.0, 0.0, np.pi / 2],
    [0.088, 0.0, np.pi / 2],
])
FLANGE_D = 0.107
HAND_YAW = -np.pi / 4
TCP_D = 0.1034
Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
QD_MAX = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])   # rad/s
POSITION_SLACK_M = 1e-3   # how far one twist step may move the grip site along an axis beyond |v| * dt [m]
Q_SEED = np.array([0.0, 0.2, 0.0, -2.4, 0.0, 2.6, np.pi / 4])


def transform(R: np.ndarray | None = None, t=(0.0, 0.0, 0.0)) -> np.ndarray:
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    T[:3, 3] = t
    return T


def dh_transform(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
    """Modified DH: RotX(alpha) TransX(a) RotZ(theta) TransZ(d)."""
    return transform(rot_x(alpha), (a, 0.0, 0.0)) @ transform(rot_z(theta), (0.0, 0.0, d))


def joint_origin(i: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """URDF ``<origin xyz rpy>`` of joint ``i`` (0-based) equal to its DH transform at theta = 0."""
    a, d, alpha = DH[i]
    return (float(a), float(-np.sin(alpha) * d), float(np.cos(alpha) * d)), (float(alpha), 0.0, 0.0)


T_FLANGE_HAND = transform(rot_z(HAND_YAW), (0.0, 0.0, FLANGE_D))
T_HAND_TCP = transform(None, (0.0, 0.0, TCP_D))


def rotvec(R: np.ndarray) -> np.ndarray:
    """Rotation vector (axis * angle, rad) of a rotation matrix."""
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    ang = np.arccos(c)
    v = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if ang < 1e-9:
        return 0.5 * v
    if np.pi - ang < 1e-6:  # near pi: axis from the symmetric part
        axis = np.sqrt(np.maximum((np.diag(R) + 1.0) / 2.0, 0.0))
        i = int(np.argmax(axis))
        axis = (R[:, i] + np.eye(3)[:, i]) / (2.0 * axis[i])
        return axis / np.linalg.norm(axis) * ang
    return v * (ang / (2.0 * np.sin(ang)))


def exp_rot(w: np.ndarray) -> np.ndarray:
    """Rotation matrix of a rotation vector (Rodrigues)."""
    ang = float(np.linalg.norm(w))
    if ang < 1e-12:
        return np.eye(3)
    k = np.asarray(w) / ang
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(ang) * K + (1 - np.cos(ang)) * K @ K


def _largest_fraction(ok, iters: int = 20) -> float:
    """The largest f in [0, 1] with ``ok(f)`` (1.0 when ``ok(1.0)``; bisection otherwise, ``ok(0)`` assumed)."""
    if ok(1.0):
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


class Panda:
    """A Panda arm placed at ``T_world_base`` (4x4). Joint vectors are 7 radians, arm joints 1..7."""

    def __init__(self, T_world_base: np.ndarray):
        self.T_world_base = np.asarray(T_world_base, dtype=float)

    def frames(self, q) -> list[np.ndarray]:
        """World poses of link0..link7, the hand and the grip site (10 matrices, 4x4)."""
        out = [self.T_world_base]
        T = self.T_world_base
        for i in range(7):
            T = T @ dh_transform(*DH[i], float(q[i]))
            out.append(T)
        hand = T @ transform(None, (0, 0, FLANGE_D)) @ transform(rot_z(HAND_YAW))
        out.append(hand)
        out.append(hand @ T_HAND_TCP)
        return out

    def fk(self, q) -> np.ndarray:
        """World pose (4x4) of the grip site."""
        return self.frames(q)[-1]

    def jacobian(self, q) -> tuple[np.ndarray, np.ndarray]:
        """(6x7 geometric Jacobian of the grip site in the world frame [v; w], grip-site pose)."""
        fr = self.frames(q)
        p = fr[-1][:3, 3]
        J = np.zeros((6, 7))
        for i in range(7):
            z, o = fr[i + 1][:3, 2], fr[i + 1][:3, 3]
            J[:3, i] = np.cross(z, p - o)
            J[3:, i] = z
        return J, fr[-1]

    def ik(self, q0, T_target: np.ndarray, *, iters: int = 30, tol: float = 1e-5, damping: float = 1e-3,
           q_rest=None, rest_gain: float = 0.0) -> tuple[np.ndarray, float]:
        """Damped least-squares IK from ``q0`` toward ``T_target`` within the joint limits.

        Returns (q, residual) with the residual the norm of [position error m, rotation error rad]. ``q_rest`` with
        ``rest_gain`` adds a null-space pull toward a preferred posture."""
        q = np.clip(np.asarray(q0, dtype=float).copy(), Q_MIN, Q_MAX)
        err = np.inf
        for _ in range(iters):
            J, T = self.jacobian(q)
            e = np.concatenate([T_target[:3, 3] - T[:3, 3], rotvec(T_target[:3, :3] @ T[:3, :3].T)])
            err = float(np.linalg.norm(e))
            if err < tol:
                break
            JJt = J @ J.T + damping * np.eye(6)
            dq = J.T @ np.linalg.solve(JJt, e)
            if q_rest is not None and rest_gain > 0:
                N = np.eye(7) - J.T @ np.linalg.solve(JJt, J)
                dq += N @ (rest_gain * (np.asarray(q_rest) - q))
            q = np.clip(q + dq, Q_MIN, Q_MAX)
        return q, err

    def twist_step(self, q, v, w, dt: float, q_rest=None) -> tuple[np.ndarray, float]:
        """Resolved-rate step: move the grip site by ``v`` [m/s] and ``w`` [rad/s] (world) for ``dt`` [s].

        The target pose is integrated exactly and solved with a few IK iterations, then joint speeds are capped at
        ``QD_MAX``. Returns (q_next, residual pose error [m/rad] left after the step)."""
        q = np.asarray(q, dtype=float)
        T = self.fk(q)
        target = T.copy()
        target[:3, 3] += np.asarray(v, dtype=float) * dt
        target[:3, :3] = exp_rot(np.asarray(w, dtype=float) * dt) @ T[:3, :3]
        q_new, _ = self.ik(q, target, iters=8, q_rest=q_rest, rest_gain=0.05)
        dq = q_new - q
        # beyond a joint's speed limit the whole step is scaled down (as MoveIt Servo scales a command), so the grip
        # site still moves along the commanded direction, only slower; clipping the one joint would bend the path
        dq *= min(1.0, float(np.min(QD_MAX * dt / np.maximum(np.abs(dq), 1e-12))))
        # nor does the grip site move farther along any axis than commanded: a scaled-down or unconverged solution
        # swings it sideways (0.065 m in one 0.05 s step under a 10 rad/s turn at 1 m/s, past the speed filter)
        reach = np.abs(np.asarray(v, dtype=float)) * dt + POSITION_SLACK_M
        scale = _largest_fraction(lambda f: bool(np.all(
            np.abs(self.fk(np.clip(q + f * dq, Q_MIN, Q_MAX))[:3, 3] - T[:3, 3]) <= reach)))
        q_new = np.clip(q + scale * dq, Q_MIN, Q_MAX)
        T_new = self.fk(q_new)
        res = float(np.linalg.norm(np.concatenate([target[:3, 3] - T_new[:3, 3],
                                                   rotvec(target[:3, :3] @ T_new[:3, :3].T)])))
        return q_new, res


def panda_urdf(arm_joints, finger_joints, base: str, end_effector: str, *, hand: str = "robot0_right_hand",
               name: str = "fake_panda") -> str:
    """A URDF of this arm (links ``robot0_link0..7``, the hand, the grip site, two prismatic fingers) whose joint
    origins are the DH transforms above, so ``robot_state_publisher`` would reproduce the node's /tf."""
    links = [base] + [f"robot0_link{i}" for i in range(1, 8)]
    out = [f'<?xml version="1.0"?>\n<robot name="{name}">']
    for link in [*links, hand, end_effector, "gripper0_leftfinger", "gripper0_rightfinger"]:
        out.append(f'  <link name="{link}"/>')
    for i, joint in enumerate(arm_joints):
        xyz, rpy = joint_origin(i)
        out.append(
            f'  <joint name="{joint}" type="revolute"><parent link="{links[i]}"/><child link="{links[i + 1]}"/>'
            f'<origin xyz="{xyz[0]:.6g} {xyz[1]:.6g} {xyz[2]:.6g}" rpy="{rpy[0]:.6g} 0 0"/><axis xyz="0 0 1"/>'
            f'<limit lower="{Q_MIN[i]}" upper="{Q_MAX[i]}" effort="87" velocity="{QD_MAX[i]}"/></joint>')
    out.append(f'  <joint name="robot0_hand_joint" type="fixed"><parent link="{links[-1]}"/><child link="{hand}"/>'
               f'<origin xyz="0 0 {FLANGE_D}" rpy="0 0 {HAND_YAW:.6g}"/></joint>')
    out.append(f'  <joint name="robot0_grip_site_joint" type="fixed"><parent link="{hand}"/>'
               f'<child link="{end_effector}"/><origin xyz="0 0 {TCP_D}" rpy="0 0 0"/></joint>')
    for joint, child, lo, hi in ((finger_joints[0], "gripper0_leftfinger", 0.0, 0.04),
                                 (finger_joints[1], "gripper0_rightfinger", -0.04, 0.0)):
        out.append(f'  <joint name="{joint}" type="prismatic"><parent link="{hand}"/><child link="{child}"/>'
                   f'<origin xyz="0 0 0.0584" rpy="0 0 0"/><axis xyz="0 1 0"/>'
                   f'<limit lower="{lo}" upper="{hi}" effort="20" velocity="0.2"/></joint>')
    out.append("</robot>\n")
    return "\n".join(out)
