"""``pyrualean view RUN``: one episode as a self-contained HTML page, to see what the agent did.

The page (default ``RUN/view.html``) has a header (the task instruction; suite, task, seed; model, arm, runtime and
settings; the code version; the outcome and its reason; tokens; times), the episode video with every turn linked to
the moment it began, a plot of the end-effector path and gripper opening over control steps, the prompt (folded)
with the card images, then each turn: the model's reasoning, the code with highlighting, its output, the images the
model saw, the ``robo`` calls of the turn with their results, steps and time. What is read:
:mod:`pyrua_ros.reports.episode_view`; the plot: :mod:`pyrua_ros.reports.trajectory`.

Self-contained: inline CSS, SVG and a few lines of inline script (the video links), images embedded as ``data:``
URIs, and a Content-Security-Policy that lets the page load nothing but its own video file, so it works offline
from ``file://`` and never reaches the network. The video and the run's files are linked relative to the page.
Every text from the run directory is escaped: model output cannot add markup.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pyrua_ros.records.records import RunRecords
from pyrua_ros.reports import highlight, trajectory
from pyrua_ros.reports.episode_view import EpisodeView, Image, TurnView, load_episode
from pyrua_ros.reports.report import screenshot

PAGE_NAME = "view.html"
RESULT_TEXT_LIMIT = 20_000   # characters of one tool result shown (the rest is cut, with a note)
LINKED_FILES = ("result.json", "prompt.txt", "transcript.json", "tool_turns.json", "calls.jsonl", "episode.mcap",
                "host.log", "codex_events.jsonl", "claude_events.jsonl", "openai_events.jsonl")

CSP = ("default-src 'none'; img-src data:; media-src 'self' file: blob:; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'")
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0 auto;
       padding: 20px 24px; max-width: 1100px; color: #1d2330; background: #ffffff; font-size: 14px; }
h1 { font-size: 21px; margin: 0 0 6px 0; } h2 { font-size: 16px; margin: 22px 0 8px 0; }
a { color: #2854b8; } .muted { color: #5b6475; }
table.facts { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
table.facts th { text-align: left; padding: 2px 12px 2px 0; color: #5b6475; font-weight: 500; vertical-align: top; }
table.facts td { padding: 2px 18px 2px 0; vertical-align: top; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px; }
.ok { background: #dcf3e3; color: #19743a; } .fail { background: #fbe3e2; color: #a3262a; }
.infra { background: #fdf0d5; color: #8a5a00; }
pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; background: #f6f7f9;
      padding: 8px 10px; margin: 4px 0; white-space: pre-wrap; word-break: break-word; border-radius: 4px; }
pre.code { background: #fbfbf7; border-left: 3px solid #d9d2a6; }
pre.reasoning { background: #f3f0fa; border-left: 3px solid #c7b8ea; }
pre.output { border-left: 3px solid #c9d3e3; }
section.turn { border-top: 1px solid #e3e6ec; padding: 10px 0 6px 0; }
section.turn h3 { font-size: 14px; margin: 0 0 4px 0; }
.label { font-size: 12px; color: #5b6475; margin: 6px 0 0 0; }
table.calls { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
table.calls th, table.calls td { border-bottom: 1px solid #eceff4; padding: 2px 8px; text-align: left;
                                 vertical-align: top; }
table.calls td.args { font-family: monospace; max-width: 520px; word-break: break-word; }
img.seen { max-width: 256px; max-height: 256px; border: 1px solid #d5dae3; margin: 2px 6px 2px 0; }
video { width: 100%; max-width: 768px; max-height: 440px; background: #111; }
svg text { font-family: inherit; font-size: 11px; fill: #1d2330; }
details > summary { cursor: pointer; color: #2854b8; }
.t { font-family: monospace; }
""" + highlight.CSS

