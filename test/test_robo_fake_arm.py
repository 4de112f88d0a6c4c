"""robo's motion tests against the kinematic fake arm (``python -m pyrua_ros.nodes.fake_arm_node``, fake_table
task 0, "put the red cube on the plate"): the SAME case functions as ``test_robo_ros.py`` runs against the LIBERO
sim node (``robo_motion_cases.py``), through the same RosBackend, so both drivers are held to one behaviour.
Plus the one perception refusal only this scene can show: a pixel without depth (the fake camera sees open sky).
"""

from __future__ import annotations

import numpy as np
import pytest
from rigs.nodes import start
from robo_motion_cases import CASES

from pyrua_ros.robo.errors import ToolError
from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.testing import spin_until


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__.removeprefix("case_"))
def test_motion(fake_arm_rig, case):
    case(fake_arm_rig)


def test_back_project_refuses_a_pixel_without_depth(fake_arm_rig):
    robo = fake_arm_rig.reset()
    wmap = robo.world_map("agentview")
    invalid = np.argwhere(~np.any(wmap != 0, axis=2))
    assert len(invalid) > 0, "the fake agentview sees sky above the table"
    row, col = (int(v) for v in invalid[len(invalid) // 2])
    with pytest.raises(ToolError, match=r"invalid agentview world xyz at pixel \(\d+,\d+\)") as info:
        robo.back_project(row, col)
    assert info.value.tool == "back_project"
    rec = fake_arm_rig.host.ledger.records[-1]
    assert rec.tool == "back_project" and not rec.ok and rec.error.startswith("ToolError")
    valid = np.argwhere(np.any(wmap != 0, axis=2))[0]
    assert robo.back_project(int(valid[0]), int(valid[1])).world_xyz == pytest.approx(tuple(wmap[tuple(valid)]))


def test_clipping_by_the_drivers_safety_filter_is_counted_per_call(fake_arm_rig):
    """Any clipping that does happen is reported: a move driving the hand below this arm's workspace floor (z 0.91,
    config/fake_arm.yaml) is cut there and carries ``clipped_steps`` in its ledger summary, which rich feedback
    shows with the call; a move within the limits carries none. (robo's commands never exceed 1 m/s per axis, the
    per-axis speed limit itself, so the box is what clips.)"""
    robo = fake_arm_rig.reset()
    x, y, z = robo.state().eef_pos
    robo.move_to([x + 0.02, y, z], step_clip=0.01)
    calm = fake_arm_rig.host.ledger.records[-1]
    assert "clipped_steps" not in calm.summary and fake_arm_rig.backend.clipped_steps() == 0
    robo.move_to([x, y, 0.85], step_clip=0.05, max_steps=20)
    fast = fake_arm_rig.host.ledger.records[-1]
    assert fast.summary["clipped_steps"] > 0 and fast.summary["clipped_steps"] <= fast.env_steps
    assert fake_arm_rig.backend.clipped_steps() == fast.summary["clipped_steps"]   # counted per episode (reset clears)


def play_fake_table(backend, solve) -> tuple[dict, list]:
    """The packaged fake_table program ``solve`` on ``backend`` from a fresh task 0 episode: (its state trace
    summary, each ledgered call's tool, steps and summary); it must solve the task."""
    from pyrua_ros.examples import run_program
    from pyrua_ros.robo.libero import libero_host

    backend.reset("fake_table", 0, 0, 300)
    host = libero_host(backend, primitives="no-vla")
    assert run_program(solve, host.robo) in ("returned", "terminated")
    assert backend.status().success
    return backend.state_trace.summary(), [(r.tool, r.env_steps, r.summary) for r in host.ledger.records]


def test_the_driver_core_in_process_over_the_fake_arms_model_takes_the_nodes_steps(fake_arm_rig):
    """The in-process driver takes any driver's ArmModel: over the fake arm's own (``make_model``, its parameter
    file) the packaged fake_table program takes the steps it takes against the fake arm node over DDS (every
    step's state digest) and gets the same ledgered calls and results, its moves run as goals both ways."""
    from pyrua_ros.fake_arm.node import make_model
    from pyrua_ros.sim_interfaces.drivers import DRIVERS
    from pyrua_ros.sim_interfaces.state_digest import describe_difference
    from pyrua_ros.testing.inprocess import ROOT, InProcessDriver

    over_dds = play_fake_table(fake_arm_rig.backend, fake_arm_rig.solve)
    driver = InProcessDriver(make_model, params_file=ROOT / "config" / DRIVERS["fake"].params_file,
                             cartesian_goals=True)
    try:
        here = play_fake_table(driver, fake_arm_rig.solve)
    finally:
        driver.close()
    assert describe_difference(over_dds[0], here[0]) is None, describe_difference(over_dds[0], here[0])
    assert over_dds[0]["missing"] == 0 and here[0]["missing"] == 0
    assert here[1] == over_dds[1], "the same calls with the same steps and results"


def test_a_driver_without_the_cartesian_action_gets_twists_and_the_same_steps(fake_arm_rig):
    """The packaged fake_table program on two fake arms: the rig's, which runs each ``move_to`` as one MoveToTarget
    goal, and one started with ``cartesian_goals:=false`` (a driver that lacks the action, in its own namespace),
    where robo streams one twist per step. The same calls take the same steps: every step's state digest, each
    call's ledgered steps and results agree."""
    from pyrua_ros.robo.ros_backend import RosBackend
    from pyrua_ros.sim_interfaces.state_digest import describe_difference
    from pyrua_ros.wire.move_law import ServoLaw

    goals = play_fake_table(fake_arm_rig.backend, fake_arm_rig.solve)
    from rclpy.action import get_action_names_and_types

    from pyrua_ros.wire.interfaces import resolve

    node = fake_arm_rig.backend.node
    assert resolve(fake_arm_rig.backend.names.driver.cartesian_move) in dict(get_action_names_and_types(node))
    ns = ["-r", "__ns:=/no_cartesian"]
    node = start(DRIVERS["fake"], *ns, "-p", "cartesian_goals:=false")
    backend = None
    try:
        backend = RosBackend(context_args=["--ros-args", *ns])
        twists = play_fake_table(backend, fake_arm_rig.solve)
        law = ServoLaw(np.array([0.0, 0.0, 1.0]), 0.01, step_clip=0.01, action_scale=0.05)
        assert backend.move_to_target(law, 0.08, max_steps=5) is None, "no MoveToTarget server: robo streams twists"
    finally:
        if backend is not None:
            backend.close()
        node.stop()
    assert describe_difference(goals[0], twists[0]) is None, describe_difference(goals[0], twists[0])
    assert goals[1] == twists[1]


def test_a_move_run_as_one_goal_stops_on_cancel_and_at_the_call_deadline(fake_arm_rig):
    """A move_to that never converges (tolerance 0 at the current position) runs as one Cartesian goal: the host's
    stop (an interrupt) ends it with EpisodeFinished("cancelled"), the cell's deadline with the ToolError that says
    the time limit was reached; either way the driver takes no step after it."""
    import threading
    import time

    from pyrua_ros.robo.errors import EpisodeFinished

    def frozen() -> bool:
        time.sleep(0.3)
        step = fake_arm_rig.env_step()
        time.sleep(0.5)
        return fake_arm_rig.env_step() == step

    robo = fake_arm_rig.reset(max_episode_steps=10**8)
    here = list(robo.state().eef_pos)
    ended: list = []

    def endless() -> None:
        try:
            robo.move_to(here, tol=0.0, max_steps=10**8)
        except BaseException as exc:   # the test inspects what ended it
            ended.append(exc)

    mover = threading.Thread(target=endless)
    mover.start()
    t0 = fake_arm_rig.env_step()
    assert spin_until(lambda: fake_arm_rig.env_step() > t0 + 5, 30.0), "the goal steps the arm"
    fake_arm_rig.host.stop("cancelled")
    mover.join(30.0)
    assert not mover.is_alive() and len(ended) == 1 and isinstance(ended[0], EpisodeFinished), ended
    assert ended[0].reason == "cancelled" and frozen()

    robo = fake_arm_rig.reset(max_episode_steps=10**8)
    fake_arm_rig.host.set_deadline(time.monotonic() + 1.0)
    started = time.monotonic()
    with pytest.raises(ToolError, match="time limit of this call was reached"):
        robo.move_to(list(robo.state().eef_pos), tol=0.0, max_steps=10**8)
    fake_arm_rig.host.set_deadline(None)
    assert time.monotonic() - started < 5.0 and fake_arm_rig.env_step() > 5 and frozen()
