"""The OS boundary of the cell kernel: the bubblewrap command line that starts the kernel process.

The kernel runs model-written code, so the boundary is the operating system, not Python (``policy.py`` only gives
clear early answers). ``plan()`` builds the command that starts the kernel under bubblewrap (``bwrap``):

- **namespaces**: its own network namespace (no interface but its own loopback: no DDS, no UDP or TCP to this
  machine, no abstract unix sockets), PID namespace with ``--die-with-parent`` (every descendant dies with the
  kernel or the episode), IPC, UTS and cgroup namespaces, ``--new-session`` (no terminal to inject into);
- **a genuinely unprivileged identity of its own**: as root, a user namespace alone would map the sandbox back to
  root outside (SANDBOX-MEASURED.md fact 1), so bwrap runs without one and ``setpriv`` drops to a uid/gid of the
  episode's own (:func:`episode_uid`: a random id above 2**30 that no running process holds, so kernels of
  different episodes share no user keyring, no per-user limit and cannot ptrace each other) with no groups and
  every capability set cleared before Python starts; as a normal user, bwrap's user namespace maps the sandbox to
  that same unprivileged user and ``--disable-userns`` forbids nesting;
- **a system call allow-list**: bwrap loads :mod:`.seccomp`'s filter (``--seccomp FD``) before ``setpriv`` runs:
  no namespaces, keyrings, memfd, SysV IPC, io_uring, userfaultfd, ptrace, bpf, perf events or mounts, sockets of
  AF_UNIX/INET/INET6 only; the worker adds the same list without ``execve`` and makes itself undumpable;
- **a narrow read-only view**: the interpreter binary, its shared library and stdlib (its ``site-packages``
  hidden), only the distributions of the allowed modules (``policy.ALLOWED_MODULES`` and what they require) under
  ``/opt/pyrua/site``, only the kernel's own source files under ``/opt/pyrua/src``, the system libraries
  (``/usr/lib``), ``/etc/ld.so.cache``; never root's home, the repository, the venv or the run directory;
- **one writable place**: the workspace, a tmpfs of ``workspace_bytes`` (default 256 MiB) mounted at the
  workspace's own path, owned by the sandbox user; a small private ``/tmp`` (the host caps both tmpfs' inodes
  once the kernel is up, :mod:`.mounts`); everything else is read-only
  (``--remount-ro /``). The host copies the workspace back into the run directory itself, never following a
  link (``workspace.py``);
- **a clean environment**: only the variables of ``child_environment`` (no API keys, no ROS_*, no PYTHONPATH).

Where bubblewrap is missing or cannot create the namespaces, the kernel refuses to start with one line saying so;
``isolation="unsafe"`` (the CLI's ``--unsafe-sandbox``) runs the old way: a plain child process with rlimits and
Landlock only, recorded in result.json's notes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import importlib.util
import inspect
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from pyrua_ros.kernel import mounts, policy, seccomp

ISOLATIONS = ("bwrap", "unsafe")
INSIDE_SRC = "/opt/pyrua/src"      # the kernel's own source files, read-only
INSIDE_SITE = "/opt/pyrua/site"    # the allowed distributions, read-only
EPISODE_UIDS = range(2**30, 2**31 - 2**16)   # where each episode's kernel uid is drawn (root mode)
TMP_BYTES = 16 * 2**20             # the private /tmp
TMP_INODES = 1024                  # files and folders the private /tmp may hold
UNSAFE_NOTE = ("--unsafe-sandbox: cells ran in a plain child process (rlimits and Landlock only), without the "
               "bubblewrap boundary (no network, PID or mount namespace, not dropped to an unprivileged user)")

# The only pyrua_ros files the kernel process imports (test_kernel_sandbox checks nothing else is needed).
KERNEL_SOURCES = (
    "pyrua_ros/__init__.py",
    "pyrua_ros/kernel/__init__.py",
    "pyrua_ros/kernel/isolation.py",
    "pyrua_ros/kernel/policy.py",
    "pyrua_ros/kernel/protocol.py",
    "pyrua_ros/kernel/proxy.py",
    "pyrua_ros/kernel/seccomp.py",
    "pyrua_ros/kernel/worker.py",
    "pyrua_ros/robo/__init__.py",
    "pyrua_ros/robo/errors.py",
    "pyrua_ros/robo/results.py",
)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class SandboxUnavailable(RuntimeError):
    """Isolation was asked for and cannot be set up here (bubblewrap missing or refused by the Linux kernel)."""


@dataclasses.dataclass(frozen=True)
class Launch:
    """How to start one kernel process: ``argv`` (the whole command), ``sys_path`` (what the bootstrap puts on
    ``sys.path`` inside), ``isolation`` (``bwrap`` | ``unsafe``), ``uid`` the kernel runs as (outside view) and
    ``description`` (one line for result.json)."""

    argv: list[str]
    sys_path: list[str]
    isolation: str
    uid: int
    description: str


def _uids_in_use() -> set[int]:
    """Real, effective, saved and filesystem uids of every process this machine shows in /proc."""
    found: set[int] = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                line = next((x for x in fh if x.startswith("Uid:")), "")
                found.update(int(v) for v in line.split()[1:] if v.isdigit())
    return found


def episode_uid() -> int:
    """A uid (and gid) for one episode's kernel, as root: drawn at random from ``EPISODE_UIDS`` (about 2**30 ids,
    no account of this machine), and held by no running process."""
    in_use = _uids_in_use()
    while True:
        uid = random.SystemRandom().choice(EPISODE_UIDS)
        if uid not in in_use:
            return uid


def bwrap_path() -> str | None:
    """The bubblewrap executable, or None when it is not installed."""
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    """Names of the distributions ``dist`` needs at run time (extras and markers that do not apply left out)."""
    names = []
    for text in dist.requires or ():
        name, _, marker = text.partition(";")
        if marker.strip():
            try:
                from packaging.markers import Marker  # noqa: PLC0415 (optional: packaging)

                if not Marker(marker.strip()).evaluate({"extra": ""}):
                    continue
            except ImportError:
                if "extra" in marker:
                    continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", name)
        if match:
            names.append(match.group(1))
    return names


def _record_tops(dist: importlib.metadata.Distribution) -> set[str]:
    """The top-level names (first path component) of the files a distribution installed, from its RECORD."""
    text = dist.read_text("RECORD") or ""
    return {line.split(",", 1)[0].split("/", 1)[0] for line in text.splitlines() if line.strip()}


def _owners(top: str) -> list[str]:
    """Distributions that provide the top-level module ``top`` (none for stdlib or missing modules), as
    ``importlib.metadata.packages_distributions`` names them: a distribution of that name first; else those whose
    ``top_level.txt`` lists it; else, of those without one, the ones whose RECORD installed it. One pass over the
    distributions, and a RECORD is parsed only when its text holds the name (``packages_distributions`` parses every
    RECORD: 0.13 of the 0.17 CPU s a kernel's plan took, for scikit-image's wheel alone)."""
    spec = importlib.util.find_spec(top) if top.isidentifier() else None
    if spec is None or not spec.origin or "site-packages" not in spec.origin:
        return []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution(top)
        if top in _record_tops(dist):
            return [dist.metadata["Name"]]
    declared, recorded = [], []
    for dist in importlib.metadata.distributions():
        listed = dist.read_text("top_level.txt")
        if listed is not None:
            if top in listed.split():
                declared.append(dist.metadata["Name"])
        elif top in (dist.read_text("RECORD") or "") and any(
                name == top or inspect.getmodulename(name) == top for name in _record_tops(dist)):
            recorded.append(dist.metadata["Name"])
    return declared or recorded


@functools.lru_cache(maxsize=4)
def allowed_site_entries(allowed: tuple[str, ...] = policy.ALLOWED_MODULES) -> tuple[tuple[str, str], ...]:
    """(path outside, name inside ``INSIDE_SITE``) of every site-packages entry the allowed modules need: the
    files of their distributions and of what those require, transitively (the ``.libs`` folders of binary
    wheels included, at the same relative place, so their RPATHs resolve). Stdlib modules need nothing."""
    site_dirs = [Path(p) for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    todo = [d for top in allowed for d in _owners(top)]
    seen: set[str] = set()
    entries: dict[str, str] = {}
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        base = Path(str(dist.locate_file("")))
        if base not in site_dirs:
            continue
        for top in _record_tops(dist):
            if top in ("..", "bin", "__pycache__") or top.endswith(".pth"):
                continue
            source = base / top
            if source.exists() and top not in entries:
                entries[top] = str(source)
        todo.extend(_requirement_names(dist))
    return tuple(sorted((path, top) for top, path in entries.items()))


def _interpreter_binds() -> list[tuple[str, str]]:
    """(source, dest) read-only binds that let the base interpreter run at its own path."""
    exe = os.path.realpath(sys.executable)
    binds = [(exe, exe)]
    stdlib = sysconfig.get_paths()["stdlib"]
    binds.append((stdlib, stdlib))
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
        if libdir and soname and os.path.exists(os.path.join(libdir, soname)):
            lib = os.path.join(libdir, soname)
            if not lib.startswith(("/usr/lib/", "/lib/")):
                binds.append((lib, lib))
    return binds


def _system_binds() -> list[tuple[str, str]]:
    binds = []
    for path in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(path):
            binds.append((os.path.realpath(path) if path.startswith("/etc") else path, path))
    return binds


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


class _Args:
    """A bwrap argument list that creates every mount's parent folders world-traversable (bwrap would make them
    0700, which the unprivileged user could not pass)."""

    def __init__(self) -> None:
        self.argv: list[str] = []
        self._dirs: set[str] = {"/"}

    def dirs_for(self, dest: str) -> None:
        for parent in _parents(dest):
            if parent not in self._dirs:
                self._dirs.add(parent)
                self.argv += ["--perms", "0755", "--dir", parent]

    def ro_bind(self, source: str, dest: str) -> None:
        self.dirs_for(dest)
        self.argv += ["--ro-bind", source, dest]
        self._dirs.add(dest)

    def bind(self, source: str, dest: str) -> None:
        self.dirs_for(dest)
        self.argv += ["--bind", source, dest]
        self._dirs.add(dest)

    def tmpfs(self, dest: str, size: int, perms: str) -> None:
        self.dirs_for(dest)
        self.argv += ["--perms", perms, "--size", str(int(size)), "--tmpfs", dest]
        self._dirs.add(dest)


def problem() -> str | None:
    """Why the bubblewrap boundary cannot be set up on this machine (one line), or None when it can: bubblewrap
    is installed, ``setpriv`` too when running as root, the seccomp filter has this architecture's tables, and a
    minimal sandbox with the kernel's namespaces and filter starts and exits.
    The front ends ask this before anything boots (``validate.check_sandbox``)."""

    bwrap = bwrap_path()
    if bwrap is None:
        return "the cell sandbox needs bubblewrap (`apt-get install bubblewrap`, which scripts/setup.sh does)"
    root = os.geteuid() == 0
    if root and shutil.which("setpriv", path="/usr/bin:/bin") is None:
        return "the cell sandbox needs setpriv (util-linux) to drop root"
    if seccomp.machine() is None:
        return (f"the cell sandbox's seccomp filter has system call tables for {', '.join(seccomp.ARCHES)} only, "
                f"not {platform.machine()!r}")
    argv = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    if not root:
        argv += ["--unshare-user", "--disable-userns"]
    program = seccomp.program()
    read_fd, write_fd = os.pipe()
    os.write(write_fd, program)   # a few KiB: the pipe takes it whole
    os.close(write_fd)
    argv += ["--seccomp", str(read_fd), "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink",
             "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--",
             "/usr/bin/true"]
    try:
        done = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL, capture_output=True, timeout=10.0,
                              pass_fds=(read_fd,))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be run ({type(exc).__name__}: {exc})"
    finally:
        os.close(read_fd)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return (f"bubblewrap cannot create the sandbox's namespaces or load its seccomp filter here "
                f"({lines[-1] if lines else f'exit status {done.returncode}'})")
    return None


def plan(workspace: Path, *, workspace_bytes: int, isolation: str = "bwrap", uid: int | None = None,
         info_fd: int | None = None, seccomp_fd: int | None = None, workspace_mount: int | None = None) -> Launch:
    """The command that starts the kernel for ``workspace`` (the host path; inside, a tmpfs of
    ``workspace_bytes`` is mounted at the same path; ``workspace_mount``: instead, the detached tmpfs of
    :func:`mounts.workspace_tmpfs` the episode shares with its coding-agent CLI, attached there by
    :func:`mounts.attach_argv`; the caller passes that fd to the child). ``uid``: the uid to drop to as root
    (None: a fresh :func:`episode_uid`; a kernel restarted within its episode keeps its own). ``info_fd``: an fd
    bwrap writes its JSON info to (the sandbox's child pid). ``seccomp_fd``: an fd holding
    :func:`seccomp.program`, which bwrap loads (None only for tests of the bare namespaces). Raises
    SandboxUnavailable when ``isolation="bwrap"`` and bubblewrap is missing."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}; got {isolation!r}")
    exe = os.path.realpath(sys.executable)
    if isolation == "unsafe":
        site_dirs = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
        return Launch(argv=[exe, "-I", "-B", "-S"], sys_path=[str(PACKAGE_ROOT), *site_dirs], isolation="unsafe",
                      uid=os.geteuid(), description=UNSAFE_NOTE)
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxUnavailable("the cell sandbox needs bubblewrap (`apt-get install bubblewrap`, which "
                                 "scripts/setup.sh does); pass --unsafe-sandbox to run cells without it")
    root = os.geteuid() == 0
    args = _Args()
    args.argv = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                 "--die-with-parent", "--new-session"]
    if not root:
        args.argv += ["--unshare-user", "--disable-userns"]
    if info_fd is not None:
        args.argv += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        args.argv += ["--seccomp", str(seccomp_fd)]
    for source, dest in _system_binds():
        args.ro_bind(source, dest)
    args.argv += ["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin"]
    if root:
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
        if setpriv is None:
            raise SandboxUnavailable("the cell sandbox needs setpriv (util-linux) to drop root; pass "
                                     "--unsafe-sandbox to run cells without isolation")
        args.ro_bind(setpriv, "/usr/bin/setpriv")
    for source, dest in _interpreter_binds():
        args.ro_bind(source, dest)
    stdlib_site = os.path.join(sysconfig.get_paths()["stdlib"], "site-packages")
    if os.path.isdir(stdlib_site):
        args.tmpfs(stdlib_site, 4096, "0555")   # the base interpreter's own packages stay hidden
    for source, name in allowed_site_entries():
        args.ro_bind(source, f"{INSIDE_SITE}/{name}")
    for rel in KERNEL_SOURCES:
        args.ro_bind(str(PACKAGE_ROOT / rel), f"{INSIDE_SRC}/{rel}")
    args.argv += ["--dev", "/dev", "--proc", "/proc"]
    args.tmpfs("/tmp", TMP_BYTES, "1777")
    ws = str(Path(workspace).resolve())
    if workspace_mount is not None:
        args.bind(ws, ws)
        args.argv[:0] = mounts.attach_argv(exe, workspace_mount, ws)
    else:
        args.tmpfs(ws, workspace_bytes, "0700" if root else "0755")
    args.argv += ["--chdir", ws, "--remount-ro", "/", "--remount-ro", "/dev", "--"]
    if root and uid is None:
        uid = episode_uid()
    if root:
        args.argv += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                      "--bounding-set=-all"]
    args.argv += [exe, "-I", "-B", "-S"]
    who = (f"uid {uid}, the episode's own (dropped from root with setpriv)" if root
           else f"uid {os.geteuid()} in a user namespace")
    filtered = f"; {seccomp.DESCRIPTION}" if seccomp_fd is not None else ""
    description = (f"bubblewrap: own network, PID, IPC, UTS and mount namespaces; {who}, no capabilities, not "
                   f"dumpable{filtered}; read-only view of the interpreter, the allowed packages and the kernel's "
                   f"own files; the workspace ({workspace_bytes // 2**20} MiB tmpfs) the only writable place")
    return Launch(argv=args.argv, sys_path=[INSIDE_SRC, INSIDE_SITE], isolation="bwrap",
                  uid=uid if root else os.geteuid(), description=description)
