"""What the ROS bridge costs: lockstep control steps/s over ROS against env.step in-process, and one capture.

Run: ``.venv/bin/python benchmarks/sim_bridge.py [--steps 300]`` from the repository root. It sets the loopback
DDS environment itself (own domain id) before anything imports rclpy.

In one run, with every side built once:
- in-process: ``LiberoEpisode`` (libero_goal task 8, seed 0) stepping with LIBERO's stock ``env.step``, reset,
  then a closed-loop P-servo for ``--steps`` control steps, the target moving every 50 steps (the
  ROS-BRIDGE-MEASURED.md workload), no rendering; the same with the lean step the sim node uses
  (``inprocess_lean_steps_per_s``, for reference);
- over ROS: the real sim node (``python -m pyrua_ros.nodes.sim_node``, lockstep) as a child process, reset over
  ``/sim/reset``, then driven by this process: each /ee_pose callback computes the next twist and publishes it
  (EventsExecutor, one thread). Both compute the same actions from the same poses; the spread of the final
  poses over all runs is reported (0 = the lockstep is exact);
- through robo: ``LiberoRobot`` over ``RosBackend`` on the same node, with the episode recorder and video
  subscribed as ``pyrualean play`` has them (so stream frames render, off the control path), moving through the
  same targets with ``move_to`` until ``--steps`` steps: the path users pay (``robo_steps_per_s``);
- ``--rounds`` rounds alternate the sides (A B C, C B A, ...) because the machine is shared and its load drifts;
  the rates are total steps over total wall time;
- one capture of ``agentview`` at ``high`` (1024 px) through the capture service (time until the response; the
  images are published before it), and the same render in-process;
- both cameras at ``high`` through ``RosBackend.capture`` (service, images over DDS, TF: what robo waits for)
  against one raw render + read-back of the pair in-process (``capture_pair_ratio``, twice each).
The last line is JSON: ros_steps_per_s, inprocess_steps_per_s, ratio (goal >= 1.0), robo_steps_per_s,
robo_ratio (through robo / stock in-process), capture_s, and the details; final_pose_max_diff_m is the spread of
the P-servo's final poses over every in-process (stock and lean) and ROS run: 0.0 = bit-identical trajectories.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyrua_ros.testing import apply_loopback_environment  # noqa: E402

apply_loopback_environment()

import numpy as np  # noqa: E402

MAX_SPEED = 0.45           # [m/s] below the node's safety limit (0.5), so the filter never clips
OFFSETS = np.array([[0.10, 0.0, 0.0], [0.0, 0.10, -0.05], [-0.10, 0.0, 0.05], [0.0, -0.10, 0.0],
                    [0.05, 0.05, -0.10], [0.0, 0.0, 0.0]])


def servo_twist(k: int, pos: np.ndarray, home: np.ndarray) -> np.ndarray:
    """The P-servo command [m/s] of step ``k``: toward home + offset (changes every 50 steps), speed-limited."""
    target = home + OFFSETS[(k // 50) % len(OFFSETS)]
    v = (target - pos) / 0.05
    n = np.linalg.norm(v)
    return v * (MAX_SPEED / n) if n > MAX_SPEED else v


def osc_action(v: np.ndarray, gripper: float = -1.0) -> np.ndarray:
    """The node's twist -> OSC_POSE mapping at 20 Hz (a = v*dt/0.05, no rotation), latched gripper open."""
    a = np.zeros(7)
    a[:3] = np.clip(v * 0.05 / 0.05, -1.0, 1.0)
    a[6] = gripper
    return a


