"""Where a process's CPU goes, measured, for ``benchmarks/episode_cpu.py``: opt-in, off unless asked for.

With the environment variable ``PYRUA_CPU_METER`` set to a folder, every pyrua_ros process that imports this
module (the driver node, the episode process of ``play``/``run``, an evaluation worker, the coordinator) writes
``<folder>/<role>-<pid>.json`` when it exits. Without it every call below is a no-op (a shared null context), so
the product pays nothing.

- :func:`section` charges the CPU time of the calling thread (``time.thread_time``) spent inside a ``with`` block
  to a named bucket. Sections nest exclusively: time inside an inner section is the inner one's only.
- :func:`render_section` is a section that also charges the CPU the GL driver's rasteriser threads (Mesa
  ``llvmpipe-N``, started by the render thread's context) spent meanwhile: a software render's pixels are drawn
  there, not in the thread that asked.
- :func:`add` charges CPU measured elsewhere (a child process tree: :func:`tree_cpu_s`).
- :func:`mark` records the process's CPU and the monotonic time at a moment (``ready``, an episode's phases, the
  steps of a boot and a shutdown: ``benchmarks/eval_timeline.py`` lines them up from the command's start to its
  exit).
- :func:`event` records a timed entry (a render with its CPU), so a report can join it with another process's
  marks (``time.monotonic`` is one system-wide clock on Linux).

At exit the record holds when the process started (``started_t``, from ``/proc/self/stat``) and ended
(``exited_t``) on the monotonic clock, the process's CPU (``getrusage``), its live threads' CPU
(``/proc/self/task/*/schedstat``, named by their Python thread name or, for native threads, their ``comm`` without
digits), the sections per thread, and so what was charged to no section, per thread group. The CPU of exited
threads that no section charged is the record's ``unaccounted_exited_s``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pathlib
import re
import resource
import sys
import threading
import time

ENV = "PYRUA_CPU_METER"
GL_THREAD = re.compile(r"llvmpipe-\d+")
_FOLDER = os.environ.get(ENV) or None
_NULL = contextlib.nullcontext()
_local = threading.local()
_lock = threading.Lock()
_threads: dict[int, tuple[str, dict[str, list[float]]]] = {}   # tid -> (thread name, {section: [cpu_s, n]})
_marks: list[dict] = []
_events: list[dict] = []
_gl_charged = [0.0]
_gl_acc: dict[str, list[float]] = {}   # section -> [GL rasteriser CPU charged to it, 0]
_gl_tids: list[int] | None = None
_started = [False]


def enabled() -> bool:
    """True when this process measures (``PYRUA_CPU_METER`` names a folder)."""
    return _FOLDER is not None


def _acc() -> dict[str, list[float]]:
    acc = getattr(_local, "acc", None)
    if acc is None:
        acc = _local.acc = {}
        _local.stack = []
        with _lock:
            _threads[threading.get_native_id()] = (threading.current_thread().name, acc)
    return acc


def _charge(name: str, cpu_s: float, count: int = 0) -> None:
    entry = _acc().setdefault(name, [0.0, 0])
    entry[0] += cpu_s
    entry[1] += count


class _Section:
    """A named, exclusive, per-thread CPU section (stateless: the state is on the thread's stack)."""

    __slots__ = ("gl", "name")

    def __init__(self, name: str, gl: bool = False):
        self.name, self.gl = name, gl

    def __enter__(self):
        now = time.thread_time()
        _acc()
        stack = _local.stack
        if stack:
            _charge(stack[-1][0], now - stack[-1][1])
        stack.append([self.name, now, _gl_cpu_s() if self.gl else 0.0, time.monotonic()])
        return self

    def __exit__(self, *_exc):
        now = time.thread_time()
        stack = _local.stack
        name, t0, gl0, wall0 = stack.pop()
        cpu = now - t0
        _charge(name, cpu, 1)
        if self.gl:   # the rasteriser threads' share: charged to the section, not to this thread
            gl = max(0.0, _gl_cpu_s() - gl0)
            with _lock:
                _gl_charged[0] += gl
                entry = _gl_acc.setdefault(name, [0.0, 0])
                entry[0] += gl
            _events.append({"t": round(wall0, 4), "section": name, "cpu_s": round(cpu + gl, 5)})
        if stack:
            stack[-1][1] = now
        return False


_sections: dict[tuple[str, bool], _Section] = {}


def section(name: str):
    """A ``with`` block whose CPU time (this thread's) is charged to ``name`` (a no-op when not measuring)."""
    return _section(name, gl=False)


def render_section(name: str):
    """:func:`section` plus the CPU of the GL rasteriser threads meanwhile (call it only from the one thread that
    renders), and a timed event per block, so a report can tell which phase of an episode asked for it."""
    return _section(name, gl=True)


def _section(name: str, *, gl: bool):
    """The one :class:`_Section` of ``(name, gl)`` in this process (the shared no-op when not measuring)."""
    if _FOLDER is None:
        return _NULL
    _start()
    found = _sections.get((name, gl))
    if found is None:
        found = _sections[(name, gl)] = _Section(name, gl=gl)
    return found


def add(name: str, cpu_s: float, count: int = 1) -> None:
    """Charge ``cpu_s`` measured elsewhere (another process) to ``name`` (not to any thread of this one)."""
    if _FOLDER is None:
        return
    _start()
    with _lock:
        entry = _external.setdefault(name, [0.0, 0])
        entry[0] += cpu_s
        entry[1] += count


_external: dict[str, list[float]] = {}


@contextlib.contextmanager
def children(name: str):
    """A ``with`` block whose child processes, reaped inside it (``RUSAGE_CHILDREN``), are charged to ``name``
    with :func:`add` (a subprocess the block starts and waits for: an encoder)."""
    if _FOLDER is None:
        yield
        return
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        yield
    finally:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        add(name, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def mark(name: str, **fields) -> None:
    """Record the process's CPU and the monotonic time now under ``name`` (with ``fields``)."""
    if _FOLDER is None:
        return
    _start()
    _marks.append({"name": name, "t": round(time.monotonic(), 4), "process_cpu_s": round(_process_cpu_s(), 4),
                   "sections": _section_totals(), **fields})


def event(name: str, **fields) -> None:
    """A timed entry (``time.monotonic``) with ``fields``."""
    if _FOLDER is None:
        return
    _events.append({"t": round(time.monotonic(), 4), "section": name, **fields})


# ---------------------------------------------------------------------------------------------- reading /proc
def _started_t() -> float | None:
    """When this process started, on the ``time.monotonic`` clock (``/proc/self/stat`` counts from boot)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()   # time suspended, if ever
        return round(ticks / os.sysconf("SC_CLK_TCK") - since_boot, 4)
    except (OSError, ValueError, IndexError):
        return None


def _process_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _thread_cpu_s(tid: int, pid: int | str = "self") -> float | None:
    """CPU time of thread ``tid`` [s] (``schedstat``: nanoseconds on the CPU), None when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _gl_cpu_s() -> float:
    global _gl_tids
    if _gl_tids is None or not _gl_tids:
        _gl_tids = [tid for tid, comm in _native_threads().items() if GL_THREAD.fullmatch(comm)]
    return sum(_thread_cpu_s(tid) or 0.0 for tid in _gl_tids)


def _native_threads() -> dict[int, str]:
    found = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/self/task/{entry.name}/comm") as f:
                    found[int(entry.name)] = f.read().strip()
    return found


def _stat_cpu_s(pid: int) -> tuple[float, list[int]]:
    """(utime + stime + cutime + cstime of ``pid`` [s], its children's pids); (0, []) when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = sum(int(v) for v in fields[11:15]) / ticks
    except (OSError, ValueError, IndexError):
        return 0.0, []
    children: list[int] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                with open(f"/proc/{pid}/task/{entry.name}/children") as f:
                    children.extend(int(c) for c in f.read().split())
    return cpu, children


def tree_cpu_s(pid: int) -> float:
    """CPU [s] of process ``pid`` and its live descendants, with the children each has reaped (0 when gone)."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        cpu, children = _stat_cpu_s(p)
        total += cpu
        todo.extend(children)
    return total


def _section_totals() -> dict[str, float]:
    """CPU charged to each section so far, every thread's and the GL threads' (as :func:`snapshot` adds them)."""
    totals: dict[str, float] = {}
    with _lock:
        accs = [acc for _name, acc in _threads.values()] + [_gl_acc, _external]
    for acc in accs:
        for _ in range(3):   # another thread may add a key meanwhile
            try:
                items = list(acc.items())
                break
            except RuntimeError:
                items = []
        for name, (cpu, _n) in items:
            totals[name] = round(totals.get(name, 0.0) + cpu, 5)
    return totals


# ---------------------------------------------------------------------------------------------- the record
def _group(name: str) -> str:
    return re.sub(r"[-_.:]?\d+$", "", re.sub(r"\d+", "N", name)) if not name.startswith("Thread-") else "Thread"


def snapshot() -> dict:
    """What this process measured so far (the record :func:`dump` writes)."""
    python = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    native = _native_threads()
    with _lock:
        threads = dict(_threads)
        external = {k: list(v) for k, v in _external.items()}
    sections: dict[str, list[float]] = {}
    charged_by_tid: dict[int, float] = {}
    for tid, (_name, acc) in threads.items():
        for name, (cpu, n) in list(acc.items()):
            entry = sections.setdefault(name, [0.0, 0])
            entry[0] += cpu
            entry[1] += n
            charged_by_tid[tid] = charged_by_tid.get(tid, 0.0) + cpu
    with _lock:
        for name, (cpu, _n) in _gl_acc.items():
            sections.setdefault(name, [0.0, 0])[0] += cpu
    groups: dict[str, dict[str, float]] = {}
    live_total = 0.0
    for tid, comm in native.items():
        cpu = _thread_cpu_s(tid)
        if cpu is None:
            continue
        name = python.get(tid) or threads.get(tid, (None,))[0] or comm
        group = "GL rasteriser (llvmpipe)" if GL_THREAD.fullmatch(comm) else _group(name)
        g = groups.setdefault(group, {"threads": 0, "cpu_s": 0.0, "charged_s": 0.0})
        g["threads"] += 1
        g["cpu_s"] += cpu
        charged = charged_by_tid.get(tid, 0.0)
        if group == "GL rasteriser (llvmpipe)":
            charged = 0.0
        g["charged_s"] += charged
        live_total += cpu
    gl = groups.get("GL rasteriser (llvmpipe)")
    if gl is not None:
        gl["charged_s"] = min(gl["cpu_s"], _gl_charged[0])
    process = _process_cpu_s()
    charged_total = sum(v[0] for v in sections.values())
    dead_charged = sum(cpu for tid, cpu in charged_by_tid.items() if tid not in native)
    for g in groups.values():
        g["uncharged_s"] = round(g["cpu_s"] - g["charged_s"], 4)
        g["cpu_s"], g["charged_s"] = round(g["cpu_s"], 4), round(g["charged_s"], 4)
    return {
        "role": _role(), "pid": os.getpid(), "argv": sys.argv[:3],
        "started_t": _started_t(), "exited_t": round(time.monotonic(), 4),
        "process_cpu_s": round(process, 4),
        "children_cpu_s": round(sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), k)
                                    for k in ("ru_utime", "ru_stime")), 4),
        "sections": {k: {"cpu_s": round(v[0], 5), "count": int(v[1])} for k, v in sorted(sections.items())},
        "external": {k: {"cpu_s": round(v[0], 5), "count": int(v[1])} for k, v in sorted(external.items())},
        "thread_groups": dict(sorted(groups.items())),
        "unaccounted_exited_s": round(max(0.0, process - live_total - dead_charged
                                          - (_gl_charged[0] - (gl["charged_s"] if gl else 0.0))), 4),
        "charged_s": round(charged_total, 4),
        "marks": list(_marks), "events": list(_events),
    }


def _role() -> str:
    argv0 = pathlib.Path(sys.argv[0] if sys.argv and sys.argv[0] else "python").stem
    if argv0 in ("main", "pyrualean", "pyrua-ros", "__main__") and len(sys.argv) > 1:
        return f"cli-{sys.argv[1]}"
    return argv0


def dump(folder: str | os.PathLike | None = None) -> pathlib.Path | None:
    """Write :func:`snapshot` to ``<folder>/<role>-<pid>.json`` (the ``PYRUA_CPU_METER`` folder by default)."""
    target = folder or _FOLDER
    if target is None:
        return None
    path = pathlib.Path(target) / f"{_role()}-{os.getpid()}.json"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(snapshot()))
        os.replace(tmp, path)
        return path
    return None


def _start() -> None:
    if _started[0] or _FOLDER is None:
        return
    _started[0] = True
    atexit.register(dump)


if _FOLDER is not None:
    _start()
    mark("imported")
