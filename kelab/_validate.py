"""The checks KELab repeats at its boundaries, with one wording.

Every check returns the value converted (``int``, ``float``...) or raises
:class:`kelab.errors.UserError` (a ``ValueError``: the user must fix it) worded "X must
be Y, got Z; W": the field, what is allowed, the value seen (its ``repr``, shortened when
huge) and, when given, what to do. ``bool`` is never accepted as a number (``True`` is
an ``int`` to Python, but ``num_envs=True`` is a mistake). numpy scalars are accepted
wherever the matching Python number is.

This module imports nothing of KELab but `kelab.errors`, so every layer (timing, sim,
render, app, rl, tasks) may use it.

Example:
    >>> from kelab._validate import check_int, check_positive
    >>> check_int(4, "num_envs", low=1)
    4
    >>> check_positive(0.5, "DwellTimer.hold_s", unit="seconds")
    0.5
    >>> check_int(True, "num_envs", low=1)
    Traceback (most recent call last):
    ...
    kelab.errors.UserError: num_envs must be an int >= 1, got True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import TypeVar

from kelab.errors import UserError

__all__ = [
    "LAYOUTS",
    "check_bool",
    "check_choice",
    "check_copies",
    "check_int",
    "check_layout",
    "check_number",
    "check_number_or_none",
    "check_positive",
    "check_seed",
    "is_bool",
    "is_int",
    "is_number",
    "must",
    "show",
]

T = TypeVar("T")

#: The World layouts (``World(layout=...)``, docs/world.md, "Layouts").
LAYOUTS = ("isolated", "packed")

_MAX_SHOWN = 80
_NP_BOOL = ("bool", "bool_")  # numpy 2 / numpy 1 name of numpy's bool scalar


def show(value: object) -> str:
    """Return a short ``repr`` of ``value`` for an error message.

    Args:
        value: Anything.

    Returns:
        ``repr(value)``, or a short description when that would be long.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an int of {value.bit_length()} bits>"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        return f"<{type(value).__name__} object>"
    if len(text) > _MAX_SHOWN:
        return f"<{type(value).__name__} object>"
    return text


def must(name: str, allowed: str, value: object, fix: str = "") -> str:
    """Word an error: ``"<name> must be <allowed>, got <value>[; <fix>]"``.

    Args:
        name: The field, as the user wrote it (``"DwellTimer.hold_s"``).
        allowed: What it must be (``"an int >= 1"``).
        value: The value seen.
        fix: What to do instead (optional).

    Returns:
        The message.
    """
    return f"{name} must be {allowed}, got {show(value)}" + (f"; {fix}" if fix else "")


def is_bool(value: object) -> bool:
    """True for ``True``/``False`` and numpy bools, the values refused where an int goes."""
    kind = type(value)
    return kind is bool or (kind.__module__ == "numpy" and kind.__name__ in _NP_BOOL)


def is_int(value: object) -> bool:
    """True for an int or numpy integer, False for a bool and everything else."""
    if type(value) is int:  # the common case, without an ABC check
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """True for a real number (int, float, numpy scalar, Fraction), never a bool."""
    if type(value) is float or type(value) is int:  # the common cases, without an ABC check
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high:g}"
    return ""


def check_int(
    value: object,
    name: str,
    *,
    low: int | None = None,
    high: int | None = None,
    fix: str = "",
) -> int:
    """Return ``value`` as an ``int`` within ``[low, high]``.

    Args:
        value: The value to check (an int or numpy integer; not a bool).
        name: The field, for the message.
        low: Smallest allowed value (None: no bound).
        high: Largest allowed value (None: no bound).
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"<name> must be an int >= 1, got 0"``.
    """
    if is_int(value):
        number = int(value)  # type: ignore[call-overload]
        if (low is None or number >= low) and (high is None or number <= high):
            return number
    bound = _bounds(low, high, False, False)
    raise UserError(must(name, f"an int {bound}" if bound else "an int", value, fix))


def check_number(
    value: object,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    unit: str = "",
    fix: str = "",
) -> float:
    """Return ``value`` as a finite ``float`` within the bounds.

    Args:
        value: The value to check (a real number; not a bool).
        name: The field, for the message.
        low: Lower bound (None: none).
        high: Upper bound (None: none).
        low_open: Exclude ``low`` itself (``> low`` instead of ``>= low``).
        high_open: Exclude ``high`` itself.
        unit: Unit for the message (``"seconds"`` -> "a finite number of seconds > 0").
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"<name> must be a finite number of seconds > 0, got nan"``.
    """
    return _number(value, name, low, high, low_open, high_open, unit, fix, "")


def check_number_or_none(
    value: object,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    unit: str = "",
    fix: str = "",
) -> float | None:
    """Return None for None, else what `check_number` returns (its message adds "or None").

    For settings where None means "off" (no clamp, no time limit).

    Args:
        value: The value to check: None, or a real number (not a bool).
        name: The field, for the message.
        low: Lower bound (None: none).
        high: Upper bound (None: none).
        low_open: Exclude ``low`` itself.
        high_open: Exclude ``high`` itself.
        unit: Unit for the message.
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"<name> must be a finite number of seconds > 0 or None, got 0"``.

    Example:
        >>> check_number_or_none(None, "max_frame_delta") is None
        True
        >>> check_number_or_none(0, "max_frame_delta", low=0.0, low_open=True)
        Traceback (most recent call last):
        ...
        kelab.errors.UserError: max_frame_delta must be a finite number > 0 or None, got 0
    """
    if value is None:
        return None
    return _number(value, name, low, high, low_open, high_open, unit, fix, " or None")


