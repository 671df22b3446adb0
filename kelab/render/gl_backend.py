"""The "gl" backend: moderngl (OpenGL 3.3 core) in a glfw window or a headless EGL context.

All shapes of a frame are tessellated with numpy into one vertex buffer with
per-vertex colours and alphas and drawn when the frame ends, one draw call per run of
shapes; text queues in the same painter's order as quads on one atlas texture of
rendered strings, one draw call per run of text. Frames render into an offscreen
framebuffer that is read back or blitted to the window.

Antialiasing (``antialias=True``) is analytic and baked into the geometry: every filled
shape gets a one-pixel fringe strip along its outline whose alpha falls from 1 to 0
(:func:`kelab.render.geometry.feathered_polygons`), blended premultiplied in the same
draw call. It costs a few more vertices instead of a multisampled framebuffer, which
software OpenGL (Mesa llvmpipe) pays for in full on every frame. ``antialias="msaa"``
renders through a 4x multisampled framebuffer instead (no fringes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import moderngl
import numpy as np

from kelab.render.camera import Camera
from kelab.render.canvas import Canvas, Color
from kelab.render.events import InputEvent, glfw_key_names, modifier_names
from kelab.render.geometry import (
    circle_polygons,
    convex_widths,
    fan_triangles,
    feathered_circles,
    feathered_lines,
    feathered_polygons,
    feathered_rings,
    ring_triangles,
    thick_line_quads,
)
from kelab.render.plan import DrawPlan, Primitive
from kelab.render.renderer import Renderer, require_display
from kelab.render.text import TextCache

__all__ = ["GLCanvas", "GLRenderer"]

_SHAPE_VS = """
#version 330
uniform vec2 u_size;
uniform float u_flip;
in vec2 in_pos;
in vec4 in_color;
flat out vec3 v_color;
out float v_alpha;
void main() {
    v_color = in_color.rgb;
    v_alpha = in_color.a;
    float y = (1.0 - in_pos.y / u_size.y * 2.0) * u_flip;
    gl_Position = vec4(in_pos.x / u_size.x * 2.0 - 1.0, y, 0.0, 1.0);
}
"""
# Colours are flat (one per triangle): interpolating them costs llvmpipe ~1 ns per pixel.
_SHAPE_FS = """
#version 330
flat in vec3 v_color;
in float v_alpha;
out vec4 f_color;
void main() { f_color = vec4(v_color * v_alpha, v_alpha); }  // premultiplied
"""
_HARD_VS = """
#version 330
uniform vec2 u_size;
uniform float u_flip;
in vec2 in_pos;
in vec4 in_color;
flat out vec3 v_color;
void main() {
    v_color = in_color.rgb;
    float y = (1.0 - in_pos.y / u_size.y * 2.0) * u_flip;
    gl_Position = vec4(in_pos.x / u_size.x * 2.0 - 1.0, y, 0.0, 1.0);
}
"""
_HARD_FS = """
#version 330
flat in vec3 v_color;
out vec4 f_color;
void main() { f_color = vec4(v_color, 1.0); }
"""
# Text: coverage from the atlas (one channel), colour per vertex, premultiplied.
_TEXT_VS = """
#version 330
uniform vec2 u_size;
uniform float u_flip;
in vec2 in_pos;
in vec2 in_uv;
in vec3 in_color;
out vec2 v_uv;
flat out vec3 v_color;
void main() {
    v_uv = in_uv;
    v_color = in_color;
    float y = (1.0 - in_pos.y / u_size.y * 2.0) * u_flip;
    gl_Position = vec4(in_pos.x / u_size.x * 2.0 - 1.0, y, 0.0, 1.0);
}
"""
_TEXT_FS = """
#version 330
uniform sampler2D u_tex;
in vec2 v_uv;
flat in vec3 v_color;
out vec4 f_color;
void main() {
    float a = texture(u_tex, v_uv).r;
    f_color = vec4(v_color * a, a);
}
"""
#: Corners of a text quad's two triangles: (x, y) as 0/1 of its width and height.
_QUAD = np.array([[0, 0], [1, 0], [1, 1], [0, 0], [1, 1], [0, 1]], dtype=np.float32)
#: Side of the text atlas texture in pixels (one channel: 4 MiB).
ATLAS_SIZE = 2048


class _TextAtlas:
    """Rendered strings' coverage packed on shelves of one texture.

    A frame's text is then one draw call. When the atlas is full it starts over (the
    caller first draws what is queued); a string wider than the atlas is cut at its width.
    """

    def __init__(self, ctx: moderngl.Context, size: int = ATLAS_SIZE) -> None:
        self.size = size
        self.texture = ctx.texture((size, size), 1, dtype="f1")
        self.texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._where: dict[tuple[str, int], tuple[int, int, int, int]] = {}
        self._x = self._y = self._row = 0

    def find(self, key: tuple[str, int]) -> tuple[int, int, int, int] | None:
        """Where a string is: ``(x, y, w, h)`` texels, or None."""
        return self._where.get(key)

    def fits(self, w: int, h: int) -> bool:
        """Whether a ``w x h`` string fits without starting over."""
        w, h = min(w, self.size), min(h, self.size)
        if self._x + w <= self.size:
            return self._y + max(h, self._row) <= self.size
        return self._y + self._row + h <= self.size

    def add(self, key: tuple[str, int], cover: np.ndarray) -> tuple[int, int, int, int]:
        """Upload ``cover`` (``(h, w)`` uint8; the caller checked :meth:`fits`)."""
        cover = cover[: self.size, : self.size]
        h, w = cover.shape
        if self._x + w > self.size:  # next shelf
            self._x, self._y, self._row = 0, self._y + self._row, 0
        x, y = self._x, self._y
        if w and h:
            self.texture.write(np.ascontiguousarray(cover), viewport=(x, y, w, h), alignment=1)
        self._x += w
        self._row = max(self._row, h)
        self._where[key] = (x, y, w, h)
        return x, y, w, h

    def reset(self) -> None:
        """Forget every string (the texels are overwritten as new ones arrive)."""
        self._where.clear()
        self._x = self._y = self._row = 0

    def release(self) -> None:
        """Free the texture."""
        self.texture.release()


class GLCanvas(Canvas):
    """Canvas that batches triangles for moderngl.

    Args:
        camera: The view.
        ctx: The moderngl context.
        bind: ``bind(overwrite=False)``: context manager that makes the context current
            and binds the frame's draw target (around every GL command, so several
            renderers can interleave); ``overwrite`` says the whole target is about to
            be painted over (a clear), so its previous content need not be restored.
        top_row_first: Store the image top row first in memory (offscreen frames, read
            back without a flip) instead of OpenGL's bottom row first (windows).
        fringe: Antialias shape edges with feathered fringe strips (blended); False
            draws hard edges (aliased, or smoothed by a multisampled target).
    """

    def __init__(
        self,
        camera: Camera,
        ctx: moderngl.Context,
        bind: Callable[..., AbstractContextManager[moderngl.Framebuffer]],
        top_row_first: bool = False,
        fringe: bool = True,
    ) -> None:
        super().__init__(camera)
        self._ctx = ctx
        self._bind = bind
        self.fringe = bool(fringe)
        self._pending: list[np.ndarray] = []  # shape vertices of the current run
        self._text_pending: list[np.ndarray] = []  # text vertices of the current run
        self._runs: list[tuple[bool, np.ndarray]] = []  # closed runs: (is_text, vertices)
        self._gradients: dict[tuple[object, ...], np.ndarray] = {}
        # (splitting a frame into many opaque unblended and blended runs was measured
        # slower on llvmpipe: each extra draw call and blend toggle costs more than it
        # saves; only the leading opaque run is drawn apart, see flush)
        vs, fs = (_SHAPE_VS, _SHAPE_FS) if self.fringe else (_HARD_VS, _HARD_FS)
        self._shape_prog = ctx.program(vertex_shader=vs, fragment_shader=fs)
        self._text_prog = ctx.program(vertex_shader=_TEXT_VS, fragment_shader=_TEXT_FS)
        self._vbo = ctx.buffer(reserve=1 << 16, dynamic=True)
        self._vao = ctx.vertex_array(self._shape_prog, [(self._vbo, "2f 4f", "in_pos", "in_color")])
        self._text_vbo = ctx.buffer(reserve=1 << 14, dynamic=True)
        self._text_vao = ctx.vertex_array(
            self._text_prog, [(self._text_vbo, "2f 2f 3f", "in_pos", "in_uv", "in_color")]
        )
        flip = -1.0 if top_row_first else 1.0
        self._shape_prog["u_flip"].value = flip
        self._text_prog["u_flip"].value = flip
        self._texts = TextCache()
        self._atlas = _TextAtlas(ctx)
        self._backdrop_fbo: moderngl.Framebuffer | None = None  # cached backdrop picture
        self._backdrop_key: tuple[object, ...] | None = None
        self.draw_calls = 0
        """Batches drawn so far (for tests and benchmarks): one per run of shapes (one GL
        draw, or two with antialiasing: the leading opaque part, then the rest) and one
        per run of text (one textured draw for all its strings)."""

    # -- batching -----------------------------------------------------------------------------
    def _push(self, tris: np.ndarray, color: Color, alpha: np.ndarray | float = 1.0) -> None:
        v = np.empty((tris.shape[0], 6), dtype=np.float32)
        v[:, :2] = tris
        v[:, 2:5] = np.asarray(color, dtype=np.float32) / 255.0
        v[:, 5] = alpha
        self._pending.append(v)

    def _push_polygons(self, polys: np.ndarray, color: Color, widths: Any = None) -> None:
        if self.fringe:
            tris, alpha = feathered_polygons(polys, widths)
            self._push(tris, color, alpha)
        else:
            self._push(fan_triangles(polys), color)

    def _close_runs(self) -> None:
        """End the current runs: queued text, if any, came before queued shapes."""
        if self._text_pending:
            t = self._text_pending
            self._runs.append((True, t[0] if len(t) == 1 else np.concatenate(t)))
            t.clear()
        if self._pending:
            p = self._pending
            self._runs.append((False, p[0] if len(p) == 1 else np.concatenate(p)))
            p.clear()

    def flush(self) -> None:
        """Draw everything queued so far: one draw call per run of shapes or of text.

        Shapes and text queue in painter's order; consecutive shapes form one run and
        consecutive strings another (an RL frame: backdrop, world and ground ticks, then
        the labels and the status line), written to the GPU in one buffer each.
        """
        self._close_runs()
        runs = self._runs
        if not runs:
            return
        shapes = [d for is_text, d in runs if not is_text]
        texts = [d for is_text, d in runs if is_text]
        with self._bind():
            size = tuple(float(v) for v in self._camera.size)
            if shapes:
                data = shapes[0] if len(shapes) == 1 else np.concatenate(shapes)
                if data.nbytes > self._vbo.size:
                    self._vbo.orphan(max(data.nbytes, 2 * self._vbo.size))
                self._vbo.write(data)
                self._shape_prog["u_size"].value = size
            if texts:
                tdata = texts[0] if len(texts) == 1 else np.concatenate(texts)
                if tdata.nbytes > self._text_vbo.size:
                    self._text_vbo.orphan(max(tdata.nbytes, 2 * self._text_vbo.size))
                self._text_vbo.write(tdata)
                self._text_prog["u_size"].value = size
                self._atlas.texture.use(0)
            first_shape = first_text = 0
            for is_text, d in runs:
                if is_text:
                    self._draw_text_run(first_text, d.shape[0])
                    first_text += d.shape[0]
                else:
                    self._draw_shape_run(d, first_shape)
                    first_shape += d.shape[0]
                self.draw_calls += 1
        runs.clear()

    def _draw_shape_run(self, data: np.ndarray, start: int) -> None:
        if self.fringe:
            # the leading opaque triangles (typically the ground's core, the most
            # pixels of a frame) need no blending: drawn first, without it
            translucent = np.flatnonzero(data[:, 5] != 1.0)
            first = int(translucent[0]) // 3 * 3 if translucent.size else data.shape[0]
            if first:
                self._vao.render(moderngl.TRIANGLES, vertices=first, first=start)
            if first < data.shape[0]:
                ctx = self._ctx
                ctx.enable(moderngl.BLEND)
                ctx.blend_func = moderngl.ONE, moderngl.ONE_MINUS_SRC_ALPHA
                rest = data.shape[0] - first
                self._vao.render(moderngl.TRIANGLES, vertices=rest, first=start + first)
                ctx.disable(moderngl.BLEND)
        else:
            self._vao.render(moderngl.TRIANGLES, vertices=data.shape[0], first=start)

    def _draw_text_run(self, start: int, count: int) -> None:
        ctx = self._ctx
        ctx.enable(moderngl.BLEND)
        ctx.blend_func = moderngl.ONE, moderngl.ONE_MINUS_SRC_ALPHA  # premultiplied
        self._text_vao.render(moderngl.TRIANGLES, vertices=count, first=start)
        ctx.disable(moderngl.BLEND)

    def discard(self) -> None:
        """Drop the shapes and text queued so far without drawing them."""
        self._pending.clear()
        self._text_pending.clear()
        self._runs.clear()

    # -- compiled worlds --------------------------------------------------------------------
    def _plan_style(self) -> Any:
        return ("fringe" if self.fringe else "hard",)

    def _build_plan(self, primitives: list[Primitive]) -> DrawPlan:
        tris: list[np.ndarray] = []
        instance: list[np.ndarray] = []
        colors: list[np.ndarray] = []
        # copies share their primitives' point arrays: tessellate each shape part once
        shapes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for prim in primitives:
            pts = prim.points
            shape = shapes.get(id(pts))
            if shape is None:
                if not prim.fill:  # a one-pixel line is a one-pixel-wide quad
                    pts = thick_line_quads(pts[:1], pts[1:], 1.0)[0]
                if self.fringe:
                    shape = feathered_polygons(pts[None], convex_widths(pts[None]))
                else:
                    t = fan_triangles(pts[None])
                    shape = (t, np.ones(len(t)))
                shapes[id(prim.points)] = shape
            t, alpha = shape
            rgba = np.empty((len(t), 4), dtype=np.float32)
            rgba[:, :3] = np.asarray(prim.color, dtype=np.float32) / 255.0
            rgba[:, 3] = alpha
            tris.append(t)
            instance.append(np.full(len(t), prim.instance, dtype=np.intp))
            colors.append(rgba)
        if not tris:
            return DrawPlan(np.zeros((0, 2)), np.zeros(0, dtype=np.intp))
        return DrawPlan(np.concatenate(tris), np.concatenate(instance), np.concatenate(colors))

    def _draw_plan(self, plan: DrawPlan, xs: np.ndarray, ys: np.ndarray) -> None:
        v = np.empty((xs.shape[0], 6), dtype=np.float32)
        v[:, 0] = xs
        v[:, 1] = ys
        v[:, 2:] = plan.data
        self._pending.append(v)

    # -- hooks --------------------------------------------------------------------------------
    def _clear(self, color: Color) -> None:
        self.discard()  # everything queued would be painted over anyway
        r, g, b = (c / 255.0 for c in color)
        with self._bind(overwrite=True) as target:
            target.clear(r, g, b, 1.0)

    def _fill_polygons(
        self, polys: np.ndarray, color: Color, widths: np.ndarray | None = None
    ) -> None:
        if polys.shape[0]:
            self._push_polygons(polys, color, widths)

    def _vertical_gradient(
        self, rect: tuple[float, float, float, float], top: Color, bottom: Color
    ) -> None:
        self._pending.append(self._gradient_vertices(rect, top, bottom))

    def _gradient_vertices(
        self, rect: tuple[float, float, float, float], top: Color, bottom: Color
    ) -> np.ndarray:
        # colours are flat per triangle, so the gradient is one band per colour step,
        # built once per rectangle and colours and appended to the frame's batch
        key = (rect, top, bottom)
        v = self._gradients.get(key)
        if v is None:
            x0, y0, x1, y1 = rect
            levels = max(abs(int(p) - int(q)) for p, q in zip(top, bottom, strict=True)) + 1
            n = max(1, min(int(round(y1 - y0)), levels))  # one band per colour step
            edges = np.linspace(y0, y1, n + 1)
            t = ((np.arange(n) + 0.5) / n)[:, None]
            rgb = (np.asarray(top) * (1.0 - t) + np.asarray(bottom) * t) / 255.0
            ya, yb = np.repeat(edges[:-1], 6), np.repeat(edges[1:], 6)
            corner = np.tile(np.array([0, 1, 1, 0, 1, 0]), n)  # x: 0 -> x0, 1 -> x1
            lower = np.tile(np.array([0, 0, 1, 0, 1, 1]), n)  # y: 0 -> band top
            v = np.empty((6 * n, 6), dtype=np.float32)
            v[:, 0] = np.where(corner == 1, x1, x0)
            v[:, 1] = np.where(lower == 1, yb, ya)
            v[:, 2:5] = np.repeat(rgb, 6, axis=0)
            v[:, 5] = 1.0
            if len(self._gradients) > 8:
                self._gradients.clear()
            self._gradients[key] = v
        return v

    def _backdrop(self, top: Color, bottom: Color) -> None:
        self.discard()  # everything queued would be painted over anyway
        w, h = self._camera.size
        key = (w, h, top, bottom)
        with self._bind(overwrite=True) as target:
            if target.color_attachments[0].samples <= 1:  # a blit cannot fill an MSAA target
                if self._backdrop_key != key or self._backdrop_fbo is None:
                    self._make_backdrop(key, top, bottom)
                self._ctx.copy_framebuffer(target, self._backdrop_fbo)
                target.use()
                return
        super()._backdrop(top, bottom)

    def _make_backdrop(self, key: tuple[object, ...], top: Color, bottom: Color) -> None:
        """Draw the clear and the upper half's gradient once into a framebuffer of its own."""
        self._release_backdrop()
        ctx = self._ctx
        w, h = int(key[0]), int(key[1])  # type: ignore[call-overload]
        fbo = ctx.framebuffer(color_attachments=[ctx.renderbuffer((w, h), 4)])
        fbo.use()
        fbo.clear(*(c / 255.0 for c in bottom), 1.0)
        v = self._gradient_vertices((0.0, 0.0, float(w), 0.5 * h), top, bottom)
        if v.nbytes > self._vbo.size:
            self._vbo.orphan(max(v.nbytes, 2 * self._vbo.size))
        self._vbo.write(v)
        self._shape_prog["u_size"].value = (float(w), float(h))
        self._vao.render(moderngl.TRIANGLES, vertices=v.shape[0])
        self._backdrop_fbo, self._backdrop_key = fbo, key

    def _release_backdrop(self) -> None:
        if self._backdrop_fbo is not None:
            for att in self._backdrop_fbo.color_attachments:
                att.release()
            self._backdrop_fbo.release()
        self._backdrop_fbo, self._backdrop_key = None, None

    def _fill_lines(self, a: np.ndarray, b: np.ndarray, width: float, color: Color) -> None:
        if a.shape[0]:
            if self.fringe:  # feathered_polygons of the rectangles, without the insets
                tris, alpha = feathered_lines(a, b, width)
                self._push(tris, color, alpha)
            else:
                self._push(fan_triangles(thick_line_quads(a, b, width)), color)

    def _fill_circles(self, centers: np.ndarray, radii: np.ndarray, color: Color) -> None:
        if centers.shape[0]:
            r = np.maximum(radii, 0.5)
            if self.fringe:  # feathered_polygons of the tessellation, from the radii alone
                tris, alpha = feathered_circles(centers, r)
                self._push(tris, color, alpha)
            else:
                self._push_polygons(circle_polygons(centers, r), color, 2.0 * r)

    def _ring(self, centers: np.ndarray, radii: np.ndarray, width: float, color: Color) -> None:
        if centers.shape[0]:
            if self.fringe:
                tris, alpha = feathered_rings(centers, radii, width)
                self._push(tris, color, alpha)
            else:
                self._push(ring_triangles(centers, radii, width), color)

    def _hairlines(self, a: np.ndarray, b: np.ndarray, color: Color) -> None:
        if a.shape[0]:
            self._push_polygons(thick_line_quads(a, b, 1.0), color)

    def _text(self, pos: tuple[int, int], string: str, color: Color, size: int) -> None:
        # queued in painter's order: shapes queued so far end their run and go under it
        if self._pending:
            self._close_runs()
        atlas = self._atlas
        key = (string, size)
        where = atlas.find(key)
        if where is None:
            cover = self._texts.coverage(string, size)
            h, w = cover.shape
            if not atlas.fits(w, h):
                self.flush()  # draw what uses the atlas before it starts over
                atlas.reset()
            with self._bind():
                where = atlas.add(key, cover)
        ax, ay, w, h = where
        x, y = pos
        v = np.empty((6, 7), dtype=np.float32)
        v[:, 0] = x + w * _QUAD[:, 0]
        v[:, 1] = y + h * _QUAD[:, 1]
        v[:, 2] = (ax + w * _QUAD[:, 0]) / atlas.size
        v[:, 3] = (ay + h * _QUAD[:, 1]) / atlas.size
        v[:, 4:] = np.asarray(color, dtype=np.float32) / 255.0
        self._text_pending.append(v)

    def release(self) -> None:
        """Free the GL objects owned by the canvas."""
        self._atlas.release()
        self._release_backdrop()
        for obj in (self._vao, self._text_vao, self._vbo, self._text_vbo):
            obj.release()
        self._shape_prog.release()
        self._text_prog.release()


