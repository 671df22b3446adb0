"""Live changes to a Timeline: TimeRunner.hz setter and Binding rebinding."""

from fractions import Fraction

import pytest

import kelab as ke


def _logger(tl, log, tag):
    return lambda ts: log.append((tag, tl.time, ts))


def test_hz_setter_applies_from_the_next_boundary_exactly():
    tl = ke.Timeline()
    log = []
    tl.bind(_logger(tl, log, "r"), runner="Robot")
    tl.advance(Fraction(1, 10))  # Robot ran 0..100 ms, next at 120 ms
    tl.runner("Robot").hz = 25
    assert tl.runner("Robot").hz == 25 and tl.runner("Robot").ts == 0.04
    tl.advance(Fraction(2, 10))
    times = [t for _, t, _ in log if t > Fraction(1, 10)]
    assert times == [Fraction(k, 100) for k in (12, 16, 20, 24, 28)]
    assert all(ts == 0.04 for _, t, ts in log if t > Fraction(1, 10))
    # the other runner keeps its exact 30 Hz grid
    assert tl.runner("Capture").steps == 10  # 0, 1/30, ..., 9/30 (= 0.3)


def test_hz_setter_inside_a_callback_keeps_the_boundary_already_scheduled():
    tl = ke.Timeline(default_runners=False)
    tl.add_runner("A", 10)
    log = []

    def cb(ts):
        log.append((tl.time, ts))
        if tl.time == Fraction(2, 10):
            tl.runner("A").hz = 4

    tl.bind(cb, runner="A")
    tl.advance(1)
    assert [t for t, _ in log] == [Fraction(k, 10) for k in (0, 1, 2, 3)] + [
        Fraction(3, 10) + Fraction(k, 4) for k in (1, 2)
    ]
    assert [ts for _, ts in log] == [0.1] * 3 + [0.25] * 3  # the 0.3 s step is 0.25 s long


def test_rate_change_matches_a_chopped_advance():
    def run(before, after):
        tl = ke.Timeline()
        log = []
        tl.bind(_logger(tl, log, "r"), runner="Robot")
        tl.bind(_logger(tl, log, "c"), runner="Capture")
        for dt in before:
            tl.advance(dt)
        tl.runner("Capture").hz = Fraction(70, 3)  # at t = 3/7, between boundaries
        for dt in after:
            tl.advance(dt)
        return log

    a = run([Fraction(1, 7)] * 3, [Fraction(1, 2)])
    b = run([Fraction(3, 7)], [Fraction(1, 4), Fraction(1, 8), Fraction(1, 8)])
    assert a == b
    capture = [t for tag, t, _ in a if tag == "c" and t > Fraction(3, 7)]
    assert capture == [Fraction(13, 30) + Fraction(3 * k, 70) for k in range(len(capture))]
    assert len(capture) == 12


@pytest.mark.parametrize("bad", [0, 0.001, 1001, float("nan"), "50", True, None])
def test_hz_setter_validates_like_add_runner(bad):
    tl = ke.Timeline()
    with pytest.raises(ValueError, match="runner 'Robot' hz must be"):
        tl.runner("Robot").hz = bad
    assert tl.runner("Robot").hz == 50


def test_rebinding_moves_runner_phase_priority_and_ts():
    tl = ke.Timeline()
    log = []
    a = tl.bind(lambda ts: log.append(("a", ts)), runner="Robot", name="a")
    tl.bind(lambda ts: log.append(("b", ts)), runner="Robot", phase="physics", name="b")
    tl.step()
    assert log == [("a", 0.02), ("b", 0.02)]
    log.clear()
    a.rebind(runner="Capture", phase=ke.Phase.EXPORT)
    assert (a.runner, a.phase, a.priority) == ("Capture", ke.Phase.EXPORT, 0)
    tl.advance(Fraction(1, 10))  # Robot at 20..100 ms, Capture at 33, 67, 100 ms
    assert [x for x in log if x[0] == "a"] == [("a", 1 / 30)] * 3
    rows = {r.name: r for r in tl.execution_order()}
    assert rows["a"].runner == "Capture" and rows["a"].phase is ke.Phase.EXPORT
    a.priority = -5
    a.phase = "acquisition"
    assert tl.execution_order()[0].name == "a"