SCRIPT = """
(function () {
  var video = document.getElementById('video');
  if (!video) { document.body.setAttribute('data-video', 'none'); return; }
  video.addEventListener('loadedmetadata', function () {
    document.body.setAttribute('data-video', 'loaded ' + video.duration.toFixed(2));
  });
  video.addEventListener('error', function () { document.body.setAttribute('data-video', 'error'); });
  if (video.readyState >= 1) { document.body.setAttribute('data-video', 'loaded ' + video.duration.toFixed(2)); }
  document.querySelectorAll('a[data-t]').forEach(function (link) {
    link.addEventListener('click', function (event) {
      event.preventDefault();
      video.currentTime = parseFloat(link.getAttribute('data-t'));
      video.scrollIntoView({behavior: 'smooth', block: 'center'});
      video.play().catch(function () {});
    });
  });
})();
"""


# ---------------------------------------------------------------------------------------------------- pieces
def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any, unit: str = "", digits: int = 1) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    text = f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"
    return f"{text}{unit}"


def _clock(seconds: float) -> str:
    minutes, rest = divmod(max(0.0, seconds), 60)
    return f"{int(minutes)}:{rest:04.1f}"


def _href(target: Path, page: Path) -> str:
    """``target`` relative to the folder of ``page``, URL-quoted (a link that travels with the folders)."""
    rel = os.path.relpath(target.resolve(), page.resolve().parent)
    return quote(Path(rel).as_posix())


def _pre(text: str, cls: str) -> str:
    return f'<pre class="{cls}">{_e(text)}</pre>'


def _images(images: Sequence[Image]) -> str:
    parts = []
    for image in images:
        if image.data_uri:
            parts.append(f'<img class="seen" alt="{_e(image.name)}" title="{_e(image.name)}" '
                         f'src="{_e(image.data_uri)}">')
        else:
            parts.append(f'<span class="muted">[{_e(image.name)}: {_e(image.note)}]</span>')
    return "<div>" + " ".join(parts) + "</div>" if parts else ""


def _outcome(result: dict[str, Any]) -> tuple[str, str]:
    """(badge HTML, one-line explanation) of the episode's outcome."""
    status = _e(result.get("status", "unknown"))
    if result.get("status") in ("boot_error", "planner_error", "error", "killed"):
        badge = f'<span class="badge infra">{status}</span>'
    elif result.get("environment_success"):
        badge = '<span class="badge ok">success</span>'
    else:
        badge = '<span class="badge fail">no success</span>'
    reason = result.get("reason")
    error = result.get("error") if isinstance(result.get("error"), dict) else {}
    finish = result.get("finish") if isinstance(result.get("finish"), dict) else {}
    words = [f"status {status}"]
    if reason:
        words.append(f"reason: {_e(reason)}")
    if error:
        words.append(f"error: {_e(error.get('type'))}: {_e(error.get('message'))}")
    if finish:
        words.append(f"agent's finish: {_e(finish.get('status'))} ({_e(finish.get('summary'))})")
    return badge, "; ".join(words)


def _settings(result: dict[str, Any]) -> str:
    host = result.get("host") if isinstance(result.get("host"), dict) else {}
    boot = host.get("boot_options") if isinstance(host.get("boot_options"), dict) else {}
    parts = [f"images {result.get('images', '-')}", f"feedback {result.get('feedback', '-')}",
             f"primitives {host.get('primitive_set', '-')}",
             f"max turns {result.get('max_turns') if result.get('max_turns') is not None else '-'}",
             f"budget {_num(result.get('timeout_s'), ' s', 0)}"]
    if result.get("max_programs") is not None:
        parts.append(f"max programs {result.get('max_programs')}")
    if result.get("guides"):
        parts.append("guides")
    if boot.get("driver"):
        parts.append(f"driver {boot.get('driver')}")
    if result.get("reasoning_effort"):
        parts.append(f"reasoning {result.get('reasoning_effort')}")
    sampling = _provenance(result).get("sampling")
    if isinstance(sampling, dict) and sampling:
        parts.append("sampling " + ", ".join(f"{k}={v}" for k, v in sampling.items()))
    return _e(", ".join(str(p) for p in parts))


