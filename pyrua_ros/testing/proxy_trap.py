"""A loopback "proxy" that forwards nothing and records every attempt to use it (tests only).

Point a child's ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` at ``ProxyTrap().url``: any request the child
tries to send off loopback arrives here instead (``CONNECT host:443`` for HTTPS, ``GET http://host/...`` for
plain HTTP), is recorded in ``attempts`` (the request line) and refused with 403. A test that also sets
``NO_PROXY`` to the loopback names can then assert ``attempts == []``: the child reached nothing but loopback.
"""

from __future__ import annotations

import socket
import threading


class ProxyTrap:
    """Records the first line of every connection made to it; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self):
        self.attempts: list[str] = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="proxy-trap", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _addr = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2.0)
                data = b""
                try:
                    while b"\n" not in data and len(data) < 4096:
                        chunk = conn.recv(1024)
                        if not chunk:
                            break
                        data += chunk
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass
            line = data.split(b"\r\n", 1)[0].decode("latin-1", errors="replace") or "(connection without a request)"
            with self._lock:
                self.attempts.append(line)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._sock.close()

    def __enter__(self) -> ProxyTrap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
