"""The hostile cell corpus: each cell tries to get out of the kernel; none may, each gets a clear result, and the
next cell still runs. One kernel for the module (cases that kill it check that it came back)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pyrua_ros.kernel import RESTART_NOTICE, Kernel, KernelLimits, sandbox, seccomp
from pyrua_ros.kernel import workspace as wsfiles
from pyrua_ros.kernel.policy import import_refusal, refusal_text
from pyrua_ros.testing import spin_until
from pyrua_ros.testing.processes import descendants
from pyrua_ros.wire.rosenv import claim_domain_id

TAG = uuid.uuid4().hex[:8]
OUTSIDE = Path(f"/tmp/pyrua_hostile_{TAG}")  # nothing may ever create this
TARGET_DIR = Path(f"/tmp/pyrua_hostile_dir_{TAG}")


class Robo:
    """Minimal robot: one motion, one constant, and a private backend that must stay out of reach."""

    OPEN = -1.0

    def __init__(self) -> None:
        self._backend = "secret"

    def move_to(self, xyz: tuple[float, float, float]) -> tuple:
        """Pretend to move."""
        return tuple(xyz)


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile cell. ``last``: exact last line of the exception; ``exc``: exact whole exception text;
    ``value``: exact value; ``after``: (code, value) run next instead of ``1 + 1``."""

    id: str
    code: str
    last: str | None = None
    exc: str | None = None
    value: str | None = None
    refused: bool = False
    restarted: bool = False
    timeout_s: float = 10.0
    after: tuple[str, str] = ("1 + 1", "2")
    check: Callable[[object], None] | None = None
    needs_landlock: bool = False


# Policy code that reaches the real ``os`` and ``socket`` past the Python-level guards (a function's globals through
# a descriptor, names split so the static check does not see them): the OS boundary must hold without that layer.
ESCAPE = ("_f = type(robo).move_to\n"
          "_g = vars(type(_f))['__glo' + 'bals__'].__get__(_f)\n"
          "_imp = vars(_g['builtins'])['__imp' + 'ort__']\n"
          "os, socket = _imp('os'), _imp('socket')\n"
          "real_open = vars(_g['builtins'])['open']\n")


UNCHECKABLE = ("SyntaxError: the code is nested too deeply or is too large to be checked (RecursionError while "
               "parsing it) and was not run; split long expressions and deep nesting into smaller statements")


def imp(name: str) -> str:
    return f"ImportError: {import_refusal(name)}"


def _huge_output(out) -> None:
    assert out.stdout == "x" * 4000 + "\n... [9992001 chars omitted] ...\n" + "x" * 3999 + "\n"


CASES = [
    *[Case(f"import-{m}", f"import {m}", last=imp(m)) for m in (
        "os", "sys", "subprocess", "socket", "ctypes", "importlib", "builtins", "pathlib", "shutil",
        "multiprocessing", "threading", "signal", "inspect", "pyrua_ros", "_socket")],
    # traceback and operator are allowed (the reference allows them) without their routes to frames and attributes
    Case("traceback-walk-stack", "import traceback\nnext(traceback.walk_stack(None))",
         last="AttributeError: module 'traceback' member 'walk_stack' is not available to policy code"),
    Case("traceback-walk-tb", "import traceback\ntraceback.walk_tb",
         last="AttributeError: module 'traceback' member 'walk_tb' is not available to policy code"),
    Case("operator-attrgetter-private", "import operator\noperator.attrgetter('__glo' + 'bals__')(len)",
         last="AttributeError: SandboxError: attrgetter('__globals__') reaches a private attribute, which policy "
              "code may not use"),
    Case("operator-methodcaller-private", "import operator\noperator.methodcaller('__red' + 'uce_ex__', 2)(1)",
         last="AttributeError: SandboxError: methodcaller('__reduce_ex__') reaches a private attribute, which "
              "policy code may not use"),
    Case("from-os-import", "from os import system", last=imp("os")),
    Case("os-path-submodule", "import os.path", last=imp("os")),
    Case("dunder-import", "__import__('os').system('true')", exc=refusal_text(["__import__"]), refused=True),
    Case("subclasses", "().__class__.__bases__[0].__subclasses__()", exc=refusal_text(["__subclasses__"]),
         refused=True),
    Case("subclasses-by-string", "getattr(object, '__subcl' + 'asses__')()",
         last="AttributeError: SandboxError: attribute '__subclasses__' may not be used by policy code"),
    Case("generator-frame-walk", "def g():\n    yield 1\nx = g()\nx.gi_frame.f_back.f_globals",
         exc=refusal_text(["f_globals", "f_back", "gi_frame"]), refused=True),
    Case("generator-frame-by-string", "g = (i for i in [1])\ngetattr(g, 'gi_' + 'frame')",
         last="AttributeError: SandboxError: attribute 'gi_frame' may not be used by policy code"),
    Case("traceback-frame", "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_globals",
         exc=refusal_text(["f_globals", "tb_frame"]), refused=True),
    Case("getframe-via-warnings", "import warnings\nwarnings.sys._getframe(0)", exc=refusal_text(["_getframe"]),
         refused=True),
    Case("sys-via-module-attribute", "import warnings\ngetattr(warnings, 'sy' + 's')",
         last="AttributeError: module 'warnings' member 'sys' is the module 'sys', which policy code may not use"),
    Case("os-via-private-module-attribute", "import random\nrandom._os.fork()",
         last="AttributeError: module 'random' has no public attribute '_os' (private module members are hidden "
              "from policy code)"),
    Case("format-string-globals", "'{0.__globals__}'.format(robo.move_to)", exc=refusal_text(["__globals__"]),
         refused=True),
    Case("getattribute-bypass", "object.__getattribute__(robo, 'x')", exc=refusal_text(["__getattribute__"]),
         refused=True),
    Case("builtins-dict", "__builtins__['open']", exc=refusal_text(["__builtins__"]), refused=True),
    Case("robo-private-backend", "robo._backend", last="AttributeError: 'Robo' object has no attribute '_backend'"),
    Case("robo-private-by-string", "getattr(robo, '_' + 'backend')",
         last="AttributeError: 'Robo' object has no attribute '_backend'"),
    Case("robo-class-dict", "sorted(k for k in type(robo).__dict__ if k.startswith('_') and not k.startswith('__'))",
         value="[]"),
    Case("robo-vars", "vars(robo)", last="TypeError: vars() argument must have __dict__ attribute"),
    Case("monkeypatch-robo", "robo.move_to = lambda *a: 'fake'",
         last="AttributeError: robo is read-only: 'move_to' cannot be assigned",
         after=("robo.move_to((1, 2, 3))", "(1, 2, 3)")),
    Case("monkeypatch-robo-class", "type(robo).move_to = None",
         last="AttributeError: robo is read-only: 'move_to' cannot be assigned",
         after=("robo.move_to((1, 2, 3))", "(1, 2, 3)")),
    Case("del-robo", "del robo", after=("robo.OPEN", "-1.0")),
    Case("infinite-loop", "kept = 7\nwhile True:\n    pass", timeout_s=1.0, after=("kept", "7"),
         check=lambda out: (out.exception.startswith(
             "TimeoutError: the cell ran past its 1 s limit and was interrupted; the namespace was kept\n"),
             out.exception.endswith("KeyboardInterrupt\n"))),
    Case("swallowed-interrupt", "lost = 1\nwhile True:\n    try:\n        while True:\n            pass\n"
         "    except BaseException:\n        pass", timeout_s=1.0, restarted=True,
         after=("'lost' in globals()", "False"),
         check=lambda out: out.exception.startswith(
             "TimeoutError: the code ran past its 1 s limit and did not stop when interrupted; the kernel process "
             "was killed (ended by SIGKILL (killed))")),
    Case("memory-bomb-bytearray", "x = bytearray(64 * 2**30)", last="MemoryError"),
    Case("memory-bomb-numpy", "x = np.ones(2**33)", last=(
        "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 64.0 GiB for an array with shape "
        "(8589934592,) and data type float64")),
    Case("memory-bomb-growing", "chunks = [bytearray(2**27) for _ in range(100)]", last="MemoryError"),
    Case("recursion-bomb", "def f():\n    return f()\nf()",
         last="RecursionError: maximum recursion depth exceeded"),
    Case("exit", "exit()", last="NameError: name 'exit' is not defined"),
    Case("quit", "quit()", last="NameError: name 'quit' is not defined"),
    Case("raise-system-exit", "raise SystemExit", exc="SystemExit: "),
    Case("eval", "eval('1 + 1')", last="NameError: name 'eval' is not defined"),
    Case("exec", "exec('x = 1')", last="NameError: name 'exec' is not defined"),
    Case("compile", "compile('1', 'f', 'eval')", last="NameError: name 'compile' is not defined"),
    Case("breakpoint", "breakpoint()", last="NameError: name 'breakpoint' is not defined"),
    Case("read-etc-passwd", "open('/etc/passwd').read()", last=(
        "PermissionError: policy code may only open files inside its workspace ({ws}); got '/etc/passwd'")),
    Case("open-fd-0", "open(0)", last=(
        "PermissionError: policy code may only open files by path inside its workspace ({ws}); got int 0 "
        "(file descriptors are not allowed)")),
    Case("write-tmp", f"open('{OUTSIDE}', 'w').write('x')", last=(
        f"PermissionError: policy code may only open files inside its workspace ({{ws}}); got '{OUTSIDE}'")),
    Case("write-parent", "open('../escaped.txt', 'w').write('x')", last=(
        "PermissionError: policy code may only open files inside its workspace ({ws}); got '../escaped.txt'")),
    Case("symlink-out", ESCAPE + f"os.symlink('{TARGET_DIR}', 'link')\nopen('link/x.txt', 'w').write('x')", last=(
        "PermissionError: policy code may only open files inside its workspace ({ws}); got 'link/x.txt'")),
    Case("io-open", f"import io\nio.open('{OUTSIDE}', 'w')", last=(
        f"PermissionError: policy code may only open files inside its workspace ({{ws}}); got '{OUTSIDE}'")),
    Case("io-fileio", f"import io\nio.FileIO('{OUTSIDE}', 'w')",
         last="AttributeError: module 'io' member 'FileIO' is not available to policy code"),
    Case("numpy-save-out", f"np.save('{OUTSIDE}.npy', np.zeros(1))", last=(
        f"PermissionError: policy code may only open files inside its workspace ({{ws}}); got '{OUTSIDE}.npy'")),
    Case("numpy-tofile-out", f"np.zeros(1).tofile('{OUTSIDE}.bin')", last=(
        f"PermissionError: policy code may only open files inside its workspace ({{ws}}); got '{OUTSIDE}.bin'")),
    Case("pil-save-out", f"from PIL import Image\nImage.new('RGB', (1, 1)).save('{OUTSIDE}.png')",
         needs_landlock=True, last=f"PermissionError: [Errno 13] Permission denied: '{OUTSIDE}.png'"),
    Case("file-size-limit", "with open('big.bin', 'wb') as f:\n    f.write(b'0' * (3 * 2**20))",
         last="OSError: [Errno 27] File too large"),
    Case("huge-output", "print('x' * 10_000_000)", check=_huge_output),
    # source the host's own checks must parse: too deep for its stack is refused with one line, never raised
    *[Case(f"uncheckable-{what}", code, exc=UNCHECKABLE, refused=True) for what, code in (
        ("sum-3000-terms", "x = " + "+".join(["1"] * 3000)), ("unary-3000", "x = " + "-" * 3000 + "1"),
        ("not-3000", "x = " + "not " * 3000 + "1"))],
    Case("format-spec-3000-deep", "s = '" + "{:" * 3000 + "}" * 3000 + "'", value=None),
    # a cell that does not compile is refused before it runs, with the reference's SyntaxError text
    Case("brackets-3000-deep", "x = " + "[" * 3000 + "]" * 3000, refused=True,
         check=lambda out: out.exception.startswith("SyntaxError: too many nested parentheses")),
    Case("null-byte", "x = 1\x00", refused=True, check=lambda out: out.exception.startswith(
        "SyntaxError: source code string cannot contain null bytes")),
    Case("huge-shallow-cell", "total = 0\n" + "total += 1\n" * 20_000 + "total", value="20000"),
    Case("rclpy-absent", "import rclpy", last=imp("rclpy")),
]


