"""No public attribute of KELab's main classes is silently ignored when set (#27.1).

Every public data attribute of the App, its panel model, the Timeline, TimeRunner,
Binding, FixedStepClock, LiveSettings and AppConfig is set here: either it is in the
table of writable attributes below, whose effect is checked, or setting it raises. A new
public attribute that can be set and is not in the table fails this test.
"""

from __future__ import annotations

import inspect
from fractions import Fraction
from pathlib import Path

import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.config import LIVE_SETTINGS, AppConfig


def _app(tmp_path):
    app = make_app(FakeClock(), world=ke.World(ball_scene(1)), settings=tmp_path / "s.kelab.json")
    app.renderFrameOnce()
    return app


def _data_attributes(obj) -> list[str]:
    names = []
    for name in dir(obj):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(obj, name)
        if inspect.isroutine(static) or isinstance(static, (classmethod, staticmethod)):
            continue
        if isinstance(getattr(type(obj), name, None), type):
            continue  # a nested class
        names.append(name)
    return names


def _names(timeline):
    return {r.name for r in timeline.execution_order()}


def _effects(app):
    """Writable attribute -> (object, new value, check that the change took effect)."""
    tl, clock, panel = app.timeline, app.clock, app.panel
    runner = tl.runner("Capture")
    binding = next(b for b in tl.bindings if b.name == "late_update")
    seen = []
    return {
        ("App", "panel_open"): (app, False, lambda: not app.panel_window.open),
        ("App", "free_step_scripts"): (app, True, lambda: app.live.free_step_scripts),
        ("PanelModel", "page"): (panel, "Scripts", lambda: panel.page == "Scripts"),
        ("PanelModel", "open"): (panel, False, lambda: not app.panel_open),
        ("PanelModel", "message"): (panel, "hi", lambda: panel.message == "hi"),
        ("PanelModel", "settings_error"): (
            panel,
            "bad",
            lambda: panel.settings_status() == "not used (see above)",
        ),
        ("PanelModel", "dirty"): (
            panel,
            True,
            lambda: panel.settings_status() == "unsaved changes",
        ),
        ("TimeRunner", "name"): (runner, "Camera", lambda: "Camera" in tl.runners),
        ("TimeRunner", "hz"): (runner, 25, lambda: runner.ts == 0.04),
        ("Binding", "runner"): (binding, "Camera", lambda: binding.runner == "Camera"),
        ("Binding", "phase"): (binding, "EXPORT", lambda: binding.phase is ke.Phase.EXPORT),
        ("Binding", "priority"): (binding, 7, lambda: binding.priority == 7),
        ("Binding", "enabled"): (binding, False, lambda: "late_update" not in _names(tl)),
        ("Binding", "name"): (binding, "late", lambda: binding.name == "late"),
        ("Binding", "callback"): (binding, seen.append, lambda: binding.callback == seen.append),
        ("FixedStepClock", "step_dt"): (
            clock,
            Fraction(1, 25),
            lambda: clock.step_exact == Fraction(1, 25),
        ),
        ("FixedStepClock", "time_mode"): (
            clock,
            ke.TimeMode.GAME_REALTIME,
            lambda: clock.time_mode.name == "GAME_REALTIME",
        ),
        ("FixedStepClock", "max_steps_per_frame"): (
            clock,
            3,
            lambda: clock.max_steps_per_frame == 3,
        ),
        ("FixedStepClock", "steps_per_frame"): (clock, 2, lambda: clock.steps_per_frame == 2),
        ("FixedStepClock", "max_frame_delta"): (clock, 0.5, lambda: clock.max_frame_delta == 0.5),
        ("FixedStepClock", "time_scale"): (clock, 0.5, lambda: clock.time_scale == 0.5),
        ("FixedStepClock", "paused"): (clock, True, lambda: app.paused),
    } | {("LiveSettings", name): (app.live, None, None) for name in LIVE_SETTINGS}


def test_every_public_attribute_either_takes_effect_or_refuses(tmp_path):
    app = _app(tmp_path)
    effects = _effects(app)
    runner = app.timeline.runner("Capture")
    binding = next(b for b in app.timeline.bindings if b.name == "late_update")
    objects = [
        app,
        app.panel,
        app.timeline,
        runner,
        binding,
        app.clock,
        app.live,
        app.config,
    ]
    checked = set()
    for obj in objects:
        cls = type(obj).__name__
        for name in _data_attributes(obj):
            key = (cls, name)
            if key in effects:
                target, value, check = effects[key]
                if check is None:  # a live setting: checked like the config, read back
                    value = getattr(obj, name)
                    setattr(obj, name, value)
                    assert getattr(obj, name) == value
                else:
                    setattr(target, name, value)
                    assert check(), f"{cls}.{name} = {value!r} was ignored"
                checked.add(key)
                continue
            with pytest.raises((AttributeError, ValueError)):
                setattr(obj, name, getattr(obj, name))
                pytest.fail(f"{cls}.{name} can be set but nothing checks that it takes effect")
    assert checked == set(effects), set(effects) - checked
    app.close()


def test_replacing_an_app_collaborator_is_refused_with_a_clear_error(tmp_path):
    app = _app(tmp_path)
    with pytest.raises(AttributeError, match="App.timeline is set for the object's life"):
        app.timeline = ke.Timeline()
    with pytest.raises(AttributeError, match="App.world is set"):
        app.world = None
    with pytest.raises(ValueError, match="panel page must be one of"):
        app.panel.page = "Nope"
    with pytest.raises(AttributeError):
        AppConfig().title = "x"
    app.close()


