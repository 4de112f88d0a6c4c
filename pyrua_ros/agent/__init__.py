"""The agent: what turns a model (or a recorded script) into robot episodes, with no rclpy import.

Sub-packages, lowest layer first (a layer imports only those below it; test/test_layers.py checks): ``prompting``
(arm contracts, the API reference, the task card joined into one prompt), ``runtimes`` (model runtimes behind one
seam), ``loop`` (the cell loop, the arms, the tools a model calls, the MCP tool server), ``run`` (an episode end
to end: validation, boot, loop or single shot, VLA server). What they stand on are layers of their own:
``pyrua_ros.settings``, ``pyrua_ros.records``, ``pyrua_ros.reports``, ``pyrua_ros.kernel``.
"""
