"""The kernel child process: runs untrusted policy cells and programs, holding no ROS handle and no robo object.

Started by ``host.Kernel`` as ``python -I -B -S`` with a small bootstrap that puts the package first on
``sys.path`` and the site-packages last, then runs this module as ``__main__`` (as ``python -m
pyrua_ros.kernel.worker`` would), with cwd = workspace, a scrubbed environment (no ROS_* / AMENT_*),
stdin/stdout as the protocol pipe and stderr as a log file outside the workspace.

Start-up, all before any policy code runs:
1. the protocol fds are duplicated and fds 0/1 pointed at /dev/null / the log, so C-level output cannot corrupt
   frames; a meta-path hook refuses ``rclpy`` (and friends) for the life of the process;
2. the ``init`` frame gives the manifest, the workspace and the limits; numpy and the result/error classes are
   imported, the ``robo`` proxy built;
3. :func:`.isolation.isolate`: the resource limits, Landlock, the capability drop, undumpable, and the seccomp
   allow-list without ``execve`` stacked on itself (under bubblewrap it already runs under the list with
   ``execve``; with ``--unsafe-sandbox`` this is its only filter);
4. ``ready`` with a report of what took effect.

Interrupts: the host sends SIGINT when a cell runs past its timeout. The handler raises ``KeyboardInterrupt``
only while policy code runs; during a protocol exchange (a robo call) it is held and raised right after, so
frames are never cut. A cell that swallows it is killed by the host after a grace period.
"""

from __future__ import annotations

import ast
import faulthandler
import importlib
import importlib.abc
import io
import linecache
import math
import os
import signal
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

from pyrua_ros.kernel import isolation, policy, protocol, proxy

KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))
_BLOCKED_TOP = ("rclpy", "rcl", "rclpy_message_converter", "rosidl_runtime_py", "rpyutils", "ament_index_python")


