"""``pyrua-ros check-driver [--namespace NS] [--skip-sim-interfaces]``: the conformance suite against a live driver.

Exit status 0 when every check passed, 1 when one failed or nothing answers at all (then one line says so, on which
domain and namespace, and how to start one of this project's drivers alone to try the kit), 2 on bad arguments.
DDS discovery defaults to loopback when ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is unset (set it, and ``ROS_DOMAIN_ID``,
to reach your robot's graph).
"""

from __future__ import annotations

import argparse
import os
import sys

from pyrua_ros.sim_interfaces.drivers import DRIVERS
from pyrua_ros.wire.rosenv import default_to_localhost

PRESENCE_WAIT_S = 5.0   # how long discovery may take to show a driver's publishers [s]


def add_parser(sub) -> None:
    p = sub.add_parser("check-driver", help="run the driver conformance suite against a live driver (moves it)",
                       description=__doc__.splitlines()[0])
    p.add_argument("--namespace", default="", help="namespace of the robot's interfaces, e.g. robot1")
    p.add_argument("--skip-sim-interfaces", action="store_true",
                   help="skip reset/capture/segmentation (a real arm has no sim interfaces)")
    p.set_defaults(func=cmd_check_driver)


def cmd_check_driver(args: argparse.Namespace) -> int:
    default_to_localhost()
    from pyrua_ros.conformance import checks, report  # noqa: PLC0415 (CLI parse path: the kit loads to run)
    from pyrua_ros.conformance.probe import Probe  # noqa: PLC0415 (CLI parse path: the kit loads to run)

    probe = Probe(args.namespace)
    try:
        if not probe.wait_graph(lambda: _anything_there(probe), PRESENCE_WAIT_S, period=0.2):
            print(nobody_line(probe.node.get_namespace()), file=sys.stderr, flush=True)
            return 1
        print(f"checking the driver surface in namespace {probe.node.get_namespace()!r} "
              f"(the robot moves a few centimetres)", flush=True)
        rows = checks.run(probe, skip_sim=args.skip_sim_interfaces,
                          on_rows=lambda got: print(f"  {got[0].interface if got else ''}: "
                                                    f"{sum(r.failed for r in got)} failed", file=sys.stderr,
                                                    flush=True))
    finally:
        probe.close()
    print(report.table(rows))
    return 1 if any(r.failed for r in rows) else 0


def _anything_there(probe) -> bool:
    """True once any driver interface has a publisher or server in the probe's namespace."""
    d = probe.names.driver
    return any(probe.publishers(name) for name in (d.joint_states, d.ee_pose, d.tf)) or bool(probe.actions())


def nobody_line(namespace: str) -> str:
    """The one line of a check with no driver at all: the domain and namespace looked at, and how to start one of
    this project's drivers alone there (every registered driver we start, the quickest to boot first)."""
    domain = os.environ.get("ROS_DOMAIN_ID") or "0"
    ros_args = f" --ros-args -r __ns:={namespace}" if namespace.strip("/") else ""
    ours = sorted(DRIVERS.nodes(), key=lambda d: d.boot_s)
    starts = [f"python -m {d.module}{ros_args} ({d.about}" for d in ours]
    starts[-1] += f"; ros2 run pyrua_ros {ours[-1].executable} on a ROS 2 install"
    return (f"pyrua-ros check-driver: nothing answers on ROS_DOMAIN_ID {domain} in namespace {namespace!r} (no driver "
            f"interface published within {PRESENCE_WAIT_S:g} s); to try the kit, start one of ours alone with the "
            f"same ROS_DOMAIN_ID: {') or '.join(starts)}), then run check-driver again")
