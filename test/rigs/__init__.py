"""Shared test rigs: fixture modules that ``test/conftest.py`` loads for every test (``pytest_plugins``).

Each rig is defined once here and requested by name; a test file keeps only the fixtures that are its own.

- :mod:`rigs.kinematic`: the kinematic double (a small world under the real driver core, in process) and robo on
  it (no node, no LIBERO);
- :mod:`rigs.nodes`: driver node processes as users start them (the LIBERO sim node, the fake arm) and robo over
  ROS on them;
- :mod:`rigs.lanes`: the markers that say what a test needs (``libero``, ``graph``, ``cli``), applied centrally.
"""
