"""EpisodeEnds: the typed record of the episodes that ended in one step (rl/ internal API).

``EnvCore.step`` returns one (None when no episode ended); the environments turn it into
Gymnasium's info dict (`vector_info` for LearningEnv, `single_info` for DirectRLEnv),
which stays the public surface users read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kelab.rl.randomization import EpisodeDraws

__all__ = ["EpisodeCounters", "EpisodeEnds", "single_info", "vector_info"]


class EpisodeCounters(NamedTuple):
    """Every copy's episode counters at the moment its episode ends (`EpisodeBook.ended`)."""

    episode_return: np.ndarray
    """float64 ``(n,)``: the summed rewards of each copy's episode."""
    episode_length: np.ndarray
    """int64 ``(n,)``: env steps of each copy's episode."""
    episode_wall_s: np.ndarray
    """float64 ``(n,)``: wall seconds since each episode began (rounded to 1 us)."""

    def rows(self, a: int, b: int) -> EpisodeCounters:
        """The counters of copies ``a..b-1``."""
        return EpisodeCounters(*(v[a:b] for v in self))


@dataclass(frozen=True)
class EpisodeEnds:
    """The episodes that ended in one step, described before their copies reset.

    Every array has one row per copy (``num_envs``); rows of copies that did not end are
    meaningless except where noted.
    """

    ids: np.ndarray
    """int64: the copies whose episode ended, ascending."""
    mask: np.ndarray
    """bool ``(n,)``: True for those copies."""
    final_obs: np.ndarray
    """float32 ``(n, observation_dim)``: every copy's observation on the final step."""
    ended_by: np.ndarray
    """object ``(n,)``: the first true condition name, ``"time limit"`` or ``"cut short by
    the task"``; None for copies that did not end."""
    counters: EpisodeCounters
    """Returns, lengths and wall seconds of every copy's episode."""
    names: tuple[str, ...]
    """The task's condition names in ``get_dones()`` order."""
    is_success: np.ndarray | None = None
    """bool ``(n,)``: the success rule's verdict (None without a rule)."""
    checks: dict[str, np.ndarray] | None = None
    """The rule's named checks, bool ``(n,)`` each (None without a rule)."""
    randomization: EpisodeDraws | None = None
    """The values each copy's episode ran with, by label (the task's domain
    randomization, kelab/rl/randomization.py; None where it declares none)."""

    @property
    def episode_return(self) -> np.ndarray:
        """float64 ``(n,)``: each copy's episode return."""
        return self.counters.episode_return

    @property
    def episode_length(self) -> np.ndarray:
        """int64 ``(n,)``: each copy's episode length in env steps."""
        return self.counters.episode_length

    @property
    def episode_wall_s(self) -> np.ndarray:
        """float64 ``(n,)``: each copy's episode wall time in seconds."""
        return self.counters.episode_wall_s


def vector_info(ends: EpisodeEnds | None, num_envs: int) -> dict[str, Any]:
    """Turn the core's description of finished episodes into a Gymnasium vector info.

    Every key has a ``_key`` bool mask (true for the copies that ended this step).

    Args:
        ends: What ``EnvCore.step`` returned for the finished episodes (None if none).
        num_envs: Number of copies.

    Returns:
        The info dict (empty when no episode ended).
    """
    if ends is None:
        return {}
    mask = ends.mask
    ids = ends.ids
    last = ends.final_obs
    # np.zeros_like's array, without its wrapper where the observations are C-ordered
    final_obs = np.zeros(last.shape, last.dtype) if last.flags.c_contiguous else np.zeros_like(last)
    final_obs[ids] = last[ids]
    # np.where(mask, counter, 0)'s arrays (wall seconds: its float32), from the few rows
    # that ended (#40: ~3 us less a step than three np.where over every copy, 256 copies)
    counters = ends.counters  # float64, int64, float64 (EpisodeCounters)
    returns = np.zeros(mask.size)
    lengths = np.zeros(mask.size, dtype=np.int64)
    wall = np.zeros(mask.size, dtype=np.float32)
    returns[ids] = counters.episode_return[ids]
    lengths[ids] = counters.episode_length[ids]
    wall[ids] = counters.episode_wall_s[ids]
    # Gymnasium's RecordEpisodeStatistics layout (CleanRL, SB3 read it as is)
    stats = {
        "r": returns.astype(np.float32),
        "l": lengths.astype(np.int32),
        "t": wall,
    }
    # what ended, and final_info's copy of it (its arrays new, its dicts shallow copies),
    # built side by side (#40: a comprehension over the first was ~4 us a step)
    episode: dict[str, Any] = {
        "episode": stats,
        "_episode": mask.copy(),
        "ended_by": ends.ended_by,
        "_ended_by": mask.copy(),
        "episode_return": returns,
        "_episode_return": mask.copy(),
        "episode_length": lengths,
        "_episode_length": mask.copy(),
    }
    final: dict[str, Any] = {
        "episode": dict(stats),
        "_episode": mask.copy(),
        "ended_by": ends.ended_by.copy(),
        "_ended_by": mask.copy(),
        "episode_return": returns.copy(),
        "_episode_return": mask.copy(),
        "episode_length": lengths.copy(),
        "_episode_length": mask.copy(),
    }
    if ends.is_success is not None and ends.checks is not None:
        is_success = ends.is_success & mask
        checks: dict[str, Any] = {}
        for name, value in ends.checks.items():
            checks[name] = value & mask
            checks[f"_{name}"] = mask.copy()
        episode["is_success"] = is_success
        episode["_is_success"] = mask.copy()
        episode["checks"] = checks
        episode["_checks"] = mask.copy()
        final["is_success"] = is_success.copy()
        final["_is_success"] = mask.copy()
        final["checks"] = dict(checks)
        final["_checks"] = mask.copy()
    if ends.randomization is not None:
        drawn = ends.randomization
        table = np.where(mask, drawn.table, 0.0)  # a row (n,) per label
        randomization = dict(zip(drawn.labels, table, strict=True))
        episode["randomization"] = randomization
        episode["_randomization"] = mask.copy()
        final["randomization"] = dict(randomization)
        final["_randomization"] = mask.copy()
    info: dict[str, Any] = {
        "final_obs": final_obs,
        "_final_obs": mask.copy(),
        "final_info": final,
        "_final_info": mask.copy(),
    }
    info.update(episode)
    return info


def single_info(ends: EpisodeEnds | None) -> dict[str, Any]:
    """Describe copy 0's finished episode as a plain info dict ({} if it did not end).

    Args:
        ends: What ``EnvCore.step`` returned for the finished episodes.

    Returns:
        ``{"ended_by", "episode_return", "episode_length"}`` plus ``"is_success"`` and
        ``"checks"`` when a success rule judged it.
    """
    if ends is None or not ends.mask[0]:
        return {}
    info: dict[str, Any] = {
        # Gymnasium's RecordEpisodeStatistics layout
        "episode": {
            "r": float(ends.episode_return[0]),
            "l": int(ends.episode_length[0]),
            "t": float(ends.episode_wall_s[0]),
        },
        "ended_by": ends.ended_by[0],
        "episode_return": float(ends.episode_return[0]),
        "episode_length": int(ends.episode_length[0]),
    }
    if ends.is_success is not None and ends.checks is not None:
        info["is_success"] = bool(ends.is_success[0])
        info["checks"] = {name: bool(v[0]) for name, v in ends.checks.items()}
    if ends.randomization is not None:
        info["randomization"] = ends.randomization.of(0)
    return info
