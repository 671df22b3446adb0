"""The error a task's bad output raises, and how such output is described (bottom of rl/).

Every rl module that checks what a task returned raises :class:`TaskError` (a
`kelab.errors.UserError`: the task's author must fix it); this module imports nothing of
KELab but `kelab.errors`, so it sits below ``task.py``, ``terminations.py`` and
``success.py`` alike.
"""

from __future__ import annotations

import numpy as np

from kelab.errors import UserError

__all__ = ["TaskError", "describe_array"]


class TaskError(UserError):
    """A task returned something the environment cannot use (a bad shape, NaN, a bad name).

    The message names the task method, the offending condition or value, and the copies.
    """


def describe_array(value: object) -> str:
    """Say what ``value`` is, for an error message: dtype and shape, or its type.

    Args:
        value: What a task returned.

    Returns:
        ``"a float32 array of shape (4,)"`` for an array, else ``"a <type name>"``.

    Example:
        >>> import numpy as np
        >>> describe_array(np.zeros(2, np.float32)), describe_array([1])
        ('a float32 array of shape (2,)', 'a list')
    """
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    return f"a {type(value).__name__}"
