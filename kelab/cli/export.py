"""``kelab export TASK --out FILE.onnx``: a checkpoint's policy as an ONNX graph.

The graph is built and written by :func:`kelab.train.export.export_onnx` (onnx is
imported only when a file is written; it needs ``pip install 'kelab[export]'``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from kelab.cli.args import TASK_HELP

__all__ = ["add_export_parser", "run_export"]


def run_export(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``kelab export``: write the ONNX file and say where it went.

    Args:
        args: The parsed arguments (``task``, ``checkpoint``, ``out``).
        out: Where the ``wrote ...`` line goes (default: stdout).
        err: Unused; the signature of every subcommand's runner.

    Returns:
        0 (a user error raises, and ``kelab`` prints it as one line, exit 2).
    """
    from kelab.train.export import export_onnx

    out = out or sys.stdout
    path = export_onnx(args.task, args.out, args.checkpoint)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)", file=out)
    return 0


def add_export_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``export`` to the ``kelab`` command's subparsers."""
    summary = "write a policy as an ONNX graph (needs kelab[export])"
    p = sub.add_parser(
        "export", help=summary, description="Write a policy as an ONNX graph: raw float32 "
        "observations [N, obs_dim] in, the actions kelab play sends out (needs kelab[export]).",
    )  # fmt: skip
    p.add_argument("task", help=TASK_HELP)
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="SPEC",
        help="RUN_DIR:best, RUN_DIR:latest or a checkpoint .json (default: the task's "
        "shipped policy)",
    )
    p.add_argument("--out", required=True, metavar="FILE.onnx", help="the ONNX file to write")
    p.set_defaults(func=run_export)
