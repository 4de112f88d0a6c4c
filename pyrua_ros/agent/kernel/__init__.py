"""The cell kernel (layer 7): model-written Python runs in a separate process that holds no ROS handle.

``Kernel(target, workspace, limits=KernelLimits())`` starts the child (``worker.py``) and serves its robo calls
on the real ``target``; ``run_cell`` / ``run_program`` return ``CellOutcome`` / ``ProgramOutcome``. The wire is
``protocol.py`` (JSON + raw buffers, never pickle), the Python-level rules are ``policy.py``, the child's
``robo`` is built by ``proxy.py``. This package never imports rclpy.
"""

from pyrua_ros.agent.kernel.host import (
    RESTART_NOTICE,
    CellOutcome,
    Kernel,
    KernelLimits,
    KernelStartError,
    ProgramOutcome,
)

__all__ = ["RESTART_NOTICE", "CellOutcome", "Kernel", "KernelLimits", "KernelStartError", "ProgramOutcome"]
