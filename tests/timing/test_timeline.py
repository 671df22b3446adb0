import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kelab as ke
from kelab.timing.timeline import ON_UPDATE_PRIORITY


def recorder(log, label, tl):
    def callback(ts):
        log.append((label, tl.time, ts))

    return callback


def test_default_runners():
    tl = ke.Timeline()
    assert list(tl.runners) == ["Robot", "Capture"]
    assert tl.runner("Robot").hz == 50 and tl.runner("Capture").hz == 30
    assert tl.runner("Robot").ts == 0.02
    assert tl.runner("Capture").ts == pytest.approx(1 / 30)


def test_reference_cycle_of_robot_and_capture():
    tl = ke.Timeline()
    results = tl.advance(Fraction(1, 10))
    times_ms = [(r.time * 1000, r.runners) for r in results]
    assert times_ms == [
        (0, ("Robot", "Capture")),
        (20, ("Robot",)),
        (Fraction(100, 3), ("Capture",)),
        (40, ("Robot",)),
        (60, ("Robot",)),
        (Fraction(200, 3), ("Capture",)),
        (80, ("Robot",)),
        (100, ("Robot", "Capture")),
    ]


def test_shared_step_interleaves_by_phase_and_priority():
    tl = ke.Timeline()
    log = []
    tl.bind(recorder(log, "robot-late", tl), runner="Robot", phase=ke.Phase.VALIDATION)
    tl.bind(recorder(log, "robot-ctrl", tl), runner="Robot", phase=ke.Phase.CONTROL)
    tl.bind(
        recorder(log, "on-update", tl),
        runner="Robot",
        phase=ke.Phase.CONTROL,
        priority=ON_UPDATE_PRIORITY,
    )
    tl.bind(recorder(log, "capture-acq", tl), runner="Capture", phase=ke.Phase.ACQUISITION)
    tl.bind(recorder(log, "physics", tl), runner="Robot", phase=ke.Phase.PHYSICS)
    tl.bind(recorder(log, "capture-export", tl), runner="Capture", phase=ke.Phase.EXPORT)
    tl.bind(recorder(log, "ctrl-2", tl), runner="Capture", phase=ke.Phase.CONTROL, priority=0)
    tl.step()
    assert [entry[0] for entry in log] == [
        "capture-acq",
        "on-update",
        "robot-ctrl",
        "ctrl-2",
        "physics",
        "robot-late",
        "capture-export",
    ]
    # each callback gets its own runner's ts, even on a shared step
    ts = {label: t for label, _, t in log}
    assert ts["robot-ctrl"] == 0.02 and ts["capture-acq"] == pytest.approx(1 / 30)


def test_time_during_callback_is_its_boundary():
    tl = ke.Timeline()
    log = []
    tl.bind(recorder(log, "c", tl), runner="Capture")
    tl.advance(0.05)
    assert [t for _, t, _ in log] == [0, Fraction(1, 30)]
    assert tl.time == Fraction(1, 20)
    assert tl.time_s == 0.05


def test_bind_unbind_and_order_ties():
    tl = ke.Timeline()
    log = []
    a = tl.bind(recorder(log, "a", tl))
    tl.bind(recorder(log, "b", tl))
    tl.step()
    assert [e[0] for e in log] == ["a", "b"]
    a.unbind()
    a.unbind()  # idempotent
    assert not a.bound
    log.clear()
    tl.step()
    assert [e[0] for e in log] == ["b"]


def test_runner_rules():
    tl = ke.Timeline()
    with pytest.raises(ValueError, match="unique"):
        tl.add_runner("Robot", 10)
    for i in range(6):
        tl.add_runner(f"R{i}")
    with pytest.raises(ValueError, match="at most 8"):
        tl.add_runner("one-too-many", 10)
    with pytest.raises(ValueError, match="0.01 to 1000"):
        ke.Timeline().add_runner("fast", 1001)
    with pytest.raises(ValueError, match="0.01 to 1000"):
        ke.Timeline().add_runner("slow", 0.005)
    with pytest.raises(ValueError, match="non-empty"):
        ke.Timeline().add_runner("  ", 10)
    assert tl.runner("R0").hz == 60  # the default rate of a new runner
    solo = ke.Timeline(default_runners=False)
    solo.add_runner("only", 10)
    with pytest.raises(ValueError, match="last runner"):
        solo.remove_runner("only")
    with pytest.raises(KeyError, match="only"):
        solo.runner("missing")


