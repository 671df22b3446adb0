"""The run directory: never overwritten, the resumed best kept, the logs of a whole run."""

from __future__ import annotations

import csv
import errno
import os
import signal
import time

import pytest
from train_helpers import metrics_row, tiny_config

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import CheckpointError, load_checkpoint
from kelab.train.curve import write_training_curve
from kelab.train.runlog import METRICS, RunLog


def _trainer(run_dir, **kwargs):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    kwargs.setdefault("config", None if "resume" in kwargs else tiny_config())
    return env, ke.RLTrainer(env, seed=3, run_dir=run_dir, **kwargs)


def _one_iteration(tmp_path, iterations: int = 1):
    """A run of ``iterations`` tiny iterations in ``tmp_path / "run"``, its trainer closed."""
    run = tmp_path / "run"
    env, tr = _trainer(run)
    stats = tr.train(iterations)
    tr.close()
    return run, env, stats


def test_a_run_dir_holding_a_run_is_refused_unless_that_run_is_resumed(trained_run, tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with pytest.raises(ValueError, match=r"already holds a run \(latest.json, best.json"):
        ke.RLTrainer(env, run_dir=trained_run["dir"], config=tiny_config())
    other = tmp_path / "other"
    env2, tr = _trainer(other)
    tr.train(1)
    tr.close()
    with pytest.raises(ValueError, match="continue it with resume="):  # another run's latest
        ke.RLTrainer(env, run_dir=other, resume=f"{trained_run['dir']}:latest")
    tr = ke.RLTrainer(env, run_dir=other, resume=f"{other}:latest")  # its own: continues
    assert tr.run_dir == other
    tr.close()
    env.close()
    env2.close()


def test_resuming_in_place_removes_the_temp_files_of_a_killed_save(tmp_path):
    # a trainer SIGKILLed mid-save leaves ".latest-<hash>.safetensors.<random>.tmp"; the
    # run's next trainer deletes such files once they are old, never a save in progress
    run, env, _ = _one_iteration(tmp_path)
    stale = [run / ".latest-0123abcd.safetensors.x1y2z3.tmp", run / ".metrics.csv.a1b2.tmp"]
    fresh = run / ".best.json.q8w1e.tmp"
    foreign = run / ".notes.txt.k3k3.tmp"  # not a file a trainer writes: left alone
    for f in (*stale, fresh, foreign):
        f.write_bytes(b"half written")
    for f in (*stale, foreign):
        os.utime(f, (time.time() - 3600,) * 2)
    tr = ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest")
    assert [f.exists() for f in stale] == [False, False]
    assert fresh.exists() and foreign.exists()
    tr.close()
    env.close()


def test_a_run_dir_another_trainer_holds_is_refused_as_in_use(tmp_path):
    # the claim is an OS lock held while a trainer is open: refused to every other
    # trainer (in this process too), gone when its trainer closes or its process ends
    import subprocess
    import sys

    run = tmp_path / "run"
    env, tr = _trainer(run)
    claim = run / ".kelab-run"
    assert f"pid={os.getpid()}" in claim.read_text()
    tr.train(1)
    with pytest.raises(ValueError, match=r"is in use by a trainer that is still running"):
        ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest")
    tr.close()
    assert "pid=" not in claim.read_text()  # released: the time it was taken stays
    # another process holds it (as a trainer there would), then ends without releasing
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(claim)!r}, os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "os.ftruncate(fd, 0); os.pwrite(fd, f'T pid={os.getpid()} host=h\\n'.encode(), 0)\n"
         "print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"\(claimed T, process {holder.pid} on host h"):
            ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest")
    finally:
        holder.kill()  # SIGKILL: no release, the OS drops the lock
        holder.wait()
        holder.stdout.close()
    tr = ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest")
    tr.close()
    # a constructor that fails after claiming holds nothing
    with pytest.raises(CheckpointError):
        ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest",
                     config=tiny_config(actor_hidden_dims=(8,)))  # fmt: skip
    tr = ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest")
    tr.close()
    env.close()


