"""Rendering off the control path: one thread with its own GL context renders copies of the simulation state.

The LIBERO env is built without robosuite's offscreen renderer; every image the sim produces comes from a
:class:`Renderer`. It owns one OpenGL context (EGL by default, ``MUJOCO_GL``), created and used only in its own
thread, and renders a :class:`StateCopy` (the few arrays that determine the scene: ``qpos``, ``mocap``, ...),
never the live ``MjData``, so the control thread steps on while a frame renders. MuJoCo releases the GIL in
``mjr_render`` / ``mjr_readPixels``, which is most of a render.

Two kinds of work, in this order of priority:

- :meth:`Renderer.render`: a synchronous request (captures and segmentation asked for by a client). The caller
  blocks until its images are there; nothing else it asked for is dropped.
- :meth:`Renderer.stream`: frames of the camera streams (recording, the episode video, rviz). They queue behind the
  synchronous requests in a bounded backlog. When it is full, by default the oldest pending frame is dropped
  (``dropped`` counts them), so a stream never delays a control step and what is rendered is the most recent;
  with ``wait_when_full`` (a lockstep driver, whose sim time waits for its client anyway) the caller waits for
  room instead, so every frame asked for is rendered and the set of frames does not depend on the machine's load.

Each camera is drawn at most once per scene and resolution: the views of the last :data:`SCENES_KEPT` scenes are
kept (:meth:`StateCopy.scene_key`: the positions the picture depends on), and any request, synchronous or stream,
for a view they hold is served from them (``reused`` counts such views). So a capture and a stream frame of the
same control step at the same resolution cost one render pass, and a scene that did not move is not drawn again.
The pixels are the same either way: a color+depth pass always reads both back (depth costs one read at the
stream size), and a view is the same arrays whoever asked first; they are read-only, shared by every consumer.

The thread runs at a lower CPU priority (``nice``; the rasteriser threads the GL driver starts from it inherit
it), so on a small machine the control loop is served first and frames fill the idle time.

Pixels equal robosuite's own offscreen renderer for the same state: the same scene (``maxgeom`` 1000, all
categories, robosuite's visual/collision geom groups), the same MuJoCo render context defaults and read-back;
color and depth come from one render pass, segmentation from a second pass in MuJoCo's id-color mode. A color pass
leaves out the geoms its camera cannot see and, when no reflector is in view, the reflection pass
(:mod:`pyrua_ros.sim.view_cull`; ``skipped`` and ``reflections_skipped`` count them), which changes no pixel and
saves the vertex work a software renderer would spend on them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Iterable

import numpy as np

from pyrua_ros import cputime
from pyrua_ros.sim import cameras, view_cull

KINDS = ("color", "depth", "segmentation")
SCENE_MAX_GEOM = 1000          # robosuite's scene size
DEFAULT_NICE = 10
SCENES_KEPT = 3                # scenes whose rendered views are kept for later requests of the same scene
_FIELD = {"color": "color", "depth": "depth", "segmentation": "geom"}   # kind -> View field


@dataclasses.dataclass(frozen=True)
class StateCopy:
    """What the rendered scene depends on, copied out of an ``MjData`` (a few kB; microseconds)."""

    time: float
    qpos: np.ndarray
    qvel: np.ndarray
    act: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray

    @classmethod
    def of(cls, data) -> StateCopy:
        return cls(float(data.time), data.qpos.copy(), data.qvel.copy(), data.act.copy(), data.mocap_pos.copy(),
                   data.mocap_quat.copy())

    def same_scene(self, other: StateCopy) -> bool:
        """True when both copies draw the same picture (same positions; velocities do not show)."""
        return self.scene_key == other.scene_key

    @functools.cached_property
    def scene_key(self) -> bytes:
        """The exact bytes of what the picture depends on (``qpos``, ``mocap_pos``, ``mocap_quat``): equal keys
        draw identical pixels with the same model."""
        return b"".join(np.ascontiguousarray(a, dtype=np.float64).tobytes()
                        for a in (self.qpos, self.mocap_pos, self.mocap_quat))

    def apply(self, mujoco, model, data) -> None:
        """Write the copy into ``data`` and compute what rendering reads (poses of bodies, geoms, cameras, lights)."""
        data.time = self.time
        data.qpos[:], data.qvel[:], data.act[:] = self.qpos, self.qvel, self.act
        data.mocap_pos[:], data.mocap_quat[:] = self.mocap_pos, self.mocap_quat
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_camlight(model, data)
        mujoco.mj_tendon(model, data)
        if model.nflex:
            mujoco.mj_flex(model, data)


@dataclasses.dataclass(frozen=True)
class RenderSettings:
    """How the scene is drawn: which geom groups are visible (robosuite shows visual meshes, not collision ones);
    ``skip_unseen``: a color+depth pass leaves out the geoms the camera cannot see, and the reflection pass when
    no reflector is in view (:mod:`.view_cull`: the same pixels, less vertex work; off only to compare)."""

    visual_geoms: bool = True
    collision_geoms: bool = False
    skip_unseen: bool = True


@dataclasses.dataclass(frozen=True)
class View:
    """One rendered camera at one state. ``color`` (H, W, 3) uint8 and ``depth`` (H, W) float32 metres along the
    optical axis (0 = nothing hit) are the upright view; ``geom`` (H, W) int32 is MuJoCo geom id + 1 per pixel
    (0 = no geom); each is None unless asked for. ``K`` 3x3 intrinsics, ``T_world_optical`` 4x4 at that state."""

    camera_id: int
    resolution: int
    time: float
    K: np.ndarray
    T_world_optical: np.ndarray
    color: np.ndarray | None = None
    depth: np.ndarray | None = None
    geom: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class ViewRequest:
    """Render MuJoCo camera ``camera_id`` at ``resolution`` px square; ``kinds`` a subset of :data:`KINDS`."""

    camera_id: int
    resolution: int
    kinds: frozenset[str]

    def __post_init__(self):
        unknown = set(self.kinds) - set(KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {sorted(self.kinds)}")


def _held(view: View | None) -> set[str]:
    """The kinds a kept view holds."""
    return set() if view is None else {k for k in KINDS if getattr(view, _FIELD[k]) is not None}


def _as_asked(view: View, request: ViewRequest, time: float) -> View:
    """``view`` with only the kinds ``request`` asked for, stamped ``time`` (the asking state's)."""
    return dataclasses.replace(view, time=time, **{_FIELD[k]: None for k in KINDS if k not in request.kinds})


class _Job:
    def __init__(self, state: StateCopy, requests: tuple[ViewRequest, ...], deliver=None, generation: int = 0):
        self.state, self.requests, self.deliver = state, requests, deliver
        self.generation = generation   # the renderer's stream generation when queued (a clear ends it)
        self.done = threading.Event()
        self.views: list[View] | None = None
        self.error: BaseException | None = None


def _job_label(job: _Job) -> str:
    """``render <stream|request> <camera id>:<px>:<kinds>,...``: a job's CPU bucket (benchmarks/episode_cpu.py)."""
    kind = "stream" if job.deliver is not None else "request"
    return f"render {kind} " + ",".join(f"{r.camera_id}:{r.resolution}:{'+'.join(sorted(r.kinds))}"
                                          for r in job.requests)


def _gl_context_class():
    """The GLContext class of the backend ``MUJOCO_GL`` names (egl by default), imported explicitly."""
    backend = os.environ.setdefault("MUJOCO_GL", "egl").lower()
    if backend == "egl":
        from mujoco.egl import GLContext
    elif backend == "osmesa":
        from mujoco.osmesa import GLContext
    elif backend == "glfw":
        from mujoco.glfw import GLContext
    else:
        raise ValueError(f"MUJOCO_GL={backend!r} is not a MuJoCo GL backend; valid: egl, osmesa, glfw")
    return GLContext


class Renderer:
    """A render thread with its own GL context for one ``mujoco.MjModel``.

    ``max_resolution`` [px] sizes the offscreen buffer up front (a larger request grows it); ``stream_backlog``
    bounds the pending stream frames; ``wait_when_full``: :meth:`stream` waits for room in a full backlog instead
    of dropping its oldest frame; ``nice`` is added to the thread's CPU niceness (0 leaves it).
    The model is shared read-only with the control thread. Call :meth:`close` to free the context.
    """

    def __init__(self, model, settings: RenderSettings = RenderSettings(), *, max_resolution: int = 1024,
                 stream_backlog: int = 8, wait_when_full: bool = False, nice: int = DEFAULT_NICE,
                 name: str = "sim-render"):
        import mujoco

        if stream_backlog < 1:
            raise ValueError(f"stream_backlog must be >= 1, got {stream_backlog}")
        self._mujoco = mujoco
        self._model = model
        extent = float(model.stat.extent)
        # [m] the clip planes of every camera: depth is measured between them (RPent's depth_near / depth_far)
        self.depth_range = (float(model.vis.map.znear) * extent, float(model.vis.map.zfar) * extent)
        self._settings = settings
        self._size = int(max_resolution)
        self._nice = int(nice)
        self._cond = threading.Condition()
        self._urgent: collections.deque[_Job] = collections.deque()
        self._stream: collections.deque[_Job] = collections.deque(maxlen=int(stream_backlog))
        self._wait_when_full = bool(wait_when_full)
        # scene key -> {(camera_id, resolution): View}, the newest scene last (see the module docstring)
        self._kept: collections.OrderedDict[bytes, dict[tuple[int, int], View]] = collections.OrderedDict()
        self._kept_lock = threading.Lock()
        self._busy = False
        self._generation = 0     # bumped by clear_stream(): a frame of an earlier generation is never delivered
        self._closed = False
        self._start_error: BaseException | None = None
        self.rendered = 0        # stream frames rendered (or served from kept views) and delivered
        self.dropped = 0         # stream frames dropped (backlog full, cleared by a reset, or closed)
        self.passes = 0          # render passes drawn (a color+depth pass or a segmentation pass of one view)
        self.reused = 0          # views served from the kept views of their scene, without a pass
        self.skipped = 0         # geoms left out of color+depth passes because their camera cannot see them
        self.reflections_skipped = 0   # color+depth passes drawn without their reflection pass (none could show)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ requests (any thread)
    def render(self, state: StateCopy, requests: Iterable[ViewRequest], timeout: float | None = None) -> list[View]:
        """Render ``requests`` at ``state`` now, ahead of any stream frame; block until done (TimeoutError after
        ``timeout`` s). Errors of the render thread are raised here. Views kept for this scene are returned at once."""
        requests = tuple(requests)
        kept = self._kept_views(state, requests)
        if kept is not None:
            return kept
        job = _Job(state, requests)
        with self._cond:
            self._check_open()
            self._urgent.append(job)
            self._cond.notify_all()
        if not job.done.wait(timeout):
            raise TimeoutError(f"render did not finish within {timeout} s")
        if job.error is not None:
            raise RuntimeError(f"render failed: {job.error}") from job.error
        return job.views

    def stream(self, state: StateCopy, requests: Iterable[ViewRequest],
               deliver: Callable[[list[View]], None]) -> None:
        """Queue a stream frame; ``deliver(views)`` is called from the render thread when it is rendered. A full
        backlog drops its oldest pending frame, or, with ``wait_when_full``, this call waits until there is room."""
        with self._cond:
            self._check_open()
            if self._wait_when_full:
                self._cond.wait_for(lambda: self._closed or len(self._stream) < self._stream.maxlen)
                self._check_open()
            job = _Job(state, tuple(requests), deliver, self._generation)
            if len(self._stream) == self._stream.maxlen:
                self.dropped += 1
            self._stream.append(job)
            self._cond.notify_all()

    def clear_stream(self) -> None:
        """Drop every pending stream frame and wait for the frame being rendered (e.g. before a reset); that one is
        not delivered either, so no frame of the state before the clear is published after it. The kept views go
        too: a reset may edit the model they were drawn with."""
        with self._cond:
            self._generation += 1
            self.dropped += len(self._stream)
            self._stream.clear()
            self._cond.notify_all()
            while self._busy:
                self._cond.wait()
        with self._kept_lock:
            self._kept.clear()

    @property
    def pending(self) -> int:
        """Stream frames waiting to be rendered."""
        with self._cond:
            return len(self._stream)

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is queued or rendering (True), or ``timeout`` s passed (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: not (self._busy or self._urgent or self._stream), timeout)

    def close(self) -> None:
        """Stop the thread (pending stream frames are dropped) and free the GL context. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self.dropped += len(self._stream)
            self._stream.clear()
            self._cond.notify_all()
        self._thread.join(timeout=30.0)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the renderer is closed")
        if self._start_error is not None:
            raise RuntimeError(f"the renderer could not start: {self._start_error}")

    # ------------------------------------------------------------------ render thread
    def _run(self) -> None:
        if self._nice:
            with contextlib.suppress(OSError):   # before the GL context, so its rasteriser threads inherit it
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                               os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) + self._nice)
        try:
            gl = self._open_context()
        except BaseException as exc:  # reported to every request
            self._start_error = exc
            self._fail_all(exc)
            return
        try:
            while True:
                with self._cond:
                    while not (self._urgent or self._stream or self._closed):
                        self._cond.wait()
                    if self._closed and not self._urgent:
                        break
                    job = self._urgent.popleft() if self._urgent else self._stream.popleft()
                    self._busy = True
                    self._cond.notify_all()   # room in the backlog for a waiting stream()
                try:
                    with cputime.render_section(_job_label(job)):
                        job.views = self._render_job(job)
                except BaseException as exc:
                    job.error = exc
                job.done.set()
                try:
                    # Delivered while still busy, so clear_stream() (which waits for busy) never returns with a
                    # frame of the cleared generation on its way out.
                    if job.deliver is not None and job.error is None and job.generation == self._generation:
                        self.rendered += 1
                        with contextlib.suppress(Exception), cputime.section("stream frame delivery (publish)"):
                            job.deliver(job.views)   # a failing consumer (suppressed) must not stop the renderer
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            self._fail_all(RuntimeError("the renderer was closed"))
            self._free(gl)

    def _fail_all(self, exc: BaseException) -> None:
        with self._cond:
            jobs = list(self._urgent)
            self._urgent.clear()
        for job in jobs:
            job.error = exc
            job.done.set()

    def _open_context(self):
        mj, m = self._mujoco, self._model
        gl = _gl_context_class()(self._size, self._size)
        gl.make_current()
        m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), self._size)
        m.vis.global_.offheight = max(int(m.vis.global_.offheight), self._size)
        self._con = mj.MjrContext(m, mj.mjtFontScale.mjFONTSCALE_150)
        mj.mjr_setBuffer(mj.mjtFramebuffer.mjFB_OFFSCREEN, self._con)
        self._scene = mj.MjvScene(m, maxgeom=SCENE_MAX_GEOM)
        self._option = mj.MjvOption()
        self._option.geomgroup[0] = int(self._settings.collision_geoms)
        self._option.geomgroup[1] = int(self._settings.visual_geoms)
        self._perturb = mj.MjvPerturb()
        self._camera = mj.MjvCamera()
        self._camera.type = mj.mjtCamera.mjCAMERA_FIXED
        self._data = mj.MjData(m)
        self._near, self._far = self.depth_range
        return gl

    def _free(self, gl) -> None:
        with contextlib.suppress(Exception):
            self._con.free()
        with contextlib.suppress(Exception):
            gl.free()

    # ------------------------------------------------------------------ kept views (any thread)
    def _kept_view(self, key: bytes, camera_id: int, resolution: int) -> View | None:
        with self._kept_lock:
            views = self._kept.get(key)
            return None if views is None else views.get((camera_id, resolution))

    def _keep(self, key: bytes, view: View) -> None:
        with self._kept_lock:
            views = self._kept.setdefault(key, {})
            self._kept.move_to_end(key)
            views[(view.camera_id, view.resolution)] = view
            while len(self._kept) > SCENES_KEPT:
                self._kept.popitem(last=False)

    def _kept_views(self, state: StateCopy, requests: tuple[ViewRequest, ...]) -> list[View] | None:
        """Every view of ``requests`` from the kept views of ``state``'s scene, or None when one needs a pass."""
        views = []
        for req in requests:
            view = self._kept_view(state.scene_key, req.camera_id, int(req.resolution))
            if not set(req.kinds) <= _held(view):
                return None
            views.append(_as_asked(view, req, state.time))
        with self._kept_lock:
            self.reused += len(views)
        return views

    # ------------------------------------------------------------------ drawing (render thread)
    def _render_job(self, job: _Job) -> list[View]:
        mj, m, d = self._mujoco, self._model, self._data
        key, applied = job.state.scene_key, False
        views = []
        for req in job.requests:
            res = int(req.resolution)
            kept = self._kept_view(key, req.camera_id, res)
            missing = set(req.kinds) - _held(kept)
            if not missing:
                with self._kept_lock:
                    self.reused += 1
                views.append(_as_asked(kept, req, job.state.time))
                continue
            if not applied:
                job.state.apply(mj, m, d)
                applied = True
            if res > self._con.offWidth or res > self._con.offHeight:
                mj.mjr_resizeOffscreen(max(res, self._con.offWidth), max(res, self._con.offHeight), self._con)
            viewport = mj.MjrRect(0, 0, res, res)
            self._camera.fixedcamid = req.camera_id
            scn = self._scene
            mj.mjv_updateScene(m, d, self._option, self._perturb, self._camera, mj.mjtCatBit.mjCAT_ALL, scn)
            drawn = {}
            if missing & {"color", "depth"}:   # one pass gives both: read both back, for whoever asks next
                rgb = np.empty((res, res, 3), dtype=np.uint8)
                zbuf = np.empty((res, res), dtype=np.float32)
                with view_cull.culled(mj, scn, enabled=self._settings.skip_unseen) as cut:
                    mj.mjr_render(viewport, scn, self._con)
                self.skipped += len(cut.hidden)
                self.reflections_skipped += int(cut.reflection_off)
                mj.mjr_readPixels(rgb, zbuf, viewport, self._con)
                drawn["color"] = _frozen(cameras.upright(rgb))
                drawn["depth"] = _frozen(cameras.upright(cameras.linear_depth(zbuf, self._near, self._far)))
                self.passes += 1
            if "segmentation" in missing:
                drawn["geom"] = _frozen(cameras.upright(self._segment(viewport)))
                self.passes += 1
            view = (dataclasses.replace(kept, **drawn) if kept is not None else
                    View(req.camera_id, res, job.state.time,
                         _frozen(cameras.intrinsics(float(m.cam_fovy[req.camera_id]), res, res)),
                         _frozen(cameras.optical_pose(d.cam_xpos[req.camera_id], d.cam_xmat[req.camera_id])),
                         drawn.get("color"), drawn.get("depth"), drawn.get("geom")))
            self._keep(key, view)
            views.append(_as_asked(view, req, job.state.time))
        return views

    def _segment(self, viewport) -> np.ndarray:
        """MuJoCo geom id + 1 per pixel (bottom-up rows), from one pass in id-color mode (0 = no geom)."""
        mj, scn = self._mujoco, self._scene
        flags = (mj.mjtRndFlag.mjRND_SEGMENT, mj.mjtRndFlag.mjRND_IDCOLOR)
        for f in flags:
            scn.flags[f] = 1
        try:
            rgb = np.empty((viewport.height, viewport.width, 3), dtype=np.uint8)
            mj.mjr_render(viewport, scn, self._con)
            mj.mjr_readPixels(rgb, None, viewport, self._con)
        finally:
            for f in flags:
                scn.flags[f] = 0
        # id-color mode paints scene geom i with the 24-bit colour segid + 1 (0 = background)
        wide = rgb.astype(np.int64)
        packed = wide[..., 0] | (wide[..., 1] << 8) | (wide[..., 2] << 16)
        n = scn.ngeom
        lut = np.zeros(n + 1, dtype=np.int32)        # segid + 1 -> geom id + 1
        for i in range(n):
            g = scn.geoms[i]
            if g.segid >= 0 and g.objtype == mj.mjtObj.mjOBJ_GEOM and g.segid + 1 <= n:
                lut[g.segid + 1] = g.objid + 1
        packed[(packed < 0) | (packed > n)] = 0
        return lut[packed]


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only: a kept view's arrays are shared by every consumer of that view."""
    array.flags.writeable = False
    return array