def test_remove_runner_with_bindings_is_refused_until_unbound():
    tl = ke.Timeline()
    b = tl.bind(lambda ts: None, runner="Capture", name="rec")
    with pytest.raises(ValueError, match="rec"):
        tl.remove_runner("Capture")
    b.unbind()
    tl.remove_runner("Capture")
    assert list(tl.runners) == ["Robot"]


def test_bind_validation():
    tl = ke.Timeline()
    with pytest.raises(KeyError, match="Nope"):
        tl.bind(lambda ts: None, runner="Nope")
    with pytest.raises(ValueError, match="phase"):
        tl.bind(lambda ts: None, phase="lunch")
    with pytest.raises(ValueError, match="priority"):
        tl.bind(lambda ts: None, priority=1.5)
    with pytest.raises(ValueError, match="callable"):
        tl.bind(42)
    assert tl.bind(lambda ts: None, phase="physics").phase is ke.Phase.PHYSICS


def test_runner_added_later_fires_from_its_next_boundary():
    tl = ke.Timeline(default_runners=False)
    tl.add_runner("A", 10)
    tl.advance(Fraction(1, 4))  # boundaries 0, .1, .2 ran
    tl.add_runner("B", 4)  # its boundaries: 0, .25, .5 -> .25 is still ahead? no: time is .25
    results = tl.advance(Fraction(1, 4))
    assert [(r.time, r.runners) for r in results] == [
        (Fraction(1, 4), ("B",)),
        (Fraction(3, 10), ("A",)),
        (Fraction(2, 5), ("A",)),
        (Fraction(1, 2), ("A", "B")),
    ]


def test_removing_a_runner_keeps_time_exact():
    tl = ke.Timeline()
    tl.advance(Fraction(1, 30))  # last boundary ran at 1/30 (Capture)
    tl.remove_runner("Capture")
    assert tl.time == Fraction(1, 30)
    assert tl.next_boundary() == Fraction(2, 50)
    tl.add_runner("Fifty", 50)
    # it fires at its first boundary after 1/30 s
    res = tl.advance(Fraction(1, 30))
    assert res[0].time == Fraction(1, 25) and set(res[0].runners) == {"Robot", "Fifty"}


def test_execution_order_table():
    tl = ke.Timeline()

    def on_update(ts):
        pass

    tl.bind(on_update, priority=ON_UPDATE_PRIORITY)
    tl.bind(lambda ts: None, runner="Capture", phase=ke.Phase.ACQUISITION, name="recorder")
    tl.bind(lambda ts: None, phase=ke.Phase.VALIDATION, name="late")
    order = tl.execution_order()
    assert [row.name for row in order] == ["recorder", "on_update", "late"]
    assert order[1].priority == -200 and order[1].runner == "Robot" and order[1].hz == 50
    text = str(order)
    assert "ACQUISITION" in text and "recorder" in text and "Capture" in text
    assert text.splitlines()[0].split() == ["phase", "priority", "callback", "runner", "Hz"]


def test_callback_exception_names_the_callback():
    tl = ke.Timeline()

    def explode(ts):
        raise ZeroDivisionError("boom")

    tl.bind(explode, phase=ke.Phase.PHYSICS)
    with pytest.raises(ZeroDivisionError) as info:
        tl.step()
    text = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert "explode" in text and "PHYSICS" in text


