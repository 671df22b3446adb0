"""numpy's whole-array count of nonzero values without its dispatch wrapper (internal).

The bottom layer, as kelab/_validate.py: any room may use it.

``np.count_nonzero(a)`` is a Python function (``__array_function__`` dispatch, keyword
handling) around ``numpy._core.multiarray.count_nonzero(a)``, which it calls for a whole
array: ~0.8 us against ~0.12 us for the C function alone on a 256-copy bool array. The
World asks "is every copy's state fresh?" about a dozen times an RL env step (every
``body_state``, ``joint_positions`` and ``joint_velocities``: BodyStates.ensure and
BodyStates.joint_state), ~8 us of the calling thread's Python a Humanoid-v0 x256 step.

This module is numpy's one door to that private name (#38): :data:`count_nonzero` is the C
function only on the numpy releases it was written for (:data:`VERIFIED` majors, where
``numpy._core.multiarray`` holds it and it agrees with the public function on a probe);
anywhere else it is ``np.count_nonzero`` itself, the public path (the same int).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["VERIFIED", "count_nonzero", "private_count_fits"]

#: numpy majors whose ``numpy._core.multiarray.count_nonzero`` is what the public
#: function calls for ``axis=None`` (checked on 2.4).
VERIFIED = ("2",)


def private_count_fits(version: str) -> bool:
    """Whether numpy ``version`` is one :data:`VERIFIED` release.

    >>> private_count_fits("2.4.6"), private_count_fits("1.26.4"), private_count_fits("3.0.0")
    (True, False, False)
    """
    return version.split(".")[0] in VERIFIED


def _count() -> Callable[[np.ndarray], int]:
    if not private_count_fits(np.__version__):
        return np.count_nonzero
    try:
        from numpy._core.multiarray import count_nonzero as private
    except ImportError:
        return np.count_nonzero
    probe = np.array([[True, False], [True, True]])
    if private(probe) != np.count_nonzero(probe) or private(probe[:, 0]) != 2:
        return np.count_nonzero
    return private


#: ``np.count_nonzero(a)`` of a whole array ``a`` (an int), without the wrapper where it can.
count_nonzero: Callable[[np.ndarray], int] = _count()
