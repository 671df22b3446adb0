"""Convolutional policies for image tasks (#43 items 3-4): torch, numpy, ONNX, the trainer."""

import json

import numpy as np
import pytest
import torch

import kelab as ke
from kelab.tasks.cartpole_pixels import CartPolePixelsTask
from kelab.train.architecture import architecture, architecture_of
from kelab.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from kelab.train.config import TrainConfig
from kelab.train.numpy_actor import NumpyActor
from kelab.train.policy import CheckpointPolicy
from kelab.train.ppo import build_actor, build_critic

IMAGE = CartPolePixelsTask.observation_shape
DIM = CartPolePixelsTask.observation_dim
CNN = dict(cnn_channels=(6, 8), cnn_kernels=(8, 4), cnn_strides=(4, 2))


def _config(**changes):
    fields = dict(CNN, actor_hidden_dims=(16,), critic_hidden_dims=(16,), observation_shape=IMAGE)
    fields.update(changes)
    return TrainConfig(**fields)


def _checkpoint(tmp_path, config, seed=0):
    """A conv actor with random weights (twice torch's init), saved as a checkpoint."""
    torch.manual_seed(seed)
    actor = build_actor(config, DIM, 1)
    with torch.no_grad():
        for p in actor.parameters():
            p.mul_(2.0)
    meta = {
        "task": {
            "id": "kelab/CartPole-Pixels-v0",
            "class": "kelab.tasks.cartpole_pixels:CartPolePixelsTask",
        },
        "observation_dim": DIM,
        "action_dim": 1,
        "train_config": config.to_dict(),
        "iteration": 0,
        "env_steps": 0,
    }
    tensors = {f"actor.{k}": v for k, v in actor.state_dict().items()}
    return save_checkpoint(tmp_path, "best", tensors, meta)


def _images(n=64, seed=1):
    return np.random.default_rng(seed).integers(0, 256, (n, *IMAGE)).astype(np.uint8)


def test_the_architecture_is_what_torch_builds():
    config = _config()
    arch = architecture_of(config, DIM, 1, config.actor_hidden_dims)
    actor, critic = build_actor(config, DIM, 1), build_critic(config, DIM)
    names = {k: tuple(v.shape) for k, v in actor.state_dict().items() if k.startswith("mlp.")}
    assert names == {k.removeprefix("actor."): v for k, v in arch.shapes("actor").items()}
    assert [c.out_size for c in arch.convolutions] == [(8, 15), (3, 6)]
    out = critic(torch.from_numpy(_images(3).reshape(3, -1).astype(np.float32)))
    assert out.shape == (3, 1)
    # an MLP keeps rsl-rl's names (mlp.0, mlp.2, ...): the shipped checkpoints still load
    mlp = architecture(4, 1, (8, 8))
    assert [layer.index for layer in mlp.layers] == [0, 2, 4]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cnn_kernels": (8,)}, r"must have one entry per convolution each, got 2, 1 and 2"),
        ({"cnn_channels": 16}, r"cnn_channels must be a tuple of ints in \[1, 1024\]"),
        ({"observation_shape": (36, 64)}, r"observation_shape must be \(\) or \(height, width"),
    ],
)
def test_bad_convolution_settings_are_one_line_errors(changes, message):
    with pytest.raises(ValueError, match=message) as info:
        _config(**changes)
    assert "\n" not in str(info.value)


def test_convolutions_need_an_image_that_fits_them():
    with pytest.raises(ValueError, match=r"cnn_channels needs an image observation"):
        build_actor(_config(observation_shape=()), DIM, 1)
    with pytest.raises(ValueError, match=r"convolution 2 \(kernel 6, stride 2\) does not fit"):
        build_actor(_config(cnn_kernels=(8, 6), cnn_strides=(8, 2)), DIM, 1)  # 4x8 into it


def test_the_numpy_actor_runs_the_convolutions_as_torch_does(tmp_path):
    spec = _checkpoint(tmp_path, _config())
    numpy_actor = NumpyActor(load_checkpoint(spec, arrays="numpy"))
    torch_actor = CheckpointPolicy(load_checkpoint(spec))
    images = _images()
    mine, theirs = numpy_actor(images), torch_actor(images)
    assert mine.shape == (64, 1) and mine.dtype == np.float32
    assert np.abs(mine - theirs).max() <= 1e-5
    assert (np.abs(mine) < 1.0).any()  # not all clipped: the comparison means something
    flat = images.reshape(64, -1).astype(np.float32)  # flat rows are the same observations
    assert np.array_equal(numpy_actor(flat), mine)
    assert np.abs(numpy_actor(images[0]) - mine[0]).max() <= 1e-6  # one image, one action
    with pytest.raises(ValueError, match=r"observations must have shape \(N, 9216\), \(N, 36, "):
        numpy_actor(images[:, :, :32])


def test_a_checkpoint_whose_weights_are_not_its_convolutions_is_refused(tmp_path):
    spec = _checkpoint(tmp_path, _config())
    meta = json.loads(spec.read_text())
    meta["train_config"]["cnn_channels"] = [6, 9]
    spec.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"cnn_channels=\[6, 9\].*mlp.3.weight") as info:
        load_checkpoint(spec, arrays="numpy")
    assert "\n" not in str(info.value)


def test_the_onnx_graph_takes_the_env_s_images(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from kelab.train.export import export_onnx

    spec = _checkpoint(tmp_path, _config(activation="silu"))
    out = export_onnx("CartPole-Pixels-v0", tmp_path / "p.onnx", spec)
    images = _images(40)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    actions = session.run(["actions"], {"observations": images})[0]
    expected = ke.RLPlayer(spec, render_mode=None).act(images)
    assert actions.shape == (40, 1) and np.abs(actions - expected).max() <= 1e-4
    meta = {p.key: p.value for p in onnx.load(out).metadata_props}
    assert json.loads(meta["kelab.observation_shape"]) == list(IMAGE)


def test_the_trainer_trains_and_the_player_plays_a_pixel_task(tmp_path):
    from kelab.train.trainer import RLTrainer

    config = _config(num_envs=4, num_steps_per_env=8, num_mini_batches=2, observation_shape=())
    env = ke.LearningEnv(task=CartPolePixelsTask(), num_envs=4, seed=0)
    trainer = RLTrainer(env, config=config, seed=0, run_dir=tmp_path / "run", log=False)
    assert trainer.config.observation_shape == IMAGE  # from the env's image space
    trainer.train(2)
    trainer.close()
    env.close()
    spec = tmp_path / "run" / "latest.json"
    saved = json.loads(spec.read_text())
    assert saved["observation_dim"] == DIM and saved["train_config"]["observation_shape"] == [
        *IMAGE
    ]
    player = ke.RLPlayer(spec, render_mode=None)
    play_env = ke.LearningEnv(task=CartPolePixelsTask(), num_envs=2, seed=3)
    player.check_env(play_env)  # the images' size is the checkpoint's observation_dim
    report = ke.evaluate(play_env, player.policy, episodes=2, seed=3)
    assert report.episodes == 2 and report.length_mean > 0
    play_env.close()
