"""Checks before anything boots: the episode, the files a run reads, the run directory and the model server.

Every check raises :class:`~pyrua_ros.settings.schema.SettingError` with one line that names the flag and what is
valid, and each is meant to finish well under a second (the endpoint check is one short GET). ``play``, ``run``,
``generate``, the agent node and ``eval`` call the same functions:

- :func:`check_episode` — suite, task range and seed against what the driver serves;
- :func:`check_sandbox` — the cell kernel's bubblewrap boundary can be set up (unless ``--unsafe-sandbox``);
- :func:`check_input_path` — a file or folder a run reads (replay source, guides, policy, card, instance files);
- :func:`check_vla_server_cmd` — the program of ``--vla-server-cmd`` exists (the server is waited for at boot);
- :func:`check_reference_root` — ``--reference-root`` / ``$PYRUALEAN_REFERENCE_ROOT`` holds PyRUA-Lean sources;
- :func:`check_cli_runtime` — ``--runtime codex|claude``: the CLI executable, ``--codex-home``, the key variable;
- :func:`claim_run_directory` — the run-directory rules: a non-empty ``--out`` is refused unless ``--overwrite``
  (moved aside to ``OUT.prev-<time>``) or ``--resume`` (a finished run is kept; an unfinished one moved aside);
- :func:`check_model_server` — one GET of ``<base-url>/models``: any HTTP answer is a server (skipped with
  ``--no-preflight``);
- :func:`check_ray_address` — ``eval --backend ray --address``: the Ray head accepts a connection.
"""

from __future__ import annotations

import dataclasses
import dataclasses as dc
import http.client
import json
import os
import pathlib
import shlex
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request

from pyrua_ros.agent import runtimes
from pyrua_ros.agent.prompting import guides as guides_mod
from pyrua_ros.agent.prompting.prompt import reference_root_from_env
from pyrua_ros.agent.prompting.reference_source import ReferenceSource
from pyrua_ros.records import bounded
from pyrua_ros.settings import outcomes
from pyrua_ros.settings.model import key_from_env
from pyrua_ros.settings.modes import CODE_ARMS
from pyrua_ros.settings.paths import check_input_path
from pyrua_ros.settings.runtimes import RUNTIMES
from pyrua_ros.settings.schema import SettingError
from pyrua_ros.sim_interfaces import episodes

PREFLIGHT_TIMEOUT_S = 2.0     # one GET of the models endpoint; a healthy local server answers in milliseconds


def check_episode(suite: str, task: int, seed: int, driver: str) -> None:
    """The suite, task and seed are ones the driver serves (see :mod:`pyrua_ros.sim_interfaces.episodes`)."""
    try:
        episodes.check_episode(suite, task, seed, driver)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


def check_vla_server_cmd(command: str | None) -> None:
    """``--vla-server-cmd`` splits like a shell command line and its program is an executable (a path or on PATH)."""
    if command is None:
        return
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise SettingError(f"--vla-server-cmd {command!r}: {exc} (quote it like a shell command line)") from None
    if not argv:
        raise SettingError("--vla-server-cmd is empty; give the command that starts the policy server")
    if shutil.which(argv[0]) is None:
        raise SettingError(f"--vla-server-cmd: {argv[0]!r} is not an executable program (a path or a name on PATH); "
                           "wrap pipes and shell syntax in sh -c '...'")


def check_reference_root(root) -> None:
    """``root`` (else ``$PYRUALEAN_REFERENCE_ROOT``), when set, holds PyRUA-Lean's sources (a checkout or the
    installed ``pyrualean`` package folder)."""

    root = reference_root_from_env(str(root) if root else None)
    if root is None:
        return
    try:
        ReferenceSource.locate(root)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


