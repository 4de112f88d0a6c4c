"""The sandbox as a normal user runs it: bubblewrap in a user namespace, no setpriv.

CI runs as root, so this test creates an unprivileged user, runs a small script as that user with an interpreter
the user may execute (the venv's base Python when it is reachable, else the system's Python 3.11) and checks what
the kernel could do from the outside. As a normal user it runs the same script as that user.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = Path(__file__).resolve().parent.parent
TAG = uuid.uuid4().hex[:6]

SCRIPT = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from pyrua_ros.kernel import Kernel, KernelLimits

class Robo:
    def move_to(self, xyz):
        """Pretend to move."""
        return list(xyz)

ESCAPE = ("_f = type(robo).move_to\n_g = vars(type(_f))['__glo' + 'bals__'].__get__(_f)\n"
          "_imp = vars(_g['builtins'])['__imp' + 'ort__']\nos, socket = _imp('os'), _imp('socket')\n"
          "real_open = vars(_g['builtins'])['open']\n")
ws, port, secret = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
report = {}
with Kernel(Robo(), ws, limits=KernelLimits(processes=None, landlock=False)) as k:
    report["description"] = k.description
    report["pid"] = k.pid
    cell = ESCAPE + (
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"s.sendto(b'escaped', ('127.0.0.1', {port}))\n"
        "try:\n"
        f"    real_open({secret!r}).read()\n"
        "    secret = 'read'\n"
        "except OSError as e:\n"
        "    secret = e.errno\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(300)\n"
        "    os._exit(0)\n"
        "open('made_inside.txt', 'w').write('ok')\n"
        "print(os.getuid(), real_open('/proc/self/status').read().split('CapEff:')[1].split()[0], "
        "sorted(line.split(':')[0].strip() for line in real_open('/proc/self/net/dev').read().splitlines()[2:]), "
        "secret, robo.move_to([1, 2, 3]))")
    out = k.run_cell(cell, 30)
    report["stdout"], report["exception"] = out.stdout, out.exception
    report["uid_outside"] = [line.split()[1] for line in Path(f"/proc/{k.pid}/status").read_text().splitlines()
                             if line.startswith("Uid:")][0]
    report["descendants_before_close"] = len(list(Path(f"/proc/{k.process.popen.pid}/task").iterdir()))
    sandbox_pid = k.process.popen.pid
report["sandbox_alive_after_close"] = Path(f"/proc/{sandbox_pid}").exists()
report["copied"] = (ws / "made_inside.txt").read_text()
print(json.dumps(report))
'''


def _world_runnable(path: Path) -> bool:
    """True when every folder above ``path`` is world-searchable and ``path`` world-executable."""
    path = path.resolve()
    for part in [*reversed(path.parents), path]:
        mode = part.stat().st_mode
        if part != path and not mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IXOTH)


def _interpreter() -> str:
    base = Path(os.path.realpath(sys.executable))
    if _world_runnable(base):
        return str(base)
    system = Path("/usr/bin/python3.11")
    if system.exists() and _world_runnable(system):
        return str(system)
    pytest.fail("no Python 3.11 an unprivileged user may run (the venv's base Python is in a private folder and "
                "/usr/bin/python3.11 is missing)")


@pytest.fixture
def unprivileged_user():
    """(uid, gid) of a user to run as: a user made for this test when running as root, else the current one."""
    if os.geteuid() != 0:
        yield os.getuid(), os.getgid(), []
        return
    name = f"pyrua-sbx-{TAG}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        user = pwd.getpwnam(name)
        yield user.pw_uid, user.pw_gid, ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                                         "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    finally:
        subprocess.run(["userdel", name], check=False)


def test_kernel_sandbox_as_an_unprivileged_user(unprivileged_user, tmp_path_factory):
    uid, gid, prefix = unprivileged_user
    base = Path(f"/tmp/pyrua_nonroot_{TAG}")
    base.mkdir(mode=0o755)
    try:
        (base / "script.py").write_text(SCRIPT)
        ws = base / "ws"
        ws.mkdir()
        os.chown(ws, uid, gid)
        secret = tmp_path_factory.mktemp("secret") / "secret.txt"
        secret.write_text("secret")
        secret.chmod(0o644)
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind(("127.0.0.1", 0))
        sink.settimeout(0.5)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(base)}
        proc = subprocess.run([*prefix, _interpreter(), "-I", str(base / "script.py"), str(ROOT), str(ws),
                               str(sink.getsockname()[1]), str(secret)],
                              capture_output=True, text=True, timeout=180, env=env, cwd=base)
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        with pytest.raises(socket.timeout):
            sink.recv(100)
        sink.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert "in a user namespace" in report["description"]
    assert report["exception"] is None
    assert report["stdout"] == f"{uid} 0000000000000000 ['lo'] 2 [1, 2, 3]\n"
    assert report["uid_outside"] == str(uid)
    assert report["sandbox_alive_after_close"] is False   # the forked sleeper went with it
    assert report["copied"] == "ok"


CLI_SCRIPT = r'''
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from pyrua_ros.kernel import Kernel, KernelLimits
from pyrua_ros.agent.runtimes.cli_sandbox import CliSandbox

ws, home = Path(sys.argv[2]), Path(sys.argv[3])
report = {}
with Kernel(object(), ws, limits=KernelLimits(processes=None, landlock=False)) as k:
    k.import_host_files = True   # (what make_cli_runtime sets where the CLI cannot share the kernel's tmpfs)
    report["first"] = k.run_cell("open('from_cell.txt', 'w').write('cell')\nprint('ok')", 30).stdout
    sandbox = CliSandbox(workspace=ws, shared=None, home=home, own_home=True, executable="/usr/bin/true", ports=[])
    shell = ("printf 'def answer():\\n    return 42\\n' > helper_mod.py && mkdir -p pkg && echo data > pkg/d.txt && "
             "ln -s /etc/hostname link_out && cat from_cell.txt")
    wrapped = sandbox.wrap(["/bin/sh", "-c", shell])
    try:
        done = subprocess.run(wrapped.argv, pass_fds=wrapped.pass_fds, capture_output=True, text=True, timeout=60)
    finally:
        for fd in wrapped.owned:
            os.close(fd)
        sandbox.close()
    report["cli"] = [done.returncode, done.stdout, done.stderr[-500:], sandbox.description()]
    out = k.run_cell("import helper_mod\ntry:\n    link = open('link_out').read()\nexcept Exception as exc:\n"
                     "    link = type(exc).__name__\n"
                     "print(helper_mod.answer(), open('pkg/d.txt').read().strip(), link, open('from_cell.txt').read())",
                     30)
    report["second"] = [out.stdout, out.exception]
    again = k.import_workspace()   # nothing changed since: nothing copied either way
    report["again"] = [again.copied, again.skipped]
report["kept"] = sorted(p.name for p in ws.iterdir())
print(json.dumps(report))
'''


def test_files_a_cli_writes_reach_the_next_cell_as_a_normal_user(unprivileged_user):
    """As a normal user the CLI's sandbox binds the run directory's workspace/ (the kernel's tmpfs cannot be
    shared): a module, a folder and a file the CLI writes there are importable and readable from the next cell, a
    link it plants is not followed into the kernel, and the kernel's own files stay. Before, the kernel saw them
    only at its next restart, and the copy back after the next cell deleted them."""
    uid, gid, prefix = unprivileged_user
    base = Path(f"/tmp/pyrua_nonroot_cli_{TAG}")
    base.mkdir(mode=0o755)
    try:
        (base / "script.py").write_text(CLI_SCRIPT)
        for name in ("ws", "home"):
            (base / name).mkdir()
            os.chown(base / name, uid, gid)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(base)}
        proc = subprocess.run([*prefix, _interpreter(), "-I", str(base / "script.py"), str(ROOT), str(base / "ws"),
                               str(base / "home")], capture_output=True, text=True, timeout=180, env=env, cwd=base)
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert report["first"] == "ok\n"
    returncode, stdout, stderr, description = report["cli"]
    assert returncode == 0 and stdout == "cell", stderr                    # the CLI saw the cell's file
    assert "copied into the kernel's tmpfs before each cell" in description
    assert report["second"] == ["42 data FileNotFoundError cell\n", None], report["second"]
    assert report["again"] == [0, 0]   # (what the copy back wrote is not copied in again: no ping-pong)
    assert {"helper_mod.py", "pkg", "from_cell.txt", "cell_001.py", "cell_002.py"} <= set(report["kept"])
    assert "link_out" not in report["kept"], report["kept"]   # (not in the kernel's workspace: the copy drops it)
