"""Time inputs: clocks that jump backwards, NaN/infinite/huge readings, bad time_scale.

Every clock here is injected; no test depends on real time.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kelab as ke


class FakeTime:
    """A settable clock whose sleep advances it exactly (and records every sleep)."""

    def __init__(self, start: float = 5000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.0, seconds)


# ---------------------------------------------------------------- SimulationPacer
def test_pacer_backwards_jump_reanchors_and_never_sleeps_an_hour():
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft, sleep=ft.sleep)
    for _ in range(3):
        ft.now += 0.005
        pacer.wait()
    ft.now -= 3600.0  # the wall clock was set back one hour
    assert pacer.wait() == 0.0
    assert pacer.clock_jumps == 1
    for _ in range(50):  # and on every later step: paced again at one step, not 3600 s
        ft.now += 0.005
        assert pacer.wait() == pytest.approx(0.015)
    assert max(ft.sleeps) <= 0.02
    assert pacer.clock_jumps == 1 and pacer.late_steps == 0


def test_pacer_small_backwards_jump_is_a_jump_too():
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft, sleep=ft.sleep)
    ft.now += 0.005
    pacer.wait()
    ft.now -= 0.001
    assert pacer.wait() == 0.0 and pacer.clock_jumps == 1


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_pacer_no_sleep_is_ever_longer_than_one_step(moves):
    ft = FakeTime()
    pacer = ke.SimulationPacer(1 / 60, clock=ft, sleep=ft.sleep)
    for move in moves:
        ft.now += move
        waited = pacer.wait()
        assert 0.0 <= waited <= 1 / 60
    assert all(0 < s <= 1 / 60 for s in ft.sleeps)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), "1.0", None, True])
def test_pacer_bad_clock_readings_are_value_errors(bad):
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft, sleep=ft.sleep)
    ft.now = bad
    with pytest.raises(
        ValueError, match="SimulationPacer clock reading must be a finite number"
    ) as info:
        pacer.wait()
    assert repr(float(bad) if isinstance(bad, float) else bad) in str(info.value)
    assert ft.sleeps == []
    with pytest.raises(ValueError, match="SimulationPacer"):
        ke.SimulationPacer(0.02, clock=ft, sleep=ft.sleep)  # reset() reads the clock too


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.1"])
def test_precise_sleep_refuses_non_finite(bad):
    with pytest.raises(ValueError, match="precise_sleep: seconds must be a finite number"):
        ke.precise_sleep(bad)


def test_app_render_pacing_survives_a_backwards_jump():
    ft = FakeTime()
    app = ke.App(headless=True, size=(64, 48), render_hz=50, clock=ft, sleep=ft.sleep)
    try:
        app.renderFrameOnce()
        ft.now -= 3600.0
        for _ in range(5):
            app.renderFrameOnce()
        assert ft.sleeps and max(ft.sleeps) <= 1 / 50
    finally:
        app.close()


def test_app_nan_clock_is_a_value_error():
    ft = FakeTime()
    app = ke.App(headless=True, size=(64, 48), render_hz=50, clock=ft, sleep=ft.sleep)
    try:
        app.renderFrameOnce()
        ft.now = float("nan")
        with pytest.raises(ValueError, match="clock reading must be a finite number"):
            app.renderFrameOnce()
    finally:
        app.close()


# ---------------------------------------------------------------- FixedStepClock
@pytest.mark.parametrize(
    "bad", [1e300, float("inf"), -float("inf"), float("nan"), -1e13, "3.0", None]
)
def test_fixed_step_clock_refuses_broken_readings(bad):
    ft = FakeTime(0.0)
    clock = ke.FixedStepClock(0.02, clock=ft)
    clock.tick(lambda dt: None)
    ft.now = bad
    with pytest.raises(
        ValueError, match="FixedStepClock clock reading must be a finite number"
    ) as info:
        clock.tick(lambda dt: None)
    if isinstance(bad, float):
        assert repr(bad) in str(info.value)
    assert clock.steps == 0
    ft.now = 0.1  # the clock recovers: ticking goes on from the last good reading
    assert clock.tick(lambda dt: None) == 5


@pytest.mark.parametrize("mode", list(ke.TimeMode))
def test_fixed_step_clock_long_frame_within_range_is_handled_by_the_mode(mode):
    ft = FakeTime(0.0)
    clock = ke.FixedStepClock(0.02, clock=ft, time_mode=mode, max_steps_per_frame=4)
    clock.tick(lambda dt: None)
    ft.now = 9e11  # a frame of ~28,500 years: finite, capped like any long frame
    assert clock.tick(lambda dt: None) == (1 if mode is ke.TimeMode.SIM_HIGH_PERF else 4)
    assert clock.sim_time >= 0 and 0.0 <= clock.alpha < 1.0


def test_fixed_step_clock_backwards_jump_adds_no_time():
    ft = FakeTime(100.0)
    clock = ke.FixedStepClock(0.02, clock=ft)
    clock.tick(lambda dt: None)
    ft.now = 0.0
    assert clock.tick(lambda dt: None) == 0
    ft.now = 0.04
    assert clock.tick(lambda dt: None) == 2


@pytest.mark.parametrize("bad", ["2", b"2", True, None, [2.0], float("nan"), 0, -1.0, 1e7])
def test_time_scale_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="FixedStepClock.time_scale"):
        ke.FixedStepClock(0.02, time_scale=bad)
    clock = ke.FixedStepClock(0.02)
    with pytest.raises(ValueError, match="FixedStepClock.time_scale"):
        clock.time_scale = bad
    assert clock.time_scale == 1.0


def test_time_scale_numbers_still_work():
    assert ke.FixedStepClock(0.02, time_scale=2).time_scale == 2.0
    assert ke.FixedStepClock(0.02, time_scale=Fraction(1, 3)).time_scale == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad", ["0.02", True, None])
def test_step_dt_must_be_a_number(bad):
    with pytest.raises(ValueError, match="FixedStepClock.step_dt"):
        ke.FixedStepClock(bad)


# ---------------------------------------------------------------- SimulationTimingConfig
@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"sim_dt": 5e-324}, "sim_dt"),  # physics_hz was inf
        ({"sim_dt": 1e308, "episode_length_s": 1.0}, "sim_dt"),  # 0-step episodes
        ({"sim_dt": 1e-3, "episode_length_s": 1e300}, "episode_length_s"),  # OverflowError
        ({"sim_dt": 0.01, "decimation": 10**400}, "decimation"),  # OverflowError
        ({"sim_dt": 0.01, "decimation": 10**5}, "decimation"),
    ],
)
def test_timing_config_refuses_values_outside_the_documented_ranges(kwargs, field):
    with pytest.raises(ValueError, match=f"SimulationTimingConfig.{field} must be"):
        ke.SimulationTimingConfig(**kwargs)


def test_timing_config_extremes_inside_the_ranges_work():
    cfg = ke.SimulationTimingConfig(sim_dt=1e-6, decimation=10_000, episode_length_s=1e9)
    assert cfg.max_episode_length == 100_000_000_000  # 1e9 s at 10 ms steps
    assert ke.SimulationTimingConfig(sim_dt=1.0, episode_length_s=1e-9).max_episode_length == 1
