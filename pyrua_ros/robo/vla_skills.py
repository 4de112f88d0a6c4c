"""The closed loops of the VLA skills: query the policy server each chunk, execute its actions, judge the result.

``VlaSkills.pick`` runs ``pi0_pick`` (stops once :class:`~pyrua_ros.robo.vla.PickMonitor` sees descend, close and
lift) and ``VlaSkills.contact`` runs ``pi0_doubled`` (stops when the task predicate fires). Each chunk sends one
LIBERO-layout observation (:func:`~pyrua_ros.robo.vla.libero_observation`) and executes the first
``PI0_CHUNK_STEPS`` actions through the Cartesian servo, one control step each.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pyrua_ros.robo import vla
from pyrua_ros.robo.calls import CallRunner
from pyrua_ros.robo.errors import ToolError
from pyrua_ros.robo.results import Contact, Pick
from pyrua_ros.robo.servo import CartesianServo


class VlaSkills:
    """VLA skills on ``servo`` with the openpi-compatible ``policy`` client."""

    def __init__(self, servo: CartesianServo, calls: CallRunner, policy: Any) -> None:
        self.servo = servo
        self.calls = calls
        self.backend = servo.backend
        self.policy = policy

    def pick(self, prompt: str, *, max_chunks: int, lift_thresh: float, gripper_closed_thresh: float,
             gripper_open_thresh: float, descent_thresh: float) -> Pick:
        monitor = vla.PickMonitor(lift_thresh, gripper_closed_thresh, gripper_open_thresh, descent_thresh)
        pose = self.backend.ee_pose()
        monitor.update(float(pose.pos[2]), float(self.backend.gripper_opening()))
        picked, chunks, steps, new = False, 0, 0, pose
        while chunks < max_chunks and not picked:
            actions = self.chunk("pi0_pick", prompt)
            chunks += 1
            for action in actions:
                new, used = self.servo.osc_action("pi0_pick", action)
                steps += used
                if new is None:
                    break
                if monitor.update(float(new.pos[2]), float(self.backend.gripper_opening())):
                    picked = True
                    break
            if any(self.calls.flags()) or new is None:
                break
        term, trunc = self.calls.flags()
        final_open = float(self.backend.gripper_opening())
        return Pick(success=picked, chunks_used=chunks, max_chunks=max_chunks, peak_lift_m=monitor.peak_lift_m,
                    min_gripper_opening=min(monitor.min_opening, final_open), final_gripper_opening=final_open,
                    terminated=term, truncated=trunc,
                    diagnostics={"descended": monitor.descended, "z_start": monitor.z_start,
                                 "z_min": monitor.z_min, "steps": steps})

    def contact(self, prompt: str, *, max_chunks: int) -> Contact:
        chunks = 0
        while chunks < max_chunks:
            actions = self.chunk("pi0_doubled", prompt)
            chunks += 1
            new = None
            for action in actions:
                new, _ = self.servo.osc_action("pi0_doubled", action)
                if new is None or any(self.calls.flags()):
                    break
            if new is None or any(self.calls.flags()):
                break
        term, trunc = self.calls.flags()
        success = bool(getattr(self.backend.status(), "success", False))
        return Contact(success=success, chunks_used=chunks, max_chunks=max_chunks, terminated=term, truncated=trunc)

    def chunk(self, tool: str, prompt: str) -> np.ndarray:
        """One policy query on the current low-res views and pose: the actions to execute."""
        self.calls.check_stop()
        agent = self.backend.capture("agentview", "low").color
        wrist = self.backend.capture("wrist", "low").color
        pose = self.backend.ee_pose()
        joints = self.backend.joints()
        qpos = ([float(p) for n, p in zip(joints.names, joints.positions) if "finger" in n] + [0.0, 0.0])[:2]
        obs = vla.libero_observation(agent, wrist, pose.pos, pose.quat_xyzw, qpos, prompt=prompt)
        try:
            return vla.chunk_actions(self.policy.infer(obs))
        except (ValueError, ConnectionError, OSError, RuntimeError) as exc:
            raise ToolError(tool, f"VLA policy server: {exc}") from exc
