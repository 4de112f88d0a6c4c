"""``Captures``: camera views on request, from the sim interfaces' capture and segmentation services.

A capture service renders the view, publishes its images on latched topics (color, depth, camera info, or the
segmentation ids) and answers with the frame's stamp; the view is the set of messages of that stamp, its pose the
TF of that stamp (or the pose the reply carries, for a past render asked for with ``env_step``).
"""

from __future__ import annotations

import json

import numpy as np

from pyrua_ros.robo.backend import BackendRefused, CaptureFrame, SegmentationFrame
from pyrua_ros.robo.ros.episode import EpisodeControl
from pyrua_ros.robo.ros.link import Latest, RosLink
from pyrua_ros.robo.ros.state import RobotState
from pyrua_ros.wire.convert import camera_info_to_K, image_to_numpy, stamp_to_seconds


class Captures:
    """Capture and segmentation of every camera and resolution of the interfaces, over ``link``; the pose from
    ``state``'s TF; a past step through ``episode``'s one-shot ``capture_step`` parameter."""

    def __init__(self, link: RosLink, state: RobotState, episode: EpisodeControl):
        from sensor_msgs.msg import CameraInfo, Image
        from std_msgs.msg import String
        from std_srvs.srv import Trigger

        from pyrua_ros.wire import qos

        self.link, self.state, self.episode = link, state, episode
        names = link.names
        s = names.sim
        self.cameras = tuple(names.robot.cameras)
        self.resolutions = dict(s.resolutions)
        self._trigger_type = Trigger
        msg_types = {"color": Image, "depth": Image, "segmentation": Image, "camera_info": CameraInfo}
        self._frames: dict[str, Latest] = {}
        self._clients = {}
        for camera in self.cameras:
            for resolution in self.resolutions:
                for kind, topic in s.capture_topics(camera, resolution).items():
                    latest = Latest()
                    self._frames[topic] = latest
                    link.node.create_subscription(msg_types[kind], topic, latest.put, qos.LATCHED)
                self._clients[("color", camera, resolution)] = link.node.create_client(
                    Trigger, s.capture_service(camera, resolution))
                self._clients[("segmentation", camera, resolution)] = link.node.create_client(
                    Trigger, s.segmentation_service(camera, resolution))
        self._labels = Latest()
        link.node.create_subscription(String, s.segmentation_labels, lambda m: self._labels.put(json.loads(m.data)),
                                      qos.LATCHED)

    def _check_view(self, camera: str, resolution: str) -> None:
        if camera not in self.cameras:
            raise ValueError(f"unknown camera {camera!r}; valid: {list(self.cameras)}")
        if resolution not in self.resolutions:
            raise ValueError(f"unknown resolution {resolution!r}; valid: {list(self.resolutions)}")

    def _trigger(self, kind: str, camera: str, resolution: str, env_step: int | None = None) -> tuple[float, int, dict]:
        """Call a capture service: (stamp s, control step, the reply's JSON) of the frame it publishes. With
        ``env_step`` the sim's one-shot ``capture_step`` parameter asks for the scene as it was at that step."""
        if env_step is not None:
            self.episode.set_sim_parameter("capture_step", int(env_step))
        s = self.link.names.sim
        service = (s.capture_service if kind == "color" else s.segmentation_service)(camera, resolution)
        answer = self.link.call(self._clients[(kind, camera, resolution)], self._trigger_type.Request(), service,
                                self.link.timeouts.capture_s)
        if not answer.success:
            raise BackendRefused(f"{service}: {answer.message}")
        info = json.loads(answer.message)
        sec, nanosec = info["stamp"]
        return sec + nanosec * 1e-9, int(info.get("step", -1)), info

    def _frame(self, topic: str, stamp: float):
        return self.link.require(self._frames[topic], topic,
                                 lambda m: abs(stamp_to_seconds(m.header.stamp) - stamp) < 1e-6,
                                 timeout=self.link.timeouts.capture_s)

    def capture(self, camera: str, resolution: str, env_step: int | None = None) -> CaptureFrame:
        self._check_view(camera, resolution)
        stamp, step, info = self._trigger("color", camera, resolution, env_step)
        names = self.link.names
        topics = names.sim.capture_topics(camera, resolution)
        color = image_to_numpy(self._frame(topics["color"], stamp))
        depth = image_to_numpy(self._frame(topics["depth"], stamp)).astype(np.float32, copy=False)
        camera_info = self._frame(topics["camera_info"], stamp)
        if "T_world_optical" in info:   # a past render carries its pose (that TF may have left the buffer)
            T = np.asarray(info["T_world_optical"], dtype=float)
        else:
            T = self.state.tf.wait_for(names.frames.world, names.frames.optical(camera), stamp,
                                       self.link.timeouts.capture_s)
        near, far = info.get("depth_near"), info.get("depth_far")
        return CaptureFrame(camera=camera, resolution=resolution, color=color, depth=depth,
                            K=camera_info_to_K(camera_info), T_world_optical=T, stamp=stamp, env_step=step,
                            depth_near=None if near is None else float(near),
                            depth_far=None if far is None else float(far))

    def segmentation(self, camera: str, resolution: str, env_step: int | None = None) -> SegmentationFrame:
        self._check_view(camera, resolution)
        stamp, _step, _info = self._trigger("segmentation", camera, resolution, env_step)
        topics = self.link.names.sim.capture_topics(camera, resolution)
        ids = image_to_numpy(self._frame(topics["segmentation"], stamp)).astype(np.int32, copy=False)
        labels = self.link.require(self._labels, self.link.names.sim.segmentation_labels)
        return SegmentationFrame(ids=ids, labels={int(k): v for k, v in labels.items()}, stamp=stamp,
                                 camera=camera, resolution=resolution)
