"""Driver node processes as users start them, and robo over ROS on them: one per test module.

A node is started as users start it, from its registration in
:data:`~pyrua_ros.sim_interfaces.drivers.DRIVERS`: ``python -m <its module>`` with its parameter file
(``config/sim.yaml``, ``config/fake_arm.yaml``), ready once its ready line is logged, when a module's first test asks
for it and stopped when the module ends; it must then still be alive and exit cleanly (status 0), so a
node that died or hung under a module's tests fails that module. Module scope, not session scope: test files share a ROS
domain per test process (see ``conftest.py``), so a node left running would serve the next file's own nodes'
topics too.

Fixtures:

- ``sim_node`` / ``fake_arm_node``: the :class:`~pyrua_ros.testing.NodeProcess`, ready (:func:`started` starts
  any registered driver; :func:`driver_params` parametrizes a module fixture over every one, in its lanes);
- ``sim_rig`` / ``fake_arm_rig``: a :class:`robo_motion_cases.Rig` (one ``RosBackend``, the scene facts the motion
  cases need) on that node: the LIBERO sim's libero_goal task 8 ("put the bowl on the plate") and the fake arm's
  fake_table task 0 ("put the red cube on the plate").
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from pyrua_ros.sim_interfaces.drivers import DRIVERS, DriverSpec
from pyrua_ros.testing import NodeProcess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def start(spec: DriverSpec, *extra: str, env: dict | None = None) -> NodeProcess:
    """``spec``'s node with its parameter file (then ``extra`` ROS arguments; ``env``: its environment), once its
    ready line is logged (a cold start may take ``spec.boot_s``)."""
    node = NodeProcess.module(spec.module, "--ros-args", "--params-file", str(ROOT / "config" / spec.params_file),
                              *extra, cwd=ROOT, env=env)
    try:
        assert node.wait_for_output(spec.ready, spec.boot_s), node.output()[-3000:]
    except BaseException:
        node.stop()
        raise
    return node


def started(spec: DriverSpec, *extra: str) -> Iterator[NodeProcess]:
    """:func:`start`, yield the node; stop it and check that it was still alive and exits with status 0."""
    node = start(spec, *extra)
    try:
        yield node
        assert node.alive(), f"{spec.module} died during the tests:\n" + node.output()[-3000:]
    finally:
        code = node.stop()
    assert code == 0, f"{spec.module} exit code {code}:\n" + node.output()[-3000:]


def driver_params() -> list:
    """Every registered driver we start, as ``pytest.param`` with its id and the lanes its node needs (a module
    fixture parametrized so starts each one once)."""
    from rigs.lanes import DRIVER_LANES

    return [pytest.param(spec, id=spec.name, marks=[getattr(pytest.mark, lane) for lane in DRIVER_LANES.get(
        spec.name, ())]) for spec in DRIVERS.nodes()]


@pytest.fixture(scope="module")
def sim_node() -> Iterator[NodeProcess]:
    """The LIBERO-PRO sim node (``python -m pyrua_ros.nodes.sim_node``), ready; each test resets it as it needs."""
    yield from started(DRIVERS["sim"])


@pytest.fixture(scope="module")
def fake_arm_node() -> Iterator[NodeProcess]:
    """The kinematic fake arm node (``python -m pyrua_ros.nodes.fake_arm_node``), ready."""
    yield from started(DRIVERS["fake"])


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
