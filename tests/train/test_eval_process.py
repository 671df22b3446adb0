"""EvalProcess and ``TrainConfig.eval_process``: evaluations in a forked process."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import numpy as np
import pytest
import torch
from train_helpers import tiny_config

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import load_checkpoint
from kelab.train.config import TrainConfig
from kelab.train.eval_process import EvalProcess, can_fork
from kelab.train.policy import CheckpointPolicy
from kelab.train.ppo import build_actor, deterministic_actions
from kelab.train.target import TargetCheck

SHIPPED = "kelab/train/policies/CartPoleTask.json"

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method"
)


def _shipped() -> CheckpointPolicy:
    return CheckpointPolicy(load_checkpoint(SHIPPED))


def test_verdicts_are_the_in_process_checks():
    good = _shipped()
    bad = build_actor(good.config, 4, 1)  # untrained
    # the process judges in the layout the config trains in
    here = TargetCheck(
        CartPoleTask, target=0.95, episodes=30, pre_episodes=5, layout=good.config.layout
    )
    there = EvalProcess(CartPoleTask, good.config, 4, 1, target=0.95, episodes=30, pre_episodes=5)
    try:
        for actor in (good.actor, bad, good.actor):
            there.submit(actor)
            assert there.pending

            def policy(obs, actor=actor):
                with torch.inference_mode():
                    x = torch.from_numpy(np.asarray(obs, np.float32))
                    return deterministic_actions(actor, x).numpy().clip(-1, 1)

            expected = here(policy)
            with torch.no_grad():  # changed after submit: the process judges the sent copy
                for p in actor.parameters():
                    p.add_(1.0)
            assert there.result() == expected
            with torch.no_grad():
                for p in actor.parameters():
                    p.sub_(1.0)
        assert not there.pending
    finally:
        here.close()
        there.close()


def test_misuse_and_a_dead_process_are_named():
    config = _shipped().config
    check = EvalProcess(CartPoleTask, config, 4, 1, target=0.95, episodes=4)
    with pytest.raises(RuntimeError, match="nothing was submitted"):
        check.result()
    actor = build_actor(config, 4, 1)
    check.submit(actor)
    with pytest.raises(RuntimeError, match="read the previous verdict"):
        check.submit(actor)
    check.result()
    os.kill(check._proc.pid, signal.SIGKILL)
    check._proc.join(5.0)
    with pytest.raises(RuntimeError, match=r"evaluation process \(pid \d+\) ended unexpectedly"):
        check.submit(actor)
        check.result()
    check.close()

    class NoRule(CartPoleTask):
        success_rule = None

    with pytest.raises(ValueError, match="NoRule has none"):
        EvalProcess(NoRule, config, 4, 1, target=0.9)


def test_close_stops_a_running_check():
    config = _shipped().config
    check = EvalProcess(CartPoleTask, config, 4, 1, target=0.95, episodes=100)
    check.submit(_shipped().actor)  # a passing policy: the longest check there is
    proc = check._proc
    check.close()
    assert not proc.is_alive()
    check.close()  # twice is fine


def _run(tmp_path, name, **changes):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    config = tiny_config(eval_every=2, eval_episodes=10, **changes)
    rows = []
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path / name, config=config, log=False) as tr:
        assert (tr._judge.eval_process is not None) == config.eval_process
        stats = tr.train(8, callback=rows.append)
        evaluations = tr.evaluations
    env.close()
    return rows, stats, evaluations


def test_the_trainer_reads_each_verdict_one_period_later(tmp_path):
    here, _, n_here = _run(tmp_path, "here")
    there, _, n_there = _run(tmp_path, "there", eval_process=True)
    rates_here = {r["iteration"]: r["eval_success_rate"] for r in here}
    for row in there:
        if row["iteration"] in (4, 6, 8):
            assert row["eval_iteration"] == row["iteration"] - 2
            assert row["eval_success_rate"] == rates_here[row["iteration"] - 2]
        else:
            assert row["eval_success_rate"] is None and row["eval_iteration"] is None
    # training itself is the same: evaluating elsewhere changes no draw
    assert [r["mean_return"] for r in here] == [r["mean_return"] for r in there]
    assert n_here == n_there == 4  # iteration 8's verdict is read when train() ends


def _passing(stop_at_target: bool) -> tuple[CheckpointPolicy, TrainConfig, ke.LearningEnv]:
    """The shipped (passing) policy, a config judging it every 2 iterations in the eval
    process with a learning rate too small to change it, and an env for it."""
    shipped = _shipped()
    config = shipped.config.replace(
        num_envs=16, num_steps_per_env=8, schedule="fixed", learning_rate=1e-6,
        eval_every=2, eval_episodes=20, stop_at_target=stop_at_target, min_iterations=1,
        eval_process=True, checkpoint_every=100,
    )  # fmt: skip
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0, layout=config.layout)
    return shipped, config, env


def test_a_passing_verdict_stops_the_run_with_the_judged_policy_as_best(tmp_path):
    shipped, config, env = _passing(stop_at_target=True)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=False) as tr:
        tr.alg.actor.load_state_dict(shipped.actor.state_dict())  # a policy that passes
        judged = {}

        def remember(row):
            if row["iteration"] == 2:
                judged.update({k: v.clone() for k, v in tr.alg.actor.state_dict().items()})

        stats = tr.train(20, callback=remember)
    assert stats["stopped_at_target"] and stats["iterations"] == 4
    assert stats["eval_success_rate"] == 1.0
    best = load_checkpoint(f"{tmp_path}:best")
    assert best.meta["iteration"] == 2  # the policy that was judged, not iteration 4's
    for key, value in best.prefixed("actor").items():
        assert torch.equal(value, judged[key]), key
    env.close()


def test_other_threads_do_not_stop_the_fork():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)  # e.g. a logger's or a user's thread
    thread.start()
    try:
        assert can_fork()
        config = _shipped().config
        check = EvalProcess(CartPoleTask, config, 4, 1, target=0.95, episodes=4)
        check.submit(build_actor(config, 4, 1))
        assert not check.result().passed
        check.close()
    finally:
        stop.set()
        thread.join()


def test_a_trainer_that_cannot_fork_warns_and_evaluates_itself(tmp_path, monkeypatch):
    import kelab.train._fork as _fork

    monkeypatch.setattr(_fork, "_ray_driver", lambda: True)  # as in a Ray driver
    assert not can_fork()
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    config = tiny_config(eval_every=1, eval_episodes=10, eval_process=True)
    with pytest.warns(RuntimeWarning, match="evaluating in the training process instead"):
        tr = ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=False)
    with tr:
        assert tr._judge.eval_process is None
        stats = tr.train(1)
        assert isinstance(tr._judge.target_check, TargetCheck)
        assert stats["eval_success_rate"] is not None
    with pytest.raises(RuntimeError, match="cannot fork here"):
        EvalProcess(CartPoleTask, config, 4, 1, target=0.95)
    env.close()


def test_a_verdict_read_after_the_last_iteration_is_reported(tmp_path):
    """A passing verdict still out when the loop ends (eval_process) meets the target and
    is logged like one read during training (a new user's trial found it in best only)."""
    import csv

    shipped, config, env = _passing(stop_at_target=False)
    with ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=True) as tr:
        tr.alg.actor.load_state_dict(shipped.actor.state_dict())  # a policy that passes
        stats = tr.train(3)  # iteration 2 is submitted; its verdict is read after 3
    env.close()
    assert stats["target_reached_at"] == 3  # read after the last iteration
    assert stats["eval_success_rate"] == 1.0 and stats["eval_episodes"] == 20
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["iteration"] for r in rows] == ["1", "2", "3", "3"]
    assert rows[2]["eval_success_rate"] == ""  # the iteration's own row: nothing came
    assert rows[3]["eval_iteration"] == "2" and float(rows[3]["eval_success_rate"]) == 1.0
    assert rows[3]["mean_return"] == rows[2]["mean_return"]
