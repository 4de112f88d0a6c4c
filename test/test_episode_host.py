"""Episodes by composition: one EpisodeHost (a driver process and its ROS backend) serves several episodes in a
row, each with its own run directory, robo ledger and result, and stays up until its owner closes it."""

import json
import pathlib

from pyrua_ros.agent.run.episode import EpisodeHost, play
from pyrua_ros.agent.run.single_shot import run_policy
from pyrua_ros.settings.config import PlayConfig, RunConfig
from pyrua_ros.settings.schema import build

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "pyrua_ros" / "examples" / "fake_table_cube_on_plate.py"


def test_one_host_serves_a_loop_episode_then_a_single_shot_on_the_same_driver(tmp_path):
    common = {"suite": "fake_table", "task": 0, "robot": "fake", "video": False, "record": False}
    first = build(PlayConfig, common | {"out": tmp_path / "a", "replay": PROGRAM})
    host = EpisodeHost(first.episode)
    host.open(tmp_path / "driver.log")
    try:
        pid = host.driver.pid
        a = play(first, host=host)
        second = build(RunConfig, common | {"out": tmp_path / "b", "policy": PROGRAM, "seed": 3})
        b = run_policy(second, host=host)
        assert host.driver.alive() and host.driver.pid == pid        # the same driver process, still up
    finally:
        host.close()
    assert not host.driver.alive()
    assert a.status == "completed" and a.environment_success is True
    assert b.status == "completed" and b.environment_success is True and b.seed == 3
    # each episode has its own ledger and records; the second starts from a fresh reset
    calls_a = (tmp_path / "a" / "calls.jsonl").read_text().splitlines()
    calls_b = (tmp_path / "b" / "calls.jsonl").read_text().splitlines()
    assert len(calls_a) == a.calls > 0 and len(calls_b) == b.calls > 0
    assert {json.loads(line)["tool"] for line in calls_b} >= {"segment", "move_to"}
    assert b.env_steps_total == b.env_steps > 0
    assert not (tmp_path / "a" / "host.log").exists()           # a lent host logs where its owner said


def test_an_eval_worker_frees_each_episode_before_the_next(tmp_path):
    """An episode's objects hold one another (callbacks, hooks), so the cyclic collector frees them; a reused eval
    worker must not keep finished episodes (their images, bag buffers and ledgers) until the collector's rare full
    pass: over a long evaluation that memory grew without bound. Automatic collection is off here, so only what the
    worker frees itself counts."""
    import gc

    from pyrua_ros.agent.run.episode import Episode
    from pyrua_ros.evaluation.jobs import config_to_json
    from pyrua_ros.evaluation.worker import EpisodeWorker

    worker = EpisodeWorker(0, tmp_path / "logs")
    gc.collect()
    gc.disable()
    try:
        for seed in range(2):   # recording and video on, as users run an evaluation
            out = tmp_path / f"run{seed}"
            cfg = build(PlayConfig, {"suite": "fake_table", "task": 0, "seed": seed, "robot": "fake",
                                     "replay": PROGRAM, "out": out})
            summary = worker.run({"config": config_to_json(cfg), "out": str(out)})
            assert summary["status"] == "completed" and summary["environment_success"] is True, summary
            assert (out / "episode.mcap").stat().st_size > 0 and (out / "episode.mp4").stat().st_size > 0
            left = [o for o in gc.get_objects() if isinstance(o, Episode)]
            assert not left, f"{len(left)} finished episode(s) still in memory after episode {seed}"
        assert worker.driver_starts == 1
    finally:
        gc.enable()
        worker.close()