def _provenance(result: dict[str, Any]) -> dict[str, Any]:
    value = result.get("provenance")
    return value if isinstance(value, dict) else {}


def _code_version(result: dict[str, Any]) -> str:
    prov = _provenance(result)
    if not prov:
        return "-"
    words = [f"pyrua_ros {prov.get('version', '?')}"]
    if prov.get("commit"):
        words.append(f"commit {str(prov['commit'])[:12]}" + (" (dirty tree)" if prov.get("dirty") else ""))
    return _e(", ".join(words))


def _tokens(result: dict[str, Any]) -> str:
    gen = result.get("generation") if isinstance(result.get("generation"), dict) else {}
    return (f"in {_num(gen.get('input_tokens'))} (cached {_num(gen.get('cached_input_tokens'))}), "
            f"out {_num(gen.get('output_tokens'))} (reasoning {_num(gen.get('reasoning_output_tokens'))}), "
            f"total {_num(gen.get('total_tokens'))}; {_num(gen.get('requests'))} request(s)")


def _header(view: EpisodeView, page: Path) -> str:
    r, card = view.result, view.card
    instruction = r.get("task_language") or card.get("task_language") or "(no task instruction recorded)"
    badge, outcome = _outcome(r)
    model = r.get("model") or ("none (replay)" if view.runtime == "replay" else "-")
    rows = [
        ("episode", f"suite {_e(r.get('suite'))}, task {_e(r.get('task'))}, seed {_e(r.get('seed'))}"),
        ("outcome", f"{badge} {outcome}"),
        ("model", f"{_e(model)}; arm {_e(r.get('arm') or 'single shot')}; runtime {_e(view.runtime or '-')}"),
        ("settings", _settings(r)),
        ("turns / calls / steps", f"{_num(r.get('tool_turns'))} turns, {_num(r.get('calls'))} robo calls "
                                  f"({_num(r.get('stateful_calls'))} moving), {_num(r.get('env_steps'))} control "
                                  f"steps of {_num(r.get('max_episode_steps'))}"),
        ("tokens", _tokens(r)),
        ("time", f"agent {_num(r.get('policy_wall_s'), ' s')}, boot {_num(r.get('startup_s'), ' s')}, "
                 f"total {_num(r.get('total_wall_s'), ' s')}; started {_e(r.get('created_at', '-'))}"),
        ("code", _code_version(r)),
    ]
    links = [f'<a href="{_href(view.run_dir, page)}/">run directory</a>']
    links += [f'<a href="{_href(view.run_dir / name, page)}">{_e(name)}</a>' for name in LINKED_FILES
              if (view.run_dir / name).is_file() and not (view.run_dir / name).is_symlink()]
    rows.append(("files", " · ".join(links)))
    table = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<h1>{_e(instruction)}</h1><table class=\"facts\">{table}</table>"


def _video(view: EpisodeView, page: Path) -> str:
    if view.video is None:
        return '<h2 id="video-section">Video</h2><p class="muted">No episode.mp4 in this run directory.</p>'
    href = _href(view.video, page)
    marks = [f'<a href="{href}#t={t.video_s:.2f}" data-t="{t.video_s:.2f}">turn {t.index + 1} '
             f'<span class="t">{_clock(t.video_s)}</span></a>' for t in view.turns if t.video_s is not None]
    index = view.video_index
    words = [f'<a href="{href}">episode.mp4</a>']
    if isinstance(index.get("fps"), int | float):
        words.append(f"{index['fps']:g} frames per second of sim time")
    note = f'<p class="muted">{" · ".join(words)}</p>'
    poster = next((i.data_uri for i in view.prompt_images if i.data_uri), None)   # the card view until it plays
    poster_attr = f' poster="{_e(poster)}"' if poster else ""
    return (f'<h2 id="video-section">Video</h2><video id="video" controls preload="metadata"{poster_attr} '
            f'src="{href}"></video>'
            + note + (f"<p>Turns: {' · '.join(marks)}</p>" if marks else ""))