class _RosBlocker(importlib.abc.MetaPathFinder):
    """Refuses ROS client libraries in this process, whoever asks."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in _BLOCKED_TOP:
            raise ImportError(f"{fullname} may not be imported in the kernel process (it holds no ROS handle)")


class CappedText(io.TextIOBase):
    """A text stream keeping the first and last chars of what is written (contract: 4000 + 4000), in O(cap)."""

    def __init__(self, head: int = policy.STREAM_HEAD, tail: int = policy.STREAM_TAIL) -> None:
        self.head_cap, self.tail_cap = head, tail
        self.reset()

    def reset(self) -> None:
        self.head, self.tail, self.total = "", "", 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        n = len(text)
        self.total += n
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.tail_cap:]
        return n

    def value(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return self.head + self.tail
        return f"{self.head}{policy.omission(omitted)}{self.tail}"


class _State:
    user = False      # policy code is running: SIGINT raises KeyboardInterrupt now
    pending = False   # SIGINT arrived during a protocol exchange


STATE = _State()


def _on_sigint(signum, frame):
    if STATE.user:
        raise KeyboardInterrupt
    STATE.pending = True


# ---------------------------------------------------------------------------------------------- images


def to_png(image: Any) -> bytes:
    """PNG bytes of a numpy array (HxW or HxWx3/4; uint8, bool, or float in [0, 1]) or a PIL image; PNG or JPEG
    bytes go as they are (the agent process checks and decodes them itself)."""
    if isinstance(image, bytes | bytearray):
        if not bytes(image[:8]).startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")):
            raise TypeError("display() got bytes that are not a PNG or JPEG image")
        return bytes(image)
    import numpy as np  # noqa: PLC0415 (numpy: images only; the kernel child)
    from PIL import Image  # noqa: PLC0415 (PIL)

    if isinstance(image, np.ndarray):
        arr = image
        if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (1, 3, 4)):
            raise ValueError(f"display() needs an HxW or HxWx(1|3|4) array, got shape {arr.shape}")
        if arr.dtype == bool:
            arr = arr.astype(np.uint8) * 255
        elif arr.dtype.kind == "f":
            arr = (np.clip(np.nan_to_num(arr), 0.0, 1.0) * 255).round().astype(np.uint8)
        elif arr.dtype != np.uint8:
            arr = np.clip(arr, 0, 255).astype(np.uint8)
        image = Image.fromarray(arr[:, :, 0] if arr.ndim == 3 and arr.shape[2] == 1 else arr)
    if not isinstance(image, Image.Image):
        raise TypeError(f"display() takes a numpy array, a PIL image or PNG bytes, got {type(image).__name__}")
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- worker


class Worker:
    """One kernel process: the persistent cell namespace, program runs and the robo round trips."""

    def __init__(self, in_fd: int, out_fd: int, init: dict, reader: protocol.FrameReader) -> None:
        self.in_fd, self.out_fd, self.reader = in_fd, out_fd, reader
        self.root = os.path.realpath(init["workspace"])
        self.views = policy.ModuleViews(self.root)
        self.manifest = init["manifest"]
        self.job = 0  # the id of the job being run; every frame to the agent process carries it
        self.robo = proxy.build_proxy(self.manifest, self.request)
        self.stdout, self.stderr = CappedText(), CappedText()
        self.namespace = self.fresh_namespace()

    # -- robo round trips ---------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        was_user, STATE.user = STATE.user, False
        try:
            protocol.write_frame(self.out_fd, {**message, "id": self.job})
        finally:
            STATE.user = was_user
        self._deliver_pending(was_user)

    def request(self, op: str, name: str, args: tuple, kwargs: dict) -> Any:
        """Send one robo call (or property read) to the agent process and wait for its answer."""
        was_user, STATE.user = STATE.user, False
        try:
            try:
                frame = protocol.encode_frame({"op": op, "id": self.job, "name": name, "args": list(args),
                                               "kwargs": kwargs})
            except TypeError as exc:
                raise TypeError(f"robo.{name}: {exc}") from None
            data = memoryview(frame)
            while data:
                data = data[os.write(self.out_fd, data):]
            reply = self.reader.read()
        finally:
            STATE.user = was_user
        self._deliver_pending(was_user)
        if reply is None or reply.get("op") != "reply":
            raise RuntimeError(f"robo.{name}: the agent process sent no answer")
        if "error" in reply:
            raise proxy.rebuild_error(reply["error"])
        return reply.get("value")

    @staticmethod
    def _deliver_pending(was_user: bool) -> None:
        if was_user and STATE.pending:
            STATE.pending = False
            raise KeyboardInterrupt

    def display(self, image: Any) -> None:
        """Attach an image to this cell's result (numpy array, PIL image or PNG bytes)."""
        self.send({"op": "display", "png": to_png(image)})

    # -- namespaces and imports ---------------------------------------------------------------------
    def fresh_namespace(self) -> dict:
        importer = WorkspaceImporter(self.root, self.views)
        table = policy.sandbox_builtins(self.root, importer)
        importer.builtins = table
        np_view = self.views.lazy("numpy")
        return {"__name__": "__policy__", "__builtins__": table, "robo": self.robo, "np": np_view,
                "numpy": np_view, "math": self.views.view(math), "time": self.views.view(time),
                "display": self.display, "log": print}

    # -- running code -------------------------------------------------------------------------------
    def run(self, code: str, filename: str, namespace: dict, *, split_last: bool) -> dict:
        """Execute ``code`` in ``namespace``; the outcome fields of one cell (or of a program's load)."""
        self.stdout.reset()
        self.stderr.reset()
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        outcome: dict[str, Any] = {"value": None, "exception": None, "episode_finished": None,
                                   "interrupted": False, "message": None}
        try:
            tree = ast.parse(code, filename)
            last = None
            if split_last and tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            body = compile(tree, filename, "exec")
            tail = compile(last, filename, "eval") if last is not None else None
        except SyntaxError as exc:
            outcome["message"] = str(exc)   # "invalid syntax (cell_003.py, line 2)", as Python words it
            outcome["exception"] = f"SyntaxError: {outcome['message']}"
            return outcome
        except (ValueError, RecursionError, MemoryError) as exc:   # null bytes, too deep or too large to compile
            outcome["exception"] = f"SyntaxError: {filename} cannot be compiled ({type(exc).__name__}: {exc})"
            return outcome
        self._execute(lambda: self._exec_body(body, tail, namespace, outcome), outcome)
        return outcome

    def _exec_body(self, body, tail, namespace, outcome) -> None:
        exec(body, namespace)
        if tail is not None:
            value = eval(tail, namespace)
            if value is not None:
                outcome["value"] = policy.trim_middle(repr(value), policy.VALUE_CHARS // 2, policy.VALUE_CHARS // 2)

    def _execute(self, fn, outcome: dict) -> None:
        sys.stdout, sys.stderr = self.stdout, self.stderr
        STATE.pending = False
        try:
            STATE.user = True
            try:
                fn()
            finally:
                STATE.user = False
        except BaseException as exc:
            STATE.user = False
            self._classify(exc, outcome)
        finally:
            STATE.user = False
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__

    @staticmethod
    def _classify(exc: BaseException, outcome: dict) -> None:
        try:
            if proxy.is_episode_finished(exc):
                outcome["episode_finished"] = str(getattr(exc, "reason", None) or "unknown")
            elif isinstance(exc, SystemExit):
                outcome["exception"] = f"SystemExit: {exc}"
            else:
                outcome["interrupted"] = isinstance(exc, KeyboardInterrupt)
                outcome["exception"] = format_traceback(exc)
                outcome["message"] = str(exc)
        except BaseException as inner:  # a hostile __str__ / __repr__
            outcome["exception"] = f"{type(exc).__name__}: <the exception could not be shown: {type(inner).__name__}>"
            outcome["message"] = f"<the exception could not be shown: {type(inner).__name__}>"

    def cell(self, message: dict) -> dict:
        # a fresh robo proxy and builtins table for every cell: what an earlier cell rewrote is not inherited
        self.robo = proxy.build_proxy(self.manifest, self.request)
        fresh = self.fresh_namespace()
        self.namespace.update(robo=self.robo, __builtins__=fresh["__builtins__"], __name__="__policy__")
        outcome = self.run(message["code"], message["filename"], self.namespace, split_last=True)
        outcome.pop("message")
        return outcome | {"stdout": self.stdout.value(), "stderr": self.stderr.value()}

    def program(self, message: dict) -> dict:
        """Load a program in a fresh module namespace and call its ``run(robo)`` once."""
        namespace = self.fresh_namespace()
        namespace["__file__"] = message["filename"]
        outcome = self.run(message["code"], message["filename"], namespace, split_last=False)
        stdout, stderr = self.stdout.value(), self.stderr.value()
        result = {"status": "completed", "reason": None, "exception": None, "interrupted": outcome["interrupted"]}
        if outcome["episode_finished"]:
            return result | {"status": "finished", "reason": outcome["episode_finished"], "stdout": stdout,
                             "stderr": stderr}
        # a program that does not load is the reference's PolicyLoadError: one line, no traceback
        location = os.path.join(self.root, message["filename"])
        if outcome["exception"] is None and not callable(namespace.get("run")):
            return result | {"status": "error", "load_failed": True,
                             "exception": f"{location} does not define a callable 'run'"}
        if outcome["exception"] is not None:
            text = outcome["exception"]
            if outcome["interrupted"] or text.startswith("SystemExit"):
                return result | {"status": "error", "exception": text[-policy.TRACEBACK_CHARS:], "stdout": stdout,
                                 "stderr": stderr}
            return result | {"status": "error", "load_failed": True,
                             "exception": f"importing {location} failed: {outcome['message']}"}
        run_fn = namespace["run"]
        self.stdout.reset()
        self.stderr.reset()
        sub: dict[str, Any] = {"value": None, "exception": None, "episode_finished": None, "interrupted": False}
        self.stdout.write(stdout)
        self.stderr.write(stderr)
        self._execute(lambda: run_fn(self.robo), sub)
        result.update(stdout=self.stdout.value(), stderr=self.stderr.value(), interrupted=sub["interrupted"])
        if sub["episode_finished"]:
            result.update(status="finished", reason=sub["episode_finished"])
        elif sub["exception"] is not None:
            result.update(status="error", exception=sub["exception"])
        return result

    def loop(self) -> None:
        while True:
            message = self.reader.read()
            op = message.get("op")
            self.job = message.get("id", 0)
            if op == "cell":
                self.send({"op": "done", **self.cell(message)})
            elif op == "program":
                self.send({"op": "done", **self.program(message)})
            elif op == "shutdown":
                return
            else:
                self.send({"op": "done", "exception": f"RuntimeError: unknown kernel op {op!r}"})


class WorkspaceImporter:
    """The guarded ``__import__``: allowed modules (as read-only views), else ``.py`` files of the workspace
    (loaded with the sandbox builtins and the same blocked-name check as cells), else the contract's ImportError."""

    def __init__(self, root: str, views: policy.ModuleViews) -> None:
        self.root, self.views = root, views
        self.builtins: dict = {}
        self.modules: dict[str, types.ModuleType] = {}

    def __call__(self, name, globals=None, locals=None, fromlist=(), level=0):
        if level:
            package = (globals or {}).get("__package__") or ""
            if not package or package.partition(".")[0] not in self.modules:
                raise ImportError("relative imports only work inside a workspace package")
            base = package.rsplit(".", level - 1)[0] if level > 1 else package
            name = f"{base}.{name}" if name else base
        top = name.partition(".")[0]
        if self.views.allows(name) and top not in self.modules:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                raise ImportError(f"module {exc.name!r} is allowed in the policy sandbox but is not installed "
                                  f"here", name=exc.name) from None
            for item in fromlist or ():
                if item != "*" and not hasattr(module, item):
                    try:
                        importlib.import_module(f"{name}.{item}")
                    except ImportError:
                        pass
            return self.views.view(module if fromlist else sys.modules[top])
        if policy.workspace_module_exists(Path(self.root), top):
            module = self.load(name)
            for item in fromlist or ():
                if item != "*" and not hasattr(module, item) and hasattr(module, "__path__"):
                    try:
                        self.load(f"{name}.{item}")
                    except ImportError:
                        pass
            return module if fromlist else self.modules[top]
        raise policy.import_refusal(top)

    def load(self, name: str) -> types.ModuleType:
        if name in self.modules:
            return self.modules[name]
        parent = None
        if "." in name:
            parent = self.load(name.rpartition(".")[0])
        rel = Path(*name.split("."))
        path = Path(self.root) / rel.with_suffix(".py")
        is_package = not path.is_file()
        if is_package:
            path = Path(self.root) / rel / "__init__.py"
        if not path.is_file():
            raise ImportError(f"no module named {name!r} in the workspace", name=name)
        source = path.read_text()
        blocked = policy.blocked_names(source)
        if blocked:
            raise ImportError(policy.refusal_text(blocked, "module").replace("the module was not run",
                                                                             f"module {name} was not imported"))
        filename = str(path.relative_to(self.root))
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        module = types.ModuleType(name)
        module.__file__ = filename
        module.__package__ = name if is_package else name.rpartition(".")[0]
        if is_package:
            module.__path__ = [str(path.parent)]
        module.__builtins__ = self.builtins
        self.modules[name] = module
        try:
            exec(compile(source, filename, "exec"), module.__dict__)
        except BaseException:
            del self.modules[name]
            raise
        if parent is not None:
            object.__setattr__(parent, name.rpartition(".")[2], module)
        return module


def format_traceback(exc: BaseException) -> str:
    """The traceback of policy code (kernel frames left out), cut to its first and last ``TRACEBACK_CHARS / 2``."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    for part in _chain(te):
        part.stack = traceback.StackSummary.from_list(
            [f for f in part.stack if not os.path.abspath(f.filename).startswith(KERNEL_DIR)])
    half = policy.TRACEBACK_CHARS // 2
    return policy.trim_middle("".join(te.format()), half, half)


def _chain(te: traceback.TracebackException):
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        yield te
        te = te.__cause__ or te.__context__


def main() -> None:
    sys.meta_path.insert(0, _RosBlocker())
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)

    faulthandler.enable(file=sys.__stderr__)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reader = protocol.FrameReader(in_fd, proxy.result_factory())
    init = reader.read()
    worker = Worker(in_fd, out_fd, init, reader)
    report = isolation.isolate(worker.root, init.get("limits", {}))
    signal.signal(signal.SIGINT, _on_sigint)
    worker.send({"op": "ready", "pid": os.getpid(), "isolation": report})
    try:
        worker.loop()
    except protocol.PeerClosed:
        pass


if __name__ == "__main__":
    main()