@pytest.mark.parametrize("kind", ["data", "video"])
def test_a_recorders_runner_phase_and_priority_take_effect_and_its_path_refuses(tmp_path, kind):
    app = _app(tmp_path)
    if kind == "data":
        rec = ke.DataRecorder(tmp_path / "d.csv", runner="Capture")
    else:
        rec = ke.VideoRecorder(tmp_path / "v.mp4", runner="Capture")
    app.add_recorder(rec)
    binding = next(b for b in app.timeline.bindings if b.callback == rec.record)
    rec.runner = "Robot"  # was a plain attribute: the binding stayed on Capture
    assert rec.runner == binding.runner == "Robot"
    rec.phase = "export"
    assert rec.phase is binding.phase is ke.Phase.EXPORT
    rec.priority = 5
    assert rec.priority == binding.priority == 5
    with pytest.raises(KeyError, match="no time runner named 'Nope'"):
        rec.runner = "Nope"
    with pytest.raises(ValueError, match="priority"):
        rec.priority = 1.5
    assert (rec.runner, rec.phase, rec.priority) == ("Robot", ke.Phase.EXPORT, 5)  # unchanged
    with pytest.raises(AttributeError):
        rec.path = tmp_path / "other.csv"  # the file is already streaming: refused
    app.timeline.runner("Robot").name = "Main"  # a rename: the recorder follows
    assert rec.runner == binding.runner == "Main"
    app.close()


def test_pick_and_drag_hooks_assigned_on_the_instance_are_called(tmp_path):
    # before the fix the App called the class's hooks, bound at construction: [] here
    app = _app(tmp_path)
    seen = []
    app.on_pick_hover = lambda body: seen.append(("hover", body.path))
    app.on_pick = lambda body: seen.append(("pick", body.path))
    app.on_drag_begin = lambda body: seen.append(("begin", body.path))
    app.on_drag_update = lambda body, target: seen.append(("update", body.path))
    app.on_drag_end = lambda body: seen.append(("end", body.path))
    ball = "/World/Ball0"
    i = list(app.world.body_names).index(ball)
    x, y = map(int, app.camera.world_to_screen(tuple(app.world.body_poses[0, i, :2])))
    app.inject_event(ke.InputEvent("mouse_move", pos=(x, y)))
    app.renderFrameOnce()
    app.inject_events([ke.InputEvent("mouse_down", button=1, pos=(x, y))])
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("mouse_move", pos=(x + 20, y)))
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("mouse_up", button=1, pos=(x + 20, y)))
    app.renderFrameOnce()
    kinds = [kind for kind, path in seen if path == ball]
    for kind in ("hover", "pick", "begin", "update", "end"):
        assert kind in kinds, (kind, seen)
    assert kinds.index("pick") < kinds.index("begin") < kinds.index("update") < kinds.index("end")
    app.close()


def test_the_apps_read_only_properties_refuse_with_a_message_naming_them(tmp_path):
    # before: Python's bare "property 'stats' of 'App' object has no setter"
    app = _app(tmp_path)
    for name in ("stats", "history", "paused", "recording", "camera", "fixed_step"):
        with pytest.raises(AttributeError, match=rf"^App\.{name} is read-only \(App computes"):
            setattr(app, name, 1)
    app.close()
    reserved = ke.App.reserved_names()
    assert {"stats", "history", "view", "sync", "camera"} <= set(reserved)
    doc = (Path(__file__).parents[2] / "docs" / "app.md").read_text(encoding="utf-8")
    missing = [name for name in reserved if f"`{name}`" not in doc]
    assert not missing, f"docs/app.md does not list these reserved App names: {missing}"


def test_a_hook_assigned_on_the_instance_must_take_its_arguments(tmp_path):
    # before: app.fixed_update = 5 was taken, and the next frame ended the App with
    # "'int' object is not callable"
    app = _app(tmp_path)
    for name, value, got in [
        ("fixed_update", 5, "5"),
        ("fixed_update", lambda: None, r"<lambda>\(\)"),
        ("on_pick", None, "None"),
        ("render", lambda canvas: None, r"<lambda>\(canvas\)"),
        ("setup", lambda ts: None, r"<lambda>\(ts\)"),
    ]:
        with pytest.raises(ValueError, match=rf"^App\.{name} must be a callable taking .*, got "
                           rf"{got}; assign a function"):  # fmt: skip
            setattr(app, name, value)
        assert name not in vars(app)  # nothing set
    steps = []
    app.fixed_update = lambda ts: steps.append(ts)
    app.pause()
    app.step_once()
    app.renderFrameOnce()
    assert steps
    del app.fixed_update  # back to the class's
    assert "fixed_update" not in vars(app)
    app.close()


def test_a_subclass_hook_that_cannot_take_its_arguments_is_refused_at_the_class():
    # before: def fixed_update(self) was taken, and the first fixed step ended the App
    for name, body in [("fixed_update", "self"), ("render", "self, canvas"),
                       ("on_drag_update", "self, body")]:  # fmt: skip
        source = f"class Mine(ke.App):\n    def {name}({body}):\n        pass\n"
        with pytest.raises(ValueError, match=rf"^Mine\.{name} must be a callable taking .*; "
                           rf"define it as def {name}\(self, "):  # fmt: skip
            exec(source, {"ke": ke})  # noqa: S102 - a class statement under test

    class Fine(ke.App):  # defaults and *args take them too
        def fixed_update(self, ts, extra=None): ...
        def render(self, *args): ...

    assert Fine.fixed_update and Fine.render
