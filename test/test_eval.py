"""``pyrualean eval``: instance sets, refusal of bad input before anything boots, the manifest, and real evaluations
through the CLI: the fake arm on two local workers (interrupted, then resumed without re-running finished episodes),
the LIBERO sim on two workers, the same fake-arm set through a private Ray instance that stays on loopback in a
network namespace with a real interface and a default route, and across a two-node Ray cluster that loses a node.

Episodes are the replay runtime running the packaged example programs, judged by each driver's success check.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from pyrua_ros.evaluation import instances as I
from pyrua_ros.evaluation.jobs import config_from_json, config_to_json
from pyrua_ros.evaluation.manifest import Manifest, ManifestMismatch
from pyrua_ros.evaluation.runner import finished_summary
from pyrua_ros.settings.schema import SettingError
from pyrua_ros.testing import spin_until

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAKE_SET = ["--arm", "cells", "--driver", "fake", "--suite", "fake_table", "--task", "0", "--seed", "0-2",
            "--no-video", "--no-record"]


def eval_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pyrua_ros.cli.main", "eval", *args]


def run_eval(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(eval_command(*args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def episode_lines(text: str, what: str) -> int:
    """How many plain progress lines say a worker started (``start``) or ended (``done``) an episode."""
    return len(re.findall(rf"^\[eval\] w\d+ {what} ", text, flags=re.M))


def results(out: pathlib.Path) -> dict[str, dict]:
    """``suite:task:seed`` -> result.json of every episode under an evaluation directory."""
    found = {}
    for path in sorted(out.glob("*/*/*/result.json")):
        data = json.loads(path.read_text())
        found[f"{data['suite']}:{data['task']}:{data['seed']}"] = data
    return found


# ---------------------------------------------------------------------------------------------------- instance sets
def test_index_lists_and_named_sets():
    assert I.parse_index_list("0-2,5, 7", "task") == [0, 1, 2, 5, 7]
    assert I.parse_index_list([3, "1-2", 3], "seed") == [1, 2, 3]
    assert I.parse_index_list("all", "task", upper=3) == [0, 1, 2]
    for bad in ("3-1", "x", True):
        with pytest.raises(SettingError):
            I.parse_index_list(bad, "task")
    assert I.expand_suites(["libero", "libero_goal", "libero_pro_swap"]) == [
        "libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_spatial_swap", "libero_object_swap",
        "libero_goal_swap", "libero_10_swap"]
    assert len(I.NAMED_SETS["libero_pro"]) == 16
    instances = I.build_instances("sim", ["libero_goal"], "all", "0-1")
    assert len(instances) == 20 and instances[1] == I.Instance("libero_goal", 0, 1)
    assert I.Instance("libero_goal", 3, 7).run_dir(pathlib.Path("/o")) == pathlib.Path("/o/libero_goal/3/7")


def test_instance_files(tmp_path):
    (tmp_path / "set.yaml").write_text("instances:\n  - {suite: fake_table, task: 0-1, seed: 0}\n"
                                       "  - {suite: fake_table, task: 1, seed: [0, 2]}\n")
    assert I.load_instance_file(tmp_path / "set.yaml", "fake") == [
        I.Instance("fake_table", 0, 0), I.Instance("fake_table", 1, 0), I.Instance("fake_table", 1, 2)]
    (tmp_path / "set.json").write_text(json.dumps([{"suite": "libero_goal", "task": 8}]))
    assert I.load_instance_file(tmp_path / "set.json", "sim") == [I.Instance("libero_goal", 8, 0)]
    (tmp_path / "bad.yaml").write_text("- {suite: fake_table, tasks: 0}\n")
    with pytest.raises(SettingError, match=r"unknown key\(s\) \['tasks'\]; valid keys: suite, task, seed"):
        I.load_instance_file(tmp_path / "bad.yaml", "fake")
    (tmp_path / "broken.yaml").write_text("- {suite: [\n")
    with pytest.raises(SettingError, match="is not valid YAML/JSON"):
        I.load_instance_file(tmp_path / "broken.yaml", "fake")


def test_job_config_round_trip(tmp_path):
    """A job carries play's settings tree in the schema's JSON form and comes back equal (paths, dicts)."""
    from pyrua_ros.settings.config import (
        AgentSettings,
        EpisodeSettings,
        ModelSettings,
        OutputSettings,
        PlayConfig,
    )

    cfg = PlayConfig(episode=EpisodeSettings(task=8, clock="realtime"), agent=AgentSettings(replay=tmp_path / "p.py"),
                     model=ModelSettings(extra_body={"top_k": 20}), output=OutputSettings(out=tmp_path / "o"))
    data = json.loads(json.dumps(config_to_json(cfg)))
    assert data["episode"]["task"] == 8 and data["output"]["out"] == str(tmp_path / "o")
    assert config_from_json(data) == cfg
    assert config_from_json(data, out=str(tmp_path / "x")).out == tmp_path / "x"
    with pytest.raises(SettingError, match=r"episode\.nope is not a setting of PlayConfig"):
        config_from_json({"episode": {"nope": 1}})


def test_a_base_url_can_name_the_node_each_episode_runs_on():
    """``{node}`` in --base-url is the address of the node an episode runs on: each cluster node's episodes reach
    the model server on that node (the job carries the URL as given; the worker resolves it)."""
    from pyrua_ros.evaluation.worker import on_node
    from pyrua_ros.settings.config import AgentSettings, ModelSettings, PlayConfig

    cfg = PlayConfig(agent=AgentSettings(runtime="openai"), model=ModelSettings(base_url="http://{node}:30000/v1"))
    assert config_from_json(config_to_json(cfg)).model.base_url == "http://{node}:30000/v1"
    assert on_node(cfg, "10.0.0.7").model.base_url == "http://10.0.0.7:30000/v1"
    assert on_node(cfg, "fd00::2").model.base_url == "http://[fd00::2]:30000/v1"
    plain = PlayConfig(agent=AgentSettings(runtime="openai"), model=ModelSettings(base_url="http://127.0.0.1:1/v1"))
    assert on_node(plain, "10.0.0.7") is plain


# ---------------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("args", "message"), [
    (["--suite", "libero_nope"], "unknown suite 'libero_nope' for --driver sim; valid suites: libero_spatial, "),
    (["--suite", "libero_goal", "--task", "10"],
     "--task 10 is out of range for suite 'libero_goal': valid tasks are 0..9"),
    (["--suite", "libero_goal", "--seed", "-1"], "--seed -1 is invalid: the seed is an integer >= 0"),
    (["--suite", "fake_table", "--driver", "fake", "--task", "2"], "valid tasks are 0..1"),
    (["--instances", "/nonexistent/set.yaml"], "--instances /nonexistent/set.yaml: no such file"),
    (["--suite", "libero_goal", "--task", "8", "--runtime", "openai", "--base-url", "http://127.0.0.1:{port}/v1"],
     "--base-url http://127.0.0.1:{port}/v1: no model server answers at http://127.0.0.1:{port}/v1/models"),
    (["--suite", "libero_goal", "--task", "2"], "no example program for libero_goal task 2; available: "),
    (["--suite", "fake_table", "--driver", "fake", "--backend", "ray", "--address", "127.0.0.1:{port}"],
     "--address 127.0.0.1:{port}: no Ray head answers"),
    (["--suite", "libero_goal", "--task", "8", "--workers", "0"], "--workers must be at least 1"),
    # counted before anything is built: four hundred million seeds are not materialised
    (["--suite", "libero_goal", "--seed", "0-400000000"], "--seed '0-400000000' names more than 100000 values"),
    (["--suite", "libero_goal", "--task", "8", "--budget-s", "nan"], "--budget-s expects a finite number"),
    (["--suite", "libero_goal", "--task", "8", "--cpus-per-episode", "nan"], "--cpus-per-episode must be > 0"),
    (["--suite", "libero_goal", "--task", "8", "--max-provider-failures", "-1"], "--max-provider-failures must be"),
])
def test_bad_input_is_refused_before_anything_boots(tmp_path, args, message, capsys):
    """Each refusal is one line naming the valid values, exit 2, and nothing written or started (the command runs
    in this process: a worker would be a child of it)."""
    from pyrua_ros.cli.main import main

    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [a.replace("{port}", str(port)) for a in args]
    out = tmp_path / "out"
    children = set(psutil.Process().children(recursive=True))
    try:
        code = main(["eval", "--arm", "cells", "--out", str(out), *args])
    except SystemExit as exc:   # refused by the flag parser itself (a value that is no finite number)
        code = exc.code
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pyrualean eval: error: "), lines
    assert message.replace("{port}", str(port)) in lines[0]
    assert not out.exists()   # nothing was written: no manifest, no worker, no node
    assert set(psutil.Process().children(recursive=True)) <= children


def test_the_command_line_refuses_in_about_a_second(tmp_path, record_property):
    """The whole command, interpreter start included, for a task out of range (the check that needs the
    simulator's task counts). The time is recorded, not asserted: these machines are shared."""
    t0 = time.monotonic()
    proc = run_eval("--arm", "cells", "--out", str(tmp_path / "out"), "--suite", "libero_goal", "--task", "10",
                    timeout=120)
    record_property("refusal_wall_s", round(time.monotonic() - t0, 3))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "out").exists()


