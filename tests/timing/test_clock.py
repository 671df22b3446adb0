from fractions import Fraction

import pytest

import kelab as ke


def run_frames(clock, fake, frame_s, frames):
    counts = []
    for _ in range(frames):
        counts.append(clock.tick(lambda dt: None))
        fake.advance(frame_s)
    return counts


def test_first_tick_only_starts_the_clock(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock)
    fake_clock.advance(10.0)
    assert clock.tick(lambda dt: None) == 0
    assert clock.steps == 0 and clock.alpha == 0.0


def test_ten_frames_of_50ms_run_exactly_25_steps(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock)
    clock.tick(lambda dt: None)
    dts = []
    total = 0
    for _ in range(10):
        fake_clock.advance(0.05)
        total += clock.tick(dts.append)
    assert total == 25 == clock.steps
    assert dts == [0.02] * 25
    assert clock.alpha == 0.0
    assert clock.sim_time == pytest.approx(0.5)
    assert clock.sim_time_exact == Fraction(1, 2)


def test_steps_per_frame_and_alpha(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock)
    clock.tick(lambda dt: None)
    fake_clock.advance(0.05)
    assert clock.tick(lambda dt: None) == 2
    assert clock.alpha == pytest.approx(0.5)
    fake_clock.advance(0.005)
    assert clock.tick(lambda dt: None) == 0
    assert clock.alpha == pytest.approx(0.75)
    fake_clock.advance(0.005)
    assert clock.tick(lambda dt: None) == 1
    assert clock.alpha == pytest.approx(0.0, abs=1e-12)
    assert 0.0 <= clock.alpha < 1.0


def test_sim_realtime_caps_and_slows_down(fake_clock):
    clock = ke.FixedStepClock(0.01, clock=fake_clock, max_steps_per_frame=4)
    clock.tick(lambda dt: None)
    fake_clock.advance(0.1)  # 10 steps due
    assert clock.tick(lambda dt: None) == 4
    assert clock.sim_time == pytest.approx(0.04) == clock.steps * clock.step_dt
    assert clock.dropped_time == pytest.approx(0.06)
    assert clock.skipped_time == 0.0
    # the backlog was dropped: the next short frame does not burst
    fake_clock.advance(0.01)
    assert clock.tick(lambda dt: None) == 1


def test_game_realtime_jumps_sim_time_over_skipped(fake_clock):
    clock = ke.FixedStepClock(
        0.01, clock=fake_clock, max_steps_per_frame=4, time_mode=ke.TimeMode.GAME_REALTIME
    )
    clock.tick(lambda dt: None)
    fake_clock.advance(0.1)
    assert clock.tick(lambda dt: None) == 4
    assert clock.skipped_time == pytest.approx(0.06)
    assert clock.sim_time == pytest.approx(0.1)  # keeps up with wall time
    assert clock.steps == 4


def test_sim_high_perf_ignores_wall_time(fake_clock):
    clock = ke.FixedStepClock(
        0.01, clock=fake_clock, time_mode=ke.TimeMode.SIM_HIGH_PERF, steps_per_frame=3
    )
    counts = run_frames(clock, fake_clock, 5.0, 4)
    assert counts == [3, 3, 3, 3]
    fake_clock.advance(0.0)
    assert clock.tick(lambda dt: None) == 3
    assert clock.alpha == 0.0
    assert clock.sim_time == pytest.approx(0.15)


def test_pause_resume_and_single_step(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock)
    clock.tick(lambda dt: None)
    clock.pause()
    assert clock.paused
    fake_clock.advance(1.0)
    assert clock.tick(lambda dt: None) == 0
    clock.step_once()
    fake_clock.advance(1.0)
    assert clock.tick(lambda dt: None) == 1
    assert clock.tick(lambda dt: None) == 0
    clock.resume()
    fake_clock.advance(5.0)  # the paused time is not simulated after resume
    assert clock.tick(lambda dt: None) == 0
    fake_clock.advance(0.04)
    assert clock.tick(lambda dt: None) == 2
    assert clock.steps == 3


def test_time_scale_half_speed(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock, time_scale=0.5)
    clock.tick(lambda dt: None)
    counts = run_frames(clock, fake_clock, 0.04, 10)
    assert sum(counts) == 9  # 0.36 s of wall time after the first frame -> 0.18 s sim
    clock.time_scale = 2.0
    assert clock.time_scale == 2.0
    with pytest.raises(ValueError, match="time_scale"):
        clock.time_scale = 0
    with pytest.raises(ValueError, match="time_scale"):
        ke.FixedStepClock(0.02, time_scale=-1.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"step_dt": 0}, "step_dt"),
        ({"step_dt": float("nan")}, "step_dt"),
        ({"step_dt": 0.01, "max_steps_per_frame": 0}, "max_steps_per_frame"),
        ({"step_dt": 0.01, "steps_per_frame": 1.5}, "steps_per_frame"),
        ({"step_dt": 0.01, "time_mode": "fast"}, "time_mode"),
    ],
)
def test_bad_clock_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ke.FixedStepClock(**kwargs)


