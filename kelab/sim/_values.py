"""Value checks shared by the World and its views (kelab.sim internal)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kelab.sim.physics._limits import STATE_BOUND, STATE_POSITION_MAX, STATE_SPEED_MAX


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (for error messages)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def float_array(value: Any, name: str) -> np.ndarray:
    """``value`` as float64; only real numbers (ints, floats) are accepted.

    Raises:
        ValueError: For strings, complex numbers, bools, objects or ragged lists.
    """
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        return value
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.kind not in "iuf":
        kind = "ragged or not an array" if arr is None else f"dtype {arr.dtype}"
        raise ValueError(
            f"{name} must be real numbers (ints or floats), got {short(value)} ({kind})"
        )
    return arr.astype(np.float64, copy=False)


def vec2(value: Any, name: str) -> np.ndarray:
    v = float_array(value, name)
    if v.shape != (2,):
        raise ValueError(f"{name} must have shape (2,), got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name} must be finite, got {v.tolist()}")
    return v


def body_states_error(poses: np.ndarray, velocities: np.ndarray) -> str | None:
    """Why ``(..., 3)`` poses and velocities cannot be written as body states, or None."""
    # the common answer in four reductions and no temporaries: every value within the
    # smaller bound (NaN and inf fail these comparisons too; an angle is free, so one
    # beyond the bound takes the checks below) (~10 -> ~5 us for 12 Humanoid copies)
    if (
        poses.size
        and velocities.size
        and -STATE_BOUND <= poses.min()
        and poses.max() <= STATE_BOUND
        and -STATE_BOUND <= velocities.min()
        and velocities.max() <= STATE_BOUND
    ):
        return None
    if not (np.isfinite(poses).all() and np.isfinite(velocities).all()):
        return "must be finite, got NaN or inf"
    far = float(np.abs(poses[..., :2]).max(initial=0.0))
    if far > STATE_POSITION_MAX:
        return f"positions must be within ±{STATE_POSITION_MAX:g} m, got {far:g}"
    fast = float(np.abs(velocities).max(initial=0.0))
    if fast > STATE_SPEED_MAX:
        return f"velocities must be within ±{STATE_SPEED_MAX:g} (m/s, rad/s), got {fast:g}"
    return None


FORCE_MAX = 1e9
"""Largest ``|fx|``, ``|fy|`` (N) and ``|torque|`` (N·m) of a held external force, set
through the API or carried by a snapshot: far beyond any scene's weights (masses <= 1e6
kg). A body that a force within it still flings past the state limits is named by the
step that does it (World.step's limits check)."""


def forces_error(forces: np.ndarray) -> str | None:
    """Why ``(..., 3)`` external forces and torques cannot be held, or None."""
    if not np.isfinite(forces).all():
        return "must be finite numbers, got NaN or inf"
    big = float(np.abs(forces).max(initial=0.0))
    if big > FORCE_MAX:
        return f"must be within ±{FORCE_MAX:g} (N, N·m), got {big:g}"
    return None
