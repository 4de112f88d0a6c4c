"""What a kernel is given and gives back: its limits, the outcome of a cell or a program, and the errors of a
kernel that cannot start.
"""

from __future__ import annotations

import dataclasses

from pyrua_ros.kernel import sandbox


@dataclasses.dataclass(frozen=True)
class KernelLimits:
    """Limits of one kernel child. ``memory_bytes``: RLIMIT_AS (address space, bytes). ``cpu_s``: RLIMIT_CPU,
    CPU seconds over the life of one child (exceeding it kills the child; the next cell gets a fresh one).
    ``file_size_bytes``: RLIMIT_FSIZE (largest file a write may make). ``open_files``: RLIMIT_NOFILE.
    ``processes``: RLIMIT_NPROC (0 = no fork and no threads; None = not set, the PID namespace alone contains
    what the kernel starts). ``workspace_bytes``: size of the workspace tmpfs (the kernel's whole writable
    space besides a 16 MiB /tmp); ``workspace_inodes``: the files and folders it may hold (root only: see
    ``mounts.py``). ``interrupt_grace_s``: after a cell's timeout the child gets SIGINT, and is
    killed if the cell has not stopped this many seconds later. ``start_timeout_s``: deadline for a child to
    start. ``max_images`` / ``max_image_bytes``: ``display()`` images kept per cell, and the largest PNG accepted.
    ``max_frame_bytes``: largest frame accepted from the child. ``landlock``: confine the child's filesystem
    access with Landlock where the Linux kernel offers it (defence in depth under bubblewrap).
    ``cpus``: CPUs the kernel may use at once, and ``memory_bytes`` its memory, where a cgroup v2 can be made
    (``cgroup.py``; rlimits only otherwise, said in ``description``). ``record_reserve_bytes``: free space the
    copy of the workspace always leaves on the run directory's file system, for the host's own records (files
    that would take it are not copied, and the model is told)."""

    memory_bytes: int = 4 * 2**30
    cpu_s: int = 1800
    file_size_bytes: int = 256 * 2**20
    open_files: int = 256
    processes: int | None = 0
    workspace_bytes: int = 256 * 2**20
    workspace_inodes: int = 16384
    interrupt_grace_s: float = 2.0
    start_timeout_s: float = 60.0
    max_images: int = 32
    max_image_bytes: int = 16 * 2**20
    max_frame_bytes: int = 64 * 2**20
    landlock: bool = True
    record_reserve_bytes: int = 32 * 2**20
    cpus: float = 1.0

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "cpu_s", "file_size_bytes", "open_files", "workspace_bytes", "workspace_inodes",
                     "max_images", "max_image_bytes", "max_frame_bytes"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"KernelLimits.{name} must be positive, got {getattr(self, name)!r}")
        if self.processes is not None and self.processes < 0:
            raise ValueError(f"KernelLimits.processes must be >= 0 or None, got {self.processes!r}")
        if self.interrupt_grace_s <= 0 or self.start_timeout_s <= 0:
            raise ValueError("KernelLimits.interrupt_grace_s and start_timeout_s must be positive")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CodeOutcome:
    """What running model code did, a cell's or a program's. ``stdout`` / ``stderr``: captured text, trimmed to
    first 4000 + last 4000 chars. ``exception``: traceback text (first + last 2000 chars), ``"SystemExit: ..."``,
    the sandbox refusal, or a timeout / kernel-death message; None if the code ran through. ``elapsed_s``: wall
    clock, 0.01 s. ``images``: PNG bytes from ``display()``, in order (``display_0``, ``display_1`` ...).
    ``sandbox_flags``: static audit flags. ``refused``: the code was not run (it named a blocked name, or it does
    not parse: ``exception`` is the ``SyntaxError``). ``restarted``: the kernel child was replaced after it (its
    namespace is gone). ``notice``: text for the model when ``restarted``. All text is safe to write (no lone
    surrogates). Fields are given by name."""

    exception: str | None = None
    stdout: str = ""
    stderr: str = ""
    elapsed_s: float = 0.0
    images: list[bytes] = dataclasses.field(default_factory=list)
    sandbox_flags: list[str] = dataclasses.field(default_factory=list)
    refused: bool = False
    restarted: bool = False
    notice: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellOutcome(CodeOutcome):
    """What one cell did (the :class:`CodeOutcome` fields, and:). ``cell``: 1-based index (source saved as
    ``workspace/cell_NNN.py``). ``value``: repr of a non-None trailing expression (first + last 2000 chars) or
    None. ``episode_finished``: the ``EpisodeFinished`` reason (only when the host raised it during this cell), or
    None."""

    cell: int
    value: str | None = None
    episode_finished: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProgramOutcome(CodeOutcome):
    """What one ``run_program`` did (contract 3.4, program arm; the :class:`CodeOutcome` fields, and:).
    ``program``: 1-based index. ``file``: workspace file that was run (``program_NN.py`` for code). ``code``: the
    source that was run (read once, from the same fd that was checked). ``status``: ``completed`` (run returned),
    ``finished`` (``EpisodeFinished``; ``reason`` set), ``error`` (``exception`` set), ``timeout`` (ran past
    ``timeout_s``). ``loaded``: False when the program did not load (its module code raised, or it defines no
    callable ``run``; ``exception`` is the reference's one-line ``PolicyLoadError`` text)."""

    program: int
    file: str
    status: str
    reason: str | None = None
    code: str = ""
    loaded: bool = True


class KernelStartError(RuntimeError):
    """The kernel child could not be started (infrastructure, not the model's fault)."""


class SandboxUnavailable(KernelStartError, sandbox.SandboxUnavailable):
    """Isolation was asked for and cannot be set up on this machine (one line says why and what to do)."""
