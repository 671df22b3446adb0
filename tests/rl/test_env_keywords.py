"""The environments' keywords are declared once (#38 item 6): EnvConfig's fields and the
older aliases, as `kelab.rl.config.EnvKeywords`, which every environment takes as
``**settings`` instead of repeating the list."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import kelab as ke
from kelab.rl.config import ENV_ALIASES, EnvConfig, EnvKeywords
from kelab.rl.ray_env import RayLearningEnv
from kelab.tasks.cartpole import CartPoleTask

ENVS = (ke.LearningEnv, ke.DirectRLEnv, RayLearningEnv)
BY_NAME = {"num_envs", "seed"}  # taken by name (positional in LearningEnv and the Ray env)


def test_the_keywords_are_exactly_the_config_fields_and_the_aliases():
    fields = {f.name for f in dataclasses.fields(EnvConfig)}
    keywords = set(EnvKeywords.__annotations__)
    assert keywords | BY_NAME == fields | set(ENV_ALIASES)
    assert not keywords & BY_NAME
    assert not fields & set(ENV_ALIASES)


@pytest.mark.parametrize("env", ENVS, ids=lambda e: e.__name__)
def test_no_environment_repeats_the_keyword_list(env):
    params = inspect.signature(env.__init__).parameters
    repeated = sorted(set(params) & set(EnvKeywords.__annotations__))
    assert repeated == []
    assert any(p.kind is p.VAR_KEYWORD for p in params.values())
    if env is not ke.DirectRLEnv:
        assert "num_envs" in params
    assert "seed" in params and "config" in params


def test_every_config_field_is_a_keyword_of_every_environment():
    # render_backend was config-only before: the keyword list had drifted from the config
    env = ke.LearningEnv(CartPoleTask(), 2, render_backend="gl", copy_offset=3, seed=4)
    assert (env.config.render_backend, env.config.copy_offset, env.num_envs) == ("gl", 3, 2)
    env.close()
    one = ke.DirectRLEnv(CartPoleTask(), num_threads=1, render_backend="gl", headless=True)
    assert one.config.render_backend == "gl"
    one.close()
    with pytest.raises(TypeError, match=r"unknown environment setting\(s\) \['renderer'\]"):
        ke.LearningEnv(CartPoleTask(), renderer="gl")


def _rollout(env: ke.LearningEnv) -> list[np.ndarray]:
    out = [env.reset(seed=2)[0]]
    for _ in range(5):
        out.append(env.step(np.full((env.num_envs, 1), 0.3, np.float32))[0])
    env.close()
    return out


def test_the_older_positional_form_still_works_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"pass them by keyword \(dt=\.\.\., "):
        old = ke.LearningEnv(CartPoleTask(), 3, 1 / 240, 2, 5.0, True, 7)
    new = ke.LearningEnv(
        CartPoleTask(), 3, dt=1 / 240, physics_steps_per_action=2, env_spacing=5.0, seed=7
    )
    assert old.config == new.config and old.headless
    assert all(np.array_equal(a, b) for a, b in zip(_rollout(old), _rollout(new), strict=True))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="device must be"):
        ke.LearningEnv(CartPoleTask(), 1, None, None, None, None, None, None, None, "cuda")


def test_the_older_positional_form_refuses_what_python_would():
    with pytest.raises(TypeError, match="got multiple values for argument 'dt'"):
        ke.LearningEnv(CartPoleTask(), 1, 0.01, dt=0.02)
    with pytest.raises(TypeError, match="got multiple values for argument 'seed'"):
        ke.LearningEnv(CartPoleTask(), 1, None, None, None, None, 3, seed=4)
    with pytest.raises(TypeError, match="at most 10 positional arguments"):
        ke.LearningEnv(CartPoleTask(), 1, *([None] * 9))
