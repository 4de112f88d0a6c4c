"""Perception maths on synthetic depth: world maps, pixel <-> world, region centres, mask surface statistics."""

import math

import numpy as np
import pytest

from pyrua_ros.robo import perception

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

N = 64


def camera(pitch_deg: float = 0.0):
    """A camera 0.7 m above a table at z = 0.9, looking down (optionally tilted about world x)."""
    f = N / (2 * math.tan(math.radians(30)))
    K = np.array([[f, 0, (N - 1) / 2], [0, f, (N - 1) / 2], [0, 0, 1.0]])
    a = math.radians(pitch_deg)
    tilt = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    T = np.eye(4)
    T[:3, :3] = tilt @ np.array([[0, -1, 0], [-1, 0, 0], [0, 0, -1.0]])
    T[:3, 3] = [0.1, -0.05, 1.6]
    return K, T


def plane_depth(K, T, z_plane=0.9):
    """Exact depth (along the optical axis) of the plane z = z_plane for every pixel."""
    rows, cols = np.mgrid[0:N, 0:N].astype(float)
    rays = np.stack([(cols - K[0, 2]) / K[0, 0], (rows - K[1, 2]) / K[1, 1], np.ones_like(cols)], -1)
    dz = rays @ T[:3, :3].T
    return ((z_plane - T[2, 3]) / dz[..., 2]).astype(np.float32)


@pytest.mark.parametrize("pitch", [0.0, 20.0])
def test_world_map_of_a_plane_lies_on_the_plane(pitch):
    K, T = camera(pitch)
    depth = plane_depth(K, T)
    depth[3, 4] = 0.0
    depth[5, 6] = np.nan
    wmap = perception.world_map(depth, K, T)
    assert wmap.shape == (N, N, 3) and wmap.dtype == np.float32
    valid = perception.valid_depth(depth)
    assert np.allclose(wmap[valid][:, 2], 0.9, atol=1e-4)
    assert np.all(wmap[3, 4] == 0) and np.all(wmap[5, 6] == 0)
    # the principal point of the untilted camera sees the point straight below it
    if pitch == 0.0:
        centre = perception.pixel_to_world((N - 1) / 2, (N - 1) / 2, 0.7, K, T)
        assert np.allclose(centre, [0.1, -0.05, 0.9])


def test_world_map_is_the_same_whatever_its_band_of_rows(monkeypatch):
    """A pixel's point depends on its own depth alone, so computing the map a band of rows at a time (what keeps
    its float64 temporaries in the CPU's cache) changes no bit: one row per band and the whole map in one band
    agree, invalid pixels (zero, NaN, infinite) included."""
    K, T = camera(20.0)
    depth = plane_depth(K, T)
    depth[3, 4], depth[5, 6], depth[40, 1] = 0.0, np.nan, np.inf
    maps = []
    for band in (1, N * N):
        monkeypatch.setattr(perception, "BAND_PIXELS", band)
        maps.append(perception.world_map(depth, K, T))
    assert maps[0].dtype == maps[1].dtype == np.float32 and np.array_equal(maps[0], maps[1])
    assert np.all(maps[0][40, 1] == 0)


def test_pixel_world_round_trip():
    K, T = camera(15.0)
    for row, col, d in ((0, 0, 0.5), (10, 50, 0.8), (63, 20, 1.2)):
        p = perception.pixel_to_world(row, col, d, K, T)
        r, c, depth = perception.world_to_pixel(p, K, T)
        assert (r, c, depth) == pytest.approx((row, col, d), abs=1e-9)
    assert math.isnan(perception.world_to_pixel([0.1, -0.05, 2.0], K, T)[0])   # behind the camera


def test_world_map_rejects_bad_depth_shape():
    K, T = camera()
    with pytest.raises(ValueError, match=r"depth must be \(H, W\)"):
        perception.world_map(np.zeros((4, 4, 3)), K, T)


def box_scene():
    """Table plane plus a 10 x 10 px raised square (z = 0.95) in the middle."""
    K, T = camera()
    depth = plane_depth(K, T)
    depth[27:37, 27:37] = 1.6 - 0.95
    return perception.world_map(depth, K, T)


def test_region_center_with_z_band_and_errors():
    wmap = box_scene()
    centre, median, n = perception.region_center(wmap, (20, 44), (20, 44), z_min=0.93)
    assert n == 100 and centre[2] == pytest.approx(0.95, abs=1e-5) and median[2] == pytest.approx(0.95, abs=1e-5)
    expected_xy = wmap[27:37, 27:37, :2].reshape(-1, 2)
    assert centre[0] == pytest.approx((expected_xy[:, 0].min() + expected_xy[:, 0].max()) / 2)
    # the window is clipped to the image
    assert perception.region_center(wmap, (-5, 200), (-5, 200))[2] == N * N
    with pytest.raises(ValueError, match=r"empty region after clamping to image \d+x\d+: rows \[10,10\]"):
        perception.region_center(wmap, (10, 10), (0, 4))
    assert perception.region_center(wmap, (44, 20), (44, 20)) == perception.region_center(wmap, (20, 44), (20, 44))
    with pytest.raises(ValueError, match=r"too few valid pixels in region after z-filter \(0\)"):
        perception.region_center(wmap, (0, 5), (0, 5), z_min=1.0)


def test_surface_stats_median_and_percentile_box():
    wmap = box_scene()
    mask = np.zeros((N, N), bool)
    mask[25:39, 25:39] = True        # the box plus a ring of table
    stats = perception.surface_stats(wmap, mask)
    assert stats.n_pixels == 14 * 14
    assert stats.median[2] == pytest.approx(0.95, abs=1e-5) and stats.top_z == pytest.approx(0.95, abs=1e-5)
    assert stats.xyz_min[2] == pytest.approx(0.90, abs=1e-4)
    box_xy = wmap[25:39, 25:39, :2].reshape(-1, 2)
    assert stats.box_center[:2] == pytest.approx(tuple(box_xy.mean(axis=0)), abs=2e-3)
    assert perception.surface_stats(wmap, np.zeros((N, N), bool)) is None
    with pytest.raises(ValueError, match="does not match"):
        perception.surface_stats(wmap, np.zeros((3, 3), bool))


def test_mask_box_and_resize():
    mask = np.zeros((8, 8), bool)
    mask[2:4, 5:7] = True
    assert perception.mask_box(mask) == (2, 5, 3, 6)
    assert perception.mask_box(np.zeros((3, 3), bool)) is None
    big = perception.resize_nearest(mask, (16, 16))
    assert big.shape == (16, 16) and perception.mask_box(big) == (4, 10, 7, 13)
