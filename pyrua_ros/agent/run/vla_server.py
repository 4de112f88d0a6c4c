"""A VLA policy server the episode starts itself (``--vla-server-cmd``), like the reference boots Pi0.5.

The user's command (any openpi-compatible websocket server; split like a shell command line, without pipes or
``;``: wrap those in ``sh -c '...'``) runs as a child process in a session of its own, with
``CUDA_VISIBLE_DEVICES`` set to ``--cuda-device`` when one is given and ``{port}`` replaced by the port it must
serve (a free one, or the port of ``--vla-endpoint``). The episode waits until the server answers (a TCP
connection, then openpi's metadata message), fails with the server's last output line when it exits first or does
not answer in time, and stops it (its whole process group) with the episode. Started through ``setpriv
--pdeathsig`` where that exists, so even a SIGKILLed episode takes it down. Output: ``<run>/vla_server.log``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

from pyrua_ros.bringup.process import stop_process_groups
from pyrua_ros.robo.vla import connect

POLL_S = 0.2


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VlaServer:
    """One started policy server: ``endpoint`` (``host:port``), ``proc``, ``log``."""

    def __init__(self, command: str, *, log: Path, cuda_device: str | None = None,
                 endpoint: str | None = None) -> None:
        if endpoint:
            host, _, port = endpoint.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"--vla-endpoint must be host:port; got {endpoint!r}")
        else:
            host, port = "127.0.0.1", str(free_port())
        self.endpoint = f"{host}:{port}"
        self.command = command.replace("{port}", port)
        self.log = Path(log)
        env = dict(os.environ)
        if cuda_device is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(cuda_device)
        argv = shlex.split(self.command)
        if not argv:
            raise ValueError("--vla-server-cmd is empty")
        if shutil.which("setpriv"):
            argv = ["setpriv", "--pdeathsig", "TERM", *argv]
        self._log_file = self.log.open("ab")
        try:
            self.proc = subprocess.Popen(argv, stdout=self._log_file, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as exc:
            self._log_file.close()
            raise RuntimeError(f"--vla-server-cmd could not start: {exc}") from exc

    def last_line(self) -> str:
        """The server's last non-empty output line (for error messages)."""
        with contextlib.suppress(OSError):
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
            if lines:
                return lines[-1].strip()[:300]
        return "(no output)"

    def wait_ready(self, timeout_s: float):
        """Block until the server answers, then return a connected policy client; RuntimeError when the server
        exits or does not answer within ``timeout_s``."""

        host, _, port = self.endpoint.rpartition(":")
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise RuntimeError(f"--vla-server-cmd exited with status {code} before serving {self.endpoint}: "
                                   f"{self.last_line()} (see {self.log})")
            try:
                socket.create_connection((host, int(port)), timeout=POLL_S).close()
                return connect(self.endpoint)
            except (OSError, ConnectionError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"--vla-server-cmd did not serve {self.endpoint} within {timeout_s:g} s: "
                                       f"{self.last_line()} (see {self.log})") from None
                time.sleep(POLL_S)

    def stop(self) -> None:
        """End the server's process group (SIGINT, SIGTERM, SIGKILL) and close its log."""
        stop_process_groups([self.proc], sigint_grace_s=5.0, sigterm_grace_s=5.0)
        self._log_file.close()