@pytest.fixture(scope="module")
def guarded_kernel(tmp_path_factory):
    """The kernel as episodes run it (every layer on), with tighter memory and file limits; one per module."""
    workspace = tmp_path_factory.mktemp("hostile_ws")
    TARGET_DIR.mkdir(exist_ok=True)
    limits = KernelLimits(memory_bytes=1536 * 2**20, file_size_bytes=2**20, interrupt_grace_s=1.0)
    with Kernel(Robo(), workspace, limits=limits) as k:
        yield k
    TARGET_DIR.rmdir()


def _children(pid: int) -> list[str]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += (task / "children").read_text().split()
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_cell_is_contained(guarded_kernel, case):
    landlock = guarded_kernel.isolation.get("landlock", "")
    if case.needs_landlock and not landlock.startswith("abi "):
        pytest.skip(f"Landlock is not available here ({landlock}); only the Python-level guards apply")
    ws = str(guarded_kernel.workspace)
    out = guarded_kernel.run_cell(case.code, case.timeout_s)
    if case.exc is not None:
        assert out.exception == case.exc.format(ws=ws)
    if case.last is not None:
        assert out.exception and out.exception.strip().splitlines()[-1] == case.last.format(ws=ws)
    if case.value is not None:
        assert out.value == case.value
    if case.last is None and case.exc is None and case.check is None:
        assert out.exception is None
    assert out.refused == case.refused
    assert out.restarted == case.restarted
    assert out.notice == (RESTART_NOTICE if case.restarted else None)
    if case.check is not None:
        result = case.check(out)
        assert result is None or all(result if isinstance(result, tuple) else (result,))
    # nothing escaped: no file outside the workspace, no process started by the kernel
    outside = [OUTSIDE, *(Path(f"{OUTSIDE}{ext}") for ext in (".npy", ".bin", ".png"))]
    for path in [*outside, guarded_kernel.workspace.parent / "escaped.txt"]:
        assert not path.exists(), f"{path} was created"
    assert not any(TARGET_DIR.iterdir())
    assert _children(guarded_kernel.pid) == []
    # the episode goes on
    follow = guarded_kernel.run_cell(case.after[0], 10.0)
    assert (follow.exception, follow.value) == (None, case.after[1])


def test_corpus_is_large_enough():
    assert len(CASES) >= 30 and len({c.id for c in CASES}) == len(CASES)


def test_fork_is_refused_by_the_os_too(guarded_kernel):
    """Even with os reached, RLIMIT_NPROC=0 (capabilities dropped) means no new process; checked from the
    outside: the kernel's own limits as the Linux kernel reports them."""
    limits = Path(f"/proc/{guarded_kernel.pid}/limits").read_text()
    line = next(x for x in limits.splitlines() if x.startswith("Max processes"))
    assert line.split()[2:4] == ["0", "0"]
    status = Path(f"/proc/{guarded_kernel.pid}/status").read_text()
    assert "CapEff:\t0000000000000000" in status
    assert os.getpid() != guarded_kernel.pid


# ================================================================================================================
# The OS boundary on its own. The cells below first reach the real ``os``/``socket`` past the Python-level policy
# (ESCAPE), in a kernel whose defence-in-depth layers are switched off (no Landlock, fork allowed): every effect
# they try must still be stopped by bubblewrap alone, and each test checks that effect from outside the sandbox.

FAKE_KEY = f"sk-pyrua-fake-{TAG}-never-anywhere"
SECRET_TEXT = f"secret-{TAG}"
CANARY = Path(f"/tmp/pyrua_canary_{TAG}")


@pytest.fixture(scope="module")
def bare_kernel(tmp_path_factory):
    """A bubblewrap kernel with Landlock off and fork allowed; the host process holds a fake API key."""
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = FAKE_KEY
    limits = KernelLimits(landlock=False, processes=None, workspace_bytes=8 * 2**20, workspace_inodes=400,
                          interrupt_grace_s=1.0)
    try:
        with Kernel(Robo(), tmp_path_factory.mktemp("bare_ws"), limits=limits) as k:
            yield k
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old


