"""Across ROS 2 distros: a Kilted driver with a Jazzy client, and a Jazzy driver with a Kilted client.

Jazzy is the LTS most real arms run; this package runs on Kilted wheels. Each direction starts one kinematic
fake-arm driver (``fake_arm_node``) in one venv and runs ``pyrua_ros.testing.cross_distro`` in the other: the
driver surface (transient-local topics, twist, both actions, e-stop), a robo session with a 1024x1024 capture
(UDP fragments between Fast DDS 3.2 and 2.14), and the type hashes each end advertises. The Jazzy venv comes from
``scripts/setup.sh --jazzy`` (scripts/test.sh makes it and makes these tests required).
"""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.testing import NodeProcess
from pyrua_ros.testing.venvs import child_env, require_venv
from pyrua_ros.wire.distro import installed_type_hash
from pyrua_ros.wire.rosenv import claim_domain_id

ROOT = pathlib.Path(__file__).resolve().parent.parent
DISTROS = yaml.safe_load((ROOT / "interfaces" / "distros.yaml").read_text())
FJT_FEEDBACK = "control_msgs/action/FollowJointTrajectory_FeedbackMessage"
SURFACE = ("reset", "tf_static_latched", "robot_description_latched", "follow_joint_trajectory", "estop_latch_release")
ROBO = ("robo_state", "robo_image_high", "robo_segment", "robo_move_to", "robo_gripper")
DIRECTIONS = {"kilted_driver-jazzy_client": ("kilted", "jazzy"), "jazzy_driver-kilted_client": ("jazzy", "kilted")}


def _python(distro: str) -> str:
    return str(require_venv(distro) / "bin" / "python")


@pytest.fixture(scope="module", params=sorted(DIRECTIONS))
def run(request, tmp_path_factory):
    """One driver in one venv, one client run in the other, on a ROS domain of their own; yields
    ``(driver_distro, client_distro, report, driver_log)``."""
    driver, client = DIRECTIONS[request.param]
    env = child_env()
    env["ROS_DOMAIN_ID"] = str(claim_domain_id())       # the other direction's driver is a node "sim" too
    fake = DRIVERS["fake"]
    node = NodeProcess([_python(driver), "-m", fake.module], env=env)
    try:
        assert node.wait_for_output(fake.ready, fake.boot_s), node.output()[-3000:]
        out = tmp_path_factory.mktemp(request.param) / "report.json"
        proc = subprocess.run([_python(client), "-m", "pyrua_ros.testing.cross_distro", "--out", str(out)],
                              env=env, capture_output=True, text=True, timeout=240, check=False)
        assert out.is_file(), f"client wrote no report:\n{proc.stdout}\n{proc.stderr[-3000:]}"
        report = json.loads(out.read_text())
        # the conformance kit as a user of the other distro runs it against this driver
        kit = subprocess.run([_python(client), "-m", "pyrua_ros.cli.main", "check-driver"], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
        report["check_driver"] = {"returncode": kit.returncode, "stdout": kit.stdout, "stderr": kit.stderr[-3000:]}
        yield driver, client, report, node.output()
    finally:
        node.stop()


def _failed(report: dict, names) -> dict:
    return {n: report["checks"].get(n, "missing") for n in names if not report["checks"].get(n, {}).get("ok")}


def test_client_ran_on_its_distro(run):
    driver, client, report, _log = run
    assert report["distro"] == client != driver
    assert "client" not in report["checks"], report["checks"].get("client")


def test_driver_surface_across_distros(run):
    *_, report, _log = run
    assert not _failed(report, SURFACE)
    assert report["checks"]["estop_latch_release"]["detail"] == {"latched": True, "refused": True, "released": True,
                                                                 "moved_after": True}


def test_robo_session_across_distros(run):
    *_, report, _log = run
    assert not _failed(report, ROBO)
    assert report["checks"]["robo_image_high"]["detail"]["shape"] == [1024, 1024, 3]
    assert {"move_to", "set_gripper", "segment"} <= set(report["ledger"])


def test_conformance_kit_passes_across_distros(run):
    """``pyrua-ros check-driver`` run from the client's distro: every row of the driver surface passes."""
    *_, report, _log = run
    kit = report["check_driver"]
    lines = kit["stdout"].splitlines()
    assert kit["returncode"] == 0 and lines and lines[-1].startswith("conformant:"), \
        "\n".join(lines[-40:]) + kit["stderr"]
    assert " 0 failed" in lines[-1], lines[-1]


def test_type_hashes_agree_except_follow_joint_trajectory_feedback(run):
    """Gripper and TF types are the same on both distros; FollowJointTrajectory feedback is not (control_msgs
    6.3 added two fields), and the hash the driver advertises says so."""
    driver, _client, report, _log = run
    wire = report["wire_types"]
    for type_name in ("control_msgs/action/GripperCommand_FeedbackMessage", "tf2_msgs/msg/TFMessage"):
        assert wire[type_name]["advertised"] == [wire[type_name]["ours"]], type_name
    fjt = wire[FJT_FEEDBACK]
    assert len(fjt["advertised"]) == 1 and fjt["advertised"] != [fjt["ours"]]
    if driver == "kilted":          # this test process is Kilted: the driver advertises exactly our hash
        assert fjt["advertised"] == [installed_type_hash(FJT_FEEDBACK)]
    else:
        assert fjt["ours"] == installed_type_hash(FJT_FEEDBACK)


def test_jazzy_end_built_jazzys_types(run):
    """The client's own installed hashes are its distro's upstream ones (interfaces/distros.yaml)."""
    _driver, client, report, _log = run
    expected = DISTROS[client]["type_hashes"]
    assert report["installed_hashes"] == {t: expected[t] for t in report["installed_hashes"]}


def test_drivers_load_their_fast_dds_profile(run):
    """Fast DDS logs XMLPARSER errors for a profile written for the other major version."""
    *_, log = run
    assert "XMLPARSER" not in log and "deprecated" not in log, log[-2000:]


def test_jazzy_venv_has_every_upstream_jazzy_hash():
    code = ("import json, sys; from pyrua_ros.wire.distro import installed_type_hash, ros_distro; "
            "names = json.loads(sys.argv[1]); "
            "print(json.dumps({'distro': ros_distro(), 'hashes': {n: installed_type_hash(n) for n in names}}))")
    names = sorted(DISTROS["jazzy"]["type_hashes"])
    out = subprocess.run([_python("jazzy"), "-c", code, json.dumps(names)], env=child_env(), capture_output=True,
                         text=True, timeout=60, check=True)
    seen = json.loads(out.stdout)
    assert seen["distro"] == "jazzy"
    assert seen["hashes"] == DISTROS["jazzy"]["type_hashes"]


def test_jazzy_venv_is_pinned_to_jazzy_wheels():
    """No ros-* wheel of Kilted slipped into the Jazzy venv (an unpinned one would resolve to Kilted)."""
    out = subprocess.run([_python("jazzy"), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                         env=child_env(), capture_output=True, text=True, timeout=120, check=True)
    wheels = {p["name"].lower(): p["version"] for p in json.loads(out.stdout) if p["name"].lower().startswith("ros-")}
    pins = dict(line.split("[")[0].split("==") if "[" not in line else (line.split("[")[0], line.split("==")[1])
                for line in (ROOT / "scripts" / "requirements-jazzy.txt").read_text().splitlines()
                if line.startswith("ros-"))
    assert wheels["ros-rclpy"] == pins["ros-rclpy"] == DISTROS["jazzy"]["rclpy"]
    assert {n: v for n, v in wheels.items() if pins.get(n) != v} == {}, "ros-* wheels not pinned in requirements"

