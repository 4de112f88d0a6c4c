"""The LIBERO-PRO simulation node ``sim``: the driver core over the LIBERO-PRO episode (ROS wiring only).

Behaviour: docs/DESIGN.md ("Sim interfaces", "Driver surface behaviour") and :mod:`pyrua_ros.driver.core`;
names from config/interfaces.yaml; parameters from config/sim.yaml (:data:`pyrua_ros.driver.node.PARAMETERS`).
The episode itself (``sim/env.py``) has no rclpy.

Two parameters are the sim's own. ``osc_action_scale`` (read only) declares LIBERO's OSC_POSE scale, [0.05 m, 0.5 rad]
of motion per control step per unit action: robo sends the reference's actions as twists of ``action * scale / dt``,
which :mod:`pyrua_ros.sim.arm` maps back to exactly that action, so a program moves as it moves under PyRUA-Lean.
``capture_step`` (one shot, -1 = now) makes the next capture or segmentation
render the scene as it was after that control step of this episode (the episode keeps the state of every step,
as the reference keeps every step's images). The reply then carries that step, its stamp and, for a capture,
``T_world_optical`` of that time (the wrist camera has moved since and that TF may be gone from a client's buffer).
"""

from __future__ import annotations

import numbers

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.parameter import Parameter

from pyrua_ros.driver.node import DriverNode, Shot, depth_range_fields
from pyrua_ros.sim.arm import OSC_POS_SCALE_M, OSC_ROT_SCALE_RAD, LiberoArm
from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.wire.convert import time_msg

CAPTURE_STEP = "capture_step"
OSC_ACTION_SCALE = "osc_action_scale"


def _make_model(values: dict, names) -> LiberoArm:
    # lockstep: sim time waits for its client anyway, so a stream frame waits for the renderer too (every frame of
    # camera_rate_hz is rendered, whatever the load); realtime drops the oldest frame instead
    return LiberoArm(stream_resolution=int(values["stream_resolution"]), stream_backlog=int(values["stream_backlog"]),
                     stream_wait=values["clock_mode"] == "lockstep", render_nice=int(values["render_nice"]),
                     gripper_open_m=names.robot.gripper_open_width_m, control_period_s=names.robot.control_period_s)


class SimNode(DriverNode):
    """The ``sim`` node: LIBERO-PRO behind the driver surface and the sim interfaces."""

    model: LiberoArm

    def __init__(self, **node_kwargs):
        super().__init__("sim", _make_model, LiberoArm.DEFAULT_EPISODE, label=DRIVERS["sim"].label, **node_kwargs)
        self.declare_parameter(OSC_ACTION_SCALE, [OSC_POS_SCALE_M, OSC_ROT_SCALE_RAD], ParameterDescriptor(
            description="[m, rad] of motion per control step that one unit of an OSC action commands (LIBERO's "
                        "OSC_POSE); a client sends action * scale / control period as the twist", read_only=True))
        self.declare_parameter(CAPTURE_STEP, -1, ParameterDescriptor(
            description="sim interface: the next capture / segmentation renders the scene as it was after this "
                        "control step (one shot: back to -1 = now after it)"))
        self.add_on_set_parameters_callback(self.on_set_capture_step)

    def on_set_capture_step(self, params) -> SetParametersResult:
        """``capture_step`` is -1 (now) or a step of this episode so far."""
        last = self.model.last_step().step
        for p in params:
            if p.name == CAPTURE_STEP and (isinstance(p.value, bool) or not isinstance(p.value, numbers.Integral)
                                           or not -1 <= p.value <= last):
                return SetParametersResult(successful=False, reason=f"{CAPTURE_STEP} must be -1 (now) or a past "
                                           f"step 0..{last}, got {p.value!r}")
        return SetParametersResult(successful=True)

    def _take_capture_step(self) -> int | None:
        """The step the next render shows (the one-shot ``capture_step``, then back to -1), or None for now."""
        requested = int(self.get_parameter(CAPTURE_STEP).value)
        if requested < 0:
            return None
        self.set_parameters([Parameter(CAPTURE_STEP, value=-1)])
        return requested

    def shoot(self, camera: str, size: int, *, segmentation: bool) -> Shot:
        past = self._take_capture_step()
        if past is None:
            return super().shoot(camera, size, segmentation=segmentation)
        stamp = time_msg(self.core.time_base + past * self.core.dt)   # that step's stamp in this episode
        if segmentation:
            ids, labels = self.model.segmentation(camera, size, step=past)
            return Shot(past, stamp, ids=ids, labels=labels)
        image, T_world_optical = self.model.capture_past(camera, size, past)
        return Shot(past, stamp, image=image,
                    reply={**depth_range_fields(image), "T_world_optical": T_world_optical.tolist()})
