"""The cell kernel: namespace, robo proxy, wire codec, outputs, programs, timeouts and child deaths.

Real child processes throughout (no mocks); the robo target is a small in-file object that returns the real
``pyrua_ros.robo.results`` dataclasses and raises the real ``pyrua_ros.robo.errors`` exceptions.
"""

from __future__ import annotations

import inspect
import io
import os
import signal
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pyrua_ros.kernel import RESTART_NOTICE, Kernel, KernelLimits, policy, protocol
from pyrua_ros.robo.errors import EpisodeFinished, ToolError
from pyrua_ros.robo.results import Move, State

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


class FakeRobo:
    """A tiny robot for kernel tests."""

    OPEN = -1.0
    CLOSE = 1.0
    CAMERAS = ("agentview", "wrist")

    def __init__(self) -> None:
        self._backend = "secret backend"
        self.calls: list[str] = []
        self.finished = False

    @property
    def done(self) -> bool:
        """True once the episode is over."""
        return self.finished

    def state(self) -> State:
        """The current state."""
        return State(step=3, task="put the bowl on the plate", eef_pos=(0.1, 0.2, 0.3),
                     eef_quat=(1.0, 0.0, 0.0, 0.0), gripper_qpos=(0.04, -0.04), gripper_opening=0.08,
                     object_names=("bowl_1",), terminated=False, truncated=False)

    def move_to(self, xyz: tuple[float, float, float], *, gripper: float = -1.0, max_steps: int = 80) -> Move:
        """Move the gripper to xyz (m), holding the gripper command."""
        self.calls.append("move_to")
        if len(xyz) != 3:
            raise ValueError(f"xyz must have 3 values, got {len(xyz)}")
        return Move(target_xyz=tuple(xyz), final_eef_pos=tuple(xyz), final_dist_m=0.001, reached=True,
                    steps_used=12, max_steps=max_steps, terminated=False, truncated=False)

    def image(self, camera: str = "agentview") -> np.ndarray:
        """An RGB image (uint8, HxWx3)."""
        return np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)

    def total(self, values: np.ndarray) -> float:
        """Sum of an array (tests arrays going to the host)."""
        return float(np.asarray(values).sum())

    def segment(self, name: str) -> dict:
        """Always fails on the robot side."""
        raise ToolError("segment", f"no mask for {name!r}", {"error": "no mask"})

    def finish(self) -> None:
        """Ends the episode."""
        self.finished = True
        raise EpisodeFinished("terminated")

    def _private_helper(self) -> str:
        return "never reachable"


@pytest.fixture(scope="module")
def fake_robo() -> FakeRobo:
    return FakeRobo()


@pytest.fixture(scope="module")
def kernel(fake_robo, tmp_path_factory):
    with Kernel(fake_robo, tmp_path_factory.mktemp("workspace"), limits=KernelLimits(interrupt_grace_s=1.0)) as k:
        yield k


def run(kernel: Kernel, code: str, timeout_s: float = 10.0):
    return kernel.run_cell(code, timeout_s)


def last_line(text: str | None) -> str:
    assert text, "expected an exception"
    return text.strip().splitlines()[-1]


# ------------------------------------------------------------------------------------------ namespace


def test_namespace_has_the_contract_globals_and_persists(kernel):
    out = run(kernel, "names = sorted(k for k in globals() if not k.startswith('__'))\n"
                      "log('hello'); print(__name__)\nnames")
    assert out.exception is None
    assert out.stdout == "hello\n__policy__\n"
    assert out.value == repr(["display", "log", "math", "np", "numpy", "robo", "time"])
    run(kernel, "counter = 41\ndef bump(): return counter + 1")
    assert run(kernel, "bump()").value == "42"
    assert (kernel.workspace / f"cell_{kernel.cells:03d}.py").read_text() == "bump()"


def test_trailing_expression_value_and_none(kernel):
    # the reference keeps the first and last 2000 chars of a long value around a marker on its own line
    text = repr("a" * 5000)
    assert run(kernel, "x = 'a' * 5000\nx").value == text[:2000] + "\n... [1002 chars omitted] ...\n" + text[-2000:]
    assert run(kernel, "None").value is None
    assert run(kernel, "y = 3").value is None


