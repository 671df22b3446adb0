"""Value checks shared by the World and its views (kelab.sim internal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kelab.sim.physics._guard import native_module
from kelab.sim.physics._limits import STATE_BOUND, STATE_POSITION_MAX, STATE_SPEED_MAX

#: The C helper's one-pass bounds check of rows (``within``), or None (numpy's reductions).
_WITHIN = getattr(native_module(), "within", None)
#: A state row's bounds for it: every value within ±STATE_BOUND.
_ROW_BOUNDS = (np.full(3, -STATE_BOUND), np.full(3, STATE_BOUND))


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


def body_states_error(
    poses: np.ndarray,
    velocities: np.ndarray,
    bodies: Sequence[str] | None = None,
    copies: Sequence[int] | np.ndarray | None = None,
) -> str | None:
    """Why ``(copies, bodies, 3)`` poses and velocities cannot be written, or None.

    The answer names the first value out (``x = 2e+07 for body '/World/Robot/cart' of
    copy 3``): the body by ``bodies[b]`` (else its index) and the copy by ``copies[row]``
    (else the row).
    """
    # the common answer, in one pass each with the C helper (else four reductions, no
    # temporaries): every value within the smaller bound (NaN and inf fail these
    # comparisons too; an angle is free, so one beyond the bound takes the checks below)
    # (12 Humanoid copies: ~10 -> ~5 us with the reductions, -> ~1.5 us in C)
    within = _WITHIN
    if (
        within is not None
        and poses.size
        and velocities.size
        and poses.flags.c_contiguous
        and velocities.flags.c_contiguous
        and poses.dtype == velocities.dtype == np.float64
        and poses.shape[-1] == velocities.shape[-1] == 3
    ):
        if within(poses, *_ROW_BOUNDS) and within(velocities, *_ROW_BOUNDS):
            return None
    elif (
        poses.size
        and velocities.size
        and -STATE_BOUND <= poses.min()
        and poses.max() <= STATE_BOUND
        and -STATE_BOUND <= velocities.min()
        and velocities.max() <= STATE_BOUND
    ):
        return None
    pose_fields, velocity_fields = ("x", "y", "angle"), ("vx", "vy", "w")
    for name, values, fields in (
        ("poses", poses, pose_fields),
        ("velocities", velocities, velocity_fields),
    ):
        out = ~np.isfinite(values)
        if out.any():
            what = f"{name} must be finite numbers"
            return _first_out(what, values, out, fields, bodies, copies)
    out = np.abs(poses[..., :2]) > STATE_POSITION_MAX
    if out.any():
        what = f"positions must be within ±{STATE_POSITION_MAX:g} m"
        return _first_out(what, poses, out, pose_fields, bodies, copies)
    out = np.abs(velocities) > STATE_SPEED_MAX
    if out.any():
        what = f"velocities must be within ±{STATE_SPEED_MAX:g} (m/s, rad/s)"
        return _first_out(what, velocities, out, velocity_fields, bodies, copies)
    return None


def _first_out(
    what: str,
    values: np.ndarray,
    out: np.ndarray,
    fields: tuple[str, ...],
    bodies: Sequence[str] | None,
    copies: Sequence[int] | np.ndarray | None,
) -> str:
    """``what``, naming the first value ``out`` marks: its field, value, body and copy."""
    row, b, c = (int(i) for i in np.argwhere(out)[0])
    body = repr(bodies[b]) if bodies is not None else str(b)
    copy = int(copies[row]) if copies is not None else row
    more = int(np.count_nonzero(out)) - 1
    also = f" (and {more} more value{'s' if more > 1 else ''})" if more else ""
    return f"{what}, got {fields[c]} = {values[row, b, c]:g} for body {body} of copy {copy}{also}"


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
