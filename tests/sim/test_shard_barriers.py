"""The shard threads' barriers: what a 2-thread step waits for (#40 item 2).

``_packed.BarrierClock`` records each barrier's thread CPU times (benchmarks/contacts.py
--humanoid reads the serial part and the critical path from it); the shard split gives
the calling thread as many copies as a worker (every physics step is a barrier, so the
longer shard sets the step's length); with the C helper a shard's step is one C call
that also checks the values it reads against the limits' fast bound.
"""

from __future__ import annotations

import subprocess
import sys

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


# ---------------------------------------------------------------- a shard's step in C
_FLUNG = """
import numpy as np
import kelab as ke
b = ke.SceneBuilder()
b.add(ke.Terrain.plane(), at="/", per_environment=False)
b.add(ke.Prop(ke.Circle(0.1), mass=0.01, initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
w = ke.World(b.build(), num_envs=8, layout="packed", num_threads={threads})
backend = w._backend
w.step(1 / 60)
print("within", backend.read_within)
forces = np.zeros((8, len(w.body_names), 2))
forces[5, w.body_names.index("/World/Ball")] = (1e9, 0.0)  # 1.7e9 m/s after a step
w.set_body_forces(forces)
try:
    w.step(1 / 60)
except FloatingPointError as err:
    print("refused", backend.read_within, "in copies [5]" in str(err))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_the_step_checks_the_bound_while_it_reads(threads: int) -> None:
    # each shard's step (one C call with the helper) says whether every value it read is
    # within the limits' fast bound; a body flung past it is still named by World.step
    from kelab.sim.physics._guard import native_module

    if native_module() is None:
        pytest.skip("no C helper built here: the World checks raw in numpy")
    done = subprocess.run(
        [sys.executable, "-c", _FLUNG.format(threads=threads)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["within True", "refused False True"]


def test_the_stepper_refuses_tables_that_disagree() -> None:
    from kelab.sim.physics._guard import native_module

    native = native_module()
    if native is None:
        pytest.skip("no C helper built here")
    bodies = np.zeros(2, dtype=np.uint64)
    raw = np.zeros((2, 1, 6))
    ok = (np.ones(6), False, None, np.zeros(1, np.int64), raw)
    with pytest.raises(ValueError, match="Stepper: forces must hold 3 float64"):
        native.Stepper(1, bodies, *ok, np.array([0, 2], np.int64), np.zeros(2), 1e7)  # row 2
    with pytest.raises(ValueError, match="Stepper: forces must hold 3 float64"):
        native.Stepper(1, bodies, np.ones(5), *ok[1:], np.zeros(2, np.int64), np.zeros(2), 1e7)
    with pytest.raises(ValueError, match="friction a Friction"):
        bad = (np.ones(6), False, object(), np.zeros(1, np.int64), raw)
        native.Stepper(1, bodies, *bad, np.zeros(2, np.int64), np.zeros(2), 1e7)


# ---------------------------------------------------------------- work inside the jobs
def _joint_run(threads: int, in_step: bool) -> tuple[list, np.ndarray, np.ndarray]:
    """Steps of 2 with the joint state read after each; the on_read calls of the last."""
    w = _world(threads)
    try:
        backend = w._backend
        if not in_step:
            backend._joints_due = None  # the calling thread computes it, as before
        calls: list = []
        hook = backend.on_read

        def spy(rows, *computed):
            calls.append((rows, *computed))
            hook(rows, *computed)

        backend.on_read = spy
        w.set_joint_efforts(np.full((16, len(w.joint_names)), 3.0))
        for _ in range(6):
            calls.clear()
            w.step(1 / 120, steps=2)
            pos, vel = w.joint_positions.copy(), w.joint_velocities.copy()
        return calls, pos, vel
    finally:
        w.close()


@pytest.mark.parametrize("threads", [1, 2])
def test_the_steps_compute_the_joint_state_in_the_shard_jobs(threads: int) -> None:
    # with the C helper each shard's job computes its copies' joint state after its last
    # read (no GIL), instead of the calling thread after the barrier: the same bits
    from kelab.sim.kinematics import joint_state
    from kelab.sim.physics._guard import native_module

    if native_module() is None:
        pytest.skip("no C helper built here: the calling thread computes it")
    calls, pos, vel = _joint_run(threads, in_step=True)
    assert calls == [(slice(None), True)]  # told once, nothing left to compute
    before, pos0, vel0 = _joint_run(threads, in_step=False)
    assert before and not any(c[1:] == (True,) for c in before)  # the calling thread's
    assert pos.tobytes() == pos0.tobytes() and vel.tobytes() == vel0.tobytes()
    w = _world(threads)
    try:
        w.set_joint_efforts(np.full((16, len(w.joint_names)), 3.0))
        for _ in range(6):
            w.step(1 / 120, steps=2)
            w.joint_positions  # noqa: B018 (a reader: the next steps compute it)
        want = joint_state(w._states.layout, w._backend.raw)
        assert pos.tobytes() == want[0].tobytes() and vel.tobytes() == want[1].tobytes()
    finally:
        w.close()


def test_the_stepper_refuses_joint_tables_that_disagree() -> None:
    from kelab.sim.physics._guard import native_module

    native = native_module()
    if native is None:
        pytest.skip("no C helper built here")
    w = _world(2)
    try:
        stepper = w._backend._shards[1].stepper
        nb, nj = len(w.body_names), len(w.joint_names)
        pos, vel = np.zeros((16, nj)), np.zeros((16, nj))
        cols, child = np.arange(nj, dtype=np.int64), np.ones(nj, dtype=np.int64)
        parent, rel = np.full(nj, -1, dtype=np.int64), np.zeros(nj)
        with pytest.raises(ValueError, match="Stepper.joints: pos and vel must hold"):
            stepper.joints(pos, vel, nb, nj, cols, np.full(nj, nb, np.int64), parent, rel)
        with pytest.raises(ValueError, match="Stepper.joints: pos and vel must hold"):
            stepper.joints(np.zeros((8, nj)), np.zeros((8, nj)), nb, nj, cols, child, parent, rel)
        fresh = native.Stepper(*_stepper_args(w))
        with pytest.raises(ValueError, match="joints must be False while no joint tables"):
            fresh.run(1 / 120, 1, None, 0, True)
    finally:
        w.close()


def _stepper_args(w: ke.World) -> tuple:
    """A Stepper over shard 1 of ``w`` without joint tables (as Shard.bind makes it)."""
    from kelab.sim.physics import _chipmunk as cp

    shard = w._backend._shards[1]
    return (
        cp.address(shard.ptr),
        shard.body_addrs,
        w._backend._forces,
        shard._never_sleeps,
        None,
        shard._copy_ids,
        w._backend.raw,
        shard._read_rows,
        shard._read_origins,
        1e7,
        True,
    )


def test_shards_are_built_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # each shard's space is made in a thread of its own (its own malloc arena: its objects
    # lie together, not in the main heap's holes), one after the other
    import threading

    made: list[int] = []
    real = _packed.Shard

    def shard(*args, **kwargs):
        made.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(_packed, "Shard", shard)
    for threads in (1, 2):
        made.clear()
        _world(threads).close()
        assert len(made) == threads
        assert threading.get_ident() not in made
    with pytest.raises(ZeroDivisionError):  # a maker's error, raised in the caller
        _packed.built_apart([lambda: 1, lambda: 1 / 0, lambda: pytest.fail("not called")])


def test_shards_are_built_here_where_no_thread_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    def refuse(self) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert _packed.built_apart([lambda: 1, lambda: 2]) == [1, 2]
    w = _world(1)  # (2 threads need their shard thread)
    try:
        w.step(1 / 120, steps=2)
        assert w.step_count == 2
    finally:
        w.close()
