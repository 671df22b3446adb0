"""The shard threads' barriers: what a 2-thread step waits for (#40 item 2).

``_packed.BarrierClock`` records each barrier's thread CPU times (benchmarks/contacts.py
--humanoid reads the serial part and the critical path from it); the shard split gives
the calling thread as many copies as a worker (every physics step is a barrier, so the
longer shard sets the step's length).
"""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics import _packed
from kelab.sim.scene.assets import Asset


def _world(threads: int) -> ke.World:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/", per_environment=False)
    b.add(ke.Robot(asset=Asset.from_registry("kelab/robot/biped:v2")), at="/World/Robot")
    return ke.World(b.build(), num_envs=16, layout="packed", num_threads=threads)


@pytest.fixture
def clock():
    _packed.CLOCK = clock = _packed.BarrierClock()
    try:
        yield clock
    finally:
        _packed.CLOCK = None


def test_clock_records_each_step_as_one_barrier(clock: _packed.BarrierClock) -> None:
    w = _world(2)
    try:
        w.step(1 / 120)
        start = clock.barriers
        for _ in range(6):
            w.step(1 / 120)
        assert clock.barriers - start == 6  # every step reads its state: one barrier each
        assert clock.caller > 0.0 and clock.worker > 0.0
        assert clock.critical >= max(clock.caller, clock.worker)
        assert clock.critical <= clock.caller + clock.worker
    finally:
        w.close()


def test_clock_records_nothing_with_one_thread(clock: _packed.BarrierClock) -> None:
    w = _world(1)
    try:
        for _ in range(3):
            w.step(1 / 120)
        assert clock.barriers == 0
    finally:
        w.close()


def test_clock_does_not_change_results(clock: _packed.BarrierClock) -> None:
    poses = []
    for on in (True, False):
        _packed.CLOCK = clock if on else None
        w = _world(2)
        try:
            w.set_joint_efforts(np.full((16, len(w.joint_names)), 5.0))
            for _ in range(20):
                w.step(1 / 120)
            poses.append(w.body_poses)
        finally:
            w.close()
    assert np.array_equal(poses[0], poses[1])


def test_shards_hold_as_many_copies_each() -> None:
    # every physics step is a barrier: a smaller calling-thread shard only waits longer
    assert [s.size for s in _packed.shard_split(256, 2)] == [128, 128]
    assert [s.size for s in _packed.shard_split(7, 2)] == [4, 3]
    parts = _packed.shard_split(1000, 3)
    assert np.array_equal(np.concatenate(parts), np.arange(1000))
    assert max(p.size for p in parts) - min(p.size for p in parts) <= 1
