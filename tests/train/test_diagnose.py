"""The trainer says what a researcher looks for when a run does not learn (#39 item 4).

Each finding of `kelab.train.diagnose` is tested on crafted metrics rows, then on a real
run of a crafted task that shows it: the action noise collapsing, the value loss
exploding, the deterministic policy doing worse than the noisy one. Also: a config whose
layout differs from the env's is warned, as ``num_envs`` is.
"""

from __future__ import annotations

import io
import math
import sys
import warnings

import numpy as np
import pytest
from train_helpers import metrics_row, tiny_config

import kelab as ke
from kelab.train.diagnose import EXPLOSION_FLOOR, NOISE_FLOOR, TrainingWarning, TrainingWatch

assert NOISE_FLOOR == 0.1  # the rows below are written around it


def row(iteration: int, **fields) -> object:
    base = dict(
        iteration=iteration, env_steps=0, wall_time_s=0.0, mean_return=0.0, success_rate=0.0,
        episodes=1, env_steps_per_s=1.0, collect_steps_per_s=1.0, learning_rate=1e-3,
        action_std=0.5, value_loss=1.0, surrogate_loss=0.0, entropy=0.0,
    )  # fmt: skip
    return metrics_row(**{**base, **fields})


# ---------------------------------------------------------------- crafted rows
def test_the_noise_collapse_is_said_once_and_only_short_of_the_target():
    watch = TrainingWatch(tiny_config(init_noise_std=1.0, success_target=0.9))
    assert watch.observe(row(1, action_std=0.2, success_rate=0.1)) == []  # still exploring
    assert watch.observe(row(2, action_std=0.05, success_rate=0.95)) == []  # target met
    assert watch.observe(row(3, action_std=0.05, success_rate=None)) == []  # no rate yet
    (found,) = watch.observe(row(4, action_std=0.07, success_rate=0.3))
    assert found.kind == "noise collapsed" and found.iteration == 4
    assert "policy std 0.070" in found.message and "30%" in found.message
    assert "entropy_coef" in found.message and "When training does not reach" in found.message
    assert watch.observe(row(5, action_std=0.05, success_rate=0.3)) == []  # once


def test_a_noise_chosen_small_is_no_collapse():
    watch = TrainingWatch(tiny_config(init_noise_std=0.1))
    # under the floor, but not under half the noise it started with: not a collapse
    assert watch.observe(row(1, action_std=0.08, success_rate=0.0)) == []
    assert watch.observe(row(2, action_std=0.04, success_rate=0.0))[0].kind == "noise collapsed"


def test_with_evaluations_the_collapse_is_judged_on_them():
    watch = TrainingWatch(tiny_config(eval_every=2, success_target=0.9))
    # the training rate (with noise) is low, but the deterministic policy meets the target
    assert watch.observe(row(2, action_std=0.05, success_rate=0.0, eval_success_rate=0.95)) == []
    assert watch.observe(row(3, action_std=0.05, success_rate=0.0)) == []
    found = watch.observe(row(4, action_std=0.05, success_rate=0.6, eval_success_rate=0.5))
    assert [f.kind for f in found] == ["noise collapsed"]
    assert "last evaluation" in found[0].message


def test_the_value_loss_explodes_when_it_jumps_far_above_its_median_twice():
    watch = TrainingWatch(tiny_config())
    losses = [2.0, 3.0, 1.0, 2.0, 2.5, 1.5 * EXPLOSION_FLOOR, 1e5, 2.0, 1e5, 1e6]
    found = {i: watch.observe(row(i, value_loss=v)) for i, v in enumerate(losses, 1)}
    # 150 is over the floor but under 100x the median (2); 1e5 once is a jump
    assert not any(found[i] for i in range(1, 10))
    (finding,) = found[10]
    assert finding.kind == "value loss exploded" and "1e+06" in finding.message


def test_a_step_in_a_small_value_loss_is_no_explosion():
    watch = TrainingWatch(tiny_config())
    for i, v in enumerate([1e-4] * 5 + [0.5, 2.0, 1.5], 1):  # a sparse reward found at last
        assert watch.observe(row(i, value_loss=v)) == []


