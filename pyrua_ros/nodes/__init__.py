"""Node executables: each module has a ``main()`` run by ``python -m pyrua_ros.nodes.<name>`` and by the
``bin/<name>`` wrapper that ``ros2 run`` / ``launch_ros`` find under ``lib/pyrua_ros/``."""
