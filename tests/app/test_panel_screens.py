"""The Settings panel on screen: both backends, headless and windowed (Xvfb), and input."""

from __future__ import annotations

import re

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.lidar_recorder import LidarRecorder
from kelab.app.panel import PAGES

HIGH = ke.TimeMode.SIM_HIGH_PERF


class Picker(ke.App):
    def setup(self):
        self.picks = []
        self.presses = 0

    def on_pick(self, body):
        self.picks.append(body.path)

    def fixed_update(self, ts):
        self.presses += self.input.mouse_pressed(1)


def _app(tmp_path, backend="pygame", headless=True, panel=False, **kw):
    kw.setdefault("world", ke.World(ball_scene(2)))
    kw.setdefault("cls", ke.App)
    kw.setdefault("size", (640, 360))
    cls = kw.pop("cls")
    return make_app(
        FakeClock(),
        cls,
        backend=backend,
        headless=headless,
        panel=panel,
        time_mode=HIGH,
        settings=tmp_path / "s.kelab.json",
        **kw,
    )


def _frames(tmp_path, backend, headless, panel, page="Execution Order"):
    app = _app(tmp_path, backend, headless, panel)
    app.panel.set_page(page)
    for _ in range(12):
        app.renderFrameOnce()
    img = app.read_rgb_pixels()
    rect = app.panel_window.host.ui.rect if app.panel_window.host is not None else None
    app.close()
    return img, rect


def _check_only_panel_differs(closed, opened, rect):
    x, y, w, h = rect
    assert w > 200 and h > 200
    inside = np.zeros(closed.shape[:2], dtype=bool)
    inside[y : y + h, x : x + w] = True
    diff = np.any(closed != opened, axis=2)
    assert not diff[~inside].any(), "the panel changed pixels outside its window"
    assert diff[inside].mean() > 0.5, "the panel is not drawn"


@pytest.mark.parametrize("backend", ["pygame", "gl"])
def test_headless_panel_open_vs_closed_differs_in_the_panel_only(tmp_path, backend):
    closed, _ = _frames(tmp_path, backend, True, False)
    opened, rect = _frames(tmp_path, backend, True, True)
    _check_only_panel_differs(closed, opened, rect)


@pytest.mark.parametrize("backend", ["pygame", "gl"])
def test_windowed_panel_open_vs_closed_differs_in_the_panel_only(tmp_path, backend, real_window):
    closed, _ = _frames(tmp_path, backend, False, False)
    opened, rect = _frames(tmp_path, backend, False, True)
    _check_only_panel_differs(closed, opened, rect)


def test_both_backends_draw_the_same_panel(tmp_path):
    a, rect_a = _frames(tmp_path, "pygame", True, True, page="Time Runners")
    b, rect_b = _frames(tmp_path, "gl", True, True, page="Time Runners")
    assert rect_a == rect_b
    x, y, w, h = rect_a
    pa, pb = a[y : y + h, x : x + w].astype(int), b[y : y + h, x : x + w].astype(int)
    assert np.mean(np.abs(pa - pb) > 8) < 0.01  # same pixels up to compositing rounding


def test_each_page_renders_its_rows(tmp_path):
    app = _app(tmp_path, "gl", panel=True)
    app.timeline.bind(lambda ts: None, runner="Capture", name="logger")
    app.panel.add_plot("/World/Ball0.y")
    shown = {}
    for page in PAGES:
        assert app.panel.set_page(page)
        app.renderFrameOnce()
        shown[page] = app.panel_window.host.ui.rows[page]
    p = app.panel
    assert shown["Time Runners"] == ["Runner 0: Robot", "Runner 1: Capture", "Runner 2: Sync"]
    assert (
        shown["Scripts"]
        == [r.label for r in p.script_rows()]
        == [
            "fixed_update",
            "late_update",
            "logger",
        ]
    )
    assert shown["Subsystems"] == [
        "Mouse drag spring",
        "Physics (World.step)",
        "Sync points (app.sync)",
    ]
    assert shown["Recorder"] == ["data recorder", "video recorder", "lidar recorder"]
    assert shown["Execution Order"] == [r.name for r in app.execution_order()]
    assert shown["Plots"] == [
        "/World/Ball0.y",
        "frame.time_ms",
        "frame.steps_per_frame",
        "frame.real_time_factor",
    ]
    # live: a change shows on the next frame
    p.add_runner()
    p.set_page("Time Runners")
    app.renderFrameOnce()
    assert app.panel_window.host.ui.rows["Time Runners"][-1] == "Runner 3: Runner 3"
    app.close()


