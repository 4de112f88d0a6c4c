"""Pi0.5 VLA skills as clients of an openpi-compatible websocket policy server (``openpi_client``).

``robo.pi0_pick`` / ``robo.pi0_doubled`` run a frozen LIBERO Pi0.5 policy closed-loop: every chunk the robot sends
one observation in the LIBERO layout and executes the first ``PI0_CHUNK_STEPS`` (5) actions of the returned chunk
through the backend's servo / gripper path. Without an endpoint there is no client, and the robot has the no-VLA
primitive set (the skills are absent from its class).

Observation (openpi LIBERO example keys): ``observation/image`` agentview and ``observation/wrist_image`` wrist,
each 224x224 uint8 RGB (resized with padding, rotated as the LIBERO training data: see :func:`pi0_image`),
``observation/state`` float32 (8,) = eef position (3) m + eef axis-angle (3) rad + gripper finger qpos (2) m,
``prompt`` str. Action: (N, 7) OSC_POSE deltas in [-1, 1]: ``a[0:3]`` x 0.05 m, ``a[3:6]`` x 0.5 rad per step,
``a[6]`` gripper (-1 open, +1 close).
"""

from __future__ import annotations

import dataclasses
import math
import socket
import urllib.parse
from typing import Any, Protocol

import numpy as np

from pyrua_ros.rotations import quat_to_axis_angle

PI0_CHUNK_STEPS = 5
PI0_IMAGE_SIZE = 224


class Policy(Protocol):
    """The openpi client surface used here (``openpi_client.websocket_client_policy.WebsocketClientPolicy``)."""

    def infer(self, obs: dict) -> dict:
        ...


def connect(endpoint: str, *, timeout_s: float = 10.0) -> Policy:
    """Connect to a policy server at ``host:port`` (or a ``ws://`` URI); ConnectionError naming it on failure.

    The openpi client itself waits without a deadline, so the TCP endpoint is checked first within ``timeout_s``.
    """

    from openpi_client.websocket_client_policy import WebsocketClientPolicy  # noqa: PLC0415 (openpi_client)

    if endpoint.startswith("ws"):
        parsed = urllib.parse.urlparse(endpoint)
        host, port = parsed.hostname or "", parsed.port or 80
    else:
        host, _, port_text = endpoint.rpartition(":")
        if not host or not port_text.isdigit():
            raise ValueError(f"--vla-endpoint must be host:port or a ws:// URI; got {endpoint!r}")
        port = int(port_text)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return WebsocketClientPolicy(host=host, port=port)
    except Exception as exc:  # OSError, websockets' InvalidURI / InvalidHandshake / TimeoutError variants
        raise ConnectionError(f"VLA policy server {endpoint}: {exc}") from exc


def pi0_image(upright_rgb: np.ndarray) -> np.ndarray:
    """224x224 uint8 policy input from an upright camera image. LIBERO's training data is the raw (bottom-up)
    render rotated by 180 degrees, i.e. the upright image mirrored left-right; then resized with padding."""
    from openpi_client import image_tools  # noqa: PLC0415 (openpi_client)

    img = np.ascontiguousarray(np.asarray(upright_rgb)[:, ::-1])
    return image_tools.convert_to_uint8(image_tools.resize_with_pad(img, PI0_IMAGE_SIZE, PI0_IMAGE_SIZE))


def libero_observation(agentview: np.ndarray, wrist: np.ndarray, eef_pos, eef_quat, gripper_qpos, *,
                       prompt: str) -> dict[str, Any]:
    """The observation dict of one policy query (see the module docstring)."""
    state = np.concatenate([np.asarray(eef_pos, float), quat_to_axis_angle(eef_quat), np.asarray(gripper_qpos, float)])
    return {
        "observation/image": pi0_image(agentview),
        "observation/wrist_image": pi0_image(wrist),
        "observation/state": state.astype(np.float32),
        "prompt": str(prompt),
    }


def chunk_actions(reply: dict) -> np.ndarray:
    """The first PI0_CHUNK_STEPS actions (k, 7) of a policy reply; ValueError for a malformed reply."""
    actions = np.asarray(reply.get("actions") if isinstance(reply, dict) else None, dtype=np.float64)
    if actions.ndim != 2 or actions.shape[1] < 7 or len(actions) == 0:
        raise ValueError(f"policy reply needs 'actions' of shape (N, 7), got {getattr(actions, 'shape', None)}")
    return np.clip(actions[:PI0_CHUNK_STEPS, :7], -1.0, 1.0)


@dataclasses.dataclass
class PickMonitor:
    """The pi0_pick success heuristic: the gripper descended by ``descent_thresh`` m, is closed with an opening in
    [gripper_open_thresh, gripper_closed_thresh) m, and rose ``lift_thresh`` m above its lowest point."""

    lift_thresh: float
    gripper_closed_thresh: float
    gripper_open_thresh: float
    descent_thresh: float
    z_start: float = math.nan
    z_min: float = math.inf
    peak_lift_m: float = 0.0
    min_opening: float = math.inf
    descended: bool = False

    def update(self, z: float, opening: float) -> bool:
        """Feed one step (eef z m, finger gap m); True once the pick heuristic holds."""
        if math.isnan(self.z_start):
            self.z_start = z
        self.z_min = min(self.z_min, z)
        self.min_opening = min(self.min_opening, opening)
        self.descended = self.descended or (self.z_start - self.z_min) >= self.descent_thresh
        lift = z - self.z_min
        self.peak_lift_m = max(self.peak_lift_m, lift)
        closed = self.gripper_open_thresh <= opening < self.gripper_closed_thresh
        return self.descended and closed and lift >= self.lift_thresh