def _number(
    value: object,
    name: str,
    low: float | None,
    high: float | None,
    low_open: bool,
    high_open: bool,
    unit: str,
    fix: str,
    alternative: str,
) -> float:
    number = math.nan
    if is_number(value):
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:  # an int beyond the range of a float
            pass
    if (
        math.isfinite(number)
        and (low is None or (number > low if low_open else number >= low))
        and (high is None or (number < high if high_open else number <= high))
    ):
        return number
    bound = _bounds(low, high, low_open, high_open)
    allowed = "a finite number" + (f" of {unit}" if unit else "") + (f" {bound}" if bound else "")
    raise UserError(must(name, allowed + alternative, value, fix))


def check_positive(
    value: object, name: str, *, allow_zero: bool = False, unit: str = "", fix: str = ""
) -> float:
    """Return ``value`` as a finite float > 0 (>= 0 with ``allow_zero``).

    Args:
        value: The value to check.
        name: The field, for the message.
        allow_zero: Accept 0.
        unit: Unit for the message.
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"<name> must be a finite number > 0, got -1"``.
    """
    return check_number(value, name, low=0.0, low_open=not allow_zero, unit=unit, fix=fix)


SEED_FIX = "pass an int >= 0, e.g. seed=0 (the same seed repeats a run)"
"""What every seed refusal says to do (World, the envs, EnvConfig, reset seeds)."""

NUM_ENVS_FIX = "give the number of copies, e.g. num_envs=4"
"""What every ``num_envs`` refusal says to do (World, the envs, EnvConfig)."""


def check_seed(value: object, name: str = "seed", fix: str = "") -> int:
    """Return a seed: an int >= 0 (numpy's SeedSequence refuses negative ones).

    Args:
        value: The value to check.
        name: The field, for the message.
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"seed must be an int >= 0, got -1"`` (then ``fix``: the Python API
            passes :data:`SEED_FIX`).
    """
    return check_int(value, name, low=0, fix=fix)


def check_layout(value: object, name: str = "layout") -> str:
    """Return a World layout name, one of :data:`LAYOUTS`.

    The one check of ``layout`` for ``World``, the environments and ``TrainConfig``.

    Args:
        value: The value to check.
        name: The field, for the message.

    Raises:
        UserError: ``"layout must be one of ('isolated', 'packed'), got 'tiled'; ..."``,
            saying what each layout is.

    Example:
        >>> check_layout("packed")
        'packed'
    """
    return check_choice(  # type: ignore[return-value]  # one of LAYOUTS: a str
        value,
        name,
        LAYOUTS,
        fix="'isolated': one pymunk space per copy, each copy bit-identical to a lone copy; "
        "'packed': copies share one space per thread, fastest for many copies (see "
        'docs/world.md, "Layouts")',
    )


def check_copies(
    num_envs: object, seed: object, num_threads: object, layout: object
) -> tuple[int, int, int, str]:
    """Check the copy arguments ``World`` and the environments share, with one wording.

    ``World`` checks them on construction; the environments check them before building
    anything (the task's scene comes first), so a bad value fails at once.

    Args:
        num_envs: Number of environment copies (an int >= 1).
        seed: Seed of the per-copy Generators (an int >= 0).
        num_threads: Threads stepping the copies (an int >= 1).
        layout: One of :data:`LAYOUTS`.

    Returns:
        ``(num_envs, seed, num_threads, layout)`` converted (numpy ints to ``int``).

    Raises:
        UserError: ``"num_threads must be an int >= 1, got 0; ..."``, for the first bad one.

    Example:
        >>> check_copies(4, 0, 1, "packed")
        (4, 0, 1, 'packed')
    """
    return (
        check_int(num_envs, "num_envs", low=1, fix=NUM_ENVS_FIX),
        check_seed(seed, fix=SEED_FIX),
        check_int(
            num_threads,
            "num_threads",
            low=1,
            fix="results are bit-identical for every value; num_threads=1 steps every copy "
            "on the calling thread",
        ),
        check_layout(layout),
    )


def check_bool(value: object, name: str, fix: str = "") -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (or a numpy bool).

    Args:
        value: The value to check.
        name: The field, for the message.
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"<name> must be True or False, got 1"``.
    """
    if is_bool(value):
        return bool(value)
    raise UserError(must(name, "True or False", value, fix))


def check_choice(value: T, name: str, choices: Iterable[T], fix: str = "") -> T:
    """Return ``value`` if it is one of ``choices`` (compared with ``==``, same type).

    Args:
        value: The value to check.
        name: The field, for the message.
        choices: The allowed values.
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"layout must be one of ('isolated', 'packed'), got 'pakced'"``.
    """
    options = tuple(choices)
    for option in options:
        if type(value) is type(option) and value == option:
            return value
    raise UserError(must(name, f"one of {options!r}", value, fix))
