"""The hostile cell corpus: each cell tries to get out of the kernel; none may, each gets a clear result, and the
next cell still runs. One kernel for the module (cases that kill it check that it came back)."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from pyrua_ros.agent.kernel import RESTART_NOTICE, Kernel, KernelLimits
from pyrua_ros.agent.kernel.policy import import_refusal, refusal_text

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
          "os, socket = _imp('os'), _imp('socket')\n")


def imp(name: str) -> str:
    return f"ImportError: {import_refusal(name)}"


def _huge_output(out) -> None:
    assert out.stdout == "x" * 4000 + "... [9992001 chars omitted] ..." + "x" * 3999 + "\n"


CASES = [
    *[Case(f"import-{m}", f"import {m}", last=imp(m)) for m in (
        "os", "sys", "subprocess", "socket", "ctypes", "importlib", "builtins", "pathlib", "shutil",
        "multiprocessing", "threading", "signal", "inspect", "traceback", "operator", "pyrua_ros", "_socket")],
    Case("from-os-import", "from os import system", last=imp("os")),
    Case("os-path-submodule", "import os.path", last=imp("os")),
    Case("dunder-import", "__import__('os').system('true')", exc=refusal_text(["__import__"]), refused=True),
    Case("subclasses", "().__class__.__bases__[0].__subclasses__()", exc=refusal_text(["__subclasses__"]),
         refused=True),
    Case("subclasses-by-string", "getattr(object, '__subcl' + 'asses__')()",
         last="AttributeError: SandboxError: attribute '__subclasses__' may not be used by policy code"),
    Case("generator-frame-walk", "def g():\n    yield 1\nx = g()\nx.gi_frame.f_back.f_globals",
         exc=refusal_text(["f_back", "f_globals", "gi_frame"]), refused=True),
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
    Case("rclpy-absent", "import rclpy", last=imp("rclpy")),
]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
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
def test_hostile_cell_is_contained(kernel, case):
    landlock = kernel.isolation.get("landlock", "")
    if case.needs_landlock and not landlock.startswith("abi "):
        pytest.skip(f"Landlock is not available here ({landlock}); only the Python-level guards apply")
    ws = str(kernel.workspace)
    out = kernel.run_cell(case.code, case.timeout_s)
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
    for path in [*outside, kernel.workspace.parent / "escaped.txt"]:
        assert not path.exists(), f"{path} was created"
    assert not any(TARGET_DIR.iterdir())
    assert _children(kernel.pid) == []
    # the episode goes on
    follow = kernel.run_cell(case.after[0], 10.0)
    assert (follow.exception, follow.value) == (None, case.after[1])


def test_corpus_is_large_enough():
    assert len(CASES) >= 30 and len({c.id for c in CASES}) == len(CASES)


def test_fork_is_refused_by_the_os_too(kernel):
    """Even with os reached, RLIMIT_NPROC=0 (capabilities dropped) means no new process; checked from the
    outside: the kernel's own limits as the Linux kernel reports them."""
    limits = Path(f"/proc/{kernel.pid}/limits").read_text()
    line = next(x for x in limits.splitlines() if x.startswith("Max processes"))
    assert line.split()[2:4] == ["0", "0"]
    status = Path(f"/proc/{kernel.pid}/status").read_text()
    assert "CapEff:\t0000000000000000" in status
    assert os.getpid() != kernel.pid
