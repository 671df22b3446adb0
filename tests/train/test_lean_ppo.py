"""FinalObsPPO's plain-tensor sampling and update compute rsl-rl-lib's PPO.

KELab's update skips rsl-rl's per-mini-batch TensorDict indexing, distribution objects and
per-tensor Adam loop for speed, and its networks, storage and Adam are its own (no
rsl-rl or tensordict import when training); these tests hold them to rsl-rl's own
``MLPModel``, ``PPO.act``, ``PPO.compute_returns`` and ``PPO.update`` and to
``torch.optim.Adam(fused=True)`` on the same data and weights (rsl-rl-lib is a test
dependency: the reference).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from rsl_rl.algorithms import PPO
from rsl_rl.models import MLPModel
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict
from train_helpers import tiny_config

from kelab.train.activations import ELU
from kelab.train.ppo import build_algorithm

OBS, ACT, N, T = 4, 2, 16, 8


def _td(x: torch.Tensor) -> TensorDict:
    return TensorDict({"policy": x}, batch_size=list(x.shape[:-1]))


def _fill(alg, seed: int) -> None:
    """The same random rollout in KELab's storage."""
    g = torch.Generator().manual_seed(seed)
    st = alg.storage
    st.observations.copy_(torch.randn(T, N, OBS, generator=g) * 2.0 + 0.5)
    st.actions.copy_(torch.randn(T, N, ACT, generator=g))
    st.values.copy_(torch.randn(T, N, 1, generator=g))
    st.returns.copy_(torch.randn(T, N, 1, generator=g))
    st.advantages.copy_(torch.randn(T, N, 1, generator=g))
    st.actions_log_prob.copy_(torch.randn(T, N, 1, generator=g) - 2.0)
    st.distribution_params[0].copy_(torch.randn(T, N, ACT, generator=g) * 0.1)
    st.distribution_params[1].fill_(0.7)
    st.step = T


def _rsl_model(net: torch.nn.Module, cfg, actor: bool) -> MLPModel:
    """rsl-rl's ``MLPModel`` holding a copy of ``net``'s tensors (the same names)."""
    model = MLPModel(
        _td(torch.zeros(1, OBS)),
        {"actor": ["policy"], "critic": ["policy"]},
        "actor" if actor else "critic",
        ACT if actor else 1,
        hidden_dims=list(cfg.actor_hidden_dims if actor else cfg.critic_hidden_dims),
        activation=cfg.activation,
        obs_normalization=cfg.obs_normalization,
        distribution_cfg=(
            {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}
            if actor
            else None
        ),
    )
    model.load_state_dict(copy.deepcopy(net.state_dict()), strict=True)
    return model


def _rsl_storage(alg) -> RolloutStorage:
    """rsl-rl's storage holding a copy of ``alg``'s rollout."""
    ours = alg.storage
    st = RolloutStorage("rl", N, T, _td(torch.zeros(N, OBS)), [ACT])
    st.observations["policy"].copy_(ours.observations)
    for name in ("actions", "rewards", "dones", "values", "returns", "actions_log_prob"):
        getattr(st, name).copy_(getattr(ours, name))
    st.advantages = ours.advantages.clone()
    st.distribution_params = tuple(p.clone() for p in ours.distribution_params)
    st.step = ours.step
    return st


def _rsl_twin(alg, cfg) -> PPO:
    """rsl-rl's own PPO on copies of ``alg``'s networks and rollout (torch's ELU and Adam)."""
    actor = _rsl_model(alg.actor, cfg, actor=True)
    critic = _rsl_model(alg.critic, cfg, actor=False)
    storage = _rsl_storage(alg)
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
        assert torch.equal(a, b)  # the normaliser's arithmetic is rsl-rl's, bit for bit
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
    obs = torch.randn(N, OBS)
    rsl_actor = _rsl_model(alg.actor, cfg, actor=True)
    rsl_critic = _rsl_model(alg.critic, cfg, actor=False)
    with torch.inference_mode():
        actions = alg.act(obs)
        alg.process_env_step(obs, torch.zeros(N), torch.zeros(N, dtype=torch.uint8), {})
        st = alg.storage
        mean = rsl_actor(_td(obs))  # rsl-rl's deterministic output
        rsl_actor.distribution.update(mean)
        ref_logp = rsl_actor.get_output_log_prob(actions)
        assert torch.equal(st.distribution_params[0][0], mean)
        assert torch.equal(st.distribution_params[1][0], rsl_actor.output_std)
        assert torch.allclose(st.actions_log_prob[0, :, 0], ref_logp, atol=1e-5)
        assert torch.equal(st.values[0], rsl_critic(_td(obs)))
        assert torch.equal(st.observations[0], obs) and torch.equal(st.actions[0], actions)
    assert actions.shape == (N, ACT) and st.step == 1


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


