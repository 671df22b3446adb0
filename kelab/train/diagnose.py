"""What a researcher looks for when a run does not learn, said while the run goes on.

:class:`TrainingWatch` reads each iteration's metrics row (`IterationRow`) and reports a
:class:`Finding` the first time a run shows one of three known failures:

- **the action noise collapsed**: the policy's standard deviation fell below
  ``NOISE_FLOOR`` (and below half of ``init_noise_std``) while the success rate is still
  under the target: the policy has stopped exploring, so it will rarely find what it is
  missing (a task that learned to park short of its goal);
- **the value loss exploded**: it is not finite, or it is over ``EXPLOSION_FACTOR`` times
  its median of the previous iterations (and over ``EXPLOSION_FLOOR``) for two
  iterations running: the critic cannot follow the returns;
- **the deterministic policy does worse than the noisy one**: an evaluation
  (``eval_every``) succeeded ``DIVERGENCE`` or more below the training episodes: the
  exploration noise does part of the work and the policy's mean action falls short. An
  evaluation that stopped early (the target out of reach) measured no rate, only the most
  it can be: it is reported only when even that bound is ``DIVERGENCE`` below, and said
  as a bound.

`kelab.train.trainer.RLTrainer` warns each finding as a :class:`TrainingWarning` at the
iteration it happens (``kelab train`` prints it as a ``kelab: warning: ...`` line) and
keeps them in ``trainer.findings``. docs/training.md, "When training does not reach the
target", says what to change for each.

Example:
    >>> from kelab.train.config import TrainConfig
    >>> from kelab.train.records import IterationRow
    >>> watch = TrainingWatch(TrainConfig(init_noise_std=1.0, success_target=0.9))
    >>> def row(i, std):
    ...     return IterationRow(
    ...         iteration=i, env_steps=0, wall_time_s=0.0, mean_return=1.0, success_rate=0.1,
    ...         episodes=1, env_steps_per_s=1.0, collect_steps_per_s=1.0, learning_rate=1e-3,
    ...         action_std=std, value_loss=0.1, surrogate_loss=0.0, entropy=0.0,
    ...     )
    >>> watch.observe(row(1, 0.5))
    []
    >>> [f.kind for f in watch.observe(row(2, 0.07))]
    ['noise collapsed']
    >>> watch.observe(row(3, 0.05))  # said once
    []
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kelab.train.config import TrainConfig
    from kelab.train.records import IterationRow

__all__ = [
    "DIVERGENCE",
    "EXPLOSION_FACTOR",
    "EXPLOSION_FLOOR",
    "NOISE_FLOOR",
    "Finding",
    "TrainingWarning",
    "TrainingWatch",
]

NOISE_FLOOR = 0.1
"""Mean action noise (policy std, actions in [-1, 1]) below which exploration has stopped."""
EXPLOSION_FACTOR = 100.0
"""How many times its recent median the value loss must reach to have exploded."""
EXPLOSION_FLOOR = 100.0
"""The least value loss called exploded (a jump from 1e-4 to 1e-2 is no explosion)."""
DIVERGENCE = 0.3
"""How far below the training success rate an evaluation must fall to be reported."""
_WINDOW = 20  # iterations whose median value loss the current one is compared with
_MIN_WINDOW = 5
_HOW = "docs/training.md, 'When training does not reach the target'"


class TrainingWarning(UserWarning):
    """A run shows a known failure (``warnings.filterwarnings(..., TrainingWarning)``)."""


@dataclass(frozen=True)
class Finding:
    """A known failure a run showed.

    Attributes:
        kind: ``"noise collapsed"``, ``"value loss exploded"`` or ``"evaluation below
            training"``.
        iteration: The iteration it was seen at.
        message: What was seen, what it means and what to change (one line).
    """

    kind: str
    iteration: int
    message: str


class TrainingWatch:
    """Reads each iteration's row; reports each kind of :class:`Finding` once.

    Without a success rule (no success rate) the noise collapse cannot be told from a
    policy that has converged, and is not reported.

    Args:
        config: The run's training config (its noise, target and evaluations).
    """

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.findings: list[Finding] = []
        self._said: set[str] = set()
        self._value_losses: deque[float] = deque(maxlen=_WINDOW)
        self._exploding = 0  # iterations in a row over the explosion threshold
        self._evaluated: IterationRow | None = None  # the row of the latest evaluation

    def observe(self, row: IterationRow) -> list[Finding]:
        """The findings of the iteration ``row`` (each kind reported once per watch).

        Args:
            row: The iteration's metrics, with the verdict that arrived in it (if any).

        Returns:
            The new findings (usually none).
        """
        if row.eval_success_rate is not None:
            self._evaluated = row
        found = [
            f
            for f in (self._noise(row), self._value_loss(row), self._divergence(row))
            if f is not None and f.kind not in self._said
        ]
        for finding in found:
            self._said.add(finding.kind)
            self.findings.append(finding)
        return found

    def _success(self, row: IterationRow) -> tuple[float, str] | None:
        """The success rate the target is judged on now, and how to say it.

        For an evaluation that stopped early, the most its rate can be.
        """
        if self.config.eval_every:
            judged = self._evaluated
            if judged is None or judged.eval_success_rate is None:
                return None
            return judged.eval_success_rate, (
                f"the deterministic policy's last evaluation succeeded in {_rate(judged)}"
            )
        if row.success_rate is None:
            return None
        rate = row.success_rate
        return rate, f"the success rate of the recent training episodes is {rate:.0%}"

    def _noise(self, row: IterationRow) -> Finding | None:
        cfg = self.config
        std = row.action_std
        success = self._success(row)
        if (
            success is None
            or not math.isfinite(std)
            or std >= NOISE_FLOOR
            or std >= 0.5 * cfg.init_noise_std
            or success[0] >= cfg.success_target
        ):
            return None
        return Finding(
            "noise collapsed",
            row.iteration,
            f"iteration {row.iteration}: the action noise collapsed (policy std {std:.3f}, "
            f"started at {cfg.init_noise_std:g}) while {success[1]} (target "
            f"{cfg.success_target:.0%}): the policy has nearly stopped exploring and "
            "will rarely find what it misses (e.g. the last centimetres to a goal); make "
            f"that pay in the reward, or keep exploring longer (entropy_coef, now "
            f"{cfg.entropy_coef:g}; init_noise_std) ({_HOW})",
        )

    def _value_loss(self, row: IterationRow) -> Finding | None:
        loss = row.value_loss
        history = list(self._value_losses)
        self._value_losses.append(loss)
        if not math.isfinite(loss):
            return Finding(
                "value loss exploded",
                row.iteration,
                f"iteration {row.iteration}: the value loss is {loss} (not finite): the "
                "critic diverged; lower learning_rate / max_learning_rate, scale the rewards "
                f"down, check them for a term that grows without bound ({_HOW})",
            )
        if len(history) < _MIN_WINDOW:
            return None
        median = statistics.median(history)
        if loss > EXPLOSION_FLOOR and loss > EXPLOSION_FACTOR * max(median, 1e-12):
            self._exploding += 1
        else:
            self._exploding = 0
        if self._exploding < 2:
            return None
        return Finding(
            "value loss exploded",
            row.iteration,
            f"iteration {row.iteration}: the value loss exploded ({loss:.3g}, "
            f"{loss / max(median, 1e-12):,.0f}x its median {median:.3g} over the "
            f"{len(history)} iterations before): the critic cannot follow the returns; "
            "scale the rewards down (returns of order 1-100 suit PPO), check them for a term "
            "that grows without bound, or lower learning_rate / max_learning_rate "
            f"({_HOW})",
        )

    def _divergence(self, row: IterationRow) -> Finding | None:
        # a check that stopped early gives the most its rate can be: below the training
        # rate by DIVERGENCE, the rate itself is too; above it, nothing is known
        evaluated, training = row.eval_success_rate, row.success_rate
        if evaluated is None or training is None or training - evaluated < DIVERGENCE:
            return None
        return Finding(
            "evaluation below training",
            row.iteration,
            f"iteration {row.iteration}: the deterministic policy of iteration "
            f"{row.eval_iteration} succeeded in {_rate(row)}, the training episodes with "
            "exploration noise in "
            f"{training:.0%}: the noise does part of the work (e.g. jiggles the last "
            "centimetres into a goal) and the policy's mean action falls short; make the "
            f"missing part pay in the reward (a term that peaks at the goal) ({_HOW})",
        )


def _rate(row: IterationRow) -> str:
    """``row``'s evaluated success rate as a sentence says it.

    ``60% of its 20 evaluation episodes``; for a check that stopped early, ``at most 40%
    of its 10 evaluation episodes, as the check stopped once the target was out of
    reach``.
    """
    rate, episodes = row.eval_success_rate, row.eval_episodes
    of = "its evaluation episodes" if episodes is None else f"its {episodes} evaluation episodes"
    if row.eval_stopped_early:
        return f"at most {rate:.0%} of {of}, as the check stopped once the target was out of reach"
    return f"{rate:.0%} of {of}"
