"""numpy's one door (kelab/_numpy.py): the count without the wrapper, the same ints."""

from __future__ import annotations

import numpy as np
import pytest

from kelab import _numpy


@pytest.mark.parametrize(
    "array",
    [
        np.ones(256, dtype=bool),
        np.arange(256) % 3 == 0,
        np.zeros(0, dtype=bool),
        (np.arange(40).reshape(8, 5) % 4 == 1)[:, ::2],  # a strided view
        np.array([0.0, -0.0, np.nan, 2.0]),
        np.arange(-3, 4, dtype=np.int64),
    ],
)
def test_the_count_is_the_public_functions(array: np.ndarray) -> None:
    got = _numpy.count_nonzero(array)
    assert got == np.count_nonzero(array) and type(got) is type(np.count_nonzero(array))


def test_the_private_function_only_on_the_releases_it_was_written_for(monkeypatch) -> None:
    verified = _numpy.private_count_fits(np.__version__)
    assert (_numpy.count_nonzero is not np.count_nonzero) == verified
    monkeypatch.setattr(np, "__version__", "3.0.0")  # an unknown major: the public path
    assert _numpy._count() is np.count_nonzero
