"""num_envs, seed, num_threads and layout: one check, one wording, in World and the envs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kelab as ke
from kelab._validate import SEED_FIX
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.config import TrainConfig

BAD = [
    ({"num_envs": 0}, "num_envs must be an int >= 1, got 0; "),
    ({"num_envs": True}, "num_envs must be an int >= 1, got True; "),
    ({"num_envs": 2.0}, "num_envs must be an int >= 1, got 2.0; "),
    ({"seed": -1}, "seed must be an int >= 0, got -1"),
    ({"seed": True}, "seed must be an int >= 0, got True"),
    # repr: np.float64(3.0) from numpy 2 on, 3.0 before
    ({"seed": np.float64(3.0)}, f"seed must be an int >= 0, got {np.float64(3.0)!r}"),
    ({"num_threads": 0}, "num_threads must be an int >= 1, got 0; "),
    ({"num_threads": False}, "num_threads must be an int >= 1, got False; "),
    ({"layout": "tiled"}, "layout must be one of ('isolated', 'packed'), got 'tiled'; "),
]


class _CountingCartPole(CartPoleTask):
    builds = 0

    def build(self, builder: ke.SceneBuilder) -> None:
        type(self).builds += 1
        super().build(builder)


def _message(make) -> str:
    with pytest.raises(ValueError) as info:
        make()
    return str(info.value)


@pytest.mark.parametrize(("kwargs", "start"), BAD, ids=[repr(k) for k, _ in BAD])
def test_world_and_envs_refuse_with_the_same_words_before_building(kwargs, start):
    builder = ke.SceneBuilder()
    CartPoleTask().build(builder)
    scene = builder.build()
    from_world = _message(lambda: ke.World(scene, **kwargs))
    _CountingCartPole.builds = 0
    from_env = _message(lambda: ke.LearningEnv(_CountingCartPole(), **kwargs))
    assert _CountingCartPole.builds == 0  # refused before the task built its scene
    assert from_world == from_env
    assert from_world.startswith(start)
    if "num_envs" not in kwargs and "num_threads" not in kwargs:
        assert _message(lambda: ke.DirectRLEnv(_CountingCartPole(), **kwargs)) == from_world
        assert _CountingCartPole.builds == 0


def test_an_env_keyword_left_none_keeps_the_configs_value():
    """layout=None / seed=None on an env mean 'not given' (World refuses None: no config)."""
    assert "got None" in _message(lambda: ke.World(ke.SceneBuilder().build(), layout=None))
    cfg = ke.EnvConfig(num_envs=2, seed=9, layout="packed")
    env = ke.LearningEnv(CartPoleTask(), layout=None, seed=None, config=cfg)
    assert (env.world.layout, env.seed_value, env.num_envs) == ("packed", 9, 2)
    env.close()
    env = ke.LearningEnv(CartPoleTask(), layout=None)
    assert env.world.layout == ke.EnvConfig().layout == "isolated"
    env.close()


def test_layout_message_says_what_each_layout_is():
    msg = _message(lambda: ke.LearningEnv(CartPoleTask(), layout="pakced"))
    assert "'isolated': one pymunk space per copy" in msg
    assert "'packed': copies share one space per thread" in msg
    assert _message(lambda: TrainConfig(layout="pakced")) == "TrainConfig." + msg


def test_numpy_ints_are_accepted_where_python_ints_are():
    def rollout(env, seed):
        obs = [env.reset(seed=seed)[0]]
        for _ in range(20):
            obs.append(env.step(np.full((env.num_envs, 1), 0.3))[0])
        env.close()
        return np.stack(obs)

    plain = rollout(ke.LearningEnv(CartPoleTask(), num_envs=3, seed=5, num_threads=1), 7)
    numpy = rollout(
        ke.LearningEnv(
            CartPoleTask(), num_envs=np.int64(3), seed=np.uint32(5), num_threads=np.int8(1)
        ),
        np.int64(7),
    )
    assert np.array_equal(plain, numpy)
    env = ke.LearningEnv(CartPoleTask(), num_envs=np.int64(3))
    assert type(env.num_envs) is int and type(env.world.num_envs) is int
    env.close()

    direct = ke.DirectRLEnv(CartPoleTask())
    assert np.array_equal(direct.reset(seed=np.int64(4))[0], direct.reset(seed=4)[0])
    direct.close()

    config = TrainConfig(num_envs=np.int64(8), gamma=np.float32(0.5), actor_hidden_dims=[32])
    assert type(config.num_envs) is int and type(config.gamma) is float
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_reset_seed_is_checked_with_the_same_words():
    env = ke.LearningEnv(CartPoleTask(), num_envs=2)
    seed_words = _message(lambda: ke.LearningEnv(CartPoleTask(), seed=-1))
    assert seed_words == f"seed must be an int >= 0, got -1; {SEED_FIX}"  # one fix everywhere
    assert _message(lambda: env.reset(seed=-1)) == seed_words
    # a list names the entry (kelab/rl/_contract.py check_reset_seed)
    assert _message(lambda: env.reset(seed=[0, -1])) == "reset(seed=[...])[1] " + seed_words[5:]
    env.close()
    direct = ke.DirectRLEnv(CartPoleTask())
    assert _message(lambda: direct.reset(seed=-1)) == seed_words
    assert (
        _message(lambda: direct.reset(seed=1.5)) == f"seed must be an int >= 0, got 1.5; {SEED_FIX}"
    )
    direct.close()
