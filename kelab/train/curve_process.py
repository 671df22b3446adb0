r"""``CurveProcess``: ``training_curve.png`` drawn in a second process, off the trainer's path.

matplotlib takes most of a second to import and a quarter of one to draw a figure; drawn
in the trainer, both come after the last iteration, before the command can end. ``kelab
train`` forks a ``CurveProcess`` first thing, before the trainer imports torch: the
process imports matplotlib on the other core while torch loads, then draws each curve
the trainer's :class:`~kelab.train.runlog.RunLog` sends it (the rows as JSON: no pickle)
while the trainer goes on. The same :func:`~kelab.train.curve.write_training_curve` draws
it, so the PNG is the one the trainer would have drawn, written atomically.

A drawing is waited for before the next is sent and when the log closes; a process that
is gone or failed says so (``False``), and the log then draws the curve itself.

This module imports neither torch nor matplotlib.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> png = Path(tempfile.mkdtemp()) / "curve.png"
    >>> drawer = CurveProcess()
    >>> drawer.submit(png, {"history": [[1000, 5.0, 0.1], [2000, 9.0, 0.3]]})
    True
    >>> drawer.finish()
    True
    >>> png.read_bytes()[:4] == b"\x89PNG"
    True
    >>> drawer.close()
"""

from __future__ import annotations

import json
import os
import signal
import warnings
from typing import TYPE_CHECKING, Any

from kelab.train._ctrl_c import uninterrupted
from kelab.train._fork import HelperProcess, can_fork, reply, requests

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["CurveProcess", "start_curve_process"]

_OK = b"ok"


def _serve(conn: Connection) -> None:
    """The drawing process: import matplotlib now, then draw each request until the end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer's to handle (it ends this)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    warnings.simplefilter("ignore")  # nothing to stderr: its lock may be a parent thread's
    try:  # what the first drawing needs, loaded while the trainer imports torch
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
        import matplotlib.ticker  # noqa: F401

        from kelab.train.curve import write_training_curve
    except Exception as err:  # every request then fails: the trainer draws itself
        failure: bytes | None = f"{type(err).__name__}: {err}".encode()
    else:
        failure = None
    try:
        for data in requests(conn):
            answer = failure
            if answer is None:
                try:
                    request = json.loads(data)
                    write_training_curve(
                        request["path"],
                        [tuple(row) for row in request["history"]],
                        [tuple(e) for e in request.get("evaluations", ())],
                        wall_times=request.get("wall_times", ()),
                        target=request.get("target"),
                        title=request.get("title", ""),
                    )
                    answer = _OK
                except Exception as err:  # reported: the trainer draws it itself
                    answer = f"{type(err).__name__}: {err}".encode()
            if not reply(conn, answer):
                break
    finally:
        conn.close()


class CurveProcess(HelperProcess):
    """Draw training curves in a forked process that imported matplotlib up front.

    Start it before the heavy imports of the process that trains (``kelab train`` does,
    before torch), hand it to :class:`~kelab.train.trainer.RLTrainer` (``curve_process``),
    and close it when the run is over.

    Raises:
        RuntimeError: When this process cannot fork (see :func:`~kelab.train._fork.can_fork`).
    """

    what = "curve process"
    fix = "the trainer draws training_curve.png itself"

    def __init__(self) -> None:
        if not can_fork():
            raise RuntimeError(
                "CurveProcess cannot fork here (no 'fork' start method, or this process is "
                "a Ray driver); let the trainer draw the curve itself"
            )
        super().__init__(_serve, (), "kelab-curve")
        self._dropped = False  # closed with a drawing in progress: nobody drew it

    def close(self) -> None:
        """Stop the process; a drawing in progress is dropped (:meth:`finish` says False)."""
        self._dropped = self._dropped or self._pending
        super().close()

    def submit(self, path: str | os.PathLike[str], curve: dict[str, Any]) -> bool:
        """Start drawing ``curve`` into ``path`` (after the drawing before it is done).

        Args:
            path: The PNG to write (atomically).
            curve: The keyword arguments of :func:`~kelab.train.curve.write_training_curve`
                but ``path``: ``history`` (required), ``evaluations``, ``wall_times``,
                ``target``, ``title``; JSON values (NaN allowed).

        Returns:
            True when sent; False when the process is gone (draw it in this process).
        """
        self.finish()  # a newer curve supersedes the last one whether or not it failed
        data = json.dumps({**curve, "path": os.fspath(path)}).encode()
        with uninterrupted():  # sent and marked pending, or neither
            try:
                self._conn.send_bytes(data)
            except (OSError, ValueError):  # the process (or this end) is gone
                return False
            self._pending = True
        return True

    def finish(self) -> bool:
        """Wait for the drawing sent last; True when it was written (or none was sent).

        False when it failed, the process is gone or :meth:`close` dropped it: the caller
        draws it itself.
        """
        if self._dropped:
            self._dropped = False
            return False
        if not self._pending:
            return True
        self.wait()
        with uninterrupted():  # the answer read whole, or not at all
            self._pending = False
            try:
                answer = self._conn.recv_bytes()
            except (EOFError, OSError):
                return False
        return answer == _OK


def start_curve_process() -> CurveProcess | None:
    """A started :class:`CurveProcess`, or None where this process cannot fork one."""
    return CurveProcess() if can_fork() else None
