"""TargetCheck and RLTrainer's evaluation-based best and stop (``eval_every``)."""

from __future__ import annotations

import csv

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


def _half(policy):
    """``policy`` in the even copies; the odd ones pushed off: it balances half of them."""
    return lambda obs: _sabotaged(policy, range(1, len(obs), 2))(obs)


@pytest.mark.parametrize("pre_episodes", [10, 0])
def test_a_check_that_stops_early_gives_the_most_its_rate_can_be(pre_episodes):
    """A policy that succeeds in half its episodes by design: the check stops at its
    failures, which end first (a success runs to the time limit). Its successes over the
    episodes judged were 0 (kelab train printed "eval 0.00" for a 42 % policy); the
    verdict now says it stopped early and gives the most the rate can be, which the
    evaluation of those episodes run to the end never exceeds."""
    good = RLPlayer(SHIPPED, render_mode=None).policy
    check = TargetCheck(CartPoleTask, target=0.95, episodes=30, pre_episodes=pre_episodes)
    verdict = check(_half(good))
    stage = pre_episodes or 30
    assert not verdict.passed and verdict.full == (pre_episodes == 0)
    assert verdict.stopped_early and verdict.episodes == stage and verdict.judged < stage
    assert verdict.successes == 0  # only failures had ended: the old figure, 0 / judged
    env = ke.LearningEnv(CartPoleTask(), num_envs=stage, seed=1000)
    measured = ke.evaluate(env, _half(good), episodes=stage, seed=1000).success_rate
    assert measured == 0.5 and 0.5 <= verdict.success_rate < 1.0
    assert verdict.success_rate == 1 - verdict.failed / stage
    check.close()
    env.close()


def test_a_verdict_refuses_counts_that_cannot_be():
    from kelab.train.target import TargetVerdict

    done = TargetVerdict(passed=True, judged=30, failed=1, episodes=30, full=True)
    assert not done.stopped_early and done.success_rate == 29 / 30 == done.successes / 30
    for judged, failed, episodes in ((5, 6, 10), (11, 0, 10), (0, 0, 0), (3, -1, 10)):
        with pytest.raises(ValueError, match="TargetVerdict must have 0 <= failed <= judged"):
            TargetVerdict(False, judged, failed, episodes, full=True)


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
                if len(calls) == 2:  # the full evaluation, all 10 succeeding
                    return TargetVerdict(passed=True, judged=10, failed=0, episodes=10, full=True)
                # the pre-check, stopped once 3 of its 5 had failed: at most 40 %
                return TargetVerdict(passed=False, judged=3, failed=3, episodes=5, full=False)

            def close(self):
                pass

        tr._judge.target_check = Scripted()
        stats = tr.train(10, callback=lambda row: verdicts.append(row["eval_success_rate"]))
    assert calls == [2, 4]  # every 2nd iteration
    assert verdicts == [None, 0.4, None, 1.0]
    assert stats["stopped_at_target"] and stats["iterations"] == 4
    assert stats["target_reached_at"] == 4 and stats["eval_success_rate"] == 1.0
    best = load_checkpoint(f"{tmp_path}:best")
    assert best.meta["iteration"] == 4  # the evaluated policy that met the target
    env.close()


def test_a_check_that_stopped_early_is_logged_and_shown_as_a_bound(tmp_path, capsys):
    """metrics.csv, the progress line, TensorBoard, the curve and the summary say which
    evaluated rate is the most it can be (the check stopped early) and which is measured;
    best ranks the stopped one by the least it can be (the successes it saw)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from kelab.cli.train import evaluation_line
    from kelab.train.curve import read_run
    from kelab.train.target import TargetVerdict

    verdicts = iter([  # the pre-check stopped once 6 of its 10 had failed; then measured
        TargetVerdict(passed=False, judged=6, failed=6, episodes=10, full=False),
        TargetVerdict(passed=False, judged=10, failed=5, episodes=10, full=True),
    ])  # fmt: skip

    class Scripted:
        def __call__(self, policy):
            return next(verdicts)

        def close(self):
            pass

    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    config = tiny_config(eval_every=2, eval_episodes=10, checkpoint_every=1)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config) as tr:
        tr._judge.target_check = Scripted()
        first = tr.train(2)
        stats = tr.train(2)
    env.close()
    rows = list(csv.DictReader((tmp_path / "metrics.csv").read_text().splitlines()))
    judged = [
        (r["iteration"], r["eval_success_rate"], r["eval_episodes"], r["eval_stopped_early"])
        for r in rows
    ]
    assert judged == [("1", "", "", ""), ("2", "0.4", "10", "1"), ("3", "", "", ""),
                      ("4", "0.5", "10", "0")]  # fmt: skip
    err = capsys.readouterr().err
    assert "eval <=0.40" in err and "eval 0.50" in err and "eval 0.00" not in err
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [e.value for e in events.Scalars("train/eval_success_rate_at_most")] == [
        pytest.approx(0.4)
    ]
    assert [e.value for e in events.Scalars("train/eval_success_rate")] == [0.5]
    curve = read_run(tmp_path)
    assert list(zip(curve.eval_rates, curve.eval_at_most, strict=True)) == [
        (0.5, False),
        (0.4, True),
    ]
    assert first["eval_stopped_early"] and first["eval_episodes"] == 10
    assert evaluation_line(first) == (
        "last evaluation (deterministic policy): success rate at most 40% of its 10 episodes "
        "(the check stopped once the target was out of reach)"
    )
    assert stats["eval_success_rate"] == 0.5 and stats["eval_stopped_early"] is False
    best = load_checkpoint(f"{tmp_path}:best").meta
    assert best["iteration"] == 4 and best["best_score"][0] == 0.5  # the 2nd: 0 seen of 10


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
