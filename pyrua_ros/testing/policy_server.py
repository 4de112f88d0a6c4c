"""A real openpi-compatible websocket policy server on 127.0.0.1 (tests only).

Speaks the protocol ``openpi_client.websocket_client_policy.WebsocketClientPolicy`` expects: on connect the
server sends its metadata, then answers every observation message with an action message, both msgpack with
openpi's numpy encoding (``openpi_client.msgpack_numpy``). The answer is ``{"actions": (chunk, 7) float array}``
from ``policy(obs)``; every observation is kept in ``observations``. ``close()`` stops the server thread.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from collections.abc import Callable

import numpy as np


class PolicyServer:
    """``PolicyServer(policy)``; ``endpoint`` is ``127.0.0.1:<port>``."""

    def __init__(self, policy: Callable[[dict], np.ndarray], *, metadata: dict | None = None, port: int = 0):
        from websockets.sync.server import serve

        self.policy = policy
        self.metadata = metadata or {"server": "pyrua_ros test policy"}
        self.observations: list[dict] = []
        self._server = serve(self._handle, "127.0.0.1", port, compression=None, max_size=None)
        self.port = self._server.socket.getsockname()[1]
        self.endpoint = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"policy-server-{self.port}",
                                        daemon=True)
        self._thread.start()

    def _handle(self, conn) -> None:
        from openpi_client import msgpack_numpy
        from websockets.exceptions import ConnectionClosed

        conn.send(msgpack_numpy.packb(self.metadata))
        try:
            for message in conn:
                obs = msgpack_numpy.unpackb(message)
                self.observations.append(obs)
                conn.send(msgpack_numpy.packb({"actions": np.asarray(self.policy(obs), dtype=np.float64)}))
        except ConnectionClosed:
            pass

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)

    def __enter__(self) -> PolicyServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def scripted_pick(obs: dict) -> np.ndarray:
    """A policy that descends, closes and lifts, chunk by chunk (10 actions per chunk, OSC units)."""
    n = int(obs.get("_chunk", 0))
    return np.tile(np.array([0, 0, -0.6, 0, 0, 0, -1.0] if n < 4 else [0, 0, 0.6, 0, 0, 0, 1.0]), (10, 1))


def main(argv: list[str] | None = None) -> int:
    """``python -m pyrua_ros.testing.policy_server --port N [--info FILE]``: serve the scripted pick policy until
    stopped; ``--info`` gets a JSON line with this process's pid and CUDA_VISIBLE_DEVICES once it serves."""

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--info", default=None)
    args = parser.parse_args(argv)
    calls = [0]

    def policy(obs: dict) -> np.ndarray:
        calls[0] += 1
        return scripted_pick({**obs, "_chunk": calls[0] - 1})

    server = PolicyServer(policy, port=args.port)
    if args.info:
        with open(args.info, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "port": server.port,
                                 "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}) + "\n")
    print(f"policy server on {server.endpoint}", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.1)
    server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
