"""Warm rebases probed at their edges (docs/world.md, "Rebases" and "Warm rebases").

Each test reproduces a defect a new-user probe found (each failed before its fix).
"""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.sim.replay_log import Kind

DT = 1 / 50


def _scene() -> ke.Scene:
    """A cartpole, a ball and a box on a plane: every body touches something."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    ball = ke.Prop(ke.Circle(0.1), material=ke.Material(restitution=0.5),
                   initial_pose=ke.Pose(1.0, 0.3))  # fmt: skip
    b.add(ball, at="/World/Ball")
    b.add(ke.Prop(ke.Box(0.3, 0.2), initial_pose=ke.Pose(-1.0, 0.1)), at="/World/Box")
    return b.build()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_contact_forces_read_right_after_restoring_a_snapshot_taken_at_a_rebase(
    layout: str,
) -> None:
    w = ke.World(_scene(), max_log_steps=32, layout=layout)
    for _ in range(32):  # the 32nd step rebases every copy at its end
        w.step(DT)
    live = w.contact_forces
    assert np.abs(live).sum() > 100.0  # things rest on the ground: weight is carried
    snap = w.snapshot()
    other = ke.World(_scene(), max_log_steps=32, layout=layout)
    other.restore(snap)
    np.testing.assert_array_equal(other.contact_forces, live)


def test_a_restore_refuses_a_second_warm_entry_for_one_rebuild() -> None:
    """A snapshot with a rebase's WARM entry twice (no World writes that) was accepted.

    The second one takes another step at rest with the bias velocities the first wrote,
    so the bodies move by ``v_bias * dt``: a state no World was in.
    """
    w = ke.World(_scene(), num_envs=2, max_log_steps=16)
    for _ in range(40):
        w.step(DT)
    snap = w.snapshot()
    arrays = {k: v.copy() for k, v in snap.arrays.items()}
    e = arrays["log/kind"].tolist().index(int(Kind.WARM))
    for key, off in (("log/ids", "log/id_off"), ("log/vals", "log/val_off")):
        o = arrays[off]
        lo, hi = o[e], o[e + 1]
        arrays[key] = np.concatenate([arrays[key][:hi], arrays[key][lo:hi], arrays[key][hi:]])
        arrays[off] = np.concatenate([o[: e + 1], [hi], o[e + 1 :] + (hi - lo)])
    for key in ("log/kind", "log/step"):
        arrays[key] = np.insert(arrays[key], e, arrays[key][e])
    bad = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, dict(snap.meta))
    before = w.snapshot().to_bytes()
    with pytest.raises(ValueError, match=r"log entry 4 \(warm at step 32\).*one warm entry"):
        w.restore(bad)
    assert w.snapshot().to_bytes() == before


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_a_world_without_bodies_steps_rebases_and_restores(layout: str) -> None:
    w = ke.World(ke.SceneBuilder().build(), num_envs=2, max_log_steps=1, layout=layout)
    for _ in range(3):
        w.step(DT)
    snap = w.snapshot()
    w.step(DT)
    w.restore(snap)
    assert w.step_count == 3 and w.body_poses.shape == (2, 0, 3)


def test_rebase_sums_are_refused_in_a_snapshot_not_taken_at_a_rebase() -> None:
    w = ke.World(_scene(), max_log_steps=32)
    for _ in range(20):
        w.step(DT)
    snap = w.snapshot()
    assert "contacts/rebase_sums" not in snap.arrays  # omitted: not at a rebase
    arrays = dict(snap.arrays)
    arrays["contacts/rebase_sums"] = np.ones((1, len(w.body_names), 2))
    bad = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, snap.meta)
    before = w.snapshot().to_bytes()
    with pytest.raises(ValueError, match="rebase_sums' is held only right after a rebase"):
        w.restore(bad)
    assert w.snapshot().to_bytes() == before
