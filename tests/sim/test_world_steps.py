"""``World.step(dt, steps)``: several physics steps in one call (#40 item 2).

``steps`` steps in one call are ``steps`` calls of ``step(dt)``, bit for bit: states,
joint states, contact sums, counters, exact time, snapshots (their log) and the joint
state's read prediction. Where nothing between the steps needs Python the packed layout's
shard threads take them in one job each, meeting after each step in C; elsewhere (sensors,
PD forces recomputed from the state, no C helper, the isolated layout) the World loops.
A body that leaves the limits stops the steps where single calls would: the same error,
the same step, the same state.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import kelab as ke
from kelab.sim import world as world_module
from kelab.sim.physics import _guard as guard
from kelab.sim.physics import _packed
from kelab.sim.scene.assets import Asset
from tests.sim._world_scenes import busy_scene

NATIVE = guard.native_module()
needs_c = pytest.mark.skipif(NATIVE is None, reason="the C helper is not built")


def _singles(world: ke.World) -> None:
    """Make ``world.step(dt, steps=k)`` run as ``k`` calls of ``World.step(dt)``."""

    def step(dt: float, steps: int = 1) -> None:
        for _ in range(steps):
            world_module.World.step(world, dt)

    world.step = step  # type: ignore[method-assign]


def _state(world: ke.World) -> bytes:
    """Everything a user reads of a World's physics, as bytes."""
    return (
        b"".join(
            a.tobytes()
            for a in (
                world.body_poses,
                world.body_velocities,
                world.joint_positions,
                world.joint_velocities,
                world.contact_forces,
            )
        )
        + repr((world.step_count, world.sim_time_exact)).encode()
    )


def _prediction(world: ke.World) -> tuple[int, int]:
    """The joint state's read prediction (steps since the last read, the read period)."""
    states = world._states
    return states.since_read, states.read_period


def _counting(world: ke.World) -> list[int]:
    """The ``count`` of every backend run of ``world`` from now on (a list it appends to)."""
    counts: list[int] = []
    real = world._backend.step_many

    def counted(dt: float, count: int) -> int:
        counts.append(count)
        return real(dt, count)

    world._backend.step_many = counted
    return counts


def _humanoids(threads: int, n: int = 64) -> gymnasium.vector.VectorEnv:
    env = gymnasium.make_vec(
        "kelab/Humanoid-v0",
        num_envs=n,
        vectorization_mode="vector_entry_point",
        layout="packed",
        num_threads=threads,
    )
    env.reset(seed=4)
    return env


def _run_humanoids(threads: int, singles: bool) -> tuple[list[bytes], int]:
    """Random-action env steps (with resets); what they return and leave, and the fused runs."""
    env = _humanoids(threads)
    world = env.unwrapped.world
    runs = _counting(world)
    if singles:
        _singles(world)
    rng = np.random.default_rng(7)
    seen = []
    try:
        for t in range(60):
            act = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
            obs, rew, term, trunc, _ = env.step(act)
            seen += [obs.tobytes(), rew.tobytes(), term.tobytes(), trunc.tobytes()]
            seen.append(repr(_prediction(world)).encode())
            if t % 3 == 0:  # a reader that skips env steps: the prediction changes
                seen.append(_state(world))
                seen.append(repr(_prediction(world)).encode())
            if t % 20 == 7:
                seen.append(world.snapshot().to_bytes())
    finally:
        env.close()
    return seen, len(runs)


@needs_c
@pytest.mark.parametrize("threads", [1, 2])
def test_humanoid_env_steps_are_single_steps_bit_for_bit(threads: int) -> None:
    fused, runs = _run_humanoids(threads, singles=False)
    single, none = _run_humanoids(threads, singles=True)
    assert runs == 60 and none == 0  # decimation 2: one run of two steps per env step
    assert fused == single


def test_humanoid_env_steps_without_the_c_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    """No helper: the World loops (no backend run), with the same results as single steps."""
    monkeypatch.setenv("KELAB_NO_NATIVE", "1")
    guard.native_module.cache_clear()
    try:
        env = _humanoids(2, 8)
        assert not env.unwrapped.world._backend.can_step_many
        env.close()
        fused, runs = _run_humanoids(2, singles=False)
        single, _ = _run_humanoids(2, singles=True)
    finally:
        monkeypatch.delenv("KELAB_NO_NATIVE")
        guard.native_module.cache_clear()
    assert runs == 0
    assert fused == single
    if NATIVE is not None:  # the helper's results are the same bits (its own guarantee)
        with_c, _ = _run_humanoids(2, singles=False)
        assert with_c == fused