def test_syntax_error_and_system_exit(kernel):
    out = run(kernel, "def (:")
    assert out.exception.startswith("SyntaxError: invalid syntax (cell_")
    assert run(kernel, "raise SystemExit(3)").exception == "SystemExit: 3"


def test_tracebacks_show_policy_frames_only(kernel):
    out = run(kernel, "def inner():\n    return 1 / 0\ninner()")
    assert "cell_" in out.exception and "worker.py" not in out.exception and "proxy.py" not in out.exception
    assert last_line(out.exception) == "ZeroDivisionError: division by zero"


def test_stdout_and_stderr_are_trimmed_to_head_and_tail(kernel):
    out = run(kernel, "print('a' * 5000 + 'b' * 5000, end='')")
    assert out.stdout == "a" * 4000 + "\n... [2000 chars omitted] ...\n" + "b" * 4000
    assert policy.trim_middle("a" * 5000 + "b" * 5000) == out.stdout


def test_cwd_is_the_workspace_and_workspace_modules_import(kernel):
    kernel.put_file("helper.py", b"import math\n\ndef area(r):\n    return math.pi * r * r\n")
    kernel.put_file("sneaky.py", b"import os\n")
    out = run(kernel, "with open('note.txt', 'w') as f:\n    f.write('hi')\nimport helper\nround(helper.area(1.0), 4)")
    assert out.exception is None and out.value == "3.1416"
    assert (kernel.workspace / "note.txt").read_text() == "hi"
    assert last_line(run(kernel, "import sneaky").exception) == f"ImportError: {policy.import_refusal('os')}"


# ------------------------------------------------------------------------------------------ robo proxy


def test_proxy_mirrors_public_members_only(kernel, fake_robo):
    out = run(kernel, "sorted(n for n in dir(robo) if not n.startswith('__'))")
    assert out.value == repr(["CAMERAS", "CLOSE", "OPEN", "calls", "done", "finish", "finished", "image", "move_to",
                              "segment", "state", "total"])
    assert run(kernel, "(robo.OPEN, robo.CLOSE, robo.CAMERAS)").value == "(-1.0, 1.0, ('agentview', 'wrist'))"
    assert run(kernel, "robo.move_to.__doc__").value == repr(inspect.getdoc(fake_robo.move_to))
    assert run(kernel, "type(robo).__name__").value == "'FakeRobo'"
    assert last_line(run(kernel, "robo._private_helper()").exception) == (
        "AttributeError: 'FakeRobo' object has no attribute '_private_helper'")


def test_proxy_signature_matches_the_real_method(kernel, fake_robo):
    out = run(kernel, "help(robo.move_to)")
    assert last_line(out.exception) == "NameError: name 'help' is not defined"
    # inspect is not importable by policy code; the signature object travels with __signature__
    out = run(kernel, "str(robo.move_to.__signature__)")
    assert out.value == repr("(self, " + str(inspect.signature(fake_robo.move_to))[1:])


def test_results_come_back_as_the_real_dataclasses(kernel, fake_robo):
    out = run(kernel, "m = robo.move_to((0.1, 0.2, 0.3), gripper=1.0)\n"
                      "s = robo.state()\n(type(m).__module__, type(m).__name__, m.target_xyz, m.max_steps, "
                      "round(s.eef_yaw, 6), s.object_names)")
    assert out.exception is None
    assert out.value == repr(("pyrua_ros.robo.results", "Move", (0.1, 0.2, 0.3), 80,
                              round(fake_robo.state().eef_yaw, 6), ("bowl_1",)))
    assert fake_robo.calls[-1] == "move_to"
    assert last_line(run(kernel, "m.reached = False").exception).startswith("dataclasses.FrozenInstanceError")


def test_numpy_arrays_cross_both_ways(kernel):
    out = run(kernel, "img = robo.image()\n(img.dtype.str, img.shape, int(img[3, 4, 2]), "
                      "robo.total(np.ones((2, 3), np.float32)))")
    assert out.value == "('|u1', (4, 5, 3), 59, 6.0)"


