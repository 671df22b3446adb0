"""The batched per-copy seeding gives numpy's own PCG64 states, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from kelab.rl._seeding import pcg64_states

SEEDS = [0, 1, 1000, 2**31, 2**32 - 1, 2**32, 2**63 + 7, 2**96 + 5, 2**128 + 3, 123456789]
STREAMS = [(), (0x5EED,), (1, 2), (2**40,)]


def numpy_state(seed: int, stream: tuple[int, ...], i: int) -> dict:
    return np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(*stream, i))).state


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("stream", STREAMS)
def test_states_equal_numpy(seed: int, stream: tuple[int, ...]) -> None:
    indices = [*range(0, 40), 1000, 4095, 2**32 - 1]
    got = pcg64_states(seed, stream, indices)
    assert got == [numpy_state(seed, stream, i) for i in indices]


def test_indices_of_two_words_equal_numpy() -> None:
    indices = [2**32 - 1, 2**32, 2**40 + 3]
    assert pcg64_states(7, (0x5EED,), indices) == [numpy_state(7, (0x5EED,), i) for i in indices]


def test_generator_draws_the_same_numbers() -> None:
    states = pcg64_states(1000, (0x5EED,), range(8))
    for i, state in enumerate(states):
        gen = np.random.default_rng(99)
        gen.bit_generator.state = state
        ref = np.random.default_rng(np.random.SeedSequence(1000, spawn_key=(0x5EED, i)))
        assert np.array_equal(gen.random(16), ref.random(16))
        assert np.array_equal(gen.integers(0, 2**62, 8), ref.integers(0, 2**62, 8))


def test_no_copies() -> None:
    assert pcg64_states(3, (), []) == []


def test_env_reseed_gives_the_documented_streams() -> None:
    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask

    env = ke.LearningEnv(CartPoleTask(), num_envs=4)
    try:
        for seed in (5, 2**70):
            env.reset(seed=seed)
            core = env._core
            for i in range(4):
                task = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5EED, i)))
                world = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
                draws = core.task_rngs[i].bit_generator.state  # reset_idx drew from it
                assert draws["bit_generator"] == "PCG64"
                assert core.world.rngs[i].bit_generator.state == world.bit_generator.state
                # the task stream continues where reset_idx left it: replay the same draws
                assert core.task_rngs[i].random() == _after(task, draws)
    finally:
        env.close()


def _after(gen: np.random.Generator, state: dict) -> float:
    """The next draw of ``gen`` once advanced to ``state`` (which it must reach)."""
    for _ in range(10_000):
        if gen.bit_generator.state == state:
            return gen.random()
        gen.random()
    raise AssertionError("the task stream is not numpy's SeedSequence stream")


def test_a_users_generator_of_another_kind_is_reseeded_and_restored() -> None:
    # a trial's finding: with copy 2's Generator replaced by an MT19937 one, reset(seed)
    # raised half-way (copies 0-1 reseeded, the env unusable); now the copy gets the env's
    # own stream again, and a snapshot taken with the user's Generator restores into a
    # fresh env (whose copy 2 is PCG64) with the same future
    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask

    envs = [ke.LearningEnv(CartPoleTask(), num_envs=4) for _ in range(3)]
    a, b, fresh = envs
    try:
        for env in (a, b):
            env.reset(seed=3)
            env._core.task_rngs[2] = np.random.Generator(np.random.MT19937(5))
        a.reset(seed=4)  # no error: copy 2 is back on its PCG64 stream, like the others
        b.reset(seed=4)
        assert all(type(g.bit_generator) is np.random.PCG64 for g in a._core.task_rngs)
        assert [g.bit_generator.state for g in a._core.task_rngs] == [
            g.bit_generator.state for g in b._core.task_rngs
        ]
        a._core.task_rngs[2] = np.random.Generator(np.random.MT19937(5))
        snap = a.snapshot()
        acts = np.zeros((4, *a.single_action_space.shape), dtype=np.float32)
        future = [a.step(acts)[0].tobytes() for _ in range(120)]  # episodes end: draws
        fresh.reset(seed=9)
        fresh.restore(ke.Snapshot.from_bytes(snap.to_bytes()))
        assert type(fresh._core.task_rngs[2].bit_generator) is np.random.MT19937
        assert [fresh.step(acts)[0].tobytes() for _ in range(120)] == future
    finally:
        for env in envs:
            env.close()
