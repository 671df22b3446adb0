"""Draws Dear ImGui's draw data with moderngl (OpenGL 3.3 core), into any framebuffer.

One renderer serves both backends: the "gl" backend hands it the framebuffer its frame is
drawn into (same context, no copy); the "pygame" backend gets an offscreen EGL context
whose pixels are composited onto the pygame surface (`OffscreenImGui`). The vertex and
index data of every draw list go up in one buffer write each per frame; a draw call per
command (ImGui merges commands that share a texture and clip rectangle).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import moderngl
import numpy as np

__all__ = ["ImGuiGLRenderer", "OffscreenImGui"]

_VS = """
#version 330
uniform vec2 u_size;
uniform float u_flip;
in vec2 in_pos;
in vec2 in_uv;
in vec4 in_color;
out vec2 v_uv;
out vec4 v_color;
void main() {
    v_uv = in_uv;
    v_color = in_color;
    gl_Position = vec4(in_pos.x / u_size.x * 2.0 - 1.0,
                       (1.0 - in_pos.y / u_size.y * 2.0) * u_flip, 0.0, 1.0);
}
"""
_FS = """
#version 330
uniform sampler2D u_tex;
in vec2 v_uv;
in vec4 v_color;
out vec4 f_color;
void main() {
    vec4 c = v_color * texture(u_tex, v_uv);
    f_color = vec4(c.rgb * c.a, c.a);  // premultiplied
}
"""

# copies a cached panel texel for texel (same size and row order as the target)
_COPY_VS = """
#version 330
uniform vec2 u_size;
uniform float u_flip;
in vec2 in_pos;
void main() {
    gl_Position = vec4(in_pos.x / u_size.x * 2.0 - 1.0,
                       (1.0 - in_pos.y / u_size.y * 2.0) * u_flip, 0.0, 1.0);
}
"""
_COPY_FS = """
#version 330
uniform sampler2D u_tex;
out vec4 f_color;
void main() { f_color = texelFetch(u_tex, ivec2(gl_FragCoord.xy), 0); }
"""


class ImGuiGLRenderer:
    """Renders `imgui.ImDrawData` into a moderngl framebuffer.

    Args:
        ctx: The moderngl context (current while calling `render`).
    """

    def __init__(self, ctx: moderngl.Context) -> None:
        from imgui_bundle import imgui

        self._imgui = imgui
        self.ctx = ctx
        self.prog = ctx.program(vertex_shader=_VS, fragment_shader=_FS)
        self.prog["u_tex"].value = 0
        self.vbo = ctx.buffer(reserve=1 << 16, dynamic=True)
        self.ibo = ctx.buffer(reserve=1 << 15, dynamic=True)
        self._vao = self._make_vao()
        self.textures: dict[int, moderngl.Texture] = {}
        self._vbytes = bytearray()
        self._ibytes = b""
        self._cmds: list[tuple[float, float, float, float, int, int, int]] = []
        self._copy: moderngl.VertexArray | None = None
        self._upload_pending = False
        self._blit_checked = self._blit_failed = False
        self._bounds: tuple[tuple[int, int], tuple[int, int, int, int] | None] | None = None
        self.vsize = imgui.VERTEX_SIZE
        self.isize = imgui.INDEX_SIZE

    def _make_vao(self) -> moderngl.VertexArray:
        imgui = self._imgui
        assert imgui.VERTEX_BUFFER_POS_OFFSET == 0 and imgui.VERTEX_BUFFER_UV_OFFSET == 8
        return self.ctx.vertex_array(
            self.prog,
            [(self.vbo, "2f 2f 4f1", "in_pos", "in_uv", "in_color")],
            index_buffer=self.ibo,
            index_element_size=imgui.INDEX_SIZE,
        )

    def _update_textures(self) -> None:
        imgui = self._imgui
        status = imgui.ImTextureStatus
        for tex in imgui.get_platform_io().textures:
            st = tex.status
            if st == status.ok or st == status.destroyed:
                continue
            if st == status.want_create or (
                st == status.want_updates and tex.tex_id not in self.textures
            ):
                t = self.ctx.texture((tex.width, tex.height), 4, tex.get_pixels_array().tobytes())
                t.filter = (moderngl.LINEAR, moderngl.LINEAR)
                t.repeat_x = t.repeat_y = False
                self.textures[t.glo] = t
                tex.set_tex_id(t.glo)
                tex.status = status.ok
            elif st == status.want_updates:
                t = self.textures[tex.tex_id]
                px = tex.get_pixels_array().reshape(tex.height, tex.width, 4)
                for r in tex.updates:
                    block = np.ascontiguousarray(px[r.y : r.y + r.h, r.x : r.x + r.w])
                    t.write(block.tobytes(), viewport=(r.x, r.y, r.w, r.h))
                tex.status = status.ok
            elif st == status.want_destroy:
                t = self.textures.pop(tex.tex_id, None)
                if t is not None:
                    t.release()
                tex.set_tex_id(0)
                tex.status = status.destroyed

    def textures_pending(self) -> bool:
        """Whether ImGui has textures to create, update or destroy (GL work)."""
        ok = self._imgui.ImTextureStatus.ok
        return any(t.status != ok for t in self._imgui.get_platform_io().textures)

    def update_textures(self) -> None:
        """Create, update and destroy ImGui's textures (the GL context must be current)."""
        if self.textures_pending():
            self._update_textures()

    def prepare(self, draw_data: Any) -> bool:
        """Take this frame's draw data; True when it changed.

        The vertices, indices and commands are compared with the last frame's, so an
        unchanged panel can be shown from a cache instead of being drawn again. Texture
        updates (GL) must have been applied first (`update_textures`, with the context
        current); the buffers are uploaded by `draw`, so no GL call is made here.
        """
        textures_pending = self.textures_pending()
        vsize, isize = self.vsize, self.isize
        lists = draw_data.cmd_lists
        n_vtx = sum(cl.vtx_buffer.size() for cl in lists)
        n_idx = sum(cl.idx_buffer.size() for cl in lists)
        vbytes = bytearray(n_vtx * vsize)
        idx = np.empty(n_idx, dtype=np.uint32 if isize == 4 else np.uint16)
        ctype = ctypes.c_uint32 if isize == 4 else ctypes.c_uint16
        vo = io_ = 0
        cmds = []
        for cl in lists:
            nv, ni = cl.vtx_buffer.size(), cl.idx_buffer.size()
            ctypes.memmove(
                (ctypes.c_char * (nv * vsize)).from_buffer(vbytes, vo * vsize),
                cl.vtx_buffer.data_address(),
                nv * vsize,
            )
            if ni:
                part = np.ctypeslib.as_array(
                    ctypes.cast(cl.idx_buffer.data_address(), ctypes.POINTER(ctype)), shape=(ni,)
                )
                idx[io_ : io_ + ni] = part + vo if vo else part
            for cmd in cl.cmd_buffer:
                if cmd.elem_count:
                    x0, y0, x1, y1 = cmd.clip_rect
                    cmds.append(
                        (
                            x0,
                            y0,
                            x1,
                            y1,
                            cmd.tex_ref.get_tex_id(),
                            cmd.elem_count,
                            io_ + cmd.idx_offset,
                        )
                    )
            vo += nv
            io_ += ni
        ibytes = idx.tobytes()
        if vbytes == self._vbytes and ibytes == self._ibytes and cmds == self._cmds:
            return textures_pending
        self._vbytes, self._ibytes, self._cmds = vbytes, ibytes, cmds
        self._upload_pending = True
        self._bounds = None
        return True

    def _sync(self) -> None:
        """Apply texture updates and upload the prepared buffers (GL context current)."""
        self._update_textures()
        if not self._upload_pending:
            return
        self._upload_pending = False
        vbytes, ibytes = self._vbytes, self._ibytes
        if self.vbo.size < len(vbytes) or self.ibo.size < len(ibytes):
            self.vbo.orphan(max(self.vbo.size * 2, len(vbytes)))
            self.ibo.orphan(max(self.ibo.size * 2, len(ibytes)))
            self._vao.release()
            self._vao = self._make_vao()
        if vbytes:
            self.vbo.write(vbytes)
            self.ibo.write(ibytes)

    def bounds(self, size: tuple[int, int]) -> tuple[int, int, int, int] | None:
        """The pixel box ``(x, y, w, h)`` the prepared vertices cover (None: nothing)."""
        if self._bounds is not None and self._bounds[0] == size:
            return self._bounds[1]  # computed once per change of the draw data
        box = None
        if self._cmds and self._vbytes:
            pos = np.frombuffer(self._vbytes, dtype="<f4").reshape(-1, self.vsize // 4)[:, :2]
            idx = np.frombuffer(self._ibytes, dtype=np.uint32 if self.isize == 4 else np.uint16)
            lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
            for cx0, cy0, cx1, cy1, _tid, count, first in self._cmds:
                # what a command draws: its vertices, cut to its clip rectangle (a scrolled
                # child's rows below the panel have vertices there, but draw nothing)
                p = pos[idx[first : first + count]]
                lo = np.minimum(lo, np.maximum(p.min(axis=0), (cx0, cy0)))
                hi = np.maximum(hi, np.minimum(p.max(axis=0), (cx1, cy1)))
            if np.all(hi > lo):
                x0, y0 = max(0, int(np.floor(lo[0]))), max(0, int(np.floor(lo[1])))
                x1, y1 = min(size[0], int(np.ceil(hi[0]))), min(size[1], int(np.ceil(hi[1])))
                box = (x0, y0, x1 - x0, y1 - y0) if x1 > x0 and y1 > y0 else None
        self._bounds = (size, box)
        return box

    def render(self, draw_data: Any, fbo: moderngl.Framebuffer, top_first: bool) -> None:
        """Draw ``draw_data`` over ``fbo``'s pixels (blended, scissored per command).

        Args:
            draw_data: ``imgui.get_draw_data()`` after ``imgui.render()``.
            fbo: The target framebuffer (its size is the display size).
            top_first: True when row 0 of the framebuffer is the top of the image (the
                "gl" backend's headless frames), False for ordinary OpenGL order.
        """
        self.update_textures()
        self.prepare(draw_data)
        self.draw(fbo, top_first)

    def draw(self, fbo: moderngl.Framebuffer, top_first: bool) -> None:
        """Draw the prepared data over ``fbo`` (see `render`)."""
        self._sync()
        if not self._cmds:
            return
        ctx = self.ctx
        w, h = fbo.size
        fbo.use()
        ctx.viewport = (0, 0, w, h)
        self.prog["u_size"].value = (float(w), float(h))
        self.prog["u_flip"].value = -1.0 if top_first else 1.0
        ctx.enable_only(moderngl.BLEND)
        ctx.blend_func = moderngl.ONE, moderngl.ONE_MINUS_SRC_ALPHA
        ctx.blend_equation = moderngl.FUNC_ADD
        textures = self.textures
        bound = None
        vao = self._vao
        try:
            for cx0, cy0, cx1, cy1, tid, count, first in self._cmds:
                x0, y0 = max(0, int(cx0)), max(0, int(cy0))
                x1, y1 = min(w, int(cx1)), min(h, int(cy1))
                if x1 <= x0 or y1 <= y0:
                    continue
                ctx.scissor = (x0, y0 if top_first else h - y1, x1 - x0, y1 - y0)
                if tid != bound:
                    textures[tid].use(0)
                    bound = tid
                vao.render(moderngl.TRIANGLES, vertices=count, first=first)
        finally:
            ctx.scissor = None
            ctx.disable(moderngl.BLEND)

    def copy_rect(
        self,
        src: moderngl.Texture,
        fbo: moderngl.Framebuffer,
        rect: tuple[int, int, int, int],
        top_first: bool,
    ) -> None:
        """Copy ``rect`` of ``src`` (same size and row order as ``fbo``) into ``fbo``, opaque."""
        if self._copy is None:
            self._copy_prog = self.ctx.program(vertex_shader=_COPY_VS, fragment_shader=_COPY_FS)
            self._copy_vbo = self.ctx.buffer(reserve=48)
            self._copy = self.ctx.vertex_array(self._copy_prog, [(self._copy_vbo, "2f", "in_pos")])
        x, y, w, h = rect
        quad = np.array([x, y, x + w, y, x, y + h, x, y + h, x + w, y, x + w, y + h], dtype="f4")
        self._copy_vbo.write(quad.tobytes())
        fw, fh = fbo.size
        fbo.use()
        self.ctx.viewport = (0, 0, fw, fh)
        self._copy_prog["u_size"].value = (float(fw), float(fh))
        self._copy_prog["u_flip"].value = -1.0 if top_first else 1.0
        self._copy_prog["u_tex"].value = 0
        src.use(0)
        self.ctx.disable(moderngl.BLEND)
        self._copy.render(moderngl.TRIANGLES, vertices=6)

    def blit_rect(
        self,
        src: moderngl.Framebuffer,
        fbo: moderngl.Framebuffer,
        rect: tuple[int, int, int, int],
        top_first: bool,
    ) -> None:
        """Copy ``rect`` of ``src`` into ``fbo`` (same size and row order), opaque.

        A ``glBlitFramebuffer`` of the rectangle: llvmpipe turns a same-format, unscaled
        blit into a memory copy, about 10x cheaper than drawing a textured quad over the
        rectangle (measured: +0.05 vs +0.6 ms per 440x335 panel). A multisampled target
        (no blits into one in GL 3.3) or a libGL without the entry point takes the quad
        (`copy_rect`).
        """
        gl = _libgl()
        if not gl or fbo.color_attachments[0].samples or self._blit_failed:
            self.copy_rect(src.color_attachments[0], fbo, rect, top_first)
            return
        x, y, w, h = rect
        y = y if top_first else fbo.size[1] - y - h
        gl.glBindFramebuffer(_GL_READ_FRAMEBUFFER, src.glo)
        gl.glBindFramebuffer(_GL_DRAW_FRAMEBUFFER, fbo.glo)
        gl.glBlitFramebuffer(x, y, x + w, y + h, x, y, x + w, y + h, _GL_COLOR_BIT, _GL_NEAREST)
        gl.glBindFramebuffer(_GL_FRAMEBUFFER, fbo.glo)  # what moderngl left bound
        if not self._blit_checked:  # once: a driver that refuses it gets the quad
            self._blit_checked = True
            if self.ctx.error != "GL_NO_ERROR":
                self._blit_failed = True
                self.copy_rect(src.color_attachments[0], fbo, rect, top_first)

    def release(self) -> None:
        """Free the GL objects (textures, buffers, program)."""
        for t in self.textures.values():
            t.release()
        self.textures.clear()
        for obj in (self._vao, self.vbo, self.ibo, self.prog):
            obj.release()
        if self._copy is not None:
            for obj in (self._copy, self._copy_vbo, self._copy_prog):
                obj.release()


_GL_READ_FRAMEBUFFER, _GL_DRAW_FRAMEBUFFER, _GL_FRAMEBUFFER = 0x8CA8, 0x8CA9, 0x8D40
_GL_COLOR_BIT, _GL_NEAREST = 0x4000, 0x2600
_gl: Any = None


def _libgl() -> Any:
    """The GL entry points ``glBindFramebuffer`` and ``glBlitFramebuffer`` (False: none).

    moderngl blits only whole framebuffers from their origin. With libglvnd (every
    current Linux) libOpenGL / libGL dispatch to whichever context is current, EGL
    (headless) or GLX (a glfw window).
    """
    global _gl
    if _gl is None:
        _gl = False
        for name in ("libOpenGL.so.0", ctypes.util.find_library("OpenGL"), "libGL.so.1"):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
                lib.glBindFramebuffer.argtypes = [ctypes.c_uint, ctypes.c_uint]
                lib.glBindFramebuffer.restype = None
                lib.glBlitFramebuffer.argtypes = [ctypes.c_int] * 8 + [ctypes.c_uint] * 2
                lib.glBlitFramebuffer.restype = None
            except (OSError, AttributeError):
                continue
            _gl = lib
            break
    return _gl


_glx: Any = None


def _libglx() -> Any:
    """The GLX entry points of libGL through ctypes (False when there is no libGL)."""
    global _glx
    if _glx is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("GL") or "libGL.so.1")
            vp = ctypes.c_void_p
            for name in ("glXGetCurrentContext", "glXGetCurrentDrawable", "glXGetCurrentDisplay"):
                getattr(lib, name).restype = vp
                getattr(lib, name).argtypes = []
            lib.glXMakeCurrent.restype = ctypes.c_int
            lib.glXMakeCurrent.argtypes = [vp, ctypes.c_ulong, vp]
            _glx = lib
        except (OSError, AttributeError):
            _glx = False
    return _glx


