"""FinalObsPPO's plain-tensor sampling and update compute rsl-rl-lib's PPO.

KELab's update skips rsl-rl's per-mini-batch TensorDict indexing, distribution objects and
per-tensor Adam loop for speed; these tests hold it to the same numbers as rsl-rl's own
``PPO.update`` / ``PPO.act`` on the same data and weights.
"""

from __future__ import annotations

import copy

import pytest
import torch
from rsl_rl.algorithms import PPO
from tensordict import TensorDict
from train_helpers import tiny_config

from kelab.train.ppo import ELU, build_algorithm

OBS, ACT, N, T = 4, 2, 16, 8


def _fill(alg: PPO, seed: int) -> None:
    """The same random rollout in any algorithm's storage."""
    g = torch.Generator().manual_seed(seed)
    st = alg.storage
    st.observations["policy"].copy_(torch.randn(T, N, OBS, generator=g) * 2.0 + 0.5)
    st.actions.copy_(torch.randn(T, N, ACT, generator=g))
    st.values.copy_(torch.randn(T, N, 1, generator=g))
    st.returns.copy_(torch.randn(T, N, 1, generator=g))
    st.advantages = torch.randn(T, N, 1, generator=g)
    st.actions_log_prob.copy_(torch.randn(T, N, 1, generator=g) - 2.0)
    st.distribution_params = (
        torch.randn(T, N, ACT, generator=g) * 0.1,
        torch.full((T, N, ACT), 0.7),
    )
    st.step = T


def _rsl_twin(alg: PPO, cfg) -> PPO:
    """rsl-rl's own PPO on deep copies of ``alg``'s networks, with torch's ELU and Adam."""
    actor, critic = copy.deepcopy(alg.actor), copy.deepcopy(alg.critic)
    for net in (actor, critic):
        for i in range(len(net.mlp)):
            if isinstance(net.mlp[i], ELU):
                net.mlp[i] = torch.nn.ELU()
    storage = copy.deepcopy(alg.storage)
    return PPO(
        actor, critic, storage,
        num_learning_epochs=cfg.num_learning_epochs, num_mini_batches=cfg.num_mini_batches,
        clip_param=cfg.clip_param, gamma=cfg.gamma, lam=cfg.lam,
        value_loss_coef=cfg.value_loss_coef, entropy_coef=cfg.entropy_coef,
        learning_rate=cfg.learning_rate, max_grad_norm=cfg.max_grad_norm,
        schedule=cfg.schedule, desired_kl=cfg.desired_kl,
    )  # fmt: skip


def test_elu_matches_torch_in_value_and_gradient():
    x = torch.linspace(-20.0, 20.0, 4001, requires_grad=True)
    ours = ELU()(x)
    (g_ours,) = torch.autograd.grad(ours.sum(), x)
    ref = torch.nn.functional.elu(x)
    (g_ref,) = torch.autograd.grad(ref.sum(), x)
    assert float((ours - ref).detach().abs().max()) < 1e-6
    assert float((g_ours - g_ref).abs().max()) < 1e-6
    positive = x > 0
    assert torch.equal(ours[positive], x[positive])  # exact where x > 0
    with torch.no_grad():  # sampling: torch's ELU for small batches, one exp for large
        for size in (64, 40_000):
            xs = torch.randn(size) * 5.0
            assert float((ELU()(xs) - torch.nn.functional.elu(xs)).abs().max()) < 1e-6
    xd = torch.randn(30, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ELU(), (xd,))


def test_the_networks_use_the_fast_elu_in_every_hidden_layer():
    alg = build_algorithm(tiny_config(actor_hidden_dims=(8, 8, 8)), OBS, ACT, N)
    for net in (alg.actor, alg.critic):
        kinds = [type(m) for m in net.mlp]
        assert torch.nn.ELU not in kinds
        assert kinds.count(ELU) == len(net.mlp) // 2


