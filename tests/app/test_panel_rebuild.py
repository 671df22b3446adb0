"""An untouched Settings panel is not rebuilt every frame, yet shows every change.

A headless frame is a record (a PNG, a video frame): while the App runs its panel is
rebuilt at each new step, so its History line names the step drawn; these tests hold the
App paused to watch the cache.
"""

from __future__ import annotations

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.panel.host import SETTLE_S
from kelab.app.panel.ui import IDLE_REFRESH_S, PLOT_REFRESH_S

pytest.importorskip("imgui_bundle")


def _app(tmp_path, backend, page):
    clock = FakeClock()
    app = make_app(
        clock,
        backend=backend,
        world=ke.World(ball_scene(2)),
        panel=True,
        size=(640, 360),
        time_mode=ke.TimeMode.SIM_HIGH_PERF,
        settings=tmp_path / "s.kelab.json",
    )
    app.panel.set_page(page)
    return app, clock


def _counting(app):
    """Render one frame; count the ImGui frames built (PanelUI.draw calls)."""
    host = app.panel_window.host
    calls = []
    draw = host.ui.draw
    host.ui.draw = lambda size: (calls.append(1), draw(size))[1]
    return calls


@pytest.mark.parametrize("backend", ["gl", "pygame"])
def test_untouched_panel_is_shown_from_its_cache_and_changes_show_next_frame(tmp_path, backend):
    app, clock = _app(tmp_path, backend, "Execution Order")
    app.pause()  # a headless frame's History line shows each new step (#42): hold still
    for _ in range(3):
        clock.advance(0.3)  # past the start-up settling
        app.renderFrameOnce()
    built = _counting(app)
    before = app.read_rgb_pixels()
    for _ in range(5):
        clock.advance(0.01)
        app.renderFrameOnce()
    assert built == []  # nothing changed: no ImGui frame, the cached image
    assert np.array_equal(app.read_rgb_pixels(), before)  # the same panel (and scene)
    # a change made in code (not through the panel) shows on the next frame
    app.timeline.bind(lambda ts: None, runner="Capture", name="logger")
    clock.advance(0.01)
    app.renderFrameOnce()
    assert built == [1]
    assert "logger" in app.panel_window.host.ui.rows["Execution Order"]
    # the idle refresh still rebuilds now and then
    clock.advance(IDLE_REFRESH_S)
    app.renderFrameOnce()
    assert built == [1, 1]
    # input over the panel rebuilds at once and for SETTLE_S after it
    x, y, w, h = app.panel_window.host.ui.rect
    app.inject_event(ke.InputEvent("mouse_move", pos=(x + w // 2, y + h // 2)))
    app.renderFrameOnce()
    app.renderFrameOnce()
    assert len(built) == 4
    clock.advance(SETTLE_S + 0.01)
    app.renderFrameOnce()  # the last settling frame
    n = len(built)
    clock.advance(0.01)
    app.renderFrameOnce()
    assert len(built) == n
    app.close()


def test_plots_page_redraws_at_its_refresh_rate(tmp_path):
    app, clock = _app(tmp_path, "gl", "Plots")
    app.pause()  # running, a headless frame is rebuilt at each new step (#42)
    for _ in range(3):
        clock.advance(0.3)
        app.renderFrameOnce()
    built = _counting(app)
    frames = 40
    for _ in range(frames):  # 0.8 s at 50 fps
        clock.advance(0.02)
        app.renderFrameOnce()
    expected = frames * 0.02 / PLOT_REFRESH_S
    assert expected - 2 <= len(built) <= expected + 2
    app.close()


def test_closing_and_reopening_rebuilds(tmp_path):
    app, clock = _app(tmp_path, "gl", "Time Runners")
    for _ in range(3):
        clock.advance(0.3)
        app.renderFrameOnce()
    built = _counting(app)
    app.panel_open = False
    clock.advance(0.01)
    app.renderFrameOnce()
    app.panel.add_runner()
    app.panel_open = True
    clock.advance(0.01)
    app.renderFrameOnce()
    assert built == [1]
    assert app.panel_window.host.ui.rows["Time Runners"][-1] == "Runner 3: Runner 3"
    app.close()


def test_a_running_headless_frame_names_the_step_it_was_drawn_at(tmp_path):
    """The History line of each headless frame (a PNG, a video frame) is the step drawn,
    not one up to IDLE_REFRESH_S old (#42 item 5)."""
    app, clock = _app(tmp_path, "gl", "Time Runners")
    lines = []
    for _ in range(40):
        clock.advance(0.02)
        app.renderFrameOnce()
        lines.append((app.panel_window.host.ui.history.line, app.fixed_step))
    app.close()
    assert lines[-1][1] > 20
    for line, step in lines:
        assert line.startswith(f"step {step} (newest); branch 0"), (line, step)
