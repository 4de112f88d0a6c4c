"""The settings schema is the one source: every front end (CLI flags, launch arguments, the agent node's
parameters, config/agent.yaml) is generated from it, and these tests fail when one offers a setting the schema
lacks, spells a choice differently or shows another default."""

import argparse
import dataclasses
import pathlib
import subprocess
import sys

import pytest

from pyrua_ros.bringup import graph
from pyrua_ros.cli.main import build_parser
from pyrua_ros.nodes import agent_node
from pyrua_ros.settings import schema
from pyrua_ros.settings.config import GenerateConfig, McpConfig, PlayConfig, RunConfig

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRAPH_ONLY = {"rviz", "use_sim_time", "interfaces", "remap", "namespace", "driver_params", "sigterm_timeout",
              "sigkill_timeout", "agent_params"}     # what the launch graph itself decides


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("command, tree", [("play", PlayConfig), ("run", RunConfig), ("generate", GenerateConfig),
                                           ("mcp", McpConfig)])
def test_cli_flags_are_exactly_the_schema_leaves_with_their_choices_and_defaults(command, tree):
    parser = _subparser(command)
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings and a.dest != "help"}
    leaves = {leaf.flag: leaf for leaf in schema.leaves(tree)}
    assert set(actions) == set(leaves)
    for flag, leaf in leaves.items():
        action = actions[flag]
        assert tuple(action.choices or ()) == tuple(leaf.choices), flag
        assert action.required == (leaf.required or leaf.spec.cli_required), flag
        if not action.required:
            assert "(default: " in action.help, flag
            assert action.default == leaf.env_default(), flag


def test_eval_flags_are_plays_schema_flags_less_the_per_episode_ones():
    """eval offers play's settings from the same schema (help, choices, defaults, destinations), except the
    per-episode ones it replaces with its own lists and evaluation directory."""
    from pyrua_ros.evaluation.manifest import PER_EPISODE

    def actions(parser):
        return {a.option_strings[0]: a for a in parser._actions if a.option_strings and a.dest != "help"}

    play, evaluation = actions(_subparser("play")), actions(_subparser("eval"))
    replaced = {leaf.flag for leaf in schema.leaves(PlayConfig) if leaf.name in PER_EPISODE}
    assert replaced == {"--suite", "--task", "--seed", "--out", "--overwrite", "--resume"}
    for flag in set(play) - replaced:
        a, b = play[flag], evaluation[flag]
        assert (a.dest, a.choices, a.default, a.help, a.required) == (b.dest, b.choices, b.default, b.help,
                                                                       b.required), flag
    assert "--overwrite" not in evaluation and "--resume" not in evaluation
    for own in ("--suite", "--task", "--seed", "--out"):   # eval's lists and evaluation directory
        assert not evaluation[own].dest.startswith("setting__"), own


def test_launch_arguments_are_the_schema_launch_leaves_plus_the_graph_own():
    launch = {a.name: a for a in graph.ARGUMENTS}
    leaves = {leaf.name: leaf for leaf in schema.leaves(PlayConfig) if leaf.spec.launch}
    assert set(launch) - GRAPH_ONLY == set(leaves)
    for name, leaf in leaves.items():
        arg = launch[name]
        assert arg.default == leaf.text(leaf.default), name
        assert arg.description == leaf.spec.help, name
        if leaf.choices:
            assert arg.choices == tuple(map(str, leaf.choices)), name
        # the launch text of the default reads back as the schema default
        assert arg.convert(arg.default) == (leaf.default if leaf.kind != "path" else None), name
    # where each setting goes follows its scope (graph roles: the driver node, sim or fake, and the agent)
    assert launch["suite"].to == ("driver", "agent") and launch["clock_mode"].to == ("driver",)
    assert launch["robot"].to == () and launch["robot"].choices == ("sim", "fake", "external")
    assert launch["openai_max_tokens"].to == ("agent",)


def test_agent_node_declares_every_agent_leaf_with_its_type_and_unset_optionals():
    import rclpy

    context = rclpy.Context()
    body = graph.yaml_scalar('{"top_k": 20}')
    rclpy.init(args=["agent_node", "--ros-args", "-p", "task:=3", "-p", "openai_temperature:=0.5",
                     "-p", f"openai_extra_body:={body}", "-p", "max_turns:=7"], context=context)
    try:
        node = rclpy.create_node("agent", context=context)
        values = agent_node.declare_parameters(node)
        names = {n for n in node._parameters if n not in ("use_sim_time", "start_type_description_service")}
        expected = {leaf.name for leaf in agent_node.node_leaves()}
        assert names == expected
        assert values["task"] == 3 and values["openai_temperature"] == 0.5 and values["max_turns"] == 7
        assert values["openai_extra_body"] == '{"top_k": 20}'
        assert values["base_url"] is None and values["out"] is None and values["openai_max_tokens"] is None
        cfg = agent_node.config_from_parameters(values)
        assert cfg.episode.driver == "external" and cfg.episode.task == 3 and cfg.model.temperature == 0.5
        assert cfg.model.max_tokens is None        # unset stays "not sent", as on the CLI
        assert cfg.model.extra_body == {"top_k": 20}
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_agent_yaml_is_generated_from_the_schema():
    assert (ROOT / "config" / "agent.yaml").read_text() == agent_node.parameters_yaml(), \
        "config/agent.yaml is stale: run scripts/generate_config.py"