def test_robot_errors_keep_type_and_message(kernel):
    out = run(kernel, "try:\n    robo.segment('cup')\nexcept RuntimeError as e:\n"
                      "    r = (type(e).__name__, str(e), e.tool, e.payload)\nr")
    assert out.value == repr(("ToolError", "segment: no mask for 'cup'", "segment", {"error": "no mask"}))
    assert last_line(run(kernel, "robo.move_to((1, 2))").exception) == "ValueError: xyz must have 3 values, got 2"
    assert last_line(run(kernel, "robo.move_to((1, 2, 3), speed=2)").exception) == (
        "TypeError: FakeRobo.move_to() got an unexpected keyword argument 'speed'")
    assert last_line(run(kernel, "robo.total(object())").exception) == (
        "TypeError: robo.total: a object value cannot cross the kernel boundary (send numbers, strings, lists, "
        "tuples, dicts, bytes, numpy arrays or result dataclasses)")


def test_episode_finished_is_not_swallowed_by_except_exception(kernel, fake_robo):
    out = run(kernel, "try:\n    robo.finish()\nexcept Exception:\n    print('swallowed')")
    assert out.episode_finished == "terminated" and out.stdout == "" and out.exception is None
    assert run(kernel, "robo.done").value == "True"
    fake_robo.finished = False


def test_display_returns_png_images_in_order(kernel):
    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (255, 0, 0)).save(buf, format="PNG")
    out = run(kernel, f"display(np.zeros((4, 6, 3), np.uint8))\ndisplay(np.ones((3, 3)))\ndisplay({buf.getvalue()!r})")
    assert out.exception is None and len(out.images) == 3
    sizes = [Image.open(io.BytesIO(png)).size for png in out.images]
    assert sizes == [(6, 4), (3, 3), (2, 2)]
    assert last_line(run(kernel, "display('not an image')").exception) == (
        "TypeError: display() takes a numpy array, a PIL image or PNG bytes, got str")


# A progressive JPEG (4096 x 4096, black) followed by ``scans`` empty scans of its first component, built in the
# cell: 0.2 MiB for 20000 scans, each of which costs libjpeg a pass over all 262144 blocks
JPEG_BOMB = ("import io, struct\nfrom PIL import Image\nbuf = io.BytesIO()\n"
             "Image.new('RGB', (4096, 4096)).save(buf, format='JPEG', progressive=True)\n"
             "empty = b'\\xff\\xda' + struct.pack('>H', 8) + bytes([1, 1, 0, 1, 63, 0])\n"
             "bomb = buf.getvalue()[:-2] + empty * {scans} + b'\\xff\\xd9'\n")


def test_a_progressive_jpeg_scan_bomb_is_refused_before_it_is_decoded(kernel):
    """Issue 28: 20000 empty scans held the agent process 22-48 s in the decoder under a 5 s cell limit. The
    scans are counted before any decoding, and the cell ends within its limit with the refusal shown."""
    out = run(kernel, JPEG_BOMB.format(scans=20_000) + "display(bomb)\nlen(bomb) < 2**20", timeout_s=5.0)
    assert (out.exception, out.value, out.images) == (None, "True", [])
    assert out.stderr == "\n[display() image refused: 20010 JPEG scans is over the 100 scan limit]"
    honest = run(kernel, JPEG_BOMB.format(scans=0) + "display(bomb)")   # a progressive JPEG of its own 10 scans
    assert honest.exception is None and [Image.open(io.BytesIO(p)).size for p in honest.images] == [(1024, 1024)]


