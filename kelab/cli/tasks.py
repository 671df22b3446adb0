"""What ``train``, ``play``, ``eval`` and ``preview`` share: the task named on the line.

:func:`import_task_class` is the task lookup worded for the command line,
:func:`start_command` the shared start of ``train``/``play``/``eval`` (the streams, the
train extra, the task), and :func:`add_task_subcommand` their common arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from kelab.cli.args import TASK_HELP, seed_int
from kelab.errors import UserError

if TYPE_CHECKING:
    from kelab.rl.task import Task

__all__ = [
    "ENV_EXCLUDED",
    "Command",
    "add_task_subcommand",
    "import_task_class",
    "missing_extra",
    "resolve_task",
    "start_command",
]


ENV_EXCLUDED = {
    "timing": "the task's own timing: a policy runs at the timing it was trained at",
    "env_spacing": "display only: where the copies sit in a view",
    "copy_offset": "RayLearningEnv sets it for its workers' slices of the copies",
}
"""`EnvConfig` fields no subcommand has an option for, and why (the subcommands'
`~kelab.cli.config_options.ConfigOptions` add their own reasons for the others)."""


def resolve_task(spec: str) -> tuple[str | None, str]:
    """Return ``(gymnasium id or None, "module:TaskClass")`` for a task spec.

    The one resolution of every subcommand (:func:`kelab.tasks.registry.resolve_task`).

    Raises:
        UserError: For an unknown id, listing the built-in ones.
    """
    from kelab.tasks.registry import resolve_task as resolve

    return resolve(spec)


def import_task_class(class_path: str) -> type[Task]:
    """The task class of ``"module:Class"`` for a command (``train``/``play``/``eval``/``preview``).

    :func:`kelab.tasks.registry.task_class`, except that a module that raises while it is
    imported (its own bug) is one line naming the module and its error, not a traceback.

    Raises:
        UserError: ``cannot import module 'broken' of task 'broken:Task': RuntimeError:
            boom`` (``--debug`` shows the module's traceback: it is the cause).
    """
    from kelab.tasks.registry import task_class

    try:
        return task_class(class_path)
    except UserError:
        raise  # already worded for the command line (a missing module, a bad name...)
    except Exception as err:  # the module's own code failed while importing
        module = class_path.partition(":")[0]
        what = " ".join(f"{type(err).__name__}: {err}".split())
        raise UserError(
            f"cannot import module {module!r} of task {class_path!r}: {what}; fix the "
            f"error in {module} (kelab --debug ... shows where it was raised)"
        ) from err


@dataclass(frozen=True)
class Command:
    """What ``train``, ``play`` and ``eval`` start from: the streams and the task."""

    out: TextIO
    err: TextIO
    task_id: str | None
    class_path: str
    cls: type[Task]

    @property
    def task_name(self) -> str:
        """The Gymnasium id, or ``module:TaskClass`` of a task of your own."""
        return self.task_id or self.class_path


def missing_extra(out: TextIO) -> bool:
    """Say in one line on ``out`` how to install the train extra; False when it is there."""
    from kelab.train.extra import INSTALL_HINT, missing_training_packages

    missing = missing_training_packages()
    if missing:
        print(f"kelab: error: {', '.join(missing)} not installed; {INSTALL_HINT}", file=out)
        return True
    return False


def start_command(
    args: argparse.Namespace, out: TextIO | None, err: TextIO | None, *, extra: bool = True
) -> Command | None:
    """The shared start of a subcommand: None (after saying so) without the train extra.

    Args:
        args: The parsed arguments (``args.task`` is the task spec).
        out: Where results go (default: stdout).
        err: Where progress and problems go (default: stderr).
        extra: Whether the train extra is needed; ``False`` for play and eval, whose
            policy runs in numpy.

    Returns:
        The command's streams and task, or None when the extra is missing.
    """
    out, err = out or sys.stdout, err or sys.stderr
    if extra and missing_extra(err):
        return None
    task_id, class_path = resolve_task(args.task)
    return Command(out, err, task_id, class_path, import_task_class(class_path))


def add_task_subcommand(
    sub: argparse._SubParsersAction,
    name: str,
    summary: str,
    run: Callable[[argparse.Namespace], int],
    seed: int,
    seed_help: str,
) -> argparse.ArgumentParser:
    """A subcommand taking a task and ``--seed`` (and ``--checkpoint`` unless training).

    ``--help`` shows each option's default (the ``kelab`` parser's formatter).

    Args:
        sub: What ``parser.add_subparsers()`` returned.
        name: The subcommand (``train``, ``play``, ``eval``).
        summary: Its one-line help (the description is it as a sentence).
        run: ``args -> exit code``.
        seed: The default ``--seed``.
        seed_help: What the seed seeds.

    Returns:
        The new subparser.
    """
    p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
    p.add_argument("task", help=TASK_HELP)
    p.add_argument(
        "--seed", type=seed_int, default=seed, help=f"{seed_help}, an int from 0 to 2**64 - 1"
    )
    if name != "train":
        p.add_argument(
            "--checkpoint",
            default=None,
            metavar="SPEC",
            help="RUN_DIR:best, RUN_DIR:latest or a checkpoint .json (default: the task's "
            "shipped policy)",
        )
    p.set_defaults(func=run)
    return p
