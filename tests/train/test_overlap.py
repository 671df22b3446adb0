"""RLTrainer with ``overlap_rollout``: the update in a process (or a thread), the next
rollout meanwhile."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch
from train_helpers import tiny_config

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import load_checkpoint

ROLLOUT = 16 * 8  # tiny_config: 16 copies x 8 steps


def _trainer(tmp_path, seed=3, **changes):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=seed)
    config = tiny_config(overlap_rollout=True, **changes)
    return env, ke.RLTrainer(env, seed=seed, run_dir=tmp_path, config=config, log=False)


def _weights(trainer):
    return {k: v.clone() for k, v in trainer.alg.actor.state_dict().items()}


def test_same_seed_same_run_across_calls(tmp_path):
    runs = []
    for i in range(2):
        env, tr = _trainer(tmp_path / str(i))
        with tr:
            tr.train(2)
            stats = tr.train(2)
            runs.append((_weights(tr), stats["last_reward"]))
        env.close()
    (w0, r0), (w1, r1) = runs
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    assert r0 == r1 or (np.isnan(r0) and np.isnan(r1))
    env, tr = _trainer(tmp_path / "one call")
    with tr:  # the rollout collected beside the last update is the next call's first
        stats = tr.train(4)
        assert all(torch.equal(w0[k], v) for k, v in _weights(tr).items())
        assert stats["last_reward"] == r0 or (np.isnan(r0) and np.isnan(stats["last_reward"]))
    env.close()


def test_overlap_learns_from_every_rollout_it_collects(tmp_path):
    env, tr = _trainer(tmp_path / "a")
    with tr:
        seen = {}
        stats = tr.train(3, callback=lambda row: seen.update({row["iteration"]: _weights(tr)}))
        # each update learnt from one rollout, none was collected for nothing
        assert stats["iterations"] == 3 and stats["env_steps"] == 3 * ROLLOUT
        # the collector still holds the policy from before the last update: the next
        # call's first rollout acts with it, as it would have inside one longer call
        collector = tr._rollouts.collector.actor.state_dict()
        assert all(torch.equal(v, collector[k]) for k, v in seen[2].items())
        assert any(not torch.equal(v, collector[k]) for k, v in seen[3].items())
    env.close()
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    plain = ke.RLTrainer(env, seed=3, run_dir=tmp_path / "b", config=tiny_config(), log=False)
    with plain:
        plain.train(3)
        # another noise stream and one iteration of policy lag: another run
        learnt, overlapped = _weights(plain), tr.alg.actor.state_dict()
        assert any(not torch.equal(v, overlapped[k]) for k, v in learnt.items())
    env.close()


def test_a_rollout_collected_before_a_stop_is_learnt_from_next(tmp_path):
    env, tr = _trainer(tmp_path)
    with tr:
        stats = tr.train(5, callback=lambda row: row["iteration"] == 2)
        assert stats["stopped_by_callback"] and stats["iterations"] == 2
        assert stats["env_steps"] == 3 * ROLLOUT  # the third rollout is waiting
        stats = tr.train(1)  # learns from it (its last iteration collects nothing)
        assert stats["iterations"] == 3 and stats["env_steps"] == 3 * ROLLOUT
    env.close()


def test_an_error_in_the_update_thread_reaches_the_caller(tmp_path, monkeypatch):
    import kelab.train._fork as _fork

    monkeypatch.setattr(_fork, "_ray_driver", lambda: True)  # no fork: the thread
    env, tr = _trainer(tmp_path)
    assert tr._rollouts.updates.learner is None

    def broken():
        raise RuntimeError("update failed")

    tr.alg.update = broken
    with tr, pytest.raises(RuntimeError, match="update failed"):
        tr.train(3)
    env.close()


def test_ctrl_c_during_the_overlapped_rollout_waits_for_the_update(tmp_path):
    env, tr = _trainer(tmp_path, checkpoint_every=50)
    steps = {"n": 0}
    step = tr.vec.step

    def interrupting_step(actions):
        steps["n"] += 1
        if steps["n"] == 8 + 3:  # inside the rollout that overlaps the first update
            raise KeyboardInterrupt
        return step(actions)

    tr.vec.step = interrupting_step
    with tr:
        stats = tr.train(4)
    # the update finished before the save, and counts: the saved actor is the learner's
    assert stats["interrupted"] and stats["iterations"] == 1
    latest = load_checkpoint(f"{tmp_path}:latest")
    assert latest.meta["iteration"] == 1
    saved = latest.prefixed("actor")
    assert all(torch.equal(saved[k], v) for k, v in tr.alg.actor.state_dict().items())
    env.close()


def _at_step(tr, n, action):
    """Run ``action()`` inside the env's ``n``-th step; the steps are counted in ``["n"]``."""
    count = {"n": 0}
    step = tr.vec.step

    def stepping(actions):
        count["n"] += 1
        if count["n"] == n:
            action()
        return step(actions)

    tr.vec.step = stepping
    return count


