"""Where the App's overlays go: screen corners, with stacking, so none covers another.

The rule (docs/app.md, "Overlays"): an overlay (the Settings panel, the F1 HUD, the REC
badge, a notice, a demo's legend placed with `App.place_overlay`) takes the first free
corner, tried top-right, top-left, bottom-right, bottom-left; when no corner is free it
is stacked in the first corner where it fits: below what is already there in a top
corner, above it in a bottom corner. Only when nothing fits does it take the place it
overlaps least. What "is there" is every overlay placed earlier in the frame, the
Settings panel's window while it is open, and the text drawn so far.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas
    from kelab.render.renderer import Renderer

__all__ = [
    "OverlayLayout",
    "Rect",
    "draw_notice",
    "fit_lines",
    "draw_viewport_off",
    "free_corner",
    "panel_rect",
]

Rect = tuple[int, int, int, int]
"""A screen rectangle ``(x0, y0, x1, y1)`` in pixels."""

GAP = 4  # pixels between stacked overlays
#: Wall seconds between the frames drawn while the viewport is off: (panel hidden, shown).
VIEWPORT_OFF_PERIOD_S = (0.5, 1 / 30)
#: What the window says while the viewport is off.
VIEWPORT_OFF_TEXT = (
    "Viewport rendering is off (Sim High Perf.): the World runs undrawn.",
    "Pause (Enter) to see it, or untick Disable Viewport Rendering (F2).",
)
PANEL_WIDTH = 440  # the Settings panel's width when the window allows


def panel_rect(display: tuple[int, int], width: int = PANEL_WIDTH) -> Rect:
    """Where the Settings panel opens: the window's top right, about 60 % of its height.

    Args:
        display: Window ``(width, height)`` in pixels.
        width: The panel's preferred width.

    Returns:
        The panel's rectangle ``(x0, y0, x1, y1)``.
    """
    w = min(width, max(120, display[0] - 16))
    h = max(120, min(display[1] - 16, max(300, int(0.62 * display[1]))))
    x = max(8, display[0] - w - 8)
    return (x, 8, x + w, 8 + h)


def _overlap(a: Rect, b: Rect) -> int:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(w, 0) * max(h, 0)


def _stacked(size: tuple[int, int], rect: Rect, avoid: list[Rect], top: bool, gap: int) -> Rect:
    """Slide ``rect`` down (top corner) or up (bottom corner) past what it overlaps."""
    h = rect[3] - rect[1]
    for _ in range(len(avoid) + 1):
        hits = [r for r in avoid if _overlap(rect, r)]
        if not hits:
            return rect
        if top:
            y = max(r[3] for r in hits) + gap
        else:
            y = min(r[1] for r in hits) - gap - h
        rect = (rect[0], y, rect[2], y + h)
        if rect[1] < 0 or rect[3] > size[1]:
            return rect
    return rect


def free_corner(
    size: tuple[int, int], box: tuple[int, int], avoid: list[Rect], margin: int = 6
) -> Rect:
    """Place a ``box`` (w, h) by the overlay rule (see the module docstring).

    Corners are tried top-right, top-left, bottom-right, bottom-left: the first with no
    overlap wins; else the first where the box, stacked past what it meets (down in a
    top corner, up in a bottom one), fits in the frame without overlap; else the corner
    with the least overlapping area.

    Args:
        size: Frame ``(width, height)`` in pixels.
        box: ``(width, height)`` of the thing to place.
        avoid: Rectangles ``(x0, y0, x1, y1)`` to keep clear (e.g. ``canvas.text_boxes()``).
        margin: Pixels from the frame edges.

    Returns:
        The placed rectangle ``(x0, y0, x1, y1)``.
    """
    fw, fh = size
    w, h = box
    corners = [
        ((x, y, x + w, y + h), y == margin)
        for y in (margin, fh - margin - h)
        for x in (fw - margin - w, margin)
    ]
    best: tuple[int, Rect] | None = None
    for rect, _ in corners:
        cost = sum(_overlap(rect, r) for r in avoid)
        if cost == 0:
            return rect
        if best is None or cost < best[0]:
            best = (cost, rect)
    for rect, top in corners:
        moved = _stacked(size, rect, avoid, top, GAP)
        inside = moved[1] >= 0 and moved[3] <= fh
        if inside and not any(_overlap(moved, r) for r in avoid):
            return moved
    assert best is not None
    return best[1]


def fit_lines(canvas: Canvas, lines: list[str], size: int, width: int) -> tuple[list[str], int]:
    """Word-wrap ``lines`` to ``width`` pixels; shrink the font (to 8 px) if a word is wider.

    Args:
        canvas: The frame's canvas (it measures text).
        lines: The text, one entry a line.
        size: Font size in pixels wanted.
        width: Widest a line may be, in pixels.

    Returns:
        ``(lines, size)``: the wrapped lines and the font size they fit at (lines that fit
        come back unchanged).
    """
    while True:
        out: list[str] = []
        for line in lines:
            current = ""
            for word in line.split(" "):
                joined = f"{current} {word}" if current else word
                if current and canvas.text_size(joined, size)[0] > width:
                    out.append(current)
                    current = word
                else:
                    current = joined
            out.append(current)
        if size <= 8 or all(canvas.text_size(s, size)[0] <= width for s in out):
            return out, size
        size -= 1


def draw_notice(
    canvas: Canvas,
    lines: list[str],
    avoid: list[Rect],
    color: tuple[int, int, int] | None = None,
    size: int = 14,
) -> Rect:
    """Draw a few lines of App text over a dark box placed by the overlay rule.

    Args:
        canvas: The frame's canvas.
        lines: The text, one entry a line.
        avoid: Rectangles to keep clear besides the text drawn so far.
        color: The text colour (default: the panel text colour).
        size: Font size in pixels.

    Returns:
        The box's screen rectangle.
    """
    from kelab.render.scenery import PALETTE

    pad = 6
    room = canvas.camera.size[0] - 2 * (pad + 6)  # free_corner's margin on each side
    lines, size = fit_lines(canvas, lines, size, room)
    line_h = size + 3
    width = max(canvas.text_size(s, size)[0] for s in lines) + 2 * pad
    box = (width, pad + line_h * len(lines) + pad // 2)
    rect = free_corner(canvas.camera.size, box, canvas.text_boxes() + avoid)
    canvas.screen_rect(rect, PALETTE["panel"])
    for i, text in enumerate(lines):
        pos = (rect[0] + pad, rect[1] + pad // 2 + 2 + i * line_h)
        canvas.text(pos, text, color or PALETTE["panel_text"], size=size, screen_space=True)
    return rect


class OverlayLayout:
    """This frame's overlays (``app.overlays``): each one placed avoids the ones before.

    The App starts every drawn frame with the Settings panel's window (while it is open),
    then your ``render`` may place its own overlays (`place`), then the App places its
    notices, the F1 HUD and the REC badge.
    """

    def __init__(self) -> None:
        self.rects: list[Rect] = []
        """The rectangles placed (or reserved) so far this frame."""
        self.top = 0
        """The first pixel row clear of the window's menu bar (0 without one): text your
        ``render`` draws at fixed screen places starts at ``y >= top``, so the bar does
        not hide it."""

    def begin_frame(self, reserved: Iterable[Rect] = (), top: int = 0) -> None:
        """Start a frame: ``reserved`` rectangles and the menu bar's height.

        Args:
            reserved: Rectangles taken before any overlay (the open panel, the menu bar).
            top: The pixel rows the menu bar covers at the top of the window.
        """
        self.rects = [tuple(int(v) for v in r) for r in reserved]  # type: ignore[misc]
        self.top = int(top)

    def place(self, canvas: Canvas, box: tuple[int, int], avoid: Iterable[Rect] = ()) -> Rect:
        """Place an overlay of ``box`` (w, h) pixels by the rule and remember it.

        Args:
            canvas: The frame's canvas (its text drawn so far is avoided too).
            box: The overlay's ``(width, height)`` in pixels, ints > 0.
            avoid: More rectangles to keep clear (e.g. a strip your ``render`` drew).

        Returns:
            The rectangle ``(x0, y0, x1, y1)`` to draw it in.

        Raises:
            ValueError: For a box that is not two ints > 0.
        """
        from kelab._validate import check_int

        if not isinstance(box, (tuple, list)) or len(box) != 2:
            from kelab._validate import must

            raise ValueError(must("overlay box", "(width, height) in pixels", box))
        w = check_int(box[0], "overlay box width", low=1)
        h = check_int(box[1], "overlay box height", low=1)
        rect = free_corner(
            canvas.camera.size,
            (w, h),
            canvas.text_boxes()
            + self.rects
            + [
                tuple(int(v) for v in r)
                for r in avoid  # type: ignore[misc]
            ],
        )
        self.rects.append(rect)
        return rect

    def notice(
        self, canvas: Canvas, lines: list[str], color: tuple[int, int, int] | None = None
    ) -> Rect:
        """Draw App text (`draw_notice`) in the next free place and remember it."""
        rect = draw_notice(canvas, lines, self.rects, color)
        self.rects.append(rect)
        return rect

    def add(self, rect: Rect | None) -> None:
        """Remember a rectangle drawn elsewhere (the HUD), if any."""
        if rect is not None:
            self.rects.append(rect)


def draw_viewport_off(
    renderer: Renderer,
    layout: OverlayLayout,
    background: tuple[int, int, int],
    keep_clear: Callable[[tuple[int, int]], list[Rect]],
    draw_overlays: Callable[[Canvas], None],
    draw_panel: Callable[[Renderer], None] | None,
) -> None:
    """With the viewport off: a plain frame saying so, the App's overlays and the panel.

    The App draws one at most every `VIEWPORT_OFF_PERIOD_S` wall seconds (30 Hz while
    the Settings panel is open, so it keeps answering clicks), never the World.

    Args:
        renderer: The App's renderer.
        layout: The App's `OverlayLayout`.
        background: The frame's colour.
        keep_clear: What the overlays keep clear of, for a display size: the Settings
            panel's window (``PanelWindow.rects``) and the menu bar (``MenuBar.rects``),
            as in a drawn frame.
        draw_overlays: Draws the App's notices, HUD and REC badge.
        draw_panel: Builds the Settings panel's frame (``PanelWindow.frame``); None
            while the panel is hidden.
    """
    renderer.begin_frame()
    canvas = renderer.canvas
    canvas.clear(background)
    layout.begin_frame(keep_clear(renderer.size))
    layout.notice(canvas, list(VIEWPORT_OFF_TEXT), (255, 200, 120))
    draw_overlays(canvas)
    if draw_panel is not None:
        draw_panel(renderer)
    renderer.end_frame()
