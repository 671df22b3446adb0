"""Task.uniform draws every listed copy in one C call, the bits of a call per copy (#40).

The C path (kelab/sim/random_rows.py's door to numpy's bit generator interface) and the
public per-copy path give the same values and leave the copies' generators in the same
states, for every kind of bounds, size and copy list; a generator the C code cannot serve
(a user's Generator subclass in ``task.rngs``) takes the public path; a refused call
draws nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from _rl_tasks import RecordingTask

import kelab as ke
from kelab.sim import random_rows

needs_c = pytest.mark.skipif(random_rows.drawer() is None, reason="no C helper here")


def _task(seed: int = 3, n: int = 6) -> ke.Task:
    return ke.LearningEnv(RecordingTask(), num_envs=n, seed=seed).task


def _clones(rngs: list[np.random.Generator]) -> list[np.random.Generator]:
    out = []
    for rng in rngs:
        clone = np.random.Generator(type(rng.bit_generator)())
        clone.bit_generator.state = rng.bit_generator.state
        out.append(clone)
    return out


def _same_states(a: list[np.random.Generator], b: list[np.random.Generator]) -> bool:
    return all(
        x.integers(0, 2**62, 3).tolist() == y.integers(0, 2**62, 3).tolist()
        for x, y in zip(a, b, strict=True)
    )


#: (env_ids, low, high, size) of the calls compared; the ids in every form a task passes
CALLS = [
    (np.array([4, 0, 2]), -0.1, 0.1, 2),  # a reset's: int64 ids, float bounds
    ([1, 5], 0.0, 1.0, ()),
    (np.array([3], np.int32), [-1.0, 0.0], [1.0, 2.0], 2),  # array bounds
    (range(6), np.float64(-2.0), 3, (2, 3)),  # all copies, a numpy scalar and an int
    ([2, 3], -0.5, 0.5, 0),  # no values per copy
    ([], 0.0, 1.0, 3),  # no copies
    (5, -3.0, -1.0, (1, 1)),  # one int id
    ([0, 4], 1e-300, 2e-300, 64),
]


def _draws(task: ke.Task) -> list[bytes]:
    return [task.uniform(*call).tobytes() for call in CALLS]


@needs_c
@pytest.mark.parametrize("bits", [None, np.random.MT19937, np.random.Philox])
def test_the_c_path_and_the_public_path_give_the_same_bits(bits, monkeypatch):
    c_task, public_task = _task(), _task()
    if bits is not None:  # a user's generators of another kind: the same C call serves them
        for task in (c_task, public_task):
            task.rngs[:] = [np.random.Generator(bits(10 + i)) for i in range(6)]
    served = []
    real = random_rows.drawer()

    def spy(*args):
        served.append(real(*args))
        return served[-1]

    monkeypatch.setattr(random_rows, "drawer", lambda: spy)
    got = _draws(c_task)
    assert served and all(served)  # every call with values drawn went through C
    monkeypatch.setattr(random_rows, "drawer", lambda: None)
    assert got == _draws(public_task)
    assert _same_states(c_task.rngs, public_task.rngs)


def test_values_equal_each_copy_s_generator_uniform():
    task = _task()
    clones = _clones(task.rngs)
    got = task.uniform([5, 1, 3], -0.25, 0.75, size=(2, 2))
    for row, i in zip(got, [5, 1, 3], strict=True):
        assert row.tobytes() == clones[i].uniform(-0.25, 0.75, (2, 2)).tobytes()
    got = task.uniform([0, 2], [0.0, -1.0], [1.0, 1.0], size=2)
    for row, i in zip(got, [0, 2], strict=True):
        assert row.tobytes() == clones[i].uniform([0.0, -1.0], [1.0, 1.0], 2).tobytes()
    assert _same_states(task.rngs, clones)


class CountingGenerator(np.random.Generator):
    """A user's Generator subclass: its own ``random`` must draw its copy's values."""

    calls = 0

    def random(self, *args, **kwargs):
        CountingGenerator.calls += 1
        return super().random(*args, **kwargs)


def test_a_generator_subclass_in_rngs_takes_the_public_path():
    task = _task()
    want = _clones(task.rngs)
    task.rngs[2] = CountingGenerator(np.random.PCG64(9))
    want[2] = np.random.Generator(np.random.PCG64(9))
    CountingGenerator.calls = 0
    got = task.uniform([0, 2, 4], -1.0, 1.0, size=3)
    assert CountingGenerator.calls == 1
    for row, i in zip(got, [0, 2, 4], strict=True):
        assert row.tobytes() == want[i].uniform(-1.0, 1.0, 3).tobytes()
    assert _same_states(task.rngs, want)


@pytest.mark.parametrize(
    "args, match",
    [
        (([0, 6],), r"must be in \[0, 6\), got \[6\]"),
        ((np.array([1, 1]),), "must not repeat a copy"),
        (([0, 1], 0.0, np.inf), "must be finite"),
        (([0, 1], [0.0, 0.0, 0.0], 1.0, 2), "broadcast"),
        (([0, 1], 0.0, 1.0, -1), "size must be"),
    ],
)
def test_a_refused_call_draws_nothing(args, match):
    task = _task()
    fresh = _clones(task.rngs)
    with pytest.raises(ValueError, match=match):
        task.uniform(*args)
    assert _same_states(task.rngs, fresh)
