"""The example programs solve their libero_goal tasks, judged by the benchmark's own check, and one of them runs
through the REAL stack with recording on.

Each ``pyrua_ros/examples`` program for libero_goal (and the held-out layouts it must also solve) runs on the sim
node's driver core in this process (:class:`~pyrua_ros.testing.inprocess.InProcessDriver`), from the official init
state 0, judged by ``env.check_success()``. The subject there is the program, not the transport: the core takes the
same control steps in-process as over ROS, bit for bit (``test_reproducibility.py`` holds that), so what a program
does here it does through ``pyrualean play``. Each runs twice: ``move_to`` streaming twists (a driver without the
Cartesian action) and as one ``MoveToTarget`` goal per move (the sim node's way): the state digests of every step
and each call's ledgered steps must be the same.

One program (the middle-drawer one, judged only there) runs as ``pyrualean play --runtime replay --driver sim``
would run it (``test_a_program_episode_over_ros_is_recorded_frame_by_frame``): ``agent.run.episode.play`` boots
robo over ROS against this module's LIBERO-PRO sim node, runs the program in the cell kernel and records the
episode. Besides
success, it reports its wall time and how many camera renders it cost:

- ``capture_renders`` / ``segmentation_renders``: on-request renders of the capture and segmentation services,
  counted as the messages the sim node published on ``/sim/capture/<camera>/<res>/color`` and ``.../segmentation``
  (one message per render; an external subscriber here, reliable + transient local, so none is missed);
- ``stream_renders``: stream-camera frames (``/cameras/<camera>/color/image_raw``, rendered only while the
  episode video subscribes, 2 Hz of sim time) counted in the run's ``episode.mcap``.

The same module runs the paper's A/B on libero_goal task 8: the instance solved by code cells and by one tool
call per primitive (``--arm tools``), both through the ``openai`` runtime and a scripted chat-completions
server, then paired by ``pyrualean compare``.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from pyrua_ros.examples import EXAMPLES
from pyrua_ros.testing.chat_server import ChatServer, Reply
from pyrua_ros.wire.interfaces import load

NAMES = load()
# the program that runs over ROS with recording on (test_a_program_episode_over_ros_is_recorded_frame_by_frame),
# judged there by the same checks as the in-process ones: the middle-drawer task besides task 8 (the README's)
RECORDED = ("libero_goal", 0)
# Task 8 (bowl on plate) is the README's main command: test_readme_main_command_solves_its_episode runs it; the
# RECORDED program is judged over ROS only.
TASKS = sorted(task for suite, task in EXAMPLES if suite == "libero_goal" and task not in (8, RECORDED[1]))
# held-out layouts the packaged programs must also solve: (suite, task) -> the program's libero_goal task
HELD_OUT = {("libero_goal_swap", 1): 1}
ROOT = pathlib.Path(__file__).resolve().parent.parent


class RenderCounter:
    """Counts capture and segmentation messages per topic on a spinning RosClient."""

    def __init__(self, client):
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image

        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._subs = []
        for camera in NAMES.robot.cameras:
            for resolution in NAMES.sim.resolutions:
                topics = NAMES.sim.capture_topics(camera, resolution)
                for kind in ("color", "segmentation"):
                    self._subs.append(client.node.create_subscription(
                        Image, topics[kind], lambda _m, k=f"{kind}:{camera}/{resolution}": self._count(k), qos))

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def take(self) -> dict[str, int]:
        with self._lock:
            counts, self.counts = dict(self.counts), collections.Counter()
        return counts


def reset_time(mcap_path) -> float:
    """Sim time [s] of the recorded episode's step 0 (sim time never runs backwards across a driver's resets)."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from pyrua_ros.wire.interfaces import resolve

    statuses = []
    with open(mcap_path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _s, _c, _m, msg in reader.iter_decoded_messages(topics=[resolve(NAMES.sim.episode_status)]):
            statuses.append(json.loads(msg.data))
    episode = statuses[-1]["episode_id"]
    return next(s["sim_time"] for s in statuses if s["episode_id"] == episode and s["step"] == 0)


def stream_stamps(mcap_path) -> dict[str, list[float]]:
    """Sim-time stamps [s] of the recorded stream color frames, per camera, in recording order; a frame the
    lockstep driver re-published while the model thought (same stamp as the one before) counts once."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from pyrua_ros.wire.interfaces import resolve

    topics = {resolve(NAMES.driver.color(camera)): camera for camera in NAMES.robot.cameras}   # bags: absolute
    stamps: dict[str, list[float]] = {camera: [] for camera in NAMES.robot.cameras}
    with open(mcap_path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _s, channel, _m, msg in reader.iter_decoded_messages(topics=list(topics)):
            stamp, seen = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, stamps[topics[channel.topic]]
            if not seen or seen[-1] != stamp:
                seen.append(stamp)
    return stamps


@pytest.fixture(scope="module")
def renders(ros_client_module):
    return RenderCounter(ros_client_module)


@pytest.fixture(scope="module")
def ros_client_module():
    from pyrua_ros.testing import RosClient

    client = RosClient("scripted_episode_observer")
    yield client
    client.close()


@pytest.fixture(scope="module")
def in_process_driver():
    """The sim node's driver core and a LIBERO-PRO episode in this process (each test resets it to its task)."""
    from pyrua_ros.testing.inprocess import InProcessDriver

    driver = InProcessDriver()
    yield driver
    driver.close()


@pytest.mark.parametrize("suite,task", [("libero_goal", t) for t in TASKS] + sorted(HELD_OUT))
def test_example_program_solves_its_task(suite, task, in_process_driver, record_property):
    from pyrua_ros.examples import run_program
    from pyrua_ros.robo.libero import libero_host
    from pyrua_ros.settings.config import EpisodeSettings
    from pyrua_ros.sim_interfaces.state_digest import describe_difference

    program = EXAMPLES[("libero_goal", HELD_OUT.get((suite, task), task))]
    runs = {}
    for goals in (False, True):     # move_to as a twist stream, then as one Cartesian goal per move
        t0 = time.monotonic()
        in_process_driver.cartesian_goals = goals
        try:
            in_process_driver.reset(suite, task, 0, EpisodeSettings.max_episode_steps)   # play's budget
            host = libero_host(in_process_driver, primitives="no-vla")
            end = run_program(program, host.robo)
        finally:
            in_process_driver.cartesian_goals = False
        calls = [(r.tool, r.env_steps, r.summary) for r in host.ledger.records]
        runs[goals] = (end, in_process_driver.status(), in_process_driver.state_trace.summary(), calls)
    twist, goal = runs[False], runs[True]
    assert describe_difference(twist[2], goal[2]) is None, describe_difference(twist[2], goal[2])
    assert twist[2]["missing"] == 0 and goal[2]["missing"] == 0
    assert goal[0] == twist[0] and goal[3] == twist[3], "the same calls with the same steps and results"
    end, status, _digest, _calls = goal
    record_property("env_steps", status.step)
    record_property("wall_s", round(time.monotonic() - t0, 1))
    # the program ran to its end, or the task was solved while it still moved (which step that is may differ
    # between CPUs); either way the benchmark's check says solved and the episode ended by success
    assert end in ("returned", "terminated"), end
    assert status.success and status.terminated and not status.truncated, status
    # every motion call is ledgered and the program used only scripted primitives (no VLA skill)
    used = {record.tool for record in host.ledger}
    assert used <= {"view_env_state", "segment", "artifact", "move_to", "move_pose", "set_gripper", "release"}, used
    assert "segment" in used and used & {"move_to", "move_pose"}, used   # it looked, then moved



def test_a_program_episode_over_ros_is_recorded_frame_by_frame(tmp_path, sim_node, renders, record_property,
                                                              capsys):
    from pyrua_ros.agent.run.episode import play
    from pyrua_ros.settings.config import PlayConfig
    from pyrua_ros.settings.schema import build

    suite, task = RECORDED
    program = EXAMPLES[RECORDED]
    renders.take()
    t0 = time.monotonic()
    result = play(build(PlayConfig, {"out": tmp_path / f"run_{task}", "suite": suite, "task": task,
                                     "seed": 0, "runtime": "replay", "replay": program, "robot": "external"}))
    wall = time.monotonic() - t0
    time.sleep(0.5)   # let the last capture message land
    counts = renders.take()
    saved = json.loads((tmp_path / f"run_{task}" / "result.json").read_text())
    calls = [json.loads(line) for line in (tmp_path / f"run_{task}" / "calls.jsonl").read_text().splitlines()]
    streams = stream_stamps(tmp_path / f"run_{task}" / "episode.mcap")
    report = {
        "suite": suite, "task": task, "program": program.name, "environment_success": result.environment_success,
        "status": result.status, "env_steps": saved["env_steps"], "wall_s": round(wall, 1),
        "startup_s": saved["startup_s"], "policy_wall_s": saved["policy_wall_s"],
        "capture_renders": sum(v for k, v in counts.items() if k.startswith("color:")),
        "segmentation_renders": sum(v for k, v in counts.items() if k.startswith("segmentation:")),
        "renders_by_view": counts, "stream_renders": sum(map(len, streams.values())),
        "robo_calls": len(calls), "segment_calls": sum(c["tool"] == "segment" for c in calls),
    }
    for key, value in report.items():
        record_property(key, value)
    with capsys.disabled():
        print("\nscripted episode:", json.dumps(report))
    assert result.status == "completed" and saved["error"] is None, saved
    assert result.environment_success is True and saved["environment_success"] is True, saved
    # every motion call is ledgered and the program used only scripted primitives (no VLA skill)
    used = {c["tool"] for c in calls}
    assert used <= {"view_env_state", "segment", "artifact", "move_to", "move_pose", "set_gripper", "release"}, used
    assert "segment" in used and used & {"move_to", "move_pose"}, used   # it looked, then moved
    # the drawer program (segment the middle handle, pitch the hand toward the cabinet with move_pose, close on
    # the bar, pull), which the earlier top-down programs could not solve, opens it well within the budget
    assert {c["tool"] for c in calls if c["stateful"]} <= {"move_pose", "set_gripper"}, calls
    assert saved["env_steps_total"] < 400, saved
    assert report["capture_renders"] >= 2, "at least the two step-0 card images were rendered on request"
    # the recording holds stream frames of both cameras, rendered off the control path: at most the camera rate
    # (2 Hz of sim time: frames at least 0.5 s apart, more where the renderer dropped one; one more frame where
    # the driver saw the recorder's subscription late, under load, and rendered the state then), in order, never
    # past the episode's end; the video has the agentview ones
    import imageio_ffmpeg

    from pyrua_ros.records.video import HOLD_S

    t0 = reset_time(tmp_path / f"run_{task}" / "episode.mcap")
    final_t = t0 + saved["env_steps_total"] * NAMES.robot.control_period_s
    for camera, stamps in streams.items():
        assert stamps, f"no {camera} stream frame recorded"
        assert all(b > a for a, b in itertools.pairwise(stamps)), stamps
        assert sum(b - a < 0.5 - 1e-6 for a, b in itertools.pairwise(stamps)) <= 1, stamps
        assert t0 - 1e-6 <= stamps[0] and stamps[-1] <= final_t + 1e-6, (t0, stamps, final_t)
        assert final_t - stamps[-1] < 0.5 + 1e-6, (stamps, final_t)   # the backlog landed before the bag closed
    # the video plays in real time: from the card view (step 0) to the final state, then that state held for
    # HOLD_S; every recorded agentview frame has a slot in it
    video_frames, video_s = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / f"run_{task}" / "episode.mp4"))
    assert abs(video_s - (final_t - t0 + HOLD_S)) <= 1.0, (video_s, final_t - t0)
    assert video_frames >= len(streams["agentview"]), (video_frames, len(streams["agentview"]))


