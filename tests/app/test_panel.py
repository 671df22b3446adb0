"""The Settings panel's model: every change equals the code a script would write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.panel import PanelSettings, SettingsError, load_settings
from kelab.app.panel.settings import BindingSettings

HIGH = ke.TimeMode.SIM_HIGH_PERF


class Logger(ke.App):
    """Logs (callback, exact time, ts) of its two callbacks and a Capture callback."""

    def setup(self):
        self.log = []
        self.timeline.bind(self._capture, runner="Capture", name="capture_cb")

    def _capture(self, ts):
        self.log.append(("capture", self.timeline.time, ts))

    def fixed_update(self, ts):
        self.log.append(("fixed", self.timeline.time, ts))

    def late_update(self, ts):
        self.log.append(("late", self.timeline.time, ts))


def _app(tmp_path, cls=Logger, **kw):
    kw.setdefault("time_mode", HIGH)
    kw.setdefault("settings", tmp_path / "scene.kelab.json")
    return make_app(FakeClock(), cls, **kw)


def _run(app, frames):
    for _ in range(frames):
        app.renderFrameOnce()


def test_import_kelab_and_an_app_without_panel_do_not_import_imgui():
    code = (
        "import sys, kelab as ke\n"
        "app = ke.App(headless=True, size=(64, 48), render_hz=None, settings='/nonexistent.json')\n"
        "app.start(max_frames=2)\n"
        "app.plot('x', 1.0)\n"
        "assert 'imgui_bundle' not in sys.modules, 'imgui imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_without_imgui_the_panel_is_refused_by_name_and_f2_only_warns(tmp_path, monkeypatch):
    import kelab.app.panel_window as panel_window

    real = panel_window.importlib.util.find_spec
    monkeypatch.setattr(
        panel_window.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "imgui_bundle" else real(name, *a),
    )
    with pytest.raises(RuntimeError, match=r"App\(panel=True\) needs imgui-bundle.*kelab\[panel\]"):
        _app(tmp_path, panel=True)
    app = _app(tmp_path)
    with pytest.raises(RuntimeError, match=r"App.panel_open needs imgui-bundle"):
        app.panel_open = True
    with pytest.warns(UserWarning, match="needs imgui-bundle"):
        app.toggle_panel()  # F2
    assert not app.panel_open
    app.panel_open = False  # hiding needs nothing
    with pytest.raises(ValueError, match="App.panel_open must be True or False, got 'yes'"):
        app.panel_open = "yes"
    _run(app, 2)
    assert app.panel_window.host is None  # never shown: no ImGui context was made
    app.close()


def test_rate_change_mid_run_equals_the_code_and_applies_at_the_next_boundary(tmp_path):
    by_panel, by_code = _app(tmp_path), _app(tmp_path)
    for app in (by_panel, by_code):
        _run(app, 7)  # fixed steps cover [0, 140 ms): Capture ran at 0..133 ms, next 167 ms
    assert by_panel.panel.set_runner_hz("Capture", 12.5)
    by_code.timeline.runner("Capture").hz = 12.5
    for app in (by_panel, by_code):
        _run(app, 20)
    assert by_panel.log == by_code.log
    capture = [(t, ts) for kind, t, ts in by_panel.log if kind == "capture"]
    after = [t for t, _ in capture if t > Fraction(2, 15)]
    assert after[:3] == [Fraction(1, 6) + k * Fraction(2, 25) for k in range(3)]
    assert all(ts == 0.08 for t, ts in capture if t > Fraction(2, 15))
    assert all(ts == 1 / 30 for t, ts in capture if t <= Fraction(2, 15))


def test_refused_rate_says_why_with_the_same_error_as_code(tmp_path):
    app = _app(tmp_path)
    assert not app.panel.set_runner_hz("Robot", 5000)
    with pytest.raises(ValueError) as err:
        app.timeline.runner("Robot").hz = 5000
    assert app.panel.message == str(err.value)
    assert "0.01 to 1000 Hz" in app.panel.message
    assert app.timeline.runner("Robot").hz == 50


def test_rebinding_a_script_equals_the_code_and_ts_follows_the_runner(tmp_path):
    by_panel, by_code = _app(tmp_path), _app(tmp_path)
    for app in (by_panel, by_code):
        _run(app, 3)
    assert by_panel.panel.set_binding("fixed_update", runner="Capture", phase="export", priority=7)
    code_binding = next(b for b in by_code.timeline.bindings if b.name == "fixed_update")
    code_binding.rebind(runner="Capture", phase=ke.Phase.EXPORT, priority=7)
    assert by_panel.panel.set_binding("late_update", enabled=False)
    next(b for b in by_code.timeline.bindings if b.name == "late_update").enabled = False
    for app in (by_panel, by_code):
        _run(app, 10)
    assert by_panel.log == by_code.log
    fixed_after = [ts for kind, t, ts in by_panel.log if kind == "fixed" and t > Fraction(1, 25)]
    assert fixed_after and all(ts == 1 / 30 for ts in fixed_after)
    assert not [1 for kind, t, _ in by_panel.log if kind == "late" and t > Fraction(1, 25)]
    rows = {r.id: r for r in by_panel.panel.script_rows()}
    assert rows["fixed_update"][2:6] == ("Capture", ke.Phase.EXPORT, 7, True)
    assert rows["late_update"].enabled is False
    order = [r.name for r in by_panel.execution_order()]
    assert "late_update" not in order and order[-1] == "fixed_update"
    assert not by_panel.panel.set_binding("fixed_update", runner="Nope")
    assert "no time runner named 'Nope'" in by_panel.panel.message


def test_subsystems_page_moves_the_physics_step(tmp_path):
    app = _app(tmp_path, ke.App, world=ke.World(ball_scene()))
    rows = {r.id: r for r in app.panel.subsystem_rows()}
    assert set(rows) == {"world.step", "drag_spring", "sync_point"}
    assert rows["world.step"][2:4] == ("Robot", ke.Phase.PHYSICS)
    assert "world.step" not in {r.id for r in app.panel.script_rows()}
    app.panel.set_runner_hz("Capture", 100)
    assert app.panel.set_binding("world.step", runner="Capture")
    _run(app, 10)  # ten Robot periods (0.2 s) at 100 Hz: 20 physics steps of 10 ms
    assert app.world.step_count == 20
    assert app.panel.set_binding("world.step", enabled=False)
    _run(app, 5)
    assert app.world.step_count == 20


def test_add_and_remove_runner_rules(tmp_path):
    app = _app(tmp_path)
    panel = app.panel
    for _ in range(5):  # Robot, Capture and the sync points' Sync are there
        assert panel.add_runner()
    names = list(app.timeline.runners)
    assert len(names) == 8 and names[3] == "Runner 3"
    assert app.timeline.runner("Runner 7").hz == 60
    assert not panel.add_runner()
    assert "at most 8 runners" in panel.message
    app.renderFrameOnce()  # setup() binds capture_cb to Capture
    assert not panel.remove_runner("Capture")
    assert "still has bindings (capture_cb)" in panel.message
    assert not panel.remove_runner("Robot")
    assert "main runner" in panel.message
    assert panel.remove_runner("Runner 7")
    assert "Runner 7" not in app.timeline.runners and panel.message == ""
    rows = {r.name: r for r in panel.runner_rows()}
    assert rows["Runner 3"].removable and not rows["Capture"].removable
    solo = ke.Timeline(default_runners=False)
    solo.add_runner("Only", 10)
    app2 = _app(tmp_path, ke.App, timeline=solo, runner="Only")
    assert not app2.panel.remove_runner("Only")
    assert "main runner" in app2.panel.message  # the App added Sync beside it
    app2.timeline.runner("Sync")
    app2.close()  # the caller's timeline is given back as it was
    assert list(solo.runners) == ["Only"]
    with pytest.raises(ValueError, match="the last runner cannot be removed"):
        solo.remove_runner("Only")


def test_recorder_phase_and_runner_equal_the_code(tmp_path):
    world = ke.World(ball_scene())
    app = _app(tmp_path, ke.App, world=world, recording_dir=tmp_path)
    panel = app.panel
    assert panel.set_recorder("data", runner="Robot", path=str(tmp_path / "a.csv"))
    assert panel.start_recorder("data")
    _run(app, 2)
    assert panel.set_recorder("data", phase="export")
    rec = app.recorders[0]
    assert (rec.runner, rec.phase) == ("Robot", ke.Phase.EXPORT)
    row = next(r for r in app.execution_order() if r.name.startswith("DataRecorder"))
    assert (row.phase, row.runner) == (ke.Phase.EXPORT, "Robot")
    _run(app, 3)
    assert panel.stop_recorder("data")
    assert panel.last_files["data"] == str(tmp_path / "a.csv")
    data = np.loadtxt(tmp_path / "a.csv", delimiter=",", skiprows=1)
    assert data.shape[0] == 5  # one row per Robot step
    # the same by code
    twin = _app(tmp_path, ke.App, world=ke.World(ball_scene()))
    rec2 = twin.add_recorder(ke.DataRecorder(tmp_path / "b.csv", runner="Robot"))
    _run(twin, 2)
    rec2.rebind(phase="export")
    _run(twin, 3)
    twin.remove_recorder(rec2)
    assert np.array_equal(data, np.loadtxt(tmp_path / "b.csv", delimiter=",", skiprows=1))
    assert not panel.set_recorder("video", runner="Nope")
    assert "no time runner named 'Nope'" in panel.message
    assert not panel.stop_recorder("lidar")
    assert "not running" in panel.message


def test_settings_round_trip(tmp_path):
    path = tmp_path / "scene.kelab.json"
    app = _app(tmp_path, settings=path)
    _run(app, 1)
    p = app.panel
    assert p.set_time_mode("GAME_REALTIME")
    assert p.add_runner("Slow", Fraction(1000, 3))
    assert p.set_runner_hz("Capture", 12.5)
    assert p.set_binding("fixed_update", runner="Slow", priority=-5)
    assert p.set_binding("capture_cb", enabled=False)
    assert p.set_recorder("video", runner="Robot", phase="export", path="out.mp4")
    assert p.add_plot("frame.time_ms") and p.set_page("Execution Order")
    app.close()  # saves: the panel changed something
    doc = json.loads(path.read_text())
    assert doc["runners"][3] == {"name": "Slow", "hz": "1000/3"}
    assert doc["bindings"]["fixed_update"]["runner"] == "Slow"
    again = _app(tmp_path, settings=path)
    _run(again, 1)
    t = again.timeline
    assert again.clock.time_mode is ke.TimeMode.GAME_REALTIME
    assert t.runner("Slow").hz == Fraction(1000, 3) and t.runner("Capture").hz == 12.5
    b = {x.name: x for x in t.bindings}
    assert (b["fixed_update"].runner, b["fixed_update"].priority) == ("Slow", -5)
    assert b["capture_cb"].enabled is False
    assert again.panel.recorder_settings["video"].phase is ke.Phase.EXPORT
    assert again.panel.plots == ["frame.time_ms"] and again.panel.page == "Execution Order"
    assert again.panel.settings_error is None and not again.panel.dirty
    again.close()
    assert load_settings(path).runners[3][1] == Fraction(1000, 3)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{not json", "must be JSON"),
        ('{"runners": [{"name": "Robot", "hz": 50}, {"name": "X", "hz": 5000}]}', "runners[1].hz"),
        ('{"time_mode": "FAST"}', "time_mode must be one of"),
        (
            '{"bindings": {"fixed_update": {"runner": "Nope", "phase": "CONTROL", "priority": 0}}}',
            "bindings.fixed_update.runner",
        ),
        (
            '{"bindings": {"fixed_update": {"runner": "Robot", "phase": "LATER", "priority": 0}}}',
            "bindings.fixed_update.phase",
        ),
        ('{"panel": {"page": "Nope"}}', "panel.page"),
        ('{"runners": "fast"}', "runners must be"),
        ('{"surprise": 1}', "surprise must be one of the known fields"),
        ("[]", "must be a JSON object"),
        # issue 25.9: numbers past Python's int-digit limit, and nesting past its recursion
        ('{"runners": [{"name": "Robot", "hz": 1' + "0" * 5000 + "}]}", "runners[0].hz"),
        ('{"runners": [{"name": "Robot", "hz": "1' + "0" * 5000 + '/3"}]}', "runners[0].hz"),
        (
            '{"bindings": {"fixed_update": {"runner": "Robot", "phase": "CONTROL", '
            '"priority": -1' + "0" * 5000 + "}}}",
            "bindings.fixed_update.priority",
        ),
        ('{"version": 1' + "0" * 5000 + "}", "version must be 1"),
        ("[" * 200_000, "nested at most"),
        ('{"plots": ' + "[" * 200_000, "nested at most"),
        # a bindings value that is not an object (was a TypeError from tuple(5))
        ('{"bindings": 5}', "bindings must be a JSON object"),
        ('{"bindings": true}', "bindings must be a JSON object"),
        ('{"bindings": 1' + "0" * 5000 + "}", "bindings must be a JSON object"),
        # the history length (#28): seconds > 0, at most an hour
        ('{"history_s": 0}', "history_s must be seconds > 0 and <= 3600"),
        ('{"history_s": "long"}', "history_s must be seconds > 0"),
        ('{"history_s": 1e9}', "history_s must be seconds > 0"),
    ],
)
def test_a_bad_settings_file_names_the_field_and_the_app_keeps_its_defaults(tmp_path, text, field):
    path = tmp_path / "bad.kelab.json"
    # a valid change first: nothing of the file may be applied (all or nothing)
    if text.startswith("{") and not text.startswith("{not"):
        text = '{"time_mode": "GAME_REALTIME", ' + text[1:] if "time_mode" not in text else text
    path.write_text(text)
    app = _app(tmp_path, settings=path)
    with pytest.warns(UserWarning) as record:
        _run(app, 3)
    assert field in app.panel.settings_error and str(path) in app.panel.settings_error
    assert any(field in str(w.message) for w in record)
    assert app.clock.time_mode is HIGH and app.timeline.runner("Robot").hz == 50
    assert list(app.timeline.runners) == ["Robot", "Capture", "Sync"]
    assert app.clock.steps == 3
    with pytest.raises(SettingsError, match=field.replace("[", r"\[").replace("]", r"\]")):
        p = load_settings(path)
        app.panel.apply(p)
    app.close()
    assert path.read_text() == text  # a bad file is never overwritten by defaults


def test_a_file_that_does_not_fit_is_rolled_back(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "time_mode": "GAME_REALTIME",
                "runners": [{"name": "Capture", "hz": 10}]
                + [{"name": f"R{i}", "hz": 5} for i in range(7)],
            }
        )
    )
    app = _app(tmp_path, settings=path)
    with pytest.warns(UserWarning, match="at most 8 runners"):
        app.renderFrameOnce()
    assert app.clock.time_mode is HIGH and app.timeline.runner("Capture").hz == 30


def test_a_panel_left_open_and_untouched_changes_nothing(tmp_path):
    def run(panel, backend):
        world = ke.World(ball_scene(2))
        app = _app(tmp_path, ke.App, world=world, panel=panel, backend=backend, size=(320, 200))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _run(app, 40)
        poses = world.body_poses.copy()
        app.close()
        return poses, app.panel.dirty

    plain, _ = run(False, "pygame")
    for backend in ("pygame", "gl"):
        opened, dirty = run(True, backend)
        assert np.array_equal(plain, opened) and not dirty
    assert not (tmp_path / "scene.kelab.json").exists()


def test_app_plot_publishes_values_with_their_time(tmp_path):
    class Pub(ke.App):
        def fixed_update(self, ts):
            self.plot("speed", 2.0 * self.timeline.time_s)

    app = _app(tmp_path, Pub)
    _run(app, 5)
    x, y = app.panel.history("app.speed")
    assert np.allclose(x, [0, 0.02, 0.04, 0.06, 0.08]) and np.allclose(y, 2 * x)
    assert "app.speed" in app.panel.available_signals()
    with pytest.raises(
        ValueError, match=r"App.plot\('speed'\) value must be a finite number, got nan"
    ):
        app.plot("speed", float("nan"))
    with pytest.raises(ValueError, match="value must be a finite number, got 'fast'"):
        app.plot("speed", "fast")
    with pytest.raises(ValueError, match="value must be a finite number, got True"):
        app.plot("speed", True)
    with pytest.raises(ValueError, match="App.plot name must be a non-empty str, got 3"):
        app.plot(3, 1.0)
    for i in range(63):
        app.plot(f"s{i}", 1.0)
    with pytest.raises(ValueError, match="at most 64"):
        app.plot("one_more", 1.0)


def test_plots_sample_world_signals_and_stay_flat(tmp_path):
    world = ke.World(ball_scene())
    app = _app(tmp_path, ke.App, world=world)
    p = app.panel
    assert p.add_plot("/World/Ball0.y") and p.add_plot("/World/Ball0.vy")
    assert not p.add_plot("/World/Nope.y")
    assert "no signal" in p.message
    for _ in range(1300):
        p.sample(0.016, 1, 1.0)
    x, y = p.history("/World/Ball0.y")
    assert (
        x.size == 1200 and y[-1] == world.body_poses[0, world.body_names.index("/World/Ball0"), 1]
    )
    assert p.history("frame.time_ms")[1][-1] == 16.0
    assert p.remove_plot("/World/Ball0.y") and p.plots == ["/World/Ball0.vy"]


def test_time_mode_and_viewport_rendering(tmp_path):
    app = _app(tmp_path, time_mode=ke.TimeMode.SIM_REALTIME)
    assert app.panel.set_time_mode(HIGH) and app.clock.time_mode is HIGH
    assert app.panel.set_disable_viewport_rendering(True)
    _run(app, 3)
    assert app.drawn_frames == 0
    assert not app.panel.set_time_mode("FAST")
    assert "time mode must be one of" in app.panel.message
    assert not app.panel.set_page("Nope")


def test_subsystems_list_the_worlds_sensors_and_actuators(tmp_path):
    from app_helpers import cartpole_scene

    app = _app(tmp_path, ke.App, world=ke.World(cartpole_scene()))
    assert ("/World/Robot/slider_to_cart", "EffortActuator") in app.panel.world_systems()


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_settings_path_that_is_not_a_regular_file_is_refused_without_reading(tmp_path, kind):
    # a link to /dev/zero was read forever (stat says 0 bytes); a FIFO blocked the open
    path = tmp_path / "scene.kelab.json"
    if kind == "device":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)
    with pytest.raises(SettingsError, match="must be a regular file"):
        load_settings(path)


def test_a_settings_path_that_is_a_folder_warns_and_the_app_keeps_its_defaults(tmp_path):
    folder = tmp_path / "scene.kelab.json"
    folder.mkdir()
    app = _app(tmp_path, settings=folder)
    with pytest.warns(UserWarning, match="the file must be readable, got IsADirectoryError"):
        _run(app, 2)
    assert app.clock.steps == 2 and folder.is_dir()
    app.close()


def _sensor_world():
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    bot = ke.Prop(ke.Box(0.3, 0.3), mass=1.0, initial_pose=ke.Pose(0.0, 1.0))
    b.add(bot, at="/World/Bot")
    b.imu("imu", bot, ke.SensorConfig(delay=0.04, cutoff_hz=5.0))
    return ke.World(b.build())


def test_a_panel_edit_that_would_change_a_sensor_worlds_dt_is_refused_and_the_app_runs(tmp_path):
    app = _app(tmp_path, ke.App, world=_sensor_world())
    _run(app, 3)
    p = app.panel
    assert not p.set_binding("world.step", runner="Capture")  # 30 Hz: another dt
    assert "world.step" in p.message and "imu" in p.message and "0.02 s" in p.message
    assert p.binding("world.step").runner == "Robot"
    assert not p.set_runner_hz("Robot", 25)  # the runner world.step is on
    assert "imu" in p.message and app.timeline.runner("Robot").hz == 50
    moved = PanelSettings(bindings={"world.step": BindingSettings("Capture", ke.Phase.PHYSICS, 0)})
    with pytest.raises(SettingsError, match=r"sensors \(imu\) run at a fixed dt of 0.02 s"):
        p.apply(moved)  # a settings file is checked the same way
    assert p.binding("world.step").runner == "Robot"
    assert p.set_runner_hz("Capture", 50)  # the same period: the sensors keep their dt
    assert p.set_binding("world.step", runner="Capture") and p.message == ""
    _run(app, 5)
    assert not app.should_close() and app.world.step_count == 8
    assert p.set_runner_hz("Robot", 25)  # world.step is not on Robot any more
    assert not p.set_runner_hz("Capture", 10)
    _run(app, 5)
    assert not app.should_close()
    app.close()


def test_any_exception_from_a_panel_edit_becomes_a_panel_message(tmp_path, monkeypatch):
    app = _app(tmp_path)
    _run(app, 1)

    def broken(*args):
        raise TypeError("broken add_runner")

    monkeypatch.setattr(app.timeline, "add_runner", broken)
    assert not app.panel.add_runner()
    assert app.panel.message == "broken add_runner"
    _run(app, 2)
    assert app.clock.steps == 3
    app.close()


def test_plots_drop_the_abandoned_future_after_a_rewind(tmp_path):
    """A seek back and a new input (a branch): every plotted signal holds only the past of
    the moment shown, in time order, none of the abandoned future's samples (#42 item 5)."""

    class Kick(ke.App):
        def fixed_update(self, ts):
            if self.input.key_pressed("k"):
                self.world.set_body_velocities(np.full_like(self.world.body_velocities, 2.0))
            self.plot("t", self.timeline.time_s)

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    app = _app(tmp_path, Kick, world=ke.World(ball_scene()))
    app.panel_open = True
    assert app.panel.add_plot("/World/Ball0.y")
    _run(app, 60)
    assert app.panel.history("app.t")[0].max() == pytest.approx(59 * 0.02)
    app.seek(20)
    app.inject_event(ke.InputEvent("key_down", key="k"))
    app.inject_event(ke.InputEvent("key_up", key="k"))
    _run(app, 5)
    assert app.time_travel.branch == 1
    now = app.sim_time
    for signal in ("app.t", "/World/Ball0.y", "frame.time_ms"):
        x, _ = app.panel.history(signal)
        assert x.size and x.max() <= now + 1e-9, (signal, x.max(), now)
        assert np.all(np.diff(x) >= 0), signal
    app.close()
