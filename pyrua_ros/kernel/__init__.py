"""The cell kernel: model-written Python runs in a separate, sandboxed process that holds no ROS handle.

``Kernel(target, workspace, limits=KernelLimits())`` starts the child (``worker.py``) under the OS boundary of
``sandbox.py`` (bubblewrap) and serves its robo calls on the real ``target``; ``run_cell`` / ``run_program``
return ``CellOutcome`` / ``ProgramOutcome``. The wire is ``protocol.py`` (JSON + raw buffers, never pickle), the
Python-level rules are ``policy.py``, the child's ``robo`` is built by ``proxy.py``, link-free workspace file
access is ``workspace.py``. This package never imports rclpy.

The names below are loaded on first use: the kernel process imports ``pyrua_ros.kernel.worker`` and must
not pull in the agent-side modules (they are not even in its read-only view).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["RESTART_NOTICE", "CellOutcome", "Kernel", "KernelLimits", "KernelStartError", "ProgramOutcome",
           "SandboxUnavailable"]


_HOMES = {"RESTART_NOTICE": "host", "Kernel": "host", "CellOutcome": "outcomes", "KernelLimits": "outcomes",
          "KernelStartError": "outcomes", "ProgramOutcome": "outcomes", "SandboxUnavailable": "outcomes"}


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(f"pyrua_ros.kernel.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
