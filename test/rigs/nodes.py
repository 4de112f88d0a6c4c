"""Driver node processes as users start them, and robo over ROS on them: one per test module.

A node is started with its parameter file (``config/sim.yaml``, ``config/fake_arm.yaml``) when a module's first
test asks for it and stopped when the module ends; it must then still be alive and exit cleanly (status 0), so a
node that died or hung under a module's tests fails that module. Module scope, not session scope: test files share a ROS
domain per test process (see ``conftest.py``), so a node left running would serve the next file's own nodes'
topics too.

Fixtures:

- ``sim_node`` / ``fake_arm_node``: the :class:`~pyrua_ros.testing.NodeProcess`, ready;
- ``sim_rig`` / ``fake_arm_rig``: a :class:`robo_motion_cases.Rig` (one ``RosBackend``, the scene facts the motion
  cases need) on that node: the LIBERO sim's libero_goal task 8 ("put the bowl on the plate") and the fake arm's
  fake_table task 0 ("put the red cube on the plate").
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from pyrua_ros.testing import NodeProcess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIM_READY_S = 240.0        # a cold LIBERO build on a loaded 2-core machine
FAKE_ARM_READY_S = 60.0


def started(module: str, params: str, ready: str, timeout_s: float) -> Iterator[NodeProcess]:
    """Start ``module`` with its parameter file, yield it once ``ready`` is logged; stop it and check its exit."""
    node = NodeProcess.module(module, "--ros-args", "--params-file", str(ROOT / params), cwd=ROOT)
    try:
        assert node.wait_for_output(ready, timeout_s), node.output()[-3000:]
        yield node
        assert node.alive(), f"{module} died during the tests:\n" + node.output()[-3000:]
    finally:
        code = node.stop()
    assert code == 0, f"{module} exit code {code}:\n" + node.output()[-3000:]


@pytest.fixture(scope="module")
def sim_node() -> Iterator[NodeProcess]:
    """The LIBERO-PRO sim node (``python -m pyrua_ros.nodes.sim_node``), ready; each test resets it as it needs."""
    yield from started("pyrua_ros.nodes.sim_node", "config/sim.yaml", "sim node ready", SIM_READY_S)


@pytest.fixture(scope="module")
def fake_arm_node() -> Iterator[NodeProcess]:
    """The kinematic fake arm node (``python -m pyrua_ros.nodes.fake_arm_node``), ready."""
    yield from started("pyrua_ros.nodes.fake_arm_node", "config/fake_arm.yaml", "fake arm ready", FAKE_ARM_READY_S)


def _rig(**scene):
    from robo_motion_cases import Rig

    from pyrua_ros.robo.ros_backend import RosBackend

    backend = RosBackend()
    try:
        yield Rig(backend=backend, **scene)
    finally:
        backend.close()


@pytest.fixture(scope="module")
def sim_rig(sim_node):
    """robo over ROS on the sim node: libero_goal task 8, the bowl (grasped at its +y rim, as the example does)."""
    from pyrua_ros.examples import EXAMPLES, load_program

    bowl = "the black bowl"

    def pick_bowl(robo):
        seg = robo.segment(bowl)
        x, y, z = seg.world_xyz
        return seg, [x + 0.02, y + 0.045, z]

    yield from _rig(suite="libero_goal", task=8, max_episode_steps=600, object_prompt=bowl, pick=pick_bowl,
                    solve=load_program(EXAMPLES[("libero_goal", 8)]))


@pytest.fixture(scope="module")
def fake_arm_rig(fake_arm_node):
    """robo over ROS on the fake arm: fake_table task 0, the cube (grasped at its visible-surface median)."""
    from pyrua_ros.examples import EXAMPLES, load_program

    cube = "the red cube"

    def pick_cube(robo):
        seg = robo.segment(cube)
        return seg, list(seg.world_xyz)

    yield from _rig(suite="fake_table", task=0, max_episode_steps=300, object_prompt=cube, pick=pick_cube,
                    solve=load_program(EXAMPLES[("fake_table", 0)]))