def test_rebind_is_validated_and_all_or_nothing():
    tl = ke.Timeline()
    a = tl.bind(lambda ts: None, name="a")
    with pytest.raises(KeyError, match="no time runner named 'Nope'"):
        a.rebind(runner="Nope", priority=3)
    with pytest.raises(ValueError, match="phase must be a Phase"):
        a.rebind(runner="Capture", phase="later")
    with pytest.raises(ValueError, match="priority must be an int"):
        a.priority = 1.5
    assert (a.runner, a.phase, a.priority) == ("Robot", ke.Phase.CONTROL, 0)
    a.unbind()
    with pytest.raises(RuntimeError, match="unbound"):
        a.rebind(phase="physics")


def test_disabled_binding_does_not_run_but_still_holds_its_runner():
    tl = ke.Timeline()
    calls = []
    b = tl.bind(lambda ts: calls.append(ts), runner="Capture", name="rec")
    b.enabled = False
    tl.advance(Fraction(1, 10))
    assert calls == [] and all(r.name != "rec" for r in tl.execution_order())
    with pytest.raises(ValueError, match="still has callbacks bound"):
        tl.remove_runner("Capture")
    with pytest.raises(ValueError, match="enabled must be True or False"):
        b.enabled = 1
    b.enabled = True
    tl.advance(Fraction(1, 10))
    assert len(calls) == 3
    assert tl.bindings == (b,)


def test_renaming_a_runner_moves_its_bindings_and_keeps_its_place():
    tl = ke.Timeline()
    log = []
    b = tl.bind(_logger(tl, log, "c"), runner="Capture")
    heard = []
    tl.add_rename_hook(lambda old, new: heard.append((old, new)))
    tl.advance(Fraction(1, 10))
    tl.runner("Capture").name = "Camera"
    assert list(tl.runners) == ["Robot", "Camera"] and b.runner == "Camera"
    assert tl.runner("Camera").name == "Camera" and heard == [("Capture", "Camera")]
    with pytest.raises(KeyError, match="no time runner named 'Capture'"):
        tl.runner("Capture")
    tl.advance(Fraction(1, 10))  # still steps at 30 Hz, on its exact grid
    assert [t for _, t, _ in log] == [Fraction(k, 30) for k in range(7)]
    assert tl.execution_order()[0].runner == "Camera"


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("Robot", "cannot rename 'Capture' to 'Robot', another runner is called 'Robot'"),
        ("", "runner name must be a non-empty string, got ''"),
        ("  ", "runner name must be a non-empty string"),
        (7, "runner name must be a non-empty string, got 7"),
    ],
)
def test_a_bad_runner_name_is_refused_and_changes_nothing(name, error):
    tl = ke.Timeline()
    b = tl.bind(lambda ts: None, runner="Capture")
    with pytest.raises(ValueError, match=error):
        tl.runner("Capture").name = name
    assert list(tl.runners) == ["Robot", "Capture"] and b.runner == "Capture"


def test_the_app_clock_follows_a_renamed_main_runner():
    tl = ke.Timeline()
    clock = ke.FixedStepClock.for_timeline(tl, "Robot", time_mode=ke.TimeMode.SIM_HIGH_PERF)
    tl.runner("Robot").name = "Main"
    assert clock.runner == "Main"
    tl.runner("Main").hz = 25  # followed under its new name
    clock.tick_timeline(tl)
    clock.tick_timeline(tl)
    assert clock.step_dt == 0.04


def test_runner_ts_and_steps_are_read_only_and_binding_order_too():
    tl = ke.Timeline()
    runner = tl.runner("Robot")
    for attr in ("ts", "steps"):
        with pytest.raises(AttributeError):
            setattr(runner, attr, 1)
    b = tl.bind(lambda ts: None)
    with pytest.raises(AttributeError):
        b.order = 5
    calls = []
    tl.step()
    b.callback = calls.append  # a new callback runs from the next step (plans rebuilt)
    tl.step()
    assert calls == [0.02]
