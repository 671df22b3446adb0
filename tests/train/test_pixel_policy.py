"""Convolutional policies for image tasks (#43 items 3-4): torch, numpy, ONNX, the trainer."""

import json

import numpy as np
import pytest
import torch

import kelab as ke
from kelab.errors import UserError
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


def _shared_update_reference(alg, batch_obs):
    """One epoch, one mini-batch of PPO by autograd on the summed loss, one clip over all."""
    import copy

    from kelab.train.ppo import _clip_grad_norm

    ref = copy.deepcopy(alg)  # keeps the critic's trunk the actor's, in the copy
    st = ref.storage
    std_param = ref.actor.distribution.std_param
    mean = ref.actor.mlp(batch_obs)
    values = ref.critic.mlp(batch_obs)
    batch = (batch_obs, batch_obs, st.actions.flatten(0, 1), st.values.flatten(0, 1),
             st.returns.flatten(0, 1), st.advantages.flatten(0, 1).squeeze(-1),
             st.actions_log_prob.flatten(0, 1).squeeze(-1), None, None)  # fmt: skip
    std = std_param.clamp(*ref.actor.distribution.std_range)
    head = ref._loss_head(mean, std, values, batch)
    loss = head.surrogate + ref.value_loss_coef * head.value_loss - ref.entropy_coef * head.entropy
    params = list(ref.optimizer.param_groups[0]["params"])
    for p in params:
        p.grad = None
    loss.backward()
    _clip_grad_norm(params, ref.max_grad_norm)
    ref.optimizer.step()
    return ref


def test_a_shared_trunk_is_one_set_of_convolutions_trained_by_both_losses():
    from kelab.train.ppo import build_algorithm

    config = _config(share_cnn=True, obs_normalization=False, num_envs=6, num_steps_per_env=4,
                     num_mini_batches=1, num_learning_epochs=1, schedule="fixed",
                     entropy_coef=0.01)  # fmt: skip
    torch.manual_seed(0)
    alg = build_algorithm(config, DIM, 1, 6)
    assert alg.shared_trunk and alg.critic.mlp[1] is alg.actor.mlp[1]
    assert alg.critic.mlp[3] is alg.actor.mlp[3] and alg.critic.mlp[6] is not alg.actor.mlp[6]
    n_unique = len({id(p) for p in [*alg.actor.parameters(), *alg.critic.parameters()]})
    assert len(alg.optimizer.param_groups[0]["params"]) == n_unique  # each trained once
    g = torch.Generator().manual_seed(2)
    st = alg.storage
    st.observations.copy_(torch.randint(0, 256, st.observations.shape, generator=g).float())
    for t in (st.actions, st.values, st.returns, st.advantages):
        t.copy_(torch.randn(t.shape, generator=g))
    st.actions_log_prob.copy_(torch.randn(st.actions_log_prob.shape, generator=g) - 1.0)
    st.distribution_params[0].copy_(torch.randn(st.distribution_params[0].shape, generator=g))
    st.distribution_params[1].fill_(0.5)
    st.step = st.num_transitions_per_env
    ref = _shared_update_reference(alg, st.observations.flatten(0, 1))
    conv_before = alg.actor.mlp[1].weight.detach().clone()
    alg.update()
    assert not torch.equal(conv_before, alg.actor.mlp[1].weight)
    assert alg.critic.mlp[1] is alg.actor.mlp[1]  # still one trunk
    for (name, mine), theirs in zip(
        [*alg.actor.named_parameters(), *alg.critic.named_parameters()],
        [*ref.actor.parameters(), *ref.critic.parameters()],
        strict=True,
    ):
        assert torch.allclose(mine, theirs, atol=1e-6, rtol=1e-5), name


def test_a_shared_trunk_checkpoint_saves_and_resumes_as_one_trunk(tmp_path):
    from kelab.train.ppo import build_algorithm
    from kelab.train.weights import training_state

    config = _config(share_cnn=True, obs_normalization=False, num_envs=2, num_steps_per_env=2)
    torch.manual_seed(0)
    alg = build_algorithm(config, DIM, 1, 2)
    tensors, opt_meta = training_state(alg.actor, alg.critic, alg.optimizer)
    assert torch.equal(tensors["critic.mlp.1.weight"], tensors["actor.mlp.1.weight"])
    task = {
        "id": "kelab/CartPole-Pixels-v0",
        "class": "kelab.tasks.cartpole_pixels:CartPolePixelsTask",
    }
    meta = {"task": task, "train_config": config.to_dict(), "optimizer": opt_meta,
            "observation_dim": DIM, "action_dim": 1, "iteration": 1, "env_steps": 4}  # fmt: skip
    spec = save_checkpoint(tmp_path, "latest", tensors, meta)  # no two names of one tensor
    torch.manual_seed(1)
    other = build_algorithm(config, DIM, 1, 2)
    other.load_training_state(load_checkpoint(spec))
    assert other.critic.mlp[1] is other.actor.mlp[1]
    assert torch.equal(other.actor.mlp[1].weight, alg.actor.mlp[1].weight)
    assert torch.equal(other.critic.mlp[6].weight, alg.critic.mlp[6].weight)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(cnn_channels=(), cnn_kernels=(), cnn_strides=()), r"share_cnn needs convolutions"),
        (dict(obs_normalization=True), r"share_cnn needs obs_normalization=False"),
    ],
)
def test_share_cnn_without_convolutions_or_with_a_normaliser_is_refused(changes, message):
    with pytest.raises(UserError, match=message):
        _config(share_cnn=True, **{"obs_normalization": False, **changes})