def test_readme_main_command_solves_its_episode(tmp_path):
    """``scripts/demo.sh`` (set up + one replayed libero_goal task 8 episode) is judged successful by the benchmark.

    It starts its own sim node, so it runs on a ROS domain of its own, apart from this module's sim node.
    """
    from pyrua_ros.wire.rosenv import claim_domain_id

    out = tmp_path / "demo"
    env = dict(os.environ, PYRUA_DEMO_OUT=str(out), ROS_DOMAIN_ID=str(claim_domain_id()))
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["environment_success"] is True, result
    assert (result["suite"], result["task"], result["seed"]) == ("libero_goal", 8, 0)
    assert "libero_goal:8" in proc.stdout and " Y " in proc.stdout   # the summary row the script prints
    assert (out / "episode.mp4").stat().st_size > 0 and (out / "episode.mcap").stat().st_size > 0


# --- The paper's A/B on the same instance: code cells vs one tool call per primitive (openai runtime) -----------
# The tools-arm script is a sequence of primitive calls whose arguments are computed from the tool results the
# runtime sent back (where ``segment`` said the bowl and the plate are), as a model would compute them.
BOWL_PROGRAM = (ROOT / "pyrua_ros" / "examples" / "libero_goal_bowl_on_plate.py").read_text()
CARRY_DZ, RIM_DY, MEDIAN_BIAS_X = 0.15, 0.045, 0.02   # the example program's grasp geometry [m]


