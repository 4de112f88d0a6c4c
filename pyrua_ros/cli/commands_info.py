"""The CLI subcommands that need no robot: ``api``, ``prompt``, ``summarize``, ``compare``, ``view``.

``add_info_parsers(subparsers)`` registers them on the main parser's subparsers (flags per
PYRUALEAN-CONTRACT.md 4.2 "Other subcommands"); each sets ``func`` to its ``cmd_*`` function, which takes the
parsed namespace and returns the exit status. Nothing here imports rclpy or boots a simulator: the reference is
rendered from the ``robo`` class itself.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pyrua_ros.agent.prompting.api_reference import render_reference
from pyrua_ros.agent.prompting.contract import NO_TOOLS_NOTE, PromptOptions
from pyrua_ros.agent.prompting.prompt import build_prompt, reference_root_from_env
from pyrua_ros.agent.prompting.reference_source import ReferenceDocs, ReferenceSource
from pyrua_ros.agent.run.validate import check_reference_root
from pyrua_ros.records.records import CardRecord
from pyrua_ros.reports import compare as compare_mod
from pyrua_ros.reports import summarize as summarize_mod
from pyrua_ros.reports import viewer as viewer_mod
from pyrua_ros.robo import libero
from pyrua_ros.settings.config import EpisodeSettings
from pyrua_ros.settings.modes import FEEDBACK_MODES, IMAGE_POLICIES, PRIMITIVE_SETS
from pyrua_ros.settings.modes import PROMPT_ARMS as ARMS
from pyrua_ros.settings.schema import SettingError
from pyrua_ros.sim_interfaces import episodes


def robot_class(robot: str = "libero", primitives: str = "full") -> type:
    """The ``robo`` class of a robot name and primitive set (imported lazily); ValueError listing the choices."""
    if robot != "libero":
        raise ValueError(f"robot must be one of libero; got {robot!r}")

    return libero.robot_class(primitives)


def _default_primitives() -> str:
    return os.environ.get("PYRUALEAN_PRIMITIVES") or "full"


def _add_primitives(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--primitives", choices=PRIMITIVE_SETS, default=_default_primitives(),
                        help="primitive set: full, or no-vla without the VLA skills (default $PYRUALEAN_PRIMITIVES "
                             "or full)")


def _add_reference_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reference-root", default=None,
                        help="a PyRUA-Lean checkout or installed pyrualean package: render the docstrings, contract "
                             "and knowledge from its files, so the model sees its training prompt (default "
                             "$PYRUALEAN_REFERENCE_ROOT; ours when unset)")


def _refused_reference_root(command: str, root: str | None) -> int | None:
    """Exit code 2 with one line when ``--reference-root`` (or its variable) holds no PyRUA-Lean sources."""

    try:
        check_reference_root(root)
    except SettingError as exc:
        print(f"pyrualean {command}: error: {exc}", file=sys.stderr)
        return 2
    return None


def cmd_api(args: argparse.Namespace) -> int:
    """Print the API reference of the ``robo`` class."""
    refused = _refused_reference_root("api", args.reference_root)
    if refused is not None:
        return refused
    root = reference_root_from_env(args.reference_root)
    docs = ReferenceDocs(ReferenceSource.locate(root)) if root else None
    print(render_reference(robot_class(args.robot, args.primitives), primitives=args.primitives, docs=docs))
    return 0


def episode_card(suite: str, task: int, seed: int, max_episode_steps: int) -> CardRecord:
    """The card ``play`` would write for (suite, task, seed): the simulator is reset in this process exactly as the
    sim node resets it (no ROS, no rendering), and the card holds what ``robo.state()`` reads at step 0 then."""
    from pyrua_ros.sim.env import LiberoEpisode
    from pyrua_ros.wire import interfaces

    names = interfaces.load()
    sim = LiberoEpisode()
    try:
        info = sim.reset(suite, task, seed, max_episode_steps)
        pos, quat = sim.eef_pose()
        joint_names, q, _ = sim.joint_state()
        fingers = [abs(float(v)) for n, v in zip(joint_names, q) if "finger" in n][:2]
        opening = sum(fingers) if fingers else float(sim.gripper_opening())
    finally:
        sim.close()
    return CardRecord(suite=suite, task=task, seed=seed, task_language=info.task_language,
                      object_names=tuple(sorted(info.object_names)), eef_pos=tuple(float(v) for v in pos),
                      eef_quat=tuple(float(v) for v in quat), gripper_opening=float(opening),
                      images={camera: f"card/{camera}_high.png" for camera in names.robot.cameras},
                      max_env_steps=max_episode_steps)


def _served_primitives(args: argparse.Namespace) -> tuple[str, str | None]:
    """(the primitive set an episode with these flags serves, the note play prints when it falls back to no-vla):
    the episode settings' own rule, so the prompt cannot name a set the episode would not serve."""

    episode = EpisodeSettings(primitives=args.primitives, vla_endpoint=args.vla_endpoint,
                              vla_server_cmd=args.vla_server_cmd)
    return episode.primitive_set, episode.vla_fallback