def escape(kernel, body: str, timeout_s: float = 20.0):
    out = kernel.run_cell(ESCAPE + body, timeout_s)
    assert not out.refused, out.exception
    return out


def test_escape_reaches_the_real_os_inside_an_unprivileged_sandbox(bare_kernel):
    """The premise of this section: policy code does get real ``os``; it runs as an unprivileged user with no
    capabilities, in its own PID namespace, and the kernel's view has no network interface but its own lo."""
    out = escape(bare_kernel, "print(os.getuid(), os.geteuid(), os.getpid() < 10, sorted(line.split(':')[0].strip() "
                              "for line in real_open('/proc/self/net/dev').read().splitlines()[2:]))\n"
                              "print(real_open('/proc/self/status').read().split('CapEff:')[1].split()[0])")
    expected_uid = bare_kernel.uid
    assert expected_uid in (sandbox.EPISODE_UIDS if os.geteuid() == 0 else (os.geteuid(),))
    assert out.exception is None
    assert out.stdout == f"{expected_uid} {expected_uid} True ['lo']\n0000000000000000\n"
    status = Path(f"/proc/{bare_kernel.pid}/status").read_text()
    assert f"Uid:\t{expected_uid}\t{expected_uid}" in status and "CapEff:\t0000000000000000" in status


def test_canary_outside_the_workspace_is_never_written(bare_kernel):
    kernel_source = sandbox.PACKAGE_ROOT / "pyrua_ros/kernel/worker.py"
    before = hashlib.sha256(kernel_source.read_bytes()).hexdigest()
    run_dir_file = bare_kernel.workspace.parent / f"result_{TAG}.json"
    code = "errors = []\n"
    for path in (CANARY, f"{sandbox.INSIDE_SRC}/pyrua_ros/kernel/worker.py", kernel_source, run_dir_file,
                 f"{sandbox.INSIDE_SITE}/numpy/__init__.py", "/usr/lib/pyrua_canary"):
        code += (f"try:\n    fd = os.open('{path}', os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
                 f"    os.write(fd, b'pwned')\n    errors.append('written')\nexcept OSError as e:\n"
                 f"    errors.append(e.errno)\n")
    out = escape(bare_kernel, code + "print(errors)")
    # the private /tmp of the sandbox takes the canary (errno-free); nothing else is writable at all
    assert out.exception is None and out.stdout.startswith("['written', ")
    assert "written" not in out.stdout[len("['written', "):]
    assert not CANARY.exists() and not run_dir_file.exists()
    assert hashlib.sha256(kernel_source.read_bytes()).hexdigest() == before
    bare_kernel.restart()   # a fresh kernel starts from the untouched sources
    assert bare_kernel.run_cell("1 + 1", 10).value == "2"


def test_secret_files_of_this_machine_are_not_even_visible(bare_kernel, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET_TEXT)
    secret.chmod(0o644)
    import importlib.util

    venv_pkg = Path(rclpy_dir := importlib.util.find_spec("rclpy").submodule_search_locations[0])
    paths = [secret, "/etc/shadow", "/etc/passwd", Path.home() / ".bash_history", venv_pkg,
             sandbox.PACKAGE_ROOT / "pyrua_ros/agent/run/episode.py", sandbox.PACKAGE_ROOT / ".git"]
    code = "seen = {}\n"
    for path in map(str, paths):
        code += (f"try:\n    seen[{path!r}] = os.listdir({path!r}) if os.path.isdir({path!r}) "
                 f"else real_open({path!r}, 'rb').read(64)\nexcept OSError as e:\n    seen[{path!r}] = e.errno\n")
    run_dir = bare_kernel.workspace.parent   # only the workspace's own name is there, no other file of the run
    out = escape(bare_kernel, code + f"print(seen)\nprint(os.listdir({str(run_dir)!r}))")
    assert out.exception is None, out.exception
    seen_text, run_dir_listing = out.stdout.splitlines()
    seen = eval(seen_text)   # a dict of str -> int printed by the cell
    assert set(seen) == {str(p) for p in paths} and rclpy_dir
    assert all(value == 2 for value in seen.values()), seen   # ENOENT: not in the sandbox's view
    assert run_dir_listing == repr([bare_kernel.workspace.name])
    assert SECRET_TEXT not in out.stdout


def test_the_api_key_and_host_environment_never_reach_the_kernel(bare_kernel):
    code = ("found = [dict(os.environ)]\n"
            "for pid in os.listdir('/proc'):\n"
            "    if pid.isdigit():\n"
            "        for name in ('environ', 'cmdline'):\n"
            "            try:\n"
            "                found.append(real_open(f'/proc/{pid}/{name}', 'rb').read())\n"
            "            except OSError as e:\n"
            "                found.append(e.errno)\n"
            "print(sorted(p for p in os.listdir('/proc') if p.isdigit()), found)")
    out = escape(bare_kernel, code)
    assert out.exception is None
    assert FAKE_KEY not in out.stdout + out.stderr
    assert out.stdout.startswith("['1', '2'] ")   # bubblewrap's init and the kernel: no host process visible
    environ = Path(f"/proc/{bare_kernel.pid}/environ").read_bytes().decode()
    assert FAKE_KEY not in environ and "ROS_DOMAIN_ID" not in environ and "OPENAI" not in environ


def _udp_sink(port: int = 0) -> socket.socket:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", port))
    sink.setblocking(False)
    return sink


def _drain(sock: socket.socket, wait_s: float) -> list[bytes]:
    got = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if select.select([sock], [], [], 0.05)[0]:
            with contextlib.suppress(BlockingIOError):
                got.append(sock.recv(65536))
    return got


def test_raw_rtps_packets_never_reach_the_episodes_dds_ports(bare_kernel):
    """A real UDP packet with an RTPS header aimed at the DDS ports of a ROS domain (discovery multicast port,
    the first participants' metatraffic and user unicast ports): sinks bound on those exact ports of this
    machine stand in for the episode's participant and must receive nothing; the attacker's own view of the
    machine's sockets (/proc/self/net/udp, how the domain was found before) is empty."""
    domain = claim_domain_id()
    base = 7400 + 250 * domain
    ports = [base, base + 10, base + 11, base + 12, base + 13]
    sinks = [_udp_sink(port) for port in ports]
    try:
        rtps = b"RTPS\x02\x03\x01\x0f" + bytes(12) + b"\x15\x05\x00\x10" + b"\x00" * 16 + b'{"success": true}'
        code = (f"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nsent = []\n"
                f"for port in {ports!r}:\n"
                f"    for host in ('127.0.0.1', '239.255.0.1', '172.17.0.1'):\n"
                f"        try:\n            sent.append(s.sendto({rtps!r}, (host, port)))\n"
                f"        except OSError as e:\n            sent.append(e.errno)\n"
                f"print(sent.count(len({rtps!r})), len(real_open('/proc/self/net/udp').read().splitlines()) - 1)")
        out = escape(bare_kernel, code)
        assert out.exception is None, out.exception
        sent_locally, sockets_seen = out.stdout.split()
        assert int(sent_locally) == len(ports)   # the sandbox's own lo took the unicast packets ...
        assert sockets_seen == "1"               # it sees its own socket only, none of this machine's
        assert all(_drain(sink, 0.5) == [] for sink in sinks)   # ... and none reached this machine's ports
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:   # the sinks do work
            for port in ports:
                control.sendto(b"control", ("127.0.0.1", port))
        assert all(_drain(sink, 0.5) == [b"control"] for sink in sinks)
    finally:
        for sink in sinks:
            sink.close()


