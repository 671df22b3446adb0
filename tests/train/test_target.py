"""TargetCheck and RLTrainer's evaluation-based best and stop (``eval_every``)."""

from __future__ import annotations

import numpy as np
import pytest
from train_helpers import tiny_config

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import load_checkpoint
from kelab.train.player import RLPlayer
from kelab.train.target import TargetCheck

SHIPPED = "kelab/train/policies/CartPoleTask.json"


def _idle(obs):
    return np.zeros((len(obs), 1), np.float32)


def test_a_good_policy_passes_and_judges_the_evaluate_episodes():
    policy = RLPlayer(SHIPPED, render_mode=None).policy
    check = TargetCheck(CartPoleTask, target=0.95, episodes=30, pre_episodes=5)
    verdict = check(policy)
    assert verdict.passed and verdict.full and verdict.judged == 30
    env = ke.LearningEnv(CartPoleTask(), num_envs=30, seed=1000)
    report = ke.evaluate(env, policy, episodes=30, seed=1000)
    assert verdict.success_rate == report.success_rate
    assert check(policy) == verdict  # the same episodes every call
    check.close()
    env.close()


def test_a_failing_policy_stops_at_the_pre_check():
    check = TargetCheck(CartPoleTask, target=0.95, episodes=30, pre_episodes=5)
    verdict = check(_idle)  # 30 episodes at 95 % allow 1 failure: the 2nd stops it
    assert not verdict.passed and not verdict.full and 2 <= verdict.judged <= 5
    without_pre = TargetCheck(CartPoleTask, target=0.95, episodes=30, pre_episodes=0)
    verdict = without_pre(_idle)  # stops in the step 2 of 30 have failed: 95 % is lost
    assert not verdict.passed and verdict.full and 2 <= verdict.judged < 30
    check.close()
    without_pre.close()


def _sabotaged(policy, copies):
    """``policy``, but full push to the right in the given copies (rows): they fail."""

    def act(obs):
        out = np.array(policy(obs), dtype=np.float32, copy=True)
        out[[c for c in copies if c < len(out)]] = 1.0
        return out

    return act


@pytest.mark.parametrize("layout", ["packed", "isolated"])
def test_the_pre_check_never_changes_the_verdict(layout):
    """The pre-check's episodes are the full evaluation's first ones: it fails a policy
    only when those alone fail more episodes than the full evaluation allows, so its
    verdict is always the one the full evaluation gives (it only saves time)."""
    good = RLPlayer(SHIPPED, render_mode=None).policy
    kw = dict(target=0.9, episodes=30, layout=layout)  # 3 failures allowed
    with_pre = TargetCheck(CartPoleTask, pre_episodes=5, **kw)
    without = TargetCheck(CartPoleTask, pre_episodes=0, **kw)
    one = _sabotaged(good, [0])  # 1 of the pre-check's 5 fails: 29/30 passes
    assert without(one).passed and without(one).success_rate == 29 / 30
    verdict = with_pre(one)
    assert verdict.passed and verdict.full and verdict.success_rate == 29 / 30
    four = _sabotaged(good, [0, 1, 2, 3])  # 4 of the first 5 fail: 26/30 cannot pass
    assert not without(four).passed
    verdict = with_pre(four)
    assert not verdict.passed and not verdict.full and verdict.judged <= 5
    with_pre.close()
    without.close()


def test_bad_arguments():
    message = r"TargetCheck.target must be a finite number in \[0, 1\], got 1.5"
    with pytest.raises(ValueError, match=message):
        TargetCheck(CartPoleTask, target=1.5)
    with pytest.raises(ValueError, match="TargetCheck.episodes must be an int >= 1"):
        TargetCheck(CartPoleTask, target=0.9, episodes=0)
    with pytest.raises(ValueError, match="TrainConfig.eval_every must be an int >= 0"):
        tiny_config(eval_every=-1)


def test_trainer_evaluates_keeps_the_evaluated_best_and_stops_at_target(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    config = tiny_config(eval_every=2, eval_episodes=10, stop_at_target=True, min_iterations=1)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=False) as tr:
        verdicts = []
        calls = []

        class Scripted:  # a check that passes on its 2nd call
            def __call__(self, policy):
                from kelab.train.target import TargetVerdict

                calls.append(tr.iteration)
                ok = len(calls) == 2
                return TargetVerdict(ok, 1.0 if ok else 0.2, 10 if ok else 3, full=ok)

            def close(self):
                pass

        tr._judge.target_check = Scripted()
        stats = tr.train(10, callback=lambda row: verdicts.append(row["eval_success_rate"]))
    assert calls == [2, 4]  # every 2nd iteration
    assert verdicts == [None, 0.2, None, 1.0]
    assert stats["stopped_at_target"] and stats["iterations"] == 4
    assert stats["target_reached_at"] == 4 and stats["eval_success_rate"] == 1.0
    best = load_checkpoint(f"{tmp_path}:best")
    assert best.meta["iteration"] == 4  # the evaluated policy that met the target
    env.close()


def test_trainer_builds_its_own_check(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    config = tiny_config(eval_every=1, eval_episodes=12)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=False) as tr:
        stats = tr.train(1)
        assert 0.0 <= stats["eval_success_rate"] <= 1.0
        assert isinstance(tr._judge.target_check, TargetCheck)
    assert tr._judge.target_check is None  # closed with the trainer
    env.close()


def test_the_trainers_policy_is_the_same_in_train_and_eval_mode(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=tiny_config(), log=False) as tr:
        tr.train(2)  # normaliser statistics and weights away from their start
        obs = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
        in_train_mode = tr.policy(obs)
        tr.alg.actor.eval()
        assert np.array_equal(tr.policy(obs), in_train_mode)
        tr.alg.actor.train()
    env.close()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_a_trainer_judges_in_the_layout_it_trains_in(tmp_path, monkeypatch, layout):
    """The evaluation envs (in the trainer's process and in the evaluation process) use
    ``TrainConfig.layout``: a packed CartPole evaluation steps ~1.8x faster than 100
    isolated spaces, and the verdict is ``ke.evaluate``'s in that layout."""
    policy = RLPlayer(SHIPPED, render_mode=None).policy
    check = TargetCheck(CartPoleTask, target=0.95, episodes=12, pre_episodes=0, layout=layout)
    assert check.layout == layout
    env = ke.LearningEnv(CartPoleTask(), num_envs=12, seed=1000, layout=layout)
    assert check(policy).success_rate == ke.evaluate(env, policy, 12, seed=1000).success_rate
    env.close()
    check.close()
    import kelab.train.target as target_module

    built: list[TargetCheck] = []

    class Recorded(TargetCheck):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(target_module, "TargetCheck", Recorded)
    config = tiny_config(eval_every=1, eval_episodes=4, layout=layout, eval_process=False)
    env = ke.LearningEnv(CartPoleTask(), num_envs=config.num_envs, seed=0, layout=layout)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=False) as tr:
        tr.train(1)
    env.close()
    assert [c.layout for c in built] == [layout]
