"""kelab export: an ONNX graph that acts as RLPlayer.act does, with its metadata; bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from train_helpers import shipped_task_ids

import kelab as ke
from kelab.cli import main
from kelab.tasks import TASK_IDS
from kelab.tasks.registry import task_class
from kelab.train.checkpoint import save_checkpoint
from kelab.train.config import TrainConfig
from kelab.train.export import export_onnx
from kelab.train.shipped import shipped_policy


def _run(path, obs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["actions"], {"observations": obs})[0]


def _observations(env_id: str, player: ke.RLPlayer) -> np.ndarray:
    rng = np.random.default_rng(3)
    env = ke.LearningEnv(task_class(TASK_IDS[env_id])(), num_envs=8, seed=5)
    obs, _ = env.reset(seed=5)
    if obs.dtype == np.uint8:  # an image task: random images as the env gives them
        random = rng.integers(0, 256, (256, *obs.shape[1:]), dtype=np.uint8)
    else:
        random = rng.normal(0.0, 3.0, (256, player.observation_dim)).astype(np.float32)
    seen = [random, obs]
    for _ in range(40):
        obs, *_ = env.step(player.act(obs))
        seen.append(obs)
    env.close()
    return np.concatenate(seen)


@pytest.mark.parametrize("env_id", shipped_task_ids())
def test_the_graph_gives_the_players_actions_for_every_shipped_policy(tmp_path, env_id):
    spec = shipped_policy(TASK_IDS[env_id])
    out = tmp_path / "policy.onnx"
    assert main(["export", env_id, "--out", str(out)]) == 0  # default: the shipped policy
    player = ke.RLPlayer(spec, render_mode=None)
    obs = _observations(env_id, player)
    actions = _run(out, obs)
    assert actions.shape == (len(obs), player.action_dim) and actions.dtype == np.float32
    assert np.abs(actions - player.act(obs)).max() <= 1e-4
    assert np.abs(actions).max() <= 1.0
    meta = {p.key: p.value for p in onnx.load(out).metadata_props}
    recorded = json.loads(spec.read_text())
    assert meta["kelab.task"] == env_id
    assert meta["kelab.observation_dim"] == str(player.observation_dim)
    assert meta["kelab.action_dim"] == str(player.action_dim)
    assert meta["kelab.checkpoint_sha256"] == recorded["weights"]["sha256"]


@pytest.mark.parametrize("activation", ["elu", "relu", "tanh", "selu", "gelu", "silu"])
def test_every_activation_and_the_normaliser_export(tmp_path, activation):
    from kelab.tasks.cartpole import CartPoleTask
    from kelab.train.ppo import build_actor

    torch.manual_seed(0)
    config = TrainConfig(actor_hidden_dims=(9, 5), activation=activation)
    actor = build_actor(config, 4, 1)
    with torch.no_grad():
        for p in actor.parameters():
            p.normal_(0.0, 1.0)
        actor.obs_normalizer._mean.copy_(torch.tensor([[0.5, -1.0, 2.0, 0.0]]))
        actor.obs_normalizer._std.copy_(torch.tensor([[0.2, 1.5, 3.0, 0.7]]))
    meta = {
        "task": {"id": "kelab/CartPole-v0", "class": "kelab.tasks.cartpole:CartPoleTask"},
        "observation_dim": 4,
        "action_dim": 1,
        "train_config": config.to_dict(),
        "iteration": 0,
        "env_steps": 0,
    }
    tensors = {f"actor.{k}": v for k, v in actor.state_dict().items()}
    spec = save_checkpoint(tmp_path, "best", tensors, meta)
    out = export_onnx(CartPoleTask, tmp_path / "p.onnx", spec)
    obs = np.random.default_rng(2).normal(0.0, 2.0, (300, 4)).astype(np.float32)
    expected = ke.RLPlayer(spec, render_mode=None).act(obs)
    assert np.abs(_run(out, obs) - expected).max() <= 1e-4
    assert (np.abs(expected) == 1.0).any() and (np.abs(expected) < 1.0).any()  # clipping seen


def test_bad_paths_and_tasks_are_one_line_exit_2(tmp_path, capsys):
    out, cart = str(tmp_path / "p.onnx"), str(shipped_policy(TASK_IDS["kelab/CartPole-v0"]))
    cases = [
        (["CartPole-v0", "--out", str(tmp_path / "p.txt")], "must be a file ending in .onnx"),
        (["CartPole-v0", "--out", str(tmp_path)], "must be a file ending in .onnx"),
        (["CartPol-v0", "--out", out], "did you mean CartPole-v0?"),
        (["CartPole-v0", "--checkpoint", str(tmp_path / "x.json"), "--out", out], "not exist"),
        (["BallToGoal-v0", "--checkpoint", cart, "--out", out], "observation_dim=4, action_dim=1"),
    ]
    for argv, words in cases:
        assert main(["export", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (argv, err)
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob(".*"))


def test_a_missing_out_folder_is_created(tmp_path, capsys):
    """One rule for every --out/--video: the file's folder is created (it was refused)."""
    out = tmp_path / "new" / "dir" / "p.onnx"
    assert main(["export", "CartPole-v0", "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.is_file() and onnx.load(str(out)).graph.node


def test_the_file_is_written_atomically(tmp_path, monkeypatch):
    out = tmp_path / "p.onnx"
    export_onnx("CartPole-v0", out)
    before = out.read_bytes()
    real_replace = os.replace

    def crash(src, dst):
        raise KeyboardInterrupt  # a Ctrl-C right before the rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        export_onnx("BallToGoal-v0", out)
    monkeypatch.setattr(os, "replace", real_replace)
    assert out.read_bytes() == before and os.listdir(tmp_path) == ["p.onnx"]
