"""Lanes: markers that say what a test needs, applied here instead of in each file.

- ``libero``: builds a LIBERO-PRO env (in this process, or in a sim node it starts, directly or through a CLI);
- ``graph``: runs a ROS 2 node graph over loopback DDS (a driver node, an agent node, rclpy clients);
- ``cli``: starts the package's command lines (``pyrualean``, ``pyrua-ros``, ``ros2``, ``colcon``) as processes.

``-m unit`` stays the fast lane (files or tests mark themselves ``unit``; a unit test never builds LIBERO, which
is checked here at collection); ``-m "not libero"`` is the middle lane: everything that runs without building LIBERO.

A test gets a lane from the rig fixtures it uses (:data:`FIXTURE_LANES`), from its file unless it is marked ``unit``
(:data:`FILE_LANES`: what most of that file's tests need; a file's lane marks more tests than strictly need it,
never fewer) and from its own marks (the few LIBERO tests in otherwise LIBERO-free files carry
``@pytest.mark.libero`` themselves).
"""

from __future__ import annotations

import pathlib

import pytest

LANES = ("libero", "graph", "cli")

FIXTURE_LANES = {
    "sim_node": ("libero", "graph"),
    "sim_rig": ("libero", "graph"),
    "fake_arm_node": ("graph",),
    "fake_arm_rig": ("graph",),
    "ros_client": ("graph",),
}

# what a registered driver's node needs beyond the graph (rigs.nodes.driver_params marks each swept driver so)
DRIVER_LANES = {
    "sim": ("libero",),
}

FILE_LANES = {
    "test_boundary_records.py": ("graph", "cli"),
    "test_cli_runtimes.py": ("graph", "cli"),
    "test_colcon_install.py": ("libero", "graph", "cli"),
    "test_cross_distro.py": ("graph", "cli"),
    "test_driver_conformance.py": ("graph", "cli"),
    "test_episode_host.py": ("graph",),
    "test_eval.py": ("graph", "cli"),
    "test_fake_arm.py": ("graph",),
    "test_hostile_cells.py": ("graph", "cli"),
    "test_interrupt_phases.py": ("graph",),
    "test_launch.py": ("graph",),
    "test_launch_as_users_run_it.py": ("graph", "cli"),
    "test_node_spin.py": ("graph",),
    "test_mcp_server.py": ("graph", "cli"),
    "test_outcome_corpus.py": ("graph", "cli"),
    "test_play.py": ("graph", "cli"),
    "test_progress.py": ("graph", "cli"),
    "test_recorder.py": ("graph", "cli"),
    "test_reproducibility.py": ("libero", "graph"),
    "test_robo_fake_arm.py": ("graph",),
    "test_robo_ros.py": ("libero", "graph"),
    "test_ros2_launch.py": ("graph", "cli"),
    "test_ros_backend_step.py": ("graph",),
    "test_runner_rviz.py": ("libero", "graph", "cli"),
    "test_scripted_episodes.py": ("libero", "graph", "cli"),
    "test_settings_schema.py": ("graph", "cli"),
    "test_settings_validation.py": ("graph", "cli"),
    "test_sim_env.py": ("libero",),
    "test_sim_node.py": ("libero", "graph"),
    "test_single_shot.py": ("graph", "cli"),
    "test_video.py": ("graph", "cli"),
    "test_viewer.py": ("graph", "cli"),
    "test_vla_client.py": ("graph", "cli"),
}


def lanes_of(item) -> set[str]:
    """The lanes ``item`` needs: by its file (unless it is a unit test), its fixtures and its own marks."""
    found = set()
    if item.get_closest_marker("unit") is None:
        found.update(FILE_LANES.get(pathlib.Path(str(item.path)).name, ()))
    for name in getattr(item, "fixturenames", ()):
        found.update(FIXTURE_LANES.get(name, ()))
    found.update(lane for lane in LANES if item.get_closest_marker(lane) is not None)
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    unit_with_libero = []
    for item in items:
        lanes = lanes_of(item)
        for lane in sorted(lanes):
            item.add_marker(lane)
        if "libero" in lanes and item.get_closest_marker("unit") is not None:
            unit_with_libero.append(item.nodeid)
    if unit_with_libero:
        raise pytest.UsageError("tests marked unit (the fast lane) that build LIBERO:\n  "
                                + "\n  ".join(unit_with_libero))
