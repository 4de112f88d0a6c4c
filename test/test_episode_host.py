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
