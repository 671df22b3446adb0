"""The Settings panel's timeline slider: scrub the App's history, branch points marked.

A strip under the page tabs, on every page: ``History`` and a slider over `App.history`
(oldest step kept to the newest recorded). Grabbing it pauses the App; dragging seeks
(`App.seek`) to the step under the pointer, so the view follows while dragging; where a
rewind branched the strip has an orange tick. The text under it says where the App
stands (``step k of n``, the branch). docs/app.md, "Time travel".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imgui_bundle import imgui

if TYPE_CHECKING:
    from kelab.app.panel.model import PanelModel

__all__ = ["BRANCH_TICK", "HistoryStrip"]

#: The colour of a branch point's tick (RGBA 0..1).
BRANCH_TICK = (1.0, 0.62, 0.2, 1.0)
_GREY = imgui.ImVec4(0.65, 0.67, 0.7, 1.0)
_GRAB_PADDING = 2.0  # Dear ImGui's slider: the grab stays this far inside the frame


class HistoryStrip:
    """Draws the timeline slider of a `PanelModel`'s App and seeks when it is dragged.

    Args:
        model: The panel's model (its App's ``time_travel`` and clock).
    """

    def __init__(self, model: PanelModel) -> None:
        self.model = model
        self.rect = (0, 0, 0, 0)
        """The slider's frame ``(x0, y0, x1, y1)`` in pixels, as drawn last frame."""
        self.ticks: dict[int, float] = {}
        """Branch point -> the x of its tick, as drawn last frame."""
        self.line = ""
        """The line under the slider as drawn last frame (``step 105 (newest); branch 0``)."""
        self._grab = 0.0

    def key(self) -> tuple[object, ...]:
        """What the strip shows, for `PanelUI.shown_key`.

        A window running live leaves the step out (the line refreshes with the page, not
        every step); a headless frame is a record (a PNG, a video frame), so its line
        always shows the step it was drawn at.
        """
        app = self.model.app
        tt = app.time_travel
        hist = tt.history
        exact = app.clock.paused or tt.fixed_step < hist.stop - 1 or app.config.headless
        at = tt.fixed_step if exact else None
        bounds = (hist.start, hist.stop) if at is not None else ()
        return (at, tt.branch, tt.branch_points, *bounds)

    def x_of(self, step: int) -> float:
        """The x (pixels) where the slider's grab centre stands at ``step``."""
        x0, _, x1, _ = self.rect
        hist = self.model.app.time_travel.history
        lo, hi = hist.start, hist.stop - 1
        usable = (x1 - x0) - 2 * _GRAB_PADDING - self._grab
        frac = 0.0 if hi <= lo else (step - lo) / (hi - lo)
        return x0 + _GRAB_PADDING + self._grab / 2 + frac * usable

    def draw(self) -> None:
        """Draw the strip (inside the panel window, between ImGui's new_frame and render)."""
        app = self.model.app
        tt = app.time_travel
        hist = tt.history
        lo, hi = hist.start, max(hist.stop - 1, hist.start)
        imgui.align_text_to_frame_padding()
        imgui.text("History")
        imgui.same_line()
        imgui.set_next_item_width(-1)
        imgui.begin_disabled(hi == lo)
        changed, step = imgui.slider_int("##history", tt.fixed_step, lo, hi, f"step %d of {hi}")
        imgui.end_disabled()
        a, b = imgui.get_item_rect_min(), imgui.get_item_rect_max()
        self.rect = (int(a.x), int(a.y), int(b.x), int(b.y))
        width = (b.x - a.x) - 2 * _GRAB_PADDING
        self._grab = max(width / (hi - lo + 1), imgui.get_style().grab_min_size)
        if imgui.is_item_activated() and not app.clock.paused:
            app.clock.pause()  # scrubbing: time stands still where the slider leaves it
        if changed and step != tt.fixed_step and lo <= step <= hi:
            tt.seek(int(step))
        draw = imgui.get_window_draw_list()
        color = imgui.get_color_u32(imgui.ImVec4(*BRANCH_TICK))
        self.ticks = {}
        for point in tt.branch_points:
            x = self.x_of(point)
            self.ticks[point] = x
            for y0, y1 in ((a.y, a.y + 3), (b.y - 3, b.y)):  # notches: the text stays clear
                draw.add_line(imgui.ImVec2(x, y0), imgui.ImVec2(x, y1), color, 3.0)
        rewound = tt.fixed_step < hi
        where = f"rewound to step {tt.fixed_step} of {hi}" if rewound else f"step {hi} (newest)"
        points = len(tt.branch_points)
        marks = f", {points} branch point{'s' * (points != 1)} (orange)" if points else ""
        self.line = f"{where}; branch {tt.branch}{marks}"
        imgui.text_colored(_GREY, self.line)
