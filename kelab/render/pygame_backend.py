"""The "pygame" backend: pygame-ce software drawing, SDL window or offscreen Surface."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Hashable
from typing import NamedTuple

import numpy as np

from kelab.render.camera import Camera
from kelab.render.canvas import Canvas, Color
from kelab.render.events import InputEvent, modifier_names
from kelab.render.geometry import (
    PolygonRing,
    circle_polygons,
    inset_polygons,
    polygon_ring,
    span_outlines,
    thick_line_quads,
)
from kelab.render.plan import DrawPlan, Primitive
from kelab.render.pygame_door import pygame
from kelab.render.renderer_base import Renderer, require_display
from kelab.render.text import TextCache

__all__ = ["PygameCanvas", "PygameRenderer"]

_LITTLE = sys.byteorder == "little"


class PygameCanvas(Canvas):
    """Canvas drawing on a pygame Surface.

    Fills cover exactly the pixels whose centres are inside the shape (like OpenGL) in
    the exact colour; with ``antialias`` the shape is inset by half a pixel first and
    its edges are drawn with ``aalines`` along the inset outline, whose two-pixel
    ramp gives a pixel whose centre is ``d`` pixels outside the true edge about
    ``0.5 - d`` of the colour (the box-filtered coverage, as the GL backend's fringes).
    ``pygame.draw.polygon`` truncates its vertices to whole pixels (and then fills both
    end pixels of every row), so it is never handed the shape itself: each polygon is
    turned into the staircase of its rows' pixel spans
    (:func:`kelab.render.geometry.span_outlines`, all polygons of a call at once), whose
    whole-pixel vertices it fills exactly. Geometry is shifted by half a pixel, so that
    pixel centres sit at whole coordinates as ``aalines`` expects. Discs are tessellated
    like in the GL backend (pygame's own circles snap to whole pixels).

    ``draw_world`` uses compiled plans whose polygons are inset once per zoom in the
    body frame, so a frame costs one numpy transform, one span pass and the pygame calls.

    Args:
        camera: The view.
        surface: The target surface.
        antialias: Draw antialiased edges.
    """

    _PIXEL_SHIFT = -0.5

    def __init__(self, camera: Camera, surface: pygame.Surface, antialias: bool = True) -> None:
        super().__init__(camera)
        self.surface = surface
        self.antialias = antialias
        self._texts = TextCache()
        self._gradients: dict[tuple[object, ...], pygame.Surface] = {}
        # per queued batch's shapes: ((polygons, vertices each), ...)
        self._rings: dict[tuple[tuple[int, ...], ...], PolygonRing] = {}
        self._queue: list[tuple[np.ndarray, Color]] = []  # fills not yet drawn (_flush)
        # the renderer swaps frame surfaces instead of copying them: until the first
        # drawing call, ``surface`` still has to be given the previous frame's pixels
        self._restore_from: pygame.Surface | None = None

    def _sync(self) -> None:
        src, self._restore_from = self._restore_from, None
        if src is not None:
            self.surface.blit(src, (0, 0))

    def paint_clear(self, color: Color) -> None:
        """The pygame backend's :meth:`Canvas.paint_clear`."""
        self._restore_from = None  # painted over entirely: nothing to restore
        self._queue.clear()  # (what was queued is painted over too)
        self.surface.fill(color)

    def plan_style(self) -> Hashable:
        """The pygame backend's :meth:`Canvas.plan_style`."""
        return ("aa" if self.antialias else "hard",)

    def build_plan(self, primitives: list[Primitive]) -> DrawPlan:
        """The pygame backend's :meth:`Canvas.build_plan`."""
        local: list[np.ndarray] = []
        instance: list[int] = []
        commands: list[tuple[bool, int, int, Color]] = []
        fill_rows: list[np.ndarray] = []  # the plan's rows of every filled polygon
        fill_counts: list[int] = []
        row = 0
        for prim in primitives:
            pts = prim.points
            if prim.fill:
                if self.antialias:
                    pts = inset_polygons(pts[None], 0.5)[0]
                fill_rows.append(np.arange(row, row + len(pts)))
                fill_counts.append(len(pts))
            local.append(pts)
            instance.extend([prim.instance] * len(pts))
            commands.append((prim.fill, row, row + len(pts), prim.color))
            row += len(pts)
        fills = _PlanFills(
            np.concatenate(fill_rows) if fill_rows else np.zeros(0, dtype=np.intp),
            polygon_ring(np.concatenate(([0], np.cumsum(fill_counts, dtype=np.intp)))),
        )
        return DrawPlan(
            local=np.concatenate(local) if local else np.zeros((0, 2)),
            instance=np.array(instance, dtype=np.intp),
            data=(commands, fills),
        )

    def draw_plan(self, plan: DrawPlan, xs: np.ndarray, ys: np.ndarray) -> None:
        """The pygame backend's :meth:`Canvas.draw_plan`."""
        self._prepare()
        commands, fills = plan.data
        surf, aa = self.surface, self.antialias
        polygon, aalines, aaline = pygame.draw.polygon, pygame.draw.aalines, pygame.draw.aaline
        verts, bounds = span_outlines(xs[fills.rows], ys[fills.rows], fills.ring, surf.get_size())
        outlines, ends = verts.tolist(), bounds.tolist()
        pts = np.column_stack((xs, ys)).tolist() if aa or len(fills.rows) < len(xs) else []
        i = 0
        for fill, start, stop, color in commands:
            if fill:
                outline = outlines[ends[i] : ends[i + 1]]
                i += 1
                if len(outline) > 2:
                    polygon(surf, color, outline)
                elif outline:  # a single row: pygame wants three points
                    polygon(surf, color, outline + outline)
                if aa:
                    aalines(surf, color, True, pts[start:stop])
            else:
                aaline(surf, color, pts[start], pts[start + 1])

    def paint_polygons(
        self, polys: np.ndarray, color: Color, widths: np.ndarray | None = None
    ) -> None:
        """The pygame backend's :meth:`Canvas.paint_polygons`."""
        self._draw_inset(inset_polygons(polys, 0.5) if self.antialias else polys, color)

    def paint_vertical_gradient(
        self, rect: tuple[float, float, float, float], top: Color, bottom: Color
    ) -> None:
        """The pygame backend's :meth:`Canvas.paint_vertical_gradient`."""
        self._prepare()
        x0, y0, x1, y1 = (int(round(v)) for v in rect)
        w, h = x1 - x0, y1 - y0
        if w <= 0 or h <= 0:
            return
        key = (w, h, top, bottom)
        image = self._gradients.get(key)
        if image is None:
            t = ((np.arange(h) + 0.5) / h)[:, None]
            rows = np.asarray(top, np.float64) * (1.0 - t) + np.asarray(bottom, np.float64) * t
            cols = np.broadcast_to(np.rint(rows).astype(np.uint8)[None], (w, h, 3))
            image = pygame.surfarray.make_surface(np.ascontiguousarray(cols))
            if len(self._gradients) > 8:
                self._gradients.clear()
            self._gradients[key] = image
        self.surface.blit(image, (x0, y0))

    def paint_backdrop(self, top: Color, bottom: Color) -> None:
        """The pygame backend's :meth:`Canvas.paint_backdrop`."""
        self._restore_from = None  # painted over entirely: nothing to restore
        self._queue.clear()  # (what was queued is painted over too)
        w, h = self.surface.get_size()
        key = ("backdrop", w, h, top, bottom)
        image = self._gradients.get(key)
        if image is None:  # what a clear and the upper half's gradient draw, as one image
            image = self.surface.copy()
            image.fill(bottom)
            half = int(round(0.5 * h))
            if w > 0 and half > 0:
                t = ((np.arange(half) + 0.5) / half)[:, None]
                rows = np.asarray(top, np.float64) * (1.0 - t) + np.asarray(bottom, np.float64) * t
                pixels = pygame.surfarray.pixels3d(image)
                pixels[:, :half] = np.rint(rows).astype(np.uint8)[None]
                del pixels  # unlock
            if len(self._gradients) > 8:
                self._gradients.clear()
            self._gradients[key] = image
        self.surface.blit(image, (0, 0))  # same pixel format: a plain copy

    def _draw_inset(self, polys: np.ndarray, color: Color) -> None:
        """Fill polygons already inset by half a pixel when antialiased (and outline them).

        Queued, not drawn: consecutive fills (each ``circle``, ``polygon`` or thick
        ``line`` call is one) are drawn together by :meth:`_flush`, so their staircases
        cost one :func:`span_outlines` pass instead of one each (its ~50 numpy calls are
        most of a small shape's cost). Anything else that draws, and the frame's end,
        flushes first, so the order of the calls is the order on the frame.
        """
        if polys.shape[0]:
            self._queue.append((polys - 0.5, color))

    def finish_pending(self) -> None:
        """Bring :attr:`surface` up to date: restore the previous frame, draw queued fills.

        The renderer calls it when a frame ends, before the surface is shown or read.
        """
        self._prepare()

    def set_target(self, surface: pygame.Surface, previous: pygame.Surface | None) -> None:
        """Draw on ``surface`` from now on.

        Args:
            surface: The new target, as large as the frame.
            previous: The surface whose pixels ``surface`` must start with (copied lazily,
                at the first drawing call); None for a blank frame, which also drops the
                fills queued for the old target.
        """
        self.surface = surface
        self._restore_from = previous
        if previous is None:
            self._queue.clear()

    def _prepare(self) -> None:
        """Bring the surface up to date before drawing on it directly (or reading it)."""
        if self._restore_from is not None:
            self._sync()
        if self._queue:
            self._flush()

    def _flush(self) -> None:
        """Draw the queued fills in order (:meth:`_draw_inset`); via :meth:`_prepare`."""
        queue, self._queue = self._queue, []
        surf, aa = self.surface, self.antialias
        # whole-pixel rectangles (ground ticks) are filled directly, the rest in one pass
        rects = [p.shape[1] == 4 and _axis_aligned(p) for p, _ in queue]
        stairs = [p for (p, _), rect in zip(queue, rects, strict=True) if not rect]
        outlines: list[list[int]] = []
        ends: list[int] = [0]
        if stairs:
            shape = tuple(p.shape[:2] for p in stairs)
            ring = self._rings.get(shape)
            if ring is None:
                if len(self._rings) > 32:
                    self._rings.clear()
                sizes = np.concatenate([np.full(n, k, dtype=np.intp) for n, k in shape])
                starts = np.concatenate(([0], np.cumsum(sizes)))
                ring = self._rings[shape] = polygon_ring(starts)
            x = np.concatenate([p[..., 0].ravel() for p in stairs])
            y = np.concatenate([p[..., 1].ravel() for p in stairs])
            verts, bounds = span_outlines(x, y, ring, surf.get_size())
            outlines, ends = verts.tolist(), bounds.tolist()
        i = 0  # the next polygon's staircase
        for (polys, color), rect in zip(queue, rects, strict=True):
            n = polys.shape[0]
            corners = polys.tolist() if aa else [None] * n
            if rect:
                lo = np.ceil(polys.min(axis=1))
                hi = polys.max(axis=1)
                hi[:, 0] = np.floor(hi[:, 0]) + 1.0  # columns whose centres are inside
                hi[:, 1] = np.ceil(hi[:, 1])  # rows likewise, half-open as span_outlines
                size = np.maximum(hi - lo, 0.0)
                boxes = np.concatenate((lo, size), axis=1).astype(np.intp).tolist()
                for box, poly in zip(boxes, corners, strict=True):
                    surf.fill(color, box)
                    if aa:
                        pygame.draw.aalines(surf, color, True, poly)
                continue
            for poly in corners:
                outline = outlines[ends[i] : ends[i + 1]]
                i += 1
                if len(outline) > 2:
                    pygame.draw.polygon(surf, color, outline)
                elif outline:  # a single row: pygame wants three points
                    pygame.draw.polygon(surf, color, outline + outline)
                if aa:
                    pygame.draw.aalines(surf, color, True, poly)

    def paint_lines(self, a: np.ndarray, b: np.ndarray, width: float, color: Color) -> None:
        """The pygame backend's :meth:`Canvas.paint_lines`."""
        if not self.antialias:
            self._draw_inset(thick_line_quads(a, b, width), color)
            return
        # inset by half a pixel like paint_polygons, as the rectangles themselves
        widths = np.minimum(width, np.hypot(*(b - a).T))
        self._draw_inset(thick_line_quads(a, b, width, -np.minimum(0.5, 0.5 * widths)), color)

    def paint_circles(self, centers: np.ndarray, radii: np.ndarray, color: Color) -> None:
        """The pygame backend's :meth:`Canvas.paint_circles`."""
        # tessellated like the GL backend: sub-pixel centres and radii, same silhouette
        radii = np.maximum(radii, 0.5)
        inset = 0.5 if self.antialias else 0.0
        self._draw_inset(circle_polygons(centers, radii, inset=inset), color)

    def paint_rings(
        self, centers: np.ndarray, radii: np.ndarray, width: float, color: Color
    ) -> None:
        """The pygame backend's :meth:`Canvas.paint_rings`."""
        self._prepare()
        w = max(1, int(round(width)))
        for c, r in zip((centers - 0.5).tolist(), radii.tolist(), strict=True):
            pygame.draw.aacircle(self.surface, color, c, r, w)

    def paint_hairlines(self, a: np.ndarray, b: np.ndarray, color: Color) -> None:
        """The pygame backend's :meth:`Canvas.paint_hairlines`."""
        self._prepare()
        for p, q in zip((a - 0.5).tolist(), (b - 0.5).tolist(), strict=True):
            pygame.draw.aaline(self.surface, color, p, q)

    def paint_text(self, pos: tuple[int, int], string: str, color: Color, size: int) -> None:
        """The pygame backend's :meth:`Canvas.paint_text`."""
        self._prepare()
        self.surface.blit(self._texts.surface(string, color, size), pos)


class PygameRenderer(Renderer):
    """Renderer on pygame-ce: an SDL window, or an offscreen Surface when headless.

    Headless rendering needs no display and leaves ``SDL_VIDEODRIVER`` alone. A window
    uses pygame's single display; only one pygame window can be open at a time.
    Use :func:`kelab.render.create_renderer` rather than this class directly.

    Args:
        size: ``(width, height)`` in pixels.
        title: Window title.
        headless: Offscreen only.
        vsync: Ask SDL for vsync (falls back with a warning where unsupported).
        antialias: Antialiased shape edges (True) or hard ones (False); ``"msaa"`` is
            a "gl" setting and raises ValueError here.
    """

    backend = "pygame"
    _window_owner: PygameRenderer | None = None

    def __init__(
        self,
        size: tuple[int, int],
        title: str,
        headless: bool,
        vsync: bool,
        antialias: bool | str,
    ) -> None:
        super().__init__(size, title, headless, vsync, antialias)
        if self.antialias == "msaa":
            raise ValueError(
                "antialias='msaa' is only available with backend='gl'; the 'pygame' backend "
                "antialiases edges analytically with antialias=True"
            )
        self._window: pygame.Surface | None = None
        self.overlay: Callable[[pygame.Surface], None] | None = None
        """Called when a frame ends: ``overlay(surface)`` draws over the finished frame."""
        if not headless:
            if PygameRenderer._window_owner is not None:
                raise RuntimeError(
                    "a pygame window is already open (pygame has a single display); close it "
                    "first or use backend='gl' for a second window"
                )
            require_display("pygame")
            pygame.display.init()
            try:
                self._window = pygame.display.set_mode(size, pygame.RESIZABLE, vsync=int(vsync))
            except pygame.error as err:
                if not vsync:
                    pygame.display.quit()
                    raise RuntimeError(f"could not open a pygame window: {err}") from err
                warnings.warn(f"pygame vsync unavailable ({err}); continuing without", stacklevel=3)
                self._window = pygame.display.set_mode(size, pygame.RESIZABLE)
            pygame.display.set_caption(self.title)
            PygameRenderer._window_owner = self
        self._target = _rgb_surface(size)
        self._finished = _rgb_surface(size)
        self._canvas = PygameCanvas(self._camera, self._target, bool(self.antialias))

    @property
    def canvas(self) -> PygameCanvas:
        """The canvas (draws on the offscreen frame surface)."""
        return self._canvas

    def _begin(self) -> None:
        pass

    def _end(self) -> None:
        canvas = self._canvas
        canvas.finish_pending()  # queued fills drawn; nothing drawn: it repeats the last one
        if self.overlay is not None:  # e.g. the App's settings panel, over the frame
            self.overlay(self._target)
        if self._window is not None:
            self._window.blit(self._target, (0, 0))
            pygame.display.flip()
        # swap instead of copying: the finished frame is read from ``_finished``; the
        # next frame draws on the other surface, restored lazily (see PygameCanvas)
        self._finished, self._target = self._target, self._finished
        if self._target.get_size() != self._finished.get_size():
            self._target = _rgb_surface(self._finished.get_size())
        canvas.set_target(self._target, self._finished)

    def _read_top_first(self) -> np.ndarray:
        surf = self._finished
        w, h = surf.get_size()
        rows = np.frombuffer(surf.get_buffer(), dtype=np.uint8).reshape(h, surf.get_pitch())
        return rows[:, : 3 * w].reshape(h, w, 3).copy()

    def _poll(self) -> list[InputEvent]:
        out: list[InputEvent] = []
        for ev in pygame.event.get():
            e = self._convert(ev)
            if e is not None:
                out.append(e)
        return out

    def _convert(self, ev: pygame.event.Event) -> InputEvent | None:
        t = ev.type
        if t == pygame.QUIT:
            return InputEvent("quit")
        if t in (pygame.KEYDOWN, pygame.KEYUP):
            kind = "key_down" if t == pygame.KEYDOWN else "key_up"
            return InputEvent(kind, key=pygame.key.name(ev.key).lower(), mods=_mods(ev.mod))
        if t in (pygame.MOUSEBUTTONDOWN, pygame.MOUSEBUTTONUP):
            if ev.button in (4, 5):  # legacy wheel buttons; see MOUSEWHEEL
                return None
            kind = "mouse_down" if t == pygame.MOUSEBUTTONDOWN else "mouse_up"
            return InputEvent(
                kind, button=int(ev.button), pos=_ipos(ev.pos), mods=_mods(pygame.key.get_mods())
            )
        if t == pygame.MOUSEMOTION:
            return InputEvent("mouse_move", pos=_ipos(ev.pos))
        if t == pygame.MOUSEWHEEL:
            return InputEvent(
                "mouse_wheel",
                pos=_ipos(pygame.mouse.get_pos()),
                wheel=(float(ev.precise_x), float(ev.precise_y)),
            )
        if t == pygame.VIDEORESIZE:
            size = (max(1, int(ev.w)), max(1, int(ev.h)))
            if size == self.size:
                return None
            self._target = _rgb_surface(size)
            self._canvas.set_target(self._target, None)  # a new, blank frame of the new size
            self._resized(size)
            return InputEvent("resize", size=size)
        return None

    def _close(self) -> None:
        if self._window is not None:
            self._window = None
            pygame.display.quit()
            PygameRenderer._window_owner = None


class _PlanFills(NamedTuple):
    """Where a pygame plan's filled polygons are: their rows and polygon bounds."""

    rows: np.ndarray  # (P,) rows of the plan's points, polygon after polygon
    ring: PolygonRing  # how those points make up the polygons


_NEXT_CORNER = np.array([1, 2, 3, 0])


def _axis_aligned(quads: np.ndarray) -> bool:
    """Whether ``(N, 4, 2)`` quads are all rectangles with horizontal and vertical sides."""
    e = quads[:, _NEXT_CORNER] - quads
    return not np.any(e[..., 0] * e[..., 1])


def _rgb_surface(size: tuple[int, int]) -> pygame.Surface:
    """A 24-bit surface whose bytes are R, G, B in memory order (read back with one copy)."""
    masks = (0xFF, 0xFF00, 0xFF0000, 0) if _LITTLE else (0xFF0000, 0xFF00, 0xFF, 0)
    return pygame.Surface(size, 0, 24, masks=masks)


def _ipos(pos: tuple[float, float]) -> tuple[int, int]:
    return (int(pos[0]), int(pos[1]))


_MODIFIERS = (
    (pygame.KMOD_SHIFT, "shift"),
    (pygame.KMOD_CTRL, "ctrl"),
    (pygame.KMOD_ALT, "alt"),
    (pygame.KMOD_META, "meta"),
)


def _mods(mod: int) -> frozenset[str]:
    return modifier_names(mod, _MODIFIERS)
