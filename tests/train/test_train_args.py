"""RLPlayer, RLTrainer and checkpoint fields: argument checks in the shared wording."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.checkpoint import CheckpointError, load_checkpoint
from kelab.train.shipped import shipped_policy


def test_player_seed_and_episodes():
    spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match=rf"^seed must be an int >= 0, got {bad!r}$"):
            ke.RLPlayer(spec, render_mode=None, seed=bad)
    with ke.RLPlayer(spec, render_mode=None, seed=np.int64(3)) as player:
        assert type(player.seed) is int and player.seed == 3
        for bad in (0, True, 2.0):
            with pytest.raises(ValueError, match=rf"^episodes must be an int >= 1, got {bad!r}$"):
                player.play(episodes=bad)
        with pytest.raises(ValueError, match=r"^seed must be an int >= 0, got -2$"):
            player.play(episodes=1, seed=-2)
        plain = player.play(episodes=1, seed=5)
        numpy = player.play(episodes=np.int64(1), seed=np.int64(5))
        assert plain["returns"] == numpy["returns"] and plain["lengths"] == numpy["lengths"]


def test_trainer_seed():
    env = ke.LearningEnv(CartPoleTask(), num_envs=2)
    for bad in (-1, True, "0"):
        with pytest.raises(ValueError, match=rf"^seed must be an int >= 0, got {bad!r}$"):
            ke.RLTrainer(env, seed=bad)
    env.close()


def test_checkpoint_integer_fields_refuse_bools(tmp_path):
    spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    meta = json.loads(spec.read_text())
    weights = spec.parent / meta["weights"]["file"]
    (tmp_path / weights.name).write_bytes(weights.read_bytes())
    meta["observation_dim"] = True
    bad = tmp_path / "best.json"
    bad.write_text(json.dumps(meta))
    with pytest.raises(
        CheckpointError,
        match=r"field 'observation_dim' must be an integer, got True; the checkpoint is damaged",
    ):
        load_checkpoint(bad)


def test_player_refuses_the_weights_file_naming_the_json(tmp_path):
    spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    weights = spec.parent / json.loads(spec.read_text())["weights"]["file"]
    with pytest.raises(
        ValueError,
        match=rf"is a \.safetensors weights file; pass the checkpoint's \.json \(or "
        rf"RUN_DIR:best\), not its weights file: {spec}$",
    ):
        ke.RLPlayer(weights, render_mode=None)
    # no JSON next to it names it: the generic fix
    lone = tmp_path / "best-0123456789abcdef.safetensors"
    lone.write_bytes(weights.read_bytes())
    with pytest.raises(ValueError, match=rf"not its weights file: {tmp_path}:best$"):
        ke.RLPlayer(str(lone), render_mode=None)
