"""Pixels to world points from depth + intrinsics + camera pose (pure numpy; the simulator is never asked).

Conventions: images are (row, col), row 0 at the top. Depth is metres along the optical axis, 0 / non-finite
where invalid. ``K`` is the 3x3 pinhole matrix (fx, fy, cx, cy in pixels); ``T_world_optical`` the 4x4 pose of
the optical frame (x right, y down, z forward) in the world. World maps are (H, W, 3) float32 with zeros where
depth is invalid.
"""

from __future__ import annotations

import dataclasses

import numpy as np

BAND_PIXELS = 1 << 15   # pixels per band of rows in world_map (float64 temporaries: a band's stay in the cache)

def valid_depth(depth: np.ndarray) -> np.ndarray:
    """Boolean mask of pixels with a usable depth (finite and > 0)."""
    depth = np.asarray(depth, dtype=np.float64)
    return np.isfinite(depth) & (depth > 0.0)


def world_map(depth: np.ndarray, K: np.ndarray, T_world_optical: np.ndarray) -> np.ndarray:
    """World [x, y, z] (m) of the surface seen at every pixel, (H, W, 3) float32, zeros where depth is invalid.

    Computed band by band of rows (:data:`BAND_PIXELS`): a pixel's point depends on its depth alone, so the bands
    give the same array as whole-image passes while their float64 temporaries stay in the CPU's cache."""
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise ValueError(f"depth must be (H, W), got shape {depth.shape}")
    h, w = depth.shape
    K = np.asarray(K, dtype=np.float64)
    T = np.asarray(T_world_optical, dtype=np.float64)
    # per-pixel ray factors as a row and a column, broadcast (no (H, W) grids of pixel coordinates)
    cols = ((np.arange(w, dtype=np.float64) - K[0, 2]) / K[0, 0])[None, :]
    rows = ((np.arange(h, dtype=np.float64) - K[1, 2]) / K[1, 1])[:, None]
    R, t = T[:3, :3], T[:3, 3]
    out = np.empty((h, w, 3), dtype=np.float32)
    step = max(1, BAND_PIXELS // max(w, 1))
    for r0 in range(0, h, step):
        band = np.asarray(depth[r0:r0 + step], dtype=np.float64)
        ok = valid_depth(band)
        z = np.where(ok, band, 0.0)
        x = cols * z
        y = rows[r0:r0 + step] * z
        points = out[r0:r0 + step]
        for i in range(3):
            points[..., i] = R[i, 0] * x + R[i, 1] * y + R[i, 2] * z + t[i]
        points[~ok] = 0.0
    return out


def pixel_to_world(row: int, col: int, depth_m: float, K: np.ndarray, T_world_optical: np.ndarray) -> np.ndarray:
    """World point (3,) m of one pixel at a given depth along the optical axis."""
    K = np.asarray(K, dtype=np.float64)
    T = np.asarray(T_world_optical, dtype=np.float64)
    p = np.array([(col - K[0, 2]) / K[0, 0] * depth_m, (row - K[1, 2]) / K[1, 1] * depth_m, depth_m])
    return T[:3, :3] @ p + T[:3, 3]


def world_to_pixel(xyz: np.ndarray, K: np.ndarray, T_world_optical: np.ndarray) -> tuple[float, float, float]:
    """Project a world point: returns (row, col, depth_m) (depth <= 0 means behind the camera)."""
    T = np.asarray(T_world_optical, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    p = T[:3, :3].T @ (np.asarray(xyz, dtype=np.float64) - T[:3, 3])
    if p[2] <= 0:
        return float("nan"), float("nan"), float(p[2])
    return float(K[1, 1] * p[1] / p[2] + K[1, 2]), float(K[0, 0] * p[0] / p[2] + K[0, 2]), float(p[2])


def _valid_points(wmap: np.ndarray) -> np.ndarray:
    """Boolean (...): which points of a (..., 3) world map or point list hold a point (finite, not all-zero)."""
    finite = np.all(np.isfinite(wmap), axis=-1)
    return finite & np.any(wmap != 0.0, axis=-1)


@dataclasses.dataclass(frozen=True)
class SurfaceStats:
    """Statistics of the world points under a mask: ``median`` (3,), ``xyz_min`` / ``xyz_max`` (2nd / 98th
    percentiles), ``box_center`` (their midpoint: the better object-centre estimate), ``top_z`` (98th percentile
    of z), ``n_pixels`` (points used)."""

    median: tuple[float, float, float]
    xyz_min: tuple[float, float, float]
    xyz_max: tuple[float, float, float]
    box_center: tuple[float, float, float]
    top_z: float
    n_pixels: int


def surface_stats(wmap: np.ndarray, mask: np.ndarray) -> SurfaceStats | None:
    """SurfaceStats of the valid world points under ``mask`` (same H, W as the map); None if there are none."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != wmap.shape[:2]:
        raise ValueError(f"mask shape {mask.shape} does not match world map {wmap.shape[:2]}")
    pts = wmap[mask]                              # the masked points first: a mask is a small part of the map
    pts = pts[_valid_points(pts)].astype(np.float64)
    if len(pts) == 0:
        return None
    lo = np.percentile(pts, 2, axis=0)
    hi = np.percentile(pts, 98, axis=0)
    med = np.median(pts, axis=0)
    return SurfaceStats(
        median=_t3(med), xyz_min=_t3(lo), xyz_max=_t3(hi), box_center=_t3((lo + hi) / 2.0),
        top_z=float(hi[2]), n_pixels=len(pts),
    )


def region_center(wmap: np.ndarray, row_range: tuple[int, int], col_range: tuple[int, int], *,
                  z_min: float | None = None, z_max: float | None = None, min_valid: int = 8,
                  ) -> tuple[tuple[float, float, float], tuple[float, float, float], int]:
    """Centre of a pixel window: (centre, median, n_valid), as RPent's region ``back_project`` computes it. Rows and
    cols are half-open [start, stop), clamped to the image and put in order (``(50, 40)`` is rows 40..49); only
    points with z in [z_min, z_max] (when given) count. Centre = midpoint of the points' x/y extent with their
    median z. Raises ValueError, in RPent's words, for an empty window or fewer than ``min_valid`` points (8)."""
    h, w = wmap.shape[:2]
    r0, r1 = sorted((max(0, int(row_range[0])), min(h, int(row_range[1]))))
    c0, c1 = sorted((max(0, int(col_range[0])), min(w, int(col_range[1]))))
    if r1 <= r0 or c1 <= c0:
        raise ValueError(f"empty region after clamping to image {h}x{w}: rows [{r0},{r1}] cols [{c0},{c1}]")
    win = wmap[r0:r1, c0:c1]
    pts = win[_valid_points(win)].astype(np.float64)
    if z_min is not None:
        pts = pts[pts[:, 2] >= z_min]
    if z_max is not None:
        pts = pts[pts[:, 2] <= z_max]
    if len(pts) < min_valid:
        raise ValueError(f"too few valid pixels in region after z-filter ({len(pts)}); widen the window or the "
                         "z band")
    med = np.median(pts, axis=0)
    centre = ((pts[:, 0].min() + pts[:, 0].max()) / 2.0, (pts[:, 1].min() + pts[:, 1].max()) / 2.0, med[2])
    return _t3(centre), _t3(med), len(pts)


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(row_min, col_min, row_max, col_max) inclusive bounds of a boolean mask; None if empty."""
    rows = np.flatnonzero(np.any(mask, axis=1))
    cols = np.flatnonzero(np.any(mask, axis=0))
    if len(rows) == 0:
        return None
    return int(rows[0]), int(cols[0]), int(rows[-1]), int(cols[-1])


def resize_nearest(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of an (H, W[, C]) array to (h, w) (masks and id images keep their values)."""
    h, w = size
    src_h, src_w = array.shape[:2]
    if (src_h, src_w) == (h, w):
        return array
    rows = (np.arange(h) * src_h // h).clip(0, src_h - 1)
    cols = (np.arange(w) * src_w // w).clip(0, src_w - 1)
    return array[rows][:, cols]


def _t3(v) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])
