"""Every runtime registered in ``pyrua_ros.settings.runtimes.RUNTIMES`` is whole: its implementation loads and
has the hooks its kind needs, the settings offer it and check its flags from its declaration alone, and the checks
before boot find its executable. A new runtime is one registration and is swept here without a new test."""

import dataclasses

import pytest

from pyrua_ros.agent import runtimes
from pyrua_ros.agent.run import validate
from pyrua_ros.agent.runtimes.cli_agent import CliRuntime
from pyrua_ros.settings.config import AgentSettings, CliRuntimeSettings, PlayConfig
from pyrua_ros.settings.model import ModelSettings
from pyrua_ros.settings.modes import ARMS
from pyrua_ros.settings.runtimes import RUNTIMES, RuntimeRegistry, RuntimeSpec
from pyrua_ros.settings.schema import SettingError, leaves

pytestmark = pytest.mark.unit

SPECS = list(RUNTIMES)
LOOPBACK = "http://127.0.0.1:9/v1"


def config(spec: RuntimeSpec, arm: str | None = None, **cli) -> PlayConfig:
    """The smallest valid PlayConfig of ``spec`` (a model server on loopback where it takes one)."""
    return PlayConfig(agent=AgentSettings(arm=arm or spec.arms[0], runtime=spec.name),
                      model=ModelSettings(base_url=LOOPBACK if spec.uses_model else None),
                      cli=CliRuntimeSettings(**cli))


def test_the_runtime_flag_offers_exactly_the_registered_runtimes():
    (runtime,) = [leaf for leaf in leaves(PlayConfig) if leaf.path == ("agent", "runtime")]
    assert runtime.choices == RUNTIMES.names() == ("openai", "replay", "codex", "claude")
    assert all(f"{spec.name} ({spec.summary})" in runtime.spec.help for spec in SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_runtime_has_the_implementation_its_kind_needs(spec):
    cls = runtimes.implementation(spec)
    if spec.kind == "cli":
        assert issubclass(cls, CliRuntime) and cls.name == spec.name
        assert spec.executable_setting in {f.name for f in dataclasses.fields(CliRuntimeSettings)}
        assert spec.home_setting is None or hasattr(CliRuntimeSettings(), spec.home_setting)
        with pytest.raises(ValueError, match="valid runtimes: openai, replay"):
            runtimes.create(spec.name)
    else:
        assert runtimes.runtime_class(spec.name) is cls and callable(cls.from_config)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_runtime_is_accepted_on_its_arms_and_refuses_the_others_with_its_reason(spec):
    for arm in ARMS:
        if arm in spec.arms:
            assert config(spec, arm).agent.runtime == spec.name
        else:
            with pytest.raises(SettingError, match=f"--arm {arm} .*; {spec.arms_refusal}"):
                config(spec, arm)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_runtime_checks_its_model_server_flag_from_its_declaration(spec):
    agent = AgentSettings(arm=spec.arms[0], runtime=spec.name)
    if not spec.uses_model:
        with pytest.raises(SettingError, match=f"the {spec.name} runtime needs no model server"):
            PlayConfig(agent=agent, model=ModelSettings(base_url=LOOPBACK))
        return
    with pytest.raises(SettingError, match=f"--runtime {spec.name} needs --base-url"):
        PlayConfig(agent=agent, model=ModelSettings(base_url=None))
    if spec.kind == "cli":
        with pytest.raises(SettingError, match="is not on loopback"):
            PlayConfig(agent=agent, model=ModelSettings(base_url="https://api.example.com/v1"))
        assert PlayConfig(agent=agent, model=ModelSettings(base_url="https://api.example.com/v1"),
                          cli=CliRuntimeSettings(cli_network="inherit")).model.base_url


@pytest.mark.parametrize("spec", [s for s in SPECS if s.kind == "cli"], ids=lambda s: s.name)
def test_every_cli_runtime_owns_its_executable_flag_and_finds_the_executable(spec, monkeypatch):
    monkeypatch.setenv("PYRUA_TEST_KEY", "k")
    monkeypatch.delenv(f"PYRUALEAN_{spec.executable_setting.upper()}", raising=False)
    for other in SPECS:
        if other.name != spec.name and other.uses_model:
            with pytest.raises(SettingError, match=f"{spec.executable_flag} applies to --runtime {spec.name} only"):
                config(other, **{spec.executable_setting: "/usr/bin/true"})
    cfg = config(spec, **{spec.executable_setting: "/usr/bin/true"})
    model = ModelSettings(base_url=LOOPBACK, api_key_env="PYRUA_TEST_KEY")
    assert validate.check_cli_runtime(spec.name, cfg.cli, model) == "/usr/bin/true"
    with pytest.raises(SettingError, match=f"{spec.executable_flag}: no {spec.binary} executable found"):
        validate.check_cli_runtime(spec.name, config(spec, **{spec.executable_setting: "/nonexistent/x"}).cli,
                                   model)
    assert runtimes.cli_reasoning(cfg) == spec.default_reasoning


def test_the_replay_runtime_checks_its_source_before_boot(tmp_path):
    agent = AgentSettings(arm="cells", runtime="replay", replay=tmp_path / "missing.py")
    with pytest.raises(SettingError, match=f"--replay {tmp_path / 'missing.py'}: no such file"):
        runtimes.check_config(PlayConfig(agent=agent))
    (tmp_path / "bad.py").write_text("def run(robo):\n    return (\n")
    with pytest.raises(SettingError, match=r"--replay .*bad\.py: "):
        runtimes.check_config(PlayConfig(agent=dataclasses.replace(agent, replay=tmp_path / "bad.py")))


def test_a_registration_that_is_not_whole_is_refused():
    registry = RuntimeRegistry()
    registry.add(RuntimeSpec("a", "one", "m:A"))
    with pytest.raises(ValueError, match="registered twice"):
        registry.add(RuntimeSpec("a", "again", "m:B"))
    with pytest.raises(ValueError, match="module:Class"):
        RuntimeSpec("b", "no class", "m")
    with pytest.raises(ValueError, match="names its binary"):
        RuntimeSpec("c", "a cli without a binary", "m:C", kind="cli")
    with pytest.raises(ValueError, match="arms must be among"):
        RuntimeSpec("d", "an arm nobody has", "m:D", arms=("notebook",))
    with pytest.raises(ValueError, match="unknown runtime 'z'; valid runtimes: a"):
        registry["z"]