def _pi_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/pi:v1")), at="/World/Robot")
    return b.build()


def _drive(world: ke.World, calls: list[int], singles: bool) -> list[bytes]:
    """Commands, then ``step(dt, steps=k)`` for each k of ``calls``; every read after each."""
    if singles:
        _singles(world)
    n, nj = world.num_envs, len(world.joint_names)
    seen = []
    for t, k in enumerate(calls):
        u = np.sin(t / 3.0 + np.arange(n * nj).reshape(n, nj))
        world.set_joint_efforts(5.0 * u)
        world.set_joint_position_targets(0.3 * u)
        world.step(1 / 120, steps=k)
        seen.append(_state(world))
        seen += [world.read_sensor(s.name).tobytes() for s in world.scene.sensors]
        if t % 3 == 1:
            seen.append(world.snapshot().to_bytes())
    return seen


@pytest.mark.parametrize(
    ("scene", "threads"),
    [(busy_scene, 2), (_pi_scene, 2), (_pi_scene, 1)],
    ids=["sensors", "pd-2", "pd-1"],
)
def test_worlds_that_need_python_between_steps_loop(scene, threads: int) -> None:  # noqa: ANN001
    """Sensors, PD every-step forces: the World takes the steps one by one, the same bits."""
    runs = []
    for singles in (False, True):
        w = ke.World(scene(), num_envs=6, layout="packed", num_threads=threads)
        assert not w._many
        runs.append(_drive(w, [3, 1, 2, 4, 2, 5], singles))
        w.close()
    assert runs[0] == runs[1]


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_steps_across_rebases_and_a_dt_change(layout: str) -> None:
    """A rebase due within the steps happens after its own step; dt changes are logged."""
    runs = []
    for singles in (False, True):
        w = ke.World(_biped_scene(), num_envs=6, layout=layout, num_threads=2, max_log_steps=4)
        if singles:
            _singles(w)
        seen = []
        for t, (dt, k) in enumerate([(1 / 120, 3), (1 / 120, 5), (1 / 60, 7), (1 / 120, 2)]):
            w.set_joint_efforts(np.full((6, len(w.joint_names)), 2.0 * np.sin(t)))
            w.step(dt, steps=k)
            seen += [_state(w), w.snapshot().to_bytes()]
        runs.append(seen)
        w.close()
    assert runs[0] == runs[1]


def _biped_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/", per_environment=False)
    b.add(ke.Robot(asset=Asset.from_registry("kelab/robot/biped:v2")), at="/World/Robot")
    return b.build()


