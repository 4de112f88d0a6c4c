"""The OS boundary of a coding-agent CLI (``--runtime codex|claude``): the CLI, and every tool and shell command it
runs, sees what the cell kernel sees and the workspace it shares with the kernel, nothing else of this machine.

:class:`CliSandbox` wraps the CLI's command line in bubblewrap, built like the kernel's (``kernel/sandbox.py``):

- **the workspace shared with the kernel**: as root, the episode's workspace tmpfs (``Kernel.shared_workspace``,
  :func:`~pyrua_ros.kernel.mounts.workspace_tmpfs`) attached at the workspace's path, read-write, and the CLI
  runs as the kernel's own uid, so a module the CLI writes there is importable from the next cell and a cell's
  files are the CLI's to read. The tools arm has no kernel: the CLI gets a tmpfs of its own (same size and file
  caps). As a normal user the kernel's tmpfs cannot be shared: the run directory's ``workspace/`` is bound instead,
  and the kernel copies what changed there into its tmpfs before each cell (``Kernel.import_host_files``);
- **a read-only view**: ``/usr`` (the shell and tools a CLI runs, node), ``/etc/ssl``, ``/etc/alternatives``,
  ``/etc/ld.so.cache``, ``/etc/localtime``, an ``/etc/hosts`` naming only ``localhost`` (with ``--cli-network
  inherit``: this machine's name service files), the CLI's own package folder (its ``node_modules``), the interpreter
  that runs the loopback forwarder; read-write its config folder (CODEX_HOME / CLAUDE_CONFIG_DIR), a private
  16 MiB ``/tmp`` (``HOME`` and ``TMPDIR``); never root's home, the repository, the venv, other run
  directories, ``/etc/passwd``, ``/etc/hostname``;
- **a config folder of bounded size**: as root, the CLI's config folder is a detached tmpfs of its own
  (``mounts.workspace_tmpfs``: the workspace's size, :data:`HOME_INODES` files, the sandbox uid's), attached at
  the folder's path like the workspace; the host seeds it from the run directory's folder before the first start
  (``config.toml``, the card images) and copies it back there (bounded, no link followed, the records' reserve
  kept free) between attempts and at the end, so a CLI or its shell filling it gets ENOSPC, never a full disk. As
  a normal user it is the run directory's folder itself (a detached tmpfs needs root). A user's folder
  (``--codex-home``, ``seed``) gives it only :data:`SEED_FILES` (its config and the credentials the CLI calls the
  model server with), copied into the tmpfs (as a user: bound read-only over those names), never copied back into
  the run directory nor written into the user's folder;
- **the kernel's memory and CPU bounds**: ``prlimit`` sets the kernel's own ``RLIMIT_AS`` and ``RLIMIT_CPU``
  (:class:`~pyrua_ros.kernel.outcomes.KernelLimits` ``memory_bytes``, ``cpu_s``: 4 GiB, 1800 s) and no core
  dumps on the CLI and everything it starts, before the identity drops (so they cannot be raised again): a huge
  image the model hands to Codex's ``view_image`` or Claude Code's Read is decoded inside that bound;
- **an identity of its own**: as root, the kernel's uid (``setpriv``: no groups, every capability set cleared);
  as a user, bwrap's user namespace with ``--disable-userns``;
- **the kernel's seccomp allow-list** (:func:`~pyrua_ros.kernel.seccomp.program`): no namespaces, keyrings,
  memfd, SysV IPC, io_uring, ptrace, AF_PACKET/NETLINK/VSOCK. (So Codex's own shell sandbox, which needs user
  namespaces, cannot start: Codex runs ``-s danger-full-access`` inside this one.)
- **network: loopback ports, proxied one by one**. The CLI has a network namespace of its own; inside, a
  forwarder (:data:`FORWARD`, run by the interpreter ahead of the CLI) listens on 127.0.0.1 at exactly the ports
  of the model server, the MCP server and the proxy, and carries each connection over a unix socket bound into
  the sandbox to :class:`LoopbackRelay` in this process, which connects to that port on this machine's
  loopback. Nothing else of this machine's loopback (DDS, other servers) and nothing beyond it is reachable.
  ``--cli-network inherit`` shares this machine's network instead (a remote model server; the rest holds).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import socket
import sys
import tempfile
import threading
import urllib.parse

from pyrua_ros.kernel import cgroup, mounts, seccomp
from pyrua_ros.kernel import sandbox as kernel_sandbox
from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.kernel.outcomes import KernelLimits

INSIDE_NET = "/run/pyrua-net"   # the relay's unix sockets, inside
TMP_BYTES = 16 * 2**20
HOME_INODES = 4096   # files and folders the CLI's config folder may hold (root: its own tmpfs)
SEED_FILES = ("config.toml", "auth.json")   # what a user's config folder (--codex-home) gives the CLI
SEED_BYTES = 1 << 20                        # the largest of them taken
ETC = ("/etc/ssl", "/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime")
NAME_SERVICE = ("/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/gai.conf")   # --cli-network inherit
LOOPBACK_HOSTS = "127.0.0.1 localhost\n::1 localhost\n"   # /etc/hosts under --cli-network loopback

# Run inside as ``python -I -S -c FORWARD <socket dir> <port>... -- <cli argv>``: listen on 127.0.0.1:<port> (and
# [::1]:<port>) for each port, carry each connection to <socket dir>/<port>.sock, run the CLI and exit with its status.
FORWARD = r"""
import signal, socket, subprocess, sys, threading
args = sys.argv[1:]
split = args.index("--")
where, ports, argv = args[0], [int(p) for p in args[1:split]], args[split + 1:]
def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(listener, path):
    while True:
        conn, _ = listener.accept()
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            continue
        threading.Thread(target=pump, args=(conn, up), daemon=True).start()
        threading.Thread(target=pump, args=(up, conn), daemon=True).start()
