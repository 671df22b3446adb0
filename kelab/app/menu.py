"""The window's menu bar: Edit -> Settings (F2) and the App's other actions.

A strip along the top of the window with three menus: **File** (Save screenshot,
Quit), **Edit** (Settings, F2) and **Simulation** (Pause/Resume, Step, Record video). A
click on a title opens its menu, a click on an item runs it and closes the menu, a click
anywhere else closes it; the clicks the menu takes reach nothing else. Each item calls
the App's public control (the same as its hotkey), given as `kelab.app.ports.Controls`;
File -> Save screenshot writes the next frame through the ``save_png`` it is given.
Drawn with the canvas (both backends; no imgui needed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kelab.app.ports import Controls
    from kelab.render.canvas import Canvas
    from kelab.render.events import InputEvent

__all__ = ["BAR_HEIGHT", "MenuBar", "MenuItem", "screenshot_path"]

BAR_HEIGHT = 22
_FONT = 14
_ITEM_H = 22
_BAR = (36, 39, 46)
_OPEN = (62, 68, 82)
_TEXT = (225, 228, 235)
_GREY = (150, 155, 165)

Rect = tuple[int, int, int, int]


class MenuItem(NamedTuple):
    """One menu entry: what it says, its shortcut, and what it does (``action()``)."""

    label: str
    shortcut: str
    action: Callable[[], object]


def screenshot_path(folder: Path, title: str) -> Path:
    """``folder/<title>-shot-NNN.png``, the first free number."""
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in title).strip("-") or "kelab"
    n = 0
    while (folder / f"{slug}-shot-{n:03d}.png").exists():
        n += 1
    return folder / f"{slug}-shot-{n:03d}.png"


def _menus(c: Controls, shoot: Callable[[], Path]) -> dict[str, list[MenuItem]]:
    return {
        "File": [
            MenuItem("Save screenshot", "", shoot),
            MenuItem("Quit", "Esc", c.request_close),
        ],
        "Edit": [MenuItem("Hide Settings" if c.panel_open() else "Settings", "F2", c.toggle_panel)],
        "Simulation": [
            MenuItem("Resume" if c.paused() else "Pause", "Enter", c.toggle_pause),
            MenuItem("Step", "Space", c.step_once),
            MenuItem(
                "Stop recording" if c.recording() else "Record video",
                "F9",
                c.toggle_video_recording,
            ),
        ],
    }


class MenuBar:
    """The menu bar of an App's window (``app.menu``).

    Args:
        controls: The App's controls the items call.
        shown: Whether the bar is shown (``AppConfig.menu_bar``).
        save_png: Writes the last frame drawn to a PNG file (``App.write_pixels_png``).
        folder: Where screenshots go (``AppConfig.recording_dir``).
        title: Names the screenshots' files (``AppConfig.title``).
    """

    def __init__(
        self,
        controls: Controls,
        shown: bool,
        save_png: Callable[[Path], Path],
        folder: Path,
        title: str,
    ) -> None:
        self._controls = controls
        self._save_png = save_png
        self._folder = folder
        self._title = title
        self.shown = shown
        """Whether the bar is drawn and answers clicks (settable)."""
        self.open_menu: str | None = None
        """The menu whose items are shown, or None."""
        self.last_result: object = None
        """What the last item run returned (the screenshot's path...)."""
        self.pending_shot: Path | None = None
        """Where the next frame drawn goes (File -> Save screenshot), or None."""
        self._titles: dict[str, Rect] = {}
        self._items: list[tuple[Rect, MenuItem]] = []
        self._width = 0

    def menus(self) -> dict[str, list[MenuItem]]:
        """The menus and their items, labelled for the App's state now."""
        return _menus(self._controls, self.shoot_next_frame)

    def shoot_next_frame(self) -> Path:
        """Save the next frame drawn as a screenshot; return the path it will have.

        File -> Save screenshot runs while the frame on screen still shows the open File
        menu; the menu closes on that click, so the next frame is the scene without it.
        `after_frame` writes it.
        """
        self.pending_shot = screenshot_path(self._folder, self._title)
        return self.pending_shot

    def after_frame(self) -> Path | None:
        """Write the pending screenshot from the frame just drawn (the App calls it).

        Returns:
            The path written, or None when none was pending.
        """
        path, self.pending_shot = self.pending_shot, None
        return None if path is None else self._save_png(path)

    @property
    def height(self) -> int:
        """The pixel rows the bar covers at the top of the window (0 while hidden)."""
        return BAR_HEIGHT if self.shown else 0

    def rects(self, display: tuple[int, int]) -> list[Rect]:
        """What the bar (and an open menu) covers, for the overlays to keep clear."""
        if not self.shown:
            return []
        out = [(0, 0, display[0], BAR_HEIGHT)]
        if self.open_menu is not None and self._items:
            xs = [r for r, _ in self._items]
            out.append((xs[0][0], xs[0][1], xs[-1][2], xs[-1][3]))
        return out

    def title_rect(self, name: str) -> Rect:
        """Where a menu's title was drawn ``(x0, y0, x1, y1)`` (after a frame)."""
        return self._titles[name]

    def item_rect(self, label: str) -> Rect:
        """Where an item of the open menu was drawn."""
        for rect, item in self._items:
            if item.label == label:
                return rect
        raise KeyError(f"no item {label!r} in the open menu {self.open_menu!r}")

    def _layout(self, canvas: Canvas) -> None:
        x = 6
        self._titles = {}
        menus = self.menus()
        for name in menus:
            w = canvas.text_size(name, _FONT)[0] + 16
            self._titles[name] = (x, 0, x + w, BAR_HEIGHT)
            x += w
        self._items = []
        if self.open_menu in menus:
            items = menus[self.open_menu]
            x0 = self._titles[self.open_menu][0]
            width = max(
                canvas.text_size(i.label, _FONT)[0] + canvas.text_size(i.shortcut, _FONT)[0]
                for i in items
            )
            width += 48
            for k, item in enumerate(items):
                y0 = BAR_HEIGHT + k * _ITEM_H
                self._items.append(((x0, y0, x0 + width, y0 + _ITEM_H), item))

    def draw(self, canvas: Canvas) -> None:
        """Draw the bar and the open menu (screen space, over the scene)."""
        if not self.shown:
            return
        self._layout(canvas)
        w = canvas.camera.size[0]
        canvas.screen_rect((0, 0, w, BAR_HEIGHT), _BAR)
        for name, (x0, y0, x1, y1) in self._titles.items():
            if name == self.open_menu:
                canvas.screen_rect((x0, y0, x1, y1), _OPEN)
            canvas.text((x0 + 8, y0 + 4), name, _TEXT, _FONT, screen_space=True)
        if self._items:
            (x0, y0, _, _), (_, _, x1, y1) = self._items[0][0], self._items[-1][0]
            canvas.screen_rect((x0, y0, x1, y1 + 2), _OPEN)
            for (ix0, iy0, ix1, _), item in self._items:
                canvas.text((ix0 + 10, iy0 + 4), item.label, _TEXT, _FONT, screen_space=True)
                sw = canvas.text_size(item.shortcut, _FONT)[0]
                canvas.text(
                    (ix1 - sw - 10, iy0 + 4), item.shortcut, _GREY, _FONT, screen_space=True
                )

    def feed(self, ev: InputEvent) -> bool:
        """Offer an input event to the bar; True when the bar took it (nothing else sees it)."""
        if not self.shown or ev.kind not in ("mouse_down", "mouse_up") or ev.pos is None:
            return False
        x, y = ev.pos
        inside = [n for n, r in self._titles.items() if r[0] <= x < r[2] and r[1] <= y < r[3]]
        hit = [i for r, i in self._items if r[0] <= x < r[2] and r[1] <= y < r[3]]
        if ev.kind == "mouse_up":
            return bool(inside or hit or y < BAR_HEIGHT)
        if inside:
            self.open_menu = None if self.open_menu == inside[0] else inside[0]
            return True
        was_open, self.open_menu, self._items = self.open_menu is not None, None, []
        if hit:
            self.last_result = hit[0].action()
            return True
        return was_open or y < BAR_HEIGHT
