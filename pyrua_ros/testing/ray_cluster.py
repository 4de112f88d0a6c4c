"""A Ray cluster of several nodes on this machine with every server on 127.0.0.1, for tests.

``ray start --address`` cannot make one: a worker node needs ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1``, and with it
Ray rewrites ``--node-ip-address 127.0.0.1`` to the machine's routable address (found with a UDP "connect" towards
8.8.8.8) and binds the GCS and raylets on every interface. Ray's own multi-node test tooling
(:class:`ray.cluster_utils.Cluster`) starts nodes without that check, so every node is 127.0.0.1 here.

Run as ``python -m pyrua_ros.testing.ray_cluster NODES TEMP_DIR`` in the environment of
:func:`~pyrua_ros.evaluation.ray_engine.loopback_ray_environment` (plus
:func:`~pyrua_ros.evaluation.ray_engine.private_ray_home`); one CPU per node. It prints one JSON line,
``{"address": "127.0.0.1:PORT", "nodes": [[pid, ...], ...]}`` (the processes of each node, head first), then reads
commands on stdin: ``remove I`` kills node I's processes at once (its raylet, and with it the actors on it) and
answers ``removed I``; end of input shuts the cluster down.

Ray's test cluster writes its address (for ``ray.init("auto")``) to ``$TMPDIR/ray/ray_current_cluster``, by default
``/tmp/ray``: shared by every user of the machine, and absent on a fresh one (the start then fails with
FileNotFoundError). Here ``TMPDIR`` is a folder of this cluster's own, under ``TEMP_DIR``, for it and its nodes.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

#: a node is declared dead about 3 s after its raylet stops answering (Ray's default is about 30 s)
FAST_NODE_DEATH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3,
                   "health_check_timeout_ms": 1000}


def _pids(node) -> list[int]:
    return [info.process.pid for infos in node.all_processes.values() for info in infos]


def main(argv: list[str]) -> int:
    from ray.cluster_utils import Cluster

    count, temp_dir = int(argv[0]), argv[1]
    own_tmp = pathlib.Path(temp_dir) / "tmp"
    (own_tmp / "ray").mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(own_tmp)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False, "temp_dir": temp_dir,
        "_system_config": FAST_NODE_DEATH})
    nodes = [cluster.head_node] + [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
                                   for _ in range(count - 1)]
    cluster.wait_for_nodes()
    print(json.dumps({"address": cluster.address, "nodes": [_pids(node) for node in nodes]}), flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if len(words) == 2 and words[0] == "remove":
                cluster.remove_node(nodes[int(words[1])], allow_graceful=False)
                print(f"removed {words[1]}", flush=True)
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
