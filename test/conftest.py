"""Test harness: every test process runs with loopback-only DDS and a ROS domain of its own.

This module runs before any test module is imported, so the environment below is in place before anything
imports rclpy. Child processes (nodes) inherit it. ``PYRUA_REQUIRE_LOOPBACK=1`` makes every pyrua_ros node
refuse to start without it (test_harness.py proves both).
"""

import os
import shutil
import signal
import sys

from pyrua_ros.sim_interfaces import blas
from pyrua_ros.testing import apply_loopback_environment

assert "rclpy" not in sys.modules, "rclpy was imported before test/conftest.py set the loopback environment"
apply_loopback_environment()
blas.one_thread()   # as every pyrua_ros process runs (nodes, the CLI): the in-process drivers and renders too

# Tests interrupt the processes they start (SIGINT, as a terminal's Ctrl-C reaches its foreground job) and check
# what they do then. A suite started as a background job of a non-interactive shell (`.ci/run &`) inherits SIGINT
# and SIGQUIT ignored, and an ignored signal stays ignored across exec: every child would shrug the interrupt
# off. The test processes take the foreground dispositions back, so their children start with the defaults.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)

import pytest  # noqa: E402

# the shared rigs and the lanes (test/rigs/): each rig is defined once there and requested by name
pytest_plugins = ["pytester", "rigs.kinematic", "rigs.nodes", "rigs.lanes"]


def pytest_sessionfinish(session, exitstatus):
    """This process's ROS home (its nodes' and launches' logs) goes when all its tests passed; after a failure it
    stays, for reading (its path is in the report header)."""
    home = os.environ.get("ROS_HOME", "")
    if exitstatus == 0 and os.path.basename(home).startswith("pyrua_ros_test_home_"):
        shutil.rmtree(home, ignore_errors=True)


def pytest_report_header(config):
    return (f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} "
            f"ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE']} "
            f"ROS_HOME={os.environ['ROS_HOME']}")


@pytest.fixture
def ros_client():
    """A spinning external rclpy client, closed after the test."""
    from pyrua_ros.testing import RosClient

    client = RosClient()
    yield client
    client.close()
