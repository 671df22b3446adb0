"""``ke.evaluate``: run a policy for N episodes and report how they ended.

Works with a :class:`~kelab.rl.env.LearningEnv` (batched policy) or a
:class:`~kelab.rl.direct.DirectRLEnv` (one observation at a time), also through
Gymnasium wrappers. See docs/rl.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import check_int
from kelab.rl.success import SuccessRule
from kelab.rl.terminations import CUT_SHORT, TIME_LIMIT

if TYPE_CHECKING:
    import gymnasium

    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv

__all__ = ["EvaluationReport", "evaluate"]


@dataclass(frozen=True)
class EvaluationReport:
    """How N evaluated episodes ended.

    Attributes:
        episodes: Number of finished episodes judged.
        success_rule: Name of the success rule, or None when none was given.
        successes: Episodes the rule judged successful (None without a rule).
        ended_by: Episodes ended per named condition, plus ``"time limit"`` and
            ``"cut short by the task"`` (every name present, zero included).
        checks: Fraction of episodes each ``task.check`` was true.
        return_mean: Mean episode return.
        return_std: Standard deviation of the episode returns.
        length_mean: Mean episode length in env steps.
        length_std: Standard deviation of the episode lengths.
        step_dt: Seconds per env step (to read lengths as time).
    """

    episodes: int
    success_rule: str | None
    successes: int | None
    ended_by: dict[str, int] = field(default_factory=dict)
    checks: dict[str, float] = field(default_factory=dict)
    return_mean: float = 0.0
    return_std: float = 0.0
    length_mean: float = 0.0
    length_std: float = 0.0
    step_dt: float = 0.0

    @property
    def success_rate(self) -> float | None:
        """Fraction of episodes judged successful (None without a rule)."""
        if self.successes is None or self.episodes == 0:
            return None
        return self.successes / self.episodes

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-compatible dict (success_rate included)."""
        return {
            "episodes": self.episodes,
            "success_rule": self.success_rule,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "ended_by": dict(self.ended_by),
            "checks": dict(self.checks),
            "return_mean": self.return_mean,
            "return_std": self.return_std,
            "length_mean": self.length_mean,
            "length_std": self.length_std,
            "step_dt": self.step_dt,
        }

    def table(self) -> str:
        """Return the report as a readable plain-text table."""
        n = max(self.episodes, 1)
        rows: list[tuple[str, str]] = [("episodes", str(self.episodes))]
        if self.successes is not None:
            rate = self.success_rate or 0.0
            rows.append(
                (
                    f"success ({self.success_rule})",
                    f"{self.successes}/{self.episodes}  {100 * rate:5.1f} %",
                )
            )
        rows.append(("return", f"{self.return_mean:.3f} ± {self.return_std:.3f}"))
        seconds = f"  ({self.length_mean * self.step_dt:.2f} s)" if self.step_dt else ""
        rows.append(("length (steps)", f"{self.length_mean:.1f} ± {self.length_std:.1f}{seconds}"))
        rows.append(("ended by", ""))
        for name, count in self.ended_by.items():
            rows.append((f"  {name}", f"{count:>5}  {100 * count / n:5.1f} %"))
        if self.checks:
            rows.append(("checks (true)", ""))
            for name, frac in self.checks.items():
                rows.append((f"  {name}", f"{100 * frac:5.1f} %"))
        width = max(len(k) for k, _ in rows)
        lines = ["Evaluation report", "-" * (width + 24)]
        lines += [f"{k:<{width}}  {v}".rstrip() for k, v in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _judged(env: gymnasium.Env | gymnasium.vector.VectorEnv) -> LearningEnv | DirectRLEnv:
    """The KELab env under any Gymnasium wrappers."""
    base = getattr(env, "unwrapped", env)
    if not hasattr(base, "_core"):
        raise ValueError(
            f"ke.evaluate needs a ke.LearningEnv or ke.DirectRLEnv (possibly wrapped), got {env!r}"
        )
    return base


def evaluate(
    env: gymnasium.Env | gymnasium.vector.VectorEnv,
    policy: Callable[[np.ndarray], Any],
    episodes: int = 100,
    success: SuccessRule | None = None,
    seed: int | None = None,
    max_steps: int | None = None,
) -> EvaluationReport:
    """Run ``policy`` until ``episodes`` episodes finished and report how they ended.

    The env is reset first (with ``seed`` when given). With a LearningEnv the policy gets
    the ``(num_envs, observation_dim)`` batch and must return ``(num_envs, action_dim)``;
    the first ``episodes`` episodes to finish are judged, in step order and, within a
    step, copy order (so with many copies short episodes finish first: use one copy, or
    many more episodes than copies, when episode lengths vary). With a DirectRLEnv the
    policy gets one observation and returns one action.

    Args:
        env: A LearningEnv or DirectRLEnv (Gymnasium wrappers allowed).
        policy: Observation(s) -> action(s).
        episodes: Finished episodes to judge (>= 1).
        success: The success rule; None uses the env's (the task's ``success_rule``).
        seed: Seed for the initial reset; None continues the env's random streams.
        max_steps: Optional bound on env steps (ValueError when reached first).

    Returns:
        The :class:`EvaluationReport`.

    Raises:
        ValueError: For a bad argument, or when ``max_steps`` pass before enough episodes.
    """
    episodes = check_int(episodes, "evaluate: episodes", low=1)
    if max_steps is not None:
        max_steps = check_int(max_steps, "evaluate: max_steps", low=1, fix="give None for no bound")
    if success is not None and not isinstance(success, SuccessRule):
        raise ValueError(
            f"evaluate: success must be a rule marked with @ke.success, got {success!r}"
        )
    if not callable(policy):
        raise ValueError(f"evaluate: policy must be callable obs -> action, got {policy!r}")
    base = _judged(env)
    previous = base.success_rule
    rule = success if success is not None else previous
    base.success_rule = rule
    vector = hasattr(base, "num_envs") and hasattr(base, "single_action_space")
    records: list[tuple[str, float, int, bool | None, dict[str, bool]]] = []
    steps = 0
    try:
        obs, _ = env.reset(seed=seed)
        while len(records) < episodes:
            if max_steps is not None and steps >= max_steps:
                raise ValueError(
                    f"evaluate: only {len(records)} of {episodes} episodes finished within "
                    f"max_steps={max_steps}"
                )
            obs, _, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            if vector:
                if not info:
                    continue
                for i in np.flatnonzero(info["_ended_by"]).tolist():
                    ok = bool(info["is_success"][i]) if "is_success" in info else None
                    checks = {
                        k: bool(v[i])
                        for k, v in info.get("checks", {}).items()
                        if not k.startswith("_")
                    }
                    records.append(
                        (
                            info["ended_by"][i],
                            float(info["episode_return"][i]),
                            int(info["episode_length"][i]),
                            ok,
                            checks,
                        )
                    )
            elif terminated or truncated:
                records.append(
                    (
                        info["ended_by"],
                        float(info["episode_return"]),
                        int(info["episode_length"]),
                        info.get("is_success"),
                        dict(info.get("checks", {})),
                    )
                )
                obs, _ = env.reset()
    finally:
        base.success_rule = previous
    return _report(records[:episodes], rule, base)


def _report(records: list, rule: SuccessRule | None, base: Any) -> EvaluationReport:
    names = base._core.validator.names or ()
    ended: dict[str, int] = {name: 0 for name in names}
    ended[TIME_LIMIT] = 0
    ended[CUT_SHORT] = 0
    checks: dict[str, list[bool]] = {}
    returns = np.array([r[1] for r in records], dtype=np.float64)
    lengths = np.array([r[2] for r in records], dtype=np.float64)
    for name, _, _, _, episode_checks in records:
        ended[name] = ended.get(name, 0) + 1
        for key, value in episode_checks.items():
            checks.setdefault(key, []).append(value)
    successes = None if rule is None else sum(bool(r[3]) for r in records)

    def stat(values: np.ndarray, fn: Callable[[np.ndarray], Any]) -> float:
        return float(fn(values)) if values.size else math.nan

    return EvaluationReport(
        episodes=len(records),
        success_rule=None if rule is None else rule.name,
        successes=successes,
        ended_by=ended,
        checks={k: float(np.mean(v)) for k, v in checks.items()},
        return_mean=stat(returns, np.mean),
        return_std=stat(returns, np.std),
        length_mean=stat(lengths, np.mean),
        length_std=stat(lengths, np.std),
        step_dt=float(base.step_dt),
    )