def test_f2_toggles_the_panel(tmp_path):
    app = _app(tmp_path, "pygame")
    app.renderFrameOnce()
    assert not app.panel_open
    app.inject_event(ke.InputEvent("key_down", key="f2"))
    app.renderFrameOnce()
    assert app.panel_open and app.panel_window.host is not None
    app.inject_event(ke.InputEvent("key_down", key="f2"))
    app.renderFrameOnce()
    assert not app.panel_open
    with pytest.raises(ValueError, match="App.panel_open must be True or False, got 1"):
        app.panel_open = 1
    app.close()


@pytest.mark.parametrize("backend", ["pygame", "gl"])
def test_a_press_on_the_panel_reaches_neither_picking_nor_input(tmp_path, backend):
    app = _app(tmp_path, backend, panel=True, cls=Picker)
    app.renderFrameOnce()
    x, y, w, h = app.panel_window.host.ui.rect
    ball = (-1.0, 0.2)  # /World/Ball0: put it under the panel, then outside
    app.camera.center = (-1.0 - (x + w / 2 - 320) / app.camera.zoom, 0.2)
    sx, sy = (int(v) for v in app.camera.world_to_screen(ball))
    assert x < sx < x + w and y < sy < y + h
    for kind in ("mouse_move", "mouse_down", "mouse_up"):
        app.inject_event(
            ke.InputEvent(kind, button=None if kind == "mouse_move" else 1, pos=(sx, sy))
        )
    app.inject_event(ke.InputEvent("mouse_wheel", pos=(sx, sy), wheel=(0.0, -1.0)))
    app.renderFrameOnce()
    assert app.picks == [] and app.presses == 0 and app.dragged is None
    assert not app.input.frame_mouse_pressed(1)
    outside = x - 60 if x > 100 else x + w + 60
    app.camera.center = (-1.0 - (outside - 320) / app.camera.zoom, 0.2)  # the ball outside
    sx, sy = (int(v) for v in app.camera.world_to_screen(ball))
    assert not (x <= sx < x + w)
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=(sx, sy)))
    app.renderFrameOnce()
    assert app.picks == ["/World/Ball0"] and app.presses == 1
    app.close()


def _lidar_world():
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    bot = ke.Prop(ke.Box(0.3, 0.3), mass=1.0, initial_pose=ke.Pose(0.0, 1.0))
    b.add(bot, at="/World/Bot")
    for k, angle in enumerate((-1.2, -0.6, 0.0)):
        b.rangefinder(f"beam{k}", "/World/Bot", angle=angle - np.pi / 2, max_range=5.0)
    return ke.World(b.build(), num_envs=2)


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_lidar_recorder_records_every_beam_per_step(tmp_path, suffix):
    world = _lidar_world()
    app = _app(tmp_path, world=world)
    rec = app.add_recorder(LidarRecorder(tmp_path / f"scan{suffix}", env_ids=(0, 1)))
    for _ in range(10):  # 0.2 s: Capture steps at 0, 33, ..., 167 ms
        app.renderFrameOnce()
    app.close()
    assert rec.scans == 6 and rec.beams == ("beam0", "beam1", "beam2")
    if suffix == ".npz":
        with np.load(tmp_path / "scan.npz") as z:
            assert z["ranges"].shape == (6, 2, 3)
            assert list(z["beams"]) == ["beam0", "beam1", "beam2"]
            assert np.allclose(z["time"], np.arange(6) / 30)
            straight_down = z["ranges"][0, :, 2]
    else:
        lines = (tmp_path / "scan.csv").read_text().splitlines()
        assert (
            lines[0]
            == "time,step,env0:beam0,env0:beam1,env0:beam2,env1:beam0,env1:beam1,env1:beam2"
        )
        data = np.loadtxt(tmp_path / "scan.csv", delimiter=",", skiprows=1)
        assert data.shape == (6, 8)
        straight_down = data[0, [4, 7]]
    assert np.allclose(straight_down, 1.0, atol=0.01)  # from the box centre, 1 m up
    assert not list(tmp_path.glob("*.part"))


