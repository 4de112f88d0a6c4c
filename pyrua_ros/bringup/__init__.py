"""Bringup: the one description of the node graph (``graph``), the pip launch runner (``runner``) and the
rviz config reader (``rviz_config``). ``launch/libero_sim.launch.py`` builds launch_ros actions from ``graph``.
"""