def _tool_results(body: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def _scene(body: dict) -> tuple[list[float], list[float], list[float]]:
    """(bowl median, plate median, current gripper position) from the tool results so far."""
    results = _tool_results(body)
    seg = {r["call"]: r["value"]["world_xyz"] for r in results if r.get("tool") == "segment"}
    eef = next(r["value"]["eef_pos"] for r in results if r.get("tool") == "state")
    moves = [r["value"]["final_eef_pos"] for r in results if r.get("tool") == "move_to" and "value" in r]
    return seg[1], seg[2], moves[-1] if moves else eef


def _legs(start: list[float], goal: list[float], gripper: float, **options) -> tuple:
    """move_to calls in planar legs of at most 0.25 m (one call may travel at most 0.30 m in x/y)."""
    n = max(1, math.ceil(math.hypot(goal[0] - start[0], goal[1] - start[1]) / 0.25))
    return tuple(("move_to", {"xyz": [start[0] + (goal[0] - start[0]) * i / n,
                                      start[1] + (goal[1] - start[1]) * i / n, goal[2]],
                              "gripper": gripper, **options}) for i in range(1, n + 1))


def _grasp_point(bowl):
    return [bowl[0] + MEDIAN_BIAS_X, bowl[1] + RIM_DY, bowl[2]]


def _approach(body):
    bowl, _plate, eef = _scene(body)
    gx, gy, bz = _grasp_point(bowl)
    return Reply(tool_calls=_legs(eef, [gx, gy, bz + 0.10], -1.0))


def _descend(body):
    gx, gy, bz = _grasp_point(_scene(body)[0])
    return Reply(tool_calls=(("move_to", {"xyz": [gx, gy, bz], "gripper": -1.0, "step_clip": 0.015,
                                          "tol": 0.008}),))


def _lift(body):
    gx, gy, bz = _grasp_point(_scene(body)[0])
    return Reply(tool_calls=(("move_to", {"xyz": [gx, gy, bz + CARRY_DZ], "gripper": 1.0}),))


def _carry(body):
    bowl, plate, eef = _scene(body)
    return Reply(tool_calls=_legs(eef, [plate[0], plate[1] + RIM_DY, bowl[2] + CARRY_DZ], 1.0))


def _lower(body):
    _bowl, plate, _eef = _scene(body)
    return Reply(tool_calls=(("move_to", {"xyz": [plate[0], plate[1] + RIM_DY, plate[2] + 0.05], "gripper": 1.0,
                                          "step_clip": 0.015, "tol": 0.008}),))


TOOLS_SCRIPT = [
    Reply(reasoning_content="Find the bowl and the plate, and where the gripper is.",
          tool_calls=(("segment", {"prompt": "the black bowl"}), ("segment", {"prompt": "the plate"}),
                      ("state", {}))),
    _approach, _descend,
    Reply(tool_calls=(("set_gripper", {"gripper": 1.0, "steps": 12}),)),
    _lift, _carry, _lower,
    Reply(tool_calls=(("release", {"max_steps": 20}),)),
    Reply(content="The bowl is on the plate.", tool_calls=(("finish", {"status": "success",
                                                                      "summary": "bowl released on the plate"}),)),
]
CELLS_SCRIPT = [
    Reply(tool_calls=(("python", {"code": BOWL_PROGRAM + "\nrun(robo)"}),)),
    Reply(tool_calls=(("finish", {"status": "success", "summary": "bowl on plate"}),)),
]


def _play(out: pathlib.Path, arm: str, script: list) -> tuple[dict, list[dict]]:
    with ChatServer(script) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pyrua_ros.cli.main", "play", "--out", str(out), "--arm", arm, "--suite",
             "libero_goal", "--task", "8", "--seed", "0", "--driver", "external", "--runtime", "openai",
             "--base-url", server.base_url, "--no-video", "--no-record", "--feedback", "pure", "--images", "none",
             "--progress", "off"], capture_output=True, text=True, timeout=400, cwd=ROOT)
        bodies = server.completion_bodies()
        assert server.steps_used == len(script), (server.steps_used, proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "result.json").read_text()), bodies