def _ball_world(threads: int) -> ke.World:
    b = ke.SceneBuilder(gravity=(0.0, 0.0))
    b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at="/World/Ball")
    return ke.World(b.build(), num_envs=6, layout="packed", num_threads=threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("copy", [1, 4])  # in the calling thread's shard, in the worker's
def test_a_body_leaving_the_limits_stops_the_steps_where_single_calls_stop(
    threads: int, copy: int
) -> None:
    """The same error (copy, step, values), the same state and counters, then refusals."""
    ends = []
    for singles in (False, True):
        w = _ball_world(threads)
        if singles:
            _singles(w)
        w.step(1 / 60, steps=2)
        forces = np.zeros((6, 1, 2))
        forces[copy, 0, 0] = 1e9  # 1e9 N on 1 kg: past 1e7 m/s in the first step
        w.set_body_forces(forces)
        with pytest.raises(FloatingPointError) as first:
            w.step(1 / 60, steps=3)
        with pytest.raises(FloatingPointError) as again:
            w.step(1 / 60, steps=3)
        ends.append((str(first.value), str(again.value), _state(w), w.snapshot().to_bytes()))
        w.close()
    assert ends[0] == ends[1]
    assert f"in copies [{copy}]" in ends[0][0] and "after step 3 " in ends[0][0]


@needs_c
def test_the_shards_stop_after_the_same_step() -> None:
    """A run stopped by one shard's read: every shard took that many steps, no more."""
    w = _ball_world(2)
    forces = np.zeros((6, 1, 2))
    forces[4, 0, 0] = 1e9  # copy 4 is the worker's
    w.set_body_forces(forces)
    with pytest.raises(FloatingPointError, match=r"after step 1 in copies \[4\]"):
        w.step(1 / 60, steps=3)
    backend = w._backend
    assert backend._taken == [1, 1] and backend._within == [True, False]
    assert not backend.read_within and w.step_count == 1
    w.close()


def test_free_angles_past_the_fast_bound_go_on_step_by_step() -> None:
    """An angle past 1e7 rad is not within the fast bound but within the limits: no error."""
    runs = []
    for singles in (False, True):
        w = _ball_world(2)
        if singles:
            _singles(w)
        poses = np.zeros((1, 1, 3))
        poses[0, 0, 2] = 3e7
        w.set_body_states([2], poses, np.array([[[0.5, 0.0, 2.0]]]))
        w.step(1 / 60, steps=4)
        runs.append((_state(w), w.snapshot().to_bytes()))
        w.close()
    assert runs[0] == runs[1]


@needs_c
def test_one_barrier_per_call_with_two_threads() -> None:
    _packed.CLOCK = clock = _packed.BarrierClock()
    w = ke.World(_biped_scene(), num_envs=16, layout="packed", num_threads=2)
    try:
        w.step(1 / 120)
        start = clock.barriers
        w.step(1 / 120, steps=4)
        assert clock.barriers - start == 1
        assert w.step_count == 5
    finally:
        _packed.CLOCK = None
        w.close()


@pytest.mark.parametrize(
    ("steps", "shown"),
    [(0, "0"), (-2, "-2"), (2.0, "2.0"), ("3", "'3'"), (True, "True"), (None, "None")],
)
def test_steps_must_be_an_int_of_at_least_one(steps: object, shown: str) -> None:
    w = _ball_world(1)
    with pytest.raises(ValueError) as err:
        w.step(1 / 60, steps=steps)  # type: ignore[arg-type]
    assert str(err.value) == (
        f"World.step: steps must be an int >= 1, got {shown}; it counts physics steps of dt "
        "taken in this call"
    )
    assert w.step_count == 0 and w.sim_time_exact == 0
    w.step(1 / 60, steps=np.int64(2))  # a numpy int is an int
    assert w.step_count == 2
    w.close()
    with pytest.raises(RuntimeError):
        w.step(1 / 60, steps=2)


_BROKEN_SHARD = """
import numpy as np
import kelab as ke

class Broken:  # a shard whose job fails before it reaches the meeting point
    def run(self, *args):
        raise RuntimeError("shard job failed")

b = ke.SceneBuilder(gravity=(0.0, 0.0))
b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at="/World/Ball")
w = ke.World(b.build(), num_envs=6, layout="packed", num_threads=2)
w._backend._shards[{shard}].stepper = Broken()
try:
    w.step(1 / 60, steps=3)
except RuntimeError as err:
    print("raised:", err)
w.close()
"""


@needs_c
@pytest.mark.parametrize("shard", [0, 1])
def test_a_failed_shard_job_lets_the_other_shard_go(shard: int) -> None:
    """The other shard waits at the meeting point for no one: the error is raised, no hang."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _BROKEN_SHARD.format(shard=shard)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "raised: shard job failed" in run.stdout


@needs_c
def test_many_steps_are_handed_over_in_jobs_of_at_most_steps_per_job() -> None:
    """A long call returns to Python between jobs (a KeyboardInterrupt is seen there)."""
    runs = []
    for singles in (False, True):
        w = _ball_world(2)
        counts = _counting(w)
        if singles:
            _singles(w)
        w.set_body_forces(np.full((6, 1, 2), 0.5))
        w.step(1 / 60, steps=2 * world_module.STEPS_PER_JOB + 5)
        runs.append((_state(w), w.snapshot().to_bytes()))
        if not singles:
            assert counts == [world_module.STEPS_PER_JOB] * 2 + [5]
        w.close()
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    ("scene", "layout", "held", "one_job"),
    [
        (_biped_scene, "packed", False, True),  # effort actuators only
        (_biped_scene, "isolated", False, False),
        (busy_scene, "packed", False, False),  # sensors
        (_pi_scene, "packed", False, False),  # PD actuators, every step
        (_pi_scene, "packed", True, False),  # PD actuators, held: still loops
    ],
    ids=["packed", "isolated", "sensors", "pd", "pd-held"],
)
def test_steps_in_one_job_says_which_path_a_call_takes(
    scene,  # noqa: ANN001
    layout: str,
    held: bool,
    one_job: bool,
) -> None:
    """The property is True exactly where ``step(dt, steps=k)`` hands the backend one job."""
    w = ke.World(scene(), num_envs=6, layout=layout, num_threads=2)
    if held:
        w.controller_updates = "held"
    counts = _counting(w)
    w.step(1 / 120, steps=3)
    assert w.steps_in_one_job == bool(counts)  # also without the C helper: both False
    if NATIVE is not None:
        assert w.steps_in_one_job is one_job
        assert counts == ([3] if one_job else [])
    w.close()
    assert w.steps_in_one_job is False  # a closed World steps no more
