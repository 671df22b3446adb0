"""Field checks of the scene description: one wording for every scene class.

Each check takes the owner (``"BodySpec"``, ``"sensor 'imu'"``) and the field name for
the message, returns the value converted (floats are stored as ``float``, ``-0.0`` as
``0.0``, so equal descriptions have equal fingerprints) or raises ValueError worded "X must
be Y, got Z; W" (docs/scene.md, "Validation"). :func:`short_repr` keeps a message short
and safe for any data a file holds. The shapes, joints, sensor kinds, items, instances and
the SceneBuilder all validate through here; it imports only :mod:`kelab._validate`.
"""

from __future__ import annotations

import reprlib
from typing import Any

import numpy as np

from kelab._validate import check_bool, check_number, is_int, must
from kelab.errors import UserError

__all__ = [
    "Vec2",
    "check_path",
    "field_flag",
    "field_label",
    "field_name",
    "field_number",
    "field_positive",
    "field_tuple",
    "field_vec2",
    "set_field",
    "short_repr",
]

Vec2 = tuple[float, float]

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxlong = 40


def short_repr(value: object) -> str:
    """Return a short, always-safe repr of ``value`` for error messages.

    Nested, huge or self-referencing data from a file must not turn an error message into a
    RecursionError, a ValueError about integer digits, or a megabyte of text.
    """
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a repr of user data may raise anything
        if isinstance(value, int):
            return f"<an int of {value.bit_length()} bits>"
        return f"<{type(value).__name__} object>"


def field_number(
    owner: str, name: str, value: object, fix: str = "", *, limit: float | None = None
) -> float:
    """Return ``value`` as a finite float or raise ValueError naming the field.

    Args:
        owner: Class or function the field belongs to, for the message.
        name: Field name, for the message.
        value: The value to check: a real number (int, float, numpy scalar; not a bool).
        fix: What to do instead, appended to the message.
        limit: When given, ``|value|`` must be <= limit.
    """
    field = f"{owner}.{name}"
    hint = fix or "give an int or float"
    try:
        number = check_number(value, field, fix=hint)
    except ValueError:
        if is_int(value):  # a finite int fails only by its size, e.g. 10**400
            big = f"it is beyond the range of a float: {fix or 'rescale the model'}"
            raise UserError(must(field, "a finite number", value, big)) from None
        raise
    if limit is not None and abs(number) > limit:
        fix = fix or "rescale the model (ranges: docs/scene.md)"
        raise UserError(must(field, f"within ±{limit:g}", value, fix))
    return number + 0.0  # + 0.0 turns -0.0 into 0.0 (stable fingerprints)


def field_positive(
    owner: str,
    name: str,
    value: object,
    *,
    allow_zero: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    unit: str = "",
    fix: str = "values outside this range make the 2D physics unstable (see the ranges in "
    "docs/scene.md), so rescale the model",
) -> float:
    """Return ``value`` as a float > 0 (>= 0 with ``allow_zero``), within ``[lo, hi]``.

    Zero, when allowed, is exempt from ``lo`` (a zero-radius segment is a thin line).
    ``fix``: what the error out of that range tells the user to do (a physical
    quantity's default; a view's zoom says its own).
    """
    number = field_number(owner, name, value)
    field = f"{owner}.{name}"
    if number < 0.0 or (number == 0.0 and not allow_zero):
        raise UserError(must(field, f"a finite number {'>=' if allow_zero else '>'} 0", value))
    if number == 0.0:
        return number
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        zero = "0 or " if allow_zero else ""
        low = f"[{lo:g}" if lo is not None else "(0"
        high = f"{hi:g}]" if hi is not None else "inf)"
        raise UserError(
            must(
                field,
                f"{zero}in {low}, {high}{unit}",
                value,
                fix,
            )
        )
    return number


def field_vec2(owner: str, name: str, value: object, *, limit: float | None = None) -> Vec2:
    """Return ``value`` as a ``(float, float)`` tuple or raise ValueError naming the field."""
    ok = isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1)
    if not ok or len(value) != 2:  # type: ignore[arg-type]
        raise UserError(
            f"{owner}.{name} must be a pair (x, y) of finite numbers, got {short_repr(value)}"
        )
    x, y = value  # type: ignore[misc]
    return (
        field_number(owner, f"{name}[0]", x, limit=limit),
        field_number(owner, f"{name}[1]", y, limit=limit),
    )


def set_field(obj: object, name: str, value: object) -> None:
    """Store ``value`` (checked, converted) in field ``name`` of a frozen dataclass."""
    object.__setattr__(obj, name, value)


def _text(value: object, *, slash: bool) -> bool:
    return (
        isinstance(value, str)
        and bool(value.strip())
        and value == value.strip()
        and value.isprintable()
        and (slash or "/" not in value)
    )


def field_name(owner: str, attr: str, value: object) -> str:
    """Return a name: a non-empty printable string without '/' or surrounding spaces."""
    if not _text(value, slash=False):
        raise UserError(
            f"{owner}.{attr} must be a non-empty printable string without '/' or surrounding "
            f"spaces, got {short_repr(value)}; use a name such as 'pole'"
        )
    return value  # type: ignore[return-value]


def field_label(owner: str, attr: str, value: object) -> str:
    """A sensor, site or camera name: printable, no surrounding spaces ('/' allowed)."""
    if not _text(value, slash=True):
        raise UserError(
            f"{owner}.{attr} must be a non-empty printable string without surrounding "
            f"spaces, got {short_repr(value)}; use a name such as 'torso.imu'"
        )
    return value  # type: ignore[return-value]


def field_flag(owner: str, attr: str, value: object) -> bool:
    """Return a bool field (numbers and strings refused)."""
    return check_bool(value, f"{owner}.{attr}")


def field_tuple(owner: str, attr: str, value: object, types: tuple[type, ...]) -> tuple[Any, ...]:
    """Return a tuple or list of ``types`` items as a tuple."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
        raise UserError(f"{owner}.{attr} must be a tuple, got {short_repr(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, types):
            allowed = ", ".join(t.__name__ for t in types)
            raise UserError(f"{owner}.{attr}[{i}] must be one of {allowed}, got {short_repr(item)}")
    return tuple(value)


def check_path(value: object, what: str = "path") -> str:
    """Return ``value`` if it is an absolute scene path like ``'/World/Robot'``."""
    ok = (
        isinstance(value, str)
        and value.startswith("/")
        and value != "/"
        and not value.endswith("/")
        and value.isprintable()
        and all(part and part == part.strip() for part in value[1:].split("/"))
    )
    if not ok:
        raise UserError(
            f"{what} must be an absolute path like '/World/Robot' (leading '/', no empty, "
            f"trailing, space-padded or unprintable parts), got {short_repr(value)}"
        )
    return value  # type: ignore[return-value]
