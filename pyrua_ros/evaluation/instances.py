"""Instance sets: which (suite, task, seed) episodes an evaluation runs, and where each one's run directory lives.

An instance set comes from flags (suites x tasks x seeds) or from a YAML/JSON file. Suites may be named sets:

- ``libero``: the four standard LIBERO suites (spatial, object, goal, 10);
- ``libero_pro``: the 16 LIBERO-PRO suites; ``libero_pro_<lan|object|swap|task>``: the four of one perturbation;
- any suite name the driver serves (``libero_goal_swap``, ``libero_90``, ``fake_table``, ...).

Task and seed lists are written ``0-4,7`` (ranges inclusive); tasks default to ``all`` of each suite and seeds to
``0`` (the benchmark's "one episode per task instance"). A file is a list of entries, or ``{instances: [...]}``;
an entry is ``{suite, task, seed}`` where suite may be a named set and task/seed an integer, a list or such a
string, e.g. ``- {suite: libero_goal, task: 0-9, seed: 0-2}``.

Episode ``(suite, task, seed)`` writes ``OUT/<suite>/<task>/<seed>/``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pyrua_ros.agent.run.validate import check_episode, check_input_path
from pyrua_ros.settings.schema import SettingError
from pyrua_ros.sim_interfaces.drivers import DRIVERS

STANDARD = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
PERTURBATIONS = ("lan", "object", "swap", "task")
NAMED_SETS: dict[str, tuple[str, ...]] = {
    "libero": STANDARD,
    "libero_pro": tuple(f"{s}_{p}" for s in STANDARD for p in PERTURBATIONS),
    **{f"libero_pro_{p}": tuple(f"{s}_{p}" for s in STANDARD) for p in PERTURBATIONS},
}
ALL = "all"
MAX_INDICES = 100_000    # task or seed values one list may name (an evaluation of more is a typo, not a plan)


@dataclasses.dataclass(frozen=True, order=True)
class Instance:
    """One episode of an evaluation: the suite, task index and seed (official init state ``seed % n``)."""

    suite: str
    task: int
    seed: int

    @property
    def key(self) -> str:
        """``suite:task:seed``, the instance's name in progress lines and the manifest."""
        return f"{self.suite}:{self.task}:{self.seed}"

    def run_dir(self, out: Path) -> Path:
        """The fixed place of this episode's run directory under the evaluation's ``out``."""
        return Path(out) / self.suite / str(self.task) / str(self.seed)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Instance:
        return cls(str(data["suite"]), int(data["task"]), int(data["seed"]))


def parse_index_list(spec: Any, what: str, *, upper: int | None = None) -> list[int]:
    """``"0-4,7"`` / ``[0, 3]`` / ``5`` / ``"all"`` (needs ``upper``) -> sorted unique ints; SettingError else."""
    if isinstance(spec, bool):
        raise SettingError(f"{what} {spec!r} is not an index list; write e.g. 0-4,7")
    if isinstance(spec, int):
        return [spec]
    if isinstance(spec, list | tuple):
        return sorted({v for item in spec for v in parse_index_list(item, what, upper=upper)})
    text = str(spec).strip()
    if text == ALL:
        if upper is None:
            raise SettingError(f"{what} 'all' needs a suite with a known number of tasks; list them, e.g. 0-9")
        return list(range(upper))
    values: set[int] = set()
    named = 0
    for part in text.split(","):
        match = re.fullmatch(r"\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?", part)
        if not match:
            raise SettingError(f"{what} {text!r} is not an index list; write e.g. 0-4,7 or {ALL}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise SettingError(f"{what} range {part.strip()!r} is empty; write low-high")
        named += high - low + 1
        if named > MAX_INDICES:   # counted before anything is built: "0-400000000" is refused, not materialised
            raise SettingError(f"{what} {text!r} names more than {MAX_INDICES} values; at most {MAX_INDICES} per "
                               "list (split a larger evaluation into several --out)")
        values.update(range(low, high + 1))
    return sorted(values)


def expand_suites(names: Iterable[str]) -> list[str]:
    """Suite names with named sets expanded, in order, without repeats."""
    out: list[str] = []
    for name in names:
        for suite in NAMED_SETS.get(name, (name,)):
            if suite not in out:
                out.append(suite)
    return out


def build_instances(driver: str, suites: Sequence[str], tasks: Any = ALL, seeds: Any = "0") -> list[Instance]:
    """suites x tasks x seeds, validated by ``play``'s own check against what ``driver`` serves (SettingError
    naming the valid values)."""
    seed_list = parse_index_list(seeds, "--seed")
    expanded = expand_suites(suites)
    served = DRIVERS[driver].suites if driver in DRIVERS else None   # None: the external driver's business
    for suite in expanded:   # every suite name and seed first: an unknown one is refused before any task list
        for seed in seed_list:
            check_episode(suite, 0, seed, driver)
    instances: list[Instance] = []
    for suite in expanded:
        task_list = parse_index_list(tasks, "--task", upper=(served or {}).get(suite))
        if len(instances) + len(task_list) * len(seed_list) > MAX_INDICES:
            raise SettingError(f"the evaluation would run more than {MAX_INDICES} episodes (suites x tasks x seeds); "
                               "split it into several --out")
        for task in task_list:
            for seed in seed_list:
                check_episode(suite, task, seed, driver)
                instances.append(Instance(suite, task, seed))
    return instances


def _read_file(path: Path) -> Any:
    check_input_path("--instances", path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingError(f"--instances {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        if Path(path).suffix.lower() == ".json":
            return json.loads(text)
        import yaml  # noqa: PLC0415 (yaml: a YAML file only)

        return yaml.safe_load(text)
    except Exception as exc:   # json.JSONDecodeError (a ValueError) or yaml.YAMLError
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SettingError(f"the instance file {path} is not valid YAML/JSON: {first}") from None


def load_instance_file(path: Path, driver: str) -> list[Instance]:
    """The instances a YAML/JSON file lists (see the module docstring), validated, without duplicates."""
    data = _read_file(path)
    if isinstance(data, dict) and "instances" in data:
        data = data["instances"]
    if not isinstance(data, list) or not data:
        raise SettingError(f"the instance file {path} must hold a non-empty list of {{suite, task, seed}} entries "
                             "(or one under 'instances')")
    out: list[Instance] = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "suite" not in entry:
            raise SettingError(f"{path}: entry {i} must be a mapping with suite, task (default all) and seed "
                                 f"(default 0); got {entry!r}")
        unknown = sorted(set(entry) - {"suite", "task", "seed"})
        if unknown:
            raise SettingError(f"{path}: entry {i} has unknown key(s) {unknown}; valid keys: suite, task, seed")
        out += build_instances(driver, [str(entry["suite"])], entry.get("task", ALL), entry.get("seed", "0"))
    return dedupe(out)


def dedupe(instances: Iterable[Instance]) -> list[Instance]:
    """Instances in first-seen order without repeats."""
    seen: dict[Instance, None] = {}
    for instance in instances:
        seen.setdefault(instance, None)
    return list(seen)


__all__ = ["ALL", "NAMED_SETS", "Instance", "build_instances", "dedupe", "expand_suites", "load_instance_file",
           "parse_index_list"]
