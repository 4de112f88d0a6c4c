"""Large images between ROS 2 distros: how long a 1024x1024 capture takes to arrive, with and without pyrua_ros's
Fast DDS profile (``pyrua_ros/driver/fastdds*_profile.xml``: writer heartbeat 100 ms instead of 3 s).

One process answers requests the way the sim node answers a capture (3 MB rgb8 color, 4 MB 32FC1 depth and a
CameraInfo, reliable transient-local depth 1, ``pyrua_ros.wire.qos.LATCHED``); another requests a capture,
waits for all three, and requests the next at once. Each process runs in the venv of its distro (``.venv``
Kilted / Fast DDS 3.2, ``.venv-jazzy`` Jazzy / Fast DDS 2.14, which share no shared-memory transport). Reported
per direction and profile: median, p90 and max arrival time and the number of stalls (> 1 s); the ratio column
compares p90 with the profile to p90 without it in the same run (these machines are noisy: read ratios).

    .venv/bin/python benchmarks/large_images.py [--rounds 40] [--pairs kilted:jazzy,jazzy:kilted,kilted:kilted]
"""

from __future__ import annotations

import argparse
import array
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pyrua_ros.testing import apply_loopback_environment
from pyrua_ros.testing.venvs import child_env, venv_python
from pyrua_ros.wire.rosenv import FASTDDS_PROFILE_VARS, FASTDDS_PROFILES, default_fastdds_profile, fastdds_major

SIZE = 1024
REQUEST = "/bench/large_images/request"
TOPICS = {"color": "/bench/large_images/color", "depth": "/bench/large_images/depth",
          "info": "/bench/large_images/camera_info"}
STALL_S = 1.0
BARE_VAR = "PYRUA_BENCH_FASTDDS_DEFAULTS"     # set: the role runs with Fast DDS's default 3 s heartbeat


def apply_profile() -> None:
    """Before rclpy loads: pyrua_ros's profile for this venv's distro, or (``BARE_VAR`` set) the same profile
    with Fast DDS's default heartbeat period of 3 s put back."""
    for var in FASTDDS_PROFILE_VARS.values():
        os.environ.pop(var, None)
    if not os.environ.get(BARE_VAR):
        default_fastdds_profile()
        return
    major = fastdds_major()
    ours = FASTDDS_PROFILES[major]
    bare = pathlib.Path(tempfile.gettempdir()) / f"pyrua_ros_bench_3s_{ours.name}"
    bare.write_text(ours.read_text().replace("<sec>0</sec>", "<sec>3</sec>")
                    .replace("<nanosec>100000000</nanosec>", "<nanosec>0</nanosec>"))
    os.environ[FASTDDS_PROFILE_VARS[major]] = str(bare)


def serve() -> None:
    """Publisher role: answer each request with one color image, one depth image and one CameraInfo."""
    apply_profile()

    import numpy as np
    import rclpy
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import String

    from pyrua_ros.wire import qos

    rclpy.init()
    node = rclpy.create_node("large_image_server")
    rng = np.random.default_rng(0)
    color = array.array("B", rng.integers(0, 255, SIZE * SIZE * 3, dtype=np.uint8).tobytes())
    depth = array.array("B", rng.random(SIZE * SIZE, dtype=np.float32).tobytes())
    pubs = {k: node.create_publisher(CameraInfo if k == "info" else Image, t, qos.LATCHED) for k, t in TOPICS.items()}

    def on_request(msg) -> None:
        c = Image(height=SIZE, width=SIZE, encoding="rgb8", step=SIZE * 3)
        d = Image(height=SIZE, width=SIZE, encoding="32FC1", step=SIZE * 4)
        i = CameraInfo(height=SIZE, width=SIZE)
        for m in (c, d, i):
            m.header.frame_id = msg.data
        c.data, d.data = color, depth
        pubs["color"].publish(c)
        pubs["depth"].publish(d)
        pubs["info"].publish(i)

    node.create_subscription(String, REQUEST, on_request, qos.EVENTS)
    print("ready", flush=True)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, Exception):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def request(rounds: int) -> None:
    """Subscriber role: ``rounds`` captures back to back; print the arrival times [s] as JSON."""
    apply_profile()
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import String

    from pyrua_ros.wire import qos

    rclpy.init()
    node = rclpy.create_node("large_image_client")
    arrived: dict[str, set[str]] = {}
    cond = threading.Condition()

    def on(kind):
        def cb(msg):
            with cond:
                arrived.setdefault(msg.header.frame_id, set()).add(kind)
                cond.notify_all()
        return cb

    for kind, topic in TOPICS.items():
        node.create_subscription(CameraInfo if kind == "info" else Image, topic, on(kind), qos.LATCHED)
    pub = node.create_publisher(String, REQUEST, qos.EVENTS)
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    times = []
    try:
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() == 0 or any(node.count_publishers(t) == 0 for t in TOPICS.values()):
            if time.monotonic() > deadline:
                raise SystemExit("large_images: the server never matched")
            time.sleep(0.05)
        for k in range(rounds):
            key = f"capture-{k}"
            t0 = time.monotonic()
            pub.publish(String(data=key))
            with cond:
                got = cond.wait_for(lambda k=key: arrived.get(k) == set(TOPICS), timeout=15.0)
            times.append(time.monotonic() - t0 if got else None)
    finally:
        executor.shutdown()
        spin.join(5)
        node.destroy_node()
        rclpy.try_shutdown()
    print(json.dumps(times), flush=True)