def test_exact_over_a_long_run(fake_clock):
    # 1/60 s frames never line up with a 1/50 s step in floats; integer ns keep it exact.
    fake = [i / 60 for i in range(60 * 600 + 1)]  # ten minutes of frames
    it = iter(fake)
    clock = ke.FixedStepClock(0.02, clock=lambda: next(it))
    for _ in fake:
        clock.tick(lambda dt: None)
    assert clock.steps == 30000


def test_clock_drives_a_timeline(fake_clock):
    tl = ke.Timeline()
    seen = {"Robot": 0, "Capture": 0}
    tl.bind(lambda ts: seen.__setitem__("Robot", seen["Robot"] + 1), runner="Robot")
    tl.bind(lambda ts: seen.__setitem__("Capture", seen["Capture"] + 1), runner="Capture")
    clock = ke.FixedStepClock.for_timeline(tl, clock=fake_clock, max_steps_per_frame=1000)
    assert clock.step_dt == 0.02
    latched = []
    clock.tick_timeline(tl)
    for _ in range(60):  # one second of 60 fps frames = 50 fixed steps = [0 s, 1 s)
        fake_clock.advance(1 / 60)
        clock.tick_timeline(tl, before_step=lambda: latched.append(tl.time))
    assert seen == {"Robot": 50, "Capture": 30}
    assert tl.time == Fraction(49, 50)  # the last boundary run
    assert len(latched) == 50


def test_each_fixed_step_runs_one_main_boundary(fake_clock):
    tl = ke.Timeline()
    per_step = []
    robot = []
    tl.bind(lambda ts: robot.append(tl.time), runner="Robot")
    clock = ke.FixedStepClock.for_timeline(tl, clock=fake_clock, max_steps_per_frame=100)
    clock.tick_timeline(tl)
    for _ in range(7):
        fake_clock.advance(0.02)
        before = len(robot)
        clock.tick_timeline(tl, before_step=lambda: per_step.append(len(robot)))
        assert len(robot) - before == 1
    assert robot == [Fraction(i, 50) for i in range(7)]


def test_fixed_steps_run_inside_the_fixed_step_scope(fake_clock):
    tl = ke.Timeline()
    pacer = ke.SimulationPacer(0.02, clock=fake_clock, sleep=lambda s: None)
    tl.bind(lambda ts: pacer.wait(), runner="Robot")
    clock = ke.FixedStepClock.for_timeline(tl, clock=fake_clock)
    clock.tick_timeline(tl)
    fake_clock.advance(0.02)
    with pytest.raises(RuntimeError, match="fixed_update"):
        clock.tick_timeline(tl)


def test_game_realtime_skips_timeline_boundaries(fake_clock):
    tl = ke.Timeline(default_runners=False)
    tl.add_runner("Robot", 100)
    fired = []
    tl.bind(lambda ts: fired.append(tl.time), runner="Robot")
    clock = ke.FixedStepClock.for_timeline(
        tl, "Robot", clock=fake_clock, max_steps_per_frame=2, time_mode=ke.TimeMode.GAME_REALTIME
    )
    clock.tick_timeline(tl)
    fake_clock.advance(0.1)
    clock.tick_timeline(tl)
    # 10 steps are due, 2 run: the oldest 8 (boundaries 0 .. 0.07 s) are skipped over
    assert fired == [Fraction(8, 100), Fraction(9, 100)]
    assert clock.sim_time == pytest.approx(0.1)


@pytest.mark.parametrize("bad", [1e300, float("inf"), float("nan")])
def test_broken_clock_readings_are_clear_value_errors(fake_clock, bad):
    # issue 9: OverflowError (1e300, inf) and a bare int() ValueError (NaN) before
    clock = ke.FixedStepClock(0.02, clock=fake_clock)
    clock.tick(lambda dt: None)
    fake_clock.now = bad
    with pytest.raises(ValueError, match=r"FixedStepClock clock reading must be a finite number"):
        clock.tick(lambda dt: None)


def test_time_scale_string_is_refused():
    with pytest.raises(ValueError, match="time_scale must be a number"):
        ke.FixedStepClock(0.02, time_scale="2")


