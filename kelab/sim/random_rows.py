"""Each listed copy's next standard uniform draws into its row of a batch, in one C call.

Every copy draws from its own ``numpy.random.Generator``; a reset draws a few numbers for
each of a dozen copies, and a Python call per copy (``rngs[i].random(out=row)``) cost the
calling thread ~36 us per Humanoid x256 env step (#40). Where KELab's C helper is built,
:func:`uniform_rows` fills all the rows in one call (``uniform_rows`` in
kelab/sim/physics/_native_random.c) through numpy.random's public C interface of a bit
generator: the ``bitgen_t`` in each bit generator's ``capsule``, ``next_double`` per
value, its ``lock`` held around a copy's draws, as ``Generator.random`` does. The values
are the same bits (tests/sim/test_random_rows.py).

This module is the door to that interface: nothing else in KELab uses it. It takes the
public per-copy path, with the same values, where the helper is not built or is off
(``KELAB_NO_NATIVE=1``, :func:`kelab.sim.physics._guard.native_module`), where numpy's
version is outside :data:`NUMPY_VERSIONS` (the releases whose ``bitgen_t`` the C code
declares), and for a whole call where any listed copy's generator is not exactly a numpy
``Generator`` (a subclass may draw otherwise) or has no valid ``"BitGenerator"`` capsule:
the C code looks at every listed generator before it draws from any.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

import numpy as np

from kelab.sim.physics._guard import native_module

__all__ = ["NUMPY_VERSIONS", "numpy_verified", "uniform_rows"]

#: numpy releases ``[low, high)`` (major, minor) whose ``numpy/random/bitgen.h`` declares
#: the ``bitgen_t`` the C code mirrors: from 1.17 (the first with it) to before 3.
NUMPY_VERSIONS = ((1, 17), (3, 0))


def numpy_verified(version: str) -> bool:
    """Whether a numpy ``version`` string (``"2.4.6"``) lies in :data:`NUMPY_VERSIONS`.

    Example:
        >>> numpy_verified("2.4.6"), numpy_verified("1.16.0"), numpy_verified("3.0.0")
        (True, False, False)
    """
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        return False
    low, high = NUMPY_VERSIONS
    return low <= (int(match[1]), int(match[2])) < high


#: The C function: (Generator type, rngs, ids, out, low, span) -> drawn (False: declined).
Drawer = Callable[[type, list, np.ndarray, np.ndarray, float, float], bool]


@cache
def drawer() -> Drawer | None:
    """The C helper's ``uniform_rows``, or None where the public path is taken (see above)."""
    if not numpy_verified(np.__version__):
        return None
    native = native_module()
    return None if native is None else native.uniform_rows  # type: ignore[attr-defined]


def uniform_rows(
    rngs: list[np.random.Generator],
    ids: np.ndarray,
    out: np.ndarray,
    low: float = 0.0,
    span: float = 1.0,
) -> None:
    """Fill row ``j`` of ``out`` with ``rngs[ids[j]]``'s next uniforms, ``u * span + low``.

    Copy by copy in the order of ``ids``: the values of ``rngs[i].random(out=row)`` then
    ``row *= span; row += low``, bit for bit (with the defaults, ``u`` itself), and the
    generators left where those calls leave them. The caller has checked ``ids`` (in
    range, no copy twice).

    Args:
        rngs: One generator per copy (a list; another sequence takes the public path).
        ids: int64 ``(k,)``, C-contiguous: the copies to draw for.
        out: float64 ``(k, ...)``, C-contiguous and writable: row ``j`` is ``out[j]``.
        low: Added to each scaled draw.
        span: Each draw's scale (``high - low``).

    Example:
        >>> rngs = [np.random.default_rng(s) for s in range(3)]
        >>> out = np.empty((2, 4))
        >>> uniform_rows(rngs, np.array([2, 0]), out, -1.0, 2.0)
        >>> bool((out[0] == np.random.default_rng(2).uniform(-1.0, 1.0, 4)).all())
        True
    """
    draw = drawer()
    if draw is not None and type(rngs) is list:
        if draw(np.random.Generator, rngs, ids, out, low, span):
            return
    for row, i in zip(out.reshape(ids.size, -1), ids.tolist(), strict=True):
        rngs[i].random(out=row)
    out *= span
    out += low
