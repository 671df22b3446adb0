"""Input: held state, per-frame edges, and edges latched per fixed step inside a real App."""

from __future__ import annotations

import pytest
from app_helpers import FakeClock, make_app

import kelab as ke


def key(kind: str, name: str) -> ke.InputEvent:
    return ke.InputEvent(kind, key=name)


def test_held_state_mouse_and_axis():
    inp = ke.Input()
    inp.begin_frame()
    inp.handle_all(
        [
            key("key_down", "Right"),
            ke.InputEvent("mouse_down", button=1, pos=(10, 20)),
            ke.InputEvent("mouse_move", pos=(30, 40)),
            ke.InputEvent("mouse_wheel", wheel=(0.0, 2.0)),
        ]
    )
    assert inp.key_held("right") and inp.axis("left", "right") == 1.0
    assert inp.mouse_held("left") and inp.mouse_pos == (30.0, 40.0) and inp.wheel == (0.0, 2.0)
    assert inp.frame_mouse_pressed(1) and inp.mouse_pressed("left")
    inp.begin_frame()
    assert not inp.frame_mouse_pressed(1) and inp.wheel == (0.0, 0.0) and inp.mouse_held(1)
    inp.release_all()
    assert not inp.keys_held and not inp.mouse_held(1)
    with pytest.raises(ValueError, match="mouse button"):
        inp.mouse_held("thumb")
    with pytest.raises(ValueError, match="key name"):
        inp.key_held("")


def test_auto_repeat_is_not_a_new_press():
    inp = ke.Input()
    inp.handle(key("key_down", "a"))
    inp.latch_fixed_step()
    assert inp.step_key_pressed("a")
    inp.handle(key("key_down", "a"))  # repeat while held
    inp.latch_fixed_step()
    assert not inp.step_key_pressed("a")


class Edges(ke.App):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.step_seen: list[tuple[bool, bool, bool]] = []
        self.frame_seen: list[bool] = []

    def pre_update(self):
        self.frame_seen.append(self.input.key_pressed("a"))  # outside a step: frame edges

    def fixed_update(self, ts):
        inp = self.input
        self.step_seen.append((inp.key_pressed("a"), inp.key_released("a"), inp.key_held("a")))


def test_tap_between_two_fixed_steps_is_seen_exactly_once(fake_clock: FakeClock):
    app = make_app(fake_clock, Edges)
    app.renderFrameOnce()
    fake_clock.advance(0.01)  # half a step: this frame runs none
    app.inject_events([key("key_down", "a"), key("key_up", "a")])
    app.renderFrameOnce()
    assert app.step_seen == [] and app.frame_seen == [False, True]
    fake_clock.advance(0.05)  # 3 steps due now: only the first sees the tap
    app.renderFrameOnce()
    assert app.step_seen == [(True, True, False), (False, False, False), (False, False, False)]
    assert app.frame_seen[-1] is False
    fake_clock.advance(0.1)
    app.renderFrameOnce()
    assert [s[0] for s in app.step_seen].count(True) == 1
    app.close()


def test_held_key_is_pressed_once_and_held_every_step(fake_clock: FakeClock):
    app = make_app(fake_clock, Edges)
    app.renderFrameOnce()
    app.inject_event(key("key_down", "a"))
    fake_clock.advance(0.06)
    app.renderFrameOnce()
    assert app.step_seen == [(True, False, True), (False, False, True), (False, False, True)]
    app.inject_event(key("key_up", "a"))
    fake_clock.advance(0.02)
    app.renderFrameOnce()
    assert app.step_seen[-1] == (False, True, False)
    app.close()


def test_press_while_paused_reaches_the_single_step(fake_clock: FakeClock):
    app = make_app(fake_clock, Edges, hotkeys=False)
    app.renderFrameOnce()
    app.pause()
    app.inject_events([key("key_down", "a"), key("key_up", "a")])
    fake_clock.advance(0.2)
    app.renderFrameOnce()
    assert app.step_seen == []
    app.step_once()
    app.renderFrameOnce()
    assert app.step_seen == [(True, True, False)]
    app.close()


class SpaceReader(ke.App):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen = 0

    def fixed_update(self, ts):
        self.seen += self.input.key_pressed("space")


@pytest.mark.parametrize("name", ["space", "Space", "SPACE"])
def test_key_case_is_one_name_for_hooks_and_hotkeys(fake_clock: FakeClock, name: str):
    """ "Space" is stored as "space": it fires the Space hotkey (pause) like "space" does."""
    app = make_app(fake_clock, SpaceReader)
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key=name))
    fake_clock.advance(0.05)
    app.renderFrameOnce()
    assert app.paused and app.input.key_held("space")
    app.close()
    app = make_app(fake_clock, SpaceReader, hotkeys=False)  # without hotkeys: the hook sees it
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key=name))
    fake_clock.advance(0.05)
    app.renderFrameOnce()
    assert app.seen == 1 and not app.paused
    app.close()


def test_inject_events_takes_one_event_or_refuses_whole(fake_clock: FakeClock):
    app = make_app(fake_clock, Edges)
    app.renderFrameOnce()
    app.inject_events(key("key_down", "a"))  # one event, not a list: taken
    with pytest.raises(ValueError, match=r"App.inject_events\(events\)\[1\] must be a ke.Input"):
        app.inject_events([key("key_up", "a"), "key_up a"])
    with pytest.raises(ValueError, match=r"App.inject_events\(events\) must be an InputEvent or"):
        app.inject_events(5)
    fake_clock.advance(0.02)
    app.renderFrameOnce()  # the refused batch queued nothing: "a" is still held
    assert app.step_seen == [(True, False, True)]
    app.close()


def test_mouse_pos_stays_finite_and_wheel_zooms(fake_clock: FakeClock):
    app = make_app(fake_clock)
    app.renderFrameOnce()
    zoom = app.camera.zoom
    with pytest.raises(ValueError, match="InputEvent.pos"):
        app.inject_event(ke.InputEvent("mouse_move", pos=(float("nan"), 3)))
    with pytest.raises(ValueError, match="InputEvent.wheel"):
        app.inject_event(ke.InputEvent("mouse_wheel", wheel=1, pos=(10, 10)))
    app.inject_event(ke.InputEvent("mouse_wheel", wheel=(0, 1), pos=(10, 10)))
    app.inject_event(ke.InputEvent("mouse_move", pos=(12, 7)))
    fake_clock.advance(0.02)
    app.renderFrameOnce()
    assert app.input.mouse_pos == (12.0, 7.0) and app.camera.zoom > zoom
    app.close()
