"""World inputs: copy counts that cannot fit, env ids, state shapes, non-finite physics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kelab as ke
import kelab.sim.physics._isolated as isolated
from kelab.sim.scene.assets import Asset


def _biped() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/biped:v1")), at="/World/Robot")
    return b.build()


# ---------------------------------------------------------------- num_envs vs memory
def test_isolated_world_too_large_for_memory_is_refused_before_it_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolated, "memory_left", lambda: (16 * 2**30, "available (test)"))
    built = []
    real = isolated.build_copy
    monkeypatch.setattr(isolated, "build_copy", lambda *a: built.append(1) or real(*a))
    with pytest.raises(ValueError) as err:
        ke.World(_biped(), num_envs=10**6)
    msg = str(err.value)
    assert isinstance(err.value, MemoryError)  # WorldMemoryError: both
    assert "num_envs=1000000" in msg and "layout='isolated'" in msg
    assert "327.0 GiB in all" in msg and "16.0 GiB is available (test)" in msg  # estimate, limit
    assert "layout='packed'" in msg and "fewer copies" in msg  # the fix
    assert not built  # refused from the scene alone, before any copy
    most = int(msg.split("at most ")[1].split()[0])
    assert 10_000 < most < 200_000  # ~350 kB per biped copy: 16 GiB * 0.8 / 350 kB = 39k


def test_memory_estimate_follows_what_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "memory_left", lambda: (50 * 2**20, "available (test)"))
    with pytest.raises(ValueError, match="num_envs=1000"):
        ke.World(_biped(), num_envs=1000)
    monkeypatch.setattr(isolated, "memory_left", lambda: None)  # unknown: no check
    assert ke.World(_biped(), num_envs=12).num_envs == 12


def test_packed_cap_is_worded_like_the_isolated_refusal() -> None:
    with pytest.raises(ValueError) as err:
        ke.World(_biped(), num_envs=20000, layout="packed")
    msg = str(err.value)
    assert msg.startswith("World: num_envs must be at most 16384 for layout='packed'")
    assert "got num_envs=20000" in msg and "fewer copies" in msg


# ---------------------------------------------------------------- env ids
def _balls(n: int = 4, layout: str = "isolated") -> ke.World:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Prop(ke.Circle(0.1), mass=1.0, initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
    b.add(ke.Prop(ke.Box(0.2, 0.2), mass=1.0, initial_pose=ke.Pose(1.0, 1.0)), at="/World/Box")
    return ke.World(b.build(), num_envs=n, layout=layout)


_WORLD = _balls()


@pytest.mark.parametrize(
    ("env_ids", "words"),
    [
        (0.7, "integer copy indices"),
        ([0.0, 1.0], "integer copy indices"),
        ("1", "integer copy indices"),
        (["1"], "integer copy indices"),
        (True, "got the bool True"),
        (np.True_, "got the bool True"),
        ([1, 1], "unique"),
        (np.array([3, 0, 3]), "[3] more than once"),
        ([4], "in [0, 4)"),
        ([-1], "in [0, 4)"),
        ([[0, 1]], "1-D"),
        ([True, False], "mask must have shape (4,)"),
        ([1, "a"], "integer copy indices"),
        ([0, 1j], "integer copy indices"),
        ([1, False], "bools mixed"),
    ],
)
def test_bad_env_ids_are_refused_by_every_writer(env_ids: object, words: str) -> None:
    w = _WORLD
    before = w.body_poses
    calls = [
        lambda: w.set_joint_efforts(np.zeros((1, 0)), env_ids=env_ids),
        lambda: w.set_body_forces(np.zeros((1, 3, 2)), env_ids=env_ids),
        lambda: w.set_body_states(env_ids, np.zeros((1, 3, 3))),
    ]
    if words not in ("unique", "[3] more than once"):  # a reset of a copy twice: once
        calls.append(lambda: w.reset_envs(env_ids))
    for call in calls:
        with pytest.raises(ValueError) as err:
            call()
        assert words in str(err.value), str(err.value)
    assert np.array_equal(w.body_poses, before)  # nothing was applied


def test_good_env_ids_forms_still_work() -> None:
    w = _balls()
    w.reset_envs(2)  # one int
    w.reset_envs(np.int32(1))
    w.reset_envs([])  # nothing
    w.reset_envs(np.array([3, 0], dtype=np.uint8))
    w.reset_envs(np.array([True, False, True, False]))  # a mask
    w.reset_envs([1, 3, 1])  # a copy listed twice is reset once
    assert w._ids([1, 3, 1], repeats=True).tolist() == [1, 3]
    w.set_body_forces(np.ones((2, 3, 2)), env_ids=[3, 1])
    assert w.external_forces[[1, 3], 1, 0].tolist() == [1.0, 1.0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(-3, 7), st.floats(allow_nan=True), st.text(max_size=2), st.booleans()
        ),
        max_size=5,
    )
)
def test_env_ids_are_ints_in_range_and_unique_or_refused(ids: list) -> None:
    w = _WORLD
    if ids and all(isinstance(x, bool) for x in ids):  # a mask: one flag per copy
        if len(ids) == 4:
            assert w._ids(ids).tolist() == [k for k, x in enumerate(ids) if x]
            return
        valid = False
    else:
        ints = all(isinstance(x, int) and not isinstance(x, bool) for x in ids)
        valid = ints and all(0 <= i < 4 for i in ids) and len(set(ids)) == len(ids)
    if valid:
        assert w._ids(ids).tolist() == list(ids)
    else:
        with pytest.raises(ValueError, match="env_ids"):
            w._ids(ids)


# ---------------------------------------------------------------- state shapes
@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_set_body_states_refuses_wrong_shapes(layout: str) -> None:
    w = _balls(layout=layout)
    for _ in range(5):
        w.step(1 / 120)
    before, vels = w.body_poses, w.body_velocities
    bad = [
        ([], None, "poses must have shape (1, 3, 3)"),  # used to reset the copy to zeros
        (np.zeros((3, 3)), None, "got (3, 3)"),  # one copy without its axis
        (np.zeros(9), None, "got (9,)"),
        (np.zeros((1, 3, 3)), np.zeros((1, 3)), "velocities must have shape (1, 3, 3)"),
        ([[["a", 0, 0]] * 3], None, "real numbers"),
        (np.zeros((1, 3, 3), dtype=complex), None, "real numbers"),
    ]
    for poses, velocities, words in bad:
        with pytest.raises(ValueError) as err:
            w.set_body_states([2], poses, velocities)
        assert words in str(err.value), str(err.value)
    assert np.array_equal(w.body_poses, before) and np.array_equal(w.body_velocities, vels)
    assert w.step_count == 5


def test_joint_commands_refuse_strings_and_complex_numbers() -> None:
    b = ke.SceneBuilder()
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    w = ke.World(b.build(), num_envs=2)
    cart = w.robot("/World/Robot")
    for values in (["1", "2"], np.array([1j, 0]), [[None, 1.0]]):
        with pytest.raises(ValueError, match="real numbers"):
            w.set_joint_efforts(values)
    for joint_ids in (0.5, [0, 0], [5], "0", True):
        with pytest.raises(ValueError, match="joint_ids"):
            cart.set_joint_effort_target([[1.0]], joint_ids=joint_ids)
    with pytest.raises(ValueError, match="set_joint_state: joint_ids must be unique"):
        cart.set_joint_state([[0.1, 0.1]], joint_ids=[1, 1])
    assert not w.joint_efforts.any()


# ---------------------------------------------------------------- non-finite state
@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_a_diverging_copy_is_named_after_the_step(layout: str) -> None:
    w = _balls(3, layout)
    push = np.zeros((1, 3, 2))
    push[0, 2] = (1e9, 1e9)  # the largest force held: the box flies out of the limits
    w.set_body_forces(push, env_ids=[1])
    with pytest.raises(FloatingPointError) as err:
        for _ in range(400):
            w.step(1 / 120)  # the state is checked after every step
    msg = str(err.value)
    assert "copies [1]" in msg and "'/World/Box' in copy 1" in msg and "reset" in msg
    assert "'/World/Ball'" not in msg
    w.reset_envs([1])  # the fix the message names
    w.step(1 / 120)
    assert np.isfinite(w.body_poses).all()


def test_repeats_among_many_ids_are_found() -> None:
    w = _balls(100, "packed")
    ids = np.r_[np.arange(100), 42]  # more ids than the set check handles: sorted
    with pytest.raises(ValueError, match=r"\[42\] more than once"):
        w.set_body_forces(np.zeros((101, 3, 2)), env_ids=ids)
    assert w._ids(ids, repeats=True).tolist() == list(range(100))
    assert w._ids(np.arange(100)[::-1].copy()).tolist() == list(range(99, -1, -1))


def test_sensor_config_refuses_an_int_too_large_for_a_float():
    import kelab as ke

    with pytest.raises(ValueError, match="noise must be a finite number"):
        ke.SensorConfig(noise=10**400)


def test_an_rl_episode_is_never_rebased_midway():
    import kelab as ke
    from kelab.tasks.pi_locomotion import PiLocomotionTask

    env = ke.LearningEnv(PiLocomotionTask(), num_envs=1)
    steps_per_episode = env.max_episode_length * env.timing.decimation
    assert env._core.world.max_log_steps > steps_per_episode
