"""``EpisodeControl``: the sim interfaces that pick and reset an episode, and the driver's parameters robo reads.

A reset sets the episode parameters (``suite``, ``task``, ``seed``, ``max_episode_steps``) on the driver node in one
atomic call, then calls its reset service, and returns once the reset's status and a pose of that episode are in.
"""

from __future__ import annotations

import contextlib

from pyrua_ros.robo.backend import BackendRefused, BackendTimeout
from pyrua_ros.robo.ros.link import RESEND_AFTER_S, RosLink
from pyrua_ros.robo.ros.state import RobotState
from pyrua_ros.sim_interfaces.status import EpisodeStatus

# A driver that declares no osc_action_scale is taken to track twists exactly: PyRUA-Lean's rotation command
# (error / 0.1 rad per unit action) then becomes the error itself per step.
DEFAULT_OSC_ACTION_SCALE = (0.05, 0.1)


def _int_param(name: str, value: int):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue

    return Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=int(value)))


class EpisodeControl:
    """Reset and parameters of the driver node, over ``link``; ``state`` is told of each new episode."""

    def __init__(self, link: RosLink, state: RobotState):
        from rcl_interfaces.srv import GetParameters, SetParametersAtomically
        from std_srvs.srv import Trigger

        self.link, self.state = link, state
        s = link.names.sim
        self._reset = link.node.create_client(Trigger, s.reset)
        self._get_params = link.node.create_client(GetParameters, f"{s.node}/get_parameters")
        self._set_params = link.node.create_client(SetParametersAtomically, f"{s.node}/set_parameters_atomically")
        self._get_params_type, self._set_params_type = GetParameters, SetParametersAtomically
        self._trigger_type = Trigger
        self._osc_scale: tuple[float, float] | None = None

    def reset(self, suite: str, task: int, seed: int, max_episode_steps: int) -> EpisodeStatus:
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue

        link, names = self.link, self.link.names
        req = self._set_params_type.Request(parameters=[
            Parameter(name="suite", value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(suite))),
            _int_param("task", task), _int_param("seed", seed), _int_param("max_episode_steps", max_episode_steps),
        ])
        # The driver may still be booting (a sim node builds LIBERO before it spins, ~15-60 s on a loaded
        # machine): its parameter service exists early but answers only once it spins, so the first call of an
        # episode gets the reset deadline, not the server-wait one.
        # Setting the same parameters twice is harmless: a lost answer (see RosLink.call) is asked for again, and
        # once this exchange went through, discovery has matched this client on the driver's side for the reset too.
        res = link.call(self._set_params, req, f"{names.sim.node}/set_parameters_atomically",
                        link.timeouts.reset_s, server_wait=link.timeouts.reset_s, resend_after_s=RESEND_AFTER_S)
        if not res.result.successful:
            raise ValueError(res.result.reason)
        answer = link.call(self._reset, self._trigger_type.Request(), names.sim.reset, link.timeouts.reset_s)
        if not answer.success:
            raise BackendRefused(f"{names.sim.reset}: {answer.message}")
        status = EpisodeStatus.from_json(answer.message)
        self.state.new_episode(status)
        link.cancelled.clear()
        link.require(self.state.latest, names.sim.episode_status,
                     lambda st: st.episode_id == status.episode_id and st.step == status.step)
        link.require(self.state.pose, names.driver.ee_pose)
        return status

    @property
    def osc_action_scale(self) -> tuple[float, float]:
        """[m, rad] of twist per control step per unit OSC action, as the driver declares it in its
        ``osc_action_scale`` parameter (asked once); ``DEFAULT_OSC_ACTION_SCALE`` for a driver without one."""
        if self._osc_scale is None:
            self._osc_scale = DEFAULT_OSC_ACTION_SCALE
            with contextlib.suppress(BackendTimeout):
                answer = self.link.call(self._get_params, self._get_params_type.Request(names=["osc_action_scale"]),
                                        f"{self.link.names.sim.node}/get_parameters",
                                        self.link.timeouts.server_wait_s, resend_after_s=RESEND_AFTER_S)
                values = list(answer.values[0].double_array_value) if answer.values else []
                if len(values) == 2 and min(values) > 0:
                    self._osc_scale = (float(values[0]), float(values[1]))
        return self._osc_scale

    def set_sim_parameter(self, name: str, value: int) -> None:
        """Set one integer parameter of the sim node; BackendRefused with its reason when it refuses."""
        node = self.link.names.sim.node
        res = self.link.call(self._set_params, self._set_params_type.Request(parameters=[_int_param(name, value)]),
                             f"{node}/set_parameters_atomically", self.link.timeouts.capture_s)
        if not res.result.successful:
            raise BackendRefused(f"{node}: {name}={value} refused: {res.result.reason}")
