"""The "gl" backend: moderngl (OpenGL 3.3 core) in a glfw window or a headless EGL context.

`GLRenderer` owns the window (glfw) or the headless context (EGL, else moderngl's
standalone one), the frame's offscreen framebuffer (4x multisampled with
``antialias="msaa"``), reading it back or blitting it to the window, and the window's
input callbacks. Drawing is `kelab.render.gl_canvas.GLCanvas`: a frame's shapes and
text batched into a few draw calls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import moderngl
import numpy as np

from kelab.render.events import InputEvent, glfw_key_names, modifier_names
from kelab.render.gl_canvas import GLCanvas
from kelab.render.renderer_base import Renderer, require_display

__all__ = ["GLCanvas", "GLRenderer"]


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
