"""The agent's mode vocabularies, defined once. Everything that validates a mode string imports it from here.

The primitive sets belong to the robot (``pyrua_ros.robo.libero``) and are re-exported.
"""

from pyrua_ros.robo.libero import PRIMITIVE_SETS

ARMS = ("cells", "program")                      # play arms; the prompt also knows "single-shot"
PROMPT_ARMS = (*ARMS, "single-shot")
IMAGE_POLICIES = ("on-motion", "on-demand", "none")
FEEDBACK_MODES = ("pure", "rich")
RUNTIMES = ("openai", "replay")
ROBOTS = ("libero",)
DRIVERS = ("sim", "fake", "external")
CLOCK_MODES = ("lockstep", "realtime")
TOOL_CHOICES = ("auto", "required", "none")
FINISH_STATUSES = ("success", "failure", "stuck")
PLAY_STATUSES = ("completed", "timeout", "call_budget", "planner_error", "error", "boot_error")
BUDGET_MODES = ("calls", "wall")
PROGRESS_MODES = ("auto", "rich", "plain", "off")

__all__ = ["ARMS", "BUDGET_MODES", "CLOCK_MODES", "DRIVERS", "FEEDBACK_MODES", "FINISH_STATUSES", "IMAGE_POLICIES",
           "PLAY_STATUSES", "PRIMITIVE_SETS", "PROGRESS_MODES", "PROMPT_ARMS", "ROBOTS", "RUNTIMES", "TOOL_CHOICES"]