def cmd_prompt(args: argparse.Namespace) -> int:
    """Print the prompt an arm would get: system part, then the task card (``--card``, or ``--suite``/``--task``/
    ``--seed`` to make the card of that episode from the simulator, as ``play`` would)."""

    refused = _refused_reference_root("prompt", args.reference_root)
    if refused is not None:
        return refused
    if (args.suite is not None or args.seed is not None) and args.task is None:
        print("pyrualean prompt: error: --suite and --seed need --task (the episode whose card to render)",
              file=sys.stderr)
        return 2
    if args.task is not None and args.card is not None:
        print("pyrualean prompt: error: give --card or --task, not both", file=sys.stderr)
        return 2
    try:
        primitives, fallback = _served_primitives(args)
    except SettingError as exc:
        print(f"pyrualean prompt: error: {exc}", file=sys.stderr)
        return 2
    if fallback:
        print(f"pyrualean prompt: {fallback}", file=sys.stderr)
    options = PromptOptions(arm=args.arm, robot=args.robot, primitives=primitives, feedback=args.feedback,
                            images=args.images, budget_s=args.budget_s, max_turns=args.max_turns,
                            max_programs=args.max_programs, guides=args.guides, transfer=args.transfer,
                            reference_root=reference_root_from_env(args.reference_root))
    card = None
    if args.card is not None:
        try:
            card = CardRecord.read(args.card)
        except (OSError, ValueError) as exc:
            print(f"prompt: cannot read card {args.card}: {exc}", file=sys.stderr)
            return 2
    elif args.task is not None:

        suite, seed = args.suite or "libero_goal", args.seed or 0
        try:
            episodes.check_episode(suite, args.task, seed)
        except ValueError as exc:
            print(f"pyrualean prompt: error: {exc}", file=sys.stderr)
            return 2
        card = episode_card(suite, args.task, seed, args.max_episode_steps)
    card_dir = Path(args.card).parent if args.card is not None and Path(args.card).is_file() else args.card
    bundle = build_prompt(robot_class(args.robot, primitives), card, options, card_dir=card_dir)
    if args.system_only or card is None:
        print(bundle.system)
    else:
        print(bundle.text + (NO_TOOLS_NOTE if args.arm == "single-shot" else ""))
    print(f"[prompt: {bundle.chars} chars, sha256 {bundle.sha256[:12]}, images {list(bundle.images)}]",
          file=sys.stderr)
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    """``summarize PATHS... [--json]``."""
    return summarize_mod.run(args)


def cmd_compare(args: argparse.Namespace) -> int:
    """``compare METRICS... [--output] [--left-system] [--right-system]``; exit 2 when the pairing is invalid."""
    return compare_mod.run(args)


def cmd_view(args: argparse.Namespace) -> int:
    """``view RUN [--out FILE] [--screenshot PNG]``: the episode as a self-contained HTML page."""
    return viewer_mod.run(args)


def add_info_parsers(subparsers: Any) -> None:
    """Register ``api``, ``prompt``, ``summarize``, ``compare`` and ``view`` on an ``add_subparsers()`` object."""
    api = subparsers.add_parser("api", help="print the robo API reference (no simulator)")
    api.add_argument("--robot", default="libero", choices=("libero",), help="robot (default libero)")
    _add_primitives(api)
    _add_reference_root(api)
    api.set_defaults(func=cmd_api)

    prompt = subparsers.add_parser("prompt", help="print the prompt an episode would get (no model; the simulator "
                                                  "only for --task)")
    prompt.add_argument("--card", type=Path, default=None, help="card.json (file or run directory) to render")
    prompt.add_argument("--suite", default=None, help="with --task: the episode's suite (default libero_goal)")
    prompt.add_argument("--task", type=int, default=None,
                        help="render the card of this episode (reset in-process, as play resets the sim node)")
    prompt.add_argument("--seed", type=int, default=None, help="with --task: the episode's seed (default 0)")
    prompt.add_argument("--max-episode-steps", type=int, default=10000,
                        help="with --task: the simulator step budget the card states (default 10000)")
    prompt.add_argument("--vla-endpoint", default=None, metavar="HOST:PORT",
                        help="as play's: the full primitive set is served only with a VLA policy server")
    prompt.add_argument("--vla-server-cmd", default=None, metavar="CMD",
                        help="as play's (not started here): the full primitive set is served only with a VLA server")
    prompt.add_argument("--budget-s", type=float, default=1200.0, help="wall-clock budget in s (default 1200)")
    prompt.add_argument("--system-only", action="store_true", help="print only the system part")
    prompt.add_argument("--transfer", action="store_true", help="card images show one example layout only")
    _add_primitives(prompt)
    prompt.add_argument("--arm", choices=ARMS, default="single-shot", help="contract to render (default single-shot)")
    prompt.add_argument("--robot", default="libero", choices=("libero",), help="robot (default libero)")
    prompt.add_argument("--images", choices=IMAGE_POLICIES, default="on-motion", help="image policy of play arms")
    prompt.add_argument("--feedback", choices=FEEDBACK_MODES, default="rich", help="feedback mode of play arms")
    prompt.add_argument("--max-turns", type=int, default=None, help="decision budget (play arms)")
    prompt.add_argument("--max-programs", type=int, default=None, help="program arm: max run_program calls")
    prompt.add_argument("--guides", action="store_true", help="mention the guides in workspace/guides/")
    _add_reference_root(prompt)
    prompt.set_defaults(func=cmd_prompt)

    summarize = subparsers.add_parser("summarize", help="table (and --json aggregate) of run directories")
    summarize_mod.add_arguments(summarize)
    summarize.set_defaults(func=cmd_summarize)

    compare = subparsers.add_parser("compare", help="strictly paired comparison of two systems")
    compare_mod.add_arguments(compare)
    compare.set_defaults(func=cmd_compare)

    view = subparsers.add_parser("view", help="write one episode as an HTML page (offline, self-contained)")
    viewer_mod.add_arguments(view)
    view.set_defaults(func=cmd_view)
