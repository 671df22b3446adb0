"""Both environments and ``gym.make_vec`` take timing the same way (issue #10)."""

from __future__ import annotations

import gymnasium
import pytest

import kelab as ke
from kelab.tasks import TASK_IDS
from kelab.tasks.registry import task_class


@pytest.mark.parametrize("env_id", sorted(TASK_IDS))
def test_every_builtin_task_runs_at_its_own_timing_all_three_ways(env_id):
    cls = task_class(TASK_IDS[env_id])
    want = cls.sim_dt * cls.decimation
    learning = ke.LearningEnv(cls(), num_envs=2)
    direct = ke.DirectRLEnv(cls())
    vec = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point")
    try:
        for env in (learning, direct, vec):
            assert env.step_dt == pytest.approx(want, rel=0, abs=1e-15), env
            assert env.timing.sim_dt == cls.sim_dt and env.timing.decimation == cls.decimation
            assert env.max_episode_length == learning.max_episode_length
    finally:
        learning.close()
        direct.close()
        vec.close()


def test_overrides_apply_the_same_way_to_both_environments():
    timing = ke.SimulationTimingConfig(sim_dt=1 / 240, decimation=4)
    from kelab.tasks.cartpole import CartPoleTask

    for make in (
        lambda **kw: ke.LearningEnv(CartPoleTask(), num_envs=1, **kw),
        lambda **kw: ke.DirectRLEnv(CartPoleTask(), **kw),
    ):
        env = make(timing=timing)
        assert env.step_dt == pytest.approx(4 / 240)
        assert env.max_episode_length == round(5.0 / (4 / 240))  # the task's episode length
        env.close()
        env = make(dt=1 / 60, physics_steps_per_action=1)
        assert (env.timing.sim_dt, env.timing.decimation) == (1 / 60, 1)
        env.close()
        env = make(timing=timing, physics_steps_per_action=2)  # overrides beat timing
        assert (env.timing.sim_dt, env.timing.decimation) == (1 / 240, 2)
        env.close()
        # named as passed (not as the config's field)
        with pytest.raises(ValueError, match=r"^physics_steps_per_action must be an int in"):
            make(physics_steps_per_action=0)
        with pytest.raises(ValueError, match=r"^dt must be a finite .* pass dt=1/120$"):
            make(dt=-1.0)
        with pytest.raises(ValueError, match="timing must be"):
            make(timing=(1 / 120, 2))


def test_headless_follows_render_mode():
    from kelab.tasks.cartpole import CartPoleTask

    env = ke.LearningEnv(CartPoleTask(), render_mode="rgb_array")
    assert env.headless is True
    env.close()
    with pytest.raises(ValueError, match="headless=True"):
        ke.LearningEnv(CartPoleTask(), render_mode="human", headless=True)
