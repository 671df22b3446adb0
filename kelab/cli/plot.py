"""``kelab plot RUN_DIR [RUN_DIR ...]``: training runs' curves on one figure (a PNG).

The runs' ``metrics.csv`` files are read by :func:`kelab.train.curve.read_run` and drawn
by :func:`kelab.train.curve.draw_curves` (matplotlib, imported only when a figure is
drawn), a colour per run.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from kelab._files import make_parent
from kelab.errors import MissingExtraError, UserError

__all__ = ["add_plot_parser", "run_plot"]


def run_plot(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``kelab plot``: draw runs' curves on one figure and say where it went.

    Args:
        args: The parsed arguments (``run_dirs``, ``out``).
        out: Where the ``wrote ...`` line goes (default: stdout).

    Returns:
        0 (a user error raises `kelab.errors.UserError`, which ``kelab`` prints as one
        line, exit 2).
    """
    from kelab.train.curve import draw_curves, read_run

    if importlib.util.find_spec("matplotlib") is None:  # the extra first, as train/export do
        raise MissingExtraError(
            "kelab plot needs matplotlib (not installed); pip install 'kelab[train]'"
        )
    target = Path(args.out)
    if target.suffix.lower() != ".png":
        raise UserError(f"--out must be a .png file, got '{args.out}'; pass a name ending in .png")
    make_parent(target, "--out")  # a missing folder is created, as for every --out
    run_dirs: dict[Path, str] = {}
    for d in args.run_dirs:  # the same run twice is drawn once, with a note
        first = run_dirs.setdefault(Path(d).resolve(), d)
        if first != d:
            warnings.warn(f"{d} is {first} again; it is drawn once", UserWarning, stacklevel=1)
    runs = [read_run(d) for d in run_dirs.values()]
    names = [r.label for r in runs]
    if len(set(names)) < len(names):  # same directory names: tell them apart by their path
        runs = [replace(r, label=str(d)) for r, d in zip(runs, run_dirs.values(), strict=True)]
    try:
        written = draw_curves(target, runs)
    except ImportError as err:
        raise MissingExtraError(
            f"kelab plot needs matplotlib ({err}); pip install 'kelab[train]'"
        ) from None
    noun = "run" if len(runs) == 1 else "runs"
    print(f"wrote {written} ({len(runs)} {noun})", file=out or sys.stdout)
    return 0


def add_plot_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``plot`` to the ``kelab`` command's subparsers."""
    p = sub.add_parser(
        "plot",
        help="draw training runs' curves on one figure (PNG)",
        description="Draw the mean return and success rate of one or more kelab train runs "
        "(their metrics.csv) on one figure, a colour per run, saved as a PNG.",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a kelab train run directory")
    p.add_argument(
        "--out", default="curves.png", metavar="FILE.png", help="the PNG to write (atomically)"
    )
    p.set_defaults(func=run_plot)
