"""The Time Manager page (#27.5): the engine's own systems per phase, runner, rate, cost."""

from __future__ import annotations

import os

import pytest
from app_helpers import FakeClock, ball_scene, make_app
from test_panel_clicks import _click, _frames

import kelab as ke
from kelab.app.panel import load_settings
from kelab.app.systems import SystemCost
from kelab.timing.timeline import Phase

SHOTS = os.environ.get("KELAB_SHOTS")


def _app(tmp_path, **kw):
    kw.setdefault("time_mode", ke.TimeMode.SIM_HIGH_PERF)
    kw.setdefault("settings", tmp_path / "s.kelab.json")
    kw.setdefault("world", ke.World(ball_scene(2)))
    return make_app(FakeClock(), **kw)


def test_every_engine_system_call_is_timed_and_listed_by_phase(tmp_path):
    app = _app(tmp_path)
    for _ in range(30):
        app.renderFrameOnce()
    rows = app.panel.time_manager_rows()
    assert [(r.phase, r.name, r.runner, r.hz) for r in rows] == [
        (Phase.CONTROL, "drag_spring", "Robot", 50.0),
        (Phase.PHYSICS, "world.step", "Robot", 50.0),
        (Phase.EXPORT, "sync_point", "Sync", 10.0),
    ]
    step = app.systems["world.step"].cost
    assert step.calls == app.world.step_count == 30  # one count per call, none missed
    assert step.last_ns > 0 and step.total_ns >= step.last_ns
    assert rows[1].last_s == step.last_ns * 1e-9 and rows[1].mean_s == step.total_ns * 1e-9 / 30
    assert app.systems["sync_point"].cost.calls == 6  # 10 Hz over 0.6 s (t = 0 .. 0.58)
    # moved and turned off on the Subsystems page: the Time Manager follows
    assert app.panel.set_binding("drag_spring", runner="Capture", phase="acquisition")
    assert app.panel.set_binding("sync_point", enabled=False)
    app.renderFrameOnce()
    rows = {r.name: r for r in app.panel.time_manager_rows()}
    drag = rows["drag_spring"]
    assert (drag.phase, drag.runner, drag.hz) == (Phase.ACQUISITION, "Capture", 30.0)
    assert not rows["sync_point"].enabled and rows["sync_point"].calls == 6
    app.close()


def test_system_cost_counts_and_a_failing_system_is_still_timed(tmp_path):
    c = SystemCost()
    assert c.last_s is None and c.mean_s is None and c.calls == 0
    c.add(2000)
    c.add(4000)
    assert (c.calls, c.last_ns, c.total_ns, c.mean_s) == (2, 4000, 6000, 3e-6)
    c.reset()
    assert c.calls == 0 and c.mean_s is None
    app = _app(tmp_path)
    with pytest.raises(ValueError, match="engine system 'world.step' exists"):
        app.systems.add("world.step", "again", print, "Robot", Phase.PHYSICS, 0)
    with pytest.raises(KeyError, match="no engine system 'nope'"):
        app.systems["nope"]

    def boom(ts):
        raise RuntimeError("bad system")

    app.systems.add("boom", "Failing", boom, "Robot", Phase.VALIDATION, 0)
    with pytest.raises(RuntimeError, match="bad system"):
        app.renderFrameOnce()
    assert app.systems["boom"].cost.calls == 1


def test_timing_does_not_change_the_simulation(tmp_path):
    def run(timed):
        app = _app(tmp_path, world=ke.World(ball_scene(3)))
        if not timed:  # the bare work, bound without the timing wrapper
            b = app.systems["world.step"].binding
            b.callback = app.systems["world.step"].fn
        for _ in range(40):
            app.renderFrameOnce()
        poses = app.world.body_poses.tobytes()
        app.close()
        return poses

    assert run(True) == run(False)


def test_time_manager_page_by_real_clicks_and_the_page_round_trips(tmp_path, real_window):
    clock = FakeClock()
    path = tmp_path / "s.kelab.json"
    app = make_app(
        clock,
        backend="gl",
        headless=False,
        world=ke.World(ball_scene(2)),
        size=(960, 540),
        settings=path,
        time_mode=ke.TimeMode.SIM_REALTIME,
    )
    _frames(app, clock)
    _click(app, clock, app.menu.title_rect("Edit"))
    _click(app, clock, app.menu.item_rect("Settings"))
    ui = app.panel_window.host.ui
    _click(app, clock, ui.tabs["Time Manager"])
    assert app.panel.page == "Time Manager"
    _frames(app, clock, 12)  # the page refreshes its costs every 0.5 s
    shown = ui.rows["Time Manager"]
    names = [row.split(" | ")[0] for row in shown]
    assert names == ["drag_spring", "world.step", "sync_point"]
    step = shown[1].split(" | ")
    assert step[1:3] == ["Robot", "50"] and step[3].endswith(("us", "ms"))
    assert step[4].endswith(("us", "ms"))
    assert ui.overflow == [] and ui.elided == {}  # nothing cut off
    if SHOTS:
        app.write_pixels_png(os.path.join(SHOTS, "panel_time_manager.png"))
    app.panel.save()  # the Save button
    app.close()
    assert load_settings(path).page == "Time Manager"


def test_the_viewport_off_frame_keeps_its_overlays_clear_of_the_menu_bar(tmp_path):
    clock = FakeClock()
    app = make_app(
        clock,
        world=ke.World(ball_scene(1)),
        menu_bar=True,
        show_hud=True,
        size=(640, 360),
        time_mode=ke.TimeMode.SIM_HIGH_PERF,
        disable_viewport_rendering=True,
        settings=tmp_path / "s.kelab.json",
    )
    for _ in range(3):
        clock.advance(0.5)
        app.renderFrameOnce()
    bar = app.menu.rects((640, 360))[0]
    drawn = [r for r in app.overlays.rects if r != bar]
    assert bar in app.overlays.rects and len(drawn) >= 2  # the notice and the HUD
    for r in drawn:  # below the bar, none covering it
        assert r[1] >= bar[3], (r, bar)
    app.close()