@pytest.mark.parametrize(
    ("mini_batches", "schedule", "entropy", "activation"),
    [
        (1, "adaptive", 0.0, "elu"),
        (4, "adaptive", 0.01, "elu"),
        (2, "fixed", 0.005, "elu"),
        (2, "adaptive", 0.01, "tanh"),  # the hand-written backward pass
        (2, "adaptive", 0.0, "relu"),
        (2, "adaptive", 0.01, "selu"),  # autograd's backward pass
    ],
)
def test_update_matches_rsl_rl_ppo(mini_batches, schedule, entropy, activation):
    cfg = tiny_config(
        num_envs=N, num_steps_per_env=T, num_learning_epochs=3, num_mini_batches=mini_batches,
        schedule=schedule, entropy_coef=entropy, learning_rate=3e-3, activation=activation,
    )  # fmt: skip
    torch.manual_seed(1)
    alg = build_algorithm(cfg, OBS, ACT, N)
    _fill(alg, seed=2)
    twin = _rsl_twin(alg, cfg)
    torch.manual_seed(3)  # both draw the mini-batch order from the global generator
    ours = alg.update()
    torch.manual_seed(3)
    theirs = twin.update()
    assert ours.keys() >= {"value", "surrogate", "entropy"}
    for key in ("value", "surrogate", "entropy"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-6), key
    assert alg.learning_rate == pytest.approx(twin.learning_rate, rel=1e-6)
    for (name, p), q in zip(alg.actor.named_parameters(), twin.actor.parameters(), strict=True):
        assert torch.allclose(p, q, atol=2e-5, rtol=1e-4), name
    for (name, p), q in zip(alg.critic.named_parameters(), twin.critic.parameters(), strict=True):
        assert torch.allclose(p, q, atol=2e-5, rtol=1e-4), name
    for a, b in zip(alg.actor.obs_normalizer.state_dict().values(),
                    twin.actor.obs_normalizer.state_dict().values(), strict=True):  # fmt: skip
        assert torch.allclose(a.float(), b.float())
    assert alg.storage.step == 0 and twin.storage.step == 0


def test_update_changes_the_weights():
    cfg = tiny_config(num_envs=N, num_steps_per_env=T)
    alg = build_algorithm(cfg, OBS, ACT, N)
    _fill(alg, seed=5)
    before = [p.detach().clone() for p in alg.actor.parameters()]
    alg.update()
    assert any(not torch.equal(b, p) for b, p in zip(before, alg.actor.parameters(), strict=True))


def test_act_records_rsl_rl_quantities():
    cfg = tiny_config(num_envs=N, num_steps_per_env=T)
    alg = build_algorithm(cfg, OBS, ACT, N)
    obs = TensorDict({"policy": torch.randn(N, OBS)}, batch_size=[N])
    with torch.inference_mode():
        actions = alg.act(obs)
        t = alg.transition
        mean = alg.actor(obs)  # rsl-rl's deterministic output
        std = alg.action_std()
        ref_logp = torch.distributions.Normal(mean, std).log_prob(actions).sum(-1)
        assert torch.allclose(t.distribution_params[0], mean, atol=1e-6)
        assert torch.allclose(t.distribution_params[1], std.expand_as(mean))
        assert torch.allclose(t.actions_log_prob, ref_logp, atol=1e-5)
        assert torch.allclose(t.values, alg.critic(obs), atol=1e-6)
        assert t.observations is obs
    assert actions.shape == (N, ACT)


def test_update_matches_rsl_rl_ppo_without_value_clipping():
    cfg = tiny_config(num_envs=N, num_steps_per_env=T, num_mini_batches=2, learning_rate=3e-3)
    torch.manual_seed(1)
    alg = build_algorithm(cfg, OBS, ACT, N)
    alg.use_clipped_value_loss = False
    _fill(alg, seed=4)
    twin = _rsl_twin(alg, cfg)
    twin.use_clipped_value_loss = False
    torch.manual_seed(3)
    ours = alg.update()
    torch.manual_seed(3)
    theirs = twin.update()
    assert ours["value"] == pytest.approx(theirs["value"], rel=1e-4)
    for p, q in zip(alg.critic.parameters(), twin.critic.parameters(), strict=True):
        assert torch.allclose(p, q, atol=2e-5, rtol=1e-4)


def _autograd_head(alg, mean, std_param, low, high, values, batch):
    """rsl-rl's loss through autograd: the gradients at mean, std_param and values."""
    from kelab.train.ppo import _LOG_SQRT_2PI, _gaussian_log_prob

    mean = mean.clone().requires_grad_()
    values = values.clone().requires_grad_()
    sp = std_param.clone().requires_grad_()
    std = sp.clamp(low, high)
    _, _, actions, old_values, returns, adv, old_logp, _, _ = batch
    clip = alg.clip_param
    log_std = std.log()
    ratio = torch.exp(_gaussian_log_prob((actions - mean) / std, log_std) - old_logp)
    surrogate = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
    entropy = (0.5 + _LOG_SQRT_2PI + log_std).sum()
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    value_loss = torch.max((values - returns).square(), (clipped - returns).square()).mean()
    loss = surrogate + alg.value_loss_coef * value_loss - alg.entropy_coef * entropy
    loss.backward()
    return mean.grad, sp.grad, values.grad