def test_a_value_loss_that_is_not_finite_is_said_at_once():
    watch = TrainingWatch(tiny_config())
    (found,) = watch.observe(row(1, value_loss=math.nan))
    assert found.kind == "value loss exploded" and "not finite" in found.message


def test_an_evaluation_far_below_the_training_episodes_is_said():
    watch = TrainingWatch(tiny_config(eval_every=3))
    assert watch.observe(row(3, success_rate=0.6, eval_success_rate=0.4, eval_iteration=3)) == []
    assert watch.observe(row(4, success_rate=0.9)) == []  # no verdict this iteration
    assert watch.observe(row(6, success_rate=0.1, eval_success_rate=0.9)) == []  # the other way
    (found,) = watch.observe(row(9, success_rate=0.8, eval_success_rate=0.2, eval_iteration=6))
    assert found.kind == "evaluation below training"
    assert "20%" in found.message and "80%" in found.message and "iteration 6" in found.message


def test_a_check_that_stopped_early_is_compared_by_the_most_it_can_be():
    """A check stops once the target is out of reach, when mostly failures have ended:
    its successes over the episodes judged were 0 for a policy that succeeds in 42 %,
    and the watch said "succeeded in 0% ... the noise does part of the work" to a run
    whose training episodes succeeded in 31 %. Now it compares the most the rate can be,
    and says so when even that is far below."""
    from kelab.train.target import TargetVerdict

    stopped = TargetVerdict(passed=False, judged=6, failed=6, episodes=10, full=False)
    assert stopped.successes == 0 and stopped.success_rate == pytest.approx(0.4)
    watch = TrainingWatch(tiny_config(eval_every=5, success_target=0.95))
    assert watch.observe(row(5, success_rate=0.31).with_verdict(stopped, 5)) == []
    assert watch.observe(row(10, success_rate=0.69).with_verdict(stopped, 10)) == []
    (found,) = watch.observe(row(15, success_rate=0.71).with_verdict(stopped, 15))
    assert found.kind == "evaluation below training"
    assert "at most 40% of its 10 evaluation episodes" in found.message, found.message
    assert "succeeded in 0%" not in found.message and "71%" in found.message
    # a measured rate is said as measured
    measured = TargetVerdict(passed=False, judged=20, failed=14, episodes=20, full=True)
    (found,) = TrainingWatch(tiny_config(eval_every=5)).observe(
        row(5, success_rate=0.8).with_verdict(measured, 5)
    )
    assert "succeeded in 30% of its 20 evaluation episodes," in found.message


def test_the_noise_collapse_says_a_stopped_check_gives_a_bound():
    from kelab.train.target import TargetVerdict

    stopped = TargetVerdict(passed=False, judged=6, failed=6, episodes=100, full=True)
    watch = TrainingWatch(tiny_config(eval_every=2, success_target=0.95, init_noise_std=1.0))
    (found,) = watch.observe(row(2, action_std=0.05).with_verdict(stopped, 2))
    assert found.kind == "noise collapsed"
    assert "last evaluation succeeded in at most 94% of its 100 evaluation episodes" in (
        found.message
    )


# ---------------------------------------------------------------- real runs of crafted tasks
class Knob(ke.Task):
    """One number to set: no physics, short episodes; rewards and success crafted below."""

    observation_dim, action_dim, episode_length_s = 1, 1, 0.1  # 6 steps

    def build(self, scene):
        scene.add(ke.Terrain.plane(), at="/")

    def on_start(self, env):
        self.terminations = ke.TerminationSet(self)
        self.action = np.zeros(self.num_envs)
        self.peak = np.zeros(self.num_envs)  # the largest |action| of the episode
        self.steps = 0

    def apply_actions(self, actions):
        self.action = actions[:, 0].astype(np.float64)
        self.peak = np.maximum(self.peak, np.abs(self.action))
        self.steps += 1

    def get_observations(self):
        return np.zeros((self.num_envs, 1), np.float32)

    def get_rewards(self):
        return -10.0 * self.action**2

    def get_dones(self):
        return self.terminations.check()

    def reset_idx(self, env_ids):
        self.peak[env_ids] = 0.0


@ke.success
def never(task):
    return np.zeros(task.num_envs, dtype=bool)


@ke.success
def pushed_hard(task):
    """Only the noise pushes the knob past 0.9: a policy whose mean is 0 never does."""
    return task.peak > 0.9