def test_cells_and_tools_arms_solve_the_same_instance_and_compare_pairs_them(tmp_path, sim_node):
    tools, bodies = _play(tmp_path / "tools", "tools", TOOLS_SCRIPT)
    assert tools["status"] == "completed" and tools["environment_success"] is True, tools
    offered = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert offered[-1] == "finish" and {"segment", "move_to", "set_gripper", "release", "state"} <= set(offered)
    assert tools["finish"]["environment_terminated"] is True
    results = _tool_results(bodies[-1])
    # the success latches on the lowering move_to or on the release (which one depends on the CPU's floating
    # point): every call up to it ran, every call after it was refused because the episode had ended
    solved = next(i for i, r in enumerate(results) if isinstance(r.get("value"), dict) and r["value"].get("terminated"))
    assert results[solved]["tool"] in ("move_to", "release"), results[solved]
    assert all(set(r) & {"exception", "episode_finished"} == set() for r in results[:solved + 1]), results
    assert all(r.get("episode_finished") == "terminated" for r in results[solved + 1:]), results[solved + 1:]
    calls = [json.loads(line) for line in (tmp_path / "tools" / "calls.jsonl").read_text().splitlines()]
    assert [c["tool"] for c in calls if c["tool"] != "view_env_state"][:3] == ["segment", "segment", "move_to"]
    assert tools["tool_turns"] == len(results) + 1 and tools["calls"] >= len(results)

    cells, _ = _play(tmp_path / "cells", "cells", CELLS_SCRIPT)
    assert cells["status"] == "completed" and cells["environment_success"] is True, cells

    report_path = tmp_path / "compare.json"
    proc = subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", "compare", str(tmp_path / "cells"),
                           str(tmp_path / "tools"), "--left-system", "pyrualean:cells", "--right-system",
                           "pyrualean:tools", "--output", str(report_path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(report_path.read_text())
    assert report["pairing"]["valid"] is True and report["pairing"]["matched_episodes"] == 1
    pair = report["pairs"][0]
    assert pair["task"] == "libero_goal:8" and pair["delta"]["native_success_delta"] == 0
    assert pair["delta"]["turns"] == tools["tool_turns"] - cells["tool_turns"] > 0
    assert pair["delta"]["input_tokens"] == tools["generation"]["input_tokens"] - cells["generation"]["input_tokens"]