def test_lidar_recorder_through_the_panel_and_its_errors(tmp_path):
    app = _app(tmp_path, world=_lidar_world(), recording_dir=tmp_path)
    assert app.panel.set_recorder("lidar", runner="Robot", phase="validation")
    assert app.panel.start_recorder("lidar")
    for _ in range(4):
        app.renderFrameOnce()
    assert app.panel.stop_recorder("lidar")
    path = app.panel.last_files["lidar"]
    with np.load(path) as z:
        assert z["ranges"].shape == (4, 1, 3)
    plain = _app(tmp_path)  # balls: no rangefinder
    assert not plain.panel.start_recorder("lidar")
    assert "no rangefinder sensors" in plain.panel.message
    with pytest.raises(ValueError, match="must name rangefinders"):
        _app(tmp_path, world=_lidar_world()).add_recorder(
            LidarRecorder(tmp_path / "x.npz", sensors=["nope"])
        )
    with pytest.raises(ValueError, match="path must end in one of"):
        LidarRecorder(tmp_path / "x.txt")


def test_keys_go_to_the_panel_only_while_a_text_field_is_edited(tmp_path):
    class Keys(ke.App):
        seen = 0

        def fixed_update(self, ts):
            self.seen += self.input.key_pressed("a")

    app = _app(tmp_path, "pygame", panel=True, cls=Keys)
    app.renderFrameOnce()
    app.inject_events([ke.InputEvent("key_down", key="a"), ke.InputEvent("key_up", key="a")])
    app.renderFrameOnce()
    assert app.seen == 1  # no text field active: the App gets the key
    app.panel_window.host.want_text = True  # as when a text field has the keyboard
    app.inject_events([ke.InputEvent("key_down", key="a"), ke.InputEvent("key_up", key="a")])
    app.renderFrameOnce()
    assert app.seen == 1 and not app.input.frame_key_pressed("a")
    app.panel_window.host.want_text = True
    app.inject_event(ke.InputEvent("key_down", key="f2"))  # F2 still closes the panel
    app.renderFrameOnce()
    assert not app.panel_open
    app.close()


def test_the_footer_says_saved_only_for_a_file_that_exists(tmp_path):
    app = _app(tmp_path, panel=True)
    path = tmp_path / "s.kelab.json"
    app.renderFrameOnce()
    ui = app.panel_window.host.ui
    assert not path.exists()
    assert app.panel.settings_status() == "not saved yet"
    assert ui.footer == "s.kelab.json (not saved yet)"
    assert app.panel.set_runner_hz("Capture", 25)
    app.renderFrameOnce()
    assert ui.footer == "s.kelab.json (unsaved changes)"
    app.panel.save()
    app.renderFrameOnce()
    assert path.exists() and ui.footer == "s.kelab.json (saved)"
    path.unlink()  # deleted behind the App's back: the next frame says so
    app.renderFrameOnce()
    assert ui.footer == "s.kelab.json (not saved yet)"
    app.close()


def _click(app, clock, pos, frames=3):
    """A real click at ``pos``: move, press, release, each in its own frame."""
    for kind in ("mouse_move", "mouse_down", "mouse_up"):
        app.inject_event(ke.InputEvent(kind, button=None if kind == "mouse_move" else 1, pos=pos))
        clock.advance(0.05)
        app.renderFrameOnce()
    for _ in range(frames):
        clock.advance(0.05)
        app.renderFrameOnce()