def test_manifest_refuses_other_options_and_other_code(tmp_path):
    options = {"arm": "cells", "runtime": "replay", "base_url": None, "suite": "x", "out": tmp_path}
    manifest = Manifest.open(tmp_path / "e", options)
    run = manifest.begin_run(["a:0:0"], argv=["eval"], backend="local", workers=1, skipped=0)
    manifest.end_run(run, outcome="finished", episodes_run=1)
    assert "suite" not in manifest.data["options"] and manifest.data["options"]["arm"] == "cells"
    # where the model server is, and the per-episode values, may change on resume
    Manifest.open(tmp_path / "e", {**options, "base_url": "http://127.0.0.1:30001/v1", "suite": "y"})
    with pytest.raises(ManifestMismatch, match=r"other agent options \(arm: 'cells' then, 'program' now\)"):
        Manifest.open(tmp_path / "e", {**options, "arm": "program"})
    data = json.loads((tmp_path / "e" / "eval.json").read_text())
    data["code"]["git_commit"] = "0" * 40
    (tmp_path / "e" / "eval.json").write_text(json.dumps(data))
    with pytest.raises(ManifestMismatch, match="evaluated by other code"):
        Manifest.open(tmp_path / "e", options)
    assert Manifest.open(tmp_path / "e", options, allow_code_change=True).data["code_history"]
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ManifestMismatch, match=r"non-empty directory without eval\.json"):
        Manifest.open(tmp_path / "busy", options)


