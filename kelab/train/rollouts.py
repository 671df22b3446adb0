"""Collecting rollouts and running updates: one training iteration's work.

:class:`Rollouts` steps the env with an :class:`~kelab.train.algorithm.Algorithm` and
updates it. With ``TrainConfig.overlap_rollout`` a second instance of the algorithm (the
*collector*, synced after every update) gathers the next rollout while the update runs
beside it (:class:`~kelab.train.learner.OverlappedUpdates`: a learner process or a
thread), and the two swap rollout storages each iteration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from kelab.errors import UserError
from kelab.train.algorithm import Algorithm, Overlappable, build_algorithm
from kelab.train.learner import OverlappedUpdates

if TYPE_CHECKING:
    from kelab.train._ctrl_c import StopRequest
    from kelab.train.adapter import RslVecEnv
    from kelab.train.config import TrainConfig
    from kelab.train.episodes import RecentEpisodes

__all__ = ["Rollouts"]


class Rollouts:
    """The rollouts and updates of one trainer.

    Args:
        vec: The env, in rsl-rl's vectorised form.
        alg: The algorithm being trained.
        name: Its name in :data:`~kelab.train.config.ALGORITHMS` (the collector is built
            the same way).
        config: The training config.
        episodes: Where finished episodes are recorded.
        on_collected: Called with the env steps of every rollout collected.
        obs_dim: Observation size.
        act_dim: Action size.
        seed: The run's seed (the collector's action noise).
        device: The torch device.

    Attributes:
        collector: The second instance acting while ``alg`` updates (overlap only).
        updates: The update running beside the rollout (overlap only).
        ready: The collector holds a rollout no update has used yet.
        collect_time: Wall seconds of rollout collection in this ``train()`` call.
        stop: The Ctrl-C request of the ``train()`` call running (checked between steps).
    """

    def __init__(
        self,
        vec: RslVecEnv,
        alg: Algorithm,
        name: str,
        config: TrainConfig,
        episodes: RecentEpisodes,
        on_collected: Callable[[int], None],
        *,
        obs_dim: int,
        act_dim: int,
        seed: int,
        device: str,
    ) -> None:
        self.vec = vec
        self.alg = alg
        self.config = config
        self.episodes = episodes
        self._on_collected = on_collected
        self.collector: Overlappable | None = None
        self.updates: OverlappedUpdates | None = None
        self.ready = False
        self.collect_time = 0.0
        self.stop: StopRequest | None = None
        if not config.overlap_rollout:
            return
        if not isinstance(alg, Overlappable):
            raise UserError(
                f"TrainConfig.overlap_rollout needs an algorithm with a shared rollout "
                f"storage (kelab.train.algorithm.Overlappable), got {name!r}; set "
                "overlap_rollout=False"
            )
        alg.lagged = True  # its rollouts come from the policy one update back
        collector = build_algorithm(name, config, obs_dim, act_dim, vec.num_envs, device)
        assert isinstance(collector, Overlappable)  # built like alg
        collector.sample_generator = torch.Generator().manual_seed(seed)
        collector.train_mode()
        self.collector = collector
        self.sync()
        # the update's own generator, from where torch's global one is once the networks
        # are built: the same draws as the global one gave the update before it had its own
        alg.update_generator = torch.Generator()
        alg.update_generator.set_state(torch.get_rng_state())
        self.updates = OverlappedUpdates(
            alg, [alg.storage, collector.storage], config.torch_threads
        )

    def sync(self) -> None:
        """Give the collector the learner's current actor and critic (and normalisers)."""
        if self.collector is not None:
            assert isinstance(self.alg, Overlappable)
            self.collector.actor.load_state_dict(self.alg.actor.state_dict())
            self.collector.critic.load_state_dict(self.alg.critic.state_dict())

    def prime(self) -> None:
        """Collect the first rollout of a call that overlaps (later ones overlap updates).

        After a call's planned last iteration the collector still holds the policy from
        before that update, which would have collected it in one longer call.
        """
        if self.collector is not None and not self.ready:
            self.collect(self.collector)
            self.sync()

    def iterate(self, more: bool) -> dict[str, float]:
        """One iteration: a rollout and an update; the update's losses.

        Overlapped, it learns from the rollout just collected while the collector gathers
        the next one with the policy it acted with; not after the last iteration
        (``more`` False: the next call collects it, with that policy, so calls split any
        way give the same run, and a run ending here collects nothing it won't use).
        """
        if self.collector is None or self.updates is None:
            self.collect(self.alg)
            return self.alg.update()
        assert isinstance(self.alg, Overlappable)
        self.alg.storage, self.collector.storage = self.collector.storage, self.alg.storage
        self.ready = False
        self.updates.start()
        if more:
            self.collect(self.collector)
        losses = self.updates.finish()
        if more:
            self.sync()
        return losses

    def finish_pending(self) -> tuple[dict[str, float], bool]:
        """After a call's loop: let an update left running beside it finish, or drop it.

        Interrupted beside an update, it is waited for, unless Ctrl-C was pressed twice
        and it runs in the learner process (dropped: the state before it is saved). A
        thread cannot be dropped (it changes ``alg`` in place): it is always waited for.
        From here on Ctrl-C is held (what follows happens whole).

        Returns:
            The finished update's losses (empty: none finished) and whether Ctrl-C was
            pressed again while waiting for it.
        """
        updates, stop = self.updates, self.stop
        finished: dict[str, float] = {}
        interrupted = False
        pressed_twice = stop is not None and stop.presses >= 2
        if updates is not None and updates.pending:
            if not (pressed_twice and updates.in_process):
                try:  # interrupted beside an update: let it finish
                    finished = updates.finish(reraise=False)
                except KeyboardInterrupt:  # Ctrl-C again: drop it, save the state before it
                    interrupted = True
        if stop is not None:
            stop.hold()  # the loop is over: what follows happens whole
        if updates is not None and updates.pending and not updates.in_process:
            finished = updates.finish(reraise=False)
        return finished, interrupted

    def settle(self) -> None:
        """Drop a pending update in the learner process and end that process (if any)."""
        if self.updates is not None:
            self.updates.settle()

    def collect(self, alg: Algorithm) -> None:
        """One rollout: ``num_steps_per_env`` steps of every copy into ``alg``'s storage."""
        vec, episodes, stop = self.vec, self.episodes, self.stop
        t0 = time.perf_counter()
        alg.start_rollout()  # a rollout cut short by Ctrl-C starts over
        obs = vec.get_observations()
        with torch.inference_mode():
            for _ in range(self.config.num_steps_per_env):
                if stop is not None and stop.requested:
                    raise KeyboardInterrupt  # Ctrl-C, between two env steps
                actions = alg.act(obs)
                obs, rewards, dones, extras = vec.step(actions)
                alg.process_env_step(obs, rewards, dones, extras)
                episodes.add(vec.last_info)
            self.collect_time += time.perf_counter() - t0
            alg.compute_returns(obs)
        self._on_collected(vec.num_envs * self.config.num_steps_per_env)
        self.ready = alg is self.collector
