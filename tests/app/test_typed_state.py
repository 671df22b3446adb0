"""Typed state between modules (#38 item 3): frozen records edited by name, declared hooks.

The clock's `ClockState` and the input's `StepView` are frozen records that time travel
edits with ``dataclasses.replace`` (never a tuple indexed by position), and the App
declares ``state_dict`` / ``load_state_dict`` as hooks (default: no state).
"""

from __future__ import annotations

import dataclasses
import warnings
from fractions import Fraction

import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke
from kelab.app.input import StepView
from kelab.timing.clock import ClockState


def test_the_clock_state_is_a_frozen_record_edited_by_name() -> None:
    clock = ke.FixedStepClock(Fraction(1, 50))
    clock.step_once()
    state = clock.time_state()
    assert isinstance(state, ClockState)
    assert (state.steps, state.step, state.pending_single_steps) == (0, Fraction(1, 50), 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.steps = 3  # type: ignore[misc]
    clock.set_time_state(dataclasses.replace(state, steps=7))
    assert clock.steps == 7 and clock.sim_time_exact == Fraction(7, 50)
    assert clock.time_state() == dataclasses.replace(state, steps=7)


@pytest.mark.parametrize("bad", [(0,) * 13, None, "state"])
def test_a_clock_state_that_is_no_clock_state_is_refused_changing_nothing(bad) -> None:
    clock = ke.FixedStepClock(0.02)
    before = clock.time_state()
    with pytest.raises(ValueError, match=r"set_time_state\(state\) must be a ClockState, got"):
        clock.set_time_state(bad)
    assert clock.time_state() == before


def test_the_step_view_is_a_frozen_record_with_named_fields() -> None:
    inp = ke.Input()
    inp.handle(ke.InputEvent("key_down", key="a"))
    inp.handle(ke.InputEvent("mouse_down", button=1, pos=(3, 4)))
    inp.mouse_world = (1.0, 2.0)
    inp.latch_fixed_step()
    view = inp.step_view()
    assert isinstance(view, StepView)
    assert view.keys_held == view.keys_pressed == frozenset({"a"})
    assert view.buttons_held == view.buttons_pressed == frozenset({1})
    assert view.keys_released == view.buttons_released == frozenset()
    assert view.mouse_world == (1.0, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.mouse_world = None  # type: ignore[misc]
    inp.set_step_view(dataclasses.replace(view, keys_held=frozenset({"b"}), mouse_world=None))
    assert inp.key_held("b") and not inp.key_held("a") and inp.mouse_world is None
    assert inp.step_key_pressed("a")  # the edges came back with the rest of the view


def test_a_step_view_that_is_no_step_view_is_refused() -> None:
    inp = ke.Input()
    with pytest.raises(ValueError, match=r"set_step_view\(view\) must be a StepView, got"):
        inp.set_step_view((frozenset(),) * 6 + (None,))


class _Counter(ke.App):
    n = 0

    def fixed_update(self, ts: float) -> None:
        self.n += 1


class _Kept(_Counter):
    def state_dict(self) -> dict:
        return {"n": self.n}

    def load_state_dict(self, state: dict) -> None:
        self.n = state["n"]


class _Half(_Counter):
    def state_dict(self) -> dict:  # no load_state_dict: seek cannot rewind n
        return {"n": self.n}


class _LoadOnly(_Counter):
    def load_state_dict(self, state) -> None:
        self.n = state


class _Neither(ke.App):
    pass


def _run(cls: type[ke.App], tmp_path) -> ke.App:
    app = make_app(FakeClock(), cls, world=ke.World(ball_scene(1)), settings=tmp_path / "s.json")
    app.clock.time_mode = ke.TimeMode.SIM_HIGH_PERF
    for _ in range(20):
        app.renderFrameOnce()
    return app


def test_state_dict_and_load_state_dict_are_declared_hooks_of_the_app(tmp_path) -> None:
    app = ke.App(headless=True, size=(64, 48), render_hz=None)
    assert app.state_dict() is None and app.load_state_dict({"anything": 1}) is None
    app.close()
    kept = _run(_Kept, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # both hooks defined: no warning
        kept.seek(5)
    assert kept.n == 5 and kept.fixed_step == 5
    kept.close()


def test_a_subclass_that_defines_not_both_hooks_is_warned_once(tmp_path) -> None:
    half = _run(_Half, tmp_path)
    # it names the hook missing (before: "does not define state_dict()/load_state_dict()")
    with pytest.warns(
        RuntimeWarning, match=r"_Half does not define load_state_dict\(\) \(only state_dict\(\)\):"
    ):
        half.seek(5)
    assert half.n == 25  # not rewound (no load_state_dict): it counts the 5 re-run steps
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        half.seek(4)  # once
    half.close()


@pytest.mark.parametrize(
    ("cls", "named"),
    [
        (_LoadOnly, r"_LoadOnly does not define state_dict\(\) \(only load_state_dict\(\)\):"),
        (_Neither, r"_Neither does not define state_dict\(\)/load_state_dict\(\):"),
    ],
)
def test_the_seek_warning_names_the_hooks_missing(tmp_path, cls, named) -> None:
    app = _run(cls, tmp_path)
    with pytest.warns(RuntimeWarning, match=named):
        app.seek(5)
    app.close()


def test_state_hooks_assigned_on_the_instance_are_used_by_seek(tmp_path) -> None:
    # before: the App kept the class's hooks from construction; n was not rewound (25)
    app = make_app(FakeClock(), _Counter, world=ke.World(ball_scene(1)), settings=tmp_path / "s")
    app.clock.time_mode = ke.TimeMode.SIM_HIGH_PERF
    app.state_dict = lambda: {"n": app.n}
    app.load_state_dict = lambda state: setattr(app, "n", state["n"])
    for _ in range(20):
        app.renderFrameOnce()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # both hooks there (on the instance): no warning
        app.seek(5)
    assert app.n == 5
    app.close()
