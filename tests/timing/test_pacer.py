import time

import pytest

import kelab as ke
from kelab.timing.guard import fixed_step_scope


class FakeTime:
    """A fake clock whose sleep advances it exactly; `work(s)` simulates a step's cost."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def work(self, seconds: float) -> None:
        self.now += seconds


def test_waits_until_exact_deadline_with_one_sleep():
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft.clock, sleep=ft.sleep)
    ft.work(0.005)
    waited = pacer.wait()
    assert waited == pytest.approx(0.015)
    assert ft.sleeps == [pytest.approx(0.015)]
    assert ft.now == pytest.approx(100.02)


def test_deadlines_are_absolute_no_drift():
    ft = FakeTime()
    pacer = ke.SimulationPacer(1 / 60, clock=ft.clock, sleep=ft.sleep)
    for _ in range(6000):
        ft.work(0.003)
        pacer.wait()
    # 6000 steps at 60 Hz end at exactly start + 100 s: no accumulated rounding
    assert ft.now == pytest.approx(100.0 + 100.0, abs=1e-9)
    assert pacer.steps == 6000 and pacer.late_steps == 0


def test_late_step_does_not_wait_or_catch_up():
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft.clock, sleep=ft.sleep)
    ft.work(0.05)  # a stall: 2.5 steps late
    assert pacer.wait() == 0.0
    assert pacer.late_steps == 1
    # next deadline is now + step_dt: the next fast step waits a whole step, no burst
    ft.work(0.001)
    assert pacer.wait() == pytest.approx(0.019)
    ft.work(0.001)
    assert pacer.wait() == pytest.approx(0.019)
    assert ft.sleeps == [pytest.approx(0.019)] * 2
    assert pacer.steps == 3


def test_reset_starts_a_new_schedule():
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.1, clock=ft.clock, sleep=ft.sleep)
    pacer.wait()
    ft.work(5.0)
    pacer.reset()
    assert pacer.steps == 0 and pacer.late_steps == 0
    assert pacer.next_deadline == pytest.approx(ft.now + 0.1)
    assert pacer.wait() == pytest.approx(0.1)
    assert pacer.late_steps == 0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "0.1", True])
def test_bad_step_dt(bad):
    with pytest.raises(ValueError, match="step_dt"):
        ke.SimulationPacer(bad)


def test_wait_inside_fixed_step_is_refused():
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft.clock, sleep=ft.sleep)
    with fixed_step_scope(), pytest.raises(RuntimeError, match="fixed_update"):
        pacer.wait()
    assert pacer.steps == 0  # nothing was counted
    pacer.wait()  # fine outside


def test_precise_sleep_sleeps_at_least_and_not_much_more():
    # a loose sanity bound only (wall-clock accuracy is measured in benchmarks/)
    start = time.perf_counter()
    ke.precise_sleep(0.003)
    assert time.perf_counter() - start >= 0.003
    ke.precise_sleep(0)
    ke.precise_sleep(-1)


def test_backwards_clock_jump_reanchors_instead_of_sleeping_an_hour():
    # issue 9: a clock set back one hour made every later wait() sleep ~3600 s
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft.clock, sleep=ft.sleep)
    ft.work(0.005)
    pacer.wait()
    ft.now -= 3600.0
    assert pacer.wait() == 0.0 and pacer.clock_jumps == 1
    ft.work(0.005)
    assert pacer.wait() == pytest.approx(0.015)
    assert max(ft.sleeps) <= 0.02


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_clock_is_a_value_error(bad):
    ft = FakeTime()
    pacer = ke.SimulationPacer(0.02, clock=ft.clock, sleep=ft.sleep)
    ft.now = bad
    with pytest.raises(ValueError, match="finite number of seconds"):
        pacer.wait()
