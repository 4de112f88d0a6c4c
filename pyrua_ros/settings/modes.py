"""The agent's mode vocabularies, defined once. Everything that validates a mode string imports it from here.

The primitive sets belong to the robot (``pyrua_ros.robo.libero``), the BLAS kernels to the driver's physics
(``pyrua_ros.sim_interfaces.blas``); both are re-exported, the primitive sets on first use: robo.libero needs numpy,
and this module must stay importable from the standard library alone (the runtime registry reads it, and the CLI
sandbox is started under a bare interpreter as a normal user). The runtimes are declared in
:mod:`pyrua_ros.settings.runtimes`, the drivers in :mod:`pyrua_ros.sim_interfaces.drivers`.
"""

from pyrua_ros.sim_interfaces.blas import KERNELS

BLAS_KERNELS = tuple(KERNELS)                    # ("native", "haswell")

ARMS = ("cells", "program", "tools")             # play arms; the prompt also knows "single-shot"
CODE_ARMS = ("cells", "program")                 # arms whose tool runs model-written code in the kernel
PROMPT_ARMS = (*ARMS, "single-shot")
IMAGE_POLICIES = ("on-motion", "on-demand", "none")
FEEDBACK_MODES = ("pure", "rich")
RICH_CALL_LIMIT = 40                              # rich feedback lists at most this many robot calls
MCP_RUNTIME = "mcp"                              # recorded by pyrua-ros mcp: an outside MCP client decides
ROBOTS = ("libero",)
CLOCK_MODES = ("lockstep", "realtime")
TOOL_CHOICES = ("auto", "required", "none")
FINISH_STATUSES = ("success", "failure", "stuck")
PLAY_STATUSES = ("completed", "timeout", "call_budget", "planner_error", "error", "boot_error", "interrupted")
BUDGET_MODES = ("calls", "wall")
PROGRESS_MODES = ("auto", "rich", "plain", "off")

__all__ = ["ARMS",  # noqa: F822 (PRIMITIVE_SETS comes from __getattr__ below) "BLAS_KERNELS", "BUDGET_MODES", "CLOCK_MODES", "CODE_ARMS",
           "FEEDBACK_MODES",
           "FINISH_STATUSES", "IMAGE_POLICIES", "MCP_RUNTIME", "PLAY_STATUSES", "PRIMITIVE_SETS", "PROGRESS_MODES",
           "PROMPT_ARMS", "ROBOTS", "TOOL_CHOICES"]


def __getattr__(name: str):
    if name == "PRIMITIVE_SETS":
        from pyrua_ros.robo.libero import PRIMITIVE_SETS  # noqa: PLC0415 (numpy: bare Python)

        return PRIMITIVE_SETS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
