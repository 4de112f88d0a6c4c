"""Node executables: each module has a ``main()`` run by ``python -m pyrua_ros.nodes.<name>`` and by the
wrapper that ``setup.py`` writes for every ``<name>_node`` module and installs where ``ros2 run`` / ``launch_ros``
look (``lib/pyrua_ros/<name>``)."""
