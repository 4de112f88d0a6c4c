"""Interface packages built from interfaces/ match upstream, per distro, by RIHS01 type hash.

interfaces/distros.yaml holds the upstream hashes (Jazzy's from a Jazzy build of control_msgs; Kilted's differ
only where control_msgs 6.3 added two FollowJointTrajectory feedback fields). This venv is Kilted; the Jazzy venv
is checked the same way by test_cross_distro.py.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
import yaml

from pyrua_ros.wire import distro

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = pathlib.Path(__file__).resolve().parent.parent
DISTROS = yaml.safe_load((ROOT / "interfaces" / "distros.yaml").read_text())
FJT = "control_msgs/action/FollowJointTrajectory"


def _build_script():
    spec = importlib.util.spec_from_file_location("build_interfaces", ROOT / "scripts" / "build_interfaces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_this_venv_is_kilted():
    assert distro.ros_distro() == "kilted"


def test_ros_distro_prefers_the_environment(monkeypatch):
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    assert distro.ros_distro() == "jazzy"


@pytest.mark.parametrize("type_name", sorted(DISTROS["kilted"]["type_hashes"]))
def test_built_type_hash_matches_upstream(type_name):
    assert distro.installed_type_hash(type_name) == DISTROS["kilted"]["type_hashes"][type_name]


def test_kilted_feedback_has_the_two_index_fields():
    from control_msgs.action import FollowJointTrajectory

    fields = FollowJointTrajectory.Feedback.get_fields_and_field_types()
    assert list(fields) == ["header", "joint_names", "desired", "actual", "error", "index", "multi_dof_joint_names",
                            "multi_dof_desired", "multi_dof_actual", "multi_dof_error", "multi_dof_index"]
    assert fields["index"] == fields["multi_dof_index"] == "int32"


def test_the_distros_differ_only_in_follow_joint_trajectory_feedback():
    jazzy, kilted = DISTROS["jazzy"]["type_hashes"], DISTROS["kilted"]["type_hashes"]
    assert set(jazzy) == set(kilted)
    assert {t for t in jazzy if jazzy[t] != kilted[t]} == {FJT, f"{FJT}_Feedback"}


def test_unknown_types_have_no_hash():
    assert distro.installed_type_hash("control_msgs/action/NoSuchAction_Goal") is None
    assert distro.installed_type_hash("no_such_msgs/msg/Thing") is None
    with pytest.raises(ValueError, match="package/msg"):
        distro.installed_type_hash("control_msgs/FollowJointTrajectory")


def _tree(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_definitions_take_the_distro_override(tmp_path):
    build = _build_script()
    distros = {"jazzy": {}, "kilted": {}}
    pkg = _tree(tmp_path / "demo_msgs", {"deps.txt": "", "msg/Shared.msg": "int32 a\n",
                                         "jazzy/msg/Split.msg": "int32 b\n",
                                         "kilted/msg/Split.msg": "int32 b\nint32 c\n"})
    for name in distros:
        chosen = build.definitions(pkg, name, distros)
        assert sorted(chosen) == ["msg/Shared.msg", "msg/Split.msg"]
        assert chosen["msg/Split.msg"] == pkg / name / "msg" / "Split.msg"


def test_definitions_refuse_ambiguous_or_missing_files(tmp_path):
    build = _build_script()
    distros = {"jazzy": {}, "kilted": {}}
    both = _tree(tmp_path / "a_msgs", {"msg/X.msg": "int32 a\n", "kilted/msg/X.msg": "int32 a\n",
                                       "jazzy/msg/Y.msg": "int32 a\n"})
    with pytest.raises(SystemExit, match="also a shared definition"):
        build.definitions(both, "kilted", distros)
    only_kilted = _tree(tmp_path / "b_msgs", {"kilted/msg/X.msg": "int32 a\n"})
    with pytest.raises(SystemExit, match="none for jazzy"):
        build.definitions(only_kilted, "jazzy", distros)
    stray = _tree(tmp_path / "c_msgs", {"humble/msg/X.msg": "int32 a\n"})
    with pytest.raises(SystemExit, match="neither msg/srv/action nor a distro"):
        build.definitions(stray, "kilted", distros)
