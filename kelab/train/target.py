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

The verdict is always the full evaluation's. A check that stopped early has judged mostly
failures (they end first; a success runs to the time limit), so its successes over the
episodes judged say nothing of the policy: :class:`TargetVerdict` gives the most its
success rate can be instead (``success_rate`` with ``stopped_early``).

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

    The stage that decided is the pre-check (``full`` False) or the full evaluation. A
    stage that stopped early (``stopped_early``: the target was out of reach before every
    episode ended) has not measured its success rate: the episodes still running when it
    stopped might all have succeeded, so ``success_rate`` is then the most it can be.

    Example:
        >>> v = TargetVerdict(passed=False, judged=7, failed=6, episodes=10, full=False)
        >>> v.stopped_early, v.success_rate, v.successes
        (True, 0.4, 1)

    Attributes:
        passed: The full evaluation met the target.
        judged: Episodes of the deciding stage judged before the verdict was known.
        failed: How many of those failed.
        episodes: Episodes of the deciding stage (the pre-check's or the full one's).
        full: The full evaluation ran (the pre-check passed).

    Raises:
        ValueError: Unless ``0 <= failed <= judged <= episodes`` and ``episodes >= 1``.
    """

    passed: bool
    judged: int
    failed: int
    episodes: int
    full: bool

    def __post_init__(self) -> None:
        if not 0 <= self.failed <= self.judged <= self.episodes or self.episodes < 1:
            raise ValueError(
                "TargetVerdict must have 0 <= failed <= judged <= episodes and episodes >= 1, "
                f"got failed={self.failed}, judged={self.judged}, episodes={self.episodes}; "
                "build it from a TargetCheck's counts"
            )

    @property
    def stopped_early(self) -> bool:
        """Episodes of the deciding stage were still running: its rate is a bound."""
        return self.judged < self.episodes

    @property
    def successes(self) -> int:
        """Successful episodes judged (at least this many of the stage's succeed)."""
        return self.judged - self.failed

    @property
    def success_rate(self) -> float:
        """``1 - failed / episodes`` over the deciding stage's episodes.

        Its success rate when every episode was judged (``stopped_early`` False); else
        the most it can be (every episode still running succeeding).
        """
        return 1.0 - self.failed / self.episodes


def _judge(
    env: LearningEnv,
    policy: Callable[[np.ndarray], npt.ArrayLike],
    episodes: int,
    allowed_failures: int,
    seed: int,
    full: bool,
) -> TargetVerdict:
    """Run each copy's quota of episodes until the verdict is known."""
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
            break
    return TargetVerdict(failed <= allowed_failures, judged, failed, episodes, full)


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
            pre = _judge(self._pre, policy, self.pre_episodes, allowed, self.seed, full=False)
            if not pre.passed:
                return pre
        return _judge(self._full, policy, self.episodes, allowed, self.seed, full=True)

    def close(self) -> None:
        """Close the evaluation envs."""
        self._full.close()
        if self._pre is not None:
            self._pre.close()
