"""Rendering a past control step of the LIBERO episode (sim/env.py ``capture(..., step=k)``): the picture is the
one taken live at that step, and rendering the past changes nothing about the episode's future (in-process,
no ROS). robo's ``image/world_map/segment/back_project(step=k)`` for any recorded step stand on this."""

import numpy as np
import pytest

from pyrua_ros.sim.env import LiberoEpisode

SIZE = 96
ACTIONS = [np.array([0.4, -0.3, -0.5, 0.0, 0.0, 0.3, -1.0 if k < 4 else 1.0]) for k in range(8)]


@pytest.fixture(scope="module")
def episode():
    ep = LiberoEpisode(stream_resolution=SIZE)
    yield ep
    ep.close()


def _run(ep, render_past_at: int | None):
    ep.reset("libero_goal", 8, 0, 100)
    live, poses = {}, []
    for k, action in enumerate(ACTIONS, start=1):
        ep.step(action)
        poses.append(ep.eef_pose()[0].copy())
        if k == 3:
            live = {"capture": ep.capture("wrist", SIZE), "seg": ep.segmentation("agentview", SIZE)[0]}
        if render_past_at is not None and k == 6:
            past = ep.capture("wrist", SIZE, step=render_past_at)
            past_seg = ep.segmentation("agentview", SIZE, step=render_past_at)[0]
            live.update(past=past, past_seg=past_seg)
    return live, np.array(poses)


def test_a_past_step_renders_as_it_was_and_the_future_does_not_change(episode):
    _, plain_poses = _run(episode, None)
    live, poses = _run(episode, 3)
    then, again = live["capture"], live["past"]
    assert np.array_equal(then.color, again.color) and np.allclose(then.depth, again.depth)
    assert np.allclose(then.T_world_optical, again.T_world_optical)
    assert np.array_equal(live["seg"], live["past_seg"])
    # the wrist camera moved since step 3, so the past render is not simply the present one
    assert not np.allclose(episode.capture("wrist", SIZE).T_world_optical, then.T_world_optical)
    # rendering step 3 at step 6 left the physics untouched: the same actions give the same trajectory
    assert np.array_equal(poses, plain_poses)


def test_a_step_that_does_not_exist_is_refused(episode):
    episode.reset("libero_goal", 8, 0, 100)
    with pytest.raises(ValueError, match=r"steps are 0\.\.0"):
        episode.capture("wrist", SIZE, step=1)
