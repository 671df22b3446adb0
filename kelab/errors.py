"""The error for what the user must fix: ``ke.UserError`` (bottom layer, imports nothing).

KELab raises :class:`UserError` (or a subclass) where the input is wrong, not KELab: a
value out of range, a config field, a scene's field, a checkpoint or run folder that does
not fit, a command-line argument. Its message says what is wrong and how to fix it, in
one line ("X must be Y, got Z; do W"). The ``kelab`` command prints such an error as one
``kelab: error: ...`` line and exits 2; any other exception is a bug and keeps its
traceback (exit 1).

:class:`UserError` is a ``ValueError``, so ``except ValueError`` keeps catching it;
:class:`MissingExtraError` (an optional package is not installed) is also an
``ImportError``.

Example:
    >>> import kelab as ke
    >>> from kelab._validate import check_int
    >>> try:
    ...     check_int(0, "num_envs", low=1)
    ... except ke.UserError as err:
    ...     print(err)
    num_envs must be an int >= 1, got 0
"""

from __future__ import annotations

__all__ = ["MissingExtraError", "UserError"]


class UserError(ValueError):
    """Something the user must fix (a value, a file, an argument); the message says how."""


class MissingExtraError(UserError, ImportError):
    """An optional package a command needs is not installed; the message says how to."""
