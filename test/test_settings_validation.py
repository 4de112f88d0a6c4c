"""Fail fast and clear: bad input is refused before anything boots (one line naming the valid values, exit 2),
run directories are never overwritten, and the exit codes say how an episode ended. Every refusal runs the real
CLI in a child process, bounded to a few seconds (the table's rows all in one child: one interpreter start-up for
the table instead of one per row)."""

import json
import pathlib
import resource
import subprocess
import sys
import threading
import time
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pyrua_ros.agent.run import validate
from pyrua_ros.cli import exit_codes

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "pyrua_ros.cli.main"]
FAKE_PROGRAM = ROOT / "pyrua_ros" / "examples" / "fake_table_cube_on_plate.py"
# Refused before anything boots, measured in CPU (wall moves with the machine's load): a refusal costs the CLI's
# imports, about 0.3 CPU s; booting a sim node alone costs about 5.
REFUSE_WITHIN_CPU_S = 3.0


def run_refused(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run a command that must be refused before anything boots: exit 2 within the CPU bound (its children's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert proc.returncode == exit_codes.BAD_INPUT, proc.stderr[-2000:]
    assert cpu < REFUSE_WITHIN_CPU_S, f"refused after {cpu:.1f} CPU s: something booted first"
    return proc


def refused(*args, out=None):
    """Run a command that must be refused; returns its one stderr line (exit 2, within the bound)."""
    proc = run_refused([*CLI, *args])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(lines) == 1, proc.stderr
    assert out is None or not (out / "result.json").exists()
    return lines[0]


def refusal_line(call) -> str:
    """The one stderr line of a refused call (exit 2, within the bound), as :func:`refused` checks a process."""
    assert call.code == 2, call.stderr[-2000:]
    assert call.cpu_s < REFUSE_WITHIN_CPU_S, f"refused after {call.cpu_s:.1f} CPU s: something booted first"
    lines = [ln for ln in call.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(lines) == 1, call.stderr
    return lines[0]


# --- the table's rows -------------------------------------------------------------------------------------------

TABLE = [
    (["--suite", "nosuch", "--task", "0", "--replay", str(FAKE_PROGRAM)],
     "unknown suite 'nosuch' for --driver sim; valid suites: libero_spatial, libero_object, libero_goal"),
    (["--task", "999"], "--task 999 is out of range for suite 'libero_goal': valid tasks are 0..9"),
    (["--task", "0", "--seed", "-1", "--runtime", "openai", "--base-url", "http://127.0.0.1:9/v1"],
     "--seed must be >= 0; got -1"),
    (["--suite", "nosuch", "--task", "8"], "unknown suite 'nosuch' for --driver sim; valid suites:"),
    (["--suite", "libero_goal", "--task", "0", "--driver", "fake"],
     "unknown suite 'libero_goal' for --driver fake (libero_goal is served by --driver sim); valid suites: "
     "fake_table"),
    (["--task", "2"], "no example program for libero_goal task 2; available:"),
    (["--task", "8", "--replay", "/nonexistent/run"], "--replay /nonexistent/run: no such file"),
    (["--task", "8", "--guides-dir", "/nonexistent"], "--guides-dir /nonexistent: no such folder"),
    (["--task", "8", "--max-programs", "2"], "--max-programs applies to --arm program only"),
    (["--task", "8", "--images", "always"], "--images must be one of on-motion, on-demand, none; got 'always'"),
    (["--task", "8", "--openai-extra-body", "{not json"], "--openai-extra-body is not valid JSON"),
    (["--task", "8", "--runtime", "openai"], "--runtime openai needs --base-url"),
    (["--task", "8", "--vla-server-cmd", "/nonexistent/serve_pi05 --port {port}"],
     "--vla-server-cmd: '/nonexistent/serve_pi05' is not an executable program"),
    (["--task", "8", "--vla-server-cmd", "serve 'unclosed"], "--vla-server-cmd \"serve 'unclosed\": No closing"),
    (["--task", "8", "--primitives", "no-vla", "--vla-server-cmd", "true"],
     "--vla-server-cmd starts a VLA policy server for the full primitive set; --primitives no-vla would never"),
    (["--task", "8", "--reference-root", "/nonexistent"], "--reference-root /nonexistent: no PyRUA-Lean sources"),
    # nan passes every range check (nan <= 0 is False): every cell would get 0.05 s and result.json NaN
    (["--task", "8", "--cell-timeout-s", "nan"], "--cell-timeout-s expects a finite number; got 'nan'"),
    (["--task", "8", "--budget-s", "inf"], "--budget-s expects a finite number; got 'inf'"),
    (["--task", "8", "--budget-s", "1e12"], "--budget-s must be at most 2.592e+06; got 1000000000000.0"),
    (["--task", "8", "--openai-request-timeout-s=-inf"], "--openai-request-timeout-s expects a finite number"),
    (["--task", "8", "--seed", "99999999999"], "--seed must be at most 2147483647; got 99999999999"),
]

@pytest.fixture(scope="module")
def table_refusals(tmp_path_factory):
    """Every row of :data:`TABLE` run as ``play --arm cells --out DIR <row>``, all in one child: ``(call, DIR)``."""
    from pyrua_ros.testing.cli_calls import run_in_one_child

    base = tmp_path_factory.mktemp("table")
    argvs = [["play", "--arm", "cells", "--out", str(base / f"run{k}"), *args] for k, (args, _) in enumerate(TABLE)]
    calls = run_in_one_child(argvs, cwd=ROOT, timeout_s=30 + 5 * len(TABLE))
    return [(call, base / f"run{k}") for k, call in enumerate(calls)]


@pytest.mark.parametrize("k", range(len(TABLE)), ids=[f"args{k}-{expected}" for k, (_, expected) in enumerate(TABLE)])
def test_bad_episode_input_is_refused_before_boot(table_refusals, k):
    call, out = table_refusals[k]
    assert TABLE[k][1] in refusal_line(call)
    assert not out.exists()


# refusals of fixed command lines, all in one child (as the table's rows): name -> command line
FIXED = {
    "out-play": ["play", "--arm", "cells", "--task", "8", "--out", "/sys/kernel/pyrua-run"],
    "out-run": ["run", "--task", "8", "--policy", str(FAKE_PROGRAM), "--out", "/sys/kernel/pyrua-run"],
    "out-eval": ["eval", "--arm", "cells", "--suite", "libero_goal", "--task", "8", "--out", "/sys/kernel/pyrua-run"],
    "info-prompt": ["prompt", "--reference-root", "/nonexistent"],
    "info-api": ["api", "--reference-root", "/nonexistent"],
}


@pytest.fixture(scope="module")
def fixed_refusals():
    from pyrua_ros.testing.cli_calls import run_in_one_child

    return dict(zip(FIXED, run_in_one_child(list(FIXED.values()), cwd=ROOT, timeout_s=60), strict=True))


@pytest.mark.parametrize("command", ["play", "run", "eval"])
def test_an_out_no_run_directory_can_live_in_is_one_line_and_exit_2(fixed_refusals, command):
    """/sys accepts no files even for root (whom os.access always answers yes): one line, exit 2, no traceback."""
    line = refusal_line(fixed_refusals[f"out-{command}"])
    assert "--out /sys/kernel/pyrua-run" in line and "Traceback" not in line


def test_a_model_server_that_refuses_the_key_is_refused_before_boot(tmp_path):
    """401 at the preflight: every model request would fail the same way after the simulator booted."""
    from pyrua_ros.testing.chat_server import ChatServer

    out = tmp_path / "run"
    with ChatServer([], models_status=401) as server:
        line = refused("play", "--arm", "cells", "--task", "8", "--runtime", "openai", "--base-url", server.base_url,
                       "--out", str(out), out=out)
        requests = [(r.method, r.outcome) for r in server.requests]
    assert "refused the API key" in line and "answered HTTP 401" in line and "--no-preflight" in line
    assert requests == [("GET", "401")] and not out.exists()   # no episode, no model request


@pytest.mark.parametrize("command", ["prompt", "api"])
def test_info_commands_refuse_a_reference_root_without_sources(fixed_refusals, command):
    line = refusal_line(fixed_refusals[f"info-{command}"])
    assert "--reference-root /nonexistent: no PyRUA-Lean sources" in line


# A machine without bubblewrap: the real CLI in a child process whose sandbox module finds no ``bwrap``.
NO_BWRAP = ("import sys; from pyrua_ros.kernel import sandbox; sandbox.bwrap_path = lambda: None; "
            "from pyrua_ros.cli.main import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("command", [
    ["play", "--arm", "cells", "--driver", "fake", "--suite", "fake_table", "--task", "0"],
    ["run", "--policy", str(FAKE_PROGRAM), "--driver", "fake", "--suite", "fake_table", "--task", "0"],
])
def test_without_bubblewrap_play_and_run_are_refused_before_boot(tmp_path, command):
    """The cell sandbox cannot be set up: one line naming the way round (--unsafe-sandbox), exit 2, nothing
    booted and no run directory, instead of an episode that fails at its first cell."""
    out = tmp_path / "run"
    proc = run_refused([sys.executable, "-c", NO_BWRAP, *command, "--out", str(out)])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "needs bubblewrap" in lines[0] and "--unsafe-sandbox" in lines[0], proc.stderr
    assert not out.exists()


def test_the_sandbox_check_passes_here_and_is_skipped_with_unsafe_sandbox(monkeypatch):
    from pyrua_ros.kernel import sandbox
    from pyrua_ros.settings.config import SandboxSettings

    validate.check_sandbox(SandboxSettings())   # setup.sh installs bubblewrap: the boundary can be set up here
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    with pytest.raises(validate.SettingError, match="needs bubblewrap"):
        validate.check_sandbox(SandboxSettings())
    validate.check_sandbox(SandboxSettings(unsafe_sandbox=True))


class _Models(BaseHTTPRequestHandler):
    status = 200
    body: typing.ClassVar[dict] = {"data": [{"id": "served-model"}]}

    def do_GET(self):
        data = json.dumps(self.body).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args):
        pass


@pytest.fixture
def models_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_unreachable_model_server_is_refused_before_the_sim_boots(tmp_path):
    out = tmp_path / "run"
    line = refused("play", "--arm", "cells", "--task", "8", "--runtime", "openai", "--base-url",
                   "http://127.0.0.1:9/v1", "--out", str(out), out=out)
    assert "--base-url http://127.0.0.1:9/v1: no model server answers at http://127.0.0.1:9/v1/models" in line
    assert "--no-preflight" in line and not out.exists()


def test_model_server_check_reads_the_models_endpoint(models_server, monkeypatch):
    from pyrua_ros.settings.model import ModelSettings

    url = f"http://127.0.0.1:{models_server.server_port}/v1"
    assert validate.check_model_server(ModelSettings(model="served-model", base_url=url)) == []
    warnings = validate.check_model_server(ModelSettings(model="other", base_url=url))
    assert warnings and "lists served-model, not --model other" in warnings[0]
    for status in (401, 403):   # a server that refuses the key fails every request: refused before the sim boots
        monkeypatch.setattr(_Models, "status", status)
        with pytest.raises(validate.SettingError) as info:
            validate.check_model_server(ModelSettings(model="m", base_url=url))
        assert f"refused the API key (GET {url}/models answered HTTP {status})" in str(info.value)
        assert "check --api-key-env" in str(info.value) and "--no-preflight" in str(info.value)
    for status in (404, 405, 500, 501):   # any HTTP answer: a server is there, the model id is not checked
        monkeypatch.setattr(_Models, "status", status)
        warnings = validate.check_model_server(ModelSettings(model="m", base_url=url))
        assert len(warnings) == 1 and f"no models endpoint (GET {url}/models answered HTTP {status})" in warnings[0]
    with pytest.raises(validate.SettingError, match=r"'NO_SUCH_KEY_VAR'.*not set"):
        validate.check_model_server(ModelSettings(model="m", base_url=url, api_key_env="NO_SUCH_KEY_VAR"))


def test_a_chat_only_model_server_passes_the_preflight_and_serves_the_episode(tmp_path):
    """A server that answers chat completions but not ``GET /models`` (HTTP 501, as Python's http.server says
    for a method it lacks) was refused before boot as if nothing answered."""
    from pyrua_ros.testing.chat_server import ChatServer, Reply

    out = tmp_path / "run"
    script = [Reply(tool_calls=(("finish", {"status": "failure", "summary": "chat only"}),))]
    with ChatServer(script, models_status=501) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", "cells", "--suite",
             "fake_table", "--task", "0", "--driver", "fake", "--runtime", "openai", "--base-url", server.base_url,
             "--images", "none", "--no-video", "--no-record", "--progress", "off"],
            capture_output=True, text=True, timeout=240, cwd=ROOT)
        outcomes = [(r.method, r.outcome) for r in server.requests]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert outcomes[0] == ("GET", "501") and len(outcomes) == 2
    assert "has no models endpoint" in proc.stderr and "answered HTTP 501" in proc.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["finish"]["summary"] == "chat only"


