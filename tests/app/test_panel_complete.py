"""The Settings panel, complete (#27): runner names, free-step scripts, the settings file."""

from __future__ import annotations

import json

import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.panel import load_settings

HIGH = ke.TimeMode.SIM_HIGH_PERF


class Logger(ke.App):
    def setup(self):
        self.log = []
        self.timeline.bind(self._capture, runner="Capture", name="capture_cb")

    def _capture(self, ts):
        self.log.append(ts)


def _app(tmp_path, cls=Logger, **kw):
    kw.setdefault("time_mode", HIGH)
    kw.setdefault("settings", tmp_path / "scene.kelab.json")
    return make_app(FakeClock(), cls, **kw)


def _run(app, frames):
    for _ in range(frames):
        app.renderFrameOnce()


# ---------------------------------------------------------------------------- 1: names
def test_rename_runner_in_code_moves_bindings_recorders_and_the_panel_settings(tmp_path):
    app = _app(tmp_path, world=ke.World(ball_scene(1)))
    _run(app, 1)
    rec = app.add_recorder(ke.DataRecorder(tmp_path / "d.csv", runner="Capture"))
    app.timeline.runner("Capture").name = "Camera"  # was silently ignored
    assert list(app.timeline.runners) == ["Robot", "Camera", "Sync"]
    assert rec.runner == "Camera" and app.panel.recorder_settings["video"].runner == "Camera"
    b = {x.name: x for x in app.timeline.bindings}
    assert b["capture_cb"].runner == "Camera"
    app.timeline.runner("Robot").name = "Main"  # the main runner: the clock follows
    assert app.clock.runner == "Main" and b["world.step"].runner == "Main"
    row = app.panel.runner_rows()[0]
    assert row.name == "Main" and not row.removable and "main runner" in row.why_not
    _run(app, 5)
    assert app.clock.steps == 6 and len(app.log) == 4
    app.close()


def test_rename_runner_in_the_panel_is_validated_and_refusals_say_why(tmp_path):
    app = _app(tmp_path)
    _run(app, 1)
    p = app.panel
    assert p.rename_runner("Capture", "Camera") and p.message == "" and p.dirty
    assert not p.rename_runner("Camera", "Robot")
    assert "another runner is called 'Robot'" in p.message
    assert not p.rename_runner("Camera", "")
    assert "runner name must be a non-empty string" in p.message
    assert not p.rename_runner("Nope", "X") and "no time runner named 'Nope'" in p.message
    assert list(app.timeline.runners) == ["Robot", "Camera", "Sync"]
    app.close()


def test_runner_names_round_trip_through_the_settings_file(tmp_path):
    path = tmp_path / "scene.kelab.json"
    app = _app(tmp_path, settings=path)
    _run(app, 1)
    assert app.panel.rename_runner("Capture", "Camera")
    assert app.panel.set_runner_hz("Camera", 25)
    assert app.panel.add_runner("Lidar", 10) and app.panel.rename_runner("Lidar", "Scan")
    app.close()
    doc = json.loads(path.read_text())
    assert doc["runners"] == [
        {"name": "Robot", "hz": 50},
        {"name": "Camera", "hz": 25, "renamed_from": "Capture"},
        {"name": "Sync", "hz": 10},
        {"name": "Scan", "hz": 10},  # the panel made it: no script name to rename from
    ]
    again = _app(tmp_path, settings=path)
    _run(again, 1)
    assert list(again.timeline.runners) == ["Robot", "Camera", "Sync", "Scan"]
    assert again.timeline.runner("Camera").hz == 25
    assert {b.name: b.runner for b in again.timeline.bindings}["capture_cb"] == "Camera"
    assert again.panel.settings_error is None and not again.panel.dirty
    again.close()
    assert json.loads(path.read_text()) == doc  # saved again unchanged
    assert load_settings(path).renamed == (("Capture", "Camera"),)


@pytest.mark.parametrize(
    ("runners", "field"),
    [
        ([{"name": "Camera", "hz": 30, "renamed_from": ""}], "runners[0].renamed_from"),
        ([{"name": "Camera", "hz": 30, "renamed_from": 3}], "runners[0].renamed_from"),
        (
            [
                {"name": "A", "hz": 30, "renamed_from": "Capture"},
                {"name": "B", "hz": 30, "renamed_from": "Capture"},
            ],
            "runners[1].renamed_from must be unique",
        ),
        ([{"name": "Robot", "hz": 30, "renamed_from": "Capture"}], "cannot rename 'Capture'"),
        ([{"name": "", "hz": 30}], "runners[0].name"),
    ],
)
def test_a_bad_runner_name_in_the_file_warns_and_keeps_the_defaults(tmp_path, runners, field):
    path = tmp_path / "bad.kelab.json"
    text = json.dumps({"time_mode": "GAME_REALTIME", "runners": runners})
    path.write_text(text)
    app = _app(tmp_path, settings=path)
    with pytest.warns(UserWarning, match="settings file"):
        _run(app, 2)
    assert field in app.panel.settings_error
    assert (
        list(app.timeline.runners) == ["Robot", "Capture", "Sync"] and app.clock.time_mode is HIGH
    )
    app.close()
    assert path.read_text() == text  # never overwritten


