"""A real openpi-compatible websocket policy server on 127.0.0.1 (tests only).

Speaks the protocol ``openpi_client.websocket_client_policy.WebsocketClientPolicy`` expects: on connect the
server sends its metadata, then answers every observation message with an action message, both msgpack with
openpi's numpy encoding (``openpi_client.msgpack_numpy``). The answer is ``{"actions": (chunk, 7) float array}``
from ``policy(obs)``; every observation is kept in ``observations``. ``close()`` stops the server thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np


class PolicyServer:
    """``PolicyServer(policy)``; ``endpoint`` is ``127.0.0.1:<port>``."""

    def __init__(self, policy: Callable[[dict], np.ndarray], *, metadata: dict | None = None):
        from websockets.sync.server import serve

        self.policy = policy
        self.metadata = metadata or {"server": "pyrua_ros test policy"}
        self.observations: list[dict] = []
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None)
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