def test_unix_sockets_of_this_machine_are_unreachable(bare_kernel):
    path = f"/tmp/pyrua_sink_{TAG}.sock"
    abstract = f"\0pyrua_sink_{TAG}"
    sinks = []
    for address in (path, abstract):
        sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sink.bind(address)
        sink.setblocking(False)
        sinks.append(sink)
    try:
        code = (f"results = []\nfor address in ({path!r}, {abstract!r}):\n"
                f"    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):\n"
                f"        s = socket.socket(socket.AF_UNIX, kind)\n"
                f"        try:\n"
                f"            results.append(s.sendto(b'hello', address) if kind == socket.SOCK_DGRAM "
                f"else s.connect(address))\n"
                f"        except OSError as e:\n            results.append(e.errno)\nprint(results)")
        out = escape(bare_kernel, code)
        assert out.exception is None
        assert out.stdout == "[2, 2, 111, 111]\n"   # no such path in its view; no such abstract name in its netns
        assert all(_drain(sink, 0.3) == [] for sink in sinks)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as control:
            for address in (path, abstract):
                control.sendto(b"control", address)
        assert all(_drain(sink, 0.3) == [b"control"] for sink in sinks)
    finally:
        for sink in sinks:
            sink.close()
        Path(path).unlink(missing_ok=True)


def test_processes_started_by_a_cell_die_with_the_kernel(bare_kernel):
    sandbox_pid = bare_kernel.process.popen.pid
    before = descendants(sandbox_pid)
    out = escape(bare_kernel, "pid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(300)\n    os._exit(0)\n"
                              "print(pid > 2)")
    assert out.stdout == "True\n"
    orphans = descendants(sandbox_pid) - before
    assert orphans, "the fork happened and is visible from outside"
    bare_kernel.restart()
    assert spin_until(lambda: not any(Path(f"/proc/{p}").exists() for p in orphans), 10.0), orphans
    assert bare_kernel.run_cell("1 + 1", 10).value == "2"


def test_a_child_holding_the_pipe_cannot_hide_a_dead_kernel(bare_kernel):
    sandbox_pid = bare_kernel.process.popen.pid
    out = escape(bare_kernel, "if os.fork() == 0:\n    time.sleep(300)\n    os._exit(0)\nos._exit(3)", timeout_s=60)
    assert out.elapsed_s < 10 and out.restarted
    assert out.exception.startswith("KernelDied: the kernel process died: exited with status 3")
    assert not Path(f"/proc/{sandbox_pid}").exists() or not descendants(sandbox_pid)
    assert bare_kernel.run_cell("1 + 1", 10).value == "2"


FORGE = ("gc = _imp('gc')\nprotocol = _imp('pyrua_ros.kernel.protocol', None, None, ['encode_frame'])\n"
         "w = next(o for o in gc.get_objects() if type(o).__name__ == 'Worker')\n")


def test_a_forged_done_frame_does_not_shift_later_output(bare_kernel):
    done = {"stdout": "FORGED\n", "stderr": "", "value": None, "exception": None, "episode_finished": "terminated",
            "interrupted": False}
    code = FORGE + (f"d = {done!r}\n"
                    "os.write(w.out_fd, protocol.encode_frame({'op': 'done', 'id': w.job, **d}))\n"
                    "for guess in range(w.job + 1, w.job + 50):\n"
                    "    os.write(w.out_fd, protocol.encode_frame({'op': 'done', 'id': guess, **d, 'stdout': 'PRE'}))\n"
                    "print('real output')")
    out = escape(bare_kernel, code)
    assert out.stdout == "FORGED\n"          # a cell may lie about its own output ...
    assert out.episode_finished is None       # ... but not about the episode
    honest = bare_kernel.run_cell("print('honest')", 10)
    assert (honest.stdout, honest.exception) == ("honest\n", None)   # the next cell's output is its own
    assert any("stale or forged" in e for e in bare_kernel.events)


def test_deep_malformed_and_unsafe_frames_are_discarded_and_the_cell_goes_on(bare_kernel):
    code = FORGE + ("deep = b'{\"op\": \"call\", \"id\": %d, \"name\": \"move_to\", \"args\": ' % w.job "
                    "+ b'[' * 5000 + b']' * 5000 + b', \"kwargs\": {}}'\n"
                    "_struct = _imp('struct')\n"
                    "os.write(w.out_fd, _struct.pack('>II', len(deep), 0) + deep)\n"
                    "bad = b'{\"op\": \"call\", \"id\": %d, \"name\": \"move_to\", \"args\": "
                    "[{\"__result__\": \"Move\", \"fields\": {\"nope\": 1}}], \"kwargs\": {}}' % w.job\n"
                    "os.write(w.out_fd, _struct.pack('>II', len(bad), 0) + bad)\n"
                    "os.write(w.out_fd, protocol.encode_frame({'op': 'display', 'id': w.job, 'png': b'junk'}))\n"
                    "print(chr(0xD800), 'alive')")
    events = len(bare_kernel.events)
    out = escape(bare_kernel, code)
    assert (out.stdout, out.exception, out.restarted) == ("\\ud800 alive\n", None, False)
    assert out.stderr == "\n[display() image refused: not a PNG or JPEG image]" and out.images == []
    json.dumps(out.stdout).encode("utf-8")   # safe for any record
    assert len(bare_kernel.events) >= events + 2


def test_a_frame_that_breaks_the_protocol_restarts_the_kernel(bare_kernel):
    out = escape(bare_kernel, FORGE + "_struct = _imp('struct')\nos.write(w.out_fd, _struct.pack('>II', 2**31, 0))\n"
                                      "time.sleep(5)")
    assert out.restarted and out.exception.startswith("KernelDied: the kernel process broke the protocol")
    assert bare_kernel.run_cell("1 + 1", 10).value == "2"


# ---------------------------------------------------------------------------------------------------------------
# Round 4: the Linux kernel's own attack surface. A cell with the real os and ctypes tries the first steps of the
# usual exploits; the seccomp allow-list (sandbox.py, seccomp.py) refuses each, whatever the namespaces allow.

def _syscall_probe(calls: dict[str, tuple]) -> str:
    """Cell code (after ESCAPE) that makes each raw system call and prints name -> 'ok' or its errno."""
    numbers = seccomp.numbers()
    code = ("ctypes = _imp('ctypes')\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
            "got = {}\n")
    for name, (call, *args) in calls.items():
        code += (f"r = libc.syscall({numbers[call]}, {', '.join(map(str, args))})\n"
                 f"got[{name!r}] = 'ok' if r >= 0 else ctypes.get_errno()\n")
    return code


EXPLOIT_STEPS = {   # name: (system call, its arguments as cell expressions)
    "unshare_user_net": ("unshare", 0x10000000 | 0x40000000),          # CLONE_NEWUSER | CLONE_NEWNET
    "io_uring_setup": ("io_uring_setup", 1, "ctypes.create_string_buffer(120)"),
    "userfaultfd": ("userfaultfd", 1 | 0o2000000),                     # UFFD_USER_MODE_ONLY | O_CLOEXEC
    "memfd_create": ("memfd_create", "b'pages'", 0),
    "shmget": ("shmget", 0, 1536 * 2**20, 0o1600),                      # IPC_PRIVATE, 1.5 GiB, IPC_CREAT
    "msgget": ("msgget", 0, 0o1600),
    "ptrace_traceme": ("ptrace", 0, 0, 0, 0),
    "process_vm_readv": ("process_vm_readv", "os.getpid()", 0, 0, 0, 0, 0),
    "keyctl_user_keyring": ("keyctl", 0, -4, 0),                       # KEYCTL_GET_KEYRING_ID, user keyring
    "dumpable_again": ("prctl", 4, 1, 0, 0, 0),                        # PR_SET_DUMPABLE 1
    "bpf": ("bpf", 0, 0, 0),
}


