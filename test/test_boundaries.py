"""Layer boundaries: the agent side never imports a simulator, drivers never import the agent, the kernel
never imports rclpy, and no interface name is written outside config/interfaces.yaml."""

import ast
import pathlib

import pytest

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "pyrua_ros"

# folder -> packages it must never import (directly, at any depth)
FORBIDDEN = {
    "agent": ("pyrua_ros.sim", "pyrua_ros.fake_arm", "libero", "robosuite", "mujoco"),
    "robo": ("pyrua_ros.sim", "pyrua_ros.fake_arm", "pyrua_ros.agent", "libero", "robosuite", "mujoco"),
    "sim": ("pyrua_ros.agent", "pyrua_ros.robo", "pyrua_ros.fake_arm"),
    "fake_arm": ("pyrua_ros.agent", "pyrua_ros.robo", "pyrua_ros.sim", "libero", "robosuite", "mujoco"),
    "safety": ("rclpy", "pyrua_ros.agent", "pyrua_ros.robo"),
    "kernel": ("rclpy", "pyrua_ros.robo.ros_backend", "pyrua_ros.wire.tf_buffer"),
    # the evaluation layer runs episodes through play and drivers through their executables, never in-process
    "evaluation": ("rclpy", "pyrua_ros.sim", "pyrua_ros.fake_arm", "libero", "robosuite", "mujoco"),
}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_layer_does_not_import_forbidden_packages(folder):
    files = sorted((PKG / folder).rglob("*.py"))
    assert files, f"pyrua_ros/{folder} has no modules"
    bad = []
    for path in files:
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[folder]):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_agent_side_never_reads_ground_truth():
    """PyRUA-Lean never gives the agent object poses: nothing under robo/ or agent/ names the ground-truth topic
    or the sim's object-pose accessor."""
    offenders = []
    for folder in ("robo", "agent"):
        for path in (PKG / folder).rglob("*.py"):
            text = path.read_text()
            if "ground_truth" in text or "object_poses" in text:
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


def _interface_names() -> set[str]:
    import yaml

    raw = yaml.safe_load((ROOT / "config" / "interfaces.yaml").read_text())
    names = set()
    for section in ("driver", "sim", "agent"):
        for value in raw[section].values():
            # names with a path or a compound word; single words (tf, clock, estop) are ordinary code words too
            if isinstance(value, str) and ("/" in value or "_" in value):
                names |= {value, "/" + value.lstrip("/")}
    return names


def test_no_interface_name_is_written_outside_the_config():
    names = _interface_names()
    offenders = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not offenders, "interface names belong in config/interfaces.yaml:\n" + "\n".join(offenders)
