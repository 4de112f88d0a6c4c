"""The episode-status JSON schema of ``/sim/episode_status`` (docs/DESIGN.md, "Sim interfaces").

Published by the sim node after every control step and on reset, and returned in the ``message`` of
``/sim/reset``. :meth:`EpisodeStatus.from_json` refuses missing or unknown keys, naming them, so a schema drift
between the node and its clients fails loudly instead of defaulting a field.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

CLOCK_MODES = ("lockstep", "realtime")
OPTIONAL = ("digest_scope",)   # keys a status may omit (added after the schema's first version)


@dataclasses.dataclass(frozen=True)
class EpisodeStatus:
    """One episode's state.

    episode_id: counts resets of this node (1 = first episode). suite/task/seed: the LIBERO-PRO episode.
    task_language: the instruction. step: control steps since reset. sim_time: seconds of sim time.
    success: the official check, latched. terminated: == success. truncated: step >= max_episode_steps.
    object_names: movable objects of the scene, sorted (as the reference lists them).
    clock_mode: ``lockstep`` or ``realtime``.
    estop: the e-stop latch. gripper_opening: finger gap [m]. gripper_target: the finger-gap target [m] every
    control step carries (set by a GripperCommand goal or the gripper target topic; open after a reset).
    state_digest: the chained digest of the physics state through this step
    (:mod:`pyrua_ros.sim_interfaces.state_digest`); empty from a driver that has no physics state to hash (a real
    arm). digest_scope: where that digest compares bit for bit, the driver's BLAS kernel and machine
    (:func:`pyrua_ros.sim_interfaces.blas.digest_scope`, e.g. ``"openblas 0.3.31 Haswell on x86_64"``); empty
    where there is no digest. Optional in the JSON (a driver of an earlier version omits it).
    """

    episode_id: int
    suite: str
    task: int
    seed: int
    task_language: str
    step: int
    sim_time: float
    success: bool
    terminated: bool
    truncated: bool
    max_episode_steps: int
    object_names: tuple[str, ...]
    clock_mode: Literal["lockstep", "realtime"]
    estop: bool
    gripper_opening: float
    gripper_target: float
    state_digest: str = ""
    digest_scope: str = ""

    def __post_init__(self):
        if self.clock_mode not in CLOCK_MODES:
            raise ValueError(f"clock_mode {self.clock_mode!r} is not one of {list(CLOCK_MODES)}")

    @property
    def over(self) -> bool:
        """True once the episode terminated or was truncated: motion is refused until the next reset."""
        return self.terminated or self.truncated

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["object_names"] = list(self.object_names)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict) -> EpisodeStatus:
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in data and f.name not in OPTIONAL]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ValueError(f"episode status: missing keys {missing}, unknown keys {unknown}; expected {names}")
        values = dict(data)
        values["object_names"] = tuple(values["object_names"])
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> EpisodeStatus:
        return cls.from_dict(json.loads(text))