@pytest.mark.parametrize("clip", [0.2, 0.25, 0.5])
def test_the_loss_head_at_the_clip_bounds_and_the_std_clamp(clip):
    """Ties (ratio exactly 1 +- clip, value change exactly +clip) and a std at/outside
    its clamp: the written-out gradient is autograd's (torch.max halves a tie, clamp
    passes its bounds)."""
    from kelab.train.ppo import _gaussian_log_prob

    cfg = tiny_config(num_envs=N, num_steps_per_env=T, clip_param=clip, entropy_coef=0.01)
    alg = build_algorithm(cfg, OBS, ACT, N)
    g = torch.Generator().manual_seed(0)
    n = 8
    mean = torch.randn(n, ACT, generator=g)
    low, high = 0.1, 2.0
    std_param = torch.tensor([0.1, 3.0])  # one at its lower bound, one above the upper
    std = std_param.clamp(low, high)
    actions = mean + std * torch.randn(n, ACT, generator=g)  # log-probs of order 1
    logp = _gaussian_log_prob((actions - mean) / std, std.log())
    target = torch.tensor([1 + clip, 1 - clip] * 4)
    old_logp = logp - torch.log(target)
    for _ in range(256):  # nudge until exp(logp - old), batched as the head computes it,
        r = torch.exp(logp - old_logp)  # is bit-exactly on the bound
        if bool((r == target).all()):
            break
        toward = torch.where(r < target, -1e9, 1e9)
        old_logp = torch.where(r == target, old_logp, torch.nextafter(old_logp, toward))
    on_bound = torch.exp(logp - old_logp) == target  # not every float target is reachable
    assert int(on_bound.sum()) >= 4, on_bound
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, 0.0, 0.5, -2.0, 0.0])
    values = torch.randn(n, 1, generator=g)
    old_values = values - clip  # a change of exactly +clip
    returns = torch.randn(n, 1, generator=g)
    batch = (None, None, actions, old_values, returns, adv, old_logp, None, None)
    head = alg._loss_head(mean, std, values, batch)
    g_mean, g_sp, g_values = _autograd_head(alg, mean, std_param, low, high, values, batch)
    inside = (std_param >= low) & (std_param <= high)
    assert torch.allclose(head.grad_mean, g_mean, atol=1e-7, rtol=1e-6)
    assert torch.allclose(head.grad_values, g_values, atol=1e-7, rtol=1e-6)
    assert torch.allclose(torch.where(inside, head.grad_std, 0.0), g_sp, atol=1e-6, rtol=1e-5)


def test_a_lagged_update_without_lag_is_the_plain_update():
    """``lagged`` takes the policy before the update as the proximal one; when the
    rollout came from that same policy, the weights are 1 and the update is unchanged."""
    cfg = tiny_config(num_envs=N, num_steps_per_env=T, num_mini_batches=2, entropy_coef=0.01)
    runs = []
    for lagged in (False, True):
        torch.manual_seed(1)
        alg = build_algorithm(cfg, OBS, ACT, N)
        alg.lagged = lagged
        g = torch.Generator().manual_seed(9)
        with torch.inference_mode():
            for _ in range(T):
                obs = TensorDict({"policy": torch.randn(N, OBS, generator=g)}, batch_size=[N])
                alg.act(obs)
                alg.process_env_step(obs, torch.randn(N, generator=g), torch.zeros(N), {})
            alg.compute_returns(
                TensorDict({"policy": torch.randn(N, OBS, generator=g)}, batch_size=[N])
            )
        torch.manual_seed(3)
        runs.append((alg.update(), [p.detach().clone() for p in alg.actor.parameters()]))
    (plain, w_plain), (lagged, w_lagged) = runs
    for key in ("value", "surrogate", "entropy"):
        assert lagged[key] == pytest.approx(plain[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(w_plain, w_lagged, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_a_lagged_update_reweights_by_the_proximal_policy():
    """With a real lag the proximal log-probs replace the stored ones and the learning
    rate reads the KL from the proximal policy, not from the one that acted."""
    cfg = tiny_config(num_envs=N, num_steps_per_env=T, num_mini_batches=1, learning_rate=1e-3)
    torch.manual_seed(1)
    alg = build_algorithm(cfg, OBS, ACT, N)
    _fill(alg, seed=2)  # stored means/log-probs far from this policy: a big KL to it
    plain = build_algorithm(cfg, OBS, ACT, N)
    plain.actor.load_state_dict(alg.actor.state_dict())
    plain.critic.load_state_dict(alg.critic.state_dict())
    _fill(plain, seed=2)
    alg.lagged = True
    torch.manual_seed(3)
    alg.update()
    torch.manual_seed(3)
    plain.update()
    assert plain.learning_rate < 1e-3  # the acting policy's KL cut it
    assert alg.learning_rate >= 1e-3  # the proximal KL (from this policy) did not
