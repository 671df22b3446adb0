"""Both layouts implement the World's Backend protocol (kelab/sim/physics/_backend.py)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics._backend import Backend
from kelab.sim.physics._batch import friction_contacts
from kelab.sim.physics._compile import make_layout
from kelab.sim.physics._isolated import IsolatedBackend
from kelab.sim.physics._packed import PackedBackend

METHODS = [
    name for name, value in vars(Backend).items() if callable(value) and not name.startswith("_")
]
ATTRIBUTES = ["name", "raw", "spacing", "origin_x", "on_read"]


@pytest.mark.parametrize("cls", [IsolatedBackend, PackedBackend])
@pytest.mark.parametrize("method", METHODS)
def test_method_signatures_match(cls: type, method: str) -> None:
    want = list(inspect.signature(getattr(Backend, method)).parameters)
    got = list(inspect.signature(getattr(cls, method)).parameters)
    assert got == want, f"{cls.__name__}.{method}{got} must take {want}"


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_attributes_present(layout: str) -> None:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 0.5)), at="/Ball")
    scene = b.build()
    lay = make_layout(scene)
    backend: Backend = (
        IsolatedBackend(scene, lay, 3, 1)
        if layout == "isolated"
        else PackedBackend(scene, lay, 3, 1, 4.0)
    )
    for attr in ATTRIBUTES:
        assert hasattr(backend, attr)
    assert backend.name == layout
    assert backend.stepped(np.array([1])).size == (1 if layout == "isolated" else 3)


def test_one_friction_contact_selector() -> None:
    """Both layouts select friction contacts with the same function; its result."""
    table = np.array([10, 11, 12], dtype=np.uint64)
    vals = np.array([-2, 3, -1])
    ints = np.array([[11, 10, 2], [12, 10, 1], [11, 12, 1], [10, 11, 1]], dtype=np.uint64)
    fl = np.arange(32, dtype=np.float64).reshape(4, 8)
    rows, count, f = friction_contacts(table, vals, ints, fl)
    assert rows.tolist() == [3, 3] and count.tolist() == [2, 1]
    assert np.array_equal(f, fl[[0, 3]])