@contextmanager
def _no_glx_current() -> Iterator[None]:
    """Release the thread's GLX context for the block, then make it current again.

    SDL draws a pygame window through an OpenGL (GLX) context of its own; while it is
    current an EGL make-current is refused (one API per thread), so the panel's GL calls
    would land in SDL's context. SDL tracks its context itself, so it is put back.
    """
    lib = _libglx()
    ctx = lib.glXGetCurrentContext() if lib else None
    if not ctx:
        yield
        return
    dpy, drawable = lib.glXGetCurrentDisplay(), lib.glXGetCurrentDrawable()
    lib.glXMakeCurrent(dpy, 0, None)
    try:
        yield
    finally:
        lib.glXMakeCurrent(dpy, drawable or 0, ctx)


class OffscreenImGui:
    """ImGui pixels for a software surface: an EGL context, a framebuffer, a read-back.

    `prepare` takes a frame's draw data (and says whether it changed); `read` renders it
    into a transparent framebuffer of the display size and returns the premultiplied RGBA
    pixels of one rectangle (the panel), top row first.
    """

    def __init__(self) -> None:
        with _no_glx_current():
            self.ctx = moderngl.create_standalone_context(backend="egl", require=330)
            self._fbo: moderngl.Framebuffer | None = None
            with self.ctx:
                self.renderer = ImGuiGLRenderer(self.ctx)

    def prepare(
        self, draw_data: Any, size: tuple[int, int]
    ) -> tuple[bool, tuple[int, int, int, int] | None]:
        """Take the frame's draw data: whether it changed, and the box it draws in."""
        if self.renderer.textures_pending():  # e.g. the font atlas: the first frame
            with _no_glx_current(), self.ctx:
                self.renderer.update_textures()
        changed = self.renderer.prepare(draw_data)  # no GL: the context stays released
        return changed, self.renderer.bounds(size)

    def read(self, size: tuple[int, int], rect: tuple[int, int, int, int]) -> np.ndarray:
        """Render the prepared data and read back ``rect`` = ``(x, y, w, h)``.

        Returns:
            ``(h, w, 4)`` uint8 premultiplied RGBA, top row first.
        """
        with _no_glx_current(), self.ctx:
            if self._fbo is None or self._fbo.size != size:
                if self._fbo is not None:
                    for a in self._fbo.color_attachments:
                        a.release()
                    self._fbo.release()
                self._fbo = self.ctx.framebuffer(color_attachments=[self.ctx.renderbuffer(size, 4)])
            x, y, w, h = rect
            self._fbo.use()
            self.ctx.scissor = (x, y, w, h)
            self._fbo.clear(0.0, 0.0, 0.0, 0.0)
            self.ctx.scissor = None
            self.renderer.draw(self._fbo, top_first=True)
            out = np.empty((h, w, 4), dtype=np.uint8)
            self._fbo.read_into(out, viewport=(x, y, w, h), components=4, alignment=1)
        return out

    def release(self) -> None:
        """Free the context."""
        with _no_glx_current():
            with self.ctx:
                self.renderer.release()
            self.ctx.release()
