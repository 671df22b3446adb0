"""PPO on rsl-rl-lib: the policy networks and the one change KELab makes to the update.

rsl-rl-lib bootstraps a time-limit ending with the value of the observation the action
was taken in (``gamma * V(s_t)``), because vectorised environments usually hand back only
the next episode's first observation. KELab's envs give the real final observation
(``info["final_obs"]``), so :class:`FinalObsPPO` adds ``gamma * V(s_final)`` instead.
"""

from __future__ import annotations

from typing import Any

import torch
from rsl_rl.algorithms import PPO
from rsl_rl.models import MLPModel
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict

from kelab.train.adapter import OBS_GROUP
from kelab.train.config import TrainConfig

__all__ = ["FinalObsPPO", "build_actor", "build_algorithm", "build_critic"]

_GROUPS = {"actor": [OBS_GROUP], "critic": [OBS_GROUP]}


def _example_obs(obs_dim: int) -> TensorDict:
    return TensorDict({OBS_GROUP: torch.zeros(1, obs_dim)}, batch_size=[1])


def build_actor(config: TrainConfig, obs_dim: int, act_dim: int) -> MLPModel:
    """The Gaussian policy: (normaliser ->) MLP -> action means, learnt std."""
    return MLPModel(
        _example_obs(obs_dim),
        _GROUPS,
        "actor",
        act_dim,
        hidden_dims=list(config.actor_hidden_dims),
        activation=config.activation,
        obs_normalization=config.obs_normalization,
        distribution_cfg={
            "class_name": "GaussianDistribution",
            "init_std": float(config.init_noise_std),
            "std_type": "scalar",
        },
    )


def build_critic(config: TrainConfig, obs_dim: int) -> MLPModel:
    """The value network: (normaliser ->) MLP -> one value."""
    return MLPModel(
        _example_obs(obs_dim),
        _GROUPS,
        "critic",
        1,
        hidden_dims=list(config.critic_hidden_dims),
        activation=config.activation,
        obs_normalization=config.obs_normalization,
    )


class FinalObsPPO(PPO):
    """rsl-rl-lib's PPO bootstrapping time-limit endings from the final observation.

    ``extras["time_outs"]`` marks the copies whose episode ended by truncation alone;
    ``extras["final_obs"]`` holds their final observations. Their reward gets
    ``gamma * V(final_obs)`` (the critic's current estimate), and the episode is then cut
    like any other ending.
    """

    sample_generator: torch.Generator | None
    """Where action noise comes from: None is torch's global generator (rsl-rl's own
    ``act``); a private generator lets a rollout run beside an update that draws from the
    global one (``TrainConfig.overlap_rollout``) and stay bit-identical run to run."""

    def __init__(self, *args: Any, max_learning_rate: float = 1e-2, **kwargs: Any) -> None:
        self.max_learning_rate = float(max_learning_rate)
        self.sample_generator = None
        super().__init__(*args, **kwargs)

    def act(self, obs: TensorDict) -> torch.Tensor:
        """Sample actions and record the transition.

        rsl-rl's ``act``, with the noise drawn from :attr:`sample_generator` when one is set.
        """
        if self.sample_generator is None:
            return super().act(obs)
        t = self.transition
        t.hidden_states = (self.actor.get_hidden_state(), self.critic.get_hidden_state())
        mean = self.actor(obs)  # the deterministic output: the Gaussian's mean
        self.actor.distribution.update(mean)
        noise = torch.randn(mean.shape, generator=self.sample_generator, dtype=mean.dtype)
        t.actions = (mean + self.actor.distribution.std * noise).detach()
        t.values = self.critic(obs).detach()
        t.actions_log_prob = self.actor.get_output_log_prob(t.actions).detach()
        t.distribution_params = tuple(p.detach() for p in self.actor.output_distribution_params)
        t.observations = obs
        return t.actions

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

    def process_env_step(
        self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]
    ) -> None:
        """Record one env step (see the class docstring)."""
        rest = {k: v for k, v in extras.items() if k not in ("time_outs", "final_obs")}
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
        super().process_env_step(obs, rewards, dones, rest)


def build_algorithm(
    config: TrainConfig, obs_dim: int, act_dim: int, num_envs: int, device: str = "cpu"
) -> FinalObsPPO:
    """Actor, critic, rollout storage and the PPO update, as ``config`` says."""
    actor = build_actor(config, obs_dim, act_dim)
    critic = build_critic(config, obs_dim)
    storage = RolloutStorage(
        "rl", num_envs, config.num_steps_per_env, _example_obs(obs_dim).expand(num_envs),
        [act_dim], device,
    )  # fmt: skip
    return FinalObsPPO(
        actor,
        critic,
        storage,
        num_learning_epochs=config.num_learning_epochs,
        num_mini_batches=config.num_mini_batches,
        clip_param=config.clip_param,
        gamma=config.gamma,
        lam=config.lam,
        value_loss_coef=config.value_loss_coef,
        entropy_coef=config.entropy_coef,
        learning_rate=config.learning_rate,
        max_grad_norm=config.max_grad_norm,
        schedule=config.schedule,
        desired_kl=config.desired_kl,
        max_learning_rate=config.max_learning_rate,
        device=device,
    )