def check_sandbox(sandbox) -> None:
    """The cell kernel's bubblewrap boundary can be set up here (a
    :class:`~pyrua_ros.settings.config.SandboxSettings`; nothing to check with ``--unsafe-sandbox``): a run
    that would fail at its first cell is refused before boot."""
    if sandbox.unsafe_sandbox:
        return
    from pyrua_ros.kernel import sandbox as boundary  # noqa: PLC0415 (on every CLI call's parse path)

    why = boundary.problem()
    if why:
        raise SettingError(f"{why}; pass --unsafe-sandbox to run cells without it (recorded in result.json)")


def check_play(cfg) -> None:
    """Every local check of a :class:`~pyrua_ros.settings.config.PlayConfig` (no network, no run directory)."""
    e, agent = cfg.episode, cfg.agent
    check_episode(e.suite, e.task, e.seed, e.driver)
    spec = RUNTIMES[agent.runtime] if agent.runtime in RUNTIMES else None   # None: pyrua-ros mcp's client
    if agent.arm in CODE_ARMS or (spec is not None and spec.kind == "cli"):   # a kernel, or a CLI beside it
        check_sandbox(cfg.sandbox)
    check_vla_server_cmd(e.vla_server_cmd)
    check_reference_root(agent.reference_root)
    if spec is not None:
        runtimes.check_config(cfg)   # the runtime's own checks (the replay source)
    check_input_path("--guides-dir", agent.guides_dir, kind="dir")
    if agent.guides_dir is not None and guides_mod.missing_guides(agent.guides_dir):
        raise SettingError(f"--guides-dir {agent.guides_dir}: lacks "
                           f"{', '.join(guides_mod.missing_guides(agent.guides_dir))} (the guides note names "
                           f"{', '.join(guides_mod.GUIDE_NAMES)})")
    if spec is not None and spec.kind == "cli":
        check_cli_runtime(agent.runtime, cfg.cli, cfg.model)


def check_cli_runtime(runtime: str, cli, model) -> str:
    """A CLI runtime (``--runtime codex|claude``): the executable to run exists (its flag, e.g. ``--codex-bin``,
    else the pinned one setup installed, else PATH), its home folder (``--codex-home``) is a folder if it exists,
    and ``--api-key-env`` is set. Returns the executable's path."""
    from pyrua_ros.agent.runtimes.cli_agent import find_cli  # noqa: PLC0415 (on every CLI call's parse path)

    spec = RUNTIMES[runtime]
    try:
        executable = find_cli(spec.binary, getattr(cli, spec.executable_setting))
    except FileNotFoundError as exc:
        raise SettingError(f"{spec.executable_flag}: {exc}") from None
    home = getattr(cli, spec.home_setting) if spec.home_setting else None
    if home is not None:
        home = pathlib.Path(home)
        if home.exists() and not home.is_dir():
            raise SettingError(f"--{spec.home_setting.replace('_', '-')} {home}: not a folder")
    try:
        key_from_env(model.api_key_env)
    except ValueError as exc:
        raise SettingError(str(exc)) from None
    return executable


# ---------------------------------------------------------------------------------------------- run directory


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """What :func:`claim_run_directory` decided: ``action`` is ``new`` (empty or absent), ``moved`` (an earlier run
    moved to ``previous``) or ``keep`` (``--resume`` and the run there already ran to its end: do not run)."""

    path: pathlib.Path
    action: str
    previous: pathlib.Path | None = None
    result: dict | None = None


def _contents(path: pathlib.Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def _recorded_result(path: pathlib.Path) -> dict | None:
    """The ``result.json`` object of the folder ``path`` when it is a run directory (a regular ``result.json``,
    not a link, holding a JSON object with a ``status``), else None. Read with ``records.bounded``."""
    try:
        data = bounded.read_file(path / "result.json")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("status"), str) else None


def _finished_result(path: pathlib.Path) -> dict | None:
    data = _recorded_result(path)
    if data is None:
        return None
    return data if outcomes.is_final(data.get("status"), data.get("reason")) else None   # ran to its end


