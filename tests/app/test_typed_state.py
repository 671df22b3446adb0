"""Typed state between modules (#38 item 3): frozen records edited by name, declared hooks.

The clock's `ClockState` and the input's `StepView` are frozen records that time travel
edits with ``dataclasses.replace`` (never a tuple indexed by position), and the App
declares ``state_dict`` / ``load_state_dict`` as hooks (default: no state).
"""

from __future__ import annotations

import dataclasses
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
