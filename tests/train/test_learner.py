"""The PPO update in a forked learner process (``overlap_rollout``): exact, and robust."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from train_helpers import tiny_config

import kelab as ke
import kelab.train._fork as _fork
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import load_checkpoint
from kelab.train.learner import LearnerProcess
from kelab.train.ppo import FinalObsPPO, build_algorithm

pytestmark = pytest.mark.skipif(not _fork.can_fork(), reason="needs the fork start method")


def _trainer(path, **changes):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    config = tiny_config(overlap_rollout=True, **changes)
    return env, ke.RLTrainer(env, seed=3, run_dir=path, config=config, log=False)


def _state(trainer):
    alg = trainer.alg
    tensors = {f"actor.{k}": v.clone() for k, v in alg.actor.state_dict().items()}
    tensors.update({f"critic.{k}": v.clone() for k, v in alg.critic.state_dict().items()})
    for i, entry in alg.optimizer.state_dict()["state"].items():
        tensors.update({f"opt.{i}.{k}": v.clone() for k, v in entry.items()})
    return tensors, alg.learning_rate


def test_the_process_and_the_thread_give_the_same_run(tmp_path, monkeypatch):
    runs = {}
    for mode in ("process", "thread"):
        monkeypatch.setattr(_fork, "_ray_driver", lambda mode=mode: mode == "thread")
        env, tr = _trainer(tmp_path / mode, obs_normalization=True)
        with tr:
            rng = torch.get_rng_state()
            seen = []

            def callback(row, tr=tr, seen=seen):
                seen.append(tr._rollouts.updates.learner is not None)

            tr.train(2, callback=callback)
            assert (
                seen == [mode == "process"] * 2 and tr._rollouts.updates.learner is None
            )  # one per call
            with torch.no_grad():  # a change between calls is learnt from
                tr.alg.actor.mlp[0].weight.mul_(0.5)
            stats = tr.train(1)
            # the update draws from its own generator, the rollout from the collector's
            assert torch.equal(rng, torch.get_rng_state())
            runs[mode] = (_state(tr), stats["last_reward"], stats["env_steps"])
            saved = load_checkpoint(f"{tmp_path / mode}:latest")
            # the checkpoint holds the learner's state: networks, normalisers, optimizer
            mine = {f"actor.{k}": v for k, v in tr.alg.actor.state_dict().items()}
            assert all(torch.equal(saved.tensors[k], v) for k, v in mine.items())
            assert saved.meta["learning_rate"] == tr.alg.learning_rate
        env.close()
    (process, lr_p), reward_p, steps_p = runs["process"]
    (thread, lr_t), reward_t, steps_t = runs["thread"]
    assert process.keys() == thread.keys()
    assert any(k.startswith("opt.") for k in process) and any("normalizer" in k for k in process)
    assert all(torch.equal(process[k], thread[k]) for k in process)
    assert (lr_p, reward_p, steps_p) == (lr_t, reward_t, steps_t)


def test_a_resumed_run_is_the_same_in_the_process_and_the_thread(tmp_path, monkeypatch):
    env, tr = _trainer(tmp_path / "first")
    with tr:
        tr.train(2)
    env.close()
    runs = {}
    for mode in ("process", "thread"):
        monkeypatch.setattr(_fork, "_ray_driver", lambda mode=mode: mode == "thread")
        env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
        config = tiny_config(overlap_rollout=True)
        with ke.RLTrainer(
            env, seed=3, run_dir=tmp_path / mode, config=config, log=False,
            resume=f"{tmp_path / 'first'}:latest",
        ) as tr:  # fmt: skip
            tr.train(2)
            runs[mode] = _state(tr)
        env.close()
    (process, lr_p), (thread, lr_t) = runs["process"], runs["thread"]
    assert lr_p == lr_t and all(torch.equal(process[k], thread[k]) for k in process)


def test_more_torch_threads_update_in_a_thread(tmp_path):
    # a forked child cannot use its parent's OpenMP pool: one torch thread only
    env, tr = _trainer(tmp_path, torch_threads=2)
    with tr:
        assert tr._rollouts.updates.learner is None
        assert tr.train(1)["iterations"] == 1
    torch.set_num_threads(1)
    env.close()


def test_an_error_in_the_learner_process_reaches_the_caller(tmp_path, monkeypatch):
    def broken(self):
        raise ValueError("a broken batch")

    monkeypatch.setattr(FinalObsPPO, "update", broken)  # before the fork: the learner's too
    env, tr = _trainer(tmp_path)
    failed = r"update failed in the learner process; its traceback:\n(.|\n)*ValueError: a broken"
    with tr, pytest.raises(RuntimeError, match=failed):
        tr.train(2)
    env.close()


def test_a_learner_that_dies_is_named_with_the_fix(tmp_path):
    env, tr = _trainer(tmp_path)

    def kill_it(row):
        tr._rollouts.updates.learner._proc.kill()

    with tr:
        gone = r"learner process \(pid \d+\) ended.*overlap_rollout"
        with pytest.raises(RuntimeError, match=gone):
            tr.train(3, callback=kill_it)
        assert tr.train(1)["iterations"] == 2  # the next call forks a new one
    env.close()


def test_each_call_ends_its_learner(tmp_path):
    env, tr = _trainer(tmp_path)
    procs = []
    with tr:
        tr.train(2, callback=lambda row: procs.append(tr._rollouts.updates.learner._proc))
    assert procs[0] is procs[1] and not procs[0].is_alive() and procs[0].exitcode == 0
    env.close()


def test_a_storage_the_learner_does_not_share_is_refused():
    alg = build_algorithm(tiny_config(), 4, 1, 16)
    shared = alg.storage
    learner = LearnerProcess(alg, [shared])
    try:
        alg.storage = build_algorithm(tiny_config(), 4, 1, 16).storage
        with pytest.raises(RuntimeError, match="not one of the storages"):
            learner.start()
        assert learner.result() == {}  # nothing pending: no update ran
        assert not learner.pending
    finally:
        learner.close()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")  # a zombie ran its course
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_trainer_ends_its_helper_processes(tmp_path):
    script = textwrap.dedent(
        f"""
        import multiprocessing, sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from train_helpers import tiny_config
        import kelab as ke
        from kelab.tasks.cartpole import CartPoleTask
        config = tiny_config(overlap_rollout=True, eval_every=1, eval_process=True,
                             eval_episodes=4)
        env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
        tr = ke.RLTrainer(env, seed=0, run_dir={str(tmp_path)!r}, config=config, log=False)
        def callback(row):  # killed in here, the learner process alive
            print(*[p.pid for p in multiprocessing.active_children()], flush=True)
            time.sleep(120)
        tr.train(3, callback=callback)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        children = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(children) == 2  # the evaluation and the learner processes
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not all(_gone(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in children)
    finally:
        proc.kill()
        proc.stdout.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_trainers_come_and_go_without_leaving_processes_or_descriptors(tmp_path):
    import gc
    import multiprocessing

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def one(i):
        env, tr = _trainer(tmp_path / str(i))
        with tr:
            tr.train(2)
        env.close()

    one(0)  # first use: imports, caches
    gc.collect()
    before = open_fds()
    for i in range(1, 6):
        one(i)
    gc.collect()
    assert multiprocessing.active_children() == []
    assert open_fds() <= before  # the shared storages' descriptors went with them


def test_a_trainer_dropped_without_close_ends_its_evaluation_process(tmp_path):
    import gc

    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    config = tiny_config(eval_every=1, eval_process=True, eval_episodes=4)
    tr = ke.RLTrainer(env, seed=0, run_dir=tmp_path, config=config, log=False)
    tr.train(1)
    proc = tr._judge.eval_process._proc
    assert proc.is_alive()
    del tr
    gc.collect()
    proc.join(timeout=10)
    assert not proc.is_alive()
    env.close()