# ---------------------------------------------------------------------------- 2: free step
class Free(ke.App):
    def setup(self):
        self.dts = []
        self.fixed = []

    def fixed_update(self, ts):
        self.fixed.append(ts)

    def free_update(self, dt):
        self.dts.append(dt)


def test_free_update_runs_once_per_frame_with_the_frames_own_dt(tmp_path):
    clock = FakeClock()
    app = make_app(clock, Free, settings=tmp_path / "s.kelab.json")
    app.renderFrameOnce()
    assert app.free_step_scripts is False and app.dts == []  # off by default, as the seed
    app.free_step_scripts = True
    for frame_s in (0.01, 0.035, 0.016, 1.0):
        clock.advance(frame_s)
        app.renderFrameOnce()
    # each frame's own wall time (the long one clamped to max_frame_delta = 0.25)
    assert app.dts == [0.01, 0.035, 0.016, 0.25]
    assert set(app.fixed) == {0.02}  # the fixed steps keep their constant ts
    app.clock.time_scale = 0.5
    clock.advance(0.02)
    app.renderFrameOnce()
    app.pause()
    clock.advance(0.02)
    app.renderFrameOnce()
    assert app.dts[-2:] == [0.01, 0.0]  # scaled like simulated time; 0 while paused
    with pytest.raises(ValueError, match="App.free_step_scripts must be True or False, got 1"):
        app.free_step_scripts = 1
    app.close()


def test_free_step_scripts_in_the_panel_and_the_settings_file(tmp_path):
    path = tmp_path / "s.kelab.json"
    clock = FakeClock()
    app = make_app(clock, Free, settings=path, free_step_scripts=False)
    app.renderFrameOnce()
    assert app.panel.set_free_step_scripts(True) and app.free_step_scripts
    assert (
        not app.panel.set_free_step_scripts("yes") and "must be True or False" in app.panel.message
    )
    app.close()
    assert json.loads(path.read_text())["free_step_scripts"] is True
    again = make_app(FakeClock(), Free, settings=path)
    again.renderFrameOnce()
    assert again.free_step_scripts is True and again.dts == [0.0]
    again.close()
    path.write_text('{"free_step_scripts": "on"}')
    bad = make_app(FakeClock(), Free, settings=path)
    with pytest.warns(UserWarning, match="free_step_scripts must be true or false"):
        bad.renderFrameOnce()
    assert bad.free_step_scripts is False
    bad.close()
    assert path.read_text() == '{"free_step_scripts": "on"}'


# ---------------------------------------------------------------------------- 3: sync points
def test_other_threads_submit_calls_that_run_on_the_app_thread_at_sync_points(tmp_path):
    import threading

    app = _app(tmp_path, ke.App, world=ke.World(ball_scene(1)))
    app_thread = threading.get_ident()
    results = {}

    def client():
        ok = app.sync.submit(lambda a: (threading.get_ident(), a.clock.steps, a.timeline.time))
        bad = app.sync.submit(lambda a: 1 / 0)
        results["ok"] = ok.result(timeout=30)
        results["bad"] = bad.exception(timeout=30)
        state = app.sync.latest()  # no lock: an immutable state swapped in whole
        results["state"] = state

    t = threading.Thread(target=client)
    t.start()
    while t.is_alive():
        app.renderFrameOnce()
    thread, steps, time = results["ok"]
    assert thread == app_thread  # ran on the App's thread
    assert time * 10 == int(time * 10)  # at a 10 Hz boundary
    assert isinstance(results["bad"], ZeroDivisionError)  # into the future, not the loop
    state = results["state"]
    assert state.body_names == tuple(app.world.body_names)
    assert state.body_poses.shape == app.world.body_poses.shape
    with pytest.raises(ValueError):
        state.body_poses[0, 0, 0] = 1.0  # read-only
    # a panel rebinding like any system: EXPORT of Robot, every step
    assert app.panel.set_binding("sync_point", runner="Robot")
    fut = app.sync.submit(lambda a: a.clock.steps)
    app.renderFrameOnce()
    assert fut.result(timeout=0) == app.clock.steps
    waiting = app.sync.submit(lambda a: None)
    app.close()
    assert isinstance(waiting.exception(timeout=0), RuntimeError)
    with pytest.raises(RuntimeError, match="the App is closed"):
        app.sync.submit(lambda a: None)


def test_sync_points_do_not_change_the_simulation(tmp_path):
    def run(with_calls):
        app = _app(tmp_path, ke.App, world=ke.World(ball_scene(2)))
        for k in range(40):
            if with_calls and k % 3 == 0:
                app.sync.submit(lambda a: a.world.body_poses.sum())
            app.renderFrameOnce()
        poses = app.world.body_poses.copy()
        app.close()
        return poses

    import numpy as np

    assert np.array_equal(run(False), run(True))