def test_the_first_steps_of_kernel_exploits_are_refused(bare_kernel):
    """Once: unshare(CLONE_NEWUSER|CLONE_NEWNET) gave a cell every capability in a namespace of its own, where
    AF_PACKET and NETLINK_NETFILTER sockets opened; io_uring, userfaultfd, memfd (6 GiB held against a 4 GiB
    RLIMIT_AS), SysV shared memory and AF_VSOCK (bound) were open, and exec ran any program of the view."""
    code = _syscall_probe(EXPLOIT_STEPS) + (
        "for name, family, kind, proto in (('packet', 17, socket.SOCK_RAW, 768), ('netlink_netfilter', 16, "
        "socket.SOCK_RAW, 12), ('vsock', 40, socket.SOCK_STREAM, 0)):\n"
        "    try:\n"
        "        s = socket.socket(family, kind, proto)\n"
        "        got[name] = 'ok'\n"
        "        if family == 40:\n"
        "            s.bind((0xFFFFFFFF, 40000))\n"
        "            got[name] = 'bound'\n"
        "    except OSError as e:\n"
        "        got.setdefault(name, e.errno)\n"
        "sys = _imp('sys')\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    try:\n"
        "        os.execv(sys.executable, [sys.executable, '-c', 'pass'])\n"
        "    except OSError as e:\n"
        "        os._exit(e.errno)\n"
        "got['exec'] = os.waitpid(child, 0)[1] >> 8\n"
        "print(got)")
    try:
        out = escape(bare_kernel, code)
        assert out.exception is None, out.exception
        got = eval(out.stdout)   # a dict of str -> str | int printed by the cell
        refused = {name: errno.EPERM for name in EXPLOIT_STEPS}
        refused.update(packet=errno.EAFNOSUPPORT, netlink_netfilter=errno.EAFNOSUPPORT, vsock=errno.EAFNOSUPPORT,
                       exec=errno.EPERM)
        assert got == refused
    finally:
        bare_kernel.restart()   # (where a step was not refused, this kernel is no longer what the tests expect)


def test_the_kernel_is_filtered_undumpable_and_its_own_user(guarded_kernel):
    """Seen from outside: two seccomp filters (bubblewrap's, then the worker's without execve), no_new_privs, and
    as root a uid of this episode's own; another process of that very uid can neither read nor trace it."""
    status = Path(f"/proc/{guarded_kernel.pid}/status").read_text()
    assert "Seccomp:\t2" in status and "Seccomp_filters:\t2" in status and "NoNewPrivs:\t1" in status
    isolation = guarded_kernel.isolation
    assert isolation["dumpable"] == 0 and isolation["seccomp"] == "allow-list without execve"
    if os.geteuid() != 0:
        pytest.skip("the kernel runs as this user in a user namespace; the uid checks are root's")
    uid = guarded_kernel.uid
    assert uid in sandbox.EPISODE_UIDS and f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}" in status
    import subprocess
    import sys

    as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    read = subprocess.run([*as_uid, "cat", f"/proc/{guarded_kernel.pid}/environ"], capture_output=True, text=True)
    assert read.returncode != 0 and "Permission denied" in read.stderr
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    attach = ("import ctypes, os, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              "r = libc.ptrace(16, int(sys.argv[1]), 0, 0)\n"   # PTRACE_ATTACH
              "print('attached' if r == 0 else os.strerror(ctypes.get_errno()))\n"
              "r == 0 and libc.ptrace(17, int(sys.argv[1]), 0, 0)")
    traced = subprocess.run([*as_uid, python, "-I", "-c", attach, str(guarded_kernel.pid)], capture_output=True,
                            text=True)
    assert traced.stdout.strip() == "Operation not permitted", traced.stderr[-500:]
    assert guarded_kernel.run_cell("1 + 1", 10).value == "2"


def test_a_key_added_in_one_episode_is_not_read_in_the_next(guarded_kernel, tmp_path):
    """Every kernel once ran as uid 65534 of this machine: a key one episode added to the user keyring was read
    by a later, separate episode. Now each episode has its own uid and no kernel reaches a keyring at all."""
    name, numbers = f"pyrua-probe-{TAG}", seccomp.numbers()
    # add_key("user", name, payload, 11 bytes, -4: the user keyring), then request_key in another episode
    add = ESCAPE + ("ctypes = _imp('ctypes')\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    f"r = libc.syscall({numbers['add_key']}, b'user', {name.encode()!r}, b'left behind', 11, -4)\n"
                    "print(r if r >= 0 else -ctypes.get_errno())")
    out = guarded_kernel.run_cell(add, 10)
    assert out.stdout == f"{-errno.EPERM}\n", (out.stdout, out.exception)
    find = ESCAPE + ("ctypes = _imp('ctypes')\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                     f"r = libc.syscall({numbers['request_key']}, b'user', {name.encode()!r}, None, 0)\n"
                     "print(r if r >= 0 else -ctypes.get_errno())")
    with Kernel(Robo(), tmp_path / "ws", limits=KernelLimits(interrupt_grace_s=1.0)) as other:
        assert other.uid != guarded_kernel.uid or os.geteuid() != 0
        later = other.run_cell(find, 10)
    assert later.stdout == f"{-errno.EPERM}\n", (later.stdout, later.exception)


def test_the_sandbox_tmpfs_hold_a_bounded_number_of_files(bare_kernel):
    """1,000,000 empty files in the 256 MiB workspace once grew the machine's kernel memory by 1.26 GiB: both
    tmpfs mounts now have nr_inodes (root sets it from outside; KernelLimits.workspace_inodes, 400 here)."""
    if os.geteuid() != 0:
        pytest.skip("nr_inodes is set from outside the sandbox, which needs root")
    root = f"/proc/{bare_kernel.pid}/root"
    assert os.statvfs(f"{root}{bare_kernel.workspace}").f_files == 400
    assert os.statvfs(f"{root}/tmp").f_files == sandbox.TMP_INODES
    code = ("made = {}\n"
            "for folder in ('flood', '/tmp/flood'):\n"
            "    os.mkdir(folder)\n"
            "    n = 0\n"
            "    try:\n"
            "        while n < 5000:\n"
            "            real_open(f'{folder}/{n:0200d}', 'w').close()\n"
            "            n += 1\n"
            "    except OSError as e:\n"
            "        made[folder] = (n, e.errno)\n"
            "    for i in range(n):\n"
            "        os.unlink(f'{folder}/{i:0200d}')\n"
            "    os.rmdir(folder)\n"
            "print(made)")
    out = escape(bare_kernel, code)
    assert out.exception is None, out.exception
    made = eval(out.stdout)
    assert (made["flood"][1], made["/tmp/flood"][1]) == (errno.ENOSPC, errno.ENOSPC), made
    assert made["flood"][0] < 400 and made["/tmp/flood"][0] < sandbox.TMP_INODES
    assert bare_kernel.run_cell("1 + 1", 10).value == "2"


MEMORY_ROUTES = (   # cell code (after ESCAPE): each way to hold memory RLIMIT_AS does not count, tried past its bound
    "mmap, resource = _imp('mmap'), _imp('resource')\n"
    "fcntl, ctypes = _imp('fcntl'), _imp('ctypes')\n"
    "limit = resource.getrlimit(resource.RLIMIT_AS)[0]\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "got = {}\n"
    "try:\n"
    "    fd = os.memfd_create('pages')\n"
    "    os.ftruncate(fd, limit)\n"
    "    got['memfd'] = 'ok'\n"
    "except OSError as e:\n"
    "    got['memfd'] = e.errno\n"
    "r = libc.shmget(0, ctypes.c_size_t(limit + 2**30), 0o1600)\n"   # SysV: IPC_PRIVATE, IPC_CREAT
    "got['sysv_shm'] = 'ok' if r >= 0 else ctypes.get_errno()\n"
    "try:\n"   # POSIX shared memory is a file in /dev/shm
    "    os.open('/dev/shm/pyrua', os.O_CREAT | os.O_RDWR, 0o600)\n"
    "    got['dev_shm'] = 'ok'\n"
    "except OSError as e:\n"
    "    got['dev_shm'] = e.errno\n"
    "try:\n"
    "    m = mmap.mmap(-1, limit + 2**20, flags=mmap.MAP_SHARED)\n"   # shmem pages of an anonymous mapping
    "    got['shared_mapping'] = 'ok'\n"
    "except OSError as e:\n"
    "    got['shared_mapping'] = e.errno\n"
    "for folder in ('/tmp', '.'):\n"   # the two tmpfs mounts, written until they refuse
    "    n = 0\n"
    "    try:\n"
    "        with real_open(f'{folder}/fill', 'wb') as f:\n"
    "            while n < 1024:\n"
    "                f.write(bytes(2**20))\n"
    "                f.flush()\n"
    "                n += 1\n"
    "    except OSError as e:\n"
    "        got[folder] = (n, e.errno)\n"
    "    os.unlink(f'{folder}/fill')\n"
    "held, pipes = 0, []\n"   # pipe buffers: counted against the episode uid's own pipe pages
    "try:\n"
    "    while len(pipes) < 120:\n"
    "        r, w = os.pipe()\n"
    "        pipes.append((r, w))\n"
    "        try:\n"
    "            fcntl.fcntl(w, 1031, 2**20)\n"   # F_SETPIPE_SZ
    "        except OSError:\n"
    "            pass\n"
    "        os.set_blocking(w, False)\n"
    "        try:\n"
    "            while True:\n"
    "                held += os.write(w, bytes(65536))\n"
    "        except BlockingIOError:\n"
    "            pass\n"
    "except OSError as e:\n"
    "    got['pipes_stopped'] = e.errno\n"
    "got['pipe_bytes'] = held\n"
    "for r, w in pipes:\n"
    "    os.close(r)\n"
    "    os.close(w)\n"
    "print(got)")


