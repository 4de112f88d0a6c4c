"""Geoms a camera cannot see are left out of its color pass: the same pixels for less vertex work.

A software renderer (Mesa llvmpipe, what these machines have) pays for every vertex it is given, on screen or not:
a LIBERO scene has about 560k mesh vertices, most of them in the robot, and the wrist camera sees its own fingers
and the table, not the arm behind it. MuJoCo's ``mjr_render`` draws every geom of the scene, and when the scene
has a reflective plane or box it first draws them all again, mirrored, into that reflector's outline (a stencil).
:func:`plan_cut` finds what cannot change a pixel, and :func:`culled` leaves it out of one render: hidden geoms
marked not drawn (``mjGEOM_NONE``), the reflection pass switched off; then puts everything back.

A geom is left out only when all of these hold, so the picture, color and depth, is the one the full scene gives:

- its type has a bounding sphere about its position (mesh with a model bound, sphere, capsule, ellipsoid,
  cylinder, box), it is opaque (alpha >= 0.995: transparent geoms are sorted by distance, so they all stay) and
  it is not a reflector (a plane or box with reflectance: MuJoCo uses the first one, which must not change);
- that sphere lies wholly outside the camera's view frustum (left, right, bottom, top or near plane);
- for every reflector that can show, the sphere lies wholly below the mirror plane (MuJoCo clips the mirrored image
  of what is below it), or the sphere's mirror image lies wholly outside the pyramid from the camera through the
  reflecting rectangle (the stencil the image is drawn into; the whole frustum for an infinite plane or a
  rectangle reaching behind the camera).

A reflector can show unless its rectangle (a box's +Z face) lies wholly outside the view frustum or the camera is
behind it; when none can, the reflection pass would write no pixel and is left out. Nothing is left out when a
light casts shadows (the shadow map draws every geom), in stereo, for an orthographic camera or in segmentation
mode. ``test/test_sim_env.py`` compares culled and full renders pixel for pixel over LIBERO scenes and moving
states."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

OPAQUE_ALPHA = 0.995      # MuJoCo's threshold: below it a geom is drawn in the sorted transparent pass
_MARGIN = (1.001, 1e-4)   # bounding spheres grown by 0.1 % and 0.1 mm against float32 rounding in the GL


def _bounded_types(mj) -> dict[int, str]:
    g = mj.mjtGeom
    return {int(g.mjGEOM_MESH): "mesh", int(g.mjGEOM_SPHERE): "sphere", int(g.mjGEOM_CAPSULE): "capsule",
            int(g.mjGEOM_ELLIPSOID): "ellipsoid", int(g.mjGEOM_CYLINDER): "cylinder", int(g.mjGEOM_BOX): "box"}


def _radius(geom, kind: str) -> float:
    """[m] a radius about ``geom.pos`` that holds the whole geom (0: unknown, never culled)."""
    if kind == "mesh":
        bound = float(geom.modelrbound)
    else:   # the sum of the half-sizes bounds every primitive (capsule: radius + half-length)
        bound = float(np.abs(np.asarray(geom.size, dtype=np.float64)).sum())
    return bound * _MARGIN[0] + _MARGIN[1] if bound > 0 else 0.0


class _Camera:
    """The GL camera ``mjr_render`` draws ``scn`` with (mono perspective only): its frame and frustum."""

    def __init__(self, mj, scn, aspect: float):
        cam = mj.mjv_averageCamera(scn.camera[0], scn.camera[1])
        self.usable = (scn.stereo == int(mj.mjtStereo.mjSTEREO_NONE) and not cam.orthographic
                       and float(cam.frustum_near) > 0)
        self.near = float(cam.frustum_near)
        top, bottom = float(cam.frustum_top), float(cam.frustum_bottom)
        half = float(cam.frustum_width) or 0.5 * aspect * (top - bottom)
        center = float(cam.frustum_center)
        # the frustum as slopes in view coordinates (x right, y up, z along forward): x/z in [left, right], ...
        self.slopes = ((center - half) / self.near, (center + half) / self.near, bottom / self.near, top / self.near)
        self.pos = np.asarray(cam.pos, dtype=np.float64)
        forward = np.asarray(cam.forward, dtype=np.float64)
        up = np.asarray(cam.up, dtype=np.float64)
        self.axes = np.array([np.cross(forward, up), up, forward])   # rows: right, up, forward

    def planes(self, slopes: tuple[float, float, float, float] | None = None) -> np.ndarray:
        """Inward unit normals and offsets ``(n, d)`` in world coordinates of the planes of the pyramid from the
        camera with ``slopes`` (default: the view frustum's), near plane included: inside is ``n . x + d >= 0``."""
        left, right, bottom, top = self.slopes if slopes is None else slopes
        local = np.array([(1.0, 0.0, -left), (-1.0, 0.0, right), (0.0, 1.0, -bottom), (0.0, -1.0, top),
                          (0.0, 0.0, 1.0)])
        normals = local @ self.axes
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        offsets = -(normals @ self.pos)
        offsets[4] -= self.near
        return np.column_stack([normals, offsets])

    def slopes_of(self, points: np.ndarray) -> tuple[float, float, float, float] | None:
        """The slopes of the smallest pyramid holding the convex polygon ``points`` (world), or None when a
        point is not in front of the camera."""
        view = (points - self.pos) @ self.axes.T
        if np.any(view[:, 2] <= 0):
            return None
        sx, sy = view[:, 0] / view[:, 2], view[:, 1] / view[:, 2]
        return float(sx.min()), float(sx.max()), float(sy.min()), float(sy.max())


def _outside(planes: np.ndarray, center: np.ndarray, radius: float) -> bool:
    """True when the sphere lies wholly on the outer side of one of the frustum's planes."""
    return bool(np.any(planes[:, :3] @ center + planes[:, 3] < -radius))


def _mirrors(mj, scn, camera: _Camera, frustum: np.ndarray) -> tuple[int, list]:
    """How many geoms may reflect, and ``(point, unit normal, planes)`` of those whose reflection can show: the
    plane each mirrors the scene about and the pyramid its mirrored image can be seen through (its reflecting
    rectangle's, the stencil ``mjr_render`` draws the image into; the whole view frustum for an infinite plane or
    one reaching behind the camera). A reflector shows nothing when its rectangle lies wholly outside the view or
    the camera is behind it (``mjr_render`` skips it then)."""
    if not scn.flags[mj.mjtRndFlag.mjRND_REFLECTION] or scn.flags[mj.mjtRndFlag.mjRND_DEPTH]:
        return 0, []
    plane, box = int(mj.mjtGeom.mjGEOM_PLANE), int(mj.mjtGeom.mjGEOM_BOX)
    candidates, mirrors = 0, []
    for i in range(scn.ngeom):
        g = scn.geoms[i]
        if g.type not in (plane, box) or g.reflectance <= 0:
            continue
        candidates += 1
        axes = np.asarray(g.mat, dtype=np.float64).reshape(3, 3).T    # rows: the geom's x, y, z axes
        point = np.asarray(g.pos, dtype=np.float64)
        if g.type == box:
            point = point + float(g.size[2]) * axes[2]
        hx, hy = float(g.size[0]), float(g.size[1])
        seen_through = frustum
        if hx > 0 and hy > 0:
            if float((camera.pos - point) @ axes[2]) < -_MARGIN[1]:
                continue                                  # the camera is behind it
            corners = np.array([point + sx * hx * axes[0] + sy * hy * axes[1]
                                for sx, sy in ((-1, -1), (-1, 1), (1, -1), (1, 1))])
            if np.any(np.all(corners @ frustum[:, :3].T + frustum[:, 3] < -_MARGIN[1], axis=0)):
                continue                                  # the rectangle is out of view
            slopes = camera.slopes_of(corners)
            if slopes is not None:
                seen_through = np.vstack([frustum, camera.planes(slopes)])
        mirrors.append((point, axes[2], seen_through))
    return candidates, mirrors


@dataclasses.dataclass(frozen=True)
class Cut:
    """What one color pass leaves out: ``hidden`` geoms (scene indices), and the whole reflection pass when
    ``reflection_off`` (a reflector is in the scene but none can show in this view)."""

    hidden: tuple[int, ...] = ()
    reflection_off: bool = False


def plan_cut(mj, scn, aspect: float = 1.0) -> Cut:
    """What the next ``mjr_render`` color pass of ``scn`` (after ``mjv_updateScene``) in a viewport of
    width/height ``aspect`` can leave out without changing a pixel (see the module docstring)."""
    if scn.flags[mj.mjtRndFlag.mjRND_SEGMENT]:
        return Cut()
    if scn.flags[mj.mjtRndFlag.mjRND_SHADOW] and any(scn.lights[i].castshadow for i in range(scn.nlight)):
        return Cut()
    camera = _Camera(mj, scn, aspect)
    if not camera.usable:
        return Cut()
    frustum = camera.planes()
    kinds = _bounded_types(mj)
    candidates, mirrors = _mirrors(mj, scn, camera, frustum)
    hidden = []
    for i in range(scn.ngeom):
        g = scn.geoms[i]
        kind = kinds.get(int(g.type))
        if kind is None or g.rgba[3] < OPAQUE_ALPHA or (kind == "box" and g.reflectance > 0):
            continue
        radius = _radius(g, kind)
        center = np.asarray(g.pos, dtype=np.float64)
        if radius <= 0 or not _outside(frustum, center, radius):
            continue
        if all(float((center - p) @ n) < -radius or _outside(seen, center - 2 * float((center - p) @ n) * n, radius)
               for p, n, seen in mirrors):
            hidden.append(i)
    return Cut(tuple(hidden), reflection_off=candidates > 0 and not mirrors)


@contextlib.contextmanager
def culled(mj, scn, aspect: float = 1.0, *, enabled: bool = True):
    """Within the block the scene draws without what :func:`plan_cut` leaves out (nothing when not ``enabled``):
    its hidden geoms marked not drawn, the reflection pass off; yields the :class:`Cut`."""
    cut = plan_cut(mj, scn, aspect) if enabled else Cut()
    types = [scn.geoms[i].type for i in cut.hidden]
    none = int(mj.mjtGeom.mjGEOM_NONE)
    reflection = mj.mjtRndFlag.mjRND_REFLECTION
    flag = scn.flags[reflection]
    for i in cut.hidden:
        scn.geoms[i].type = none
    if cut.reflection_off:
        scn.flags[reflection] = 0
    try:
        yield cut
    finally:
        scn.flags[reflection] = flag
        for i, t in zip(cut.hidden, types, strict=True):
            scn.geoms[i].type = t
