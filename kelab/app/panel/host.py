"""PanelHost: runs the Settings panel's ImGui context in an App's window.

It forwards the App's input events to ImGui itself (no toolkit callbacks are installed,
so KELab's input, hotkeys and latching keep working), tells the App which events the
panel consumed (a press on the panel never reaches picking, dragging or `App.input`),
builds the ImGui frame from the `PanelModel`, and draws it over the frame through the
renderer's ``overlay`` hook: on the "gl" backend into the frame's own framebuffer, on the
"pygame" backend through an offscreen EGL context composited onto the surface.

An untouched panel costs almost nothing per frame: the ImGui frame is built only when
input reached the panel (and for `SETTLE_S` after it, so hover, clicks and tooltips play
out), when a value the page shows changed (`PanelUI.shown_key`), when the display size
changed, or when the page's refresh interval passed (`PanelUI.refresh_s`: the Plots page
10 times a second, the others twice). Between builds the last panel image is copied
from a cache (gl: one ``glBlitFramebuffer`` of the panel rectangle; pygame: one blit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kelab.app.panel.model import PanelModel
from kelab.render.events import InputEvent

if TYPE_CHECKING:
    import moderngl
    import pygame
    from imgui_bundle import imgui

    from kelab.app.panel.imgui_gl import ImGuiGLRenderer, OffscreenImGui
    from kelab.render.gl_backend import GLRenderer
    from kelab.render.pygame_backend import PygameRenderer

__all__ = ["SETTLE_S", "PanelHost"]

SETTLE_S = 0.6
"""Seconds after the last input that the panel keeps building every frame."""


def _imgui_keys() -> dict[str, Any]:
    from imgui_bundle import imgui

    k = imgui.Key
    table = {
        "tab": k.tab, "left": k.left_arrow, "right": k.right_arrow, "up": k.up_arrow,
        "down": k.down_arrow, "page up": k.page_up, "page down": k.page_down,
        "home": k.home, "end": k.end, "insert": k.insert, "delete": k.delete,
        "backspace": k.backspace, "space": k.space, "return": k.enter, "escape": k.escape,
        "enter": k.keypad_enter, "left ctrl": k.left_ctrl, "right ctrl": k.right_ctrl,
        "left shift": k.left_shift, "right shift": k.right_shift, "left alt": k.left_alt,
        "right alt": k.right_alt,
    }  # fmt: skip
    for c in "abcdefghijklmnopqrstuvwxyz":
        table[c] = getattr(k, c)
    for d in "0123456789":
        table[d] = getattr(k, f"_{d}")
    return table


_SHIFTED = dict(zip("1234567890-=[];',./`\\", '!@#$%^&*()_+{}:"<>?~|', strict=True))


def _char(key: str, mods: frozenset[str]) -> str | None:
    """The character a key types (for text fields), or None."""
    if key.startswith("[") and key.endswith("]") and len(key) == 3:
        key = key[1]  # keypad digits and operators
    if key == "space":
        return " "
    if len(key) != 1 or "ctrl" in mods or "meta" in mods:
        return None
    if "shift" in mods:
        return key.upper() if key.isalpha() else _SHIFTED.get(key, key)
    return key


class PanelHost:
    """The panel in one App window (see the module docstring).

    Args:
        model: The panel model.
        renderer: The App's renderer (``backend`` "gl" or "pygame").
    """

    #: gl backend: show an unchanged panel from a cached texture (False: draw every frame)
    gl_cache = True

    def __init__(self, model: PanelModel, renderer: GLRenderer | PygameRenderer) -> None:
        from imgui_bundle import imgui, implot

        from kelab.app.panel.ui import PanelUI

        self._imgui = imgui
        self.model = model
        self.renderer = renderer
        self.ctx = imgui.create_context()
        self.plot_ctx = implot.create_context()
        imgui.set_current_context(self.ctx)
        implot.set_current_context(self.plot_ctx)
        io = imgui.get_io()
        io.set_ini_filename(None)
        # textures (the font atlas) are created and updated by ImGuiGLRenderer
        io.backend_flags |= imgui.BackendFlags_.renderer_has_textures.value
        pio = imgui.get_platform_io()
        pio.renderer_texture_max_width = pio.renderer_texture_max_height = 8192
        io.config_flags |= imgui.ConfigFlags_.nav_enable_keyboard.value
        imgui.style_colors_dark()
        style = imgui.get_style()
        style.window_rounding = 0.0  # opaque, square: an unchanged panel is copied
        style.set_color_(imgui.Col_.window_bg.value, imgui.ImVec4(0.17, 0.18, 0.20, 1.0))
        self.ui = PanelUI(model)
        self._keys = _imgui_keys()
        self._pressed_on_panel: set[int] = set()
        self._gl: ImGuiGLRenderer | None = None  # gl backend
        self._offscreen: OffscreenImGui | None = None  # pygame backend
        self._ready = False  # an ImGui frame was rendered and can be drawn
        self._built = False  # this frame's ImGui frame is new (else: the cached image)
        self._force = True  # build the next frame whatever the key says
        self._since_build = 0.0  # wall seconds since the last built frame
        self._since_input = 0.0  # wall seconds since input last reached the panel
        self._key: Any = None  # (display size, what the page shows) at the last build
        self._pointer_in = False  # the pointer was over the panel at its last move
        # the last panel image: gl a framebuffer, pygame (pixels, surface); and its key
        self._cache: Any = None
        self._cache_key: Any = None
        self.want_text = False
        renderer.overlay = self._overlay

    # ------------------------------------------------------------------ input
    def _use(self) -> None:
        from imgui_bundle import implot

        self._imgui.set_current_context(self.ctx)
        implot.set_current_context(self.plot_ctx)

    def _over_panel(self, pos: tuple[int, int] | None) -> bool:
        if pos is None:
            return False
        x, y, w, h = self.ui.rect
        return x <= pos[0] < x + w and y <= pos[1] < y + h

    def feed(self, ev: InputEvent) -> bool:
        """Give an event to ImGui; True when the panel consumes it (the App drops it).

        A mouse press or wheel over the panel is consumed (and the matching release);
        keys are consumed while a text field has the keyboard. Pointer moves always
        reach the App too.
        """
        if not self.model.open:
            return False
        self._use()
        io = self._imgui.get_io()
        kind = ev.kind
        if kind == "mouse_move" and ev.pos is not None:
            io.add_mouse_pos_event(float(ev.pos[0]), float(ev.pos[1]))
            inside = self._over_panel(ev.pos)
            if inside or self._pointer_in:  # hover changes (leaving clears it)
                self._since_input = 0.0
            self._pointer_in = inside
            return False
        self._since_input = 0.0  # presses, wheels and keys: the panel may react
        if kind in ("mouse_down", "mouse_up") and ev.button is not None:
            if ev.pos is not None:
                io.add_mouse_pos_event(float(ev.pos[0]), float(ev.pos[1]))
            button = {1: 0, 3: 1, 2: 2}.get(ev.button)
            if kind == "mouse_down":
                imgui = self._imgui
                any_popup = (
                    imgui.PopupFlags_.any_popup_id | imgui.PopupFlags_.any_popup_level
                ).value
                # a combo's list may hang below the panel: presses go to it while it is open
                hit = self._over_panel(ev.pos) or imgui.is_popup_open("", any_popup)
                if button is not None and hit:
                    io.add_mouse_button_event(button, True)
                    self._pressed_on_panel.add(ev.button)
                return hit
            if ev.button in self._pressed_on_panel:
                self._pressed_on_panel.discard(ev.button)
                if button is not None:
                    io.add_mouse_button_event(button, False)
                return True
            return False
        if kind == "mouse_wheel" and ev.wheel is not None:
            if self._over_panel(ev.pos):
                io.add_mouse_wheel_event(float(ev.wheel[0]), float(ev.wheel[1]))
                return True
            return False
        if kind in ("key_down", "key_up") and ev.key is not None:
            if ev.key == "f2":
                return False
            key = self._keys.get(ev.key)
            down = kind == "key_down"
            for mod, imkey in (
                ("ctrl", self._imgui.Key.mod_ctrl),
                ("shift", self._imgui.Key.mod_shift),
                ("alt", self._imgui.Key.mod_alt),
            ):
                io.add_key_event(imkey, mod in ev.mods)
            if not self.want_text:
                if key is not None:
                    io.add_key_event(key, down)
                return False
            if key is not None:
                io.add_key_event(key, down)
            if down:
                ch = _char(ev.key, ev.mods)
                if ch is not None:
                    io.add_input_character(ord(ch))
            return True
        return False

    # ------------------------------------------------------------------ frame
    def frame(self, dt: float, size: tuple[int, int]) -> None:
        """Build this frame's panel (call between the App's drawing and ``end_frame``).

        The ImGui frame is built only when needed (see the module docstring); otherwise
        the overlay shows the last one from its cache.
        """
        dt = max(float(dt), 0.0)
        self._since_build += dt
        self._since_input += dt
        self._ready = True
        key = (tuple(size), self.ui.shown_key())
        if not (
            self._force
            or self.want_text
            or self._since_input < SETTLE_S
            or key != self._key
            or self._since_build >= self.ui.refresh_s()
        ):
            self._built = False
            return
        imgui = self._imgui
        self._use()
        io = imgui.get_io()
        io.display_size = imgui.ImVec2(float(size[0]), float(size[1]))
        io.delta_time = float(min(max(self._since_build, 1e-4), 0.5))
        imgui.new_frame()
        self.ui.draw(size)
        imgui.render()
        self.want_text = bool(io.want_text_input)
        # drawing may change what is shown (a click that rebinds): compare after it
        self._key = (tuple(size), self.ui.shown_key())
        self._since_build = 0.0
        self._force = False
        self._built = True

    def _overlay(self, *target: Any) -> None:  # gl: (ctx, fbo, top_first); pygame: (surface,)
        if not (self._ready and self.model.open):
            self._force = True  # shown again later: build afresh
            return
        self._ready = False
        self._use()
        draw_data = self._imgui.get_draw_data() if self._built else None
        if self.renderer.backend == "gl":
            self._overlay_gl(draw_data, *target)
        else:
            self._overlay_pygame(draw_data, *target)

    def _panel_rect(self, size: tuple[int, int]) -> tuple[int, int, int, int] | None:
        x, y, w, h = self.ui.rect
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(size[0], x + w), min(size[1], y + h)
        return (x0, y0, x1 - x0, y1 - y0) if x1 > x0 and y1 > y0 else None

    @staticmethod
    def _inside(box: tuple[int, int, int, int] | None, rect: tuple[int, int, int, int]) -> bool:
        if box is None:
            return True
        return (
            box[0] >= rect[0]
            and box[1] >= rect[1]
            and box[0] + box[2] <= rect[0] + rect[2]
            and box[1] + box[3] <= rect[1] + rect[3]
        )

    def _overlay_gl(
        self,
        draw_data: imgui.ImDrawData | None,
        ctx: moderngl.Context,
        fbo: moderngl.Framebuffer,
        top_first: bool,
    ) -> None:
        """Draw into the frame's framebuffer; an unchanged opaque panel is copied from a cache."""
        import moderngl

        if self._gl is None:
            from kelab.app.panel.imgui_gl import ImGuiGLRenderer

            self._gl = ImGuiGLRenderer(ctx)
        r = self._gl
        size = tuple(fbo.size)
        key = (size, top_first)
        rect = self._panel_rect(size)
        if draw_data is None and self._cache_key == key and rect is not None:
            r.blit_rect(self._cache, fbo, rect, top_first)  # nothing new: the cached image
            return
        changed = True
        if draw_data is not None:
            r.update_textures()
            changed = r.prepare(draw_data)
        if not self.gl_cache or rect is None or not self._inside(r.bounds(size), rect):
            r.draw(fbo, top_first)  # a popup reaches out of the panel: draw it directly
            self._cache_key = None
            self._force = True  # and build every frame while it does
            return
        if changed or self._cache_key != key:
            cache = self._cache
            if cache is None or tuple(cache.size) != size:
                if cache is not None:
                    cache.color_attachments[0].release()
                    cache.release()
                tex = ctx.texture(size, 4)
                tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
                cache = self._cache = ctx.framebuffer(color_attachments=[tex])
            r.draw(cache, top_first)
            self._cache_key = key
        r.blit_rect(self._cache, fbo, rect, top_first)

    def _overlay_pygame(self, draw_data: imgui.ImDrawData | None, surface: pygame.Surface) -> None:
        """Render offscreen and blit; an unchanged opaque panel is blitted from a cache."""
        from kelab.render.pygame_door import pygame

        size = surface.get_size()
        if self._offscreen is None:
            from kelab.app.panel.imgui_gl import OffscreenImGui

            self._offscreen = OffscreenImGui()
        rect = self._panel_rect(size)
        key = (size, rect)
        if draw_data is None and self._cache_key == key and self._cache is not None:
            surface.blit(self._cache[1], rect[:2])  # nothing new: the cached image
            return
        if draw_data is None:  # no cache to show (e.g. a popup was open): build next frame
            self._force = True
            return
        changed, bounds = self._offscreen.prepare(draw_data, size)
        if rect is None or bounds is None:
            return
        if self._inside(bounds, rect):
            if changed or self._cache_key != key:
                rgba = self._offscreen.read(size, rect)
                self._cache = (rgba, pygame.image.frombuffer(rgba.data, rect[2:], "RGBX"))
                self._cache_key = key
            surface.blit(self._cache[1], rect[:2])
            return
        x0, y0 = min(rect[0], bounds[0]), min(rect[1], bounds[1])
        x1 = max(rect[0] + rect[2], bounds[0] + bounds[2])
        y1 = max(rect[1] + rect[3], bounds[1] + bounds[3])
        rgba = self._offscreen.read(size, (x0, y0, x1 - x0, y1 - y0))
        img = pygame.image.frombuffer(rgba.data, (x1 - x0, y1 - y0), "RGBA")
        surface.blit(img, (x0, y0), special_flags=pygame.BLEND_PREMULTIPLIED)
        self._cache_key = None
        self._force = True  # build every frame while a popup reaches out of the panel

    def close(self) -> None:
        """Release the GL objects and the ImGui and ImPlot contexts."""
        from imgui_bundle import implot

        if getattr(self.renderer, "overlay", None) == self._overlay:
            self.renderer.overlay = None
        # the gl objects live in the renderer's context and go with it when it closes
        self._gl = self._cache = None
        if self._offscreen is not None:
            self._offscreen.release()
            self._offscreen = None
        implot.destroy_context(self.plot_ctx)
        self._imgui.destroy_context(self.ctx)
