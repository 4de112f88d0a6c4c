"""Joint-position control of LIBERO's Panda, swapped in for the OSC_POSE controller for as long as it is needed.

LIBERO builds its robot with robosuite's OSC_POSE controller (7-D delta pose action). For joint trajectories the
sim needs a joint-space controller instead; robosuite's JOINT_POSITION controller is that, but it cannot be
chosen per call through LIBERO's env wrapper. :class:`JointPositionMode` builds one for the live robot and swaps it
in (robot controller, the robot's action buffer and the env's action size), and swaps the OSC controller back on
:meth:`JointPositionMode.exit`. A soft ``env.reset()`` rebuilds the robot's OSC controller by itself, so a mode that
is still active across a reset is simply dropped.

The controller is robosuite's in delta mode: the action is ``clip((q_target - q) / max_step, -1, 1)`` per joint, so
the goal of each control step is the target itself once it is within ``max_step`` rad, and a PD law with gravity
compensation pulls the joints there.
"""

from __future__ import annotations

import numpy as np

MAX_STEP_RAD = 0.05  # robosuite JOINT_POSITION output_max: largest goal change per control step [rad]
KP = 150.0           # joint stiffness [1/s^2] (mass-matrix weighted, critically damped); robosuite's default is 50

# Keys robosuite fills in a controller config for a particular robot (copied from the live OSC config).
_ROBOT_KEYS = ("robot_name", "sim", "eef_name", "eef_rot_offset", "joint_indexes", "actuator_range",
               "policy_freq", "ndim")


class JointPositionMode:
    """A robosuite JOINT_POSITION controller swapped into ``robot`` of the robosuite env ``env`` while active."""

    def __init__(self, env, robot):
        from robosuite.controllers import controller_factory, load_controller_config
        from robosuite.utils.buffers import DeltaBuffer

        config = load_controller_config(default_controller="JOINT_POSITION")
        config.update({k: robot.controller_config[k] for k in _ROBOT_KEYS})
        config["output_max"], config["output_min"] = MAX_STEP_RAD, -MAX_STEP_RAD
        config["kp"] = KP
        self._env, self._robot = env, robot
        self._osc = robot.controller
        self._osc_actions = robot.recent_actions
        self._osc_action_dim = env._action_dim
        self._controller = controller_factory("JOINT_POSITION", config)
        self._actions = DeltaBuffer(dim=self._controller.control_dim + robot.gripper.dof)
        self._robot.controller = self._controller
        self._robot.recent_actions = self._actions
        self._env._action_dim = self._osc_action_dim + self._controller.control_dim - self._osc.control_dim

    def action(self, q: np.ndarray, q_target: np.ndarray, gripper: float) -> np.ndarray:
        """The env action (7 joint deltas + gripper) that drives joints at ``q`` toward ``q_target`` [rad]."""
        delta = np.clip((np.asarray(q_target, dtype=np.float64) - q) / MAX_STEP_RAD, -1.0, 1.0)
        return np.concatenate([delta, [float(gripper)]])

    def exit(self) -> None:
        """Swap the OSC controller, its action buffer and the env's action size back."""
        if self._robot.controller is self._controller:
            self._robot.controller = self._osc
            self._robot.recent_actions = self._osc_actions
            self._env._action_dim = self._osc_action_dim
