"""The vector-env contract, kept once for LearningEnv, DirectRLEnv and RayLearningEnv (internal).

What a caller of any KELab env sees besides the physics lives here, so that every env
keeps it alike: the action check (:func:`check_actions`), the reset options
(:func:`reset_ids`) and seeds (:func:`check_reset_seed`), the success rule's check
(:func:`check_success_rule`), and :class:`EpisodeBook`: each copy's episode counters
and whether the env is in step. ``EnvCore`` (one process) and ``RayLearningEnv`` (the
driver of Ray workers) each keep one book and call these; docs/rl.md states the rules.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kelab._validate import SEED_FIX, check_seed, is_int, must
from kelab.rl.episode_ends import EpisodeCounters
from kelab.rl.errors import describe_array
from kelab.rl.success import SuccessRule
from kelab.rl.task import check_env_ids

__all__ = [
    "EpisodeBook",
    "check_actions",
    "check_reset_seed",
    "check_success_rule",
    "copies_text",
    "reset_ids",
]


def copies_text(mask: np.ndarray, limit: int = 10) -> str:
    """The copies a bool mask marks, as ``[i, j, ...]`` (the first ``limit``, then a count)."""
    ids = np.flatnonzero(mask).tolist()
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"{ids[:limit]}{more}"


def check_actions(actions: Any, num_envs: int, act_dim: int, single: bool = False) -> np.ndarray:
    """Return a new float32 ``(num_envs, action_dim)`` copy of the actions, clipped to [-1, 1].

    Args:
        actions: ``(num_envs, action_dim)`` real numbers (bool, int or float arrays).
        num_envs: The env's copies.
        act_dim: The task's ``action_dim``.
        single: Check one copy's ``(action_dim,)`` action (DirectRLEnv); the result is
            still ``(1, action_dim)``.

    Raises:
        ValueError: For strings, complex numbers or other non-reals, a wrong shape,
            NaN/infinite values, or finite values beyond float32's range (naming the
            copies).
    """
    shape = (act_dim,) if single else (num_envs, act_dim)
    what = "action" if single else "actions"
    src = actions
    if not isinstance(src, np.ndarray):
        try:
            src = np.asarray(actions)
        except (TypeError, ValueError):
            src = None
    if src is None or isinstance(actions, (str, bytes)) or src.dtype.kind not in "biuf":
        if isinstance(actions, (str, bytes, complex)):
            got = f"the {type(actions).__name__} {actions!r:.80}"
        else:
            got = describe_array(src if src is not None else actions)
        raise ValueError(f"{what} must be real numbers (a float array) of shape {shape}, got {got}")
    if src.shape != shape:
        extra = "" if single else " (copies, action_dim)"
        raise ValueError(f"{what} must have shape {shape}{extra}, got {src.shape}")
    if src.dtype == np.float32:  # nothing to overflow (the usual case: no errstate scope)
        rows = src.reshape(1, act_dim) if single else src  # (copies, act_dim) already
        # the usual case (no sum: finite values may overflow it; count_nonzero: .all()'s
        # answer without the ufunc reduction, #40)
        if np.count_nonzero(np.isfinite(rows)) == rows.size:
            # the task's own copy, clipped: np.clip's values by the method (one ufunc call,
            # without np.clip's wrapper: #42.1; np.maximum then np.minimum were ~5 us, #40)
            return rows.clip(-1.0, 1.0, order="C")
        a = rows.copy()  # a copy: the task owns it (the checks below say what is wrong)
    else:
        with np.errstate(over="ignore"):
            a = src.astype(np.float32).reshape(-1, act_dim)  # a copy: the task owns it
    if not np.isfinite(a).all():
        bad = ~np.isfinite(a).all(axis=1)
        src_rows = np.asarray(src, dtype=np.float64).reshape(-1, act_dim)
        nonfinite = ~np.isfinite(src_rows).all(axis=1)
        where = "" if single else " for copies "
        if nonfinite.any():
            ids = "" if single else copies_text(nonfinite)
            raise ValueError(
                f"{what} contain{'s' if single else ''} NaN or infinite values{where}{ids}; "
                f"{what} must be finite"
            )
        big = float(np.abs(src_rows[bad]).max())
        ids = "" if single else copies_text(bad)
        raise ValueError(
            f"{what} out of float32 range{where}{ids} (largest magnitude {big:.3g} > "
            f"{float(np.finfo(np.float32).max):.3g}); {what} are clipped to [-1, 1], so "
            "scale them into that range"
        )
    # np.clip's values (a is finite) without its Python wrapper (#42.1: ~3 us a step)
    return a.clip(-1.0, 1.0, out=a)


def reset_ids(options: object, num_envs: int) -> np.ndarray | None:
    """The sorted copies a ``reset(options=...)`` names, or None for every copy.

    Args:
        options: None, or a dict; ``{"env_ids": [i, ...]}`` (distinct ints in
            ``[0, num_envs)``) or Gymnasium's ``{"reset_mask": bool array (num_envs,)}``
            name the copies to reset. Other keys are ignored.
        num_envs: The env's copies.

    Raises:
        ValueError: For options that are not a dict, or env_ids / reset_mask that are not
            valid copies (floats, strings, repeats, out of range, no copy).
    """
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise ValueError(f"reset(options=...) must be None or a dict, got {options!r:.80}")
    if "env_ids" in options and "reset_mask" in options:
        raise ValueError("reset(options=...): give env_ids or reset_mask, not both")
    n = num_envs
    if "env_ids" in options:
        where = "reset(options={'env_ids': ...})"
        ids = check_env_ids(options["env_ids"], n, where)
    elif "reset_mask" in options:
        mask = options["reset_mask"]
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
            raise ValueError(
                f"reset(options={{'reset_mask': ...}}) must be a numpy bool array of shape "
                f"({n},), got {describe_array(mask)}"
            )
        ids = np.flatnonzero(mask).astype(np.int64)
        where = "reset(options={'reset_mask': ...})"
    else:
        return None
    if ids.size == 0:
        raise ValueError(f"{where} names no copy; name at least one, or pass options=None")
    return np.sort(ids)


def check_reset_seed(seed: object, num_envs: int) -> int | list[int] | None:
    """Return ``reset(seed=...)``'s seed: None, an int >= 0, or a list of one per copy.

    Raises:
        ValueError: For anything else (a str, a negative int, a list of another length
            or with a value that is not an int >= 0), naming it.
    """
    if seed is None:
        return None
    if is_int(seed):
        return check_seed(seed, fix=SEED_FIX)
    allowed = f"None, an int >= 0, or a list of {num_envs} ints >= 0 (one per copy)"
    if (
        isinstance(seed, (str, bytes, Mapping))
        or not isinstance(seed, (Sequence, np.ndarray))
        or (isinstance(seed, np.ndarray) and seed.ndim != 1)
    ):
        raise ValueError(must("reset(seed=...)", allowed, seed))
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"reset(seed=[...]) needs one seed per copy: {num_envs}, got {len(seeds)}")
    return [check_seed(s, f"reset(seed=[...])[{i}]", SEED_FIX) for i, s in enumerate(seeds)]


def check_success_rule(rule: object, name: str = "success_rule") -> SuccessRule | None:
    """Return ``rule`` if it is a ``@ke.success`` rule or None.

    Raises:
        ValueError: For anything else, naming ``name``.
    """
    if rule is not None and not isinstance(rule, SuccessRule):
        fn = getattr(rule, "__func__", rule)  # a plain function on a class: a bound method
        named = callable(fn) and isinstance(getattr(fn, "__name__", None), str)
        got = f"the plain function {fn.__name__}()" if named else describe_array(rule)
        raise ValueError(
            f"{name} must be a rule marked with @ke.success, got {got}; put @ke.success "
            "above its def (a rule(task) returning a bool per copy), or use None"
        )
    return rule


class EpisodeBook:
    """Each copy's episode counters, and whether the env may step (one per env).

    ``episode_length_buf`` (int64) and ``returns`` (float64) count each copy's current
    episode; ``start_wall`` holds its start (``time.perf_counter``) for
    ``info["episode"]["t"]``. ``started`` is False before the first reset and after a
    step or reset that raised (``failure`` says why): ``step()`` and a partial reset are
    then refused until a full reset (or a restore).

    Args:
        num_envs: The env's copies.
    """

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.episode_length_buf = np.zeros(num_envs, dtype=np.int64)
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.start_wall = np.full(num_envs, time.perf_counter())
        self.started = False
        self.failure: str | None = None

    # ------------------------------------------------------------------ resets
    def begin_reset(self, ids: np.ndarray | None) -> None:
        """A reset of every copy (None) or of ``ids`` begins: their counters restart.

        Until :meth:`reset_done`, the env is out of step (a hook that raises leaves it so).

        Raises:
            RuntimeError: For a partial reset before the first full reset, or after a
                failed step (only a full reset puts every copy back in step).
        """
        if ids is not None:
            if not self.started:
                raise RuntimeError(
                    (self.failure or "call reset() before a partial reset")
                    + "; a partial reset needs every copy in step: call reset() without options"
                )
            self.failure = "a partial reset raised; call reset() before step()"
        else:
            self.failure = None
        self.started = False
        self.restart(ids)

    def reset_done(self) -> None:
        """The reset completed: the env may step."""
        self.started, self.failure = True, None

    def restart(self, ids: np.ndarray | None) -> None:
        """Zero the counters of every copy (None) or of ``ids``; their episodes start now."""
        sel = slice(None) if ids is None else ids
        self.episode_length_buf[sel] = 0
        self.returns[sel] = 0.0
        self.start_wall[sel] = time.perf_counter()

    # ------------------------------------------------------------------ steps
    def check_step(self) -> None:
        """Refuse a step before the first reset or after a failure.

        Raises:
            RuntimeError: Saying what to do (call reset()).
        """
        if not self.started:
            raise RuntimeError(self.failure or "call reset() before step()")

    def count(self, rewards: np.ndarray) -> None:
        """One step more in every copy's episode, with this step's rewards."""
        self.episode_length_buf += 1
        self.returns += rewards

    def failed(self, exc: BaseException) -> None:
        """A step raised ``exc``: refuse to step on until a reset (or restore)."""
        # The World may have advanced while the episode counters did not: the copies are
        # out of step.
        self.started = False
        self.failure = (
            f"the last step() raised {type(exc).__name__}: {exc}; the World may have "
            "advanced without the episode counters, so the environment is out of step: "
            "call reset() (or restore() a snapshot) before step()"
        )

    def ended(self, now: float | None = None) -> EpisodeCounters:
        """Every copy's counters as its episode ends (``info``'s ``episode_*`` arrays).

        Returns:
            ``episode_return``, ``episode_length`` (copies of every copy's counters) and
            ``episode_wall_s`` (seconds since each episode began, rounded to 1 us).
        """
        now = time.perf_counter() if now is None else now
        return EpisodeCounters(
            self.returns.copy(),
            self.episode_length_buf.copy(),
            (now - self.start_wall).round(6),  # np.round's values without its wrapper
        )