def test_floods_of_jpeg_segments_and_png_chunks_are_refused_and_late_images_are_not_decoded(kernel):
    """Tiny segments before a JPEG's first scan, or tiny PNG chunks, cost Pillow's Python parsers seconds per
    image; an image sent after the cell's time limit is not decoded at all."""
    code = ("import io, struct\nfrom PIL import Image\n"
            "jpg, png = io.BytesIO(), io.BytesIO()\n"
            "Image.new('RGB', (8, 8)).save(jpg, format='JPEG')\nImage.new('RGB', (8, 8)).save(png, format='PNG')\n"
            "jpg, png = jpg.getvalue(), png.getvalue()\n"
            f"junk = struct.pack('>I', 0) + b'prVt' + struct.pack('>I', {zlib.crc32(b'prVt')})\n"
            "display(jpg[:2] + b'\\xff\\xfe\\x00\\x02' * 2**20 + jpg[2:])\n"
            "display(png[:33] + junk * 350_000 + png[33:])\n"
            "try:\n    while True:\n        pass\nexcept KeyboardInterrupt:\n    display(png)\n")
    out = run(kernel, code, timeout_s=3.0)
    assert out.images == [] and out.stderr == (
        "\n[display() image refused: more than 256 JPEG segments before the first scan]"
        "\n[display() image refused: more than 8192 PNG chunks]"
        "\n[display() image refused: sent after the time limit; not decoded]")


# ------------------------------------------------------------------------------------------ isolation


def test_child_holds_no_ros_and_no_ros_environment(kernel):
    pid = kernel.pid
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    names = {e.split(b"=", 1)[0].decode() for e in environ if e}
    assert not {n for n in names if n.startswith(("ROS_", "AMENT", "RMW_", "OPENAI", "PYTHONPATH"))}, names
    assert os.environ.get("ROS_DOMAIN_ID"), "the test process itself runs with a ROS domain"
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "rclpy" not in maps and "librcl" not in maps
    assert Path(os.readlink(f"/proc/{pid}/cwd")) == kernel.workspace
    assert last_line(run(kernel, "import rclpy").exception) == f"ImportError: {policy.import_refusal('rclpy')}"


def test_isolation_report_names_the_limits(kernel):
    iso = kernel.isolation
    assert iso["RLIMIT_AS"] == 4 * 2**30 and iso["RLIMIT_NPROC"] == 0 and iso["RLIMIT_CORE"] == 0
    assert iso["capabilities"] in ("none held", "all dropped")
    assert iso["landlock"].startswith(("abi ", "unavailable", "disabled"))


def test_host_refuses_names_outside_the_manifest_whatever_the_child_sends(kernel):
    reply = kernel._serve({"op": "call", "name": "_private_helper", "args": [], "kwargs": {}})
    assert reply["error"]["type"] == "AttributeError" and "_private_helper" in reply["error"]["text"]
    assert kernel._serve({"op": "get", "name": "move_to"})["error"]["type"] == "AttributeError"


# ------------------------------------------------------------------------------------------ deaths


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_dying_child_is_reported_and_replaced(kernel, sig):
    run(kernel, "before = 1")
    pid = kernel.pid
    timer = threading.Timer(0.5, os.kill, (pid, sig))
    timer.start()
    try:
        out = run(kernel, "time.sleep(20)")
    finally:
        timer.cancel()
    assert out.exception.startswith(f"KernelDied: the kernel process died: ended by {sig.name}")
    assert out.restarted and out.notice == RESTART_NOTICE
    assert kernel.pid != pid
    assert last_line(run(kernel, "before").exception) == "NameError: name 'before' is not defined"
    assert run(kernel, "1 + 1").value == "2"


def test_restart_clears_the_namespace(kernel):
    run(kernel, "kept = 5")
    kernel.restart()
    assert last_line(run(kernel, "kept").exception) == "NameError: name 'kept' is not defined"


# ------------------------------------------------------------------------------------------ programs

PROGRAM = """
calls = []

def run(robo):
    calls.append(1)
    print('moving', len(calls))
    robo.move_to((0.1, 0.2, 0.3))
"""


def test_programs_run_once_in_a_fresh_namespace(kernel):
    first = kernel.run_program(code=PROGRAM, timeout_s=10)
    second = kernel.run_program(code=PROGRAM, timeout_s=10)
    assert (first.status, first.stdout, first.exception) == ("completed", "moving 1\n", None)
    assert second.stdout == "moving 1\n" and second.file == f"program_{second.program:02d}.py"
    assert (kernel.workspace / first.file).read_text() == PROGRAM


