"""The BLAS our processes run: the kernel a driver's physics runs on (pinned so state digests compare across
CPUs), and one thread per process (:func:`one_thread`).

robosuite's OSC controller does its small matrix algebra through NumPy's BLAS (OpenBLAS in NumPy's wheels), and
OpenBLAS picks a kernel per CPU at load time (``SkylakeX`` on an AVX-512 Xeon, ``Haswell`` on an AVX2 EPYC): the
kernels sum in different orders, so the same program on the same instance takes bit-different trajectories on
the two machines (docs/DESIGN.md, "Reproducibility"). MuJoCo's own SIMD paths come fixed with its wheel.

``blas_kernel=haswell`` starts the driver process with ``OPENBLAS_CORETYPE=Haswell``: the AVX2 kernel every x86-64
CPU of these families (Intel since Haswell, AMD since Zen) runs, so a state digest made there compares with one
made on any such machine. The variable must be set before NumPy loads OpenBLAS, so it is a property of a process's
start (:func:`environment`), never switched inside a running process; :func:`require` checks a running process.
``native`` (the default) leaves the environment as it is.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

KERNELS = {"native": None, "haswell": "Haswell"}   # setting value -> OPENBLAS_CORETYPE
ENV_VAR = "OPENBLAS_CORETYPE"
THREADS_VAR = "OPENBLAS_NUM_THREADS"


class BlasKernelError(RuntimeError):
    """The running process's BLAS kernel is not the one asked for (it was started without the pin)."""


def one_thread() -> None:
    """Run OpenBLAS on one thread in this process and in every process it starts, unless
    ``OPENBLAS_NUM_THREADS`` already says how many (a user's own setting stands).

    Called first by every node, the CLI and an evaluation actor. Our processes multiply large arrays only on the
    side (the fake arm's ray caster shades a 1024 px image as a 10^6 x 3 by 3 product; depth images become world
    points): memory-bound work a second thread barely speeds up, while each OpenBLAS thread spins
    (``sched_yield``) after every call. On two cores, where an episode's driver, agent and renders already run side
    by side, the spinning took CPU from them: a fake-arm ``play`` used 4.1-4.3 CPU s with the default (one thread
    per core), 3.4 with one. The small matrices of robosuite's controller run on one thread either way, so no state
    digest changes. Each of the three OpenBLAS copies a driver loads (NumPy's, SciPy's, OpenCV's) reads the
    variable when it loads; one already loaded (NumPy imported before this call, as in a Ray worker) is set through
    threadpoolctl instead.
    """
    if THREADS_VAR in os.environ:
        return
    os.environ[THREADS_VAR] = "1"
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_limits  # noqa: PLC0415 (optional: threadpoolctl)
        except ImportError:   # a venv without it (the cross-distro one): its children still start on one thread
            return
        threadpool_limits(1, user_api="blas")


def environment(kernel: str) -> dict[str, str]:
    """Environment variables that start a process on ``kernel`` (``{}`` for ``native``)."""
    if kernel not in KERNELS:
        raise ValueError(f"blas_kernel must be one of {', '.join(KERNELS)}; got {kernel!r}")
    core = KERNELS[kernel]
    return {ENV_VAR: core} if core else {}


def in_use() -> str:
    """The BLAS this process runs NumPy on, e.g. ``"openblas 0.3.31 SkylakeX"`` (``"unknown"`` when not
    inspectable). Imports NumPy, so OpenBLAS is loaded and its kernel fixed."""
    import numpy  # noqa: PLC0415 (numpy: bare Python; it loads the BLAS that threadpoolctl inspects)

    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415 (optional: threadpoolctl)
    except ImportError:   # a venv without it (the cross-distro one): the kernel is not known, so say so
        return "unknown"

    # NumPy's own BLAS (in numpy.libs/ of a wheel, or inside numpy/): SciPy ships a second OpenBLAS of another
    # version, and threadpoolctl lists the two in no fixed order, so "the first BLAS" can differ between processes
    site = Path(numpy.__file__).resolve().parent.parent
    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    blas.sort(key=lambda lib: not _ships_with_numpy(Path(str(lib.get("filepath", ""))), site))
    if not blas:
        return "unknown"
    version = str(blas[0].get("version") or "").split(".")
    return " ".join(x for x in (str(blas[0].get("internal_api", "blas")), ".".join(version[:3]),
                                str(blas[0].get("architecture") or "")) if x)


def _ships_with_numpy(library: Path, site: Path) -> bool:
    """Whether ``library`` is NumPy's (under ``site``/numpy or ``site``/numpy.libs)."""
    library = library.resolve()
    return library.is_relative_to(site) and library.relative_to(site).parts[0] in ("numpy", "numpy.libs")


def digest_scope() -> str:
    """Where a state digest made by this process compares: the BLAS kernel and the machine architecture, e.g.
    ``"openblas 0.3.31 Haswell on x86_64"``. Two digests compare bit for bit only under the same scope (and the
    same wheels); a ``native`` kernel other than Haswell names a CPU family, not a portable kernel."""
    return f"{in_use()} on {platform.machine()}"


def require(kernel: str) -> None:
    """BlasKernelError unless this process runs on ``kernel`` (``native``: anything goes)."""
    core = KERNELS.get(kernel, "?")
    if core is None:
        return
    running = in_use()
    if not running.endswith(f" {core}"):
        raise BlasKernelError(f"blas_kernel {kernel} needs {ENV_VAR}={core} set before Python starts; this process "
                              f"runs {running} (start it with `{ENV_VAR}={core} ...`)")