for port in ports:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, port))
        except OSError:
            if family == socket.AF_INET:
                raise
            continue   # (no IPv6 loopback in this namespace)
        listener.listen(64)
        threading.Thread(target=serve, args=(listener, f"{where}/{port}.sock"), daemon=True).start()
child = subprocess.Popen(argv)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.exit(child.wait())
"""


def loopback_port(url: str | None) -> int | None:
    """The port of an http(s) URL on 127.0.0.1 / localhost / ::1, else None."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    return parts.port or (443 if parts.scheme == "https" else 80)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class LoopbackRelay:
    """This process's side of the proxied ports: a unix socket ``<port>.sock`` in a private folder for each port,
    each connection to it carried to 127.0.0.1:<port>. ``owner``: the uid the sockets are given, so it may connect
    (root mode); the folder stays this process's."""

    def __init__(self, ports: list[int], owner: int | None):
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="pyrua-cli-net-"))
        self._listeners: list[socket.socket] = []
        os.chmod(self.folder, 0o711)   # the sandbox may connect to the sockets, never change the folder
        for port in sorted(set(ports)):
            path = self.folder / f"{port}.sock"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            if owner is not None:
                os.chown(path, owner, owner)
            listener.listen(64)
            self._listeners.append(listener)
            threading.Thread(target=self._serve, args=(listener, port), name=f"cli-relay-{port}", daemon=True).start()

    @staticmethod
    def _serve(listener: socket.socket, port: int) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return   # closed
            try:
                up = socket.create_connection(("127.0.0.1", port), timeout=10.0)
                up.settimeout(None)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_pump, args=(conn, up), daemon=True).start()
            threading.Thread(target=_pump, args=(up, conn), daemon=True).start()

    def close(self) -> None:
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _package_root(executable: str) -> str:
    """What to bind for the CLI itself: the ``node_modules`` folder it lives in (its platform packages and vendored
    binaries with it), else its own folder."""
    real = pathlib.Path(os.path.realpath(executable))
    for parent in real.parents:
        if parent.name == "node_modules":
            return str(parent)
    return str(real.parent)


