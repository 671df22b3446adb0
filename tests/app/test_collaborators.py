"""The App's collaborators run without an App, from a small context each (#38 item 1).

Each test builds a collaborator from its context (a World, a Timeline, a clock, an
Input... and plain callables), with no App anywhere, and exercises it; the last one
checks that an App's collaborators hold none of it (the App wires them: callbacks and
small typed objects, never the App).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.config import AppConfig, LiveSettings
from kelab.app.dragging import DragContext, Dragging, DragHooks
from kelab.app.hotkeys import HotkeyContext, apply_hotkey
from kelab.app.menu import MenuBar
from kelab.app.panel.model import PanelModel
from kelab.app.ports import Controls, PanelContext
from kelab.app.recordings import RecordingContext, Recordings
from kelab.app.sync import SyncContext, SyncPoints
from kelab.app.systems import EngineSystems
from kelab.app.time_travel import StateHooks, TimeTravel, TimeTravelContext
from kelab.app.view import ViewController
from kelab.timing.timeline import Phase

DT = 0.02


class _Hooks:
    """Records every hook call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def hooks(self) -> DragHooks:
        def hook(name: str):
            return lambda body, *rest: self.calls.append((name, body.path))

        names = ("on_pick", "on_pick_hover", "on_drag_begin", "on_drag_update", "on_drag_end")
        return DragHooks(**{n: hook(n) for n in names})


def _ball_point(world: ke.World) -> tuple[float, float]:
    x, y, _ = world.body_poses[0, world.body_names.index("/World/Ball0")]
    return (float(x), float(y))


def test_dragging_runs_from_a_context_without_an_app() -> None:
    world = ke.World(ball_scene(1))
    inp = ke.Input()
    seen = _Hooks()
    camera = ke.Camera(center=(0.0, 1.0), zoom=100.0, size=(160, 120))
    dragging = Dragging(
        DragContext(world, inp, LiveSettings(AppConfig()), lambda: camera, seen.hooks())
    )
    inp.mouse_world = _ball_point(world)
    dragging.press()
    assert dragging.dragged is not None and dragging.dragged.path == "/World/Ball0"
    assert seen.calls == [("on_pick", "/World/Ball0"), ("on_drag_begin", "/World/Ball0")]
    inp.mouse_world = (inp.mouse_world[0] + 0.5, inp.mouse_world[1] + 1.0)
    dragging.frame()
    assert dragging.target == inp.mouse_world and seen.calls[-1][0] == "on_drag_update"
    dragging.step(DT)  # the spring's force is held for this step's physics
    assert np.any(world.external_forces[0, world.body_names.index("/World/Ball0")] != 0.0)
    world.step(DT)
    dragging.release()
    assert seen.calls[-1] == ("on_drag_end", "/World/Ball0")
    assert dragging.dragged is None and not np.any(world.external_forces)


def test_recordings_run_from_a_context_without_an_app(tmp_path: Path) -> None:
    timeline = ke.Timeline()
    recordings = Recordings(RecordingContext(timeline, None, lambda: None, tmp_path, "t"))
    rec = recordings.add(ke.DataRecorder(tmp_path / "d.csv", bodies=(), runner="Robot"))
    assert recordings.recorders == (rec,) and recordings.frame_source() is None
    timeline.advance(0.1)
    recordings.set_branch(2)  # what the App wires to time travel's on_branch
    assert recordings.branch == 2 and rec.branch == 2
    later = recordings.add(ke.DataRecorder(tmp_path / "e.csv", bodies=(), runner="Robot"))
    assert later.branch == 2
    assert recordings.close() == []
    with pytest.raises(RuntimeError, match="closed"):
        recordings.add(ke.DataRecorder(tmp_path / "f.csv", bodies=()))


def _time_travel(state: dict) -> tuple[TimeTravel, ke.World, ke.FixedStepClock, ke.Timeline, list]:
    """A TimeTravel over a World on a Timeline, its own clock and input: no App."""
    world = ke.World(ball_scene(2))
    timeline = ke.Timeline()
    timeline.bind(lambda ts: state.__setitem__("n", state["n"] + 1), "Robot", Phase.CONTROL)
    timeline.bind(world.step, "Robot", Phase.PHYSICS)
    clock = ke.FixedStepClock.for_timeline(timeline, "Robot", time_mode=ke.TimeMode.SIM_HIGH_PERF)
    inp = ke.Input()
    camera = ke.Camera()
    dragging = Dragging(DragContext(world, inp, LiveSettings(AppConfig()), lambda: camera))
    branches: list[int] = []
    hooks = StateHooks(lambda: dict(state), lambda s: state.update(s))
    context = TimeTravelContext(
        world, timeline, clock, inp, dragging, state=hooks, on_branch=branches.append
    )
    return TimeTravel(context), world, clock, timeline, branches


def _frames(tt: TimeTravel, clock: ke.FixedStepClock, timeline: ke.Timeline, n: int) -> None:
    for _ in range(n):  # what the App's frame does with its clock and time travel
        clock.tick_timeline(timeline, before_step=tt.before_step)
        tt.close_step()


def test_time_travel_runs_from_a_context_without_an_app() -> None:
    state = {"n": 0}
    tt, world, clock, timeline, branches = _time_travel(state)
    poses = {}
    for _ in range(30):
        _frames(tt, clock, timeline, 1)
        poses[tt.fixed_step] = world.body_poses.copy()
    assert tt.fixed_step == 30 and tt.history == range(0, 31) and state["n"] == 30
    tt.seek(12)
    assert np.array_equal(world.body_poses, poses[12]) and state["n"] == 12
    assert clock.steps == timeline.runner("Robot").steps == 12
    _frames(tt, clock, timeline, 5)  # redo: the recorded future comes back
    assert np.array_equal(world.body_poses, poses[17]) and branches == []
    state["n"] += 100  # a change in code between steps: a branch
    _frames(tt, clock, timeline, 1)
    assert branches == [1] and tt.branch == 1 and tt.history == range(0, 19)