class GLRenderer(Renderer):
    """Renderer on moderngl: a glfw window (OpenGL 3.3 core) or a headless EGL context.

    Use :func:`kelab.render.create_renderer` rather than this class directly.

    Args:
        size: ``(width, height)`` in pixels.
        title: Window title.
        headless: No window; an EGL standalone context renders to a framebuffer.
        vsync: Swap interval 1 instead of 0 (windows only).
        antialias: True: analytic edge antialiasing (fringe strips, one draw call);
            ``"msaa"``: a 4x multisampled framebuffer instead; False: hard edges.

    A headless renderer keeps its EGL context current from ``begin_frame`` to
    ``end_frame`` (a context switch flushes the GL pipeline) and releases it when the
    frame ends and after reads; code that uses its own moderngl context next to a
    renderer should enter it with ``with ctx:``.
    """

    backend = "gl"
    _glfw_users = 0

    def __init__(
        self,
        size: tuple[int, int],
        title: str,
        headless: bool,
        vsync: bool,
        antialias: bool | str,
    ) -> None:
        super().__init__(size, title, headless, vsync, antialias)
        self._window: Any = None
        self._queue: list[InputEvent] = []
        self.overlay: Callable[[moderngl.Context, moderngl.Framebuffer, bool], None] | None = None
        """Called when a frame ends, after the canvas: ``overlay(ctx, framebuffer,
        top_first)`` draws over the frame (``top_first``: row 0 is the image's top)."""
        if headless:
            try:
                self._ctx = _standalone_context(size)
            except Exception as err:
                raise RuntimeError(
                    f"could not create a headless OpenGL 3.3 context with EGL: {err}; "
                    "install an EGL driver (e.g. Mesa: libegl1 libgl1-mesa-dri) or use "
                    "backend='pygame'"
                ) from err
        else:
            self._ctx = self._open_window(size)
        self._egl_context: int | None = None  # EGL handle, known once made current
        self._holding = False  # keep the context current until the frame ends
        _thread.owner = None  # creating a context made it current behind our back
        msaa = self.antialias == "msaa"
        self._samples = min(4, int(self._ctx.max_samples)) if msaa else 0
        # _fbo holds the last finished frame (read back, blitted to the window). Frames
        # are drawn into _fbo_ms (msaa, resolved into _fbo) or into _fbo_draw, which is
        # swapped with _fbo when a frame ends, so a frame being drawn never shows in
        # reads; a frame that is not cleared first gets the previous one's pixels back
        # (copied lazily, like the pygame backend).
        self._fbo_ms: moderngl.Framebuffer | None = None
        self._fbo: moderngl.Framebuffer | None = None
        self._fbo_draw: moderngl.Framebuffer | None = None
        self._restore = False  # _fbo_draw still has to get _fbo's pixels
        self._drawn = False  # something was drawn into _fbo_draw this frame
        self._read_rgba: np.ndarray | None = None  # read-back buffer, reused
        with self._current():
            self._make_targets(self.size)
            self._canvas = GLCanvas(
                self._camera,
                self._ctx,
                self._bind_target,
                headless,
                fringe=self.antialias is True,
            )

    # -- setup --------------------------------------------------------------------------------
    def _open_window(self, size: tuple[int, int]) -> moderngl.Context:
        import glfw

        require_display("gl")
        _release_egl()  # a headless renderer's context may still be current (EGL)
        _thread.owner = None
        if not glfw.init():
            raise RuntimeError("glfw.init() failed: no usable display for a window")
        GLRenderer._glfw_users += 1
        glfw.default_window_hints()
        glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, 3)
        glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, 3)
        glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
        glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, True)
        glfw.window_hint(glfw.RESIZABLE, True)
        win = glfw.create_window(size[0], size[1], self.title, None, None)
        if not win:
            self._release_glfw()
            raise RuntimeError("glfw could not create an OpenGL 3.3 core window")
        self._window = win
        glfw.make_context_current(win)
        glfw.swap_interval(1 if self.vsync else 0)
        self._key_names = glfw_key_names()
        glfw.set_key_callback(win, self._on_key)
        glfw.set_mouse_button_callback(win, self._on_button)
        glfw.set_cursor_pos_callback(win, self._on_cursor)
        glfw.set_scroll_callback(win, self._on_scroll)
        glfw.set_window_close_callback(win, self._on_close)
        glfw.set_framebuffer_size_callback(win, self._on_fb_size)
        fb = glfw.get_framebuffer_size(win)
        if tuple(fb) != tuple(size) and fb[0] > 0 and fb[1] > 0:
            self._resized((int(fb[0]), int(fb[1])))
        return moderngl.create_context(require=330)

    def _release_targets(self) -> None:
        for fbo in (self._fbo_ms, self._fbo, self._fbo_draw):
            if fbo is not None:
                for att in fbo.color_attachments:
                    att.release()
                fbo.release()
        self._fbo_ms = self._fbo = self._fbo_draw = None

    def _make_targets(self, size: tuple[int, int]) -> None:
        self._release_targets()
        ctx = self._ctx
        self._fbo = ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4)])
        if self._samples > 1:
            rb = ctx.renderbuffer(size, 4, samples=self._samples)
            self._fbo_ms = ctx.framebuffer(color_attachments=[rb])
        else:
            self._fbo_draw = ctx.framebuffer(color_attachments=[ctx.renderbuffer(size, 4)])
        self._restore = self._drawn = False

    @contextmanager
    def _current(self) -> Iterator[None]:
        """Make this renderer's GL context current for the block.

        A headless (EGL) context stays current from ``begin_frame`` to ``end_frame``:
        switching contexts flushes the pipeline, which made software OpenGL rasterise a
        frame's clear and its draw as separate passes. Outside a frame (and when the
        frame ends) it is released again, because other GLX users on the thread (SDL
        windows, glfw) fail while an EGL context is current.
        """
        self._make_current()
        try:
            yield
        finally:
            if not self._holding:
                self._release_current()

    def _release_current(self) -> None:
        if self._window is None and self._egl_context and _egl_current() == self._egl_context:
            _release_egl()
            if _thread.owner is self:
                _thread.owner = None

    def _make_current(self) -> None:
        # Windows always make their context current: other GLX users (SDL) switch
        # contexts without glfw knowing, and a GLX make-current of the current context
        # costs nothing.
        ours = self._egl_context
        if self._window is None and ours is not None and _egl_current() == ours:
            return
        # an EGL context and a GLX (glfw) one must not both be current on a thread
        owner = _thread.owner
        if self._window is not None:
            import glfw

            _release_egl()
            glfw.make_context_current(self._window)
        else:
            if owner is not None and owner._window is not None:
                import glfw

                glfw.make_context_current(None)
            self._ctx.__enter__()  # EGL make-current (released by _release_current)
            self._egl_context = _egl_current()
        _thread.owner = self

    @property
    def canvas(self) -> GLCanvas:
        """The canvas (batches triangles; drawn at end_frame or before text)."""
        return self._canvas

    # -- frame --------------------------------------------------------------------------------
    def _draw_target(self) -> moderngl.Framebuffer:
        return self._fbo_ms if self._fbo_ms is not None else self._fbo_draw  # type: ignore[return-value]

    @contextmanager
    def _bind_target(self, overwrite: bool = False) -> Iterator[moderngl.Framebuffer]:
        with self._current():
            target = self._draw_target()
            if self._restore:
                self._restore = False
                if not overwrite:
                    self._ctx.copy_framebuffer(target, self._fbo)
            self._drawn = True
            target.use()
            yield target

    def _begin(self) -> None:
        self._holding = True
        with self._current():
            self._draw_target().viewport = (0, 0) + self.size
        self._canvas.discard()

    def _end(self) -> None:
        self._canvas.flush()
        if self.overlay is not None:  # e.g. the App's settings panel, over the frame
            with self._bind_target() as target:
                self.overlay(self._ctx, target, self._window is None)
        self._holding = False
        with self._current():
            if self._fbo_ms is not None:
                self._ctx.copy_framebuffer(self._fbo, self._fbo_ms)
            elif self._drawn:  # else nothing changed: the finished frame stays
                self._fbo, self._fbo_draw = self._fbo_draw, self._fbo
                self._restore = True
            self._drawn = False
            if self._window is not None:
                import glfw

                self._ctx.copy_framebuffer(self._ctx.screen, self._fbo)
                glfw.swap_buffers(self._window)
            else:
                self._ctx.finish()

    def _read_top_first(self) -> np.ndarray:
        # Reading RGBA is a plain copy, while an RGB glReadPixels converts pixel by pixel
        # (slow on llvmpipe); the RGBX -> RGB packing is one numpy pass (rgbx_to_rgb).
        w, h = self._fbo.size  # type: ignore[union-attr]
        if self._read_rgba is None or self._read_rgba.shape[:2] != (h, w):
            self._read_rgba = np.empty((h, w, 4), dtype=np.uint8)
        with self._current():
            self._fbo.read_into(self._read_rgba, components=4, alignment=1)  # type: ignore[union-attr]
        if self._window is None:
            return rgbx_to_rgb(self._read_rgba)  # offscreen frames are drawn top row first
        return rgbx_to_rgb(self._read_rgba[::-1])

    # -- events -------------------------------------------------------------------------------
    def _poll(self) -> list[InputEvent]:
        import glfw

        glfw.poll_events()
        out, self._queue = self._queue, []
        return out

    def _cursor_px(self) -> tuple[int, int]:
        import glfw

        x, y = glfw.get_cursor_pos(self._window)
        return self._scale_pos(x, y)

    def _scale_pos(self, x: float, y: float) -> tuple[int, int]:
        import glfw

        ww, wh = glfw.get_window_size(self._window)
        fw, fh = self.size
        sx = fw / ww if ww > 0 else 1.0
        sy = fh / wh if wh > 0 else 1.0
        return (int(x * sx), int(y * sy))

    def _on_key(self, win: Any, key: int, scancode: int, action: int, mods: int) -> None:
        import glfw

        if action == glfw.REPEAT:
            kind = "key_down"
        else:
            kind = "key_down" if action == glfw.PRESS else "key_up"
        name = self._key_names.get(key)
        if name is None:
            name = (glfw.get_key_name(key, scancode) or f"unknown {key}").lower()
        self._queue.append(InputEvent(kind, key=name, mods=_glfw_mods(mods)))

    def _on_button(self, win: Any, button: int, action: int, mods: int) -> None:
        import glfw

        kind = "mouse_down" if action == glfw.PRESS else "mouse_up"
        number = {0: 1, 1: 3, 2: 2}.get(button, button + 3)
        self._queue.append(
            InputEvent(kind, button=number, pos=self._cursor_px(), mods=_glfw_mods(mods))
        )

    def _on_cursor(self, win: Any, x: float, y: float) -> None:
        self._queue.append(InputEvent("mouse_move", pos=self._scale_pos(x, y)))

    def _on_scroll(self, win: Any, dx: float, dy: float) -> None:
        self._queue.append(
            InputEvent("mouse_wheel", pos=self._cursor_px(), wheel=(float(dx), float(dy)))
        )

    def _on_close(self, win: Any) -> None:
        self._queue.append(InputEvent("quit"))

    def _on_fb_size(self, win: Any, w: int, h: int) -> None:
        if w <= 0 or h <= 0 or (w, h) == self.size:
            return  # minimised, or no change
        self._resized((int(w), int(h)))
        with self._current():
            self._make_targets(self.size)
        self._queue.append(InputEvent("resize", size=(int(w), int(h))))

    # -- teardown -----------------------------------------------------------------------------
    def _close(self) -> None:
        self._holding = True
        with self._current():
            self._canvas.release()
            self._release_targets()
            self._ctx.release()
            self._holding = False
        if _thread.owner is self:
            _thread.owner = None
        if self._window is not None:
            import glfw

            glfw.destroy_window(self._window)
            self._window = None
            self._release_glfw()

    @staticmethod
    def _release_glfw() -> None:
        import glfw

        GLRenderer._glfw_users -= 1
        if GLRenderer._glfw_users == 0:
            glfw.terminate()


