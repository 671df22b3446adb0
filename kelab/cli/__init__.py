"""The ``kelab`` command: :func:`main` and the table of its subcommands.

The command line is the top layer of KELab: nothing in kelab imports this package but
``python -m kelab``. One module per subcommand or family registers its parser:

- `kelab.cli.demo`: ``kelab demo``, the main job headless;
- `kelab.cli.preview`: ``kelab preview``, a task with zero or random actions;
- `kelab.cli.train`: ``kelab train``;
- `kelab.cli.play`: ``kelab play`` and ``kelab eval``;
- `kelab.cli.export`: ``kelab export``; `kelab.cli.plot`: ``kelab plot``;
- `kelab.cli.new`: ``kelab new``, a starter project (a task of your own);

with the shared parser and converters in `kelab.cli.args`, the task a subcommand starts
from in `kelab.cli.tasks` and the progress lines in `kelab.cli.progress`. Building the
parser imports none of torch, rsl_rl, ray, onnx or matplotlib: a subcommand imports
what it needs when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn, TextIO

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no pygame banner on the command line

from kelab.cli._exit import exit_now  # noqa: E402
from kelab.cli.args import KelabArgumentParser, KelabUsageError, positive_int  # noqa: E402
from kelab.cli.demo import add_demo_parser, run_demo  # noqa: E402
from kelab.cli.export import add_export_parser  # noqa: E402
from kelab.cli.new import add_new_parser  # noqa: E402
from kelab.cli.play import add_play_parsers  # noqa: E402
from kelab.cli.plot import add_plot_parser  # noqa: E402
from kelab.cli.preview import add_preview_parser  # noqa: E402
from kelab.cli.train import add_train_parser  # noqa: E402
from kelab.errors import UserError  # noqa: E402

__all__ = [
    "SUBCOMMANDS",
    "USER_ERRORS",
    "KelabArgumentParser",
    "KelabUsageError",
    "build_parser",
    "main",
    "positive_int",
    "run",
    "run_demo",
]

#: Exceptions that mean "the user asked for something that cannot be done" (exit 2, one
#: line): `kelab.errors.UserError` (``KelabUsageError``, a bad value, config, scene,
#: checkpoint or run folder, a missing extra...) and an OSError (a file or the machine:
#: a missing file, no permission, a full disk). Anything else, a bare ``ValueError`` or
#: ``ImportError`` included, is a bug and keeps its traceback (exit 1).
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, OSError)


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], object], ...] = (
    add_demo_parser,
    add_preview_parser,
    add_train_parser,
    add_play_parsers,
    add_plot_parser,
    add_export_parser,
    add_new_parser,
)
"""What registers each subcommand, in the order ``kelab --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The ``kelab`` argument parser with every subcommand registered."""
    import kelab

    parser = KelabArgumentParser(prog="kelab", description="KELab command line")
    parser.add_argument("--version", action="version", version=f"kelab {kelab.__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` of the command: ``kelab: warning: MESSAGE`` on one line."""
    text = " ".join(str(message).split()) or category.__name__
    stream = sys.stderr if file is None else file
    try:
        print(f"kelab: warning: {text}", file=stream, flush=True)
    except OSError:  # stderr closed: drop the warning, like warnings does
        pass


@contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Show warnings as ``kelab: warning: ...`` lines while a command runs (restored after).

    Only the command line does this: ``import kelab`` leaves Python's warnings as they are.
    """
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        yield


#: User errors whose traceback shows nothing useful: the message is the whole story, so
#: the error line does not offer ``--debug``.
_PLAIN_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kelab`` command (and of ``python -m kelab``).

    Every subcommand's user errors (`USER_ERRORS`: an unknown task, no display, a bad
    ``module:Class``, a missing file, a bad value) print one ``kelab: error: ...`` line
    and return 2; an OSError other than a missing file adds ``(--debug shows the
    traceback)``, and with ``--debug`` (anywhere on the line) the traceback is shown
    instead. Any other exception is a bug: it propagates with its traceback. Argument errors
    print one ``kelab SUBCOMMAND: error: ...; see kelab SUBCOMMAND --help`` line and exit
    2 (``SystemExit``). Warnings print as ``kelab: warning: ...`` lines.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 success, 1 the command ran but failed its check, 2 user error.
    """
    from kelab.render.renderer import DisplayUnavailableError

    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    if debug:  # accepted anywhere, also after the subcommand
        args_list = [a for a in args_list if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        with _one_line_warnings():
            return int(args.func(args))
    except KeyboardInterrupt:
        print("kelab: interrupted", file=sys.stderr)
        return 130
    except (*USER_ERRORS, DisplayUnavailableError) as err:
        if debug:
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        if isinstance(err, OSError) and err.filename is not None and err.strerror:
            message = f"{err.strerror}: {err.filename}"
        plain = isinstance(err, (*_PLAIN_ERRORS, DisplayUnavailableError))
        hint = "" if plain else " (--debug shows the traceback)"
        print(f"kelab: error: {message}{hint}", file=sys.stderr)
        return 2


def run() -> NoReturn:
    """The ``kelab`` executable and ``python -m kelab``: :func:`main`, then a prompt exit.

    After the command, the process ends the way Python's own exit would, less its last
    stage (`kelab.cli._exit`): the ``atexit`` handlers run, the standard streams are
    flushed, and the process exits with :func:`main`'s code without tearing down every
    module and object one by one (0.15-0.18 s after ``kelab train``). The command's files
    are complete and closed by then (checkpoints and the curve atomically, the metrics
    and the TensorBoard log closed). While a non-daemon thread is still running, or on an
    interpreter that exit was not written for, the exit is Python's own. ``main`` itself
    (called by tests and scripts) returns as usual.
    """
    exit_now(main())