def test_a_resumed_run_goes_on_from_its_recent_episodes(tmp_path):
    # the window of recent episodes (mean return, success rate, best's score) is in the
    # checkpoint: a resume does not start it again from the episodes that end first
    import json

    run, env, stats = _one_iteration(tmp_path, iterations=3)
    tr = ke.RLTrainer(env, seed=3, run_dir=run, resume=f"{run}:latest")
    assert tr._episodes.total == stats["episodes"] > 0
    assert tr._episodes.mean_return == pytest.approx(stats["last_reward"])
    assert tr._episodes.success_rate == stats["success_rate"]
    saved = (tr._episodes.returns.copy(), tr._episodes.total)
    assert tr.train(1)["episodes"] >= saved[1]  # counts on
    tr.close()
    from kelab.train.policy import export_policy  # training statistics stay out of it

    shipped = load_checkpoint(export_policy(f"{run}:latest", tmp_path / "ship", "P"))
    assert "recent_episodes" in load_checkpoint(f"{run}:latest").meta
    assert "recent_episodes" not in shipped.meta
    # a damaged record: a warning, and the statistics start afresh
    latest = json.loads((run / "latest.json").read_text())
    latest["recent_episodes"] = {"returns": [10**400], "successes": None, "total": 1}
    (run / "latest.json").write_text(json.dumps(latest))
    with pytest.warns(UserWarning, match="'recent_episodes' must be .*recent episodes start"):
        tr = ke.RLTrainer(env, seed=3, run_dir=run, resume=f"{run}:latest")
    assert tr._episodes.total == 0 and not tr._episodes.returns
    tr.close()
    env.close()


