"""The compiled-model cache (pyrua_ros/sim/model_cache.py) on small MJCF scenes: loaded models equal compiled ones,
the key follows the files a scene names, the folder keeps its size, and a damaged or open folder is not trusted.
(The LIBERO scene itself: test_sim_env.py.)"""

from __future__ import annotations

import os
import pathlib

import mujoco
import numpy as np
import pytest

from pyrua_ros.sim import model_cache

pytestmark = pytest.mark.unit

TETRAHEDRON = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


def scene(mesh: pathlib.Path, size: float = 0.05) -> str:
    return (f'<mujoco><asset><mesh name="m" file="{mesh}"/></asset><worldbody>'
            f'<geom type="plane" size="1 1 0.1"/>'
            f'<body pos="0 0 0.3"><freejoint/><geom type="mesh" mesh="m"/>'
            f'<geom type="sphere" size="{size}" pos="0.05 0 0"/></body></worldbody></mujoco>')


@pytest.fixture
def mesh(tmp_path) -> pathlib.Path:
    path = tmp_path / "tet.obj"
    path.write_text(TETRAHEDRON)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> pathlib.Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(model_cache.ENV, str(folder))
    monkeypatch.delenv(model_cache.SIZE_ENV, raising=False)
    return folder


def trajectory(model: mujoco.MjModel, steps: int = 200) -> np.ndarray:
    data = mujoco.MjData(model)
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return np.concatenate([data.qpos, data.qvel])


def test_a_scene_is_compiled_once_then_loaded_and_steps_bit_for_bit_alike(cache, mesh):
    xml = scene(mesh)
    compiled = model_cache.compile_model(xml)
    files = list(cache.glob("*.mjb"))
    assert len(files) == 1 and (cache.stat().st_mode & 0o777) == 0o700
    os.utime(files[0], (1_000_000, 1_000_000))
    loaded = model_cache.compile_model(xml)
    assert files[0].stat().st_mtime > 1_000_000            # it was loaded (and marked as used), not compiled
    for field in ("body_mass", "body_inertia", "geom_size", "mesh_vert", "mesh_face"):
        np.testing.assert_array_equal(getattr(loaded, field), getattr(compiled, field))
    reference = trajectory(mujoco.MjModel.from_xml_string(xml))
    assert trajectory(loaded).tobytes() == reference.tobytes() == trajectory(compiled).tobytes()


def test_the_key_follows_the_files_a_scene_names(cache, mesh, tmp_path, monkeypatch):
    xml = scene(mesh)
    first = model_cache.key(xml)
    assert first == model_cache.key(xml) and first != model_cache.key(scene(mesh, size=0.06))
    mesh.write_text(TETRAHEDRON.replace("0.1", "0.2"))    # the same scene text, another mesh
    assert model_cache.key(xml) != first
    relative = xml.replace(str(mesh), "tet.obj")
    assert model_cache.key(relative) is None and model_cache.key(scene(tmp_path / "missing.obj")) is None
    monkeypatch.chdir(tmp_path)
    model_cache.compile_model(relative)                    # compiled, not kept: what it names can change unseen
    assert not list(cache.glob("*.mjb"))


def test_the_folder_keeps_its_size_least_recently_used_out(cache, mesh, monkeypatch):
    scenes = [scene(mesh, size=0.01 * (i + 1)) for i in range(3)]
    model_cache.compile_model(scenes[0])
    one = next(cache.glob("*.mjb")).stat().st_size
    monkeypatch.setenv(model_cache.SIZE_ENV, str(2.5 * one / 1e6))   # room for two
    model_cache.compile_model(scenes[1])
    os.utime(cache / f"{model_cache.key(scenes[1])}.mjb", (1_000_000, 1_000_000))   # the least recently used
    model_cache.compile_model(scenes[0])                   # loaded: used now
    model_cache.compile_model(scenes[2])
    kept = {path.stem for path in cache.glob("*.mjb")}
    assert kept == {model_cache.key(scenes[0]), model_cache.key(scenes[2])}


def test_a_damaged_file_is_compiled_over(cache, mesh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # MuJoCo writes its warning about the damaged file to MUJOCO_LOG.TXT here
    xml = scene(mesh)
    model_cache.compile_model(xml)
    path = cache / f"{model_cache.key(xml)}.mjb"
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    model = model_cache.compile_model(xml)
    assert trajectory(model).tobytes() == trajectory(mujoco.MjModel.from_xml_string(xml)).tobytes()
    assert path.read_bytes() == good


@pytest.mark.parametrize("setting", ["open folder", "off", "size 0"])
def test_nothing_is_kept_where_it_is_off_or_others_could_write(cache, mesh, monkeypatch, setting):
    if setting == "open folder":
        cache.mkdir()
        cache.chmod(0o777)
    elif setting == "off":
        monkeypatch.setenv(model_cache.ENV, "off")
    else:
        monkeypatch.setenv(model_cache.SIZE_ENV, "0")
    model = model_cache.compile_model(scene(mesh))
    assert model.nbody == 2 and not (cache.exists() and list(cache.glob("*.mjb")))