def test_memory_past_rlimit_as_is_refused_or_bounded_and_result_json_says_so(bare_kernel):
    """RLIMIT_AS counts the kernel's address space only; without a delegated cgroup these routes held memory past
    it (memfd: 6 GiB against a 4 GiB limit; SysV shared memory outlived the cell). Each is tried past its bound:
    memfd, SysV and POSIX shared memory are refused, a shared mapping counts against RLIMIT_AS, the two tmpfs
    mounts stop at their sizes, pipe buffers at the per-user pipe pages of the episode's own uid; and the
    kernel's sandbox line (result.json's notes) states the bounds."""
    out = escape(bare_kernel, MEMORY_ROUTES, timeout_s=60.0)
    assert out.exception is None, out.exception
    got = eval(out.stdout)   # a dict printed by the cell
    assert (got["memfd"], got["sysv_shm"], got["shared_mapping"]) == (errno.EPERM, errno.EPERM, errno.ENOMEM), got
    assert got["dev_shm"] in (errno.ENOENT, errno.EROFS), got
    assert got["/tmp"] == (sandbox.TMP_BYTES // 2**20, errno.ENOSPC), got   # 16 MiB
    assert got["."][1] == errno.ENOSPC and got["."][0] <= 8, got            # the 8 MiB workspace of this kernel
    pipe_pages = int(Path("/proc/sys/fs/pipe-user-pages-soft").read_text())
    assert got["pipe_bytes"] <= pipe_pages * 4096 + 120 * 2 * 4096, got     # one uid's pipe pages, then 2 pages
    assert (f"RLIMIT_AS {bare_kernel.limits.memory_bytes // 2**20} MiB" in bare_kernel.description
            and "memory outside RLIMIT_AS: memfd and SysV shared memory refused, files in the 8 MiB workspace and "
                "16 MiB /tmp tmpfs" in bare_kernel.description), bare_kernel.description
    assert bare_kernel.run_cell("1 + 1", 10).value == "2"


def test_the_workspace_has_a_size_limit(bare_kernel):
    out = bare_kernel.run_cell("with open('big.bin', 'wb') as f:\n    f.write(b'0' * (16 * 2**20))", 20)
    assert out.exception.strip().splitlines()[-1] == "OSError: [Errno 28] No space left on device"
    copied = sum(p.stat().st_size for p in bare_kernel.workspace.rglob("*") if p.is_file())
    assert copied <= 8 * 2**20
    bare_kernel.run_cell("import os\n", 5)   # (refused import; the cell below frees the space)
    assert bare_kernel.run_cell("open('big.bin', 'wb').close()", 10).exception is None


# A chain of ``levels`` folders named ``name`` (made through fds: no path grows past PATH_MAX)
DEEP = ("def deep(name, levels):\n    fd = os.open('.', os.O_RDONLY)\n    for _ in range(levels):\n"
        "        os.mkdir(name, dir_fd=fd)\n        sub = os.open(name, os.O_RDONLY, dir_fd=fd)\n"
        "        os.close(fd)\n        fd = sub\n    os.close(fd)\n")


@pytest.mark.parametrize("mode", ["bwrap", "unsafe"])
def test_links_fifos_and_folders_at_the_next_cell_name_cannot_redirect_the_host(mode, tmp_path):
    canary = tmp_path / "canary.txt"
    with Kernel(Robo(), tmp_path / "ws", sandbox=mode, limits=KernelLimits(interrupt_grace_s=1.0)) as kernel:
        for make in (f"os.symlink('{canary}', 'cell_{{n:03d}}.py')", "os.mkfifo('cell_{n:03d}.py')",
                     "os.mkdir('cell_{n:03d}.py')\nopen('cell_{n:03d}.py/x', 'w').close()",
                     # 1500 folders deep: the host's remove of what is in the way must not recurse
                     DEEP + "deep('cell_{n:03d}.py', 1500)\ndeep('.cell_{n:03d}.py.pyrua-tmp', 1500)"):
            n = kernel.cells + 2
            out = escape(kernel, make.format(n=n))
            assert out.exception is None, out.exception
            follow = kernel.run_cell(f"print({n})", 10)
            assert (follow.cell, follow.stdout, follow.exception) == (n, f"{n}\n", None)
            record = kernel.workspace / f"cell_{n:03d}.py"
            assert record.is_file() and not record.is_symlink() and record.read_text() == f"print({n})"
        assert not canary.exists()
    _remove_all(tmp_path / "ws")   # (what the kernel left: pytest's own recursive cleanup would not survive it)


def _remove_all(folder: Path) -> None:
    if not folder.is_dir():
        return
    fd = wsfiles.open_dir(folder)
    try:
        for name in os.listdir(fd):
            wsfiles.remove_entry(fd, name)
    finally:
        os.close(fd)


def test_deep_folders_long_names_and_a_million_files_cannot_stop_the_workspace_copy(tmp_path):
    """Issue 28: a 250-byte file name made the copy's temporary name too long and stopped every later copy;
    issue 27: a folder 1500 deep at the next cell's temporary name raised RecursionError in the host; a flood of
    files made every later cell's copy walk all of them. Each file or folder beyond a bound is skipped and said."""
    limits = KernelLimits(landlock=False, workspace_bytes=64 * 2**20, interrupt_grace_s=1.0)
    with Kernel(Robo(), tmp_path / "ws", limits=limits) as kernel:
        # 10,050 files: the copy looks at 10,000 entries and says it stopped there; the episode goes on
        out = escape(kernel, "os.mkdir('many')\nfor i in range(10_050):\n    real_open(f'many/{i:05d}', 'w').close()")
        assert out.exception is None, out.exception
        assert "over 10000 entries: the rest of the workspace was not looked at" in out.stderr   # said to the model
        assert len(list((kernel.workspace / "many").iterdir())) < 10_000
        out = escape(kernel, "for name in os.listdir('many'):\n    os.unlink('many/' + name)\nos.rmdir('many')")
        assert out.exception is None and out.stderr == "" and not (kernel.workspace / "many").exists()
        # folders 1500 deep (one at the name the host once used for the next record's temporary file), and names
        # of 245-255 bytes
        n = kernel.cells + 2
        out = escape(kernel, DEEP + f"deep('.cell_{n:03d}.py.pyrua-tmp', 1500)\ndeep('nest', 1500)\n"
                                    "for k in range(245, 256):\n    real_open('L' * k, 'w').write(str(k))\n")
        assert out.exception is None, out.exception
        assert "deeper than 32 folders" in out.stderr   # said to the model
        follow = kernel.run_cell(f"print({n})", 10)
        assert (follow.cell, follow.stdout, follow.exception) == (n, f"{n}\n", None)
        assert (kernel.workspace / f"cell_{n:03d}.py").read_text() == f"print({n})"
        for k in range(245, 256):   # every long name was copied, and the copy went on after them
            assert (kernel.workspace / ("L" * k)).read_text() == str(k)
        assert kernel.run_cell("1 + 1", 10).value == "2"


def test_run_program_reads_the_file_it_checked_never_a_link(bare_kernel):
    escape(bare_kernel, "open('good.py', 'w').write(\"def run(robo):\\n    print('honest program')\\n\")\n"
                        "os.symlink('/proc/self/environ', 'env.py')\nos.mkfifo('fifo.py')")
    for path, why in (("env.py", "a link"), ("fifo.py", "not a regular file"), ("../x.py", "inside the workspace")):
        with pytest.raises(ValueError, match=why):
            bare_kernel.run_program(path=path, timeout_s=10)
    # a forked swapper turns prog.py into a link to /proc/self/environ and back, as fast as it can
    swap = ("if os.fork() == 0:\n    end = time.time() + 4\n    while time.time() < end:\n"
            "        os.symlink('/proc/self/environ', 'tmp_link')\n        os.rename('tmp_link', 'prog.py')\n"
            "        os.link('good.py', 'tmp_file')\n        os.rename('tmp_file', 'prog.py')\n    os._exit(0)\n")
    escape(bare_kernel, swap)
    ran, refused = 0, 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            outcome = bare_kernel.run_program(path="prog.py", timeout_s=10)
        except ValueError as exc:
            assert "a link" in str(exc) or "no such file" in str(exc)
            refused += 1
            continue
        ran += 1
        assert FAKE_KEY not in outcome.code + outcome.stdout
        assert outcome.stdout == "honest program\n", outcome
    assert ran + refused > 0


# ================================================================================================================
# A whole episode (``pyrualean play``, fake arm, a scripted model server): an operator latches the e-stop, another
# process on the machine forges the episode status, and a hostile cell tries raw RTPS at the episode's DDS ports
# and hunts for the API key. None of it may count: the e-stop stays latched, the forged success is not believed,
# the key is in no request body and no record, and the records are whole.

def _forge_status(client, stop, matched: list) -> None:
    """Publish a success status on the episode-status topic from a node that is not the driver, until ``stop``;
    ``matched`` gets the forging publisher (its matched subscriptions tell who can hear it)."""
    from std_msgs.msg import String

    from pyrua_ros.wire import qos
    from pyrua_ros.wire.interfaces import load

    pub = client.node.create_publisher(String, load().sim.episode_status, qos.LATCHED)
    matched.append(pub)
    forged = {"episode_id": 1, "suite": "fake_table", "task": 0, "seed": 0, "task_language": "FORGED", "step": 5,
              "sim_time": 0.25, "success": True, "terminated": True, "truncated": False, "max_episode_steps": 10000,
              "object_names": [], "clock_mode": "lockstep", "estop": False, "gripper_opening": 0.08,
              "gripper_target": 0.08, "state_digest": "0" * 16}
    while not stop.is_set():
        pub.publish(String(data=json.dumps(forged)))
        stop.wait(0.1)


def test_a_hostile_episode_cannot_forge_success_release_the_estop_or_leak_the_key(tmp_path):
    import subprocess
    import sys
    import threading

    from std_msgs.msg import Bool, String

    from pyrua_ros.testing import ros_client
    from pyrua_ros.testing.chat_server import ChatServer, Reply
    from pyrua_ros.wire import qos
    from pyrua_ros.wire.interfaces import load

    domain = int(os.environ["ROS_DOMAIN_ID"])
    ports = [7400 + 250 * domain + k for k in (0, 1, 10, 11, 12, 13, 14, 15)]
    rtps = b"RTPS\x02\x03\x01\x0f" + bytes(12) + b"\x15\x05\x00\x10" + bytes(16) + b'{"success": true}'
    hostile = ESCAPE + (
        "leaks = [dict(os.environ)]\n"
        "for pid in range(1, 64):\n"   # (listing /proc is refused by Landlock; guess the pids)
        "    try:\n"
        "        leaks.append(real_open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "estop_off = b'RTPS' + bytes(28) + b'estop false'\n"
        f"for port in {ports!r}:\n"
        f"    for packet in ({rtps!r}, estop_off):\n"
        "        try:\n"
        "            s.sendto(packet, ('127.0.0.1', port))\n"
        "        except OSError:\n"
        "            pass\n"
        "print(leaks, chr(0xD800))\n"
        "x, y, z = robo.state().eef_pos\n"
        "robo.move_to([x + 0.02, y, z])\n")
    latched_and_forging = threading.Event()
    script = [
        # the first turn waits until the operator's e-stop is confirmed and the forger has been publishing a while
        Reply(tool_calls=(("python", {"code": "print(robo.task)"}),), after=latched_and_forging),
        Reply(tool_calls=(("python", {"code": hostile}),)),
        Reply(tool_calls=(("finish", {"status": "success", "summary": "done " + chr(0xD800)}),)),
    ]
    out = tmp_path / "run"
    stop = threading.Event()
    with ChatServer(script) as server, ros_client("pyrua_test_operator") as operator:
        env = dict(os.environ, OPENAI_API_KEY=FAKE_KEY)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", "cells", "--suite",
             "fake_table", "--task", "0", "--driver", "fake", "--runtime", "openai", "--base-url", server.base_url,
             "--api-key-env", "OPENAI_API_KEY", "--images", "none", "--feedback", "rich", "--no-video", "--progress",
             "off", "--no-preflight"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=sandbox.PACKAGE_ROOT)
        forger = None
        try:
            assert spin_until(lambda: len(server.requests) >= 1 or proc.poll() is not None, 240.0)
            estop = operator.node.create_publisher(Bool, load().driver.estop, qos.LOCKSTEP)
            # The operator latches the e-stop and waits for the driver's own status to confirm it (the episode's
            # recorder also subscribes to /estop, so a matched subscriber need not be the driver yet)
            confirmed = threading.Event()

            def on_status(msg):
                if json.loads(msg.data).get("estop") and json.loads(msg.data).get("task_language") != "FORGED":
                    confirmed.set()

            operator.node.create_subscription(String, load().sim.episode_status, on_status, qos.LATCHED_READER)

            def latch() -> bool:
                estop.publish(Bool(data=True))
                return confirmed.wait(0.5)

            with ros_client("forger") as forging_node:
                # the forger starts while the first turn is still waiting for its reply (4 s), so the episode's
                # backend has discovered it before the hostile cell runs
                matched: list = []
                forger = threading.Thread(target=_forge_status, args=(forging_node, stop, matched), daemon=True)
                forger.start()
                assert any(latch() for _ in range(120)), "the driver never confirmed the operator's e-stop"
                # the forger's status reaches the episode's backend before the cells: its publisher has matched
                # the operator's subscription and the episode's (backend; recorder), however slow discovery is
                assert spin_until(lambda: matched and matched[0].get_subscription_count() >= 2, 60.0), \
                    matched and matched[0].get_subscription_count()
                time.sleep(0.5)
                latched_and_forging.set()
                _stdout, stderr = proc.communicate(timeout=240)
                stop.set()
                forger.join(5)
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        bodies = [json.dumps(body) for body in server.completion_bodies()]
    assert proc.returncode == 0, stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    # the forged success was not believed, and it was reported
    assert result["environment_success"] is False and result["finish"]["status"] == "success"
    assert any(n.startswith("safety: ignored") and "/forger" in n for n in result["notes"]), result["notes"]
    # the e-stop stayed latched: the motion was refused, and the driver logged one change, by the operator
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    moves = [c for c in calls if c["tool"] == "move_to"]
    assert moves and not moves[-1]["ok"] and "e-stop" in moves[-1]["error"]
    log = (out / "host.log").read_text()
    assert "e-stop latched by /pyrua_test_operator" in log and "e-stop released" not in log
    # the key reached no request body and no record; the records are whole and agree
    assert len(bodies) == 3 and not any(FAKE_KEY in body for body in bodies)
    for path in out.rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path
    turns = json.loads((out / "tool_turns.json").read_text())
    transcript = json.loads((out / "transcript.json").read_text())
    assert [t["tool"] for t in turns] == ["python", "python", "finish"] == [
        c["name"] for m in transcript if m.get("tool_calls") for c in [m["tool_calls"][0]["function"]]]
    assert result["tool_turns"] == len(turns) and result["calls"] == len(calls)
    assert result["status"] == "completed" and "\\ud800" in result["finish"]["summary"]