def test_sync_points_run_from_a_context_without_an_app() -> None:
    timeline = ke.Timeline()
    clock = ke.FixedStepClock.for_timeline(timeline, "Robot")
    owner = object()
    sync = SyncPoints(SyncContext(timeline, clock, None, owner))
    binding = sync.bind(EngineSystems(timeline), "Robot")
    assert binding.runner == "Sync" and "Sync" in timeline.runners
    future = sync.submit(lambda got: got is owner)
    assert sync.pending == 1
    sync.run(0.1)
    assert future.result(timeout=1) is True and sync.latest().step == 0
    sync.close()
    with pytest.raises(RuntimeError, match="closed"):
        sync.submit(lambda got: None)
    binding.unbind()  # what the App does when the timeline outlives it
    sync.remove_runner()
    assert "Sync" not in timeline.runners


def _controls(log: list[str], paused: bool = False) -> Controls:
    def do(name: str):
        return lambda: log.append(name)

    names = ("pause", "toggle_pause", "step_once", "toggle_panel", "toggle_video_recording")
    return Controls(
        paused=lambda: paused,
        panel_open=lambda: False,
        recording=lambda: False,
        request_close=do("request_close"),
        **{n: do(n) for n in names},
    )


def test_the_menu_and_the_hotkeys_run_from_controls_without_an_app(tmp_path: Path) -> None:
    log: list[str] = []
    saved: list[Path] = []
    menu = MenuBar(_controls(log), True, saved.append, tmp_path, "My App")
    items = {i.label: i for items in menu.menus().values() for i in items}
    assert set(items) >= {"Pause", "Step", "Settings", "Record video", "Quit"}
    items["Pause"].action()
    items["Quit"].action()
    assert log == ["toggle_pause", "request_close"]
    shot = items["Save screenshot"].action()
    assert shot == tmp_path / "My-App-shot-000.png" and menu.after_frame() is None
    assert saved == [shot]
    inp, live = ke.Input(), LiveSettings(AppConfig())
    keys = HotkeyContext(
        _controls(log, paused=True),
        inp,
        live,
        ViewController(None),
        camera=lambda: None,
        seek_key=lambda key, shift: key == "left",
    )
    log.clear()
    hud = live.show_hud
    for key in ("space", "left", "f9", "f1"):
        apply_hotkey(keys, key)
    assert log == ["step_once", "toggle_video_recording"] and live.show_hud is not hud


def test_the_panel_model_runs_from_a_context_without_an_app(tmp_path: Path) -> None:
    timeline = ke.Timeline()
    clock = ke.FixedStepClock.for_timeline(timeline, "Robot")
    inp, cfg = ke.Input(), AppConfig()
    recordings = Recordings(RecordingContext(timeline, None, lambda: None, tmp_path, "t"))
    dragging = Dragging(DragContext(None, inp, LiveSettings(cfg), ke.Camera))
    modes: list[ke.TimeMode] = []
    context = PanelContext(
        config=cfg,
        live=LiveSettings(cfg),
        clock=clock,
        timeline=timeline,
        world=None,
        recordings=recordings,
        systems=EngineSystems(timeline),
        time_travel=TimeTravel(TimeTravelContext(None, timeline, clock, inp, dragging)),
        physics_dt=lambda: None,
        stats=lambda: None,
        set_time_mode=modes.append,
    )
    panel = PanelModel(context, tmp_path / "s.kelab.json")
    assert [r.name for r in panel.runner_rows()] == ["Robot", "Capture"]
    assert panel.set_runner_hz("Capture", 25) and timeline.runner("Capture").hz == 25
    assert panel.set_time_mode(ke.TimeMode.SIM_HIGH_PERF) and modes == [ke.TimeMode.SIM_HIGH_PERF]


def test_no_collaborator_of_an_app_holds_the_app(tmp_path: Path) -> None:
    """The App hands each collaborator a context; only callbacks lead back to it.

    The one exception is the sync points' ``owner``: ``app.sync.submit(fn)`` runs
    ``fn(app)``, its documented contract.
    """
    app = make_app(FakeClock(), world=ke.World(ball_scene(1)), settings=tmp_path / "s.json")
    parts = [app.dragging, app.recordings, app.time_travel, app.sync, app.menu]
    parts += [app.panel, app.panel_window]
    held = []
    for part in parts:
        for name, value in vars(part).items():
            if value is app:
                held.append(f"{type(part).__name__}.{name}")
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                for f in dataclasses.fields(value):
                    if getattr(value, f.name) is app and (type(value), f.name) != (
                        SyncContext,
                        "owner",
                    ):
                        held.append(f"{type(part).__name__}.{name}.{f.name}")
    assert held == []
    app.close()


def test_the_app_s_public_names_are_its_own_no_forwarding_mixin() -> None:
    """The recorder and time-travel faces are the App's methods (no RecordingControls...)."""
    assert [c.__name__ for c in ke.App.__mro__] == ["App", "ReadOnlyAttributes", "object"]
    names = "recorders recording add_recorder remove_recorder start_video_recording "
    names += "stop_video_recording toggle_video_recording fixed_step history seek "
    names += "state_dict load_state_dict"
    assert [n for n in names.split() if n not in vars(ke.App)] == []
