"""RLTrainer: short real runs (API, statistics, checkpoints, resume, refusals)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from train_helpers import tiny_config

import kelab as ke
from kelab.tasks.ball_to_goal import BallToGoalTask
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import load_checkpoint

STAT_KEYS = {
    "best_reward",
    "last_reward",
    "success_rate",
    "iterations",
    "env_steps",
    "wall_time_s",
    "env_steps_per_s",
    "checkpoints",
}


def test_train_returns_the_summary_and_writes_the_run(trained_run):
    stats, run = trained_run["stats"], trained_run["dir"]
    assert STAT_KEYS <= set(stats)
    assert stats["iterations"] == 3 and stats["env_steps"] == 3 * 16 * 8
    assert stats["wall_time_s"] > 0 and stats["env_steps_per_s"] > 0
    assert 0.0 <= stats["success_rate"] <= 1.0
    assert stats["best_reward"] >= stats["last_reward"]
    assert set(stats["checkpoints"]) == {"best", "latest"}
    for name in ("best", "latest"):
        ckpt = load_checkpoint(f"{run}:{name}")
        assert ckpt.meta["task"] == {
            "id": "kelab/CartPole-v0",
            "class": "kelab.tasks.cartpole:CartPoleTask",
        }
        assert (ckpt.observation_dim, ckpt.action_dim) == (4, 1)
        assert len(ckpt.meta["scene_fingerprint"]) == 64
        assert ckpt.meta["train_config"]["num_envs"] == 16
        assert {"torch", "safetensors", "kelab"} <= set(ckpt.meta["versions"])
        assert any(k.startswith("actor.obs_normalizer.") for k in ckpt.tensors)  # part of it
        assert any(k.startswith("optimizer.state.") for k in ckpt.tensors)
    latest = load_checkpoint(f"{run}:latest").meta
    assert latest["iteration"] == 3 and latest["env_steps"] == 384
    rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    assert list(run.glob("events.out.tfevents.*"))
    assert (run / "training_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(run.glob(".*tmp"))  # no temp files left behind


def test_a_checkpoint_directory_holds_no_pickle(trained_run):
    for path in trained_run["dir"].iterdir():
        data = path.read_bytes()
        assert not data.startswith(b"\x80"), path  # pickle protocol 2+ opcode
        assert not data.startswith(b"PK\x03\x04"), path  # torch.save's zip archive
        assert b"data.pkl" not in data and b"cnumpy" not in data and b"ctorch" not in data
        if path.suffix == ".json":
            json.loads(data)
        elif path.suffix == ".safetensors":
            header = int.from_bytes(data[:8], "little")
            json.loads(data[8 : 8 + header])  # a JSON header, then raw tensor bytes


def test_unknown_algorithm_and_bad_arguments():
    env = ke.LearningEnv(CartPoleTask(), num_envs=2)
    with pytest.raises(ValueError, match=r"unknown algorithm 'SAC'; known algorithms: \['PPO'\]"):
        ke.RLTrainer(env, algorithm="SAC")
    with pytest.raises(ValueError, match="device must be 'cpu'"):
        ke.RLTrainer(env, device="cuda")
    with pytest.raises(ValueError, match="needs a ke.LearningEnv"):
        ke.RLTrainer(ke.DirectRLEnv(CartPoleTask()))
    with pytest.raises(ValueError, match="TrainConfig.gamma must be a finite number in"):
        tiny_config(gamma=1.5)
    env.close()


def test_resume_continues_counters_weights_and_optimizer(trained_run, tmp_path):
    spec = f"{trained_run['dir']}:latest"
    saved = load_checkpoint(spec)
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    trainer = ke.RLTrainer(env, seed=3, run_dir=tmp_path, resume=spec)
    assert (trainer.iteration, trainer.env_steps) == (3, 384)
    assert trainer.config == tiny_config()  # the checkpoint's config
    state = trainer.alg.optimizer.state_dict()["state"]
    for index, entry in state.items():
        for name, value in entry.items():
            assert np.array_equal(value.numpy(), saved.tensors[f"optimizer.state.{index}.{name}"])
    actor = trainer.alg.actor.state_dict()
    for key, value in saved.prefixed("actor").items():
        assert np.array_equal(actor[key].numpy(), value.numpy())
    stats = trainer.train(1)
    assert stats["iterations"] == 4 and stats["env_steps"] == 4 * 128
    assert load_checkpoint(f"{tmp_path}:latest").meta["resumed_from"].endswith("latest.json")
    trainer.close()
    env.close()


def test_resume_refuses_other_dimensions(trained_run, tmp_path):
    env = ke.LearningEnv(BallToGoalTask(), num_envs=2)
    with pytest.raises(ValueError) as err:
        ke.RLTrainer(env, run_dir=tmp_path, resume=f"{trained_run['dir']}:best")
    message = str(err.value)
    assert "observation_dim=4, action_dim=1" in message
    assert "observation_dim=6, action_dim=2" in message
    env.close()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda opt: opt.update(scalars=["x"]), "scalars must be a JSON object, got list"),
        (lambda opt: opt["param_groups"][0].update(lr=1e400), "lr must be"),  # JSON Infinity
        (lambda opt: opt.update(scalars={"0": {"step": -5}}), "0.step must be a whole"),
    ],
)
def test_resume_refuses_a_bad_optimizer_state_in_one_line(trained_run, tmp_path, change, match):
    # the JSON is not covered by the weights' checksum: an edited optimizer state reaches
    # the optimizer, which refuses it as a CheckpointError (it was an AttributeError, or
    # NaN actions an iteration later)
    import shutil

    from kelab.train.checkpoint import CheckpointError

    run = tmp_path / "edited"
    shutil.copytree(trained_run["dir"], run)
    meta = json.loads((run / "latest.json").read_text())
    change(meta["optimizer"])  # a JSON scalar step overrides the tensor's
    (run / "latest.json").write_text(json.dumps(meta))
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with pytest.raises(CheckpointError, match=match) as err:
        ke.RLTrainer(env, seed=3, run_dir=tmp_path / "resumed", resume=f"{run}:latest")
    assert "\n" not in str(err.value) and "latest.json" in str(err.value)
    env.close()


def test_ctrl_c_saves_latest_and_returns(tmp_path):
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)

    def stop(row):
        if row["iteration"] == 2:
            raise KeyboardInterrupt

    with ke.RLTrainer(env, run_dir=tmp_path, config=tiny_config(checkpoint_every=50)) as tr:
        stats = tr.train(10, callback=stop)
    assert stats["interrupted"] and stats["iterations"] == 2
    assert load_checkpoint(f"{tmp_path}:latest").meta["iteration"] == 2
    env.close()


def test_same_seed_same_weights(tmp_path):
    weights = []
    for i in range(2):
        env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=5)
        with ke.RLTrainer(env, seed=5, run_dir=tmp_path / str(i), config=tiny_config()) as tr:
            tr.train(1)
            weights.append({k: v.clone() for k, v in tr.alg.actor.state_dict().items()})
        env.close()
    assert all(np.array_equal(weights[0][k], weights[1][k]) for k in weights[0])