def test_frame_delta_clamp_lives_on_the_clock(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock, max_frame_delta=0.1, max_steps_per_frame=100)
    assert clock.max_frame_delta == pytest.approx(0.1)
    clock.tick(lambda dt: None)
    fake_clock.advance(5.0)  # a window drag / debugger stop
    assert clock.tick(lambda dt: None) == 5  # 0.1 s of 20 ms steps, not 250
    assert clock.dropped_wall_time == pytest.approx(4.9)
    clock.pause()
    fake_clock.advance(5.0)  # paused time is neither simulated nor counted as cut
    clock.tick(lambda dt: None)
    clock.resume()
    clock.tick(lambda dt: None)
    assert clock.dropped_wall_time == pytest.approx(4.9)
    clock.max_frame_delta = None
    fake_clock.advance(1.0)
    assert clock.tick(lambda dt: None) == 50
    for bad in (0, -1.0, float("inf"), "0.1", True):
        with pytest.raises(ValueError, match="FixedStepClock.max_frame_delta must be"):
            clock.max_frame_delta = bad
    assert clock.max_frame_delta is None


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("step_dt", 0),
        ("step_dt", "0.02"),
        ("time_mode", "fast"),
        ("max_steps_per_frame", 0),
        ("steps_per_frame", 1.5),
        ("time_scale", -1),
    ],
)
def test_setters_validate_like_the_constructor(field, bad):
    clock = ke.FixedStepClock(0.02)
    before = getattr(clock, field)
    with pytest.raises(ValueError, match=f"FixedStepClock.{field}"):
        setattr(clock, field, bad)
    assert getattr(clock, field) == before


def test_changing_the_step_keeps_time_continuous(fake_clock):
    clock = ke.FixedStepClock(0.02, clock=fake_clock)
    clock.tick(lambda dt: None)
    fake_clock.advance(0.05)
    assert clock.tick(lambda dt: None) == 2 and clock.alpha == pytest.approx(0.5)
    clock.step_dt = Fraction(1, 25)  # 0.04 s: the 10 ms left over is a quarter step
    assert clock.sim_time_exact == Fraction(1, 25) and clock.alpha == pytest.approx(0.25)
    fake_clock.advance(0.07)
    assert clock.tick(lambda dt: None) == 2 and clock.sim_time_exact == Fraction(3, 25)


def _timeline_clock(fake_clock):
    tl = ke.Timeline()
    robot: list[float] = []
    tl.bind(lambda ts: robot.append(ts), runner="Robot")
    clock = ke.FixedStepClock.for_timeline(tl, "Robot", clock=fake_clock)
    clock.tick_timeline(tl)
    return tl, clock, robot


def test_clock_follows_the_main_runner_rate_at_the_next_boundary(fake_clock):
    tl, clock, robot = _timeline_clock(fake_clock)
    fake_clock.advance(0.1)
    assert clock.tick_timeline(tl) == 5 and robot == [0.02] * 5
    tl.runner("Robot").hz = 25  # as the Settings panel does, between frames
    fake_clock.advance(0.1)
    assert clock.tick_timeline(tl) == 2  # two 40 ms steps, 20 ms left over
    assert robot[5:] == [0.04, 0.04] and clock.step_dt == pytest.approx(0.04)
    assert clock.alpha == pytest.approx(0.5)  # half of the runner's real step
    assert clock.sim_time_exact == Fraction(9, 50)  # 0.1 + 2 * 0.04
    assert tl.runner("Robot").steps == 7 and tl.time == Fraction(1, 6)  # Capture at 1/6 s
    fake_clock.advance(0.02)
    assert clock.tick_timeline(tl) == 1 and len(robot) == 8  # each fixed step: one boundary


def test_rate_change_inside_a_step_returns_the_rest_of_the_frame(fake_clock):
    tl = ke.Timeline()
    robot: list[float] = []

    def control(ts):
        robot.append(ts)
        if len(robot) == 2:
            tl.runner("Robot").hz = 25  # from the boundary already scheduled (0.04 s) on

    tl.bind(control, runner="Robot")
    clock = ke.FixedStepClock.for_timeline(tl, "Robot", clock=fake_clock)
    clock.tick_timeline(tl)
    fake_clock.advance(0.1)
    assert clock.tick_timeline(tl) == 2 and clock.steps == 2  # the other 60 ms wait
    assert clock.step_dt == pytest.approx(0.04)
    assert clock.tick_timeline(tl) == 1 and robot == [0.02, 0.02, 0.04]
    assert clock.sim_time_exact == Fraction(2, 25) and clock.alpha == pytest.approx(0.5)
