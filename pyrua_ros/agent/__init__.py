"""The agent layer: what turns a model (or a recorded script) into robot episodes, with no rclpy import.

Sub-packages, lowest layer first (a layer imports only those below it; test/test_boundaries.py checks):
``settings`` (the settings schema, its sections, the modes), ``records`` (typed run records, the bag recorder,
the video, the ROS publisher), ``reports`` (tables, aggregates, paired comparisons of run directories),
``kernel`` (the sandboxed cell kernel), ``prompting`` (arm contracts, the API reference, the task card joined into
one prompt), ``runtimes`` (model runtimes behind one seam), ``loop`` (the cell loop, the arms, the tools a model
calls, the MCP tool server), ``run`` (an episode end to end: validation, boot, loop or single shot, VLA server).
"""