@pytest.mark.parametrize("backend", ["gl", "pygame"])
def test_with_the_viewport_off_the_panel_still_answers_and_the_window_says_so(
    tmp_path, backend, real_window
):
    clock = FakeClock()
    app = make_app(
        clock,
        backend=backend,
        headless=False,
        world=ke.World(ball_scene(2)),
        panel=True,
        size=(800, 500),
        time_mode=HIGH,
        settings=tmp_path / "s.kelab.json",
    )
    clock.advance(0.05)
    app.renderFrameOnce()
    assert app.panel.set_disable_viewport_rendering(True)
    drawn = app.drawn_frames
    tab = app.panel_window.host.ui.tabs["Scripts"]
    _click(app, clock, ((tab[0] + tab[2]) // 2, (tab[1] + tab[3]) // 2))
    assert app.panel.page == "Scripts"  # the click reached the panel
    assert app.drawn_frames == drawn and app.clock.steps >= 7  # the World ran undrawn
    img = app.read_rgb_pixels()
    (panel,) = app.panel_window.rects((800, 500))
    bar = app.menu.rects((800, 500))
    notice = app.overlays.rects[1 + len(bar)]  # after the panel and the menu bar they keep clear
    assert not _overlap(notice, bar[0]) and not _overlap(notice, panel)
    x0, y0, x1, y1 = notice
    assert len(np.unique(img[y0:y1, x0:x1].reshape(-1, 3), axis=0)) > 4  # its text
    rest = np.ones(img.shape[:2], dtype=bool)
    for r in (panel, notice, *app.menu.rects((800, 500))):  # the window's menu bar too
        rest[r[1] : r[3], r[0] : r[2]] = False
    assert (img[rest] == app.live.background).all()  # no World drawn: the plain background
    app.write_pixels_png(tmp_path.parent / f"viewport_off_{backend}.png")
    app.close()


def _overlap(a, b):
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def _check_nothing_covers_anything(app):
    """The open panel, every overlay and every text: none covers another (issue 24.6)."""
    rects = app.overlays.rects
    assert rects[0] == app.panel_window.rects(app.renderer.size)[0]  # the panel, first
    for i, a in enumerate(rects):
        for b in rects[i + 1 :]:
            assert not _overlap(a, b), f"overlays {a} and {b} overlap"
    canvas = app.renderer.canvas
    for box, text in zip(canvas.text_boxes(), canvas.frame_texts, strict=True):
        if re.fullmatch(r"-?\d+ m", text[2]):
            continue  # the ground's metre marks: the scene, which the panel may cover
        hit = [r for r in rects if _overlap(box, r)]
        inside = [r for r in hit if r[0] <= box[0] and r[2] >= box[2] and r[1] <= box[1]]
        assert len(hit) <= 1 and hit == inside, f"text {box} is covered by {hit}"


class Titled(ke.App):
    def render(self, canvas, alpha):  # the user's own text, top left
        canvas.text((10, 10), "my scene title", (255, 255, 255), 16, screen_space=True)


@pytest.mark.parametrize("size", [(800, 500), (640, 360)])
def test_hud_badge_and_notices_never_cover_the_panel_or_each_other(tmp_path, size):
    app = _app(tmp_path, "gl", panel=True, cls=Titled, show_hud=True, size=size)
    app.start_video_recording(tmp_path / "v.mp4")
    for _ in range(4):
        app.renderFrameOnce()
    assert len(app.overlays.rects) == 2  # the panel, the HUD (the REC badge comes last)
    assert any(t[2].startswith("REC") for t in app.renderer.canvas.frame_texts)
    _check_nothing_covers_anything(app)
    app.write_pixels_png(tmp_path.parent / f"overlays_{size[0]}x{size[1]}.png")
    app.close()


def test_the_multi_rate_legend_is_never_under_the_panel(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "demos"))
    import multi_rate

    app = _app(
        tmp_path,
        "gl",
        panel=True,
        cls=multi_rate.MultiRate,
        world=ke.World(multi_rate.build_scene()),
        show_hud=True,
        size=(960, 540),
    )
    app.add_recorder(ke.DataRecorder(tmp_path / "multi_rate.csv"))
    app.panel.set_page("Execution Order")
    for _ in range(6):
        app.renderFrameOnce()
    texts = [t[2] for t in app.renderer.canvas.frame_texts]
    assert any("red: shared step" in t for t in texts)
    # the panel, the strip, the legend, the counts, the HUD (stacked under the legend)
    assert len(app.overlays.rects) == 5
    hud = app.overlays.rects[-1]
    assert hud[0] < 100 and hud[3] < 540 - 100  # top left, clear of the timeline strip
    _check_nothing_covers_anything(app)
    app.write_pixels_png(tmp_path.parent / "multi_rate_overlays.png")
    app.close()


def test_f2_without_imgui_shows_a_one_line_notice_in_the_window(tmp_path, monkeypatch):
    import sys

    from kelab.app.panel_window import NOTICE_S

    monkeypatch.setitem(sys.modules, "imgui_bundle", None)  # `import imgui_bundle` fails
    with pytest.raises(ImportError):
        import imgui_bundle  # noqa: F401
    clock = FakeClock()
    app = make_app(clock, size=(640, 360), settings=tmp_path / "s.kelab.json", show_hud=True)
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key="f2"))
    with pytest.warns(UserWarning, match="needs imgui-bundle"):
        app.renderFrameOnce()
    assert not app.panel_open
    texts = [t[2] for t in app.renderer.canvas.frame_texts]
    notice = [t for t in texts if "pip install 'kelab[panel]'" in t]
    assert notice == ["The Settings panel (F2) needs imgui-bundle: pip install 'kelab[panel]'"]
    _check_nothing_covers_anything_but_no_panel(app)
    app.write_pixels_png(tmp_path.parent / "f2_without_imgui.png")
    clock.advance(NOTICE_S)
    app.renderFrameOnce()
    assert not [t for t in app.renderer.canvas.frame_texts if "kelab[panel]" in t[2]]
    app.close()


