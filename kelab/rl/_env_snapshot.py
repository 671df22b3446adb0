"""An env snapshot checked in full against the env before a restore changes anything (internal).

:func:`check_env_snapshot` reads everything a ``LearningEnv``/``DirectRLEnv`` snapshot
holds besides the World's own part (which ``World.restore`` validates itself): the
episode counters, the task's state, the task's Generators, the condition names and the
in-step flag. Unknown keys are refused, and so is anything that does not fit this env;
every refusal is a ``ValueError`` naming the entry. ``RayLearningEnv`` checks its
driver's counters with :func:`check_counters`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import show
from kelab.sim.snapshot import Snapshot, rng_from_state

if TYPE_CHECKING:
    from kelab.rl.randomization import Randomizer
    from kelab.rl.task import Task

__all__ = [
    "ENV_META",
    "RAY_SNAPSHOT_KIND",
    "EnvRestorePlan",
    "check_counters",
    "check_env_snapshot",
]

RAY_SNAPSHOT_KIND = "kelab.RayLearningEnv/1"
"""``Snapshot.meta["kind"]`` of a RayLearningEnv's snapshot (its workers' snapshots)."""

ENV_META = ("world", "task_rngs", "condition_names", "started")
"""The ``meta`` keys of an env snapshot (``EnvCore.snapshot``), all required."""

_ENV_ARRAYS = ("env/episode_length_buf", "env/returns")

_FIX = "restore a snapshot this env's snapshot() made, unchanged"


@dataclass(frozen=True)
class EnvRestorePlan:
    """What a checked env snapshot sets (nothing here can fail to apply)."""

    world: Snapshot
    episode_length_buf: np.ndarray
    returns: np.ndarray
    task_state: dict[str, np.ndarray]
    task_rngs: list[Mapping[str, Any]]
    condition_names: tuple[str, ...] | None
    started: bool
    randomization: dict[str, np.ndarray] | None = None


def check_counters(
    arrays: Mapping[str, np.ndarray], prefix: str, num_envs: int, max_episode_length: int
) -> tuple[np.ndarray, np.ndarray]:
    """The episode counters ``<prefix>episode_length_buf`` and ``<prefix>returns``, checked.

    Lengths must be ints in ``[0, max_episode_length)`` (a copy that reaches the limit
    restarts in the same step), returns finite floats, both of shape ``(num_envs,)``.

    Raises:
        ValueError: Naming the array, what it must be and what it holds.
    """
    out = []
    for name, kind, what in (
        ("episode_length_buf", "iu", f"ints in [0, {max_episode_length})"),
        ("returns", "f", "finite floats"),
    ):
        key = f"{prefix}{name}"
        if key not in arrays:
            raise ValueError(f"snapshot array {key!r} is missing; {_FIX}")
        value = arrays[key]
        if value.dtype.kind not in kind or value.shape != (num_envs,):
            raise ValueError(
                f"snapshot array {key!r} must be {num_envs} {what} (shape ({num_envs},)), got "
                f"dtype {value.dtype} shape {value.shape}; {_FIX}"
            )
        if kind == "f":
            bad = ~np.isfinite(value)
        else:
            bad = (value < 0) | (value >= max_episode_length)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"snapshot array {key!r} must hold {what}, got {value[i].item()!r} for copy "
                f"{i}; {_FIX}"
            )
        out.append(value.astype(np.int64 if kind == "iu" else np.float64))
    return out[0], out[1]


def _check_task_state(task: Task, state: Mapping[str, np.ndarray]) -> None:
    """Refuse ``task/`` keys that are not the task's own state, or do not fit it.

    A key is the task's when its current ``state_dict()`` has it, or when it names a plain
    attribute the task has not made yet (absent or None, public or private: a task may
    first set one in a step; not a class attribute, method, KELab's own ``_ke_`` names or a
    runtime name such as ``world``, which the built env has set). A key the task has must
    keep its shape and its dtype's kind (a value casts to it with ``same_kind``: ints into
    floats, not floats into ints); a key not made yet can only be taken as it is.
    """
    known = task.state_dict()
    for key, value in state.items():
        if key in known:
            have = np.asarray(known[key])
            if value.shape != have.shape or not np.can_cast(
                value.dtype, have.dtype, casting="same_kind"
            ):
                raise ValueError(
                    f"snapshot array 'task/{key}' must be {have.dtype}-compatible of shape "
                    f"{have.shape} (like {type(task).__name__}'s own), got dtype {value.dtype} "
                    f"shape {value.shape}; {_FIX}"
                )
            continue
        fresh = (  # e.g. CartPole's _q, first set by a step; a just-reset task lacks it
            "/" not in key
            and not key.startswith("_ke_")
            and task.__dict__.get(key) is None
            and not hasattr(type(task), key)
        )
        if not fresh:
            raise ValueError(
                f"snapshot array 'task/{key}' must name the task's own state "
                f"({type(task).__name__}.state_dict() keys: {sorted(known)}), got an unknown "
                f"key that would replace task.{key.split('/')[0]}; {_FIX}"
            )


def check_env_snapshot(
    snap: object,
    *,
    fingerprint: str,
    num_envs: int,
    max_episode_length: int,
    task: Task,
    task_rngs: Sequence[np.random.Generator],
    randomizer: Randomizer | None = None,
) -> EnvRestorePlan:
    """Check an env snapshot against the env in full; return what a restore sets.

    Args:
        snap: What ``restore()`` was given.
        fingerprint: The env's scene fingerprint.
        num_envs: The env's copies.
        max_episode_length: The env's episode limit in steps.
        task: The env's task (its state keys).
        task_rngs: The task's Generators (their bit generator types).
        randomizer: The env's domain randomization (its ``env/randomization/*`` state),
            or None (then the snapshot may hold none).

    Raises:
        ValueError: For anything else than this env's snapshot, unknown or missing keys,
            and entries that do not fit (naming the entry); the env is not touched.
    """
    if not isinstance(snap, Snapshot):
        raise ValueError(f"restore() needs a snapshot from env.snapshot(), got {snap!r:.80}")
    if snap.meta.get("kind") == RAY_SNAPSHOT_KIND:
        raise ValueError(
            "this snapshot comes from RayLearningEnv.snapshot(); restore it into a "
            "RayLearningEnv with the same num_envs and num_workers"
        )
    snap.check_fingerprint(fingerprint)
    arrays, meta = snap.arrays, snap.meta
    if "env/episode_length_buf" not in arrays:
        raise ValueError(
            "this snapshot comes from World.snapshot(), not env.snapshot(); restore it "
            "with env.world.restore(...)"
        )
    drawn = "env/randomization/"
    unknown = sorted(
        k
        for k in arrays
        if not k.startswith(("world/", "task/"))
        and k not in _ENV_ARRAYS
        and (randomizer is None or not k.startswith(drawn))
    )
    unknown_meta = sorted(set(meta) - set(ENV_META))
    if unknown or unknown_meta:
        raise ValueError(
            f"an env snapshot must hold only the arrays world/..., task/..., "
            f"{', '.join(_ENV_ARRAYS)} and the meta keys {', '.join(ENV_META)}, got unknown "
            f"keys {show(unknown + [f'meta {k}' for k in unknown_meta])}; {_FIX}"
        )
    missing = [k for k in ENV_META if k not in meta]
    if missing:
        raise ValueError(f"snapshot meta {show(missing)} must be present, got none; {_FIX}")
    lengths, returns = check_counters(arrays, "env/", num_envs, max_episode_length)
    randomization = None
    if randomizer is not None:
        randomization = randomizer.check_state(
            {k[len(drawn) :]: v for k, v in arrays.items() if k.startswith(drawn)}
        )
    task_state = {k[len("task/") :]: np.array(v) for k, v in arrays.items() if k[:5] == "task/"}
    _check_task_state(task, task_state)
    states = meta["task_rngs"]
    if not isinstance(states, Sequence) or len(states) != num_envs:
        raise ValueError(
            f"snapshot meta 'task_rngs' must be a list of {num_envs} Generator states (one "
            f"per copy), got {show(states)}; {_FIX}"
        )
    for i, state in enumerate(states):  # any bit generator: a user may have put one in
        try:
            rng_from_state(state)
        except (ValueError, TypeError, KeyError) as err:
            raise ValueError(
                f"snapshot meta 'task_rngs'[{i}] must be a Generator state, got {err}; {_FIX}"
            ) from None
    names = meta["condition_names"]
    if names is not None and (
        isinstance(names, str)
        or not isinstance(names, Sequence)
        or not all(isinstance(n, str) for n in names)
    ):
        raise ValueError(
            f"snapshot meta 'condition_names' must be None or a list of names, got "
            f"{show(names)}; {_FIX}"
        )
    started = meta["started"]
    if not isinstance(started, bool):
        raise ValueError(
            f"snapshot meta 'started' must be True or False, got {show(started)}; {_FIX}"
        )
    world_meta = meta["world"]
    if not isinstance(world_meta, Mapping):
        raise ValueError(
            f"snapshot meta 'world' must be the World's meta (a dict), got {show(world_meta)}; "
            f"{_FIX}"
        )
    world = Snapshot(
        snap.fingerprint,
        snap.step_count,
        snap.sim_time,
        {k[len("world/") :]: v for k, v in arrays.items() if k.startswith("world/")},
        world_meta,
    )
    return EnvRestorePlan(
        world=world,
        episode_length_buf=lengths,
        returns=returns,
        task_state=task_state,
        task_rngs=list(states),
        condition_names=None if names is None else tuple(names),
        started=started,
        randomization=randomization,
    )