def _clamp_passes_its_bounds() -> bool:
    """torch 2.13's clamp: a value exactly on a bound gets the gradient (2.14's: none)."""
    x = torch.tensor(1.0, requires_grad=True)
    x.clamp(0.0, 1.0).backward()
    return float(x.grad) == 1.0


@pytest.mark.parametrize("clip", [0.2, 0.25, 0.5])
def test_the_loss_head_at_the_clip_bounds_and_the_std_clamp(clip):
    """Ties (ratio exactly 1 +- clip, value change exactly +clip) and a std at/outside
    its clamp: the written-out gradient is autograd's (torch.max halves a tie, clamp
    passes its bounds).

    Bits of one torch release: torch 2.14's clamp gives no gradient at its bounds, so its
    autograd differs from the written-out gradient (torch 2.13's rule) at exact ties
    (#42; the other tests hold on 2.14.1, docs/install.md).
    """
    if not _clamp_passes_its_bounds():
        pytest.skip(
            f"torch {torch.__version__}'s clamp gives no gradient at its bounds; the "
            "written-out gradient follows torch 2.13's, which passes it"
        )
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
                obs = torch.randn(N, OBS, generator=g)
                alg.act(obs)
                alg.process_env_step(obs, torch.randn(N, generator=g), torch.zeros(N), {})
            alg.compute_returns(torch.randn(N, OBS, generator=g))
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


@pytest.mark.parametrize(
    ("activation", "normalize", "hidden"),
    [
        ("elu", True, (8, 8)),
        ("tanh", False, (16,)),
        ("relu", True, (8, 4, 8)),
        ("gelu", False, (8,)),
    ],
)
def test_the_networks_start_with_rsl_rl_s_weights_from_the_same_seed(activation, normalize, hidden):
    """The same names, in the same order, with the same bits from the same seed: a seed
    trains the same policy as with rsl-rl's models, and their checkpoints interchange."""
    cfg = tiny_config(
        actor_hidden_dims=hidden, critic_hidden_dims=hidden, activation=activation,
        obs_normalization=normalize, init_noise_std=0.6,
    )  # fmt: skip
    torch.manual_seed(7)
    alg = build_algorithm(cfg, OBS, ACT, N)
    torch.manual_seed(7)
    ref_actor = MLPModel(
        _td(torch.zeros(1, OBS)), {"actor": ["policy"]}, "actor", ACT,
        hidden_dims=list(hidden), activation=activation, obs_normalization=normalize,
        distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.6,
                          "std_type": "scalar"},
    )  # fmt: skip
    ref_critic = MLPModel(
        _td(torch.zeros(1, OBS)), {"critic": ["policy"]}, "critic", 1,
        hidden_dims=list(hidden), activation=activation, obs_normalization=normalize,
    )  # fmt: skip
    for ours, ref in ((alg.actor, ref_actor), (alg.critic, ref_critic)):
        a, b = ours.state_dict(), ref.state_dict()
        assert list(a) == list(b)
        assert all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
        x = torch.randn(5, OBS)
        assert torch.allclose(ours(x), ref(_td(x)), atol=1e-6)


def test_silu_networks_build():
    """ "silu" is a TrainConfig activation (rsl-rl's models call it "swish")."""
    alg = build_algorithm(tiny_config(activation="silu"), OBS, ACT, N)
    assert any(isinstance(m, torch.nn.SiLU) for m in alg.actor.mlp)


def test_returns_and_advantages_are_rsl_rl_s_bit_for_bit():
    cfg = tiny_config(num_envs=N, num_steps_per_env=T, gamma=0.97, lam=0.9)
    torch.manual_seed(1)
    alg = build_algorithm(cfg, OBS, ACT, N)
    g = torch.Generator().manual_seed(4)
    st = alg.storage
    st.observations.copy_(torch.randn(T, N, OBS, generator=g))
    st.rewards.copy_(torch.randn(T, N, 1, generator=g))
    st.values.copy_(torch.randn(T, N, 1, generator=g))
    st.dones.copy_((torch.rand(T, N, 1, generator=g) < 0.2).to(torch.uint8))
    st.step = T
    last = torch.randn(N, OBS, generator=g)
    twin = _rsl_twin(alg, cfg)
    with torch.inference_mode():
        alg.compute_returns(last)
        twin.compute_returns(_td(last))
    assert torch.equal(st.returns, twin.storage.returns)
    assert torch.equal(st.advantages, twin.storage.advantages)