def check_run_directory(flag: str, out: pathlib.Path, *, overwrite: bool = False, resume: bool | None = False,
                        ) -> str:
    """Without touching anything: ``new``, ``move`` or ``keep`` for ``out``; SettingError when it is refused.
    ``resume=None``: the command has no ``--resume``."""
    out = pathlib.Path(out)
    if out.exists() and not out.is_dir():
        raise SettingError(f"{flag} {out} is a file; a run directory must be a folder (or not exist yet)")
    parent = next((p for p in (out, *out.parents) if p.exists()), pathlib.Path("."))
    if not parent.is_dir() or not _writable(parent) or _pseudo_file_system(parent):
        raise SettingError(f"{flag} {out}: {parent} is not a writable folder")
    if not out.exists() or not _contents(out):
        return "new"
    if (resume or overwrite) and _recorded_result(out) is None:   # (--out ~ --overwrite moved the home folder)
        shown = _contents(out)
        raise SettingError(f"{flag} {out} is not empty ({', '.join(shown[:4])}{', ...' if len(shown) > 4 else ''}) "
                           f"and is not a run directory (no result.json of an earlier run): "
                           f"{'--resume' if resume else '--overwrite'} only moves an earlier run aside; choose "
                           f"another directory")
    if resume:
        return "keep" if _finished_result(out) is not None else "move"
    if overwrite:
        return "move"
    shown = _contents(out)
    listing = ", ".join(shown[:4]) + (", ..." if len(shown) > 4 else "")
    resume_hint = "" if resume is None else ", --resume to keep a finished run"
    raise SettingError(f"{flag} {out} is not empty ({listing}); pass --overwrite to move it aside to "
                       f"{out.name}.prev-<time>{resume_hint}, or choose another directory")


PSEUDO_ROOTS = ("/proc", "/sys")   # kernel file systems: no run directory can live there


def _pseudo_file_system(path: pathlib.Path) -> bool:
    resolved = str(pathlib.Path(path).resolve())
    return any(resolved == root or resolved.startswith(root + "/") for root in PSEUDO_ROOTS)