#: Frames up to this many pixels rasterize faster in the calling thread on llvmpipe.
SMALL_FRAME_PIXELS = 1280 * 720


def _standalone_context(size: tuple[int, int]) -> moderngl.Context:
    """A headless EGL context; on Mesa's llvmpipe, small frames rasterize in this thread.

    llvmpipe (the CPU rasterizer) hands every draw and clear to its worker threads; for
    frames up to :data:`SMALL_FRAME_PIXELS` the hand-off costs more than the parallel
    work saves (measured on 2 cores, 600x400 cartpole frames with read-back: 0.52 ->
    0.48 ms with antialiasing, 0.43 -> 0.33 ms without; 1280x720 1.19 -> 1.12 ms; equal
    at 1920x1080). So ``LP_NUM_THREADS=0`` is set while the context (and so the
    llvmpipe screen, which reads it once) is created, unless the user set it; other
    drivers ignore it.
    """
    if "LP_NUM_THREADS" in os.environ or size[0] * size[1] > SMALL_FRAME_PIXELS:
        return moderngl.create_standalone_context(backend="egl", require=330)
    os.environ["LP_NUM_THREADS"] = "0"
    try:
        return moderngl.create_standalone_context(backend="egl", require=330)
    finally:
        del os.environ["LP_NUM_THREADS"]