def test_program_outcomes(kernel, fake_robo):
    finished = kernel.run_program(code="def run(robo):\n    robo.finish()", timeout_s=10)
    fake_robo.finished = False
    assert (finished.status, finished.reason) == ("finished", "terminated")
    error = kernel.run_program(code="def run(robo):\n    robo.move_to((1,))", timeout_s=10)
    assert error.status == "error" and last_line(error.exception) == "ValueError: xyz must have 3 values, got 1"
    missing = kernel.run_program(code="x = 1", timeout_s=10)
    where = kernel.workspace.resolve() / missing.file
    assert not missing.loaded and missing.exception == f"{where} does not define a callable 'run'"
    broken = kernel.run_program(code="x = 1 / 0\ndef run(robo):\n    pass", timeout_s=10)
    where = kernel.workspace.resolve() / broken.file
    assert not broken.loaded and broken.exception == f"importing {where} failed: division by zero"
    refused = kernel.run_program(code="def run(robo):\n    return robo.__class__.__subclasses__()", timeout_s=10)
    assert refused.refused and refused.exception == policy.refusal_text(["__subclasses__"], "program")
    assert refused.exception.endswith("the program was not run.  Stay within the documented `robo` API.")
    slow = kernel.run_program(code="def run(robo):\n    while True:\n        pass", timeout_s=1)
    assert slow.status == "timeout" and not slow.restarted


def test_program_paths(kernel):
    kernel.put_file("mine.py", b"def run(robo):\n    print(robo.OPEN)\n")
    assert kernel.run_program(path="mine.py", timeout_s=10).stdout == "-1.0\n"
    with pytest.raises(ValueError, match="path must be inside the workspace"):
        kernel.run_program(path="../outside.py", timeout_s=10)
    with pytest.raises(ValueError, match=r"no such file in workspace: nothere\.py"):
        kernel.run_program(path="nothere.py", timeout_s=10)
    with pytest.raises(ValueError, match="exactly one of code"):
        kernel.run_program(timeout_s=10)


# ------------------------------------------------------------------------------------------ codec, limits


def test_codec_round_trips_and_refuses_unknown_types():
    r, w = os.pipe()
    try:
        value = {"a": (1, 2.5, "x", None, True), 3: [np.arange(6, dtype=np.int16).reshape(2, 3)],
                 "__k": b"\x00\x01", "s": frozenset({1, 2}), "m": Move((1.0, 2.0, 3.0), (1.0, 2.0, 3.0), 0.0, True,
                                                                        1, 80, False, False)}
        protocol.write_frame(w, {"v": value})
        got = protocol.FrameReader(r, lambda name, fields: (name, fields)).read(deadline=None)["v"]
    finally:
        os.close(r)
        os.close(w)
    assert got["a"] == (1, 2.5, "x", None, True) and got["__k"] == b"\x00\x01" and got["s"] == frozenset({1, 2})
    assert got[3][0].dtype == np.int16 and got[3][0].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert got["m"][0] == "Move" and got["m"][1]["target_xyz"] == (1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match="dtype object cannot cross"):
        protocol.encode_frame({"v": np.array([object()])})
    with pytest.raises(TypeError, match="a builtin_function_or_method value cannot cross"):
        protocol.encode_frame({"v": len})


def test_limits_are_validated():
    with pytest.raises(ValueError, match=r"KernelLimits\.memory_bytes must be positive"):
        KernelLimits(memory_bytes=0)


# ------------------------------------------------------------------------------------------ sandbox modes


def test_without_bubblewrap_the_kernel_refuses_to_start_with_one_clear_line(monkeypatch, tmp_path):
    from pyrua_ros.kernel import SandboxUnavailable, sandbox

    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)   # a machine where bubblewrap is not installed
    with pytest.raises(SandboxUnavailable) as refused:
        Kernel(FakeRobo(), tmp_path / "ws")
    assert "\n" not in str(refused.value) and "--unsafe-sandbox" in str(refused.value)
    with Kernel(FakeRobo(), tmp_path / "ws", sandbox="unsafe") as unsafe:   # the explicit way round it
        assert unsafe.description.startswith(sandbox.UNSAFE_NOTE + "; ") and not unsafe.mirrored
        assert unsafe.run_cell("robo.OPEN", 10).value == "-1.0"


