"""The training extra's packages, checked before anything imports them.

The public door for the other rooms (``kelab.cli`` says how to install the extra before
a command starts); importing it imports nothing but :mod:`importlib.util`.

Example:
    >>> from kelab.train.extra import INSTALL_HINT, missing_training_packages
    >>> isinstance(missing_training_packages(), list) and "kelab[train]" in INSTALL_HINT
    True
"""

from __future__ import annotations

import importlib.util

from kelab.errors import MissingExtraError

__all__ = ["INSTALL_HINT", "missing_training_packages", "require_training_extra"]

INSTALL_HINT = (
    "training needs the train extra: pip install 'kelab[train]' (a CPU-only machine first "
    "gets a CPU torch: pip install torch==2.13.0 --index-url "
    "https://download.pytorch.org/whl/cpu)"
)

_MODULES = {
    "torch": "torch",
    "matplotlib": "matplotlib",  # training_curve.png: said before training, not after it
}


def missing_training_packages() -> list[str]:
    """The distributions of the train extra that are not installed."""
    return [dist for mod, dist in _MODULES.items() if importlib.util.find_spec(mod) is None]


def require_training_extra() -> None:
    """Say in one line how to install the train extra when a package of it is missing.

    Raises:
        MissingExtraError: A `kelab.errors.UserError` and an ImportError, naming the
            missing packages and :data:`INSTALL_HINT`.
    """
    missing = missing_training_packages()
    if missing:
        raise MissingExtraError(f"{', '.join(missing)} not installed; {INSTALL_HINT}")
