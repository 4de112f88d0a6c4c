"""The HTTP part every scripted test server here shares: a stdlib ``ThreadingHTTPServer`` on a free 127.0.0.1 port
in one daemon thread, a script of steps taken one per model request, and a clean stop."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A keep-alive (HTTP/1.1) request handler that logs nothing (test output stays readable)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass


class LoopbackHttpServer:
    """Serves ``handler_class`` on ``127.0.0.1:<port>`` (``root_url``) until ``close()``; a context manager.

    ``script``: the steps ``take_step`` hands out in order; a callable step is called with the request body (a
    step computed from the conversation so far). ``requests`` is for subclasses to record into under ``_lock``.
    """

    def __init__(self, script: list, handler_class: type[BaseHTTPRequestHandler], *, name: str):
        self.script = list(script)
        self.requests: list = []
        self._lock = threading.Lock()
        self._next = 0
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{name}-{self.port}", daemon=True)
        self._thread.start()

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, wake handlers that are waiting (``wait``) and join the server thread (2 s deadline)."""
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=2.0)

    @property
    def steps_used(self) -> int:
        """Script steps handed out so far."""
        return self._next

    def take_step(self, body: dict):
        """The next script step (a callable step is called with ``body``), or None when the script is spent."""
        with self._lock:
            if self._next >= len(self.script):
                return None
            step = self.script[self._next]
            self._next += 1
        return step(body) if callable(step) else step

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server is closing; True when it is closing."""
        return self._stop.wait(seconds)
