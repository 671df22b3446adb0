"""A rebase keeps Chipmunk's warm starts where the layout allows (kelab/sim/physics/_warm.py).

A rebase bounds the replay log behind snapshots (``max_log_steps``). It used to rebuild a
copy cold: contact and joint warm starts dropped, so a box stack rebased every few
seconds slid apart and fell. The isolated layout now carries the bias velocities, joint
impulses, contact impulses, friction regimes and normal sums over, logged in a WARM
entry, so a replay repeats it bit for bit; the packed layout's copies share a space and
stay cold (documented).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kelab as ke
from kelab.sim.replay_log import Kind

DT = 1 / 60


def _stack(n: int = 6) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    for i in range(n):
        pose = ke.Pose(0.02 * i, 0.25 + 0.5 * i)
        b.add(ke.Prop(ke.Box(0.5, 0.5), initial_pose=pose), at=f"/World/B{i}")
    return b.build()


def _run(world: ke.World, steps: int) -> np.ndarray:
    for _ in range(steps):
        world.step(DT)
    return np.concatenate([world.body_poses.ravel(), world.body_velocities.ravel()])


def test_a_stack_rebased_every_8_steps_moves_bit_for_bit_as_one_never_rebased() -> None:
    plain = _run(ke.World(_stack(), seed=0), 1800)
    rebased = ke.World(_stack(), seed=0, max_log_steps=8)
    assert np.array_equal(_run(rebased, 1800), plain)
    kinds = [e.kind for e in rebased._log]
    assert Kind.WARM in kinds  # it did rebase, warm
    top = rebased.body_poses[0, -1]
    assert abs(top[0] - 0.1) < 0.05 and top[1] > 2.7  # still standing after 30 s


def test_the_packed_layout_rebases_cold_as_documented() -> None:
    w = ke.World(_stack(), seed=0, layout="packed", max_log_steps=8)
    _run(w, 40)
    kinds = [e.kind for e in w._log]
    assert Kind.WARM not in kinds and Kind.BUILD in kinds


def _rebased_snapshot() -> tuple[ke.World, ke.Snapshot, np.ndarray]:
    w = ke.World(_stack(), seed=0, max_log_steps=16)
    _run(w, 40)
    snap = w.snapshot()
    assert int(Kind.WARM) in snap.arrays["log/kind"].tolist()
    future = _run(w, 50)
    return w, snap, future


def test_a_snapshot_across_warm_rebases_restores_and_replays_exactly() -> None:
    w, snap, future = _rebased_snapshot()
    w.restore(ke.Snapshot.from_bytes(snap.to_bytes()))
    assert np.array_equal(_run(w, 50), future)
    # and into a fresh World
    other = ke.World(_stack(), seed=0, max_log_steps=16)
    other.restore(snap)
    assert np.array_equal(_run(other, 50), future)
    # the same physics gives the same bytes (contacts are sorted, not in C's order)
    again = ke.World(_stack(), seed=0, max_log_steps=16)
    _run(again, 40)
    assert again.snapshot().to_bytes() == snap.to_bytes()


def _doctor(snap: ke.Snapshot, change) -> ke.Snapshot:
    arrays = {k: v.copy() for k, v in snap.arrays.items()}
    kinds = arrays["log/kind"]
    e = int(np.flatnonzero(kinds == int(Kind.WARM))[-1])
    lo, hi = arrays["log/val_off"][e], arrays["log/val_off"][e + 1]
    vals = arrays["log/vals"][lo:hi].copy()
    new = np.asarray(change(vals), dtype=np.float64)
    arrays["log/vals"] = np.concatenate([arrays["log/vals"][:lo], new, arrays["log/vals"][hi:]])
    arrays["log/val_off"][e + 1 :] += new.size - (hi - lo)
    return ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, dict(snap.meta))


NB = 7  # the plane and six boxes
HEAD = 2 * NB + 1  # dt, regimes, normal sums
BIAS = 6 * 3


def _set(i: int, value: float):
    def change(v: np.ndarray) -> np.ndarray:
        v[i] = value
        return v

    return change


def _contacts(v: np.ndarray) -> int:
    return HEAD + BIAS  # the contact count (no joints in the stack)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_set(0, 0.0), "dt must be in"),
        (_set(0, np.nan), "must hold finite values"),
        (_set(1, 0.5), "friction regimes"),
        (_set(1 + NB, -1.0), "normal force sums"),
        (_set(HEAD, 1e8), "bias velocities"),
        (_set(HEAD + 1, np.inf), "must hold finite values"),
        (lambda v: v[:-1], "ends inside|contact"),
        (lambda v: np.concatenate([v, [1.0]]), "after the last copy|must hold"),
        (lambda v: _set(_contacts(v), 2.5)(v), "contact count|integer"),
        (lambda v: _set(_contacts(v) + 1, 99.0)(v), r"contact shapes must be in \[0, 7\)"),
        (lambda v: _set(_contacts(v) + 3, 2.0**32)(v), "hash halves"),
        (lambda v: _set(_contacts(v) + 5, 1e12)(v), "impulses must be within"),
    ],
)
def test_a_doctored_warm_entry_is_refused_and_changes_nothing(change, words) -> None:
    w, snap, _ = _rebased_snapshot()
    before = _run(w, 0)
    bad = _doctor(snap, change)
    with pytest.raises(ValueError, match=words):
        w.restore(bad)
    assert np.array_equal(_run(w, 0), before)


def test_a_warm_entry_is_refused_by_a_packed_world() -> None:
    _, snap, _ = _rebased_snapshot()
    packed = ke.World(_stack(), seed=0, layout="packed", max_log_steps=16)
    with pytest.raises(ValueError, match="carries no warm starts"):
        packed.restore(snap)


def test_lowering_max_log_steps_rebases_at_once_and_bounds_every_snapshot() -> None:
    w = ke.World(_stack(), seed=0)
    assert w.warm_rebases and not ke.World(_stack(), layout="packed").warm_rebases
    plain = ke.World(_stack(), seed=0)
    _run(w, 100)
    _run(plain, 100)
    w.max_log_steps = 32  # the log spans 100 steps: rebased now, warm
    assert w.max_log_steps == 32
    snap = w.snapshot()
    assert snap.step_count - snap.arrays["log/step"][0] == 0
    assert Kind.WARM in [e.kind for e in w._log]
    future = _run(w, 70)
    assert np.array_equal(future, _run(plain, 70))  # the stack moves on bit for bit
    w.restore(snap)
    assert np.array_equal(_run(w, 70), future)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "64", None])
def test_max_log_steps_is_validated_when_set(bad: object) -> None:
    w = ke.World(_stack(), seed=0)
    with pytest.raises((TypeError, ValueError), match="World.max_log_steps"):
        w.max_log_steps = bad  # type: ignore[assignment]
    assert w.max_log_steps == 7200


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_changed_number_of_a_warm_snapshot_restores_or_is_refused_without_effect(
    data: st.DataObject,
) -> None:
    w, snap, _ = _warm_world()
    kinds = snap.arrays["log/kind"]
    e = int(np.flatnonzero(kinds == int(Kind.WARM))[-1])
    lo, hi = (int(x) for x in snap.arrays["log/val_off"][e : e + 2])
    arrays = {k: np.array(v) for k, v in snap.arrays.items()}
    index = data.draw(st.integers(lo, hi - 1))  # a number of the WARM entry
    arrays["log/vals"][index] = data.draw(st.floats(allow_nan=True, allow_infinity=True))
    bad = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, snap.meta)
    before = w.snapshot().to_bytes(), _run(w, 0).tobytes()
    try:
        w.restore(bad)
    except ValueError:
        assert (w.snapshot().to_bytes(), _run(w, 0).tobytes()) == before
    else:  # accepted: it steps on (or names a body that left the limits)
        try:
            _run(w, 3)
        except FloatingPointError:
            pass
    w.restore(snap)


@cache
def _warm_world() -> tuple[ke.World, ke.Snapshot, np.ndarray]:
    """One World and its warm snapshot for every example (built once)."""
    return _rebased_snapshot()
