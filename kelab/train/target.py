"""``TargetCheck``: does the deterministic policy meet the task's success target yet?

The training success rate is measured with exploration noise, over episodes that started
many updates ago: it lags what the policy can do. A CartPole policy that balances 100/100
deterministic episodes often shows 0 % success in training. ``TargetCheck`` asks the
policy itself: ``episodes`` fresh episodes (one per copy of an evaluation env, seeded),
judged by the task's success rule, the same episodes :func:`kelab.evaluate` judges.

It is built to be cheap when the answer is no, so a trainer can ask often:

- a pre-check plays the first ``pre_episodes`` of them first (fewer copies: cheaper
  steps) and stops once more of them failed than the full evaluation allows in all;
  only a policy that passes it runs the full evaluation (so the pre-check never changes
  a verdict, it only saves time);
- the full evaluation stops as soon as too many episodes failed for the target to be met.

The verdict is always the full evaluation's.

Example:
    >>> import numpy as np
    >>> import kelab as ke
    >>> from kelab.tasks.cartpole import CartPoleTask
    >>> check = TargetCheck(CartPoleTask, target=0.95, episodes=20, pre_episodes=5)
    >>> check(lambda obs: np.zeros((len(obs), 1), np.float32)).passed  # pushes nothing
    False
    >>> check.close()
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kelab._validate import check_int, check_number, check_seed
from kelab.errors import UserError
from kelab.rl.evaluation import episode_quotas

if TYPE_CHECKING:
    from kelab.rl.env import LearningEnv
    from kelab.rl.task import Task

__all__ = ["TargetCheck", "TargetVerdict", "require_success_rule"]


@dataclass(frozen=True)
class TargetVerdict:
    """What one :class:`TargetCheck` call found.

    Attributes:
        passed: The full evaluation met the target.
        success_rate: Successes over the episodes judged (of the stage that decided).
        judged: Episodes judged before the verdict was known.
        full: The full evaluation ran (the pre-check passed).
    """

    passed: bool
    success_rate: float
    judged: int
    full: bool


def _judge(
    env: LearningEnv,
    policy: Callable[[np.ndarray], npt.ArrayLike],
    episodes: int,
    allowed_failures: int,
    seed: int,
) -> tuple[bool, int, int]:
    """Run each copy's quota of episodes until the verdict is known.

    Returns:
        ``(passed, successes, judged)``.
    """
    left = episode_quotas(episodes, env.num_envs)
    obs, _ = env.reset(seed=seed)
    judged = failed = 0
    while judged < episodes:
        obs, _, _, _, info = env.step(np.asarray(policy(obs), dtype=np.float32))
        if not info:
            continue
        counted = info["_ended_by"] & (left > 0)
        left -= counted
        judged += int(counted.sum())
        failed += int((counted & ~info["is_success"]).sum())
        if failed > allowed_failures:
            return False, judged - failed, judged
    return True, judged - failed, judged


def require_success_rule(task_type: type[Task], user: str) -> None:
    """Refuse a task class without a success rule, naming ``user`` (what needs one).

    Raises:
        UserError: When ``task_type.success_rule`` is None.
    """
    if getattr(task_type, "success_rule", None) is None:
        raise UserError(
            f"{user} needs a task with a success rule; {task_type.__name__} has none (set "
            "success_rule on the task class)"
        )


class TargetCheck:
    """Evaluate a policy against a success target, cheaply when it falls short.

    Args:
        task_type: The task class (built with no arguments, twice: a pre-check env and
            a full one; they stay open between calls).
        target: Success rate to meet, in [0, 1].
        episodes: Episodes of the full evaluation (one copy each).
        pre_episodes: Episodes of the pre-check: the full evaluation's first ones, with
            the failures the full evaluation allows (0: none).
        seed: Seed of every evaluation (the same episodes each call).
        layout: The evaluation envs' World layout (None: ``ke.EnvConfig``'s default). The
            trainer judges in the layout it trains in (``TrainConfig.layout``).

    Raises:
        UserError: For a task without a success rule or a bad number.
    """

    def __init__(
        self,
        task_type: type[Task],
        target: float,
        episodes: int = 100,
        pre_episodes: int = 10,
        seed: int = 1000,
        layout: str | None = None,
    ) -> None:
        from kelab.rl.env import LearningEnv

        self.target = check_number(target, "TargetCheck.target", low=0.0, high=1.0)
        self.episodes = check_int(episodes, "TargetCheck.episodes", low=1)
        self.pre_episodes = check_int(pre_episodes, "TargetCheck.pre_episodes", low=0)
        self.seed = check_seed(seed, "TargetCheck.seed")
        require_success_rule(task_type, "TargetCheck")
        self._full = LearningEnv(task_type(), num_envs=self.episodes, seed=self.seed, layout=layout)
        self.layout: str = self._full.world.layout
        """The evaluation envs' World layout."""
        self._pre = (
            LearningEnv(task_type(), num_envs=self.pre_episodes, seed=self.seed, layout=layout)
            if 0 < self.pre_episodes < self.episodes
            else None
        )

    def __call__(self, policy: Callable[[np.ndarray], npt.ArrayLike]) -> TargetVerdict:
        """Judge ``policy`` (batched observations -> batched actions)."""
        allowed = self.episodes - math.ceil(self.target * self.episodes - 1e-9)
        if self._pre is not None:
            # its episodes are the full evaluation's first ones (the same seed, copy k
            # plays episode k): more than ``allowed`` failures there fail the full one too
            ok, wins, judged = _judge(self._pre, policy, self.pre_episodes, allowed, self.seed)
            if not ok:
                return TargetVerdict(False, wins / judged, judged, full=False)
        ok, wins, judged = _judge(self._full, policy, self.episodes, allowed, self.seed)
        return TargetVerdict(ok, wins / judged, judged, full=True)

    def close(self) -> None:
        """Close the evaluation envs."""
        self._full.close()
        if self._pre is not None:
            self._pre.close()
