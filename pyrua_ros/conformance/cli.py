"""``pyrua-ros check-driver [--namespace NS] [--skip-sim-interfaces]``: the conformance suite against a live driver.

Exit status 0 when every check passed, 1 when one failed, 2 on bad arguments. DDS discovery defaults to loopback
when ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is unset (set it, and ``ROS_DOMAIN_ID``, to reach your robot's graph).
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("check-driver", help="run the driver conformance suite against a live driver (moves it)",
                       description=__doc__.splitlines()[0])
    p.add_argument("--namespace", default="", help="namespace of the robot's interfaces, e.g. robot1")
    p.add_argument("--skip-sim-interfaces", action="store_true",
                   help="skip reset/capture/segmentation (a real arm has no sim interfaces)")
    p.set_defaults(func=cmd_check_driver)


def cmd_check_driver(args: argparse.Namespace) -> int:
    from pyrua_ros.driver.rosenv import default_to_localhost

    default_to_localhost()
    from pyrua_ros.conformance import checks, report
    from pyrua_ros.conformance.probe import Probe

    probe = Probe(args.namespace)
    try:
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
