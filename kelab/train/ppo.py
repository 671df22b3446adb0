"""PPO as rsl-rl-lib computes it, and what KELab changes in the algorithm.

rsl-rl-lib bootstraps a time-limit ending with the value of the observation the action
was taken in (``gamma * V(s_t)``), because vectorised environments usually hand back only
the next episode's first observation. KELab's envs give the real final observation
(``info["final_obs"]``), so :class:`FinalObsPPO` adds ``gamma * V(s_final)`` instead.

The rest is speed, for the small networks a CPU trains (the same algorithm, measured in
``benchmarks/train_speed.py``): rsl-rl's update and sampling go through per-mini-batch
``TensorDict`` indexing, ``torch.distributions`` objects and a per-tensor Adam loop, which
cost several times the forward and backward passes of two 64x64 MLPs. :class:`FinalObsPPO`
computes the same Gaussian log-probabilities, entropy, KL, clipped surrogate and clipped
value loss on plain tensors, normalises each rollout's observations once per update,
writes the loss's gradient at the networks' outputs out and runs the backward pass by
hand (:mod:`kelab.train.backprop`), and steps a fused Adam. The networks
(:mod:`kelab.train.nets`) and the rollout storage (:mod:`kelab.train.storage`) are
KELab's own with rsl-rl's names and arithmetic, so neither rsl-rl nor tensordict (whose
``torch._dynamo`` import took ~1.3 s) loads when training; ``tests/train/test_lean_ppo.py``
checks the update and sampling against rsl-rl's own ``PPO``.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from kelab.train.adam import Adam
from kelab.train.backprop import SharedTrunkPass, network_pass
from kelab.train.config import TrainConfig
from kelab.train.nets import PolicyNet
from kelab.train.storage import RolloutStorage
from kelab.train.weights import load_model_state, load_optimizer_state, training_state

if TYPE_CHECKING:
    from kelab.train.checkpoint import Checkpoint

__all__ = [
    "FinalObsPPO",
    "build_actor",
    "build_algorithm",
    "build_critic",
    "deterministic_actions",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _clip_grad_norm(params: list[torch.nn.Parameter], max_norm: float) -> None:
    """``torch.nn.utils.clip_grad_norm_`` in a few ops for many small tensors.

    The same scaling (``max_norm / (norm + 1e-6)`` when below 1, the norm taken over all
    the gradients together), from one norm of their concatenation, where torch's takes a
    norm per tensor. The multiply is one public ``mul_`` per tensor: torch's private
    ``_foreach_mul_`` gives the same bits and saved ~30 us of a ~20 ms mini-batch (#38).
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    norm = torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))
    coef = float(max_norm / (norm + 1e-6))
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)


def _gaussian_log_prob(z: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Gaussian log-density of ``a`` summed over the last dim, from ``(a - mean) / std``."""
    return (z.square().mul(-0.5) - log_std - _LOG_SQRT_2PI).sum(-1)


def deterministic_actions(actor: PolicyNet, obs: torch.Tensor) -> torch.Tensor:
    """The actor's deterministic output (the Gaussian's mean) for ``(N, obs_dim)`` obs.

    Image observations ``(N, H, W, C)`` are taken flat, as the env's adapter hands them.
    """
    if obs.dim() > 2:
        obs = obs.reshape(obs.shape[0], -1)
    return actor.mlp(actor.obs_normalizer(obs))


def build_actor(config: TrainConfig, obs_dim: int, act_dim: int) -> PolicyNet:
    """The Gaussian policy: (normaliser ->) (convolutions ->) MLP -> action means, learnt std."""
    return PolicyNet(
        obs_dim,
        act_dim,
        config.actor_hidden_dims,
        config.activation,
        config.obs_normalization,
        init_std=float(config.init_noise_std),
        cnn=config.cnn,
        image=config.image,
    )


def build_critic(config: TrainConfig, obs_dim: int) -> PolicyNet:
    """The value network: (normaliser ->) (convolutions ->) MLP -> one value."""
    return PolicyNet(
        obs_dim,
        1,
        config.critic_hidden_dims,
        config.activation,
        config.obs_normalization,
        cnn=config.cnn,
        image=config.image,
    )


class _Acted(NamedTuple):
    """What :meth:`FinalObsPPO.act` decided, kept for :meth:`FinalObsPPO.process_env_step`."""

    observations: torch.Tensor
    actions: torch.Tensor
    values: torch.Tensor
    actions_log_prob: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor


class _LossHead(NamedTuple):
    """One mini-batch's PPO loss terms and the loss's gradient at the networks' outputs."""

    surrogate: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    grad_mean: torch.Tensor
    grad_std: torch.Tensor
    grad_values: torch.Tensor