def test_exact_after_a_million_boundaries():
    tl = ke.Timeline(default_runners=False)
    tl.add_runner("three", 3)
    tl.add_runner("seven", 7)
    # jump far ahead without running, then check the shared boundary at a whole second
    tl.skip(Fraction(10**6 // 10))  # 100000 s = a million boundaries of each
    res = tl.advance(1)
    assert res[-1].time == 100001 and res[-1].runners == ("three", "seven")
    assert sum(1 for r in res if len(r.runners) == 2) == 1


def test_advance_validation():
    tl = ke.Timeline()
    with pytest.raises(ValueError, match="seconds"):
        tl.advance(-0.1)
    with pytest.raises(ValueError, match="seconds"):
        tl.advance(float("nan"))


rates = st.lists(
    st.sampled_from([0.5, 1, 2, 3, 7, 10, 24, 25, 30, 50, 60, 100, 120, 240, 0.25, 12.5]),
    min_size=1,
    max_size=8,
    unique=True,
)


@settings(max_examples=60, deadline=None)
@given(
    rates=rates,
    duration_ms=st.integers(min_value=0, max_value=3000),
    chops=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=30),
)
def test_property_counts_shared_boundaries_and_chopping(rates, duration_ms, chops):
    duration = Fraction(duration_ms, 1000)

    def build():
        tl = ke.Timeline(default_runners=False)
        for i, hz in enumerate(rates):
            tl.add_runner(f"r{i}", hz)
        return tl

    whole = build()
    whole_results = whole.advance(duration)

    # fires exactly floor(duration * hz) + 1 times from 0
    for i, hz in enumerate(rates):
        fired = sum(1 for r in whole_results if f"r{i}" in r.runners)
        assert fired == math.floor(duration * Fraction(str(hz))) + 1

    # shared boundaries are exactly the common multiples of the stepping runners' periods
    for r in whole_results:
        stepping = {f"r{i}" for i, hz in enumerate(rates) if (r.time * Fraction(str(hz))) % 1 == 0}
        assert set(r.runners) == stepping

    # chopping the same duration into frames gives the same boundaries
    chopped = build()
    chopped_results = []
    remaining = duration
    for c in chops:
        piece = min(remaining, Fraction(c, 1000))
        chopped_results += chopped.advance(piece)
        remaining -= piece
    chopped_results += chopped.advance(remaining)
    assert chopped_results == whole_results
    assert chopped.time == whole.time == duration


def test_run_before_is_half_open_and_skip_before_drops():
    tl = ke.Timeline()
    assert tl.run_before(Fraction(1, 50)) == 1  # only t=0 (both runners)
    assert tl.run_before(Fraction(1, 25)) == 2  # 20 ms Robot, 33 ms Capture
    assert tl.time == Fraction(1, 30)
    tl.skip_before(Fraction(1, 10))  # drop 40..80 ms
    assert tl.time == Fraction(1, 10)
    assert tl.step() == (Fraction(1, 10), ("Robot", "Capture"))


def test_empty_execution_order_prints_a_header():
    tl = ke.Timeline()
    assert len(tl.execution_order()) == 0
    assert str(tl.execution_order()).splitlines()[0].split()[0] == "phase"


def test_numpy_rates_and_times_are_numbers_and_bools_are_not():
    import numpy as np

    tl = ke.Timeline()
    assert tl.add_runner("np", np.int64(25)).hz == 25
    tl.advance(np.float64(0.04))
    assert tl.time_s == pytest.approx(0.04)
    with pytest.raises(
        ValueError, match=r"^runner 'b' hz must be a number from 0.01 to 1000 Hz, got True"
    ):
        tl.add_runner("b", True)
    with pytest.raises(ValueError, match=r"^seconds must be a finite number, got nan"):
        tl.advance(float("nan"))


def test_bind_checks_the_callback_takes_ts_when_bound():
    """A callback that cannot take ``ts`` is refused at bind, not at its first step."""
    import functools

    tl = ke.Timeline()

    def control(ts, gain):
        return None

    with pytest.raises(ke.UserError, match=r"^Timeline.bind\(callback\) must be a callable "
                       r"taking \(ts\), got control\(ts, gain\); bind"):  # fmt: skip
        tl.bind(control)
    with pytest.raises(ke.UserError, match=r"taking \(ts\), got <lambda>\(\)"):
        tl.bind(lambda: None)
    assert tl.bindings == ()  # nothing half-bound
    tl.bind(functools.partial(control, gain=2.0))  # what the message suggests
    tl.bind(lambda ts, gain=1.0: None)
    tl.bind(lambda *args: None)
    b = tl.bind(print)  # a builtin: taken as it is
    with pytest.raises(ke.UserError, match=r"callback must be a callable taking \(ts\)"):
        b.callback = lambda: None
    assert b.callback is print


def test_binding_names_given_are_unique():
    tl = ke.Timeline()
    tl.bind(lambda ts: None, name="gripper")
    with pytest.raises(ke.UserError, match=r"^Timeline.bind\(name\) must be a name no other "
                       r"binding of this timeline has, got 'gripper'; pick another"):  # fmt: skip
        tl.bind(lambda ts: None, name="gripper")
    assert len(tl.bindings) == 1
    other = tl.bind(lambda ts: None, name="arm")
    with pytest.raises(ke.UserError, match="got 'gripper'"):
        other.name = "gripper"
    assert other.name == "arm"
    other.name = "arm"  # its own name again: fine
    tl.bindings[0].unbind()
    tl.bind(lambda ts: None, name="gripper")  # free again once unbound
