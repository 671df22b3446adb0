"""Resetting every copy (a whole packed shard rebuilt in place) gives fresh copies, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from test_world_resets import _future, _history, _scene

import kelab as ke

LAYOUTS = ("isolated", "packed")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("threads", [1, 2])
def test_reset_of_every_copy_after_a_history_equals_a_fresh_world(
    layout: str, threads: int
) -> None:
    old = ke.World(_scene(), num_envs=4, layout=layout, num_threads=threads)
    assert _history(old, 250, 0.5)  # contacts, sliding friction, joints in play
    old.reset_envs()
    _history(old, 40, 2.0)  # a second full reset after a shorter history
    old.reset_envs()
    fresh = ke.World(_scene(), num_envs=4, layout=layout, num_threads=threads)
    a, f = _future(old, 150), _future(fresh, 150)
    assert np.array_equal(a, f)
    assert np.abs(a[-1]).max() > 0
    for w in (old, fresh):
        w.close()


def test_one_shard_reset_whole_the_other_in_part() -> None:
    """Two shards: every copy of the first and one of the second are reset."""
    old = ke.World(_scene(), num_envs=4, layout="packed", num_threads=2)
    same = ke.World(_scene(), num_envs=4, layout="packed", num_threads=2)
    _history(old, 200, 1.5)
    _history(same, 200, 1.5)
    old.reset_envs([0, 1, 3])
    fresh = ke.World(_scene(), num_envs=4, layout="packed", num_threads=2)
    a, f, s = _future(old, 120), _future(fresh, 120), _future(same, 120)
    assert np.array_equal(a[:, [0, 1, 3]], f[:, [0, 1, 3]])
    assert np.array_equal(a[:, 2], s[:, 2])
    for w in (old, same, fresh):
        w.close()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_body_states_of_every_copy_then_restore_replays_the_same_bits(layout: str) -> None:
    w = ke.World(_scene(), num_envs=3, layout=layout)
    _history(w, 150, 0.2)
    poses, vels = w.body_poses, w.body_velocities
    vels[:, 6] = (1.0, 0.5, -5.0)
    w.set_body_states(np.arange(3), poses, vels)
    snap = w.snapshot()
    a = _future(w, 100)
    w.restore(snap)
    assert np.array_equal(_future(w, 100), a)
    w.close()
