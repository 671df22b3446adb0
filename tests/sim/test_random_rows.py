"""Many copies' uniform draws in one C call (kelab/sim/random_rows.py, _native_random.c; #40).

The C helper's ``uniform_rows`` draws through numpy's public bit generator interface
(``bit_generator.capsule``'s ``next_double``, the ``lock`` held): the same bits as a
``Generator.random`` call per copy, for every numpy bit generator, and the generators
left in the same state. Where it cannot serve a call (helper off, numpy outside the
verified versions, a generator that is not exactly a numpy Generator), the door takes the
public per-copy path, with the same values.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from kelab.sim import random_rows
from kelab.sim.random_rows import NUMPY_VERSIONS, drawer, numpy_verified, uniform_rows

ROOT = Path(__file__).resolve().parents[2]
BIT_GENERATORS = [np.random.PCG64, np.random.Philox, np.random.SFC64, np.random.MT19937]
BIT_GENERATORS += [np.random.PCG64DXSM]
#: per-copy shapes: none, one, a few, 2-D rows, a row long enough to be drawn without the
#: GIL (over _native_random.c's DRAW_WITHOUT_GIL)
SHAPES = [(0,), (), (1,), (3,), (2, 5), (70_000,)]

needs_c = pytest.mark.skipif(drawer() is None, reason="the C helper is not built here")


def _generators(bit_generator: type, n: int = 6) -> list[np.random.Generator]:
    return [np.random.Generator(bit_generator(1000 + s)) for s in range(n)]


def _expected(
    rngs: list[np.random.Generator], ids: list[int], shape: tuple, low: float, span: float
) -> np.ndarray:
    """The public path: a Generator.random call per copy, then scaled in numpy."""
    out = np.empty((len(ids), *shape))
    for row, i in zip(out.reshape(len(ids), -1), ids, strict=True):
        rngs[i].random(out=row)
    out *= span
    out += low
    return out


def _same_states(a: list[np.random.Generator], b: list[np.random.Generator]) -> bool:
    """Whether each pair of generators draws the same next numbers (so: the same state)."""
    return all(
        x.integers(0, 2**62, 4).tolist() == y.integers(0, 2**62, 4).tolist()
        for x, y in zip(a, b, strict=True)
    )


@needs_c
@pytest.mark.parametrize("bit_generator", BIT_GENERATORS, ids=lambda b: b.__name__)
def test_the_c_rows_are_generator_random_s_bits(bit_generator: type) -> None:
    got, want = _generators(bit_generator), _generators(bit_generator)
    ids = [4, 0, 5, 2]
    for shape in SHAPES:
        for low, span in [(0.0, 1.0), (-0.1, 0.2), (3.0, -2.5), (-0.0, 0.0)]:
            out = np.full((len(ids), *shape), np.nan)
            drawn = drawer()(np.random.Generator, got, np.array(ids), out, low, span)
            assert drawn is True  # the C path served it
            expected = _expected(want, ids, shape, low, span)
            assert out.tobytes() == expected.tobytes(), (shape, low, span)
    assert _same_states(got, want)  # copies 1 and 3 were never drawn from, the rest alike


@needs_c
def test_no_copies_is_a_call_that_draws_nothing() -> None:
    rngs, fresh = _generators(np.random.PCG64), _generators(np.random.PCG64)
    assert drawer()(np.random.Generator, rngs, np.zeros(0, np.int64), np.empty(0), 0.0, 1.0)
    assert _same_states(rngs, fresh)


class CountingGenerator(np.random.Generator):
    """A Generator subclass whose ``random`` may do anything: only its own method may draw."""

    calls = 0

    def random(self, *args: object, **kwargs: object) -> object:
        CountingGenerator.calls += 1
        return super().random(*args, **kwargs)


@needs_c
def test_a_generator_it_cannot_serve_leaves_every_copy_untouched() -> None:
    rngs = _generators(np.random.PCG64)
    rngs[3] = CountingGenerator(np.random.PCG64(7))
    fresh = _generators(np.random.PCG64)
    fresh[3] = CountingGenerator(np.random.PCG64(7))
    out = np.full((3, 2), np.nan)
    # copies 0 and 5 come before the subclass in the call: looked at, not drawn from
    assert drawer()(np.random.Generator, rngs, np.array([0, 5, 3]), out, 0.0, 1.0) is False
    assert np.isnan(out).all() and _same_states(rngs, fresh)


def test_the_door_takes_the_public_path_for_a_generator_it_cannot_serve() -> None:
    rngs = _generators(np.random.PCG64)
    rngs[3] = CountingGenerator(np.random.PCG64(7))
    want = _generators(np.random.PCG64)
    want[3] = np.random.Generator(np.random.PCG64(7))
    CountingGenerator.calls = 0
    out = np.empty((3, 2))
    uniform_rows(rngs, np.array([0, 5, 3]), out, -1.0, 2.0)
    assert CountingGenerator.calls == 1  # its own method drew its row
    assert out.tobytes() == _expected(want, [0, 5, 3], (2,), -1.0, 2.0).tobytes()
    # a tuple of generators (not a list): the public path too, the same values
    out2 = np.empty((2, 2))
    uniform_rows(tuple(rngs), np.array([1, 2]), out2)
    assert out2.tobytes() == _expected(want, [1, 2], (2,), 0.0, 1.0).tobytes()


@needs_c
def test_bad_arguments_are_refused_before_any_draw() -> None:
    rngs, fresh = _generators(np.random.PCG64), _generators(np.random.PCG64)
    draw = drawer()
    bad = [
        (np.array([0, 6]), np.empty((2, 2))),  # an id past the list
        (np.array([-1]), np.empty((1, 2))),  # a negative id
        (np.array([0, 1], np.int32), np.empty((2, 2))),  # not int64: 8 bytes, one id
        (np.array([0, 1, 2]), np.empty(4)),  # 4 values do not split into 3 rows
    ]
    for ids, out in bad:
        with pytest.raises(ValueError, match="uniform_rows: ids must be int64"):
            draw(np.random.Generator, rngs, ids, out, 0.0, 1.0)
    assert _same_states(rngs, fresh)


@needs_c
def test_a_copy_s_draws_wait_for_its_bit_generator_s_lock() -> None:
    """The lock is held around a copy's draws, as Generator.random holds it."""
    rngs, want = _generators(np.random.PCG64), _generators(np.random.PCG64)
    out = np.empty((2, 3))
    lock = rngs[1].bit_generator.lock
    lock.acquire()
    try:
        thread = threading.Thread(target=uniform_rows, args=(rngs, np.array([0, 1]), out))
        thread.start()
        thread.join(0.3)
        assert thread.is_alive()  # waiting for copy 1's lock
    finally:
        lock.release()
    thread.join(30)
    assert not thread.is_alive()
    assert out.tobytes() == _expected(want, [0, 1], (3,), 0.0, 1.0).tobytes()
    assert lock.acquire(blocking=False)  # given back (numpy's lock may be an RLock)
    lock.release()


