"""The World's argument checks: copy and joint indices, body states (kelab.sim internal).

:func:`env_indices` turns ``env_ids`` (None, ints or a bool mask) into copy indices,
:func:`joint_columns` turns ``joint_ids`` into World joint indices, :func:`index_arg`
checks one index and :func:`body_states` the poses and velocities of a state write. Each
raises ``ValueError`` naming what was wrong and what to pass (docs/world.md, "API");
none of them touches a World. :func:`check_open` refuses changes to a closed World.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kelab._validate import is_bool, is_int, must
from kelab.sim._values import body_states_error, float_array, short


def check_open(closed: bool) -> None:
    """Refuse a change to a World that ``World.close()`` closed.

    Raises:
        RuntimeError: If ``closed``.
    """
    if closed:
        raise RuntimeError(
            "World is closed; a closed World can be read but not stepped, reset, restored or "
            "commanded (close() stopped its threads): build a new World to simulate on"
        )


def env_indices(
    env_ids: npt.ArrayLike | None, every: np.ndarray, repeats: bool = False
) -> np.ndarray:
    """Copy indices from ``env_ids``: None (all), unique ints in range, or a bool mask.

    Args:
        env_ids: What the caller passed.
        every: ``arange(num_envs)``, read-only: returned as is for None (callers test
            ``ids is every`` to take their whole-array paths).
        repeats: For resets, where a copy listed twice is reset once (the repeats are
            dropped, the order of first appearance kept); elsewhere values come with the
            ids and a repeated id is refused (which row would win?).

    Returns:
        A new array (never the caller's: it may be kept, e.g. logged), or ``every``.

    Raises:
        ValueError: For non-integer ids (floats, strings, a bool), ids out of range,
            repeated ids, or a mask of the wrong shape.
    """
    if env_ids is None:
        return every
    n = every.size
    if (
        type(env_ids) is np.ndarray
        and env_ids.dtype == np.int64
        and env_ids.ndim == 1
        and 0 < env_ids.size <= 64
    ):  # the usual case (an env's own ids), checked in Python: cheaper than numpy for a few
        listed = env_ids.tolist()
        if min(listed) >= 0 and max(listed) < n and len(set(listed)) == len(listed):
            return env_ids.copy()
        # else the checks below say what is wrong (or drop the repeats)
    if is_bool(env_ids):
        raise ValueError(
            f"env_ids must be copy indices (ints in [0, {n})) or a bool mask of shape "
            f"({n},), got the bool {bool(env_ids)}; pass e.g. [0] or None for every copy"
        )
    try:
        ids = np.asarray(env_ids)
    except (TypeError, ValueError):
        raise ValueError(
            f"env_ids must be copy indices (ints in [0, {n})) or a bool mask, got {short(env_ids)}"
        ) from None
    if ids.dtype == bool:
        if ids.shape != (n,):
            raise ValueError(f"env_ids mask must have shape ({n},), got {ids.shape}")
        return np.flatnonzero(ids)
    if isinstance(env_ids, (list, tuple)) and any(
        is_bool(x) for x in env_ids
    ):  # bools among ints: numpy would read them as 0 and 1
        raise ValueError(
            f"env_ids must be integer copy indices in [0, {n}) or a bool mask of shape "
            f"({n},), got bools mixed with other values: {short(env_ids)}"
        )
    if ids.size == 0 and ids.ndim == 1:
        return ids.astype(np.int64)
    if ids.dtype.kind not in "iu" or ids.ndim > 1:
        raise ValueError(
            f"env_ids must be integer copy indices in [0, {n}) (a 1-D list or array) or a "
            f"bool mask of shape ({n},), got {short(env_ids)} (dtype {ids.dtype}, shape "
            f"{ids.shape}); convert with np.asarray(ids, dtype=int) if they are whole numbers"
        )
    ids = ids.astype(np.int64).reshape(-1)
    if ids.size <= 64:  # a few ids: Python's min, max and set are cheaper than numpy's
        listed = ids.tolist()
        lo, hi = min(listed), max(listed)
        repeated = len(set(listed)) != ids.size
    else:
        lo, hi = int(ids.min()), int(ids.max())
        repeated = not (np.diff(np.sort(ids)) != 0).all()
    if lo < 0 or hi >= n or (ids.dtype.kind == "u" and hi < 0):
        raise ValueError(
            f"env_ids must be in [0, {n}) (this World has {n} copies), got min {lo} max {hi}; "
            f"pass copy indices below {n}"
        )
    if repeated:
        uniq, first, counts = np.unique(ids, return_index=True, return_counts=True)
        if repeats:
            return ids[np.sort(first)]
        raise ValueError(
            f"env_ids must be unique (each copy once), got {uniq[counts > 1].tolist()} "
            "more than once; pass each copy once (the last of repeated rows would win)"
        )
    return ids


def joint_columns(
    joint_ids: npt.ArrayLike | None,
    nj: int,
    *,
    what: str = "joint indices",
    where: str = "",
    hint: str = "find them with joint_names.index(path)",
) -> np.ndarray | None:
    """Joint indices from ``joint_ids`` (None stays None: every joint).

    Args:
        joint_ids: What the caller passed: one int or a 1-D list of ints.
        nj: Joints there are (indices are in ``[0, nj)``).
        what: What the indices are, for messages ("local joint indices" for a robot's).
        where: Appended to the range message (" for robot 'biped'").
        hint: How to find valid indices, for messages.

    Raises:
        ValueError: For non-integers, a bool, indices out of range or repeats.
    """
    if joint_ids is None:
        return None
    cols = None if is_bool(joint_ids) else np.asarray(joint_ids)
    if cols is None or (cols.dtype.kind not in "iu" and cols.size) or cols.ndim > 1:
        raise ValueError(
            f"joint_ids must be {what} (ints in [0, {nj})) as one int or a 1-D "
            f"list, got {short(joint_ids)}; {hint}"
        )
    cols = cols.reshape(-1).astype(np.int64)
    listed = cols.tolist()
    if listed and (min(listed) < 0 or max(listed) >= nj):
        raise ValueError(f"joint_ids must be in [0, {nj}){where}, got {listed}")
    if len(set(listed)) != len(listed):
        raise ValueError(f"joint_ids must be unique, got {listed}; list each joint once")
    return cols


def index_arg(value: Any, size: int, name: str) -> int:
    """``value`` as an int index in ``[0, size)``.

    Raises:
        ValueError: Naming ``name`` when it is not an int in range.
    """
    if not (is_int(value) and 0 <= value < size):
        raise ValueError(must(name, f"an int in [0, {size})", value))
    return int(value)


def body_states(
    ids: np.ndarray,
    bodies: Sequence[str],
    poses: npt.ArrayLike,
    velocities: npt.ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Checked poses and velocities ``(len(ids), len(bodies), 3)`` of ``World.set_body_states``.

    ``ids``: the copies the rows go to, ``bodies``: every body's path (errors name them).
    Returns new float64 arrays (velocities None: zeros).

    Raises:
        ValueError: On wrong shapes, non-finite values or a state pymunk cannot step from.
    """
    shape = (ids.size, len(bodies), 3)
    poses = np.array(float_array(poses, "set_body_states: poses"))
    vels = (
        np.zeros(shape)
        if velocities is None
        else np.array(float_array(velocities, "set_body_states: velocities"))
    )
    for name, arr, what in (("poses", poses, "x, y, angle"), ("velocities", vels, "vx, vy, w")):
        if arr.shape != shape:
            raise ValueError(
                f"set_body_states: {name} must have shape {shape} (copies, bodies, {what}), "
                f"got {arr.shape}; read the present ones with body_poses / body_velocities "
                "and change the rows to set"
            )
    problem = body_states_error(poses, vels, bodies, ids)
    if problem is not None:
        raise ValueError(
            f"set_body_states: {problem}; give a state the simulation can step from "
            '(docs/world.md, "Limits")'
        )
    return poses, vels