def _plot(view: EpisodeView) -> str:
    traj = None
    mcap = view.run_dir / "episode.mcap"
    if mcap.is_file() and not mcap.is_symlink():
        traj = trajectory.from_mcap(mcap)
    if traj is None:
        traj = trajectory.from_calls(view.calls, view.card.get("eef_pos"), _float(view.card.get("gripper_opening")))
    if traj is None or len(traj) < 2:
        return ('<h2>End-effector path</h2><p class="muted">No trajectory recorded (no episode.mcap and no motion '
                "calls).</p>")
    marks, step = [], 0
    for turn in view.turns:
        marks.append((turn.index + 1, step))
        steps = turn.record.get("env_steps")
        step += steps if isinstance(steps, int) and steps > 0 else 0
    return "<h2>End-effector path and gripper</h2>" + trajectory.svg_plot(traj, turn_steps=marks)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _prompt(view: EpisodeView) -> str:
    if not view.prompt and not view.prompt_images:
        return ""
    return (f"<h2>Prompt</h2><details><summary>prompt.txt ({len(view.prompt):,} characters, "
            f"{len(view.prompt_images)} image(s))</summary>{_pre(view.prompt, 'output')}"
            f"{_images(view.prompt_images)}</details>")


def _calls_table(calls: Sequence[dict[str, Any]]) -> str:
    if not calls:
        return ""
    rows = []
    for c in calls:
        args = c.get("kwargs") if isinstance(c.get("kwargs"), dict) else {}
        arg_text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in args.items())
        summary = c.get("summary") if isinstance(c.get("summary"), dict) else {}
        outcome = c.get("error") or ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in summary.items())
        ok = "ok" if c.get("ok") else "error"
        rows.append(f"<tr><td>{_e(c.get('index'))}</td><td><b>{_e(c.get('tool'))}</b></td>"
                    f'<td class="args">{_e(arg_text)}</td><td>{ok}</td><td>{_num(c.get("env_steps"))}</td>'
                    f"<td>{_num(c.get('elapsed_s'), ' s', 2)}</td><td class=\"args\">{_e(outcome)}</td></tr>")
    return ('<table class="calls"><thead><tr><th>#</th><th>call</th><th>arguments</th><th></th><th>steps</th>'
            f"<th>time</th><th>result</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _turn(turn: TurnView, page_video: str | None) -> str:
    rec, ex = turn.record, turn.exchange
    bits = [f"<b>{_e(turn.tool)}</b>"]
    if rec:
        bits.append("ok" if rec.get("ok") else '<span class="badge fail">error</span>')
        bits.append(f"{_num(rec.get('env_steps'))} steps" + (" (moved)" if rec.get("moved") else ""))
        bits.append(f"{_num(rec.get('elapsed_s'), ' s', 2)}")
        if isinstance(rec.get("model_latency_s"), int | float) and rec["model_latency_s"]:
            bits.append(f"model {_num(rec['model_latency_s'], ' s', 2)}")
        usage = rec.get("usage") if isinstance(rec.get("usage"), dict) else {}
        if usage:
            bits.append(f"tokens {_num(usage.get('prompt_tokens'))} in / {_num(usage.get('completion_tokens'))} out")
        if rec.get("terminated"):
            bits.append("episode terminated")
    if turn.video_s is not None and page_video:
        bits.append(f'<a href="{page_video}#t={turn.video_s:.2f}" data-t="{turn.video_s:.2f}">▶ '
                    f'<span class="t">{_clock(turn.video_s)}</span></a>')
    parts = [f'<section class="turn" id="turn-{turn.index + 1}"><h3>Turn {turn.index + 1} · '
             + " · ".join(bits) + "</h3>"]
    if ex is not None and ex.reasoning:
        parts.append('<p class="label">reasoning</p>' + _pre(ex.reasoning, "reasoning"))
    if ex is not None and ex.message:
        parts.append('<p class="label">message</p>' + _pre(ex.message, "output"))
    if turn.code:
        label = "code" + (f" ({_e(turn.code_file)})" if turn.code_file else "")
        parts.append(f'<p class="label">{label}</p><pre class="code">{highlight.highlight_python(turn.code)}</pre>')
    elif ex is not None and ex.arguments:
        parts.append('<p class="label">arguments</p>'
                     + _pre(json.dumps(ex.arguments, indent=2, ensure_ascii=False, default=str), "output"))
    if ex is not None and ex.result:
        text = ex.result
        cut = len(text) > RESULT_TEXT_LIMIT
        text = text[:RESULT_TEXT_LIMIT] + (f"\n[... {len(ex.result) - RESULT_TEXT_LIMIT:,} more characters]"
                                           if cut else "")
        parts.append('<p class="label">output (what the model got back)</p>' + _pre(text, "output"))
    if ex is not None and ex.images:
        parts.append(f'<p class="label">images the model saw ({len(ex.images)})</p>' + _images(ex.images))
    if turn.calls:
        parts.append(f'<p class="label">robo calls ({len(turn.calls)})</p>' + _calls_table(turn.calls))
    parts.append("</section>")
    return "".join(parts)


def render(view: EpisodeView, page: Path) -> str:
    """The HTML page of ``view``, with links relative to where ``page`` will be written."""
    page = Path(page)
    r = view.result
    title = f"{r.get('suite')} task {r.get('task')} seed {r.get('seed')}: {r.get('status', '')}"
    video_href = _href(view.video, page) if view.video is not None else None
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
             _header(view, page), _video(view, page), _plot(view), _prompt(view),
             f"<h2>Turns ({len(view.turns)})</h2>"]
    parts += [_turn(t, video_href) for t in view.turns]
    if not view.turns:
        parts.append('<p class="muted">No tool turn was recorded.</p>')
    if view.unplaced_calls:
        parts.append(f"<h2>robo calls not placed in a turn ({len(view.unplaced_calls)})</h2>"
                     '<p class="muted">tool_turns.json does not say which calls each turn made (an older or the '
                     "reference's run directory); every call in order:</p>" + _calls_table(view.unplaced_calls))
    if view.final_message:
        parts.append("<h2>Final message</h2>" + _pre(view.final_message, "output"))
    notes = [str(n) for n in r.get("notes") or [] if isinstance(n, str | int | float)]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    if view.problems:
        parts.append("<h2>Not shown</h2><ul>" + "".join(f"<li>{_e(p)}</li>" for p in view.problems) + "</ul>")
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def write_view(run_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write the page of ``run_dir`` to ``out`` (default ``run_dir/view.html``) and return its path; OSError when it
    cannot be written, FileNotFoundError when ``run_dir`` is not a run directory."""
    view = load_episode(run_dir)
    page = Path(out) if out is not None else view.run_dir / PAGE_NAME
    records = RunRecords(page.parent)
    if not records.write_text(page.name, render(view, page)):
        raise OSError(records.failures[-1])
    return page


# ---------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``view`` flags."""
    parser.add_argument("run", type=Path, help="a run directory (holding result.json) of play, run, mcp or eval")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help=f"where to write the page (default RUN/{PAGE_NAME})")
    parser.add_argument("--screenshot", type=Path, default=None, metavar="PNG",
                        help="also render the page in headless Chromium and save a PNG of it")


def run(args: argparse.Namespace) -> int:
    """Write the page; 0 on success, 2 (one line on stderr) when RUN is not a run directory or a file cannot be
    written. Prints the page's path."""

    try:
        page = write_view(args.run, args.out)
        if args.screenshot is not None:
            screenshot(page, args.screenshot, height=1400)
    except (OSError, RuntimeError) as exc:
        print(f"pyrualean view: error: {exc}", file=sys.stderr)
        return 2
    print(page)
    return 0


__all__ = ["PAGE_NAME", "add_arguments", "render", "run", "write_view"]