def _play_cells_on_the_fake_arm(server, out: Path, *flags: str, timeout_s: float) -> subprocess.CompletedProcess:
    """``pyrualean play`` of a cells episode on the fake arm against the scripted ``server``, quiet (no images, video,
    bag or progress), with ``flags`` added; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", "cells", "--suite",
         "fake_table", "--task", "0", "--driver", "fake", "--runtime", "openai", "--base-url", server.base_url,
         "--images", "none", "--feedback", "pure", "--no-video", "--no-record", "--progress", "off",
         "--no-preflight", *flags],
        capture_output=True, text=True, timeout=timeout_s, cwd=sandbox.PACKAGE_ROOT)


CELL_S, BUDGET_S = 2, 5   # [s]


def test_a_robo_call_cannot_outlive_its_cell_or_the_episode_budget(tmp_path):
    """``set_gripper(1, steps=10**9)`` once ran 33 s in a 5 s cell and past the budget: now motion stops at the
    cell's deadline (the call raises, the cell is interrupted, the namespace kept), and at the wall budget the
    episode ends with ``timeout`` even though the model keeps asking for more. (A 2 s cell and a 5 s budget: the
    arm steps flat out meanwhile, so every second here is about 1.5 s of CPU.)"""
    from pyrua_ros.testing.chat_server import ChatServer, Reply

    endless = "kept = 1\nrobo.set_gripper(1, steps=10**9)"
    script = [Reply(tool_calls=(("python", {"code": endless}),))] + [
        Reply(tool_calls=(("python", {"code": "print(kept)\nrobo.set_gripper(-1, steps=10**9)"}),))] * 6
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = _play_cells_on_the_fake_arm(server, out, "--cell-timeout-s", str(CELL_S), "--budget-s", str(BUDGET_S),
                                           timeout_s=240)
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "timeout", (result["status"], result["reason"], proc.stderr[-2000:])
    assert result["policy_wall_s"] < BUDGET_S + 5
    turns = json.loads((out / "tool_turns.json").read_text())
    assert turns and all(t["elapsed_s"] < CELL_S + 3 for t in turns)
    transcript = json.loads((out / "transcript.json").read_text())
    results = [json.loads(m["content"]) for m in transcript if m["role"] == "tool"]
    first = results[0]
    # at the deadline the call raises ToolError (from the hold's goal, or from a twist where the driver has none);
    # the cell ends with it, or with the interrupt right after it
    timed_out = f"TimeoutError: the cell ran past its {CELL_S} s limit and was interrupted"
    assert first["exception"].startswith(timed_out) or re.search(
        r"ToolError: set_gripper: [\w/]+: the time limit of this call was reached", first["exception"])
    assert len(results) < 2 or results[1]["stdout"].startswith("1")   # the namespace was kept
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    grips = [c for c in calls if c["tool"] == "set_gripper"]
    assert grips and "time limit of this call was reached" in grips[0]["error"]
    assert all(not c["ok"] and c["elapsed_s"] < CELL_S + 0.5 for c in grips)   # at the budget: EpisodeFinished(timeout)


def test_the_ledger_keeps_a_bounded_summary_of_huge_arguments():
    """A 2M-element argument (a list or an array) was kept whole in the ledger and calls.jsonl."""
    import numpy as np

    from pyrua_ros.robo.ledger import Ledger

    ledger = Ledger()
    record = ledger.append(tool="move_to", kwargs={"xyz": [0.1, 0.2, 0.3], "junk": list(range(2_000_000)),
                                                   "mask": np.zeros((1024, 1024), bool), "text": "x" * 10**6,
                                                   "deep": [[[[[[[[[[1]]]]]]]]]]},
                           started_at=0.0, elapsed_s=0.0, ok=False, stateful=False)
    line = json.dumps(record.to_json())
    assert len(line) < 5000
    assert record.kwargs["xyz"] == [0.1, 0.2, 0.3]
    assert record.kwargs["junk"] == {"summary": "list of 2000000 items", "len": 2000000, "head": list(range(8))}
    assert record.kwargs["mask"]["summary"] == "array bool shape [1024, 1024]"


def test_the_ledger_keeps_its_first_calls_and_counts_the_rest(tmp_path):
    """Issue 28: a 300 s cell made 0.5-1.3 million robo calls, every one kept (up to 1 GB). The ledger keeps the
    first ``max_records`` whole and counts the rest, so result.json's counts stay true."""
    from pyrua_ros.robo.ledger import MAX_RECORDS, Dropped, Ledger

    assert Ledger().max_records == MAX_RECORDS == 20_000
    ledger = Ledger(max_records=100)
    for i in range(250):
        record = ledger.append(tool="move_to", kwargs={"i": i, "junk": "x" * 1000}, started_at=0.0, elapsed_s=0.0,
                               ok=True, stateful=i % 2 == 0, env_steps=2)
        assert record.index == i
    assert len(ledger.records) == 100 and len(ledger) == 250 and ledger.dropped == Dropped(150, 75, 300)
    assert (ledger.stateful_calls(), ledger.env_steps()) == (125, 500)
    ledger.write_jsonl(tmp_path / "calls.jsonl")
    assert len((tmp_path / "calls.jsonl").read_text().splitlines()) == 100