class InProcess:
    """The episode in this process (built once); :meth:`run` resets and runs the workload."""

    def __init__(self, lean_step: bool = False):
        from pyrua_ros.sim.env import LiberoEpisode

        self.ep = LiberoEpisode(stream_resolution=256, lean_step=lean_step)

    def run(self, steps: int) -> dict:
        ep = self.ep
        ep.reset("libero_goal", 8, 0, 10000)
        home = ep.eef_pose()[0]
        step_s = []
        t0 = time.perf_counter()
        for k in range(steps):
            a = osc_action(servo_twist(k, ep.eef_pose()[0], home))
            s0 = time.perf_counter()
            ep.step(a)
            step_s.append(time.perf_counter() - s0)
        wall = time.perf_counter() - t0
        return {"wall_s": wall, "env_step_s": float(np.sum(step_s)), "final": ep.eef_pose()[0].tolist()}

    def capture_s(self) -> float:
        t0 = time.perf_counter()
        self.ep.capture("agentview", 1024)
        return time.perf_counter() - t0

    def raw_pair_s(self, resolution: int = 1024) -> float:
        """One raw render + read-back (color and depth) of both cameras at ``resolution``, nothing else."""
        from pyrua_ros.sim.render import StateCopy, ViewRequest

        self.ep.step(osc_action(np.zeros(3)))          # a new state: nothing cached
        requests = [ViewRequest(cid, resolution, frozenset({"color", "depth"})) for cid in self.ep._camera_ids.values()]
        t0 = time.perf_counter()
        self.ep.renderer.render(StateCopy.of(self.ep._data), requests, timeout=120.0)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.ep.close()


class OverRos:
    """The sim node as a child process and this process as its lockstep client (one executor, this thread)."""

    def __init__(self, code: pathlib.Path | None = None):
        """``code``: another checkout's root whose package runs the sim node (on a ROS domain of its own)."""
        import rclpy
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from rclpy.experimental import EventsExecutor
        from std_srvs.srv import Trigger

        from pyrua_ros.testing import NodeProcess, env_with_code
        from pyrua_ros.wire import qos
        from pyrua_ros.wire.interfaces import load
        from pyrua_ros.wire.rosenv import claim_domain_id

        self.names = names = load()
        env = env_with_code(code)
        if code is not None:
            env["ROS_DOMAIN_ID"] = str(claim_domain_id())
        self.proc = NodeProcess.module("pyrua_ros.nodes.sim_node", "--ros-args", "--params-file",
                                       str((code or ROOT) / "config" / "sim.yaml"), cwd=str(code or ROOT), env=env)
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=int(env["ROS_DOMAIN_ID"]))
        self.node = rclpy.create_node("sim_bridge_bench", context=self.ctx)
        self.ex = EventsExecutor(context=self.ctx)   # the cheapest executor (ROS-BRIDGE-MEASURED.md)
        self.ex.add_node(self.node)
        if not self.proc.wait_for_output("sim node ready", 180.0):
            raise RuntimeError("sim node did not start:\n" + self.proc.output()[-3000:])
        self.pub = self.node.create_publisher(TwistStamped, names.driver.servo_twist, qos.LOCKSTEP)
        self.node.create_subscription(PoseStamped, names.driver.ee_pose, self._on_pose, qos.LOCKSTEP)
        self.reset_cli = self.node.create_client(Trigger, names.sim.reset)
        self.capture_cli = self.node.create_client(Trigger, names.sim.capture_service("agentview", "high"))
        if not (self.reset_cli.wait_for_service(timeout_sec=30.0) and self.capture_cli.wait_for_service(
                timeout_sec=30.0)):
            raise RuntimeError("sim services not available")
        self._spin_until(lambda: self.pub.get_subscription_count() > 0, 30.0, "twist subscriber")
        self.state: dict = {}

    def _spin_until(self, predicate, timeout_s: float, what: str, period_s: float = 0.05) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")
            self.ex.spin_once(timeout_sec=period_s)

    def _send(self, pos) -> None:
        from geometry_msgs.msg import TwistStamped

        msg = TwistStamped()
        msg.header.frame_id = self.names.frames.world
        v = servo_twist(self.state["k"], pos, self.state["home"])
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = map(float, v)
        self.pub.publish(msg)

    def _on_pose(self, msg) -> None:
        st = self.state
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        pos = np.array([msg.pose.position.x, msg.pose.position.y, msg.pose.position.z])
        if st.get("home") is None:          # waiting for the pose published by the reset
            st["reset_pos"] = pos
            return
        if stamp <= st["last"]:             # accept only a pose newer than the last one
            return
        st["last"] = stamp
        st["k"] += 1
        if st["k"] >= st["steps"]:
            st["t_end"], st["final"] = time.perf_counter(), pos
            return
        self._send(pos)

    def _call(self, client, timeout_s: float):
        from std_srvs.srv import Trigger

        fut = client.call_async(Trigger.Request())
        self.ex.spin_until_future_complete(fut, timeout_sec=timeout_s)
        if not (fut.done() and fut.result().success):
            raise RuntimeError(f"{client.srv_name}: {fut.result() if fut.done() else 'no answer'}")
        return fut.result()

    def run(self, steps: int) -> dict:
        self.state = {"k": 0, "steps": steps, "home": None, "reset_pos": None, "t_end": None}
        self._call(self.reset_cli, 120.0)
        self._spin_until(lambda: self.state["reset_pos"] is not None, 10.0, "/ee_pose after reset")
        self.state.update(home=self.state["reset_pos"], last=(0, 0))
        t0 = time.perf_counter()
        self._send(self.state["home"])
        self._spin_until(lambda: self.state["t_end"] is not None, 600.0, f"{steps} lockstep steps", 1.0)
        return {"wall_s": self.state["t_end"] - t0, "final": self.state["final"].tolist()}

    def capture_s(self) -> float:
        t0 = time.perf_counter()
        self._call(self.capture_cli, 120.0)
        return time.perf_counter() - t0

    def close(self) -> None:
        import rclpy

        self.ex.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)
        rc = self.proc.stop()
        if rc not in (0, None):
            print(f"warning: sim node exit code {rc}", file=sys.stderr)