def test_cli_and_launch_build_the_same_config():
    args = _subparser("play").parse_args(
        ["--arm", "program", "--task", "3", "--suite", "libero_goal_swap", "--runtime", "openai", "--base-url",
         "http://127.0.0.1:30000/v1", "--openai-max-tokens", "8192", "--openai-extra-body", '{"top_p": 0.95}',
         "--max-programs", "2", "--no-video"])
    from pyrua_ros.cli.args import settings_from_args

    from_cli = settings_from_args(PlayConfig, args)
    texts = {"arm": "program", "task": "3", "suite": "libero_goal_swap", "runtime": "openai",
             "base_url": "http://127.0.0.1:30000/v1", "openai_max_tokens": "8192",
             "openai_extra_body": '{"top_p": 0.95}', "max_programs": "2", "video": "false"}
    agent = {n.key: n for n in graph.plan(texts)}["agent"]
    from_launch = agent_node.config_from_parameters(agent.parameters)
    assert dataclasses.replace(from_launch, episode=from_cli.episode) == from_cli
    assert schema.build(PlayConfig, schema.flatten(from_cli)) == from_cli
    assert schema.to_json(from_cli)["model"]["extra_body"] == {"top_p": 0.95}


def test_a_new_setting_is_one_field():
    """What adding a setting takes: one ``setting(...)`` field; every view follows."""

    @dataclasses.dataclass(frozen=True)
    class Extra:
        speed: float = schema.setting(1.0, help="playback speed", name="playback_speed")

    @dataclasses.dataclass(frozen=True)
    class Tree:
        play: PlayConfig = PlayConfig()
        extra: Extra = Extra()

    leaf = schema.leaf(Tree, "playback_speed")
    assert leaf.flag == "--speed" and leaf.path == ("extra", "speed")
    parser = argparse.ArgumentParser()
    from pyrua_ros.cli.args import add_settings, settings_from_args

    add_settings(parser, Tree)
    tree = settings_from_args(Tree, parser.parse_args(["--arm", "cells", "--task", "1", "--speed", "2.5"]))
    assert tree.extra.speed == 2.5 and tree.play.episode.task == 1
    assert "playback_speed: 1.0" in schema.yaml_text(Tree, "x")


def test_bad_values_name_the_flag_and_the_valid_values():
    with pytest.raises(schema.SettingError, match="--images must be one of on-motion, on-demand, none"):
        schema.build(PlayConfig, {"images": "always"})
    with pytest.raises(schema.SettingError, match="--max-programs applies to --arm program only"):
        schema.build(PlayConfig, {"max_programs": 2})
    with pytest.raises(schema.SettingError, match="--replay applies to --runtime replay only"):
        schema.build(PlayConfig, {"runtime": "openai", "base_url": "http://h/v1", "replay": pathlib.Path("x.py")})
    with pytest.raises(schema.SettingError, match="--base-url applies to a model runtime"):
        schema.build(PlayConfig, {"base_url": "http://h/v1"})
    with pytest.raises(schema.SettingError, match="--overwrite and --resume exclude each other"):
        schema.build(PlayConfig, {"overwrite": True, "resume": True})
    with pytest.raises(schema.SettingError, match="--base-url must be an http"):
        schema.build(PlayConfig, {"runtime": "openai", "base_url": "127.0.0.1:30000"})
    with pytest.raises(schema.SettingError, match="--openai-extra-body is not valid JSON"):
        schema.leaf(PlayConfig, "openai_extra_body").parse("{not json")
    # the primitive set is derived, never rewritten: full without a VLA server runs no-vla
    cfg = schema.build(PlayConfig, {})
    assert cfg.episode.primitives == "full" and cfg.episode.primitive_set == "no-vla"


def _cli(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "pyrua_ros.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_help_is_plain_text_with_defaults_exit_codes_and_launch_arguments():
    top = _cli("--help")
    assert top.returncode == 0
    assert "``" not in top.stdout and ":class:" not in top.stdout
    assert top.stdout.splitlines()[2].startswith("Run PyRUA-Lean robot agents on ROS 2")
    assert "exit codes:" in top.stdout and "130" in top.stdout
    play = _cli("play", "--help")
    assert "(default: 1200.0)" in " ".join(play.stdout.split())
    assert "(default: $PYRUALEAN_RUNTIME, else replay)" in " ".join(play.stdout.split())
    assert "exit codes:" in play.stdout
    launch = _cli("launch", "--help")
    for arg in graph.ARGUMENTS:
        assert f"{arg.name}:=" in launch.stdout, arg.name