def rgbx_to_rgb(rgbx: np.ndarray) -> np.ndarray:
    """Pack an ``(H, W, 4)`` uint8 image into a new ``(H, W, 3)`` one, dropping channel 3.

    Each pixel is copied as one 32-bit word into a byte buffer with a 3-byte stride, so
    the next pixel overwrites the dropped byte: one pass, about 3x faster than
    ``rgbx[..., :3].copy()`` and any byte order.

    Args:
        rgbx: ``(H, W, 4)`` uint8 image; rows may be strided (e.g. ``img[::-1]``).

    Returns:
        A new C-contiguous ``(H, W, 3)`` uint8 array.
    """
    h, w = rgbx.shape[:2]
    words = rgbx.view(np.uint32)[..., 0]
    buf = np.empty(3 * h * w + 1, dtype=np.uint8)  # one spare byte for the last word
    np.ndarray((h, w), dtype=np.uint32, buffer=buf, strides=(3 * w, 3))[...] = words
    return buf[: 3 * h * w].reshape(h, w, 3)


class _ThreadState(threading.local):
    owner: GLRenderer | None = None  # the renderer whose context this thread made current


_thread = _ThreadState()
_egl_lib: Any = None


def _egl() -> Any:
    """The EGL library through ctypes (False when it cannot be loaded)."""
    global _egl_lib
    if _egl_lib is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("EGL") or "libEGL.so.1")
            vp = ctypes.c_void_p
            lib.eglGetCurrentContext.restype = vp
            lib.eglGetCurrentContext.argtypes = []
            lib.eglGetCurrentDisplay.restype = vp
            lib.eglGetCurrentDisplay.argtypes = []
            lib.eglMakeCurrent.restype = ctypes.c_uint
            lib.eglMakeCurrent.argtypes = [vp, vp, vp, vp]
            _egl_lib = lib
        except (OSError, AttributeError):
            _egl_lib = False
    return _egl_lib


def _egl_current() -> int | None:
    """The calling thread's current EGL context (None when none or EGL is missing)."""
    lib = _egl()
    return lib.eglGetCurrentContext() if lib else None


def _release_egl() -> None:
    """Make no EGL context current on the calling thread (before a GLX make-current)."""
    lib = _egl()
    if lib and lib.eglGetCurrentContext():
        lib.eglMakeCurrent(lib.eglGetCurrentDisplay(), None, None, None)


def _glfw_mods(mods: int) -> frozenset[str]:
    import glfw

    table = (
        (glfw.MOD_SHIFT, "shift"),
        (glfw.MOD_CONTROL, "ctrl"),
        (glfw.MOD_ALT, "alt"),
        (glfw.MOD_SUPER, "meta"),
    )
    return modifier_names(mods, table)