def _writable(path: pathlib.Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def claim_run_directory(flag: str, out: pathlib.Path, *, overwrite: bool = False, resume: bool | None = False,
                        ) -> RunDirectory:
    """Apply the run-directory rules (see the module docstring) and return what was done."""
    out = pathlib.Path(out)
    action = check_run_directory(flag, out, overwrite=overwrite, resume=resume)
    if action == "keep":
        return RunDirectory(out, "keep", result=_finished_result(out))
    try:
        if action == "move":
            previous = out.with_name(f"{out.name}.prev-{time.strftime('%Y%m%d-%H%M%S')}")
            n = 1
            while previous.exists():
                previous = out.with_name(f"{out.name}.prev-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
                n += 1
            out.rename(previous)
            out.mkdir(parents=True)
            return RunDirectory(out, "moved", previous=previous)
        out.mkdir(parents=True, exist_ok=True)
        probe_writable(flag, out)
    except OSError as exc:   # a folder the checks could not foresee: /sys, a read-only mount, a race
        raise SettingError(f"{flag} {out}: cannot be used as a run directory "
                           f"({exc.strerror or type(exc).__name__})") from None
    return RunDirectory(out, "new")


def probe_writable(flag: str, folder: pathlib.Path) -> None:
    """Create and remove one file in ``folder``: OSError when files cannot be made there (a pseudo file system such
    as /sys accepts no files even for root, whom ``os.access`` always answers yes)."""

    with tempfile.NamedTemporaryFile(dir=folder, prefix=".pyrua-probe-"):
        pass


# ---------------------------------------------------------------------------------------------- model server


def check_model_server(model, *, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> list[str]:
    """One GET of ``<base-url>/models``: SettingError when no server answers at all (a connection that fails, or
    something that does not speak HTTP) and when it refuses the API key (401/403: every model request of the
    episode would fail the same way, after the simulator booted; ``--no-preflight`` skips the check for a gateway
    that guards ``/models`` alone). Any other HTTP answer means a server is there and the episode boots: 404, 405,
    501 or any other error give a warning that ``/models`` is missing (a server that serves chat completions
    only). ``--model`` is checked only when a list of models comes back. Returns the warnings."""
    url = model.endpoint().rstrip("/") + "/models"
    try:
        key = model.api_key()
    except ValueError as exc:
        raise SettingError(str(exc)) from None
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}", "Accept": "application/json"})
    skip = "; or pass --no-preflight to skip this check"
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(1 << 20)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise SettingError(f"--base-url {model.base_url}: the model server refused the API key (GET {url} "
                               f"answered HTTP {exc.code}); check --api-key-env{skip}") from None
        # a server is there; one without a models endpoint still serves chat completions
        return [f"the model server at {model.base_url} has no models endpoint (GET {url} answered HTTP "
                f"{exc.code}); --model {model.model} not checked"]
    except http.client.HTTPException as exc:   # something answers, but not HTTP
        raise SettingError(f"--base-url {model.base_url}: what answers at {url} does not speak HTTP "
                           f"({type(exc).__name__}){skip}") from None
    except (urllib.error.URLError, OSError) as exc:
        cause = getattr(exc, "reason", exc)
        text = getattr(cause, "strerror", None) or str(cause)
        raise SettingError(f"--base-url {model.base_url}: no model server answers at {url} ({text}); start it or fix "
                           f"the URL{skip}") from None
    try:
        served = [m.get("id") for m in json.loads(body).get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return [f"the models endpoint of {model.base_url} did not answer JSON; not checked"]
    if served and model.model not in served:
        return [f"the model server lists {', '.join(map(str, served))}, not --model {model.model} (sent anyway; "
                "SGLang serves its one model under any name)"]
    return []


def check_ray_address(address: str, *, timeout_s: float = 0.5) -> None:
    """``--address HOST:PORT`` of a Ray head accepts a TCP connection (``auto`` is left to Ray)."""

    if address == "auto":
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SettingError(f"--address {address!r} is not HOST:PORT (the Ray head's GCS port, e.g. 10.0.0.5:6379) "
                           "or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
    raise SettingError(f"--address {address}: no Ray head answers ({why}); start it with ray start --head or fix "
                       "--address")


# ---------------------------------------------------------------------------------------------- all together


def check_play_model(cfg, *, warn=None, progress=None) -> None:
    """:func:`check_model_server` for a PlayConfig whose runtime talks to one (unless ``--no-preflight``)."""
    if RUNTIMES[cfg.agent.runtime].uses_model and cfg.model.preflight and cfg.model.base_url:
        if progress is not None:
            progress.phase("check", f"model server at {cfg.model.base_url}")
        for line in check_model_server(cfg.model):
            (warn or print)(f"warning: {line}")


def prepare_play(cfg, *, warn=None, progress=None):
    """Every check of a ``play`` (or ``pyrua-ros mcp``) episode, then the run directory: ``(cfg with --out filled
    in, RunDirectory)``.

    Order: local checks (episode, files), the run directory (read only), the model server; only when all passed is
    the run directory claimed (moved aside / created), so a refused command changes nothing on disk.
    """

    from pyrua_ros.agent.run.episode import default_out  # noqa: PLC0415 (on every CLI call's parse path)

    check_play(cfg)
    out = pathlib.Path(cfg.out or default_out(cfg.episode))
    o = cfg.output
    check_run_directory("--out", out, overwrite=o.overwrite, resume=o.resume)
    if hasattr(cfg, "model"):   # pyrua-ros mcp (McpConfig) has no model server
        check_play_model(cfg, warn=warn, progress=progress)
    rundir = claim_run_directory("--out", out, overwrite=o.overwrite, resume=o.resume)
    if rundir.previous is not None and warn is not None:
        warn(f"the earlier run in {out} was moved to {rundir.previous}")
    return dc.replace(cfg, output=dc.replace(o, out=out)), rundir
