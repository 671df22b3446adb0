"""Value checks shared by the World and its views (kelab.sim internal)."""

from __future__ import annotations

from typing import Any

import numpy as np


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