def run_pair(sender: str, receiver: str, profile: bool, rounds: int) -> list:
    env = child_env()
    env.pop(BARE_VAR, None)
    if not profile:
        env[BARE_VAR] = "1"
    me = str(pathlib.Path(__file__).resolve())
    server = subprocess.Popen([str(venv_python(sender)), me, "--role", "serve"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = []
        while not lines or lines[-1].strip() != "ready":
            lines.append(server.stdout.readline())
            if not lines[-1]:
                raise SystemExit("server did not start:\n" + "".join(lines))
        out = subprocess.run([str(venv_python(receiver)), me, "--role", "request", "--rounds", str(rounds)],
                             env=env, capture_output=True, text=True, timeout=60 + 20 * rounds, check=False)
        if out.returncode != 0:
            raise SystemExit(f"client failed:\n{out.stdout}\n{out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        os.killpg(server.pid, 2)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()


def summary(times: list) -> dict:
    ok = sorted(t for t in times if t is not None)
    p90 = ok[max(0, round(0.9 * len(ok)) - 1)]
    return {"n": len(times), "lost": len(times) - len(ok), "median_ms": 1000 * statistics.median(ok),
            "p90_ms": 1000 * p90, "max_ms": 1000 * ok[-1], "stalls": sum(t > STALL_S for t in ok)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", choices=("serve", "request"))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--pairs", default="kilted:jazzy,jazzy:kilted,kilted:kilted",
                    help="sender:receiver distros, comma separated")
    args = ap.parse_args(argv)
    if args.role == "serve":
        serve()
        return 0
    if args.role == "request":
        request(args.rounds)
        return 0
    apply_loopback_environment()
    pairs = [tuple(p.split(":")) for p in args.pairs.split(",")]
    missing = sorted({d for p in pairs for d in p if venv_python(d) is None})
    if missing:
        raise SystemExit(f"no venv for {missing}: run scripts/setup.sh --jazzy")
    print(f"{args.rounds} captures of {SIZE}x{SIZE} (color 3 MB + depth 4 MB + camera_info) per run, back to back")
    print(f"{'sender -> receiver':24} {'profile':8} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} {'stalls>1s':>10} "
          f"{'lost':>5} {'p90 on/off':>11}")
    for sender, receiver in pairs:
        rows = {}
        for profile in (False, True):
            rows[profile] = s = summary(run_pair(sender, receiver, profile, args.rounds))
            ratio = f"{rows[True]['p90_ms'] / rows[False]['p90_ms']:.2f}" if profile else ""
            print(f"{sender + ' -> ' + receiver:24} {'on' if profile else 'off':8} {s['median_ms']:10.0f} "
                  f"{s['p90_ms']:8.0f} {s['max_ms']:8.0f} {s['stalls']:10d} {s['lost']:5d} {ratio:>11}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
