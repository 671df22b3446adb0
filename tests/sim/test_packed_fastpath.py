"""The packed layout's per-step fast path (#30): fewer calls and passes, the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.sim.scene.assets import Asset

DT = 1 / 120


def _cartpoles(plane: bool = False) -> ke.Scene:
    b = ke.SceneBuilder()
    if plane:
        b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return b.build()


def _drive(w: ke.World, steps: int) -> None:
    rng = np.random.default_rng(5)
    for k in range(steps):
        w.set_joint_efforts(rng.uniform(-80.0, 80.0, (w.num_envs, len(w.joint_names))))
        w.step(DT)
        if k % 3 == 0:
            _ = w.joint_positions  # a reader every few steps (the eager-read prediction)
        w.step(DT)


def test_one_shard_steps_without_a_job() -> None:
    # one thread: the shard is stepped, fetched and stored in place, no job is built or
    # dispatched (the per-step Python work the bare pymunk loop does not have)
    w = ke.World(_cartpoles(), num_envs=8, layout="packed")
    _drive(w, 10)
    assert w._backend._jobs == {}
    w2 = ke.World(_cartpoles(), num_envs=8, layout="packed", num_threads=2)
    _drive(w2, 10)
    assert w2._backend._jobs  # threads: jobs queued to the shard threads, as before
    np.testing.assert_array_equal(w.body_poses, w2.body_poses)
    w2.close()


@pytest.mark.parametrize("plane", [False, True])
def test_store_is_fetch_minus_origin_bit_for_bit(plane: bool) -> None:
    # the World's state (read by the C helper where built, else the batch read's store)
    # is a batch read's values, x minus the origin
    w = ke.World(_cartpoles(plane), num_envs=16, layout="packed")
    _drive(w, 20)
    be = w._backend
    shard = be._shards[0]
    shard.fetch()  # a batch read now (no step since the World's own read)
    n, kd = shard.copies.size, shard.kd
    block = shard.rbuf[: n * kd * 6].reshape(n, kd, 6).copy()
    block[:, :, 0] -= be.origin_x[:, None]
    mv = be._plan.moving
    got = w.body_poses[:, mv], w.body_velocities[:, mv]
    np.testing.assert_array_equal(got[0].view(np.int64), block[:, :, 0:3].view(np.int64))
    np.testing.assert_array_equal(got[1].view(np.int64), block[:, :, 3:6].view(np.int64))
    # static bodies keep their scene poses
    static = ~w._layout.dynamic
    np.testing.assert_array_equal(
        w.body_poses[:, static],
        np.broadcast_to(w.initial_body_poses[static], (16, int(static.sum()), 3)),
    )


def test_store_keeps_negative_zero_and_nan() -> None:
    # v - 0.0 is v for -0.0 and NaN too: the x column alone is shifted (the store of a
    # batch read: the path without the C helper)
    w = ke.World(_cartpoles(), num_envs=4, layout="packed")
    be = w._backend
    be._native = None
    shard = be._shards[0]
    n, kd = shard.copies.size, shard.kd
    block = shard.rbuf[: n * kd * 6].reshape(n, kd, 6)
    saved = block.copy()
    block[0, 0, 3] = -0.0
    block[1, 1, 5] = np.nan
    block[2, 0, 2] = -0.0
    be._store_shard(0)
    raw = be.raw[:, be._plan.moving]
    assert np.signbit(raw[0, 0, 3]) and raw[0, 0, 3] == 0.0
    assert np.signbit(raw[2, 0, 2]) and raw[2, 0, 2] == 0.0
    assert np.isnan(raw[1, 1, 5])
    np.testing.assert_array_equal(raw[:, :, 0], block[:, :, 0] - be.origin_x[:, None])
    block[...] = saved


def test_held_forces_are_read_in_place_by_the_shard_steps(monkeypatch) -> None:
    # with the C helper every shard's Stepper reads its bodies' rows of the held forces
    # (static bodies or not, any shards): no second copy per control step
    from kelab.sim.physics import _packed, _shard

    for plane, threads in ((False, 1), (True, 2)):
        w = ke.World(_cartpoles(plane=plane), num_envs=6, layout="packed", num_threads=threads)
        be = w._backend
        if be._native is None:
            pytest.skip("no C helper built here")
        assert be._direct and not any(be._pending)
        w.set_joint_efforts(np.tile([40.0, 0.0], (6, 1)))
        w.step(DT)
        assert not any(be._pending)
        assert not any(s.fbuf.any() for s in be._shards)  # the shards' buffers unused
        w.close()
    # without it: one shard and no static body, the held forces are the shard's buffer
    # (resets zero their rows there); a static body keeps the held array, copied
    monkeypatch.setattr(_packed, "native_module", lambda: None)
    monkeypatch.setattr(_shard, "native_module", lambda: None)
    w = ke.World(_cartpoles(), num_envs=6, layout="packed")
    be = w._backend
    shard = be._shards[0]
    assert be._native is None and shard.stepper is None
    assert np.shares_memory(be._forces, shard.fbuf)
    w.set_joint_efforts(np.tile([40.0, 0.0], (6, 1)))
    w.step(DT)
    block = shard.fbuf[: 6 * shard.kd * 3].reshape(6, shard.kd, 3)
    assert (block[:, 0, 0] == 40.0).all()
    w.reset_envs([1, 4])
    assert (block[[1, 4]] == 0.0).all() and (block[[0, 2, 3, 5], 0, 0] == 40.0).all()
    wp = ke.World(_cartpoles(plane=True), num_envs=6, layout="packed")
    assert not np.shares_memory(wp._backend._forces, wp._backend._shards[0].fbuf)


@pytest.mark.parametrize("threads", [1, 2])
def test_held_forces_read_in_place_are_the_copied_forces_bits(threads: int, monkeypatch) -> None:
    # the Steppers reading the held forces by rows == the shards' buffers written from
    # them before each step (the path without the C helper's Stepper)
    from kelab.sim.physics import _shard

    def run(in_place: bool) -> bytes:
        with monkeypatch.context() as m:
            if not in_place:  # no Stepper: each shard's buffer, written before a step
                m.setattr(_shard.Shard, "bind", lambda self, raw, forces=None: None)
            w = ke.World(_cartpoles(plane=True), num_envs=10, layout="packed", num_threads=threads)
            assert w._backend._direct == in_place
            rng = np.random.default_rng(7)
            out = []
            for k in range(50):
                w.set_joint_efforts(rng.uniform(-80.0, 80.0, (10, 2)))
                if k % 9 == 4:
                    ids = np.sort(rng.choice(10, 3, replace=False))
                    w.reset_envs(ids)
                    w.set_joint_efforts(np.full((3, 2), 30.0), env_ids=ids)
                w.step(DT)
                out.append(w.body_poses.tobytes() + w.body_velocities.tobytes())
            w.close()
            return b"".join(out)

    if ke.World(_cartpoles(), num_envs=2, layout="packed")._backend._native is None:
        pytest.skip("no C helper built here")
    assert run(True) == run(False)


def test_direct_forces_match_threads_and_a_plane_free_reference() -> None:
    # the same efforts, resets and steps: one shard (direct forces) and two shards (held
    # array, copied per shard) give the same bits
    worlds = [ke.World(_cartpoles(), num_envs=12, layout="packed", num_threads=k) for k in (1, 2)]
    rng = np.random.default_rng(9)
    for k in range(60):
        e = rng.uniform(-100.0, 100.0, (12, 2))
        ids = np.sort(rng.choice(12, 3, replace=False))
        for w in worlds:
            w.set_joint_efforts(e)
            w.step(DT)
            if k % 7 == 3:
                w.reset_envs(ids)
                w.set_joint_efforts(e[ids] * 0.5, env_ids=ids)
            w.step(DT)
    a, b = worlds
    np.testing.assert_array_equal(a.body_poses.view(np.int64), b.body_poses.view(np.int64))
    np.testing.assert_array_equal(a.body_velocities, b.body_velocities)
    b.close()


def test_world_throughput_interleaved_mode_prints_both_sides() -> None:
    # the noise-robust measurement the README quotes: one process, alternating chunks
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "world_throughput.py"
    done = subprocess.run(
        [sys.executable, str(script), "--interleaved", "--envs", "4", "--chunks", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip()
    assert line.startswith("4 cartpoles, 2 pairs of 20 control steps")
    assert "packed World min" in line and "bare loop min" in line
    assert "median of the pairs" in line and "load average" in line
