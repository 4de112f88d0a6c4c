"""The end-effector path and gripper opening of one episode over its control steps, and a small inline SVG plot.

Read from ``episode.mcap`` (the end-effector pose once per control step; the step from the episode status at the
same sim time when the driver publishes it, else the message's place; the gripper opening from the finger joints of
the joint states, else the episode status; names from ``config/interfaces.yaml``, under any namespace), with the
``mcap`` / ``mcap-ros2-support`` packages and no ROS.
Without a bag (``--no-record``, the reference's run directories) the motion calls of ``calls.jsonl`` give a coarse
path: one point per call, at its final end-effector position after the steps so far.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MAX_POINTS = 2000   # a longer path is thinned to this many points for the plot


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """``steps`` (control step of each sample), ``xyz`` end-effector positions [m], ``gripper`` opening [m] (None
    where unknown), and ``source`` (what it was read from)."""

    steps: tuple[int, ...]
    xyz: tuple[tuple[float, float, float], ...]
    gripper: tuple[float | None, ...]
    source: str

    def __len__(self) -> int:
        return len(self.steps)


def _stamp(header: Any) -> float:
    return float(header.stamp.sec) + float(header.stamp.nanosec) * 1e-9


def _topic(topics: Sequence[str], name: str) -> str | None:
    """The recorded topic of interface ``name`` (relative, e.g. ``ee_pose``): ``/ee_pose`` or ``/<ns>/ee_pose``."""
    name = "/" + name.lstrip("/")
    return next((t for t in topics if t == name), None) or next((t for t in topics if t.endswith(name)), None)


def from_mcap(path: Path, finger_joints: Sequence[str] | None = None) -> Trajectory | None:
    """The trajectory in an episode bag; None when the file or the ``mcap`` packages are missing or the bag has no
    end-effector pose."""
    try:
        from mcap.reader import make_reader  # noqa: PLC0415 (optional: mcap)
        from mcap_ros2.decoder import DecoderFactory  # noqa: PLC0415 (optional: mcap)
    except ImportError:
        return None
    from pyrua_ros.wire.interfaces import load  # noqa: PLC0415 (yaml: bags only)

    names = load()
    finger_joints = tuple(finger_joints if finger_joints is not None else names.robot.finger_joints)
    poses: list[tuple[float, tuple[float, float, float]]] = []
    openings: dict[float, float] = {}
    status_steps: dict[float, int] = {}
    status_openings: dict[float, float] = {}
    try:
        with open(path, "rb") as handle:
            reader = make_reader(handle, decoder_factories=[DecoderFactory()])
            summary = reader.get_summary()
            recorded = [c.topic for c in summary.channels.values()] if summary is not None else []
            ee_topic = _topic(recorded, names.driver.ee_pose)
            joint_topic = _topic(recorded, names.driver.joint_states)
            status_topic = _topic(recorded, names.sim.episode_status)
            if ee_topic is None:
                return None
            for _schema, channel, _message, msg in reader.iter_decoded_messages(
                    topics=[t for t in (ee_topic, joint_topic, status_topic) if t]):
                if channel.topic == ee_topic:
                    p = msg.pose.position
                    poses.append((round(_stamp(msg.header), 6), (float(p.x), float(p.y), float(p.z))))
                elif channel.topic == joint_topic:
                    names = list(msg.name)
                    if all(j in names for j in finger_joints):
                        q = [abs(float(msg.position[names.index(j)])) for j in finger_joints]
                        openings[round(_stamp(msg.header), 6)] = sum(q)
                elif channel.topic == status_topic:
                    try:
                        data = json.loads(msg.data)
                        t = round(float(data["sim_time"]), 6)
                        status_steps[t] = int(data["step"])
                        if isinstance(data.get("gripper_opening"), int | float):
                            status_openings[t] = float(data["gripper_opening"])
                    except (ValueError, KeyError, TypeError):
                        continue
    except Exception:   # a truncated or foreign file: no plot, the page still renders
        return None
    if not poses:
        return None
    poses.sort(key=lambda item: item[0])
    steps = tuple(status_steps.get(t, i) for i, (t, _xyz) in enumerate(poses))
    gripper = tuple(openings.get(t, status_openings.get(t)) for t, _xyz in poses)
    return Trajectory(steps=steps, xyz=tuple(xyz for _t, xyz in poses), gripper=gripper, source="episode.mcap")


def from_calls(calls: Sequence[dict[str, Any]], start: Sequence[float] | None = None,
               start_gripper: float | None = None) -> Trajectory | None:
    """A coarse trajectory from calls.jsonl rows: the card's start, then each call's ``final_eef_pos`` after the
    steps so far (gripper openings from ``final_gripper_opening`` where a call reports one)."""
    steps, xyz, gripper = [], [], []
    if start is not None and len(start) == 3:
        steps.append(0)
        xyz.append(tuple(float(v) for v in start))
        gripper.append(start_gripper)
    total, last_gripper = 0, start_gripper
    for call in calls:
        summary = call.get("summary") if isinstance(call.get("summary"), dict) else {}
        n = call.get("env_steps")
        total += n if isinstance(n, int) and n > 0 else 0
        g = summary.get("final_gripper_opening")
        if isinstance(g, int | float):
            last_gripper = float(g)
        pos = summary.get("final_eef_pos")
        if isinstance(pos, list) and len(pos) == 3 and all(isinstance(v, int | float) for v in pos):
            steps.append(total)
            xyz.append(tuple(float(v) for v in pos))
            gripper.append(last_gripper)
    if len(steps) < 2:
        return None
    return Trajectory(steps=tuple(steps), xyz=tuple(xyz), gripper=tuple(gripper), source="calls.jsonl")


# ---------------------------------------------------------------------------------------------------- the plot
COLOURS = {"x": "#d1495b", "y": "#2e86ab", "z": "#3a9d23", "gripper": "#7a4fb5"}


def _thin(n: int) -> list[int]:
    if n <= MAX_POINTS:
        return list(range(n))
    return sorted({round(i * (n - 1) / (MAX_POINTS - 1)) for i in range(MAX_POINTS)})


def _polyline(xs: Sequence[float], ys: Sequence[float | None], *, xrange: tuple[float, float],
              yrange: tuple[float, float], box: tuple[float, float, float, float], colour: str,
              dashed: bool = False) -> str:
    (x0, x1), (y0, y1) = xrange, yrange
    left, top, width, height = box
    points = []
    for x, y in zip(xs, ys):
        if y is None:
            continue
        px = left + (x - x0) / ((x1 - x0) or 1.0) * width
        py = top + height - (y - y0) / ((y1 - y0) or 1.0) * height
        points.append(f"{px:.1f},{py:.1f}")
    if not points:
        return ""
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return (f'<polyline fill="none" stroke="{colour}" stroke-width="1.6"{dash} '
            f'points="{" ".join(points)}"/>')


def svg_plot(traj: Trajectory, *, width: int = 720, height: int = 220,
             turn_steps: Sequence[tuple[int, int]] = ()) -> str:
    """An inline SVG: x, y, z of the end effector [m] (left axis) and the gripper opening [mm] (right axis, dashed)
    over control steps; ``turn_steps`` ``(turn number, step it began at)`` are marked as thin vertical lines."""
    keep = _thin(len(traj))
    steps = [traj.steps[i] for i in keep]
    xyz = [traj.xyz[i] for i in keep]
    grip = [traj.gripper[i] for i in keep]
    left, top, right, bottom = 52, 14, 56, 34
    box = (left, top, width - left - right, height - top - bottom)
    s0, s1 = min(steps), max(steps)
    values = [v for p in xyz for v in p]
    lo, hi = min(values), max(values)
    pad = max(0.01, (hi - lo) * 0.08)
    lo, hi = lo - pad, hi + pad
    gvals = [g * 1000 for g in grip if g is not None]
    g0, g1 = (0.0, max(gvals) * 1.1 or 1.0) if gvals else (0.0, 1.0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" class="plot">',
           f'<rect x="{left}" y="{top}" width="{box[2]}" height="{box[3]}" fill="#fafbfc" stroke="#d5dae3"/>']
    for k in range(5):
        y = top + box[3] * k / 4
        value = hi - (hi - lo) * k / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + box[2]}" y2="{y:.1f}" stroke="#eceff4"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.2f}</text>')
        if gvals:
            gvalue = g1 - (g1 - g0) * k / 4
            out.append(f'<text x="{left + box[2] + 6}" y="{y + 4:.1f}">{gvalue:.0f}</text>')
    for k in range(6):
        step = s0 + (s1 - s0) * k / 5
        x = left + box[2] * k / 5
        out.append(f'<text x="{x:.1f}" y="{top + box[3] + 16}" text-anchor="middle">{step:.0f}</text>')
    for number, step in turn_steps:
        if s1 > s0 and s0 <= step <= s1:
            x = left + (step - s0) / (s1 - s0) * box[2]
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + box[3]}" stroke="#9aa3b2" '
                       f'stroke-width="0.8"><title>turn {number}</title></line>')
    for axis, colour in zip("xyz", (COLOURS["x"], COLOURS["y"], COLOURS["z"])):
        i = "xyz".index(axis)
        out.append(_polyline(steps, [p[i] for p in xyz], xrange=(s0, s1), yrange=(lo, hi), box=box, colour=colour))
    if gvals:
        out.append(_polyline(steps, [None if g is None else g * 1000 for g in grip], xrange=(s0, s1),
                             yrange=(g0, g1), box=box, colour=COLOURS["gripper"], dashed=True))
    legend = [("x [m]", COLOURS["x"]), ("y [m]", COLOURS["y"]), ("z [m]", COLOURS["z"])]
    if gvals:
        legend.append(("gripper [mm]", COLOURS["gripper"]))
    lx = left
    for label, colour in legend:
        out.append(f'<rect x="{lx}" y="{height - 12}" width="10" height="3" fill="{colour}"/>')
        out.append(f'<text x="{lx + 14}" y="{height - 7}">{html.escape(label)}</text>')
        lx += 14 + 8 * len(label) + 14
    out.append(f'<text x="{left + box[2]}" y="{height - 7}" text-anchor="end">control step '
               f'({html.escape(traj.source)})</text>')
    out.append("</svg>")
    return "\n".join(out)


__all__ = ["Trajectory", "from_calls", "from_mcap", "svg_plot"]