def _sigint(after_s: float = 0.0) -> None:
    """A real SIGINT to this process, now or from a timer ``after_s`` seconds later."""
    import threading

    if after_s:
        threading.Timer(after_s, os.kill, (os.getpid(), signal.SIGINT)).start()
    else:
        os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_stops_at_the_next_safe_point_and_training_goes_on_after(tmp_path):
    env, tr = _trainer(tmp_path, checkpoint_every=50)
    count = _at_step(tr, 8 + 3, _sigint)  # inside the rollout beside the first update
    with tr:
        stats = tr.train(4)
        assert stats["interrupted"] and stats["iterations"] == 1
        assert count["n"] == 8 + 3  # it stopped before the next env step
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        stats = tr.train(2)  # the next call forks a fresh learner and goes on
        assert not stats["interrupted"] and stats["iterations"] == 3
    env.close()


def test_a_second_ctrl_c_interrupts_at_once(tmp_path):
    env, tr = _trainer(tmp_path, checkpoint_every=50)
    after = []

    def callback(row):
        os.kill(os.getpid(), signal.SIGINT)  # noted: stops after this iteration
        after.append("one")
        os.kill(os.getpid(), signal.SIGINT)  # raises here
        after.append("two")

    with tr:
        stats = tr.train(4, callback=callback)
        assert stats["interrupted"] and stats["iterations"] == 1 and after == ["one"]
        assert tr.train(1)["iterations"] == 2  # and the trainer goes on
    env.close()


@pytest.mark.parametrize("where", ["process", "thread"])
def test_ctrl_c_twice_while_the_update_ends_still_saves(tmp_path, monkeypatch, where):
    import kelab.train._fork as _fork

    monkeypatch.setattr(_fork, "_ray_driver", lambda: where == "thread")
    # a slow update, so the second Ctrl-C lands while the trainer waits for it
    env, tr = _trainer(tmp_path, checkpoint_every=50, num_learning_epochs=400)
    before = _weights(tr)
    # inside the rollout beside the first update: stop at the next step, then again
    _at_step(tr, 8 + 3, lambda: (_sigint(), _sigint(0.05)))
    with tr:
        stats = tr.train(4)
    assert stats["interrupted"]
    latest = load_checkpoint(f"{tmp_path}:latest")
    saved = latest.prefixed("actor")
    if where == "process":  # dropped: the state before it is saved
        assert stats["iterations"] == latest.meta["iteration"] == 0
        assert all(torch.equal(saved[k], v) for k, v in before.items())
    else:  # a thread cannot be dropped: it ended, and counts
        assert stats["iterations"] == latest.meta["iteration"] == 1
    assert all(torch.equal(saved[k], v) for k, v in tr.alg.actor.state_dict().items())
    env.close()