def test_nothing_the_model_sends_raises_out_of_the_host_and_the_episode_goes_on(tmp_path):
    """Issue 27, end to end (``pyrualean play``, fake arm, a scripted model server): a 3000-term sum, arguments
    nested 100000 deep, a number out of range, a folder 1500 deep at the name the host once used for the next
    record, names of 245-255 bytes and a JPEG scan bomb each end as an error the model sees, and the episode goes on
    to its finish (each once ended it as ``error``, left out of the success rate)."""
    from pyrua_ros.testing.chat_server import ChatServer, Reply

    bomb = ("import io, struct\nfrom PIL import Image\nbuf = io.BytesIO()\n"
            "Image.new('RGB', (4096, 4096)).save(buf, format='JPEG', progressive=True)\n"
            "empty = b'\\xff\\xda' + struct.pack('>H', 8) + bytes([1, 1, 0, 1, 63, 0])\n"
            "display(buf.getvalue()[:-2] + empty * 20000 + b'\\xff\\xd9')\n")
    files = ESCAPE + DEEP + ("deep('.cell_004.py.pyrua-tmp', 1500)\n"
                             "for k in range(245, 256):\n    real_open('L' * k, 'w').write(str(k))\n")
    script = [Reply(tool_calls=(("python", {"code": "x = " + "+".join(["1"] * 3000)}),)),
              Reply(tool_calls=(("python", '{"code": ' + "[" * 100_000 + "]" * 100_000 + "}"),)),
              Reply(tool_calls=(("python", '{"code": "print(1)", "n": 1e400}'),)),
              Reply(tool_calls=(("python", {"code": files}),)),
              Reply(tool_calls=(("python", {"code": bomb}),)),
              Reply(tool_calls=(("python", {"code": "print('still here')"}),)),
              Reply(tool_calls=(("finish", {"status": "success", "summary": "survived"}),))]
    out = tmp_path / "run"
    with ChatServer(script) as server:
        proc = _play_cells_on_the_fake_arm(server, out, "--cell-timeout-s", "20", timeout_s=300)
    try:
        result = json.loads((out / "result.json").read_text())
        assert result["status"] == "completed", (result["status"], result["reason"], proc.stderr[-2000:])
        assert result["finish"]["summary"] == "survived" and result["tool_turns"] == 7
        transcript = json.loads((out / "transcript.json").read_text())
        answers = [json.loads(m["content"]) for m in transcript if m["role"] == "tool"]
        assert answers[0]["exception"].startswith("SyntaxError: the code is nested too deeply or is too large")
        assert answers[1]["error"] == ("invalid tool arguments: the arguments are not usable JSON: nested more than "
                                       "64 levels deep")
        assert "the number 1e400 is out of range" in answers[2]["error"]
        assert "exception" not in answers[3] and "deeper than 32 folders" in answers[3]["stderr"]
        assert "[display() image refused: 20010 JPEG scans is over the 100 scan limit]" in answers[4]["stderr"]
        assert answers[5]["stdout"] == "still here\n"
        assert all((out / "workspace" / ("L" * k)).read_text() == str(k) for k in range(245, 256))
    finally:
        _remove_all(out / "workspace")   # (the kernel's deep folder, if it got that far)
