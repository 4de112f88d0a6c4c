"""``OUT/eval.json``: what an evaluation directory holds, so a re-run resumes it instead of mixing runs.

The manifest records the agent options (``play``'s settings by schema leaf name, every one except the per-episode
ones), the code version (package version and git commit when run from a checkout), every instance ever requested,
and one entry per invocation (start/end, command line, backend, workers, how many episodes were skipped, run or
interrupted).

Resuming compares the **identity** options and the code version with the new command's: any difference is refused
with the keys that differ (``--allow-code-change`` accepts a different commit). Options that say only where or how
to reach a server, or are recorded without effect (``base_url``, ``api_key_env``, request timeouts and retries,
``preflight``, ``cuda_device``, ``rpent_root``, ``python``, ``libero_type``, ``progress``), are recorded but not
compared, so a restarted model server on another port does not orphan a half-done evaluation.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from pyrua_ros.records.provenance import code_version
from pyrua_ros.records.records import now_iso, write_json

SCHEMA = "pyrua-ros-eval-v1"
FILENAME = "eval.json"
#: play settings (schema leaf names) an evaluation sets per episode (the instance and its run directory) or decides
#: itself (a run directory is moved aside or kept by the evaluation, not by --overwrite / --resume): not flags of eval
PER_EPISODE = ("out", "suite", "task", "seed", "overwrite", "resume")
NOT_IDENTITY = ("base_url", "api_key_env", "openai_request_timeout_s", "openai_max_retries", "preflight",
                "cuda_device", "rpent_root", "python", "libero_type", "progress")


class ManifestMismatch(ValueError):
    """The evaluation directory was made by different options or code; the message lists the differences."""


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, pathlib.PurePath) else value


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(identity, recorded-only) agent options, per-episode keys dropped, values made JSON-able."""
    identity, recorded = {}, {}
    for key in sorted(options):
        if key in PER_EPISODE:
            continue
        (recorded if key in NOT_IDENTITY else identity)[key] = _jsonable(options[key])
    return identity, recorded


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [f"{key}: {old.get(key)!r} then, {new.get(key)!r} now"
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


class Manifest:
    """The manifest of one evaluation directory; :meth:`open` creates it or checks a resume against it."""

    def __init__(self, out: pathlib.Path, data: dict[str, Any]):
        self.out = pathlib.Path(out)
        self.data = data

    @property
    def path(self) -> pathlib.Path:
        return self.out / FILENAME

    @classmethod
    def open(cls, out: pathlib.Path, options: dict[str, Any], *, allow_code_change: bool = False) -> Manifest:
        """Load ``out/eval.json`` and check it matches (ManifestMismatch otherwise), or start a new one."""
        out = pathlib.Path(out)
        identity, recorded = split_options(options)
        code = code_version()
        path = out / FILENAME
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ManifestMismatch(f"{path} is unreadable ({exc}); use a new --out or remove it") from None
            if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                raise ManifestMismatch(f"{path} is not an evaluation manifest (schema {SCHEMA}); use a new --out")
            diffs = _differences(data.get("options", {}), identity)
            if diffs:
                raise ManifestMismatch(f"{out} holds an evaluation with other agent options ({'; '.join(diffs)}); "
                                       "resume it with the same options or use a new --out")
            old_code = data.get("code", {})
            code_diffs = [f"{k}: {old_code.get(k)!r} then, {code.get(k)!r} now"
                          for k in ("pyrua_ros", "git_commit") if old_code.get(k) != code.get(k)]
            if code_diffs and not allow_code_change:
                raise ManifestMismatch(f"{out} was evaluated by other code ({'; '.join(code_diffs)}); use a new "
                                       "--out, or --allow-code-change to mix them")
            data.setdefault("code_history", [])
            if code_diffs:
                data["code_history"].append({**code, "since": now_iso()})
            data["recorded_options"] = recorded
            return cls(out, data)
        if out.exists() and not out.is_dir():
            raise ManifestMismatch(f"--out {out} exists and is not a directory")
        if out.is_dir() and any(p.name != FILENAME for p in out.iterdir()):
            raise ManifestMismatch(f"--out {out} is a non-empty directory without {FILENAME}; use a new or empty "
                                   "--out (an evaluation never writes over other files)")
        data = {"schema": SCHEMA, "created_at": now_iso(), "code": code, "options": identity,
                "recorded_options": recorded, "instances": [], "runs": []}
        return cls(out, data)

    def begin_run(self, instances: list[str], *, argv: list[str], backend: str, workers: int,
                  skipped: int) -> dict[str, Any]:
        """Record a new invocation (and the instances it asked for); written at once."""
        known = set(self.data["instances"])
        self.data["instances"] += [key for key in instances if key not in known]
        run = {"started_at": now_iso(), "argv": list(argv), "backend": backend, "workers": workers,
               "requested": len(instances), "skipped_finished": skipped, "episodes_run": 0, "ended_at": None,
               "outcome": "running"}
        self.data["runs"].append(run)
        self.save()
        return run

    def end_run(self, run: dict[str, Any], *, outcome: str, episodes_run: int) -> None:
        run.update(ended_at=now_iso(), outcome=outcome, episodes_run=episodes_run)
        self.save()

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.path, self.data)
