"""``ke.evaluate``: run a policy for N episodes and report how they ended.

Works with a :class:`~kelab.rl.env.LearningEnv` or a
:class:`~kelab.rl.ray_env.RayLearningEnv` (batched policy, episodes assigned to copies up
front) or a :class:`~kelab.rl.direct.DirectRLEnv` (one observation at a time), also
through Gymnasium wrappers. See docs/rl.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kelab._validate import check_int
from kelab.rl.success import SuccessRule
from kelab.rl.terminations import CUT_SHORT, TIME_LIMIT

if TYPE_CHECKING:
    import gymnasium

    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv
    from kelab.rl.ray_env import RayLearningEnv

    Judged = LearningEnv | RayLearningEnv | DirectRLEnv

__all__ = ["EvaluationInterrupted", "EvaluationReport", "episode_quotas", "evaluate"]


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
        randomization: Per judged episode (in episode order), the values its task's domain
            randomization drew for it, by label (``info["randomization"]``; empty dicts
            where the task declares none).
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
    randomization: tuple[dict[str, float], ...] = ()

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
            "randomization": [dict(r) for r in self.randomization],
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
        drawn = [r for r in self.randomization if r]
        if drawn:
            rows.append(("randomized (min .. max, mean)", ""))
            for name in drawn[0]:
                v = np.array([r[name] for r in drawn])
                rows.append((f"  {name}", f"{v.min():.4g} .. {v.max():.4g}, {v.mean():.4g}"))
        width = max(len(k) for k, _ in rows)
        lines = ["Evaluation report", "-" * (width + 24)]
        lines += [f"{k:<{width}}  {v}".rstrip() for k, v in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


Record = tuple[str, float, int, bool | None, dict[str, bool], dict[str, float]]
"""One judged episode: (ended_by, return, length, success or None, checks, the values its
domain randomization drew)."""


def _judged(env: gymnasium.Env | gymnasium.vector.VectorEnv) -> Judged:
    """The KELab env under any Gymnasium wrappers."""
    base = getattr(env, "unwrapped", env)
    if not all(hasattr(type(base), a) for a in ("condition_names", "success_rule", "step_dt")):
        raise ValueError(
            "ke.evaluate needs a ke.LearningEnv, ke.RayLearningEnv or ke.DirectRLEnv "
            f"(possibly wrapped), got {env!r}"
        )
    return base


def episode_quotas(episodes: int, num_envs: int) -> np.ndarray:
    """How many episodes each copy runs when ``episodes`` are shared by ``num_envs`` copies.

    Episode ``k`` belongs to copy ``k % num_envs``, so copy ``i`` runs the first
    ``ceil((episodes - i) / num_envs)`` episodes it starts (its ``j``-th is episode
    ``j * num_envs + i``); copies ``i >= episodes`` run none.

    Args:
        episodes: Episodes in all (>= 1).
        num_envs: Copies (>= 1).

    Returns:
        int64 ``(num_envs,)`` quotas summing to ``episodes``.
    """
    base, extra = divmod(episodes, num_envs)
    return np.full(num_envs, base, dtype=np.int64) + (np.arange(num_envs) < extra)


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`evaluate`: ``report`` is that of the episodes finished so far.

    A ``KeyboardInterrupt``, so code that does not look for it stops as before.

    Attributes:
        report: The :class:`EvaluationReport` of the episodes judged before the interrupt
            (``report.episodes`` of them, possibly 0).
    """

    def __init__(self, report: EvaluationReport) -> None:
        super().__init__(f"evaluation interrupted after {report.episodes} episodes")
        self.report = report


def evaluate(
    env: gymnasium.Env | gymnasium.vector.VectorEnv,
    policy: Callable[[np.ndarray], npt.ArrayLike],
    episodes: int = 100,
    success: SuccessRule | None = None,
    seed: int | None = None,
    max_steps: int | None = None,
    on_episode: Callable[[int], object] | None = None,
    on_step: Callable[[int, int], object] | None = None,
) -> EvaluationReport:
    """Run ``policy`` for ``episodes`` episodes and report how they ended.

    The env is reset first (with ``seed`` when given). With a DirectRLEnv the policy gets
    one observation and returns one action, and the episodes run one after the other.

    With a LearningEnv or RayLearningEnv of ``N`` copies the policy gets the
    ``(N, observation_dim)`` batch and must return ``(N, action_dim)``. Which episodes
    count is decided up front, never by which finish first (that would favour short
    episodes, e.g. early failures): episode ``k`` is copy ``k % N``'s ``(k // N)``-th
    episode, so copy ``i`` runs ``ceil((episodes - i) / N)`` episodes from its own seeded
    random stream (:func:`episode_quotas`). Copies keep stepping in lockstep until every
    copy finished its share; what a copy does after its share is ignored. The report is
    therefore that of ``episodes`` episodes each started from its own seed, independent
    of how long the others take, and the same for the same seed (and ``N``).

    Args:
        env: A LearningEnv, RayLearningEnv or DirectRLEnv (Gymnasium wrappers allowed).
        policy: Observation(s) -> action(s).
        episodes: Episodes to judge (>= 1).
        success: The success rule; None uses the env's (the task's ``success_rule``).
        seed: Seed for the initial reset; None continues the env's random streams.
        max_steps: Optional bound on env steps (ValueError when reached first).
        on_episode: Called with the number of episodes judged so far each time it grows
            (progress of a long evaluation).
        on_step: Called after every step of the env with the steps taken and the episodes
            judged so far (progress within long episodes, e.g. many copies whose
            fixed-length episodes all end together).

    Returns:
        The :class:`EvaluationReport`.

    Raises:
        ValueError: For a bad argument, or when ``max_steps`` pass before enough episodes.
        EvaluationInterrupted: On Ctrl-C (a ``KeyboardInterrupt``), with the report of
            the episodes finished so far.
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
    judged: list[tuple[int, Record]] = []  # (episode index, record), as they finish
    progress = _Progress(on_episode, on_step)
    try:
        if hasattr(base, "num_envs") and hasattr(base, "single_action_space"):
            _run_vector(
                env, int(base.num_envs), policy, episodes, seed, max_steps, judged, progress
            )
        else:
            _run_single(env, policy, episodes, seed, max_steps, judged, progress)
    except KeyboardInterrupt as interrupt:
        if isinstance(interrupt, EvaluationInterrupted):
            raise
        records = [record for _, record in sorted(judged, key=lambda item: item[0])]
        report = _report(records, rule, base.condition_names, float(base.step_dt))
        raise EvaluationInterrupted(report) from None
    finally:
        base.success_rule = previous
    records = [record for _, record in sorted(judged, key=lambda item: item[0])]
    return _report(records, rule, base.condition_names, float(base.step_dt))


class _Progress:
    """:func:`evaluate`'s two progress callbacks, each optional."""

    def __init__(
        self,
        on_episode: Callable[[int], object] | None,
        on_step: Callable[[int, int], object] | None,
    ) -> None:
        self.on_episode = on_episode
        self.on_step = on_step

    def stepped(self, steps: int, judged: int, grew: bool) -> None:
        """After a step: ``judged`` episodes so far (``grew``: more than before it)."""
        if grew and self.on_episode is not None:
            self.on_episode(judged)
        if self.on_step is not None:
            self.on_step(steps, judged)


