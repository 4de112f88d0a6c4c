"""The single source of interface names: ``config/interfaces.yaml`` loaded into frozen dataclasses.

Everything that names a topic, service, action or frame goes through :func:`load`. Names are relative, resolved
in each node's namespace (:func:`resolve` gives the absolute name in a namespace). Templates such as
``/cameras/{camera}/color/image_raw`` are filled by the small helper methods, so callers never format names.
A YAML file given by path (or ``PYRUA_INTERFACES``) replaces the packaged one, which is how a real arm's
names are remapped.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
from typing import Any

import yaml

PACKAGE_CONFIG = pathlib.Path(__file__).resolve().parents[2] / "config" / "interfaces.yaml"


def _config_path(path: str | os.PathLike | None) -> pathlib.Path:
    if path:
        return pathlib.Path(path)
    if os.environ.get("PYRUA_INTERFACES"):
        return pathlib.Path(os.environ["PYRUA_INTERFACES"])
    if PACKAGE_CONFIG.is_file():
        return PACKAGE_CONFIG
    try:  # installed (colcon) layout: share/pyrua_ros/config/interfaces.yaml
        from ament_index_python.packages import get_package_share_directory

        return pathlib.Path(get_package_share_directory("pyrua_ros")) / "config" / "interfaces.yaml"
    except Exception as exc:  # pragma: no cover - only without a source tree and without an ament index
        raise FileNotFoundError("config/interfaces.yaml not found; set PYRUA_INTERFACES") from exc


@dataclasses.dataclass(frozen=True)
class Driver:
    """Layer-1 names (see config/interfaces.yaml for the message type of each)."""

    joint_states: str
    tf: str
    tf_static: str
    robot_description: str
    ee_pose: str
    servo_twist: str
    follow_joint_trajectory: str
    gripper_command: str
    gripper_target: str
    cartesian_move: str
    clock: str
    estop: str
    camera_color: str
    camera_depth: str
    camera_info: str
    safety_events: str

    def color(self, camera: str) -> str:
        return self.camera_color.format(camera=camera)

    def depth(self, camera: str) -> str:
        return self.camera_depth.format(camera=camera)

    def info(self, camera: str) -> str:
        return self.camera_info.format(camera=camera)


@dataclasses.dataclass(frozen=True)
class Frames:
    world: str
    base: str
    end_effector: str
    camera_optical: str

    def optical(self, camera: str) -> str:
        return self.camera_optical.format(camera=camera)


@dataclasses.dataclass(frozen=True)
class Robot:
    cameras: tuple[str, ...]
    arm_joints: tuple[str, ...]
    finger_joints: tuple[str, ...]
    gripper_open_width_m: float
    control_period_s: float


@dataclasses.dataclass(frozen=True)
class Sim:
    """Layer-2 names: the sim-only interfaces under the sim node's namespace."""

    node: str
    reset: str
    episode_status: str
    capture: str
    capture_color: str
    capture_depth: str
    capture_info: str
    capture_segmentation: str
    segmentation: str
    segmentation_labels: str
    ground_truth: str
    resolutions: dict[str, int]

    def _fill(self, template: str, camera: str, resolution: str) -> str:
        return template.format(camera=camera, resolution=resolution)

    def capture_service(self, camera: str, resolution: str) -> str:
        return self._fill(self.capture, camera, resolution)

    def segmentation_service(self, camera: str, resolution: str) -> str:
        return self._fill(self.capture_segmentation, camera, resolution)

    def capture_topics(self, camera: str, resolution: str) -> dict[str, str]:
        """Topic names of one capture: keys ``color``, ``depth``, ``camera_info``, ``segmentation``."""
        return {
            "color": self._fill(self.capture_color, camera, resolution),
            "depth": self._fill(self.capture_depth, camera, resolution),
            "camera_info": self._fill(self.capture_info, camera, resolution),
            "segmentation": self._fill(self.segmentation, camera, resolution),
        }


@dataclasses.dataclass(frozen=True)
class Agent:
    status: str
    cell: str
    output: str
    markers: str


@dataclasses.dataclass(frozen=True)
class Timeouts:
    server_wait_s: float
    step_reply_s: float
    reset_s: float
    capture_s: float


@dataclasses.dataclass(frozen=True)
class Interfaces:
    driver: Driver
    frames: Frames
    robot: Robot
    sim: Sim
    agent: Agent
    timeouts: Timeouts
    source: str

    def camera_frame(self, camera: str) -> str:
        return self.frames.optical(camera)


def _build(cls, data: dict[str, Any], section: str):
    names = {f.name for f in dataclasses.fields(cls)}
    missing = names - set(data)
    unknown = set(data) - names
    if missing or unknown:
        raise ValueError(
            f"interfaces.yaml section {section!r}: missing {sorted(missing)}, unknown {sorted(unknown)}"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**values)


@functools.lru_cache(maxsize=8)
def _load_cached(path: str) -> Interfaces:
    raw = yaml.safe_load(pathlib.Path(path).read_text())
    sections = {"driver": Driver, "frames": Frames, "robot": Robot, "sim": Sim, "agent": Agent, "timeouts": Timeouts}
    unknown = set(raw) - set(sections)
    if unknown:
        raise ValueError(f"interfaces.yaml: unknown sections {sorted(unknown)}; valid: {sorted(sections)}")
    built = {name: _build(cls, raw.get(name, {}), name) for name, cls in sections.items()}
    return Interfaces(source=str(path), **built)


def resolve(name: str, namespace: str = "/") -> str:
    """The absolute name an interface name gets in ``namespace`` (as rcl expands it, before any remapping): a
    relative name is put under the namespace, an absolute one stays. For code that names a topic without a node
    (an rviz config check, a bag's channel list); nodes resolve names themselves."""
    if name.startswith("/"):
        return name
    if not name or name.startswith("~"):
        raise ValueError(f"interface name {name!r} must be relative or absolute, not empty or private")
    ns = namespace.strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


def load(path: str | os.PathLike | None = None) -> Interfaces:
    """Load interface names (cached per path)."""
    return _load_cached(str(_config_path(path).resolve()))