def test_f2_notice_fits_a_small_window(tmp_path, monkeypatch):
    """At 320x200 the F2 notice wraps to fit: every text box and its box lie in the frame."""
    import sys

    monkeypatch.setitem(sys.modules, "imgui_bundle", None)  # `import imgui_bundle` fails
    clock = FakeClock()
    app = make_app(clock, size=(320, 200), settings=tmp_path / "s.kelab.json")
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key="f2"))
    with pytest.warns(UserWarning, match="needs imgui-bundle"):
        app.renderFrameOnce()
    canvas = app.renderer.canvas
    boxes = [
        box
        for box, text in zip(canvas.text_boxes(), canvas.frame_texts, strict=True)
        if text[3]
        and text[2] in "The Settings panel (F2) needs imgui-bundle: pip install 'kelab[panel]'"
    ]
    words = " ".join(
        t[2]
        for t in canvas.frame_texts
        if t[2] in "The Settings panel (F2) needs imgui-bundle: pip install 'kelab[panel]'"
    )
    assert "needs imgui-bundle" in words and "kelab[panel]" in words  # all of it, wrapped
    assert len(boxes) >= 2
    for x0, y0, x1, y1 in [*boxes, app.overlays.rects[-1]]:
        assert 0 <= x0 and x1 <= 320 and 0 <= y0 and y1 <= 200, (x0, y0, x1, y1)
    app.write_pixels_png(tmp_path.parent / "f2_notice_320x200.png")
    app.close()


def _check_nothing_covers_anything_but_no_panel(app):
    rects = app.overlays.rects
    assert len(rects) == 2  # the notice, the HUD
    assert not _overlap(*rects)


def test_panel_text_wraps_or_is_shortened_with_the_full_text_on_hover(tmp_path):
    """Issue 24.7: no text is cut at the panel's edge; long names show in full on hover."""
    app = _app(tmp_path, "gl", panel=True, size=(640, 400))
    long_name = "DataRecorder(multi_rate_with_a_rather_long_file_name.csv)"
    for k in range(4):
        app.timeline.bind(lambda ts: None, runner="Capture", name=f"{long_name}#{k}")
    app.timeline.add_runner("A runner with a very long name indeed", 10)
    app.add_recorder(ke.DataRecorder(tmp_path / f"{'long_' * 12}recording.csv"))
    app.renderFrameOnce()
    host = app.panel_window.host
    ui = host.ui
    assert not app.panel.remove_runner("Capture")  # a long refusal
    assert len(app.panel.message) > 200
    for page in PAGES:
        app.panel.set_page(page)
        app.renderFrameOnce()
        assert ui.overflow == [], f"{page}: text past the panel's edge"
        assert ui.footer == "s.kelab.json (not saved yet)"  # the message does not replace it
        if page == "Time Runners":
            app.write_pixels_png(tmp_path.parent / "panel_long_message.png")
    app.panel.message = ""
    app.panel.set_page("Execution Order")
    app.renderFrameOnce()
    assert f"{long_name}#0" in ui.elided.values() or f"{long_name}#0" in ui.rows["Execution Order"]
    full = next(t for t in ui.elided.values() if t.startswith("DataRecorder(multi"))
    x0, y0, x1, y1 = ui.elided_rects[full]
    app.inject_event(ke.InputEvent("mouse_move", pos=((x0 + x1) // 2, (y0 + y1) // 2)))
    app.renderFrameOnce()
    assert ui.tooltip == full
    app.renderFrameOnce()  # a new tooltip window shows from its second frame
    app.write_pixels_png(tmp_path.parent / "panel_execution_order_hover.png")
    app.panel.set_page("Recorder")
    app.renderFrameOnce()
    assert ui.overflow == [] and any("long_long" in t for t in ui.elided.values())
    app.write_pixels_png(tmp_path.parent / "panel_recorder_long.png")
    app.close()
