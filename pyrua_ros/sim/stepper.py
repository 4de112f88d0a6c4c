"""The lean LIBERO control step: robosuite's controller and MuJoCo's physics, nothing else.

A stock ``env.step(action)`` of LIBERO (robosuite 1.4) spends most of its time in Python around 2-3 ms of physics:
per physics substep it runs ``mj_forward``, the controller (which runs ``mj_forward`` again on the same state),
``mj_step`` (a third forward pass, then the integration) and every observable; after the substeps it builds the
full observation dict and evaluates the success predicate twice. The sim node publishes none of the observations.

:class:`LeanStep` runs the same control step with MuJoCo's split step, the documented way to compute controls
from the current state: per substep ``mj_step1`` (position and velocity stages: kinematics, Jacobians, mass
matrix, bias forces), the env's own ``_pre_action`` (robosuite's controller and gripper, unchanged, writing
``ctrl``), then ``mj_step2`` (actuation, acceleration, constraints, integration). That is one forward pass per
substep instead of three. After the substeps it does what the stock step does besides observations: the env's
time keeping, LIBERO's object-state post-processing (``_post_process``: e.g. a stove turning on) and the official
success check (``_check_success``), once.

The controller's own ``sim.forward()`` is skipped while it runs: ``mj_step1`` has just computed everything it
reads from the same state, so the call would recompute identical numbers. The result is bit-identical to the
stock step (every ``qpos``/``qvel`` after 200 steps: difference 0.0; ``test_sim_env.py`` and
``benchmarks/sim_bridge.py`` check it). Observables are not updated; LIBERO's ``set_init_state`` refreshes them
when it needs them.
"""

from __future__ import annotations

import numpy as np


def _no_forward() -> None:
    """Stands in for ``MjSim.forward`` while the controller runs right after ``mj_step1`` (see module doc)."""


class LeanStep:
    """One control step of the robosuite env ``inner`` (``OffScreenRenderEnv(...).env``); ``step(action)`` returns
    LIBERO's success check after the step.

    Bound to one env instance: build a new one when the env is rebuilt. Requires an integrator ``mj_step2`` runs
    as ``mj_step`` does (Euler or implicit; RK4 is refused) and an env without a live viewer.
    """

    def __init__(self, inner):
        import mujoco

        self._mujoco = mujoco
        self._inner = inner
        self._sim = inner.sim
        self._model, self._data = inner.sim.model._model, inner.sim.data._data
        if self._model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4:
            raise ValueError("the lean step needs an integrator mj_step2 supports; this model uses RK4")
        if getattr(inner, "viewer", None) is not None:
            raise ValueError("the lean step does not update a viewer; build the env without one")
        self._substeps = int(inner.control_timestep / inner.model_timestep)   # as robosuite counts them

    def step(self, action: np.ndarray) -> bool:
        """Apply ``action`` (the env's action vector) for one control step; True when the task succeeded."""
        mj, inner, sim, m, d = self._mujoco, self._inner, self._sim, self._model, self._data
        inner.timestep += 1
        policy_step = True
        for _ in range(self._substeps):
            mj.mj_step1(m, d)
            sim.forward = _no_forward          # instance attribute shadows MjSim.forward for the controller only
            try:
                inner._pre_action(action, policy_step)
            finally:
                del sim.forward
            mj.mj_step2(m, d)
            policy_step = False
        inner.cur_time += inner.control_timestep
        inner.done = (inner.timestep >= inner.horizon) and not inner.ignore_done
        inner._post_process()
        return bool(inner._check_success())
