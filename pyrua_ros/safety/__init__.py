"""The safety filter: workspace box, speed limits, e-stop latch. Pure Python, used by every driver."""

from pyrua_ros.safety.filter import EStop, FilteredTwist, SafetyEvent, SafetyFilter, SafetyLimits, refusal

__all__ = ["EStop", "FilteredTwist", "SafetyEvent", "SafetyFilter", "SafetyLimits", "refusal"]