def test_a_run_dir_whose_claim_cannot_be_written_is_a_clear_error(tmp_path, monkeypatch):
    from kelab.train import rundir

    real_open = os.open

    def denied(path, *args, **kwargs):
        if str(path).endswith(".kelab-run"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(rundir.os, "open", denied)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    message = r"its .kelab-run cannot be opened for writing \(Permission denied\); choose"
    with pytest.raises(ValueError, match=message):
        ke.RLTrainer(env, run_dir=tmp_path / "run", config=tiny_config())
    env.close()


def test_default_run_dirs_never_collide(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    dirs = []
    for _ in range(2):
        with ke.RLTrainer(env, config=tiny_config()) as tr:
            tr.train(1)
            dirs.append(tr.run_dir)
    assert dirs[0] != dirs[1]  # the same second gets a "-2" suffix
    assert all(d.parent == tmp_path / "runs" / "CartPoleTask" for d in dirs)
    env.close()


def test_resuming_in_place_keeps_the_judged_best(tmp_path):
    run = tmp_path / "run"
    env, tr = _trainer(run, config=tiny_config(eval_every=2, eval_episodes=4))
    tr.train(4)
    tr.close()
    env.close()
    best_before = load_checkpoint(f"{run}:best")
    env, tr = _trainer(run, resume=f"{run}:latest")
    assert tr.checkpoints["best"] == str(run / "best.json")
    tr.best_score = (2.0, 0.0)  # nothing this session can beat: best must stay as it was
    tr.train(1)
    tr.close()
    env.close()
    best_after = load_checkpoint(f"{run}:best")
    assert best_after.meta["weights"] == best_before.meta["weights"]
    assert best_after.meta["iteration"] == best_before.meta["iteration"]


def test_resuming_into_a_new_dir_copies_the_best(trained_run, tmp_path):
    env, tr = _trainer(tmp_path / "new", resume=f"{trained_run['dir']}:latest")
    copied = load_checkpoint(f"{tmp_path / 'new'}:best")
    source = load_checkpoint(f"{trained_run['dir']}:best")
    assert copied.meta["iteration"] == source.meta["iteration"]
    assert copied.meta["weights"]["sha256"] == source.meta["weights"]["sha256"]
    assert tr.best_score is not None
    tr.close()
    env.close()


def test_resuming_a_lone_latest_drops_the_score_it_cannot_back(trained_run, tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    for path in trained_run["dir"].glob("latest*"):
        (lone / path.name).write_bytes(path.read_bytes())
    env, tr = _trainer(tmp_path / "new", resume=f"{lone}:latest")
    assert tr.best_score is None and tr.checkpoints["best"] is None
    tr.train(1)
    assert load_checkpoint(f"{tmp_path / 'new'}:best").meta["iteration"] == 4
    tr.close()
    env.close()


def test_a_policy_only_checkpoint_cannot_be_resumed(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    shipped = os.path.join(os.path.dirname(ke.__file__), "train", "policies", "CartPoleTask.json")
    with pytest.raises(ValueError, match="policy-only checkpoint"):
        ke.RLTrainer(env, run_dir=tmp_path, resume=shipped)
    env.close()


def test_a_config_num_envs_other_than_the_env_warns(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with pytest.warns(UserWarning, match="num_envs=32 differs from the env's 16 copies"):
        tr = ke.RLTrainer(env, run_dir=tmp_path, config=tiny_config(num_envs=32))
    assert tr.config.num_envs == 16
    tr.close()
    env.close()


def test_metrics_record_the_evaluations_and_the_best_rule(tmp_path):
    env, tr = _trainer(tmp_path, config=tiny_config(eval_every=2, eval_episodes=4))
    tr.train(6)
    tr.close()
    env.close()
    rows = list(csv.DictReader((tmp_path / "metrics.csv").read_text().splitlines()))
    assert tuple(rows[0]) == METRICS
    judged = [(r["iteration"], r["eval_iteration"], r["eval_success_rate"]) for r in rows]
    evaluated = [j for j in judged if j[1]]
    assert evaluated and all(0.0 <= float(rate) <= 1.0 for _, _, rate in evaluated)
    assert all(int(it) >= int(of) for it, of, _ in evaluated)  # on this or an earlier one
    assert (
        "deterministic policy's evaluations"
        in load_checkpoint(f"{tmp_path}:best").meta["best_rule"]
    )


def test_an_older_metrics_file_is_rewritten_under_the_new_columns(tmp_path):
    old = ("iteration", "env_steps", "mean_return", "success_rate")
    with open(tmp_path / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(old)
        w.writerow((1, 64, 1.5, 0.25))
    log = RunLog(tmp_path, enabled=True)
    log.open()
    log.record(metrics_row(iteration=2, env_steps=128, mean_return=2.0, success_rate=0.5))
    log.close()
    rows = list(csv.DictReader((tmp_path / "metrics.csv").read_text().splitlines()))
    assert tuple(rows[0]) == METRICS
    assert [(r["iteration"], r["env_steps"], r["mean_return"]) for r in rows] == [
        ("1", "64", "1.5"),
        ("2", "128", "2"),
    ]
    assert [h[0] for h in log.history] == [64, 128]


def test_the_curve_draws_evaluations(tmp_path):
    import pygame

    history = [(i * 100, float(i), i / 10) for i in range(10)]
    plain = write_training_curve(tmp_path / "a.png", history)
    marked = write_training_curve(tmp_path / "b.png", history, [(500, 1.0), (900, 0.5)])
    a, b = pygame.image.load(str(plain)), pygame.image.load(str(marked))
    green = [(x, y) for x in range(b.get_width()) for y in range(b.get_height())
             if b.get_at((x, y))[:3] == (30, 150, 70)]  # fmt: skip
    assert green and not [1 for x, y in green if a.get_at((x, y))[:3] == (30, 150, 70)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png"]  # no side file


def test_sigterm_to_the_group_leaves_the_evaluation_process_to_the_trainer(capfd):
    from kelab.train.eval_process import EvalProcess
    from kelab.train.ppo import build_actor

    def trainer_handler(signum, frame):  # what `kelab train` installs, inherited by the fork
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, trainer_handler)
    try:
        proc = EvalProcess(CartPoleTask, tiny_config(), 4, 1, 0.95, episodes=4, pre_episodes=0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    time.sleep(0.5)  # let the child reach its loop
    child = proc._proc
    # as systemd or `kill -- -PGID` do: the trainer stops at a safe point and ends the
    # process; the process itself goes on serving until then
    os.kill(child.pid, signal.SIGTERM)
    time.sleep(0.5)
    assert child.is_alive()
    proc.submit(build_actor(tiny_config(), 4, 1))
    assert not proc.result().passed  # an untrained policy, judged
    proc.close()
    assert child.exitcode == 0
    assert "Traceback" not in capfd.readouterr().err


def test_a_damaged_best_beside_the_resumed_latest_warns_and_starts_afresh(trained_run, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for path in trained_run["dir"].iterdir():
        if path.is_file():
            (src / path.name).write_bytes(path.read_bytes())
    (src / "best.json").write_text("{ damaged")
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with pytest.warns(UserWarning, match="best checkpoint cannot be copied"):
        tr = ke.RLTrainer(env, seed=3, run_dir=tmp_path / "new", resume=f"{src}:latest")
    assert tr.best_score is None
    tr.close()
    env.close()


def test_trainers_built_before_either_trains_never_share_a_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    a = ke.RLTrainer(env, config=tiny_config())
    b = ke.RLTrainer(env, config=tiny_config())  # the same second, nothing trained yet
    assert a.run_dir != b.run_dir and a.run_dir.is_dir() and b.run_dir.is_dir()
    with pytest.raises(ValueError, match="is in use by a trainer that is still running"):
        ke.RLTrainer(env, run_dir=a.run_dir, config=tiny_config())
    a.close()  # it kept nothing (never trained): its claim withdrawn, its folder gone
    assert not a.run_dir.exists()
    b.train(1)  # b logged an iteration: closed, its directory stays claimed
    b.close()
    with pytest.raises(ValueError, match="already holds a run"):
        ke.RLTrainer(env, run_dir=b.run_dir, config=tiny_config())
    env.close()


def test_resuming_an_older_checkpoint_in_place_is_refused(tmp_path):
    run = tmp_path / "run"
    env, tr = _trainer(run, config=tiny_config(checkpoint_every=1))
    tr.train(3)
    tr.close()
    env.close()
    older = load_checkpoint(f"{run}:latest")
    older_path = run / "older.json"  # an earlier state saved beside latest
    env, tr = _trainer(tmp_path / "other", resume=f"{run}:latest")
    tr.iteration = 1
    tr._write("older", dict(older.tensors), {**older.meta, "iteration": 1})
    tr.close()
    env.close()
    (tmp_path / "other" / "older.json").replace(older_path)
    for f in (tmp_path / "other").glob("older-*.safetensors"):
        f.replace(run / f.name)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with pytest.raises(ValueError, match=r"has a later latest \(iteration 3\)"):
        ke.RLTrainer(env, run_dir=run, resume=str(older_path))
    env.close()


def test_an_inf_in_an_integer_column_is_skipped_not_a_crash(tmp_path):
    header = ",".join(METRICS)
    row = ["1", "128", "0.1", "5", "0", "inf"] + [""] * (len(METRICS) - 6)
    (tmp_path / "metrics.csv").write_text(f"{header}\n{','.join(row)}\n")
    log = RunLog(tmp_path, enabled=True)
    log.open()
    log.close()
    assert [h[0] for h in log.history] == [128]


def test_a_migrated_metrics_file_keeps_the_original(tmp_path):
    old = "iteration,env_steps,mean_return\n1,64,1.5\n"
    (tmp_path / "metrics.csv").write_text(old)
    log = RunLog(tmp_path, enabled=True)
    log.open()
    log.close()
    assert (tmp_path / "metrics.old.csv").read_text() == old


def test_heap_reuse_is_scoped_and_nests():
    from kelab.train import _malloc

    with _malloc.heap_reuse() as outer:
        with _malloc.heap_reuse() as inner:
            assert inner == outer
        assert _malloc._depth == 1
    assert _malloc._depth == 0
    assert outer is (_malloc._glibc() is not None)


# ------------------------------------------------- no write through a symbolic link (#25.2)
def _victim(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious bytes\n")
    return victim


@pytest.mark.parametrize("name", [".kelab-run", "metrics.csv", "latest.json", "training_curve.png"])
def test_a_link_where_the_trainer_writes_refuses_the_run_dir_untouched(tmp_path, name):
    # a symlinked .kelab-run was opened O_CREAT and truncated (the victim's bytes replaced
    # by the claim) before the run dir was refused; a dangling metrics.csv link was
    # appended through, creating its target
    victim = _victim(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(victim)
    (run / "notes.txt").write_text("mine")
    before = sorted(os.listdir(run))
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    try:
        with pytest.raises(ValueError, match=rf"symbolic link where the trainer writes \({name}"):
            ke.RLTrainer(env, run_dir=run, config=tiny_config())
    finally:
        env.close()
    assert victim.read_bytes() == b"precious bytes\n"
    assert sorted(os.listdir(run)) == before and os.readlink(run / name) == str(victim)
    dangling = tmp_path / "not-yet.csv"
    (run / name).unlink()
    (run / name).symlink_to(dangling)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    try:
        with pytest.raises(ValueError, match="symbolic link"):
            ke.RLTrainer(env, run_dir=run, config=tiny_config())
    finally:
        env.close()
    assert not dangling.exists()


def test_the_claim_never_opens_a_link_even_past_the_check(tmp_path, monkeypatch):
    # the link appears between the check and the claim (a race): O_NOFOLLOW refuses it
    from kelab.train import rundir

    victim = _victim(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(
        rundir, "_refuse_links", lambda path: (path / ".kelab-run").symlink_to(victim)
    )
    with pytest.raises(ValueError, match=r"its .kelab-run is a symbolic link"):
        rundir.claim_run_dir(run, "CartPoleTask", None)
    assert victim.read_bytes() == b"precious bytes\n"
    assert os.readlink(run / ".kelab-run") == str(victim)


def test_a_refused_run_dir_keeps_its_claim_file_as_it_was(trained_run, tmp_path):
    # refused because it holds a run: the claim was rewritten (stamped) before the check
    claim = trained_run["dir"] / ".kelab-run"
    before = claim.read_bytes()
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    try:
        with pytest.raises(ValueError, match="already holds a run"):
            ke.RLTrainer(env, run_dir=trained_run["dir"], config=tiny_config())
        # a new folder with a run's file but no claim: refused, and no claim left behind
        other = tmp_path / "other"
        other.mkdir()
        (other / "metrics.csv").write_text("iteration\n")
        with pytest.raises(ValueError, match="already holds the start of a run"):
            ke.RLTrainer(env, run_dir=other, config=tiny_config())
    finally:
        env.close()
    assert claim.read_bytes() == before
    assert sorted(os.listdir(other)) == ["metrics.csv"]


def test_run_files_are_never_written_through_a_link(tmp_path):
    from kelab._files import atomic_write_bytes, open_nofollow

    victim = _victim(tmp_path)
    log = tmp_path / "log"
    log.mkdir()
    logged = tmp_path / "logged.csv"  # a file that reads as a run log: it was appended to
    logged.write_text(",".join(METRICS) + "\n")
    (log / "metrics.csv").symlink_to(logged)
    with pytest.raises(OSError) as exc:
        RunLog(log, enabled=True).open()
    assert exc.value.errno == errno.ELOOP
    assert logged.read_text() == ",".join(METRICS) + "\n"
    (log / "metrics.csv").unlink()
    (log / "metrics.csv").symlink_to(victim)
    with pytest.raises(OSError):
        open_nofollow(log / "metrics.csv")
    # a checkpoint, curve or settings file: renamed over the link, the target untouched
    (log / "best.json").symlink_to(victim)
    atomic_write_bytes(log / "best.json", b"{}")
    assert not os.path.islink(log / "best.json") and (log / "best.json").read_bytes() == b"{}"
    assert victim.read_bytes() == b"precious bytes\n"


def test_a_deeply_nested_latest_json_beside_the_resumed_checkpoint_is_unreadable_not_a_crash(
    tmp_path,
):
    # _iteration_of read latest.json with a bare json.loads: 100k '[' raised RecursionError
    run, env, _ = _one_iteration(tmp_path)
    (run / "latest.json").write_text("[" * 100_000)
    tr = ke.RLTrainer(env, run_dir=run, resume=f"{run}:best")  # continues this run
    assert tr.run_dir == run
    tr.close()
    env.close()


class _BrokenRewards(CartPoleTask):
    """CartPole whose reward raises: a user's task with a bug in its first step."""

    def get_rewards(self):
        raise RuntimeError("a bug in the task's reward")


def test_a_refused_config_leaves_the_run_dir_unclaimed(tmp_path, monkeypatch):
    # the trial (2026-12-06): a convolution that does not fit the observation was refused
    # after the run dir was claimed, and the next (valid) command was refused with "already
    # holds the start of a run that saved no checkpoint"
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    bad = tiny_config(cnn_channels=(4,), cnn_kernels=(3,), cnn_strides=(1,))
    made, found = tmp_path / "new" / "run", tmp_path / "found"
    found.mkdir()
    (found / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    try:
        for run_dir in (made, found, None):
            with pytest.raises(ValueError, match="cnn_channels needs an image observation"):
                ke.RLTrainer(env, seed=3, run_dir=run_dir, config=bad)
        assert not (tmp_path / "new").exists()  # the folders made for it, gone
        assert sorted(os.listdir(found)) == ["notes.txt"]  # a folder found: as it was
        assert not (tmp_path / "runs").exists()  # run_dir=None's runs/<Task>/<time>
        for run_dir in (made, found):  # the valid command is accepted
            ke.RLTrainer(env, seed=3, run_dir=run_dir, config=tiny_config()).close()
    finally:
        env.close()


def test_a_run_that_fails_before_its_first_record_leaves_the_run_dir_as_found(tmp_path):
    run = tmp_path / "run"
    env = ke.LearningEnv(_BrokenRewards(), num_envs=16, seed=3)
    try:
        trainer = ke.RLTrainer(env, seed=3, run_dir=run, config=tiny_config())
        with pytest.raises(RuntimeError, match="a bug in the task's reward"):
            trainer.train(2)
        trainer.close()
    finally:
        env.close()
    assert not run.exists()  # no claim, no header-only metrics.csv, no TensorBoard file
    run, env, stats = _one_iteration(tmp_path)  # the fixed task trains there
    env.close()
    assert stats["iterations"] == 1 and (run / "latest.json").exists()


def test_a_resume_refused_after_the_claim_puts_the_claim_file_back(tmp_path):
    run, env, _ = _one_iteration(tmp_path)
    claim = run / ".kelab-run"
    before, names = claim.read_bytes(), sorted(os.listdir(run))
    try:
        with pytest.raises(CheckpointError):  # refused in the constructor, after claiming
            ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest",
                         config=tiny_config(actor_hidden_dims=(8,)))  # fmt: skip
    finally:
        env.close()
    assert claim.read_bytes() == before and sorted(os.listdir(run)) == names
