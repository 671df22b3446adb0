"""Algorithms behind an interface (#26): the runner calls only :class:`Algorithm`'s members,
and a new algorithm is one module plus one entry in ``ALGORITHMS``."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest
from train_helpers import tiny_config

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.algorithm import Algorithm, Overlappable, build_algorithm
from kelab.train.checkpoint import load_checkpoint
from kelab.train.config import ALGORITHMS
from kelab.train.ppo import FinalObsPPO
from kelab.train.records import IterationRow
from kelab.train.runlog import METRICS


def test_ppo_implements_the_interface_the_runner_calls() -> None:
    alg = build_algorithm("PPO", tiny_config(), 4, 1, 16, "cpu")
    assert isinstance(alg, FinalObsPPO)
    assert isinstance(alg, Algorithm) and isinstance(alg, Overlappable)


def test_an_unknown_algorithm_lists_the_registry() -> None:
    with pytest.raises(ValueError, match=r"unknown algorithm 'SAC'; known algorithms: \['PPO'\]"):
        build_algorithm("SAC", tiny_config(), 4, 1, 16, "cpu")


class _Counting:
    """A second algorithm: PPO, counting the interface calls the runner makes."""

    def __init__(self, inner: FinalObsPPO) -> None:
        self._inner = inner
        self.calls: dict[str, int] = {}
        self.actor = inner.actor

    @property
    def learning_rate(self) -> float:
        return self._inner.learning_rate

    def __getattr__(self, name: str):  # only the interface's members are ever asked for
        if name not in _MEMBERS:
            raise AttributeError(f"the runner reached past the interface: {name}")
        method = getattr(self._inner, name)

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return counted


_MEMBERS = {
    "train_mode",
    "start_rollout",
    "act",
    "process_env_step",
    "compute_returns",
    "update",
    "action_std",
    "deterministic_actions",
    "training_state",
    "load_training_state",
}


def _build_counting(config, obs_dim, act_dim, num_envs, device):
    from kelab.train.ppo import build_algorithm as build_ppo

    return _Counting(build_ppo(config, obs_dim, act_dim, num_envs, device))


def test_a_new_algorithm_is_one_module_and_one_registry_entry(tmp_path, monkeypatch) -> None:
    module = types.ModuleType("my_algorithm")
    module.build = _build_counting
    monkeypatch.setitem(sys.modules, "my_algorithm", module)
    monkeypatch.setitem(ALGORITHMS, "Counting", "my_algorithm:build")
    config = tiny_config(eval_every=1, eval_episodes=2)
    env = ke.LearningEnv(CartPoleTask(), num_envs=config.num_envs, seed=0)
    with ke.RLTrainer(env, "Counting", seed=0, run_dir=tmp_path, config=config, log=False) as tr:
        stats = tr.train(2)
        calls = dict(tr.alg.calls)
    env.close()
    steps = 2 * config.num_steps_per_env
    assert calls["act"] == calls["process_env_step"] == steps
    assert calls["update"] == calls["compute_returns"] == calls["start_rollout"] == 2
    assert calls["deterministic_actions"] >= 2  # the evaluations judged its policy
    assert calls["training_state"] >= 2  # best and latest
    assert stats["iterations"] == 2
    assert load_checkpoint(tmp_path / "latest.json").meta["algorithm"] == "Counting"


def test_overlap_needs_an_overlappable_algorithm(tmp_path, monkeypatch) -> None:
    module = types.ModuleType("my_algorithm")
    module.build = _build_counting
    monkeypatch.setitem(sys.modules, "my_algorithm", module)
    monkeypatch.setitem(ALGORITHMS, "Counting", "my_algorithm:build")
    config = tiny_config(overlap_rollout=True)
    env = ke.LearningEnv(CartPoleTask(), num_envs=config.num_envs, seed=0)
    with pytest.raises(ValueError, match="overlap_rollout needs an algorithm with a shared"):
        ke.RLTrainer(env, "Counting", seed=0, run_dir=tmp_path, config=config, log=False)
    env.close()


def test_the_row_record_is_the_metrics_columns() -> None:
    assert tuple(f.name for f in dataclasses.fields(IterationRow)) == METRICS
