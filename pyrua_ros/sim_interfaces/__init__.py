"""The sim interfaces: the few sim-only things (episode selection, reset, status, capture,
segmentation) that a real robot replaces with an operator or a model service. See docs/DESIGN.md."""

from pyrua_ros.sim_interfaces.status import CLOCK_MODES, EpisodeStatus

__all__ = ["CLOCK_MODES", "EpisodeStatus"]
