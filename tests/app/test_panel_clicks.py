"""The complete Settings panel driven by real clicks in a real window (Xvfb; #27)."""

from __future__ import annotations

import os

import pygame
import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke

MENU_OPEN = (62, 68, 82)  # kelab.app.menu's open-menu colour
SHOTS = os.environ.get("KELAB_SHOTS")  # a folder: save the screenshots there to look at


def _frames(app, clock, n=2):
    for _ in range(n):
        clock.advance(0.05)
        app.renderFrameOnce()


def _click(app, clock, rect):
    pos = ((rect[0] + rect[2]) // 2, (rect[1] + rect[3]) // 2)
    for kind in ("mouse_move", "mouse_down", "mouse_up"):
        app.inject_event(ke.InputEvent(kind, button=None if kind == "mouse_move" else 1, pos=pos))
        _frames(app, clock, 1)
    _frames(app, clock, 2)


def _key(app, clock, key, mods=frozenset()):
    for kind in ("key_down", "key_up"):
        app.inject_event(ke.InputEvent(kind, key=key, mods=mods))
        _frames(app, clock, 1)


def _shot(app, name):
    if SHOTS:
        app.write_pixels_png(os.path.join(SHOTS, name))


class Free(ke.App):
    def setup(self):
        self.dts = []

    def free_update(self, dt):
        self.dts.append(dt)


@pytest.mark.parametrize("backend", ["gl", "pygame"])
def test_menu_bar_and_new_panel_items_by_real_clicks(tmp_path, backend, real_window):
    clock = FakeClock()
    app = make_app(
        clock,
        Free,
        backend=backend,
        headless=False,
        world=ke.World(ball_scene(2)),
        size=(960, 540),
        settings=tmp_path / "s.kelab.json",
        recording_dir=tmp_path,
        time_mode=ke.TimeMode.SIM_REALTIME,
    )
    _frames(app, clock)
    menu = app.menu
    assert menu.shown  # a window has the menu bar
    # Edit -> Settings opens the panel (what F2 does)
    _click(app, clock, menu.title_rect("Edit"))
    assert menu.open_menu == "Edit"
    _shot(app, f"menu_edit_{backend}.png")
    _click(app, clock, menu.item_rect("Settings"))
    assert app.panel_open and menu.open_menu is None
    ui = app.panel_window.host.ui
    # 1: rename Capture on the Time Runners page: click its name, select all, type, Enter
    _click(app, clock, ui.name_rects["Capture"])
    _key(app, clock, "a", frozenset({"ctrl"}))
    for ch in "camera":
        _key(app, clock, ch, frozenset({"shift"}) if ch == "c" and False else frozenset())
    _key(app, clock, "return")
    assert "camera" in app.timeline.runners and "Capture" not in app.timeline.runners
    _shot(app, f"panel_renamed_{backend}.png")
    # 2: the Scripts page's checkbox turns the free-step scripts on
    _click(app, clock, ui.tabs["Scripts"])
    assert app.panel.page == "Scripts" and not app.free_step_scripts
    _click(app, clock, ui.checkbox_rects["free_step_scripts"])
    assert app.free_step_scripts and app.dts
    _shot(app, f"panel_scripts_{backend}.png")
    # 6: Simulation -> Pause, then File -> Save screenshot
    _click(app, clock, menu.title_rect("Simulation"))
    _click(app, clock, menu.item_rect("Pause"))
    assert app.paused
    steps = app.clock.steps
    _click(app, clock, menu.title_rect("Simulation"))
    _click(app, clock, menu.item_rect("Step"))
    assert app.clock.steps == steps + 1
    _click(app, clock, menu.title_rect("File"))
    dropdown = menu.rects(app.renderer.size)[1]  # where the open File menu is drawn
    _click(app, clock, menu.item_rect("Save screenshot"))
    assert menu.last_result.is_file() and menu.last_result.parent == tmp_path
    assert menu.pending_shot is None
    # the screenshot is the scene, not the open File menu drawn over it
    shot = pygame.surfarray.array3d(pygame.image.load(str(menu.last_result)))  # (w, h, 3)
    x0, y0, x1, y1 = dropdown
    menu_coloured = (shot[x0:x1, y0:y1] == MENU_OPEN).all(axis=-1).mean()
    assert menu_coloured < 0.2, menu_coloured
    picks = app.world.step_count
    _click(app, clock, menu.title_rect("File"))  # a click beside an open menu closes it
    _click(app, clock, (300, 300, 302, 302))
    assert menu.open_menu is None and not app.should_close()
    assert app.world.step_count == picks  # still paused
    _click(app, clock, menu.title_rect("File"))
    _click(app, clock, menu.item_rect("Quit"))
    assert app.should_close()
    app.close()


def test_menu_bar_is_off_headless_unless_asked_and_hud_keeps_clear(tmp_path):
    clock = FakeClock()
    app = make_app(clock, settings=tmp_path / "s.kelab.json")
    assert not app.menu.shown
    app.close()
    app = make_app(clock, menu_bar=True, show_hud=True, size=(640, 360), settings=tmp_path / "s")
    _frames(app, clock)
    hud = app.overlays.rects[-1]
    assert hud[1] >= 22  # below the bar
    app.close()
    with pytest.raises(ValueError, match="App.menu_bar must be True or False, got 1"):
        ke.App(menu_bar=1)