def test_finished_means_a_record_that_is_not_an_infrastructure_failure(tmp_path):
    instance = I.Instance("fake_table", 0, 0)
    run_dir = instance.run_dir(tmp_path)
    assert finished_summary(instance, tmp_path) is None
    run_dir.mkdir(parents=True)
    record = {"schema": "pyrualean-episode-v2", "suite": "fake_table", "task": 0, "seed": 0,
              "environment_success": False}
    for status, finished in (("error", False), ("boot_error", False), ("planner_error", False), ("killed", False),
                             ("interrupted", False), ("timeout", True), ("call_budget", True), ("completed", True)):
        (run_dir / "result.json").write_text(json.dumps({**record, "status": status}))
        assert (finished_summary(instance, tmp_path) is not None) is finished, status
    (run_dir / "result.json").write_text(json.dumps({**record, "status": "completed", "seed": 1}))
    assert finished_summary(instance, tmp_path) is None   # another instance's record is not this one's


# ---------------------------------------------------------------------------------------------------- real evaluations
def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


# The packaged fake_table pick after 25 waves (about 6 s, 400 steps, here): episodes long enough that an interrupt
# sent once the first is done lands while the third still runs, however the load stretches the test's reaction.
SLOW_FAKE_PROGRAM = '''"""Waves above the red cube for a while, then puts it on the plate."""


def run(robo):
    cube, plate = robo.segment("the red cube"), robo.segment("the plate")
    x, y, z = cube.world_xyz
    px, py, _pz = plate.world_xyz
    for _ in range(WAVES):
        robo.move_to([x, y + 0.08, z + 0.12], robo.OPEN)
        robo.move_to([x, y - 0.08, z + 0.12], robo.OPEN)
    robo.move_to([x, y, z], robo.OPEN)
    robo.set_gripper(robo.CLOSE, steps=8)
    robo.move_to([x, y, z + 0.10], robo.CLOSE)
    robo.move_to([px, py, z + 0.10], robo.CLOSE)
    robo.release(max_steps=20)
'''