def test_an_update_that_ends_after_ctrl_c_gets_its_metrics_row(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    config = tiny_config(overlap_rollout=True, checkpoint_every=50)
    tr = ke.RLTrainer(env, seed=3, run_dir=tmp_path, config=config)  # log=True
    _at_step(tr, 3 * 8 + 3, _sigint)  # inside the rollout beside the third update
    with tr:
        stats = tr.train(6)
    assert stats["interrupted"] and stats["iterations"] == 3
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert [int(r.split(",")[0]) for r in rows[1:]] == [1, 2, 3]
    assert load_checkpoint(f"{tmp_path}:latest").meta["iteration"] == 3
    env.close()


def test_ctrl_c_twice_while_the_loop_waits_for_the_update_drops_it(tmp_path):
    # a slow update: the rollout beside it ends first, and the loop waits for it
    env, tr = _trainer(tmp_path, checkpoint_every=50, num_learning_epochs=400)
    before = _weights(tr)
    # at the last step of the rollout beside the first update: both land in the wait
    _at_step(tr, 2 * 8, lambda: (_sigint(0.05), _sigint(0.1)))
    with tr:
        stats = tr.train(4)
        assert stats["interrupted"] and stats["iterations"] == 0  # dropped, not waited for
        latest = load_checkpoint(f"{tmp_path}:latest").prefixed("actor")
        assert all(torch.equal(latest[k], v) for k, v in before.items())
        assert tr.train(1)["iterations"] == 1  # and the trainer goes on
    env.close()


def test_ctrl_c_twice_while_waiting_for_a_verdict_leaves_the_trainer_whole(tmp_path, monkeypatch):
    import time

    from kelab.train.target import TargetCheck

    judge = TargetCheck.__call__
    judged = []

    def slow(self, policy):  # in the evaluation process, forked after this patch
        if not judged:  # the first verdict, the one iteration 2 waits for (the others
            time.sleep(1.0)  # need not keep the loop waiting: ~1.7 s less a run)
        judged.append(True)
        return judge(self, policy)

    monkeypatch.setattr(TargetCheck, "__call__", slow)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    config = tiny_config(eval_every=1, eval_process=True, eval_episodes=4)
    tr = ke.RLTrainer(env, seed=3, run_dir=tmp_path, config=config)

    def callback(row):
        if row["iteration"] == 1:  # iteration 2 then waits for this one's verdict
            _sigint(0.2)
            _sigint(0.3)

    with tr:
        stats = tr.train(5, callback=callback)
        assert stats["interrupted"] and stats["iterations"] == 2
        stats = tr.train(2)  # the verdict still owed is read, and training goes on
        assert not stats["interrupted"] and stats["iterations"] == 4
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    # iteration 4's verdict, read when train() returned: its row again, with it
    assert [int(r.split(",")[0]) for r in rows[1:]] == [1, 2, 3, 4, 4]
    env.close()


def test_an_update_that_fails_after_ctrl_c_is_named_in_a_warning(tmp_path, monkeypatch):
    from kelab.train.ppo import FinalObsPPO

    def broken(self):
        raise ValueError("a broken batch")

    monkeypatch.setattr(FinalObsPPO, "update", broken)  # before the fork: the learner's too
    env, tr = _trainer(tmp_path, checkpoint_every=50)
    _at_step(tr, 8 + 3, _sigint)  # inside the rollout beside the first (failing) update
    with tr, pytest.warns(RuntimeWarning, match="update running when training stopped fail"):
        stats = tr.train(4)
    assert stats["interrupted"] and stats["iterations"] == 0
    assert load_checkpoint(f"{tmp_path}:latest").meta["iteration"] == 0
    env.close()


def test_stop_request_counts_presses_holds_and_releases():
    from kelab.train._ctrl_c import StopRequest, uninterrupted

    with StopRequest() as stop:
        _sigint()  # the first only asks
        assert stop.requested and stop.presses == 1
        with pytest.raises(KeyboardInterrupt):
            _sigint()  # the second interrupts at once
        with uninterrupted():
            _sigint()  # ...but not a block that must happen whole
        stop.hold()
        _sigint()  # nor anything after hold()
        assert stop.presses == 4
        stop.release()
        with pytest.raises(KeyboardInterrupt):
            _sigint()
        with pytest.raises(KeyboardInterrupt):
            stop.check()  # a safe point acts on the request
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
