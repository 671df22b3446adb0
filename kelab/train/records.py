"""The typed records the training modules hand each other (no torch on import).

:class:`IterationRow` is one iteration's metrics (the columns of ``metrics.csv``, what a
``train()`` callback receives as a dict); :class:`TrainState` is what a checkpoint holds
(tensors and JSON); :class:`Judged` is an evaluation's verdict with the iteration it
judged.

Example:
    >>> row = IterationRow(
    ...     iteration=1, env_steps=64, wall_time_s=0.5, mean_return=2.5, success_rate=0.0,
    ...     episodes=3, env_steps_per_s=128.0, collect_steps_per_s=256.0,
    ...     learning_rate=1e-3, action_std=1.0, value_loss=0.1, surrogate_loss=0.0,
    ...     entropy=1.4,
    ... )
    >>> from kelab.train.target import TargetVerdict
    >>> stopped = TargetVerdict(passed=False, judged=6, failed=6, episodes=100, full=True)
    >>> judged = row.with_verdict(stopped, 1).as_dict()
    >>> judged["eval_success_rate"], judged["eval_stopped_early"], judged["eval_episodes"]
    (0.94, True, 100)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch

    from kelab.train.target import TargetVerdict

__all__ = ["IterationRow", "Judged", "TrainState"]


@dataclass(frozen=True)
class IterationRow:
    """The metrics of one training iteration (see :data:`kelab.train.runlog.METRICS`).

    Attributes:
        iteration: Iterations trained so far (this one included).
        env_steps: Env steps collected so far.
        wall_time_s: Wall seconds trained so far (over every call and resume).
        mean_return: Mean return of the recent episodes (NaN before any ended).
        success_rate: Their success rate (None without a success rule or episodes).
        episodes: Episodes finished so far.
        env_steps_per_s: Env steps per second of this ``train()`` call.
        collect_steps_per_s: The same, over the rollout collection alone.
        learning_rate: The learning rate after this iteration's update.
        action_std: Mean standard deviation of the action noise.
        value_loss: Mean value loss of the update.
        surrogate_loss: Mean surrogate loss of the update.
        entropy: Mean entropy of the update.
        eval_success_rate: The success rate of the verdict that arrived in this iteration
            (None: none came): measured over its ``eval_episodes``, or, when
            ``eval_stopped_early``, the most it can be (see
            :attr:`~kelab.train.target.TargetVerdict.success_rate`).
        eval_iteration: The iteration whose policy that verdict judged.
        eval_episodes: The episodes that rate is over (the pre-check's when it stopped
            the check, else ``TrainConfig.eval_episodes``).
        eval_stopped_early: The check stopped before all of them ended (the target was out
            of reach): ``eval_success_rate`` is an upper bound, not a measurement.
    """

    iteration: int
    env_steps: int
    wall_time_s: float
    mean_return: float
    success_rate: float | None
    episodes: int
    env_steps_per_s: float
    collect_steps_per_s: float
    learning_rate: float
    action_std: float
    value_loss: float
    surrogate_loss: float
    entropy: float
    eval_success_rate: float | None = None
    eval_iteration: int | None = None
    eval_episodes: int | None = None
    eval_stopped_early: bool | None = None

    def with_verdict(self, verdict: TargetVerdict | None, iteration: int | None) -> IterationRow:
        """This row with the verdict that arrived in its iteration (None: none came)."""
        if verdict is None:
            return dataclasses.replace(
                self, eval_success_rate=None, eval_iteration=None, eval_episodes=None,
                eval_stopped_early=None,
            )  # fmt: skip
        return dataclasses.replace(
            self,
            eval_success_rate=verdict.success_rate,
            eval_iteration=iteration,
            eval_episodes=verdict.episodes,
            eval_stopped_early=verdict.stopped_early,
        )

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict, keys in ``metrics.csv``'s column order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class TrainState(NamedTuple):
    """What a checkpoint holds: named tensors (safetensors) and its JSON metadata."""

    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any]


class Judged(NamedTuple):
    """An evaluation's outcome, with the iteration it judged.

    Attributes:
        verdict: The deterministic policy's verdict (None: judged by the training success
            rate of the recent episodes, without ``eval_every``).
        row: The metrics row of the iteration judged.
        state: That iteration's state (None: the trainer's current one).
    """

    verdict: TargetVerdict | None
    row: IterationRow
    state: TrainState | None