def _out_of_steps(done: int, episodes: int, max_steps: int) -> ValueError:
    return ValueError(
        f"evaluate: only {done} of {episodes} episodes finished within max_steps={max_steps}; "
        "raise max_steps or give None"
    )


def _run_vector(
    env: gymnasium.vector.VectorEnv,
    num_envs: int,
    policy: Callable[[np.ndarray], npt.ArrayLike],
    episodes: int,
    seed: int | None,
    max_steps: int | None,
    judged: list[tuple[int, Record]],
    progress: _Progress,
) -> None:
    """Step every copy until each finished its quota, adding to ``judged`` as they end."""
    quota = episode_quotas(episodes, num_envs)
    done = np.zeros(num_envs, dtype=np.int64)
    steps = 0
    obs, _ = env.reset(seed=seed)
    while len(judged) < episodes:
        if max_steps is not None and steps >= max_steps:
            raise _out_of_steps(len(judged), episodes, max_steps)
        obs, _, _, _, info = env.step(policy(obs))
        steps += 1
        counted = np.flatnonzero(np.asarray(info["_ended_by"]) & (done < quota)) if info else ()
        if len(counted) == 0:
            progress.stepped(steps, len(judged), grew=False)
            continue
        checks = {k: v for k, v in info.get("checks", {}).items() if not k.startswith("_")}
        success = info.get("is_success")
        drawn = {k: v for k, v in info.get("randomization", {}).items() if not k.startswith("_")}
        for i in counted.tolist():
            record = (
                str(info["ended_by"][i]),
                float(info["episode_return"][i]),
                int(info["episode_length"][i]),
                None if success is None else bool(success[i]),
                {k: bool(v[i]) for k, v in checks.items()},
                {k: float(v[i]) for k, v in drawn.items()},
            )
            judged.append((int(done[i]) * num_envs + i, record))
        done[counted] += 1
        progress.stepped(steps, len(judged), grew=True)


def _run_single(
    env: gymnasium.Env,
    policy: Callable[[np.ndarray], npt.ArrayLike],
    episodes: int,
    seed: int | None,
    max_steps: int | None,
    judged: list[tuple[int, Record]],
    progress: _Progress,
) -> None:
    """Run the episodes one after the other, adding each to ``judged`` as it ends."""
    steps = 0
    obs, _ = env.reset(seed=seed)
    while len(judged) < episodes:
        if max_steps is not None and steps >= max_steps:
            raise _out_of_steps(len(judged), episodes, max_steps)
        obs, _, terminated, truncated, info = env.step(policy(obs))
        steps += 1
        if terminated or truncated:
            record = (
                info["ended_by"],
                float(info["episode_return"]),
                int(info["episode_length"]),
                info.get("is_success"),
                dict(info.get("checks", {})),
                dict(info.get("randomization", {})),
            )
            judged.append((len(judged), record))
            progress.stepped(steps, len(judged), grew=True)
            obs, _ = env.reset()
        else:
            progress.stepped(steps, len(judged), grew=False)


def _report(
    records: list[Record], rule: SuccessRule | None, names: tuple[str, ...], step_dt: float
) -> EvaluationReport:
    ended: dict[str, int] = {name: 0 for name in names}
    ended[TIME_LIMIT] = 0
    ended[CUT_SHORT] = 0
    checks: dict[str, list[bool]] = {}
    returns = np.array([r[1] for r in records], dtype=np.float64)
    lengths = np.array([r[2] for r in records], dtype=np.float64)
    for name, _, _, _, episode_checks, _ in records:
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
        step_dt=step_dt,
        randomization=tuple(r[5] for r in records),
    )