class Quiet(Knob):
    success_rule = never  # -10 a^2: the noise is all cost, so PPO shrinks it


class Inflating(Knob):
    success_rule = never

    def get_rewards(self):  # the returns grow 10x every iteration (8 steps)
        return np.full(self.num_envs, 10.0 ** (self.steps // 8))


class Jiggled(Knob):
    success_rule = pushed_hard

    def get_rewards(self):
        return np.zeros(self.num_envs)


def _train(task_class, iterations, tmp_path, **changes):
    config = tiny_config(**changes)
    env = ke.LearningEnv(task_class(), num_envs=config.num_envs, seed=0)
    with pytest.warns(TrainingWarning) as caught:
        with ke.RLTrainer(env, seed=0, config=config, run_dir=tmp_path, log=False) as trainer:
            trainer.train(iterations)
    env.close()
    return trainer.findings, [str(w.message) for w in caught if w.category is TrainingWarning]


def test_a_run_whose_noise_collapses_says_so(tmp_path):
    findings, messages = _train(
        Quiet, 40, tmp_path, init_noise_std=1.0, learning_rate=1e-2, schedule="fixed",
        entropy_coef=0.0,
    )  # fmt: skip
    assert [f.kind for f in findings] == ["noise collapsed"]
    assert messages == [findings[0].message] and "policy std 0.0" in messages[0]
    assert findings[0].iteration < 40


def test_a_run_whose_value_loss_explodes_says_so(tmp_path):
    findings, messages = _train(Inflating, 10, tmp_path)
    assert [f.kind for f in findings] == ["value loss exploded"]
    assert findings[0].iteration <= 8 and messages == [findings[0].message]


def test_a_run_whose_deterministic_policy_does_worse_says_so(tmp_path):
    findings, messages = _train(
        Jiggled, 2, tmp_path, init_noise_std=1.0, eval_every=1, eval_episodes=10,
        eval_process=False,
    )  # fmt: skip
    assert [f.kind for f in findings] == ["evaluation below training"]
    assert findings[0].iteration == 1 and "0% of its 10 evaluation episodes" in messages[0]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_finding_starts_a_line_of_its_own_after_the_live_progress_line(tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)  # where train()'s progress line goes
    monkeypatch.setenv("COLUMNS", "150")
    config = tiny_config()
    env = ke.LearningEnv(Inflating(), num_envs=config.num_envs, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("always", TrainingWarning)
        warnings.showwarning = lambda message, *args, **kw: terminal.write(f"said: {message}\n")
        with ke.RLTrainer(env, seed=0, config=config, run_dir=tmp_path, log=False) as trainer:
            trainer.train(10)
    env.close()
    lines = terminal.getvalue().split("\n")
    said = [line for line in lines if "said: iteration" in line]
    assert len(said) == 1 and said[0].startswith("said: iteration"), lines
    assert lines[lines.index(said[0]) - 1].startswith("\r[")  # the bar's line, ended


def test_a_healthy_run_says_nothing(tmp_path):
    from kelab.tasks.cartpole import CartPoleTask

    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        with ke.RLTrainer(env, seed=0, config=tiny_config(), run_dir=tmp_path, log=False) as tr:
            tr.train(3)
    env.close()
    assert tr.findings == []


# ---------------------------------------------------------------- the layout, as num_envs
def test_a_config_layout_other_than_the_envs_is_warned_and_the_env_decides(tmp_path):
    from kelab.tasks.cartpole import CartPoleTask
    from kelab.train.checkpoint import load_checkpoint

    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)  # isolated, the default
    config = tiny_config(layout="packed")
    with pytest.warns(UserWarning, match=r"TrainConfig.layout='packed' differs from the env's"):
        trainer = ke.RLTrainer(env, seed=0, config=config, run_dir=tmp_path, log=False)
    with trainer:
        assert trainer.config.layout == "isolated"  # what it trains and evaluates in
        trainer.train(1)
    env.close()
    assert load_checkpoint(f"{tmp_path}:latest").meta["train_config"]["layout"] == "isolated"
    packed = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0, layout="packed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same layout: nothing to say
        ke.RLTrainer(packed, config=config, run_dir=tmp_path / "b", log=False).close()
    packed.close()
