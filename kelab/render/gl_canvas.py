"""GLCanvas: the "gl" backend's canvas, batching a frame's shapes and text for moderngl.

All shapes of a frame are tessellated with numpy into one vertex buffer with
per-vertex colours and alphas and drawn when the frame ends, one draw call per run of
shapes; text queues in the same painter's order as quads on one atlas texture of
rendered strings, one draw call per run of text.

Antialiasing (``antialias=True``) is analytic and baked into the geometry: every filled
shape gets a one-pixel fringe strip along its outline whose alpha falls from 1 to 0
(:func:`kelab.render.geometry.feathered_polygons`), blended premultiplied in the same
draw call. It costs a few more vertices instead of a multisampled framebuffer, which
software OpenGL (Mesa llvmpipe) pays for in full on every frame. ``antialias="msaa"``
renders through a 4x multisampled framebuffer instead (no fringes).

The window, the contexts and the frame's framebuffers are `kelab.render.gl_backend`'s
`GLRenderer`, which hands the canvas its context and a ``bind`` callback.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager

import moderngl
import numpy as np

from kelab.render.camera import Camera
from kelab.render.canvas import Canvas, Color
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
from kelab.render.text import TextCache

__all__ = ["ATLAS_SIZE", "GLCanvas", "TextAtlas"]

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


class TextAtlas:
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
        self._atlas = TextAtlas(ctx)
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

    def _push_polygons(
        self, polys: np.ndarray, color: Color, widths: np.ndarray | None = None
    ) -> None:
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
    def plan_style(self) -> Hashable:
        """The OpenGL backend's :meth:`Canvas.plan_style`."""
        return ("fringe" if self.fringe else "hard",)

    def build_plan(self, primitives: list[Primitive]) -> DrawPlan:
        """The OpenGL backend's :meth:`Canvas.build_plan`."""
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

    def draw_plan(self, plan: DrawPlan, xs: np.ndarray, ys: np.ndarray) -> None:
        """The OpenGL backend's :meth:`Canvas.draw_plan`."""
        v = np.empty((xs.shape[0], 6), dtype=np.float32)
        v[:, 0] = xs
        v[:, 1] = ys
        v[:, 2:] = plan.data
        self._pending.append(v)

    # -- hooks --------------------------------------------------------------------------------
    def paint_clear(self, color: Color) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_clear`."""
        self.discard()  # everything queued would be painted over anyway
        r, g, b = (c / 255.0 for c in color)
        with self._bind(overwrite=True) as target:
            target.clear(r, g, b, 1.0)

    def paint_polygons(
        self, polys: np.ndarray, color: Color, widths: np.ndarray | None = None
    ) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_polygons`."""
        if polys.shape[0]:
            self._push_polygons(polys, color, widths)

    def paint_vertical_gradient(
        self, rect: tuple[float, float, float, float], top: Color, bottom: Color
    ) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_vertical_gradient`."""
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

    def paint_backdrop(self, top: Color, bottom: Color) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_backdrop`."""
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
        super().paint_backdrop(top, bottom)

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

    def paint_lines(self, a: np.ndarray, b: np.ndarray, width: float, color: Color) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_lines`."""
        if a.shape[0]:
            if self.fringe:  # feathered_polygons of the rectangles, without the insets
                tris, alpha = feathered_lines(a, b, width)
                self._push(tris, color, alpha)
            else:
                self._push(fan_triangles(thick_line_quads(a, b, width)), color)

    def paint_circles(self, centers: np.ndarray, radii: np.ndarray, color: Color) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_circles`."""
        if centers.shape[0]:
            r = np.maximum(radii, 0.5)
            if self.fringe:  # feathered_polygons of the tessellation, from the radii alone
                tris, alpha = feathered_circles(centers, r)
                self._push(tris, color, alpha)
            else:
                self._push_polygons(circle_polygons(centers, r), color, 2.0 * r)

    def paint_rings(
        self, centers: np.ndarray, radii: np.ndarray, width: float, color: Color
    ) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_rings`."""
        if centers.shape[0]:
            if self.fringe:
                tris, alpha = feathered_rings(centers, radii, width)
                self._push(tris, color, alpha)
            else:
                self._push(ring_triangles(centers, radii, width), color)

    def paint_hairlines(self, a: np.ndarray, b: np.ndarray, color: Color) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_hairlines`."""
        if a.shape[0]:
            self._push_polygons(thick_line_quads(a, b, 1.0), color)

    def paint_text(self, pos: tuple[int, int], string: str, color: Color, size: int) -> None:
        """The OpenGL backend's :meth:`Canvas.paint_text`."""
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
