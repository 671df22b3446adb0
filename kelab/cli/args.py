"""The ``kelab`` command's parser and its argparse ``type=`` converters.

:class:`KelabArgumentParser` prints an argument error as one line and shows each option's
default in ``--help``; :class:`KelabUsageError` is a mistake on the command line that
``main`` prints as one ``kelab: error:`` line. Each converter parses the text (``int`` or
``float``), checks the value with the shared check of `kelab._validate` and turns its
``ValueError`` into ``argparse.ArgumentTypeError``, so a bad option prints
``argument --seed: seed must be an int >= 0, got -3``. Every subcommand module of
`kelab.cli` uses them; this module imports nothing of kelab but `kelab._validate` and
`kelab.errors`.

Example:
    >>> from kelab.cli.args import positive_int, seed_int
    >>> positive_int("episodes")("3")
    3
    >>> seed_int("-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: seed must be an int >= 0, got -3
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from kelab._validate import check_int, check_positive, check_seed, must
from kelab.errors import UserError

__all__ = [
    "COUNT_MAX",
    "NUM_ENVS_MAX",
    "SEED_MAX",
    "TASK_HELP",
    "DefaultsHelpFormatter",
    "KelabArgumentParser",
    "KelabUsageError",
    "at_most",
    "converter",
    "folder_path",
    "positive_float",
    "positive_int",
    "seed_int",
]

T = TypeVar("T")

SEED_MAX = 2**64 - 1
"""The largest ``--seed``: torch's generators take 64-bit seeds (larger ones overflow)."""

COUNT_MAX = 10**9
"""The largest count option (``--iterations``, ``--episodes``, ``--frames``...)."""

NUM_ENVS_MAX = 10**6
"""The largest ``--num-envs``: more copies than any World holds (its own, finer check
says how many fit; far above it, allocating them would take minutes before failing)."""

TASK_HELP = (
    "built-in id (CartPole-v0, kelab/CartPole-v0) or module:TaskClass of your own "
    "task (imported from the current folder or PYTHONPATH)"
)
"""The help of the ``task`` argument of ``train``, ``play``, ``eval`` and ``export``."""


class KelabUsageError(UserError):
    """A mistake on the command line: ``main`` prints it as one ``kelab: error:`` line."""


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to an option's help, unless it has none worth showing.

    Skipped for a None or False default (nothing to show) and for help that already says
    its default in words (``"(default: the task's)"``).
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


class KelabArgumentParser(argparse.ArgumentParser):
    """The ``kelab`` parser: argument errors are one line, and ``--help`` shows defaults.

    Every subcommand's parser is one too (``add_subparsers`` makes parsers of the same
    class), so ``kelab train --iterations 0`` prints
    ``kelab train: error: argument --iterations: ...; see kelab train --help`` and exits 2.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # --episode is a typo, not --episodes
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print ``PROG: error: MESSAGE; see PROG --help`` on one line and exit 2."""
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {text}; see {self.prog} --help\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse ``args``; an unknown option is refused by the subcommand it was given to.

        ``kelab eval T --episdoes 5`` prints ``kelab eval: error: unrecognized arguments:
        --episdoes 5; did you mean --episodes?; see kelab eval --help`` (argparse's own
        names the top command's help, which does not list eval's options).
        """
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._subcommand_parser(parsed)
            options = [s for action in parser._actions for s in action.option_strings]
            typed = [e.split("=", 1)[0] for e in extras if e.startswith("-")]
            close = [m for t in typed for m in difflib.get_close_matches(t, options, n=1)]
            hint = f"; did you mean {close[0]}?" if close else ""
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def _subcommand_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the subcommand ``parsed`` ran (itself when it has none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None))
                if isinstance(chosen, KelabArgumentParser):
                    return chosen._subcommand_parser(parsed)
        return self


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


def at_most(value: T, name: str, high: int, why: str, fix: str = "") -> T:
    """``value`` unless it is an int above ``high``: every integer option's top bound.

    Args:
        value: A checked value (anything but an int passes).
        name: The option's name in the message.
        high: The largest value.
        why: Why ``high`` is the limit, for the message.
        fix: What to do instead, appended to the message.

    Raises:
        UserError: ``"num-envs must be an int <= 1000000 (more copies than a World
            holds), got 2000000"``.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value > high:
        digits = str(value)  # as typed (show() would abbreviate a long one)
        seen = digits if len(digits) <= 40 else f"{digits[:12]}...({len(digits)} digits)"
        raise UserError(f"{name} must be an int <= {high} ({why}), got {seen}" + (
            f"; {fix}" if fix else ""))  # fmt: skip
    return value


def _int_in(value: object, name: str, low: int, high: int, fix: str, why: str) -> int:
    """``value`` as an int in ``[low, high]``: ``check_int``'s words, plus the top bound."""
    return at_most(check_int(value, name, low=low, fix=fix), name, high, why, fix)


def positive_int(
    name: str, fix: str = "", high: int = COUNT_MAX, why: str = "the most this command takes"
) -> Callable[[str], int]:
    """``type=`` for an integer option in ``[1, high]`` (``--episodes``, ``--num-envs``).

    Every integer option has a top bound, so a huge value is refused on the command line
    before anything is built or created (not by an overflow deep inside).

    Args:
        name: The option's name in the message.
        fix: What to do instead, appended to the message.
        high: The largest value (default :data:`COUNT_MAX`).
        why: Why ``high`` is the limit, for the message.
    """
    return converter(name, int, lambda value: _int_in(value, name, 1, high, fix, why))


def folder_path(name: str) -> Callable[[str], str]:
    """``type=`` for a folder option (``--run-dir``): not empty, not an existing file.

    Args:
        name: The option's name in the message.
    """

    def check(value: object) -> str:
        text = str(value)
        if not text.strip():
            raise UserError(
                must(name, "a folder path", value, "name a folder, e.g. runs/my-run (an "
                     "empty path would write into the current folder)")
            )  # fmt: skip
        if os.path.exists(text) and not os.path.isdir(text):
            raise UserError(
                f"{name} must be a folder, got the file {text!r}; name a new folder (or the "
                "run being resumed) instead of a file"
            )
        return text

    return converter(name, str, check)


def positive_float(name: str, fix: str = "") -> Callable[[str], float]:
    """``type=`` for a number option that must be finite and > 0 (``--seconds``).

    Args:
        name: The option's name in the message.
        fix: What to do instead, appended to the message.
    """
    return converter(name, float, lambda value: check_positive(value, name, fix=fix))


seed_int: Callable[[str], int] = converter(
    "seed",
    int,
    lambda value: _int_in(check_seed(value), "seed", 0, SEED_MAX, "", "torch's seeds are 64-bit"),
)
"""``type=`` for ``--seed``: an int in ``[0, SEED_MAX]`` (`kelab._validate.check_seed`)."""