@dataclasses.dataclass(frozen=True)
class Wrapped:
    """A CLI command line inside the sandbox: ``argv`` to start, ``pass_fds`` to hand it (``owned``: those of them
    the starter closes once the child has them), ``description`` for result.json's notes."""

    argv: list[str]
    pass_fds: tuple[int, ...]
    owned: tuple[int, ...]
    description: str


class CliSandbox:
    """The boundary of one episode's CLI (see the module docstring). ``workspace``: the workspace's path;
    ``shared``: ``Kernel.shared_workspace`` ((mount fd, uid)) or None; ``home``: the CLI's config folder (made
    the sandbox user's when this process created it: ``own_home``); ``executable``: the CLI; ``ports``: the
    loopback ports it may reach (``network="loopback"``); ``limits``: the kernel's limits (default
    ``KernelLimits()``), whose ``memory_bytes``/``cpu_s`` bound the CLI and ``workspace_bytes``/
    ``workspace_inodes`` size a workspace of its own (tools arm) and ``workspace_bytes`` the config folder's tmpfs
    (root); ``seed``: a user's config folder whose :data:`SEED_FILES` the CLI gets (``--codex-home``). ``close()``
    copies the config folder's tmpfs back, ends the relay and lets go of the mounts; ``notes``: what went wrong on
    the way (for result.json)."""

    def __init__(self, *, workspace: pathlib.Path, shared: tuple[int, int] | None, home: pathlib.Path,
                 own_home: bool, executable: str, ports: list[int], network: str = "loopback",
                 limits: KernelLimits | None = None, seed: pathlib.Path | None = None):
        self.limits = limits = limits or KernelLimits()
        self.seed = pathlib.Path(seed).resolve() if seed is not None else None
        self.root = os.geteuid() == 0
        self.workspace = str(pathlib.Path(workspace).resolve())
        self.home = pathlib.Path(home).resolve()
        self.executable = executable
        self.network = network
        self._own_mount: int | None = None
        self.mount_fd, self.uid = shared if shared is not None else (None, None)
        if self.root and self.mount_fd is None:
            self.uid = kernel_sandbox.episode_uid()
            self._own_mount = self.mount_fd = mounts.workspace_tmpfs(limits.workspace_bytes, limits.workspace_inodes,
                                                                           self.uid)
        self.home.mkdir(parents=True, exist_ok=True)
        self.notes: list[str] = []
        self._home_fd: int | None = None   # the config folder's own tmpfs (root)
        self._home_seeded = False
        self._home_seen: dict[str, tuple] = {}
        if self.root:
            try:
                self._home_fd = mounts.workspace_tmpfs(limits.workspace_bytes, HOME_INODES, self.uid)
            except OSError as exc:   # an older Linux: the folder on the run directory's disk, as a user's
                self.notes.append(f"the CLI's config folder could not be a tmpfs of its own ({exc}); it was the run "
                                  "directory's folder, bounded by that disk only")
        self.home_tmpfs = self._home_fd is not None
        if own_home and self.uid is not None and self._home_fd is None:
            for folder, dirs, files in os.walk(self.home):   # (made by this process for this episode)
                for name in (folder, *(os.path.join(folder, n) for n in dirs + files)):
                    os.lchown(name, self.uid, self.uid)
        self.ports = sorted(set(ports)) if network == "loopback" else []
        self.relay = LoopbackRelay(self.ports, self.uid) if network == "loopback" else None
        self._hosts: pathlib.Path | None = None
        if network == "loopback":   # "localhost" resolves, nothing else of this machine's names is seen
            self._hosts = pathlib.Path(tempfile.mkdtemp(prefix="pyrua-cli-etc-"))
            os.chmod(self._hosts, 0o755)
            (self._hosts / "hosts").write_text(LOOPBACK_HOSTS)
            os.chmod(self._hosts / "hosts", 0o644)

    def wrap(self, argv: list[str]) -> Wrapped:
        """``argv`` (the CLI's command line) run inside the sandbox."""
        bwrap = kernel_sandbox.bwrap_path()
        if bwrap is None:
            raise kernel_sandbox.SandboxUnavailable("the CLI sandbox needs bubblewrap (`apt-get install bubblewrap`)")
        prlimit = shutil.which("prlimit", path="/usr/bin:/bin")
        if prlimit is None:
            raise kernel_sandbox.SandboxUnavailable("the CLI sandbox needs prlimit (util-linux) to bound the CLI's "
                                                    "memory and CPU")
        python = os.path.realpath(sys.executable)
        args = kernel_sandbox._Args()
        args.argv = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                     "--die-with-parent"]
        if self.network == "loopback":
            args.argv.append("--unshare-net")
        if not self.root:
            args.argv += ["--unshare-user", "--disable-userns"]
        read_fd, write_fd = os.pipe()
        os.write(write_fd, seccomp.program())
        os.close(write_fd)
        args.argv += ["--seccomp", str(read_fd)]
        args.ro_bind("/usr", "/usr")
        args.argv += ["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin",
                      "/bin", "--symlink", "usr/sbin", "/sbin"]
        for path in ETC if self._hosts is not None else ETC + NAME_SERVICE:
            if os.path.exists(path):
                args.ro_bind(path, path)
        if self._hosts is not None:
            args.ro_bind(str(self._hosts / "hosts"), "/etc/hosts")
        for source, dest in kernel_sandbox._interpreter_binds():
            if not source.startswith("/usr/"):
                args.ro_bind(source, dest)
        package = _package_root(self.executable)
        if not package.startswith("/usr/"):
            args.ro_bind(package, package)
        args.argv += ["--dev", "/dev", "--proc", "/proc"]
        args.tmpfs("/tmp", TMP_BYTES, "1777")
        args.bind(str(self.home), str(self.home))
        if self.seed is not None and self._home_fd is None:   # (no tmpfs to copy them into: bound read-only)
            for name in SEED_FILES:
                if (self.seed / name).is_file():
                    args.ro_bind(str(self.seed / name), str(self.home / name))
        if self.relay is not None:
            args.bind(str(self.relay.folder), INSIDE_NET)
        args.bind(self.workspace, self.workspace)
        fds = [read_fd]
        prefix: list[str] = []   # (each attach helper executes the next, the last bubblewrap)
        if self._home_fd is not None:
            self._sync_home()
            prefix += mounts.attach_argv(python, self._home_fd, str(self.home))
            fds.append(self._home_fd)
        if self.mount_fd is not None:
            prefix += mounts.attach_argv(python, self.mount_fd, self.workspace)
            fds.append(self.mount_fd)
        args.argv[:0] = prefix
        args.argv += ["--chdir", self.workspace, "--remount-ro", "/", "--"]
        args.argv += [prlimit, f"--as={self.limits.memory_bytes}", f"--cpu={self.limits.cpu_s}", "--core=0", "--"]
        if self.root:
            args.argv += ["/usr/bin/setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                          "--inh-caps=-all", "--bounding-set=-all"]
        if self.relay is not None:
            args.argv += [python, "-I", "-S", "-c", FORWARD, INSIDE_NET, *map(str, self.ports), "--"]
        args.argv += argv
        return Wrapped(argv=args.argv, pass_fds=tuple(fds), owned=(read_fd,), description=self.description())

    def description(self) -> str:
        """One line for result.json's notes."""
        who = f"uid {self.uid}, the kernel's" if self.root and self._own_mount is None else (
            f"uid {self.uid}, its own" if self.root else f"uid {os.geteuid()} in a user namespace")
        where = ("the workspace tmpfs shared with the kernel" if self.mount_fd is not None and self._own_mount is None
                 else "a workspace tmpfs of its own" if self.mount_fd is not None
                 else "the run directory's workspace/ (copied into the kernel's tmpfs before each cell: sharing "
                      "that tmpfs needs root)")
        net = (f"loopback ports {', '.join(map(str, self.ports)) or 'none'} only (proxied)"
               if self.network == "loopback" else "this machine's network (--cli-network inherit)")
        home = (f"its config folder ({self.limits.workspace_bytes // 2**20} MiB tmpfs, at most {HOME_INODES} files)"
                if self.home_tmpfs else "its config folder (on the run directory's disk)")
        if self.seed is not None:
            home += f" with {' and '.join(SEED_FILES)} of {self.seed} (read by the CLI, so by the model's tools)"
        return (f"the {pathlib.Path(self.executable).name} CLI ran in bubblewrap: {who}, seccomp allow-list, "
                f"{where} read-write, {home}, a read-only /usr; network: {net}; "
                f"{cgroup.rlimits_only(self.limits.cpu_s, self.limits.memory_bytes)}, each process it starts")

    def _sync_home(self) -> None:
        """Before the first start, seed the config folder's tmpfs from the run directory's folder; before a later
        one and at the end, copy it back there (regular files and folders only, bounded, the records' reserve
        kept free on that disk)."""
        seeding = not self._home_seeded
        limits = wsfiles.CopyLimits(bytes=self.limits.workspace_bytes,
                                    reserve_bytes=0 if seeding else self.limits.record_reserve_bytes)
        disk = tmpfs = None
        try:
            disk, tmpfs = wsfiles.open_dir(self.home), mounts.open_root(self._home_fd)
            if seeding:
                report = wsfiles.copy_tree(disk, tmpfs, owner=self.uid, limits=limits)
                if self.seed is not None:
                    self._seed_files(tmpfs)
            else:   # (never the user's files: the run directory is no place for credentials)
                report = wsfiles.copy_tree(tmpfs, disk, limits=limits, seen=self._home_seen,
                                           protect=SEED_FILES if self.seed is not None else ())
            if report.skipped:
                entries = "entry" if report.skipped == 1 else "entries"
                self.notes.append(f"the CLI's config folder: {report.skipped} {entries} not copied "
                                  f"{'in' if seeding else 'back'} ({', '.join(report.examples[:3])})")
        except OSError as exc:
            self.notes.append(f"the CLI's config folder could not be copied {'in' if seeding else 'back'}: "
                              f"{exc.strerror or exc}")
        finally:
            for fd in (disk, tmpfs):
                if fd is not None:
                    os.close(fd)
        self._home_seeded = True

    def _seed_files(self, tmpfs: int) -> None:
        """Copy :data:`SEED_FILES` of the user's folder into the config folder's tmpfs (regular files only, no link
        followed, at most :data:`SEED_BYTES` each), given to the sandbox uid."""
        folder = wsfiles.open_dir(self.seed)
        try:
            for name in SEED_FILES:
                if not os.path.lexists(os.path.join(self.seed, name)):
                    continue
                try:
                    data = wsfiles.read_file(folder, name, SEED_BYTES)
                except (OSError, ValueError) as exc:
                    self.notes.append(f"--codex-home {self.seed}: {name} not given to the CLI ({exc})")
                    continue
                wsfiles.write_file(tmpfs, name, data, owner=self.uid)
                os.chmod(name, 0o600, dir_fd=tmpfs, follow_symlinks=False)
        finally:
            os.close(folder)

    def close(self) -> None:
        if self._home_fd is not None:
            if self._home_seeded:
                self._sync_home()
            os.close(self._home_fd)
            self._home_fd = None
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        if self._hosts is not None:
            shutil.rmtree(self._hosts, ignore_errors=True)
            self._hosts = None
        if self._own_mount is not None:
            os.close(self._own_mount)
            self._own_mount = None
