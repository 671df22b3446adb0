"""World snapshots: exact restore with joints and resting contacts, refusal, bytes."""

from __future__ import annotations

import numpy as np
import pytest
from _world_scenes import LAYOUTS, busy_scene, drive

import kelab as ke

pytestmark = pytest.mark.parametrize("layout", LAYOUTS)


def test_restore_is_bit_identical_with_joints_contacts_sensors_and_resets(layout: str) -> None:
    w = ke.World(busy_scene(), num_envs=3, seed=5, layout=layout)
    drive(w, 100)
    w.reset_envs([1])  # a copy with a different history
    drive(w, 40, start=100)
    snap = w.snapshot()
    future = drive(w, 80, start=140)
    # branch: do something else, then come back
    w.set_joint_efforts(np.full((3, 2), 100.0))
    drive(w, 10, start=900)
    w.restore(snap)
    assert w.step_count == snap.step_count == 140
    again = drive(w, 80, start=140)
    assert np.array_equal(future, again)


def test_snapshot_does_not_change_the_future(layout: str) -> None:
    a = ke.World(busy_scene(), num_envs=2, seed=2, layout=layout)
    b = ke.World(busy_scene(), num_envs=2, seed=2, layout=layout)
    drive(a, 60)
    drive(b, 60)
    a.snapshot()
    assert np.array_equal(drive(a, 60, start=60), drive(b, 60, start=60))


def test_snapshot_survives_bytes_and_restores_into_a_fresh_world(layout: str) -> None:
    w = ke.World(busy_scene(), num_envs=2, seed=4, layout=layout)
    drive(w, 50)
    data = w.snapshot().to_bytes()
    future = drive(w, 50, start=50)
    fresh = ke.World(busy_scene(), num_envs=2, seed=4, layout=layout)
    fresh.restore(ke.Snapshot.from_bytes(data))
    assert np.array_equal(drive(fresh, 50, start=50), future)


def test_restoring_another_scenes_snapshot_names_both_fingerprints(layout: str) -> None:
    w = ke.World(busy_scene(), num_envs=1, layout=layout)
    b = ke.SceneBuilder()
    b.add(ke.Prop(ke.Circle(0.2)), at="/World/Ball")
    other = ke.World(b.build(), layout=layout)
    snap = other.snapshot()
    with pytest.raises(ValueError) as err:
        w.restore(snap)
    assert w.fingerprint in str(err.value) and other.fingerprint in str(err.value)