def test_adam_steps_as_torch_s_fused_adam_bit_for_bit():
    from kelab.train.adam import Adam

    g = torch.Generator().manual_seed(0)
    shapes = [(8, 4), (8,), (1, 8), (1,), (3,)]
    ours = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt = Adam(ours, lr=3e-3)
    ref = torch.optim.Adam(theirs, lr=3e-3, fused=True)
    for step in range(6):
        for i, (p, q) in enumerate(zip(ours, theirs, strict=True)):
            grad = torch.randn(p.shape, generator=g)
            if step == 2 and i == 4:  # a parameter without a gradient this step
                p.grad = q.grad = None
            else:
                p.grad, q.grad = grad.clone(), grad.clone()
        if step == 3:  # the adaptive schedule changes the rate between steps
            opt.param_groups[0]["lr"] = ref.param_groups[0]["lr"] = 1e-3
        opt.step()
        ref.step()
        assert all(torch.equal(p, q) for p, q in zip(ours, theirs, strict=True))
    mine, torchs = opt.state_dict(), ref.state_dict()
    assert mine["param_groups"] == torchs["param_groups"]
    assert mine["state"].keys() == torchs["state"].keys()
    for i, entry in torchs["state"].items():
        assert entry.keys() == mine["state"][i].keys()
        assert all(torch.equal(entry[k], mine["state"][i][k]) for k in entry)
    # torch's state loads into this Adam and steps on identically
    fresh = Adam([torch.nn.Parameter(q.detach().clone()) for q in theirs], lr=0.5)
    fresh.load_state_dict(torchs)
    assert fresh.param_groups[0]["lr"] == 1e-3
    for p, q in zip(fresh.param_groups[0]["params"], theirs, strict=True):
        grad = torch.randn(p.shape, generator=g)
        p.grad, q.grad = grad.clone(), grad.clone()
    fresh.step()
    ref.step()
    assert all(
        torch.equal(p, q) for p, q in zip(fresh.param_groups[0]["params"], theirs, strict=True)
    )


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda sd: sd["param_groups"].append(dict(sd["param_groups"][0])), "one group"),
        (lambda sd: sd["param_groups"][0]["params"].pop(), "one group of 2"),
        (lambda sd: sd["param_groups"][0].update(betas=(0.8, 0.999)), "'betas'"),
        (lambda sd: sd["param_groups"][0].update(lr=-1.0), "lr must be"),
        (lambda sd: sd["param_groups"][0].update(lr="fast"), "lr must be"),
        (lambda sd: sd["state"][1].update(exp_avg=torch.zeros(5)), r"1.exp_avg must have"),
        (lambda sd: sd["state"][0].update(exp_avg_sq=None), r"0.exp_avg_sq must have"),
        (lambda sd: sd["state"][1].update(step=torch.zeros(3)), r"1.step must be one number"),
        (lambda sd: sd["state"].update({7: sd["state"][0]}), r"index must be in \[0, 2\)"),
        # values Adam cannot continue from (they made NaN actions an iteration later)
        (lambda sd: sd["param_groups"][0].update(lr=math.inf), "lr must be"),
        (lambda sd: sd["state"][0]["exp_avg"].fill_(math.nan), r"0.exp_avg must be finite"),
        (lambda sd: sd["state"][1]["exp_avg_sq"].fill_(-1.0), r"1.exp_avg_sq must be finite"),
        (lambda sd: sd["state"][1]["exp_avg_sq"].fill_(math.inf), r"1.exp_avg_sq must be finite"),
        (lambda sd: sd["state"][0].update(step=torch.tensor(-5.0)), r"0.step must be a whole"),
        (lambda sd: sd["state"][0].update(step=torch.tensor(math.nan)), r"0.step must be a whole"),
        (lambda sd: sd["state"][0].update(step=torch.tensor(1.5)), r"0.step must be a whole"),
        (lambda sd: sd["state"].pop(0), r"every parameter or none, got \[1\] of 2"),
    ],
)
def test_adam_refuses_a_state_that_does_not_fit_and_keeps_its_own(change, match):
    from kelab.train.adam import Adam

    params = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2, 2))]
    opt = Adam(params, lr=1e-3)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    sd = copy.deepcopy(opt.state_dict())
    change(sd)
    before = copy.deepcopy(opt.state_dict())
    with pytest.raises(ValueError, match=match):
        opt.load_state_dict(sd)
    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    assert all(
        torch.equal(after["state"][i][k], before["state"][i][k])
        for i in before["state"]
        for k in before["state"][i]
    )
