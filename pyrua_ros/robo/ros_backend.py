"""``RosBackend``: the :class:`~pyrua_ros.robo.backend.RobotBackend` protocol over ROS 2 (rclpy clients only).

It speaks only the interfaces of ``config/interfaces.yaml``: the driver surface (``/ee_pose``, ``/joint_states``,
``/tf``, the servo twist topic, the GripperCommand action) and the sim interfaces (episode parameters + reset,
episode status, capture and segmentation). Any driver that serves them works: the LIBERO sim node, the
kinematic fake arm, or a real arm's remapped drivers.

The backend is a facade over the adapters of :mod:`pyrua_ros.robo.ros`, each doing one job over one node owner
(:class:`~pyrua_ros.robo.ros.link.RosLink`, which also documents the threading model): the per-step state, the
episode, motion, the gripper and captures. Public methods are called from the agent's thread; they publish or send
requests and then wait on a condition or a future, always with a deadline from ``timeouts`` in interfaces.yaml.
"""

from __future__ import annotations

import numpy as np

from pyrua_ros.robo.backend import CaptureFrame, EePose, GripperOutcome, JointSnapshot, MoveOutcome, SegmentationFrame
from pyrua_ros.robo.ros.capture import Captures
from pyrua_ros.robo.ros.episode import EpisodeControl
from pyrua_ros.robo.ros.gripper import Gripper
from pyrua_ros.robo.ros.link import RosLink
from pyrua_ros.robo.ros.motion import Motion
from pyrua_ros.robo.ros.state import RobotState
from pyrua_ros.sim_interfaces.status import EpisodeStatus
from pyrua_ros.wire.interfaces import Interfaces
from pyrua_ros.wire.move_law import ServoLaw


class RosBackend:
    """RobotBackend over ROS 2. ``RosBackend()`` connects; ``close()`` releases everything (idempotent).

    ``interfaces``: names and timeouts (default: ``pyrua_ros.wire.interfaces.load()``); names are relative, so
    they resolve in the node's namespace.
    ``node``: run on this node (the launched ``agent`` node, whose namespace, remappings and parameters then hold
    for robo too: one node per process role); it must not be spun by anyone else, and is left alive by ``close``.
    Without one, the backend makes its own node in its own context, initialised with ``context_args`` only (e.g.
    ``["--ros-args", "-r", "__ns:=/robot1"]``), never with ``sys.argv``: a launched process's ``--ros-args``
    (``__node:=agent``) belong to that process's node, not to a second one.
    """

    def __init__(self, interfaces: Interfaces | None = None, *, node=None, node_name: str | None = None,
                 context_args: list[str] | None = None):
        self.link = RosLink(interfaces, node=node, node_name=node_name, context_args=context_args)
        try:
            self.state = RobotState(self.link)
            self.episode = EpisodeControl(self.link, self.state)
            self.motion = Motion(self.link, self.state, self.episode)
            self.fingers = Gripper(self.link, self.state)
            self.views = Captures(self.link, self.state, self.episode)
        except BaseException:
            self.link.close()
            raise
        self.link.start()
        self.names = self.link.names
        self.node = self.link.node   # the episode host adds its recorder, video and agent publishers to it
        self.stepwise_node = self.link.state_node   # ... and there its subscriptions to what every step publishes
        self.followed_clock = self.link.followed_clock
        self.control_period_s = float(self.names.robot.control_period_s)
        self.cameras = self.views.cameras
        self.resolutions = self.views.resolutions
        self.state_trace = self.state.trace   # the per-step state digests of the driver's statuses (result.json)
        self.foreign_status = self.state.foreign_status   # other publishers of the episode status: {gid hex: info}
        self.tf = self.state.tf

    # ------------------------------------------------------------------ episode and state
    def set_deadline(self, deadline: float | None) -> None:
        """Every wait of the calls that follow ends by ``deadline`` (``time.monotonic()`` s; None: no bound)."""
        self.link.set_deadline(deadline)

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> EpisodeStatus:
        return self.episode.reset(suite, task, seed, max_episode_steps)

    @property
    def osc_action_scale(self) -> tuple[float, float]:
        """[m, rad] of twist per control step per unit OSC action, as the driver declares it (asked once)."""
        return self.episode.osc_action_scale

    def status(self) -> EpisodeStatus:
        return self.state.status()

    def latest_status(self) -> EpisodeStatus | None:
        """The latest episode status received from the driver, or None (no wait)."""
        return self.state.latest.value

    def ee_pose(self) -> EePose:
        return self.state.ee_pose()

    def joints(self) -> JointSnapshot:
        return self.state.joints()

    def gripper_opening(self) -> float:
        return float(self.status().gripper_opening)

    def clipped_steps(self) -> int:
        """Control steps the driver's safety filter clipped so far (its ``clipped`` safety events)."""
        return self.state.clipped_steps()

    # ------------------------------------------------------------------ motion
    def servo(self, linear: np.ndarray, angular: np.ndarray) -> EePose:
        return self.motion.servo(linear, angular)

    def move_to_target(self, law: ServoLaw, gripper_m: float, *, max_steps: int) -> MoveOutcome | None:
        """:meth:`Motion.move_to_target <pyrua_ros.robo.ros.motion.Motion.move_to_target>`."""
        return self.motion.move_to_target(law, gripper_m, max_steps=max_steps)

    def gripper_target(self, position_m: float) -> bool:
        """:meth:`Gripper.gripper_target <pyrua_ros.robo.ros.gripper.Gripper.gripper_target>`."""
        return self.fingers.gripper_target(position_m)

    def gripper(self, position_m: float, max_effort: float = 0.0) -> GripperOutcome:
        return self.fingers.gripper(position_m, max_effort)

    # ------------------------------------------------------------------ perception
    def capture(self, camera: str, resolution: str, env_step: int | None = None) -> CaptureFrame:
        return self.views.capture(camera, resolution, env_step)

    def segmentation(self, camera: str, resolution: str, env_step: int | None = None) -> SegmentationFrame:
        return self.views.segmentation(camera, resolution, env_step)

    # ------------------------------------------------------------------ lifecycle
    def cancel(self) -> None:
        self.motion.cancel()

    def close(self) -> None:
        self.link.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