class ThroughRobo:
    """``LiberoRobot`` over ``RosBackend`` on the running sim node, recording as an episode does (the recorder and
    the video subscribe only during this side's runs, so the other sides render nothing)."""

    def __init__(self, out_dir: pathlib.Path):
        from pyrua_ros.robo.libero import libero_host
        from pyrua_ros.robo.ros_backend import RosBackend

        self.out_dir = out_dir
        self.backend = RosBackend()
        self.host = libero_host(self.backend, primitives="no-vla")
        self.recorded = {"messages": 0, "color_frames": 0, "video_frames": 0}
        self.runs = 0

    def _record(self, k: int):
        from pyrua_ros.records.recorder import record_episode
        from pyrua_ros.records.video import EpisodeVideo

        recorder = record_episode(self.backend.node, self.out_dir / f"robo_{k}.mcap")
        video = EpisodeVideo(self.backend.node)
        deadline = time.monotonic() + 10.0
        while any(sub.get_publisher_count() == 0 for sub in video._subs) and time.monotonic() < deadline:
            time.sleep(0.05)
        return recorder, video

    def run(self, steps: int) -> dict:
        b, robo = self.backend, self.host.robo
        b.reset("libero_goal", 8, 0, 10000)
        self.runs += 1
        recorder, video = self._record(self.runs)
        home = b.ee_pose().pos
        step0 = b.status().step
        t0 = time.perf_counter()
        k = 0
        while b.status().step - step0 < steps:
            left = steps - (b.status().step - step0)
            robo.move_to((home + OFFSETS[k % len(OFFSETS)]).tolist(), robo.OPEN, tol=1e-4, step_clip=0.0225,
                         max_steps=min(50, left))
            k += 1
        wall = time.perf_counter() - t0
        counts = recorder.close()
        self.recorded["messages"] += sum(counts.values())
        self.recorded["color_frames"] += sum(n for topic, n in counts.items() if "color" in topic)
        self.recorded["video_frames"] += len(video.frames)
        video.close()
        return {"wall_s": wall, "steps": b.status().step - step0}

    def capture_pair_s(self) -> float:
        """Both cameras at high resolution through RosBackend.capture (service, images over DDS, TF), as robo
        captures the card images."""
        self.backend.servo(np.zeros(3), np.zeros(3))          # a new state: nothing cached
        t0 = time.perf_counter()
        for camera in self.backend.cameras:
            self.backend.capture(camera, "high")
        return time.perf_counter() - t0

    def close(self) -> dict:
        self.host.close()
        return dict(self.recorded)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="control steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating in-process / ROS rounds")
    parser.add_argument("--baseline-rev", default=None,
                        help="also drive a sim node running this git revision of the package (before/after)")
    args = parser.parse_args()
    os.chdir(ROOT)
    sides: dict = {"inprocess": InProcess(lean_step=False), "inprocess_lean": InProcess(lean_step=True)}
    recording = {}
    try:
        sides["ros"] = OverRos()
        if args.baseline_rev:
            from pyrua_ros.testing import checkout_revision

            sides["baseline_ros"] = OverRos(checkout_revision(args.baseline_rev, ROOT))
        sides["robo"] = ThroughRobo(pathlib.Path(tempfile.mkdtemp(prefix="sim_bridge_")))
        runs: dict[str, list[dict]] = {name: [] for name in sides}
        for r in range(args.rounds):       # alternate the order (ABCD, DCBA, ...) so drift in machine load cancels
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                runs[name].append(sides[name].run(args.steps))
                print(f"round {r} {name:14s}: {runs[name][-1].get('steps', args.steps) / runs[name][-1]['wall_s']:.1f}"
                      " steps/s", flush=True)
        capture_ros, capture_local = sides["ros"].capture_s(), sides["inprocess"].capture_s()
        pairs = [(sides["robo"].capture_pair_s(), sides["inprocess"].raw_pair_s()) for _ in range(2)]
    finally:
        for name, side in sides.items():
            closed = side.close()
            if name == "robo":
                recording = closed

    def rate(name: str) -> float:
        return sum(x.get("steps", args.steps) for x in runs[name]) / sum(x["wall_s"] for x in runs[name])

    total = args.steps * args.rounds
    ros, inproc, robo = rate("ros"), rate("inprocess"), rate("robo")
    finals = [x["final"] for name in runs if name != "robo" for x in runs[name]]
    result = {
        "ros_steps_per_s": round(ros, 2),
        "inprocess_steps_per_s": round(inproc, 2),
        "ratio": round(ros / inproc, 3),
        "robo_steps_per_s": round(robo, 2),
        "robo_ratio": round(robo / inproc, 3),
        "inprocess_lean_steps_per_s": round(rate("inprocess_lean"), 2),
        "capture_s": round(capture_ros, 3),
        "capture_inprocess_s": round(capture_local, 3),
        "capture_pair_s": round(sum(p[0] for p in pairs), 3),
        "raw_render_pair_s": round(sum(p[1] for p in pairs), 3),
        "capture_pair_ratio": round(sum(p[0] for p in pairs) / sum(p[1] for p in pairs), 3),
        **{f"{name}_rounds_steps_per_s": [round(x.get("steps", args.steps) / x["wall_s"], 2) for x in runs[name]]
           for name in runs},
        "env_step_ms": round(1e3 * sum(x["env_step_s"] for x in runs["inprocess"]) / total, 2),
        "lean_step_ms": round(1e3 * sum(x["env_step_s"] for x in runs["inprocess_lean"]) / total, 2),
        "robo_recording": recording,
        **({"baseline_rev": args.baseline_rev, "baseline_ros_steps_per_s": round(rate("baseline_ros"), 2),
            "baseline_ratio": round(rate("baseline_ros") / inproc, 3)} if args.baseline_rev else {}),
        "steps": args.steps, "rounds": args.rounds, "load_avg_1m": round(os.getloadavg()[0], 2),
        "final_pose_max_diff_m": float(np.max(np.ptp(np.array(finals), axis=0))),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
