"""A run directory's logs: ``metrics.csv``, TensorBoard events, ``training_curve.png``.

One row per iteration (the columns are :data:`METRICS`); the curve plots the mean return
and the training success rate against env steps, with the evaluated success rate of the
deterministic policy (``TrainConfig.eval_every``) as points (a check that stopped early,
whose rate is only the most it can be, as a downward triangle). A resumed run appends to the
run's ``metrics.csv`` (rewriting it once under the current columns if an older version
wrote it, the original kept as ``metrics.old.csv``) and draws the whole run.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> log = RunLog(d, enabled=True)
    >>> log.open()
    >>> from kelab.train.records import IterationRow
    >>> log.record(IterationRow(1, 64, 0.5, 2.5, 0.0, 3, 128.0, 256.0, 1e-3, 1.0, 0.1, 0.0, 1.4))
    >>> log.close()
    >>> (d / "metrics.csv").read_text().splitlines()[1].split(",")[:5]
    ['1', '64', '0.5', '2.5', '0']
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
import warnings
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kelab._files import open_nofollow
from kelab.train.records import IterationRow

if TYPE_CHECKING:
    from kelab.train.curve_process import CurveProcess

__all__ = ["METRICS", "RunLog"]

METRICS = (
    "iteration",
    "env_steps",
    "wall_time_s",
    "mean_return",
    "success_rate",
    "episodes",
    "env_steps_per_s",
    "collect_steps_per_s",
    "learning_rate",
    "action_std",
    "value_loss",
    "surrogate_loss",
    "entropy",
    "eval_success_rate",
    "eval_iteration",
    "eval_episodes",
    "eval_stopped_early",
)
"""The columns of ``metrics.csv``: ``eval_success_rate`` is the success rate of the
verdict that arrived in that iteration, on the policy of iteration ``eval_iteration``,
over ``eval_episodes`` episodes (all empty when none came). ``eval_stopped_early`` is 1
when that check stopped before its episodes ended (the target out of reach): the rate is
then the most it can be (the episodes still running all succeeding), not a measurement;
0 when it is measured."""

# what goes to TensorBoard: not the counts, the iteration judged or the flag; the rate
# of a check that stopped early goes under a tag of its own (`_BOUND_TAG`)
_SCALARS = (*METRICS[3:13], "eval_success_rate")
_BOUND_TAG = "train/eval_success_rate_at_most"


class RunLog:
    """The logs of one training run in ``run_dir`` (nothing is written when disabled).

    With a ``drawer`` (:class:`~kelab.train.curve_process.CurveProcess`) the curve is
    drawn in that process while training goes on; :meth:`close` waits for the last one
    (drawing it here if that process failed), so the PNG is there once the log is closed.

    Attributes:
        history: ``(env_steps, mean_return, success_rate)`` per iteration, for the curve.
        evaluations: ``(env_steps, success_rate, stopped_early)`` of each evaluated
            policy (``stopped_early``: the rate is the most it can be).
    """

    def __init__(self, run_dir: Path, enabled: bool, drawer: CurveProcess | None = None) -> None:
        """Log to ``run_dir`` (created on :meth:`open`) if ``enabled``; curves by ``drawer``."""
        self.run_dir = Path(run_dir)
        self.enabled = bool(enabled)
        self.drawer = drawer
        self._drawing: dict[str, Any] | None = None  # the curve the drawer is drawing
        self._curve_warned = False  # a curve that could not be drawn was reported
        self.history: list[tuple[int, float, float | None]] = []
        self.evaluations: list[tuple[int, float, bool]] = []
        self.wall_times: list[float | None] = []  # wall_time_s per row: the curve's top axis
        self._drawn_at: float | None = None  # time.monotonic() of the last curve
        self._steps_at: dict[int, int] = {}  # iteration -> env steps, to place verdicts
        self._file: IO[str] | None = None
        self._csv: Any = None
        self._writer: Any = None

    def open(self) -> None:
        """Open ``metrics.csv`` for appending (and TensorBoard); a no-op when open."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self._drawn_at is None:  # draw_curve's min_interval_s counts from here
            self._drawn_at = time.monotonic()
        if not self.enabled or self._file is not None:
            return
        path = self.run_dir / "metrics.csv"
        rows = _read_rows(path) if path.exists() else None
        if rows is not None and not self.history:  # a resumed run: the curve shows it all
            for row in rows:
                self._remember(row)
        if rows is not None and _header(path) != list(METRICS):
            # an older version's columns: rewritten once under the current ones, the
            # original kept beside it (rows it could not read are not lost)
            path.replace(path.with_name("metrics.old.csv"))
            _rewrite(path, rows)
        new = not path.exists()
        # appended in place, never through a link (O_NOFOLLOW: a link raises ELOOP)
        self._file = os.fdopen(open_nofollow(path), "a", newline="")
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(METRICS)
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.run_dir), flush_secs=30)
        except ImportError:  # tensorboard is part of the train extra; tolerate its absence
            self._writer = None

    def record(self, record: IterationRow) -> None:
        """Add one iteration's row (:data:`METRICS`, the fields of ``IterationRow``)."""
        row = record.as_dict()
        self._remember(row)
        if not self.enabled or self._csv is None:
            return
        self._csv.writerow([_csv_value(row.get(k)) for k in METRICS])
        assert self._file is not None
        self._file.flush()
        if self._writer is not None:
            for key in _SCALARS:
                value = row.get(key)
                if value is not None and math.isfinite(value):
                    bound = key == "eval_success_rate" and row.get("eval_stopped_early")
                    tag = _BOUND_TAG if bound else f"train/{key}"
                    self._writer.add_scalar(tag, value, row["env_steps"])

    def draw_curve(self, min_interval_s: float = 0.0) -> None:
        """Write ``training_curve.png`` from the rows so far (atomically).

        Args:
            min_interval_s: Skip the drawing when the last one (or :meth:`open`) was this
                recent: a figure costs matplotlib a few tenths of a second, so the
                trainer's periodic redraws stay rare.
        """
        if not self.enabled or not self.history:
            return
        now = time.monotonic()
        if self._drawn_at is not None and now - self._drawn_at < min_interval_s:
            return
        self._drawn_at = now
        from kelab.train.curve import run_details

        curve = {
            "history": list(self.history),
            "evaluations": list(self.evaluations),
            "wall_times": list(self.wall_times),
            **run_details(self.run_dir),  # the target and title, from latest.json
        }
        self._drawing = None  # superseded: whether or not it was drawn
        if self.drawer is not None and self.drawer.submit(self._curve_path, curve):
            self._drawing = curve
            return
        self._draw_here(curve)

    @property
    def _curve_path(self) -> Path:
        return self.run_dir / "training_curve.png"

    def _draw_here(self, curve: dict[str, Any]) -> None:
        """Draw ``curve`` in this process; a failure is a warning (the run goes on).

        A matplotlib that fails to import, or a PNG that cannot be written, costs the
        picture only: the rows are in ``metrics.csv``, ``kelab plot`` draws them later.
        Warned once per log.
        """
        try:
            from kelab.train.curve import write_training_curve

            write_training_curve(self._curve_path, **curve)
        except (ImportError, OSError) as err:
            if not self._curve_warned:
                self._curve_warned = True
                warnings.warn(
                    f"{self._curve_path} was not drawn ({type(err).__name__}: {err}); "
                    f"the run is not affected and metrics.csv keeps the rows: fix matplotlib or "
                    f"the folder, then draw them with `kelab plot {self.run_dir}`",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def finish_curve(self) -> None:
        """Wait until the last curve sent to the drawer is written (drawn here if it failed)."""
        curve, self._drawing = self._drawing, None
        if curve is not None and self.drawer is not None and not self.drawer.finish():
            self._draw_here(curve)

    def flush(self) -> None:
        """Flush the TensorBoard events (the CSV is flushed at every row)."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Close the files, once the last curve is written."""
        try:
            self.finish_curve()
        finally:
            self._close_files()

    def _close_files(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._file is not None:
            self._file.close()
            self._file = None
            self._csv = None

    def _remember(self, row: dict[str, Any]) -> None:
        steps = int(row["env_steps"])
        ret = row.get("mean_return")
        self.history.append(
            (steps, math.nan if ret is None else float(ret), row.get("success_rate"))
        )
        self.wall_times.append(row.get("wall_time_s"))
        if row.get("iteration") is not None:
            self._steps_at[int(row["iteration"])] = steps
        judged, rate = row.get("eval_iteration"), row.get("eval_success_rate")
        if judged is not None and rate is not None:
            at = self._steps_at.get(int(judged), steps)
            self.evaluations.append((at, float(rate), bool(row.get("eval_stopped_early"))))


def _header(path: Path) -> list[str]:
    try:
        with open(path, newline="") as f:
            return next(csv.reader(f), [])
    except OSError:
        return []


def _number(text: str | None, kind: type = float) -> Any:
    if text is None or text == "":
        return None
    try:
        return kind(float(text)) if kind is int else kind(text)
    except (ValueError, OverflowError):  # e.g. "inf" in an integer column
        return None


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of an existing metrics.csv (numbers parsed; unreadable rows skipped)."""
    rows: list[dict[str, Any]] = []
    try:
        with open(path, newline="") as f:
            for raw in csv.DictReader(f):
                row: dict[str, Any] = {k: _number(raw.get(k)) for k in METRICS}
                for key in ("iteration", "env_steps", "episodes", "eval_iteration",
                            "eval_episodes"):  # fmt: skip
                    row[key] = _number(raw.get(key), int)
                early = row["eval_stopped_early"]
                row["eval_stopped_early"] = None if early is None else bool(early)
                if row["env_steps"] is None:
                    continue
                if row["mean_return"] is None:
                    row["mean_return"] = math.nan
                rows.append(row)
    except (OSError, csv.Error):
        return rows  # an unreadable file only loses the earlier part of the curve
    return rows


def _rewrite(path: Path, rows: list[dict[str, Any]]) -> None:
    from kelab.train.checkpoint import atomic_write_bytes

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(METRICS)
    for row in rows:
        writer.writerow([_csv_value(row.get(k)) for k in METRICS])
    atomic_write_bytes(path, out.getvalue().encode())


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else ""  # NaN: no episode ended yet
    return value