def test_numpy_versions_outside_the_verified_range_take_the_public_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert NUMPY_VERSIONS == ((1, 17), (3, 0))
    assert numpy_verified("1.17.0") and numpy_verified("2.4.6") and numpy_verified("2.99")
    assert not numpy_verified("1.16.6") and not numpy_verified("3.0.0rc1")
    assert not numpy_verified("dev")
    monkeypatch.setattr(random_rows.np, "__version__", "3.0.0")
    drawer.cache_clear()
    try:
        assert drawer() is None
        rngs, want = _generators(np.random.SFC64), _generators(np.random.SFC64)
        out = np.empty((2, 4))
        uniform_rows(rngs, np.array([1, 0]), out, 0.5, 0.25)
        assert out.tobytes() == _expected(want, [1, 0], (4,), 0.5, 0.25).tobytes()
    finally:
        monkeypatch.undo()
        drawer.cache_clear()


def test_without_the_c_helper_the_door_gives_the_same_bits() -> None:
    """``KELAB_NO_NATIVE=1``: no C call, the same values (a fresh interpreter)."""
    code = (
        "import numpy as np\n"
        "from kelab.sim.random_rows import drawer, uniform_rows\n"
        "rngs = [np.random.Generator(np.random.Philox(s)) for s in range(4)]\n"
        "out = np.empty((3, 5))\n"
        "uniform_rows(rngs, np.array([3, 0, 2]), out, -2.0, 4.0)\n"
        "print(drawer() is None, out.tobytes().hex())\n"
    )
    env = {**os.environ, "KELAB_NO_NATIVE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    off, values = run.stdout.split()
    want = _expected(
        [np.random.Generator(np.random.Philox(s)) for s in range(4)], [3, 0, 2], (5,), -2.0, 4.0
    )
    assert off == "True" and values == want.tobytes().hex()


def test_only_the_door_knows_numpy_s_bit_generator_interface() -> None:
    """The ``"BitGenerator"`` capsule's ``bitgen_t``: random_rows.py and _native_random.c alone."""
    users = {
        str(path.relative_to(ROOT))
        for path in [*(ROOT / "kelab").rglob("*.py"), *(ROOT / "kelab").rglob("*.c")]
        if re.search(r"bitgen_t|\bbit_generator\.capsule|\"BitGenerator\"", path.read_text("utf-8"))
    }
    assert users == {"kelab/sim/random_rows.py", "kelab/sim/physics/_native_random.c"}