def test_launch_with_an_unknown_suite_is_refused_before_anything_starts():
    proc = run_refused([sys.executable, "-m", "pyrua_ros.bringup.runner", "libero_sim", "suite:=nosuch"])
    assert "unknown suite 'nosuch'" in proc.stderr and "started" not in proc.stdout


def test_the_episode_table_matches_what_the_drivers_serve():
    """The suites each registered driver declares are what its model serves (the running drivers are swept in
    test_driver_conformance.py)."""
    from pyrua_ros.fake_arm.episode import SUITE, TASKS
    from pyrua_ros.sim.suites import available_suites
    from pyrua_ros.sim_interfaces.drivers import DRIVERS

    assert DRIVERS["sim"].suites == available_suites()
    assert DRIVERS["fake"].suites == {SUITE: len(TASKS)}


# --- run directories --------------------------------------------------------------------------------------------

def test_a_non_empty_out_is_refused_and_left_untouched(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "result.json").write_text('{"status": "completed"}')
    line = refused("play", "--arm", "cells", "--task", "8", "--out", str(out))
    assert f"--out {out} is not empty (result.json); pass --overwrite to move it aside" in line
    assert (out / "result.json").read_text() == '{"status": "completed"}'
    (tmp_path / "file").write_text("x")
    assert "is a file" in refused("play", "--arm", "cells", "--task", "8", "--out", str(tmp_path / "file"))


