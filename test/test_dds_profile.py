"""pyrua_ros's Fast DDS profile: the right file in the right variable for each Fast DDS version, valid for it.

The profile sets a 100 ms writer heartbeat, which turns 3 s stalls of large images into ~0.1 s repairs
(benchmarks/large_images.py measures it across distros). Fast DDS 2 (Jazzy) and 3 (Kilted) name the XML element
and the environment variable differently, and each rejects the other's element, so a process must carry its own.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from pyrua_ros.testing.venvs import child_env, require_venv
from pyrua_ros.wire import rosenv

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

V2, V3 = rosenv.FASTDDS_PROFILE_VARS[2], rosenv.FASTDDS_PROFILE_VARS[3]
P2, P3 = str(rosenv.FASTDDS_PROFILES[2]), str(rosenv.FASTDDS_PROFILES[3])
NS = "{http://www.w3.org/2001/XMLSchema}"


def test_kilted_gets_the_fast_dds_3_profile_only():
    env = rosenv.default_fastdds_profile({})
    assert env == {V3: P3}
    # inherited from a Jazzy parent: its profile goes, ours comes
    assert rosenv.default_fastdds_profile({V2: P2, V3: P2}) == {V3: P3}


def test_jazzy_gets_the_fast_dds_2_profile_only(monkeypatch):
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    assert rosenv.fastdds_major() == 2
    assert rosenv.default_fastdds_profile({V3: P3}) == {V2: P2}


def test_a_users_own_profile_is_kept(monkeypatch):
    assert rosenv.default_fastdds_profile({V3: "/etc/my_dds.xml"}) == {V3: "/etc/my_dds.xml"}
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    assert rosenv.default_fastdds_profile({V2: "/etc/my_dds.xml", V3: "/etc/x.xml"}) == \
        {V2: "/etc/my_dds.xml", V3: "/etc/x.xml"}


def test_unknown_distro_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    monkeypatch.setattr(rosenv, "fastdds_major", lambda distro=None: None)
    assert rosenv.default_fastdds_profile({}) == {}


def test_the_test_harness_runs_with_the_profile():
    import os

    assert os.environ[V3] == P3 and V2 not in os.environ


def _schema_elements(xsd) -> set[str]:
    return {e.get("name") for e in ET.parse(xsd).iter(f"{NS}element") if e.get("name")}


@pytest.mark.parametrize("major,xsd", [(3, "share/fastdds/fastdds_profiles.xsd"), (2, "share/fastRTPS_profiles.xsd")])
def test_profile_elements_exist_in_that_versions_schema(major, xsd):
    venv = require_venv("kilted" if major == 3 else "jazzy")
    known = _schema_elements(venv / xsd)
    used = {el.tag.split("}")[-1] for el in ET.parse(rosenv.FASTDDS_PROFILES[major]).iter()}
    assert used <= known | {"dds"}, sorted(used - known - {"dds"})
    assert ("heartbeat_period" if major == 3 else "heartbeatPeriod") in used


def test_a_kilted_node_loads_the_profile_without_errors(tmp_path):
    """Fast DDS logs XMLPARSER errors (and drops the profile) for an element it does not know."""
    code = ("import rclpy; from std_msgs.msg import String; rclpy.init(); n = rclpy.create_node('profile_check'); "
            "n.create_publisher(String, '/profile_check', 1); n.destroy_node(); rclpy.shutdown(); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
    assert "XMLPARSER" not in out.stderr and "deprecated" not in out.stderr, out.stderr
