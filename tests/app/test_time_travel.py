"""Time travel in the App: seek, redo, branches and exact replay (docs/app.md)."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest

import kelab as ke


def _scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    for i in range(3):
        pose = ke.Pose(0.1 * i, 1.0 + 0.5 * i, 0.3 * i)
        b.add(ke.Prop(ke.Box(0.3, 0.3), mass=1.0, initial_pose=pose), at=f"/World/B{i}")
    return b.build()


class Pusher(ke.App):
    """Random pushes from its own Generator, a counter, a key that kicks."""

    def setup(self) -> None:
        self.n = 0
        self.kicks = 0
        self.rng = np.random.default_rng(1)

    def fixed_update(self, ts: float) -> None:
        self.n += 1
        f = self.rng.normal(size=(1, 4, 2))
        f[:, 0] = 0.0
        if self.input.key_pressed("k"):
            self.kicks += 1
            f[0, 1] = (0.0, 300.0)
        self.world.set_body_forces(f)

    def state_dict(self) -> dict:
        return {"n": self.n, "kicks": self.kicks, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.n, self.kicks = state["n"], state["kicks"]
        self.rng.bit_generator.state = state["rng"]


def _app(cls: type = Pusher, max_log_steps: int = 7200) -> ke.App:
    world = ke.World(_scene(), max_log_steps=max_log_steps)
    return cls(headless=True, world=world, size=(160, 120), render_hz=None,
               time_mode=ke.TimeMode.SIM_HIGH_PERF)  # fmt: skip


def _hash(app: ke.App) -> str:
    w = app.world
    parts = [w.body_poses, w.body_velocities, w.external_forces]
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in parts)).hexdigest()


def _run(app: ke.App, frames: int, keys: dict[int, str] | None = None) -> dict[int, tuple]:
    seen = {}
    for _ in range(frames):
        key = (keys or {}).get(app.fixed_step)
        if key:
            app.inject_event(ke.InputEvent("key_down", key=key))
            app.inject_event(ke.InputEvent("key_up", key=key))
        app.renderFrameOnce()
        seen[app.fixed_step] = (_hash(app), app.n, app.kicks, app.timeline.time, app.sim_time)
    return seen


def _state(app: ke.App) -> tuple:
    return (_hash(app), app.n, app.kicks, app.timeline.time, app.sim_time)


@pytest.mark.parametrize("max_log_steps", [7200, 23])  # 23: seeks across World rebases
def test_seek_returns_exactly_and_replays_bit_for_bit(max_log_steps: int) -> None:
    app = _app(max_log_steps=max_log_steps)
    seen = _run(app, 120, keys={30: "k", 75: "k"})
    assert app.fixed_step == 120 and app.history == range(0, 121)
    for k in (119, 37, 0, 76, 100):
        app.seek(k)
        assert app.fixed_step == k
        if k:
            assert _state(app) == seen[k]
    app.seek(10)
    again = _run(app, 110)  # the recorded keys are replayed on redo
    assert again == {k: seen[k] for k in range(11, 121)}
    assert app.time_travel.branch == 0 and app.kicks == 2
    app.close()


def test_a_new_key_after_a_seek_branches_and_drops_the_future() -> None:
    app = _app()
    _run(app, 60)
    app.seek(20)
    seen = _run(app, 5, keys={20: "k"})
    assert app.time_travel.branch == 1 and app.time_travel.branch_points == (20,)
    assert app.history == range(0, 26) and app.kicks == 1
    # the branch replays exactly too
    app.seek(21)
    assert _state(app) == seen[21]
    app.close()


def test_a_state_changed_in_code_after_a_seek_branches() -> None:
    app = _app()
    _run(app, 50)
    app.seek(30)
    app.n += 1000
    app.renderFrameOnce()
    assert app.time_travel.branch == 1 and app.history.stop == 32
    assert app.n == 1031
    app.close()


@pytest.mark.parametrize(
    "change",
    ["priority", "phase", "enabled", "rate", "same priority"],
)
def test_a_binding_or_rate_changed_after_a_seek_branches(change: str) -> None:
    """The steps' digests hold the timeline's plan: a binding's priority, phase or
    enabled flag, or a runner's rate, changed in code after a seek is a change (a branch);
    setting a value it already has is none (the future is redone)."""
    app = _app()
    _run(app, 50)
    app.seek(30)
    late = next(b for b in app.timeline.bindings if b.name == "late_update")
    if change == "priority":
        late.priority = late.priority + 1
    elif change == "phase":
        late.phase = ke.Phase.EXPORT
    elif change == "enabled":
        late.enabled = False
    elif change == "rate":
        app.timeline.runner("Capture").hz = 25
    else:
        late.priority = late.priority
    app.renderFrameOnce()
    if change == "same priority":
        assert app.time_travel.branch == 0 and app.history.stop == 51
    else:
        assert app.time_travel.branch == 1 and app.history.stop == 32
    app.close()


def test_seek_refuses_steps_outside_the_history_and_non_ints() -> None:
    app = _app()
    _run(app, 10)
    with pytest.raises(ValueError, match=r"App.seek\(step\) must be a step in app.history"):
        app.seek(11)
    with pytest.raises(ValueError, match="got -1"):
        app.seek(-1)
    for bad in (3.0, "3", True, None):
        with pytest.raises(TypeError, match="must be an int"):
            app.seek(bad)
    assert app.fixed_step == 10
    app.close()


def test_the_history_is_bounded_by_history_s() -> None:
    app = _app()
    app.time_travel.history_s = 1.0  # 50 fixed steps at 50 Hz
    _run(app, 300)
    hist = app.history
    assert hist.stop == 301 and 50 <= len(hist) - 1 < 50 + app.time_travel.keyframe_every
    with pytest.raises(ValueError, match="history"):
        app.seek(hist.start - 1)
    app.seek(hist.start)
    with pytest.raises(ValueError, match="history_s must be"):
        app.time_travel.history_s = 0.0
    app.close()


class Plain(ke.App):
    count = 0

    def fixed_update(self, ts: float) -> None:
        self.count += 1


def test_without_state_hooks_seek_warns_once_that_attributes_are_not_rewound() -> None:
    app = _app(Plain)
    for _ in range(10):
        app.renderFrameOnce()
    with pytest.warns(RuntimeWarning, match="not the App subclass's own attributes"):
        app.seek(3)
    assert app.count == 13  # not rewound: the re-run of steps 0..3 counted on
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app.seek(4)
    app.close()


def test_recorders_lose_nothing_and_do_not_record_the_re_run(tmp_path) -> None:
    from kelab.app.recorders import DataRecorder

    app = _app()
    rec = app.add_recorder(DataRecorder(tmp_path / "d.csv", runner="Robot"))
    _run(app, 30)
    app.seek(5)
    _run(app, 10)
    app.close()
    rows = rec.path.read_text().splitlines()
    assert len(rows) == 1 + 30 + 10  # header, the first run, then the redo's rows


def _key(app: ke.App, key: str, mods: frozenset[str] = frozenset()) -> None:
    app.inject_event(ke.InputEvent("key_down", key=key, mods=mods))
    app.inject_event(ke.InputEvent("key_up", key=key, mods=mods))
    app.renderFrameOnce()


def test_keys_while_paused_step_back_and_forward_and_the_hud_says_rewound() -> None:
    app = _app()
    seen = _run(app, 100, keys={60: "k"})
    _key(app, "return")  # pause
    assert app.paused and app.fixed_step == 100 and app.stats.rewound is None
    _key(app, "left")
    assert app.fixed_step == 99 and _state(app) == seen[99]
    _key(app, "left", frozenset({"shift"}))  # one second: 50 steps at 50 Hz
    assert app.fixed_step == 49 and _state(app) == seen[49]
    assert app.stats.rewound == (49, 100)
    assert "rewound: step 49 of 100" in app.stats.lines()
    _key(app, "right", frozenset({"shift"}))
    assert app.fixed_step == 99
    _key(app, "home")
    assert app.fixed_step == 0
    _key(app, "right")
    assert app.fixed_step == 1 and _state(app) == seen[1]
    _key(app, "return")  # resume: the recorded future is redone (the key at 60 too)
    assert app.fixed_step == 2 and _state(app) == seen[2]  # that frame ran a step
    again = _run(app, 98)
    assert again == {k: seen[k] for k in range(3, 101)} and app.time_travel.branch == 0
    assert app.stats.rewound is None
    app.close()


def test_a_forward_seek_runs_on_from_where_it_stands_without_restoring(monkeypatch) -> None:
    app = _app()
    seen = _run(app, 80, keys={50: "k"})
    app.seek(41)
    restores = []
    real = app.world.restore
    monkeypatch.setattr(app.world, "restore", lambda snap: (restores.append(1), real(snap)))
    for k in (42, 47, 66, 80):  # forward: no World restore, exact all the same
        app.seek(k)
        assert _state(app) == seen[k]
    assert restores == []
    app.seek(60)  # backward: from a keyframe
    assert restores == [1] and _state(app) == seen[60]
    app.n += 5  # changed where it stands: a forward seek restores (the digest differs)
    app.seek(70)
    assert restores == [1, 1] and _state(app) == seen[70]
    app.close()


def test_data_rows_carry_the_branch_and_the_video_cuts_at_the_rewind(tmp_path) -> None:
    from kelab.app.recorders import DataRecorder, VideoRecorder
    from kelab.app.recording_files import load_recording

    app = _app()
    data = app.add_recorder(DataRecorder(tmp_path / "d.npz", runner="Robot"))
    video = app.add_recorder(VideoRecorder(tmp_path / "v.gif", runner="Robot"))
    _run(app, 30)
    app.seek(20)
    _run(app, 5)  # a redo: still the first timeline
    app.seek(22)
    _run(app, 4, keys={22: "k"})  # a new key: branch 1
    app.close()
    rec = load_recording(tmp_path / "d.npz")
    assert list(rec.columns[:3]) == ["time", "step", "branch"]
    branch = rec.data[:, 2]
    assert branch.tolist() == [0.0] * 35 + [1.0] * 4  # nothing lost, branches told apart
    steps_seen = np.round(rec.time * 50).astype(int).tolist()
    assert steps_seen == list(range(30)) + list(range(20, 25)) + list(range(22, 26))
    # the video: what ran live, cut at each rewind (step 0 comes before the first frame)
    assert data.branch == 1 and video.frames == 29 + 5 + 4
    with pytest.raises(ValueError, match="DataRecorder.branch must be"):
        data.branch = -1


def test_the_history_length_is_an_app_setting_and_a_settings_file_entry(tmp_path) -> None:
    import json

    from kelab.app.panel import load_settings

    world = ke.World(_scene())
    app = Pusher(headless=True, world=world, size=(160, 120), render_hz=None, history_s=2.0,
                 time_mode=ke.TimeMode.SIM_HIGH_PERF)  # fmt: skip
    assert app.config.history_s == 2.0 and app.time_travel.history_s == 2.0
    _run(app, 300)
    assert 100 <= len(app.history) - 1 < 100 + app.time_travel.keyframe_every  # 2 s at 50 Hz
    app.close()
    for bad in (0, -1.0, float("nan"), float("inf"), True, "60", 3601):
        with pytest.raises(ValueError, match=r"App.history_s must be seconds > 0 and <= 3600"):
            ke.AppConfig(history_s=bad)
    # the settings file: read, applied after setup, saved with the panel's other settings
    path = tmp_path / "s.kelab.json"
    path.write_text(json.dumps({"history_s": 5.5}))
    app = Pusher(headless=True, world=ke.World(_scene()), size=(160, 120), render_hz=None,
                 time_mode=ke.TimeMode.SIM_HIGH_PERF, settings=path)  # fmt: skip
    _run(app, 2)
    assert app.panel.settings_error is None and app.time_travel.history_s == 5.5
    app.panel.save()
    app.close()
    assert json.loads(path.read_text())["history_s"] == 5.5
    assert load_settings(path).history_s == 5.5


@pytest.mark.parametrize(
    ("demo", "cls"),
    [
        ("cartpole_keyboard", "CartpoleKeys"),
        ("physics_playground", "Playground"),
        ("multi_rate", "MultiRate"),
        ("manual_loop", "Manual"),
    ],
)
def test_the_demos_rewind_exactly_with_their_state_hooks(demo: str, cls: str) -> None:
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demos"))
    mod = importlib.import_module(demo)
    app = getattr(mod, cls)(world=ke.World(mod.build_scene()), headless=True, size=(320, 200),
                            render_hz=None, time_mode=ke.TimeMode.SIM_HIGH_PERF)  # fmt: skip
    seen = {}
    for _ in range(90):
        if app.fixed_step == 30:
            app.inject_event(ke.InputEvent("key_down", key="right"))
        if app.fixed_step == 50:
            app.inject_event(ke.InputEvent("key_up", key="right"))
        app.renderFrameOnce()
        seen[app.fixed_step] = (_hash(app), repr(app.state_dict()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # state hooks: no 'not rewound' warning
        for k in (70, 35, 61):
            app.seek(k)
            assert (_hash(app), repr(app.state_dict())) == seen[k]
    while app.fixed_step < 90:  # the redo comes back bit for bit
        app.renderFrameOnce()
        assert (_hash(app), repr(app.state_dict())) == seen[app.fixed_step]
    assert app.time_travel.branch == 0
    app.close()


class ArrowPusher(Pusher):
    """Pusher whose Left key kicks too (the Cartpole demo moves its cart with the arrows)."""

    def fixed_update(self, ts: float) -> None:
        if self.input.key_pressed("left"):
            self.kicks += 10
        super().fixed_update(ts)


def test_an_arrow_key_pressed_while_running_after_a_rewind_is_new_input() -> None:
    app = _app(ArrowPusher)
    _run(app, 40)
    app.seek(20)
    _run(app, 5, keys={22: "left"})  # running: the arrows are the App's own keys
    assert app.kicks == 10 and app.time_travel.branch_points == (22,)
    # paused, Left at the oldest step cannot move: its press is not left pending
    _key(app, "return")
    app.seek(0)
    _key(app, "left")
    _key(app, "return")
    assert app.fixed_step == 1 and app.time_travel.branch == 1 and app.kicks == 0
    app.close()


def test_a_refused_seek_says_why_the_step_is_not_in_the_history() -> None:
    app = _app()
    _run(app, 60)
    with pytest.raises(ValueError, match="newest step run so far is 60"):
        app.seek(61)
    with pytest.raises(ValueError, match="fixed steps count from 0"):
        app.seek(-5)
    app.seek(20)
    _run(app, 5, keys={20: "k"})  # a branch at 20: steps 26..60 are abandoned
    with pytest.raises(ValueError, match="steps after 25 were abandoned by branch 1"):
        app.seek(40)
    with pytest.raises(ValueError, match="newest step run so far is 25"):
        app.seek(10**6)
    app.time_travel.history_s = 0.1  # keeps ~5 steps at 50 Hz, plus a keyframe
    _run(app, 30)
    with pytest.raises(ValueError, match="older than the history keeps"):
        app.seek(0)
    app.close()


def test_a_plain_app_seeks_without_a_warning_and_a_subclass_warning_names_the_caller() -> None:
    plain = _app(ke.App)
    for _ in range(10):
        plain.renderFrameOnce()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain.seek(3)  # KELab's own App keeps no attributes seek would miss
    plain.close()
    app = _app(Plain)
    for _ in range(10):
        app.renderFrameOnce()
    with pytest.warns(RuntimeWarning) as caught:
        app.seek(3)
    assert caught[0].filename == __file__  # points at the user's app.seek(...) line
    app.close()


def _stack_app(layout: str) -> ke.App:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    for i in range(6):
        pose = ke.Pose(0.02 * i, 0.25 + 0.5 * i)
        b.add(ke.Prop(ke.Box(0.5, 0.5), initial_pose=pose), at=f"/World/B{i}")
    world = ke.World(b.build(), layout=layout)
    return ke.App(headless=True, world=world, size=(160, 120), render_hz=None,
                  time_mode=ke.TimeMode.SIM_HIGH_PERF)  # fmt: skip


def test_the_app_keeps_a_warm_world_log_short_and_the_motion_unchanged() -> None:
    from kelab.app.time_travel import WORLD_LOG_STEPS

    app = _stack_app("isolated")
    seen = {}
    for _ in range(400):
        app.renderFrameOnce()
        seen[app.fixed_step] = app.world.body_poses.copy()
    w = app.world
    assert w.max_log_steps == WORLD_LOG_STEPS == 32  # rebased every 32 steps, warm
    # the motion is that of the same World stepped alone, never rebased: bit for bit
    alone = ke.World(w._scene)
    for _ in range(w.step_count):
        alone.step(app.physics_dt)
    assert np.array_equal(alone.body_poses, w.body_poses)
    assert w.body_poses[0, -1, 1] > 2.2  # the stack still stands
    # a seek back re-simulates at most 32 physics steps, and is exact
    snaps = [k.world for k in app.time_travel._keys.values()]
    assert all(s.step_count - s.arrays["log/step"][0] < 32 for s in snaps)
    app.seek(123)
    assert np.array_equal(app.world.body_poses, seen[123])
    app.close()


def test_a_packed_world_keeps_its_own_rebase_period() -> None:
    app = _stack_app("packed")
    for _ in range(40):
        app.renderFrameOnce()
    assert app.world.max_log_steps == 7200  # its rebases are cold: the App leaves it
    app.close()