def test_fake_arm_eval_on_two_workers_interrupted_and_resumed(tmp_path):
    out, log_path = tmp_path / "fake", tmp_path / "first.log"
    program = tmp_path / "slow.py"
    program.write_text(SLOW_FAKE_PROGRAM.replace("WAVES", "25"))
    args = [*FAKE_SET, "--workers", "2", "--out", str(out), "--replay", str(program)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(eval_command(*args), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert spin_until(lambda: episode_lines(log_path.read_text(), "done") >= 1 or proc.poll() is not None, 300), \
            log_path.read_text()
        descendants = psutil.Process(proc.pid).children(recursive=True)   # workers and their driver nodes
        proc.send_signal(signal.SIGINT)
        assert proc.wait(180) == 130, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    first = log_path.read_text()
    assert not _alive(descendants), f"left running: {_alive(descendants)}"
    assert len(descendants) >= 4   # two workers, each with its own driver
    done = {k: r for k, r in results(out).items() if r["status"] == "completed"}
    assert 1 <= len(done) < 3, first
    assert all(r["environment_success"] for r in done.values())
    for key, r in results(out).items():   # every episode that had started says what happened to it
        if key not in done:
            # (killed: the interrupt came before its episode host had written a record)
            assert r["status"] == "interrupted" and r["reason"] == "interrupted", r
            assert r["environment_success"] is False and not r.get("error"), r
    stamps = {k: (out / k.replace(":", "/") / "result.json").stat().st_mtime_ns for k in done}

    second = run_eval(*args, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"{len(done)} already finished" in second.stderr
    for key in done:   # finished episodes were not run again
        assert f"start {key}" not in second.stderr
        assert (out / key.replace(":", "/") / "result.json").stat().st_mtime_ns == stamps[key]
    final = results(out)
    assert sorted(final) == [f"fake_table:0:{s}" for s in range(3)]
    assert all(r["status"] == "completed" and r["environment_success"] for r in final.values())
    assert all(r["host"]["boot_options"]["driver"] == "fake" for r in final.values())
    assert "fake_table" in second.stdout and "100.0%" in second.stdout   # the closing report
    manifest = json.loads((out / "eval.json").read_text())
    assert [r["outcome"] for r in manifest["runs"]] == ["interrupted", "finished"]
    assert manifest["runs"][1]["skipped_finished"] == len(done)
    for run in manifest["runs"]:   # the resumed run has as many workers as episodes left (1 or 2)
        domains = [w["ros_domain_id"] for w in run["workers_info"]]
        assert len(set(domains)) == len(domains) == run["workers"] and str(domains[0]) != os.environ["ROS_DOMAIN_ID"]
    assert manifest["runs"][0]["workers"] == 2


@pytest.mark.libero
def test_libero_eval_on_two_workers(tmp_path):
    """Two LIBERO episodes at once, each on its own sim node and ROS domain, judged by the benchmark's check."""
    out = tmp_path / "libero"
    proc = run_eval("--arm", "cells", "--suite", "libero_goal", "--task", "1,8", "--seed", "0", "--workers", "2",
                    "--out", str(out), "--no-video", "--no-record", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = results(out)
    assert sorted(final) == ["libero_goal:1:0", "libero_goal:8:0"]
    assert all(r["status"] == "completed" and r["environment_success"] for r in final.values()), final
    manifest = json.loads((out / "eval.json").read_text())
    assert len({w["ros_domain_id"] for w in manifest["runs"][0]["workers_info"]}) == 2
    for key in final:   # each episode's host.log holds its slice of the shared sim node's log
        assert "sim" in (out / key.replace(":", "/") / "host.log").read_text()
    assert "libero_goal" in proc.stdout and "2/2 done" in proc.stderr


# ---------------------------------------------------------------------------------------------------- Ray
def _socket_table(pid: int | str = "self") -> dict[int, tuple[str, str, str]]:
    """inode -> (protocol, local address, state) for every TCP/UDP socket of the network namespace of ``pid``."""
    table = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/{pid}/net/{proto}") as f:
            next(f)
            for line in f:
                fields = line.split()
                host_hex = fields[1].split(":")[0]
                raw = bytes.fromhex(host_hex)
                if len(raw) == 4:
                    address = ipaddress.IPv4Address(raw[::-1])
                else:   # four little-endian 32-bit words
                    address = ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
                table[int(fields[9])] = (proto, str(address), fields[3])
    return table


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


_COMMAND_LINES: dict[int, str] = {}   # pid -> its last command line seen (non_loopback_sockets)


def non_loopback_sockets(processes: list[psutil.Process], namespace_of: int | str = "self") -> list[str]:
    """Sockets of ``processes`` bound to a non-loopback address: every TCP socket, and UDP sockets of processes
    that are not ROS nodes (DDS in the episode actors and driver nodes is kept local by its discovery range).
    ``namespace_of``: a process in the network namespace they run in."""
    table = _socket_table(namespace_of)
    bad = []
    for p in processes:
        try:
            # an exiting process has no command line left while its sockets are still open: the one it had
            cmdline = " ".join(p.cmdline()) or _COMMAND_LINES.get(p.pid, "")
            _COMMAND_LINES[p.pid] = cmdline
            fds = os.listdir(f"/proc/{p.pid}/fd")
        except (psutil.NoSuchProcess, FileNotFoundError, PermissionError):
            continue
        runs_ros = "EpisodeActor" in cmdline or "pyrua_ros.nodes" in cmdline
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{p.pid}/fd/{fd}")
            except OSError:
                continue
            if not target.startswith("socket:["):
                continue
            entry = table.get(int(target[8:-1]))
            if entry is None or (entry[0].startswith("udp") and runs_ros):
                continue
            if not _is_loopback(entry[1]):
                bad.append(f"{p.pid} {cmdline[:80]!r}: {entry}")
    return bad


@pytest.fixture
def ray_two_nodes(tmp_path):
    """A Ray cluster of two nodes on this machine (``pyrua_ros.testing.ray_cluster``), one CPU each: every Ray
    server on 127.0.0.1, no dashboard, no usage statistics, a node declared dead about 3 s after it goes."""
    from pyrua_ros.evaluation.ray_engine import loopback_ray_environment, private_ray_home

    env = loopback_ray_environment(dict(os.environ))
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")   # short: Ray's socket paths must fit 107 bytes
    private_ray_home(pathlib.Path(temp) / "home", env)
    helper = subprocess.Popen([sys.executable, "-m", "pyrua_ros.testing.ray_cluster", "2", temp], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp_path / "ray.log", "w"),
                              text=True, start_new_session=True)
    try:
        line = helper.stdout.readline()
        assert line, (tmp_path / "ray.log").read_text()[-3000:]

        def remove(index: int) -> None:
            helper.stdin.write(f"remove {index}\n")
            helper.stdin.flush()
            assert helper.stdout.readline().strip() == f"removed {index}"

        yield {**json.loads(line), "env": env, "remove": remove}
    finally:
        with contextlib.suppress(OSError):
            helper.stdin.close()   # the cluster shuts down
        try:
            helper.wait(60)
        except subprocess.TimeoutExpired:
            helper.kill()
        leftovers = [p.pid for p in psutil.process_iter(["cmdline"]) if temp in " ".join(p.info["cmdline"] or [])]
        for pid in leftovers:   # our cluster's processes only: they carry our private temp dir
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)
        assert not leftovers, f"Ray processes outlived the cluster: {leftovers}"


def _outcomes(found: dict[str, dict]) -> dict[str, tuple]:
    return {key: (r["status"], r["environment_success"], r["env_steps"], r["calls"]) for key, r in found.items()}


def test_fake_arm_eval_across_two_ray_nodes_survives_losing_one_and_its_coordinator(tmp_path, ray_two_nodes):
    """Node 2 (its raylet and the actor on it) is killed mid-episode: that episode runs again on the head as an
    infrastructure retry, its first attempt kept. Then the coordinator itself is killed; the same command resumes.
    Every instance ends with one record, whose outcome equals a local run's."""
    out, log_path = tmp_path / "ray", tmp_path / "eval.log"
    program = tmp_path / "slow.py"
    program.write_text(SLOW_FAKE_PROGRAM.replace("WAVES", "6"))
    instances = ["--arm", "cells", "--driver", "fake", "--suite", "fake_table", "--task", "0", "--seed", "0-2",
                 "--no-video", "--no-record", "--replay", str(program)]
    args = [*instances, "--backend", "ray", "--address", ray_two_nodes["address"], "--out", str(out)]
    env = ray_two_nodes["env"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(eval_command(*args), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def actor_on_node2() -> bool:
            for pid in ray_two_nodes["nodes"][1]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    if any("EpisodeActor" in " ".join(c.cmdline()) for c in psutil.Process(pid).children(True)):
                        return True
            return False

        assert spin_until(lambda: (episode_lines(log_path.read_text(), "start") >= 2 and actor_on_node2())
                          or proc.poll() is not None, 300), log_path.read_text()
        assert proc.poll() is None, log_path.read_text()
        tree = [psutil.Process(proc.pid)]
        for pid in [pid for node in ray_two_nodes["nodes"] for pid in node]:
            with contextlib.suppress(psutil.NoSuchProcess):
                tree.append(psutil.Process(pid))
        tree += [c for p in _alive(tree) for c in p.children(recursive=True)]
        assert non_loopback_sockets(_alive(tree)) == []   # both nodes and the coordinator: loopback only
        ray_two_nodes["remove"](1)   # node 2 goes: its raylet, its agents, the actor on it
        assert spin_until(lambda: "-> retrying" in log_path.read_text() or proc.poll() is not None, 120), \
            log_path.read_text()
        done = episode_lines(log_path.read_text(), "done")
        assert spin_until(lambda: episode_lines(log_path.read_text(), "done") > done or proc.poll() is not None,
                          300), log_path.read_text()
        assert proc.poll() is None, log_path.read_text()   # the retried episode and the third are still to run
        proc.kill()   # the coordinator goes too
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    first = log_path.read_text()
    assert "Ray: " in first, first   # the lost node's episode: a crash named as Ray's
    finished = {k for k, r in results(out).items() if r["status"] == "completed"}
    assert 1 <= len(finished) < 3, first

    again = run_eval(*args, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(finished)} already finished" in again.stderr
    final = results(out)
    assert sorted(final) == [f"fake_table:0:{s}" for s in range(3)]
    assert all(r["status"] == "completed" and r["environment_success"] for r in final.values()), final
    attempts = sorted(str(p.relative_to(out / ".eval" / "attempts")) for p in
                      (out / ".eval" / "attempts").glob("*/*/*/*/result.json"))
    crashed = [a for a in attempts if a.split("/")[3] == "1"]
    assert len(crashed) == 1, attempts   # the lost node's episode, kept as attempt 1
    record = json.loads((out / ".eval" / "attempts" / crashed[0]).read_text())
    assert record["status"] == "killed" and "Ray" in record["reason"], record
    manifest = json.loads((out / "eval.json").read_text())
    assert len(manifest["runs"]) == 2 and manifest["runs"][1]["outcome"] == "finished"
    assert manifest["runs"][1]["skipped_finished"] == len(finished)
    assert "3/3 done" in again.stderr
    assert "fake_table" in again.stdout and "100.0%" in again.stdout   # the report counts each instance once

    local = run_eval(*instances, "--workers", "2", "--out", str(tmp_path / "local"), timeout=600)
    assert local.returncode == 0, local.stderr[-3000:]
    assert _outcomes(results(tmp_path / "local")) == _outcomes(final)


# A network namespace like any workstation's or cluster node's: an interface with a routable address, a default
# route (nothing behind it answers), no IPv6 (whose link-local chatter would count as packets). The command runs in
# it; when it ends, the interface's transmit count says whether anything tried to leave the machine.
NETNS_SETUP = ("ip link set lo up && ip link add v0 type veth peer name v1"
               " && sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
               " net.ipv6.conf.v0.disable_ipv6=1 net.ipv6.conf.v1.disable_ipv6=1"
               " && ip addr add 198.51.100.1/24 dev v0 && ip link set v0 up && ip link set v1 up"
               " && ip route add default via 198.51.100.2"
               ' && "$@"; code=$?; echo "v0 sent $(awk \'/v0:/ {print $11}\' /proc/net/dev) packet(s)"; exit $code')


def in_network_namespace(command: list[str]) -> list[str]:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("needs root, unshare and ip to make a network namespace")
    return ["unshare", "--net", "sh", "-c", NETNS_SETUP, "sh", *command]


def test_fake_arm_eval_through_a_private_ray_instance_in_a_networked_namespace(tmp_path):
    """A private Ray instance on a machine with a real interface and a default route binds nothing but loopback
    and sends not one packet out (Ray's dashboard once asked the cloud metadata services which cloud it ran on,
    and held a UDP socket on the external address)."""
    out, log_path = tmp_path / "ray", tmp_path / "eval.log"
    args = [*FAKE_SET, "--backend", "ray", "--workers", "2", "--out", str(out)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(in_network_namespace(eval_command(*args)), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)
    found: list[str] = []
    try:
        # while both actors run episodes: every socket of the instance and of the coordinator is on loopback
        assert spin_until(lambda: episode_lines(log_path.read_text(), "start") >= 2 or proc.poll() is not None, 300), \
            log_path.read_text()
        tree = [psutil.Process(proc.pid)]
        tree += tree[0].children(recursive=True)
        assert any("raylet" in " ".join(p.cmdline()) for p in _alive(tree))
        while proc.poll() is None:   # sampled till the end: the metadata probe came seconds after the start
            try:
                found += non_loopback_sockets(_alive(tree), namespace_of=proc.pid)
            except FileNotFoundError:   # the namespace ended with the command
                break
            time.sleep(0.5)
        assert proc.wait(600) == 0, log_path.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log_path.read_text()
    assert found == [] and "v0 sent 0 packet(s)" in text, (found, text[-2000:])
    final = results(out)
    assert sorted(final) == [f"fake_table:0:{s}" for s in range(3)]
    assert all(r["status"] == "completed" and r["environment_success"] for r in final.values())
    run = json.loads((out / "eval.json").read_text())["runs"][0]
    assert run["backend"] == "ray" and len(run["workers_info"]) == 2
    assert len({w["ros_domain_id"] for w in run["workers_info"]}) == 2
    assert "private Ray instance up in" in text   # the start's progress, step by step: what and how long
    assert text.index("private Ray instance up in") < text.index("private Ray instance started in")
    assert "3/3 done" in text


def test_gathered_run_directories_land_in_out_with_their_paths_moved(tmp_path):
    """--ray-results gather: an actor on another machine packs its scratch run directory; the coordinator unpacks
    it at the instance's place in OUT and makes the record's paths point there."""
    from pyrua_ros.evaluation import gather as G
    from pyrua_ros.evaluation import ray_engine as E

    scratch = tmp_path / "node-b" / "run"
    (scratch / "card").mkdir(parents=True)
    (scratch / "card" / "agentview_high.png").write_bytes(b"png")
    (scratch / "result.json").write_text(json.dumps({
        "suite": "fake_table", "task": 0, "seed": 0, "notes": [],
        "prompt": {"images": [str(scratch / "card" / "agentview_high.png")]}, "reason": str(scratch) + "x"}))
    target = tmp_path / "out" / "fake_table" / "0" / "0"
    target.mkdir(parents=True)
    (target / "stale.txt").write_text("from an earlier attempt")
    G.unpack_into(G.pack(scratch), target, {"host": "node-b", "path": str(scratch)})
    record = json.loads((target / "result.json").read_text())
    assert record["prompt"]["images"] == [str(target / "card" / "agentview_high.png")]
    assert record["reason"] == str(scratch) + "x"   # only whole path prefixes move
    assert record["notes"] == [f"run on node-b in {scratch}; gathered by Ray"]
    assert (target / "card" / "agentview_high.png").read_bytes() == b"png" and not (target / "stale.txt").exists()
    (tmp_path / "out" / ".eval").mkdir()
    (tmp_path / "out" / ".eval" / E.TOKEN_FILE).write_text("abc")
    assert E._token_matches(str(tmp_path / "out"), "abc") and not E._token_matches(str(tmp_path / "elsewhere"), "abc")


# ---------------------------------------------------------------------------------------------------- progress
def test_progress_plain_lines_and_live_view():
    import io

    from rich.console import Console

    from pyrua_ros.evaluation.progress import EvalProgress

    stream = io.StringIO()
    progress = EvalProgress(5, 2, finished_before=2, successes_before=1, stream=stream, tty=False)
    progress.start()
    progress.episode_started(0, "libero_goal:1:0")
    progress.episode_started(1, "libero_goal:8:0", attempt=2)
    progress.episode_status(0, {"turn": 3, "steps": 120, "tokens": 15400, "last": "python: moved"})
    progress.episode_done(1, "libero_goal:8:0", {"status": "boot_error", "reason": "episode reset failed: the sim "
                                                 "node exited with status 1", "worker_wall_s": 12.0}, final=False)
    progress.episode_done(0, "libero_goal:1:0", {"status": "completed", "environment_success": True,
                                                 "worker_wall_s": 75.0})
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[eval] starting: 3 episode(s) to run on 2 worker(s), 2 already finished"
    assert lines[2] == "[eval] w1 start libero_goal:8:0 (attempt 2): boot"   # a phase from the first second
    # an infrastructure failure names its cause on its line
    assert lines[3].startswith("[eval] w1 done libero_goal:8:0: boot_error infra in 12s (episode reset failed: the "
                               "sim node exited with status 1) -> retrying | 2/5 done")
    assert lines[4].startswith("[eval] w0 done libero_goal:1:0: completed success in 1m15s | 3/5 done | "
                               "success 2/3 (66.7%)")
    assert "ETA" in lines[4] and "ETA -" not in lines[4]   # one episode ended in this run: a pace exists
    progress.episode_done(1, "libero_goal:8:0", {"status": "planner_error", "reason": "provider error mid-episode: "
                                                 "connection: request 1 failed", "worker_wall_s": 3.0})
    progress.episode_done(1, "libero_goal:9:0", {"status": "interrupted", "reason": "interrupted",
                                                 "environment_success": True, "worker_wall_s": 3.0})
    lines = stream.getvalue().splitlines()
    assert "planner_error infra in 3s (provider error mid-episode: connection: request 1 failed)" in lines[5]
    # the one rate, with the buckets outside it named beside it; an interrupt is never a success
    assert "| 5/5 done | success 2/3 (66.7%); infra 1, interrupted 1 |" in lines[6]
    joining = EvalProgress(4, None, stream=io.StringIO(), tty=False)   # --address: the cluster's size comes later
    joining.start()
    assert joining.stream.getvalue() == ("[eval] starting: 4 episode(s) to run on the cluster's workers (counted "
                                         "once joined), 0 already finished\n")
    phased = EvalProgress(1, 1, stream=io.StringIO(), tty=False)   # each new phase: a line
    phased.episode_started(0, "fake_table:0:0")
    for status in ({"phase": "boot"}, {"phase": "reset", "phase_detail": "seed 0"}, {"turn": 1, "steps": 9},
                   {"phase": "agent", "phase_detail": "runtime replay"}, {"phase": "records"}):
        phased.episode_status(0, status)
    assert [line.rsplit(" at ", 1)[0] for line in phased.stream.getvalue().splitlines()] == [
        "[eval] w0 start fake_table:0:0: boot", "[eval] w0 reset fake_table:0:0 (seed 0)",
        "[eval] w0 agent fake_table:0:0 (runtime replay)", "[eval] w0 records fake_table:0:0"]
    counted = EvalProgress(1, 1, stream=io.StringIO(), tty=False, count_errors_as_failures=True)
    counted.episode_done(0, "libero_goal:8:0", {"status": "boot_error", "reason": "x"})
    assert "success 0/1 (0.0%); infra (in the rate) 1" in counted.headline()   # the final report's rule

    live = EvalProgress(4, 2, stream=io.StringIO(), tty=True)
    live.note("starting a private Ray instance on this machine")

    def screen() -> str:
        console = Console(record=True, width=160, file=io.StringIO())
        console.print(live)
        return console.export_text()

    assert "| starting a private Ray instance" in screen()
    live.episode_started(1, "libero_goal_swap:3:0")
    row = next(line for line in screen().splitlines() if "libero_goal_swap:3:0" in line)
    assert row.split()[:3] == ["w1", "libero_goal_swap:3:0", "boot"]          # a phase from the first second
    live.episode_status(1, {"phase": "agent", "phase_detail": "runtime openai"})
    live.episode_status(1, {"turn": 7, "steps": 410, "tokens": 52000, "last": "python: grasped the bowl"})
    text = screen()
    assert "0/4 done | success 0/0 (-)" in text and "ETA -" in text and "Ray" not in text
    row = next(line for line in text.splitlines() if "libero_goal_swap:3:0" in line)
    assert row.split()[:6] == ["w1", "libero_goal_swap:3:0", "agent", "7", "410", "52.0k"]
    assert "grasped the bowl" in row
    assert any(line.split()[:2] == ["w0", "idle"] for line in text.splitlines())
    live.episode_status(1, {"phase": "records", "phase_detail": "writing the records"})
    row = next(line for line in screen().splitlines() if "libero_goal_swap:3:0" in line)
    assert row.split()[2:4] == ["records", "7"]                              # the turn is kept
    live.start()   # an infrastructure failure's cause is printed above the live view
    live.episode_done(1, "libero_goal_swap:3:0", {"status": "planner_error", "reason": "provider error mid-episode: "
                                                  "connection: request 2 failed"})
    live.close()
    assert "w1 libero_goal_swap:3:0: planner_error: provider error mid-episode: connection: request 2 failed" in \
        live.stream.getvalue()


def test_workers_keep_their_task_when_they_can():
    """A reset to the driver's current (suite, task) reuses the simulator's scene: the coordinator hands each
    worker more of its own task, and a fresh worker a task nobody holds."""
    from pyrua_ros.evaluation.runner import Coordinator

    coordinator = Coordinator(pathlib.Path("/nonexistent"), {}, engine=None, progress=None)
    coordinator.todo.extend((I.Instance("libero_goal", t, s), 1) for t in (1, 8) for s in (0, 1))
    first = coordinator._next_for(0)[0]
    coordinator.slot_task[0] = (first.suite, first.task)
    second = coordinator._next_for(1)[0]
    coordinator.slot_task[1] = (second.suite, second.task)
    assert (first.task, second.task) == (1, 8)
    assert coordinator._next_for(1)[0] == I.Instance("libero_goal", 8, 1)
    assert coordinator._next_for(0)[0] == I.Instance("libero_goal", 1, 1)


def test_a_dead_model_server_stops_the_evaluation_after_k_episodes(tmp_path):
    """A model server that dies mid-evaluation cost every remaining episode its retries, silently. Now K episodes
    in a row that failed on it stop the evaluation: exit 4, the cause, "resume with the same command", the
    remaining episodes not started; each failure's cause is on its line and in the report, its prefix not
    doubled."""
    with socket.socket() as s:   # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "dead"
    proc = run_eval("--arm", "cells", "--driver", "fake", "--suite", "fake_table", "--task", "0-1", "--seed", "0-1",
                    "--workers", "1", "--runtime", "openai", "--base-url", f"http://127.0.0.1:{port}/v1",
                    "--no-preflight", "--openai-max-retries", "0", "--max-provider-failures", "2", "--retries", "0",
                    "--images", "none", "--no-video", "--no-record", "--out", str(out), timeout=600)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "the model server failed 2 episode(s) in a row" in proc.stderr
    assert "resume with the same command" in proc.stderr and "(exit 4)" in proc.stderr
    final = results(out)
    assert len(final) == 2 and episode_lines(proc.stderr, "start") == 2, proc.stderr[-3000:]   # 2 never started
    for r in final.values():
        assert r["status"] == "planner_error" and r["environment_success"] is False
        assert r["reason"].startswith("provider error mid-episode: connection: request 1 failed"), r["reason"]
        assert "connection: connection:" not in r["reason"]
    assert episode_lines(proc.stderr, "done") == 2 and "planner_error infra in" in proc.stderr
    assert "(provider error mid-episode: connection: request 1 failed" in proc.stderr   # the cause on the line
    assert "infrastructure failures and their causes:" in proc.stdout and "stopped: the model server" in proc.stdout


def test_a_private_ray_instance_gets_a_session_folder_no_other_user_can_reach():
    """Issue 28: a private Ray instance used the machine-wide /tmp/ray, where uid 65534 renamed a running
    instance's root-owned log. Its folder now lies in a 0700 folder of ours (Ray itself makes the folder it is
    given 0777), short enough for Ray's socket paths."""
    from pyrua_ros.evaluation.ray_engine import private_temp_dir

    first, second = private_temp_dir(), private_temp_dir()
    try:
        assert first.parent != second.parent and first.name == "r" and len(str(first)) < 40
        info = first.parent.stat()
        assert info.st_uid == os.geteuid() and info.st_mode & 0o777 == 0o700
    finally:
        first.parent.rmdir()
        second.parent.rmdir()
