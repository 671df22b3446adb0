"""argparse ``type=`` converters for the ``kelab`` command, worded like `kelab._validate`.

Each converter parses the text (``int`` or ``float``), checks the value with the shared
check and turns its ``ValueError`` into ``argparse.ArgumentTypeError``, so a bad option
prints the subcommand's usage and ``argument --seed: seed must be an int >= 0, got -3``.
A bottom-layer module like `kelab._validate` (it imports nothing else of kelab), used by
``kelab/cli.py``, ``kelab/cli_preview.py`` and ``kelab/train/cli.py``.

Example:
    >>> from kelab._cli_args import positive_int, seed_int
    >>> positive_int("episodes")("3")
    3
    >>> seed_int("-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: seed must be an int >= 0, got -3
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from kelab._validate import check_int, check_positive, check_seed

__all__ = ["converter", "positive_float", "positive_int", "seed_int"]

T = TypeVar("T")


def converter(
    name: str, parse: Callable[[str], object], check: Callable[[object], T]
) -> Callable[[str], T]:
    """Return an argparse ``type=`` that parses the text, then checks the value.

    Args:
        name: The option's name (argparse shows it in its own messages).
        parse: Text -> value (``int``, ``float``); text it cannot parse goes to ``check``
            as it is, so the message shows what was typed.
        check: Value -> the checked value, raising ``ValueError`` worded by
            `kelab._validate`.

    Returns:
        The converter; it raises ``argparse.ArgumentTypeError`` with the check's message.
    """

    def convert(text: str) -> T:
        try:
            value = parse(text)
        except ValueError:
            value = text
        try:
            return check(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = name  # argparse names the type in its own messages
    return convert


def positive_int(name: str, fix: str = "") -> Callable[[str], int]:
    """``type=`` for an integer option that must be >= 1 (``--episodes``, ``--num-envs``).

    Args:
        name: The option's name in the message.
        fix: What to do instead, appended to the message.
    """
    return converter(name, int, lambda value: check_int(value, name, low=1, fix=fix))


def positive_float(name: str, fix: str = "") -> Callable[[str], float]:
    """``type=`` for a number option that must be finite and > 0 (``--seconds``).

    Args:
        name: The option's name in the message.
        fix: What to do instead, appended to the message.
    """
    return converter(name, float, lambda value: check_positive(value, name, fix=fix))


seed_int: Callable[[str], int] = converter("seed", int, check_seed)
"""``type=`` for ``--seed``: an int >= 0 (`kelab._validate.check_seed`)."""