class FinalObsPPO:
    """PPO (rsl-rl-lib's algorithm) bootstrapping time-limit endings from the final observation.

    ``extras["time_outs"]`` marks the copies whose episode ended by truncation alone;
    ``extras["final_obs"]`` holds their final observations. Their reward gets
    ``gamma * V(final_obs)`` (the critic's current estimate), and the episode is then cut
    like any other ending. The arithmetic is rsl-rl's, on plain tensors (the module
    docstring); ``tests/train/test_lean_ppo.py`` checks it against rsl-rl's own ``PPO``.

    Args:
        actor: The policy (:func:`build_actor`).
        critic: The value network (:func:`build_critic`).
        storage: Where a rollout goes.
        config: The PPO settings (epochs, mini-batches, clip, gamma, lambda, loss weights,
            learning rate and its schedule, gradient clip), read once here.
        device: Where tensors live (``"cpu"``).

    Attributes:
        use_clipped_value_loss: Clip the value loss around the old values (rsl-rl's
            default, True).
    """

    sample_generator: torch.Generator | None
    """Where action noise comes from: None is torch's global generator (rsl-rl's own
    ``act``); a private generator lets a rollout run beside an update that draws from the
    global one (``TrainConfig.overlap_rollout``) and stay bit-identical run to run."""

    update_generator: torch.Generator | None
    """Where the update's mini-batch order comes from: None is torch's global generator
    (rsl-rl's own ``update``); the overlapped update (``TrainConfig.overlap_rollout``)
    gets a private one, so it draws the same numbers in the learner process as in a
    thread of the trainer's, whatever else in the trainer's process draws."""

    lagged: bool
    """The rollouts were collected by an earlier policy than the one updated (one
    iteration of lag, ``TrainConfig.overlap_rollout``). The update then takes the policy
    before it as the proximal policy (decoupled PPO, Hilton et al. 2021): the ratio is
    clipped around it and the learning-rate schedule reads the KL from it, and each
    sample's advantage is weighted by ``pi_prox / pi_behaviour`` (capped at 2). Without
    it the KL from the acting policy includes the previous update's change, and the
    adaptive schedule cut the learning rate ~10x (Humanoid-v0, measured)."""

    def __init__(
        self,
        actor: PolicyNet,
        critic: PolicyNet,
        storage: RolloutStorage,
        config: TrainConfig,
        device: str = "cpu",
    ) -> None:
        self.max_learning_rate = float(config.max_learning_rate)
        self.sample_generator = None
        self.update_generator = None
        self.lagged = False
        self.device = device
        self.actor = actor.to(device)
        self.critic = critic.to(device)
        self.storage = storage
        self.num_learning_epochs = config.num_learning_epochs
        self.num_mini_batches = config.num_mini_batches
        self.clip_param = config.clip_param
        self.gamma = config.gamma
        self.lam = config.lam
        self.value_loss_coef = config.value_loss_coef
        self.entropy_coef = config.entropy_coef
        self.max_grad_norm = config.max_grad_norm
        self.schedule = config.schedule
        self.desired_kl = config.desired_kl
        self.use_clipped_value_loss = True
        self.learning_rate = config.learning_rate
        # rsl-rl's Adam over the actor's then the critic's parameters, its update fused
        # (a trunk the critic shares with the actor, TrainConfig.share_cnn, once)
        actor_ids = {id(p) for p in self.actor.parameters()}
        own = [p for p in self.critic.parameters() if id(p) not in actor_ids]
        self._critic_own = own
        self.shared_trunk = len(own) < len(list(self.critic.parameters()))
        """The critic's convolutions are the actor's (``TrainConfig.share_cnn``)."""
        self.optimizer = Adam(chain(self.actor.parameters(), own), self.learning_rate)
        self._acted: _Acted | None = None

    def train_mode(self) -> None:
        """Training mode: the normalisers learn from each update's rollout."""
        self.actor.train()
        self.critic.train()

    def start_rollout(self) -> None:
        """Empty the rollout storage (a rollout cut short starts over)."""
        self.storage.clear()
        self._acted = None

    def deterministic_actions(self, obs: torch.Tensor) -> torch.Tensor:
        """The actor's deterministic actions (the Gaussian's mean) for raw observations."""
        return deterministic_actions(self.actor, obs)

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """``actor.*``, ``critic.*`` and ``optimizer.*`` tensors, and the optimizer's JSON."""
        return training_state(self.actor, self.critic, self.optimizer)

    def load_training_state(self, checkpoint: Checkpoint) -> None:
        """Continue from ``checkpoint``'s networks, optimizer and learning rate."""
        path = checkpoint.path
        load_model_state(self.actor, checkpoint.prefixed("actor"), path, "actor")
        load_model_state(self.critic, checkpoint.prefixed("critic"), path, "critic")
        load_optimizer_state(
            self.optimizer, checkpoint.meta["optimizer"], checkpoint.prefixed("optimizer"), path
        )
        self.learning_rate = float(self.optimizer.param_groups[0]["lr"])

    def action_std(self) -> torch.Tensor:
        """The Gaussian's standard deviation (clamped to its range)."""
        assert self.actor.distribution is not None  # build_actor gives it one
        return self.actor.distribution.std()

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for ``(num_envs, obs_dim)`` observations; remember the transition.

        The noise comes from :attr:`sample_generator` (torch's global one when None).
        """
        if self.shared_trunk:  # the trunk once (no normaliser: TrainConfig.share_cnn)
            k = self.actor.trunk_size
            features = self.actor.mlp[:k](obs)
            mean, values = self.actor.mlp[k:](features), self.critic.mlp[k:](features)
        else:
            mean, values = deterministic_actions(self.actor, obs), None
        std = self.action_std().expand_as(mean)
        noise = torch.randn(mean.shape, generator=self.sample_generator, dtype=mean.dtype)
        actions = mean + std * noise
        if values is None:
            values = self.critic(obs)
        # (a - mean) / std is the noise itself
        log_prob = _gaussian_log_prob(noise, std.log())
        self._acted = _Acted(obs, actions, values, log_prob, mean, std)
        return actions

    def process_env_step(
        self,
        obs: torch.Tensor,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        extras: dict[str, torch.Tensor],
    ) -> None:
        """Record the outcome of the last :meth:`act` (see the class docstring).

        Raises:
            RuntimeError: Without an :meth:`act` before it.
            ValueError: When ``extras["time_outs"]`` marks endings but no ``final_obs`` came.
        """
        acted, self._acted = self._acted, None
        if acted is None:
            raise RuntimeError("FinalObsPPO.process_env_step: call act(obs) before each env step")
        time_outs = extras.get("time_outs")
        if time_outs is not None and bool(time_outs.any()):
            final = extras.get("final_obs")
            if final is None:
                raise ValueError(
                    "extras['time_outs'] marks time-limit endings but extras['final_obs'] is "
                    "missing; the env adapter must pass the final observations"
                )
            ids = torch.nonzero(time_outs, as_tuple=False).squeeze(1)
            values = self.critic(final[ids]).detach().squeeze(1)
            rewards = rewards.clone()
            rewards[ids] += self.gamma * values.to(rewards.dtype)
        self.storage.add(
            acted.observations,
            acted.actions,
            rewards,
            dones,
            acted.values,
            acted.actions_log_prob,
            (acted.mean, acted.std),
        )

    def compute_returns(self, obs: torch.Tensor) -> None:
        """Returns (GAE) and normalised advantages, written into the storage's tensors.

        ``obs`` are the observations after the rollout's last step, whose values bootstrap
        it. The storage's tensors are filled in place, so one in shared memory
        (:class:`~kelab.train.learner.LearnerProcess`) stays shared.
        """
        st = self.storage
        last_values = self.critic(obs).detach()
        advantage: torch.Tensor | float = 0
        last = st.num_transitions_per_env - 1
        for step in range(last, -1, -1):
            next_values = last_values if step == last else st.values[step + 1]
            not_terminal = 1.0 - st.dones[step].float()
            # rsl-rl's expressions, in its order of operations (the same bits)
            delta = st.rewards[step] + not_terminal * self.gamma * next_values - st.values[step]
            advantage = delta + not_terminal * self.gamma * self.lam * advantage
            st.returns[step] = advantage + st.values[step]
        advantages = st.returns - st.values
        st.advantages.copy_((advantages - advantages.mean()) / (advantages.std() + 1e-8))

    def update(self) -> dict[str, float]:
        """The PPO update of rsl-rl-lib, on plain tensors (see the module docstring).

        Per mini-batch, as rsl-rl: Gaussian log-probabilities and entropy, the adaptive
        learning rate from KL(old || new), the clipped surrogate, the clipped value loss,
        gradient clipping per network, one Adam step; then the observation normalisers
        learn from the rollout. With a shared trunk (``TrainConfig.share_cnn``) the trunk
        runs once, both losses' gradients go back through it together, and one clip
        covers both networks.

        Returns:
            Mean ``value``, ``surrogate`` and ``entropy`` over the mini-batches.
        """
        st = self.storage
        n = st.num_envs * st.num_transitions_per_env
        size = n // self.num_mini_batches
        order = torch.randperm(
            self.num_mini_batches * size, generator=self.update_generator, device=self.device
        )
        raw = st.observations.flatten(0, 1)
        with torch.no_grad():  # the normalisers change only after the update
            x_actor = self.actor.obs_normalizer(raw)
            x_critic = self.critic.obs_normalizer(raw)
        actions = st.actions.flatten(0, 1)
        advantages = st.advantages.flatten(0, 1).squeeze(-1)
        old_logp = st.actions_log_prob.flatten(0, 1).squeeze(-1)
        old_mean = st.distribution_params[0].flatten(0, 1)
        old_std = st.distribution_params[1].flatten(0, 1)
        if self.lagged:  # the policy before this update is the proximal one
            with torch.no_grad():
                old_mean = self.actor.mlp(x_actor)  # obs normalised above, once
                std = self.action_std()
                prox_logp = _gaussian_log_prob((actions - old_mean) / std, std.log())
                advantages = advantages * torch.exp(prox_logp - old_logp).clamp(max=2.0)
                old_logp, old_std = prox_logp, std.expand_as(old_mean)
        data = (
            x_actor,
            x_critic,
            actions,
            st.values.flatten(0, 1),
            st.returns.flatten(0, 1),
            advantages,
            old_logp,
            old_mean,
            old_std,
        )
        actor_params = list(self.actor.parameters())
        critic_params = list(self.critic.parameters())
        actor_pass = network_pass(self.actor.mlp)
        critic_pass = network_pass(self.critic.mlp)
        shared = None
        if self.shared_trunk:  # one trunk: run once, both losses' gradients through it
            k = self.actor.trunk_size
            shared = SharedTrunkPass(self.actor.mlp[:k], self.actor.mlp[k:], self.critic.mlp[k:])
            # one gradient clip over both networks (their gradients meet in the trunk)
            actor_params = [*actor_params, *self._critic_own]
        dist = self.actor.distribution
        assert dist is not None  # build_actor gives it one
        low, high = dist.std_range
        adaptive = self.desired_kl is not None and self.schedule == "adaptive"
        totals = torch.zeros(3)
        for _ in range(self.num_learning_epochs):
            for i in range(self.num_mini_batches):
                if self.num_mini_batches == 1 and size == n:
                    batch = data  # the whole rollout: the order does not matter
                else:
                    idx = order[i * size : (i + 1) * size]
                    batch = tuple(d[idx] for d in data)
                xa, xc, actions, old_values, returns, adv, old_logp, old_mean, old_std = batch
                if shared is not None:
                    mean, values = shared.forward(xa)  # xa is xc: no normaliser
                else:
                    mean = actor_pass.forward(xa)
                    values = critic_pass.forward(xc)
                with torch.no_grad():
                    std_param = dist.std_param
                    std = std_param.clamp(low, high)
                    if adaptive:
                        self._adapt_learning_rate(mean, std, old_mean, old_std)
                    head = self._loss_head(mean, std, values, batch)
                    if shared is not None:
                        shared.backward(head.grad_mean, head.grad_values)
                    else:
                        actor_pass.backward(head.grad_mean)
                        critic_pass.backward(head.grad_values)
                    # clamp's gradient passes where the parameter is inside the range
                    inside = (std_param >= low) & (std_param <= high)
                    std_param.grad = torch.where(inside, head.grad_std, 0.0)
                _clip_grad_norm(actor_params, self.max_grad_norm)
                if shared is None:
                    _clip_grad_norm(critic_params, self.max_grad_norm)
                self.optimizer.step()
                totals += torch.stack((head.value_loss, head.surrogate, head.entropy))
        self.actor.update_normalization(raw)
        self.critic.update_normalization(raw)
        self.storage.clear()
        value, surrogate_mean, entropy_mean = (
            totals / (self.num_learning_epochs * self.num_mini_batches)
        ).tolist()
        return {"value": value, "surrogate": surrogate_mean, "entropy": entropy_mean}

    def _adapt_learning_rate(
        self, mean: torch.Tensor, std: torch.Tensor, old_mean: torch.Tensor, old_std: torch.Tensor
    ) -> None:
        """rsl-rl's adaptive schedule: KL(old || new) against ``desired_kl``, per mini-batch."""
        log_std = std.log()
        kl = (
            log_std - old_std.log()
            + (old_std.square() + (old_mean - mean).square()) / (2.0 * std.square())
            - 0.5
        ).sum(-1).mean()  # fmt: skip
        kl_mean = float(kl)
        if kl_mean > self.desired_kl * 2.0:
            self.learning_rate = max(1e-5, self.learning_rate / 1.5)
        elif 0.0 < kl_mean < self.desired_kl / 2.0:
            self.learning_rate = min(1e-2, self.learning_rate * 1.5)
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    def _loss_head(
        self,
        mean: torch.Tensor,
        std: torch.Tensor,
        values: torch.Tensor,
        batch: tuple[torch.Tensor, ...],
    ) -> _LossHead:
        """rsl-rl's PPO loss on one mini-batch, and its gradient at the networks' outputs.

        ``loss = surrogate + value_loss_coef * value_loss - entropy_coef * entropy`` with
        the clipped surrogate and (optionally) clipped value loss. The gradients are
        autograd's, written out: ``torch.max`` sends the gradient to the larger side (half
        to each on a tie) and ``clamp`` passes it inside the range (bounds included).
        """
        _, _, actions, old_values, returns, adv, old_logp, _, _ = batch
        clip = self.clip_param
        log_std = std.log()
        z = (actions - mean) / std
        ratio = torch.exp(_gaussian_log_prob(z, log_std) - old_logp)
        unclipped = -adv * ratio
        clipped = -adv * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
        surrogate = torch.max(unclipped, clipped).mean()
        # Where the clipped side is strictly larger the ratio is outside the range (no
        # gradient); inside it both sides are equal and together pass -adv.
        grad_logp = torch.where(unclipped >= clipped, unclipped, 0.0) / adv.numel()
        grad_mean = grad_logp.unsqueeze(-1) * z / std  # d logp / d mean = z / std
        # d logp / d std = (z^2 - 1) / std; d entropy / d std = 1 / std
        grad_std = ((grad_logp.unsqueeze(-1) * (z.square() - 1.0)).sum(0) - self.entropy_coef) / std
        entropy = (0.5 + _LOG_SQRT_2PI + log_std).sum()  # the same for every sample
        scale = 2.0 * self.value_loss_coef / values.numel()
        if self.use_clipped_value_loss:
            change = values - old_values
            clipped_values = old_values + change.clamp(-clip, clip)
            plain_sq = (values - returns).square()
            clipped_sq = (clipped_values - returns).square()
            value_loss = torch.max(plain_sq, clipped_sq).mean()
            share = torch.where(
                plain_sq > clipped_sq, 1.0, torch.where(plain_sq < clipped_sq, 0.0, 0.5)
            )
            inside = (change >= -clip) & (change <= clip)
            grad_values = scale * (
                share * (values - returns)
                + torch.where(inside, (1.0 - share) * (clipped_values - returns), 0.0)
            )
        else:
            value_loss = (returns - values).square().mean()
            grad_values = scale * (values - returns)
        return _LossHead(surrogate, value_loss, entropy, grad_mean, grad_std, grad_values)

    @property
    def learning_rate(self) -> float:
        """The current learning rate, never above ``max_learning_rate``.

        rsl-rl's adaptive schedule raises it up to 1e-2 while the KL stays small; a lower
        cap (``TrainConfig.max_learning_rate``) keeps a converged policy from steps that large.
        """
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._learning_rate = min(float(value), self.max_learning_rate)


def build_algorithm(
    config: TrainConfig, obs_dim: int, act_dim: int, num_envs: int, device: str = "cpu"
) -> FinalObsPPO:
    """Actor, critic, rollout storage and the PPO update, as ``config`` says.

    The builder :data:`kelab.train.config.ALGORITHMS` names for ``"PPO"``.
    """
    actor = build_actor(config, obs_dim, act_dim)
    critic = build_critic(config, obs_dim)
    if config.share_cnn:
        critic.share_convolutions(actor)
    storage = RolloutStorage(num_envs, config.num_steps_per_env, obs_dim, act_dim)
    return FinalObsPPO(actor, critic, storage, config, device)