def test_the_kernel_view_holds_only_its_own_sources(kernel):
    """The kernel imports nothing of pyrua_ros beyond sandbox.KERNEL_SOURCES, and sees no other file of it."""
    from pyrua_ros.kernel import sandbox

    assert kernel.mirrored and kernel.description.startswith("bubblewrap: ")
    listing = Path(f"/proc/{kernel.pid}/root{sandbox.INSIDE_SRC}/pyrua_ros")
    found = sorted(str(p.relative_to(listing.parent)) for p in listing.rglob("*.py"))
    assert found == sorted(sandbox.KERNEL_SOURCES)


def test_the_seccomp_tables_agree_with_libseccomp():
    """Every system call number of seccomp.py's tables, on both architectures, as libseccomp resolves the name
    (a wrong number would allow one call and refuse another)."""
    import ctypes
    import ctypes.util

    from pyrua_ros.kernel import seccomp

    found = ctypes.util.find_library("seccomp")
    if found is None:
        pytest.skip("libseccomp is not installed here to compare with")
    resolve = ctypes.CDLL(found).seccomp_syscall_resolve_name_arch
    resolve.restype, resolve.argtypes = ctypes.c_int, [ctypes.c_uint32, ctypes.c_char_p]
    for arch, (audit, _column) in seccomp.ARCHES.items():
        numbers = seccomp.numbers(arch)
        known = {name: resolve(audit, name.encode()) for name in numbers}
        wrong = {name: (nr, known[name]) for name, nr in numbers.items() if known[name] >= 0 and known[name] != nr}
        assert not wrong, (arch, wrong)
        assert sum(v >= 0 for v in known.values()) >= len(numbers) - 5   # (calls newer than this libseccomp)
    assert len(seccomp.program("aarch64")) // 8 < 4096 > len(seccomp.program("x86_64")) // 8   # BPF_MAXINSNS


def test_the_sandbox_finds_each_allowed_modules_distribution_as_importlib_does():
    """The sandbox binds the site-packages files of the distributions behind each allowed module: found by name,
    by ``top_level.txt``, or (a wheel without one, as scikit-image's) by its RECORD, and the same distributions
    ``importlib.metadata.packages_distributions`` names; none for the standard library."""
    import importlib.metadata
    import importlib.util

    from pyrua_ros.kernel import sandbox

    known = importlib.metadata.packages_distributions()
    for top in policy.ALLOWED_MODULES:
        owners = sandbox._owners(top)
        assert set(owners) <= set(known.get(top, ())), top
        origin = importlib.util.find_spec(top).origin or ""
        if "site-packages" in origin:
            assert owners, f"{top} is installed but no distribution was found for it"
    assert sandbox._owners("json") == []
    assert sandbox._owners("skimage") == ["scikit-image"]   # its wheel has no top_level.txt
    assert sandbox._owners("cv2") == ["opencv-python"]


def test_stopping_a_kernel_ends_its_whole_process_group_even_after_its_leader_exited(tmp_path):
    """A kernel's process group can outlive the process that leads it: bubblewrap's inner process (the sandbox's
    PID namespace init) stayed asleep forever after a double Ctrl-C ended the outer bwrap during their start
    handshake (seen in CI, test_double_ctrl_c_leaves_no_process_kernel_included). Stopping the kernel ends the
    group whatever became of its leader."""
    import subprocess

    from pyrua_ros.kernel.mirror import WorkspaceMirror
    from pyrua_ros.kernel.process import KernelProcess
    from pyrua_ros.testing import spin_until
    from pyrua_ros.testing.processes import alive

    limits = KernelLimits()
    mirror = WorkspaceMirror(tmp_path, limits, lambda text: None)
    process = KernelProcess(tmp_path, limits, sandbox="unsafe", manifest={}, mirror=mirror, event=lambda text: None)
    # a leader that leaves a member of its group behind and exits, as the outer bwrap did
    process.popen = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, start_new_session=True)
    member = int(process.popen.stdout.readline())
    process.popen.wait(10)
    assert os.getpgid(member) == process.popen.pid
    try:
        process.close()
        assert spin_until(lambda: not alive({member}), 10.0), "a process of the kernel's group outlived the kernel"
    finally:
        if alive({member}):
            os.kill(member, signal.SIGKILL)
        mirror.close()