def test_overwrite_moves_the_old_run_aside_and_resume_keeps_a_finished_one(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "result.json").write_text(json.dumps({"status": "completed", "reason": None}))
    kept = validate.claim_run_directory("--out", out, resume=True)
    assert kept.action == "keep" and kept.result["status"] == "completed"
    assert (out / "result.json").is_file()
    moved = validate.claim_run_directory("--out", out, overwrite=True)
    assert moved.action == "moved" and moved.previous.name.startswith("run.prev-")
    assert (moved.previous / "result.json").is_file() and list(out.iterdir()) == []
    # an unfinished (killed) run is moved aside by --resume and run again
    (out / "result.json").write_text(json.dumps({"status": "error", "reason": "killed: the episode host ..."}))
    again = validate.claim_run_directory("--out", out, resume=True)
    assert again.action == "moved" and not (out / "result.json").exists()


@pytest.mark.parametrize("flag", ["overwrite", "resume"])
def test_overwrite_and_resume_move_only_a_run_directory_aside(tmp_path, flag):
    """Issue 28: ``--out ~ --overwrite`` moved the home folder aside. A folder without an earlier run's
    result.json (or with one that is a link, or not a record) is refused and left as it was."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("x")
    (tmp_path / "elsewhere.json").write_text(json.dumps({"status": "completed"}))
    for result in (None, "link", '{"no": "status"}', "[" * 100_000):
        if result == "link":
            (home / "result.json").symlink_to(tmp_path / "elsewhere.json")
        elif result is not None:
            (home / "result.json").unlink()
            (home / "result.json").write_text(result)
        with pytest.raises(validate.SettingError, match=f"not a run directory .*--{flag} only moves an earlier run"):
            validate.claim_run_directory("--out", home, **{flag: True})
        assert (home / ".bashrc").is_file() and not list(tmp_path.glob("home.prev-*"))
    line = refused("play", "--arm", "cells", "--task", "8", "--out", str(home), f"--{flag}")
    assert "is not a run directory" in line


def test_resume_through_the_cli_keeps_a_finished_run_and_exits_with_its_code(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "result.json").write_text(json.dumps({"arm": "cells", "status": "call_budget", "reason": "budget",
                                                 "environment_success": False}))
    proc = subprocess.run([*CLI, "play", "--arm", "cells", "--task", "8", "--out", str(out), "--resume"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == exit_codes.BUDGET
    assert "already holds an episode that ran to its end" in proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["status"] == "call_budget"


# --- exit codes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status, reason, code", [
    ("completed", None, 0), ("completed", "model stopped calling tools", 0), ("boot_error", "x", 3),
    ("planner_error", "provider error", 4), ("timeout", "timeout", 5), ("call_budget", "budget", 5),
    ("error", "RuntimeError: sim died", 1), ("error", "interrupted", 130), ("boot_error", "interrupted", 130),
    ("interrupted", "interrupted", 130),
    ("finished", "terminated", 0), ("error", "exception", 0), ("error", "load", 0),
])
def test_exit_code_table(status, reason, code):
    assert exit_codes.for_result(status, reason) == code
    assert exit_codes.for_result("error", "interrupted", interrupted_by=15) == 143


# --- a driver that dies anyway ----------------------------------------------------------------------------------

def test_a_driver_given_an_episode_it_does_not_serve_refuses_the_reset_with_the_valid_values(tmp_path):
    """Past the front door: the driver does not die of a bad episode (it starts with its default one); the reset is
    refused with the reason and the valid suites, which the episode reports as its boot error."""
    from pyrua_ros.agent.run.episode import play
    from pyrua_ros.settings.config import PlayConfig
    from pyrua_ros.settings.schema import build

    cfg = build(PlayConfig, {"robot": "fake", "suite": "nosuch", "task": 0, "replay": FAKE_PROGRAM,
                             "out": tmp_path / "run", "video": False, "record": False})
    result = play(cfg)
    assert result.status == "boot_error"
    assert "episode reset failed" in result.reason and "unknown suite 'nosuch'" in result.reason, result.reason
    assert "fake_table" in result.reason                     # the valid values
    assert "exited" not in result.reason                     # the driver kept serving


@pytest.mark.libero
def test_a_dying_driver_ends_the_wait_at_once_with_its_last_error_line(tmp_path, monkeypatch):
    """Past the front door (a library caller, a driver that fails on its own): the sim node exits at startup (here:
    it cannot render, MUJOCO_GL names no backend), the episode does not wait out the 120 s reset deadline, and the
    reason carries the node's own error line. (A bad episode no longer kills a driver: it starts with its default
    episode and refuses the reset with the valid values, test_driver_conformance.)"""
    from pyrua_ros.agent.run.episode import play
    from pyrua_ros.settings.config import PlayConfig
    from pyrua_ros.settings.schema import build

    monkeypatch.setenv("MUJOCO_GL", "no_such_backend")     # read by the driver process only
    cfg = build(PlayConfig, {"suite": "libero_goal", "task": 8, "replay": FAKE_PROGRAM, "out": tmp_path / "run",
                             "video": False, "record": False})
    started = time.monotonic()
    result = play(cfg)
    elapsed = time.monotonic() - started
    assert result.status == "boot_error"
    assert "episode reset failed: the sim_node exited with status" in result.reason
    assert "MUJOCO_GL: no_such_backend" in result.reason     # the node's last error line, not "see host.log"
    assert elapsed < 60, elapsed                               # the node's own start time, not the 120 s deadline
    assert exit_codes.for_result(result.status, result.reason) == exit_codes.BOOT_ERROR
