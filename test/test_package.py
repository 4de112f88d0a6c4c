"""Package metadata: package.xml is valid format 3 and declares every ROS package the code imports; lint is clean."""

import ast
import pathlib
import subprocess
import sys

import pytest
from catkin_pkg.package import parse_package

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Python import name -> rosdep key, for ROS packages that are not named like their import.
ROS_IMPORTS = {"rclpy", "std_msgs", "std_srvs", "sensor_msgs", "geometry_msgs", "trajectory_msgs", "control_msgs",
               "tf2_msgs", "rosgraph_msgs", "visualization_msgs", "diagnostic_msgs", "action_msgs",
               "builtin_interfaces", "rcl_interfaces", "ament_index_python", "launch", "launch_ros"}


def _package():
    return parse_package(str(ROOT / "package.xml"))


def test_package_xml_is_valid_format_3():
    pkg = _package()
    pkg.validate()
    assert pkg.package_format == 3
    assert pkg.name == "pyrua_ros"
    assert pkg.get_build_type() == "ament_python"


def test_package_xml_declares_every_ros_import():
    declared = {d.name for d in _package().exec_depends}
    imported = set()
    for path in list((ROOT / "pyrua_ros").rglob("*.py")) + list((ROOT / "launch").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    missing = (imported & ROS_IMPORTS) - declared
    assert not missing, f"package.xml lacks exec_depend for {sorted(missing)}"


def test_versions_agree():
    setup_text = (ROOT / "setup.py").read_text()
    assert f'version="{_package().version}"' in setup_text


def test_ruff_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
