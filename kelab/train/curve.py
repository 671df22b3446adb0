r"""Training curves: ``training_curve.png`` and ``kelab plot`` (matplotlib, Agg, no window).

The trainer draws ``training_curve.png`` in its run directory: the mean return on the top
axes, the success rate (training episodes, with exploration noise) on the bottom one, the
evaluated success rate of the deterministic policy as points (a downward triangle where
the check stopped early and its rate is only the most it can be), the task's success target
as a dashed line, env steps along the bottom and wall-clock time along the top.
``kelab plot RUN_DIR [RUN_DIR ...]`` draws the same from the runs' ``metrics.csv`` files,
several runs on one figure (one colour each). matplotlib is imported only when a figure
is drawn (it takes about half a second), through its Agg canvas: never pyplot, never a
window, and no global backend is set.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> history = [(1000 * i, 10.0 * i, i / 10) for i in range(1, 9)]
    >>> png = write_training_curve(d / "curve.png", history, [(4000, 0.5)], target=0.95)
    >>> png.read_bytes()[:4] == b"\x89PNG"
    True
"""

from __future__ import annotations

import csv
import io
import json
import math
import operator
import os
import stat
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab.errors import UserError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "RunCurve",
    "curve_figure",
    "draw_curves",
    "read_run",
    "run_details",
    "write_training_curve",
]

_RETURN = "#2870c8"
_SUCCESS = "#e06e28"
_EVAL = "#1e9646"  # (30, 150, 70)
_TARGET = "#7a7a7a"
_RUN_COLOURS = ("#2870c8", "#e06e28", "#1e9646", "#c0392b", "#8e5ac8", "#8c564b",
                "#d45f9e", "#4a4a4a", "#b5a100", "#17a2b8")  # fmt: skip
_MAX_JSON_BYTES = 4 * 1024 * 1024  # a checkpoint's JSON is ~10 kB


@dataclass(frozen=True)
class RunCurve:
    """One run's curves, as the figure draws them (NaN where a row has no value).

    Attributes:
        label: The run's name in a comparison's legend.
        env_steps: Env steps at the end of each iteration.
        mean_return: Mean return of the recent training episodes per iteration.
        success_rate: Training success rate per iteration (NaN: no success rule yet).
        wall_time_s: Wall-clock seconds since the run began, per iteration.
        eval_steps: Env steps of each evaluated policy.
        eval_rates: The evaluated success rate of each.
        eval_at_most: Whether each evaluation stopped early: its rate is then the most it
            can be, not a measurement (drawn as a downward triangle).
        target: The success target of the run's training config (None: unknown).
        title: What the figure of this run alone is titled ("" for none).
    """

    label: str
    env_steps: np.ndarray
    mean_return: np.ndarray
    success_rate: np.ndarray
    wall_time_s: np.ndarray
    eval_steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    eval_rates: np.ndarray = field(default_factory=lambda: np.zeros(0))
    eval_at_most: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    target: float | None = None
    title: str = ""


def _floats(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def write_training_curve(
    path: str | os.PathLike[str],
    history: Sequence[tuple[int, float, float | None]],
    evaluations: Sequence[tuple[int, float] | tuple[int, float, bool]] = (),
    *,
    wall_times: Sequence[float | None] = (),
    target: float | None = None,
    title: str = "",
) -> Path:
    """Draw one run's ``(env_steps, mean_return, success_rate)`` rows as a PNG, atomically.

    Args:
        path: The PNG to write (a temp file beside it renamed over it; a symlink there is
            replaced, never followed).
        history: One ``(env_steps, mean_return, success_rate)`` row per iteration
            (``success_rate`` None without a success rule; a NaN return: no episode yet).
        evaluations: ``(env_steps, success_rate)`` of each evaluated deterministic policy,
            or ``(env_steps, success_rate, stopped_early)``: with ``stopped_early`` True
            the rate is the most it can be (the check stopped early).
        wall_times: Wall-clock seconds per row; with as many finite, increasing values as
            rows, the top axis shows wall-clock time.
        target: The success target, drawn as a dashed line (None: no line).
        title: The figure's title ("" for none).

    Returns:
        The path written.
    """
    walls = _floats(list(wall_times)) if len(wall_times) == len(history) else None
    run = RunCurve(
        label=title,
        env_steps=np.array([row[0] for row in history], dtype=float),
        mean_return=_floats([row[1] for row in history]),
        success_rate=_floats([row[2] for row in history]),
        wall_time_s=np.full(len(history), math.nan) if walls is None else walls,
        eval_steps=np.array([e[0] for e in evaluations], dtype=float),
        eval_rates=_floats([e[1] for e in evaluations]),
        eval_at_most=np.array([len(e) > 2 and bool(e[2]) for e in evaluations], dtype=bool),
        target=target,
        title=title,
    )
    return draw_curves(path, [run])


def draw_curves(
    path: str | os.PathLike[str], runs: Sequence[RunCurve], title: str | None = None
) -> Path:
    """Draw runs on one figure (returns above, success rates below) and save it as a PNG.

    One run is drawn in the curve's colours, with wall-clock time on the top axis; several
    runs get a colour each and a legend naming them.

    Args:
        path: The PNG to write, atomically (a symlink there is replaced, never followed).
        runs: The runs (at least one).
        title: The figure's title (default: the one run's ``title``, or what the runs
            share).

    Returns:
        The path written.
    """
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from kelab._files import atomic_write_bytes

    with rc_context(_STYLE):
        fig = curve_figure(runs, title)
        png = io.BytesIO()  # encoded in memory: no side file for a kill to leave behind
        FigureCanvasAgg(fig).print_png(png)
    return atomic_write_bytes(Path(path), png.getvalue())


_STYLE = {
    "font.size": 10.5,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "axes.edgecolor": "#888888",
    "axes.linewidth": 0.8,
    "axes.spines.right": False,
    "xtick.color": "#444444",
    "ytick.color": "#444444",
    "grid.color": "#e2e2e2",
    "grid.linewidth": 0.8,
    "legend.fontsize": 10,
    "legend.frameon": False,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}


def curve_figure(runs: Sequence[RunCurve], title: str | None = None) -> Figure:
    """The figure :func:`draw_curves` saves (a matplotlib ``Figure``, no pyplot, no window).

    The top axes hold the mean returns (and, for one run, wall-clock time on a second x
    axis above); the bottom axes, left out when no run has a success rate, the training
    success rates as lines, the evaluated ones as points and the targets as dashed lines,
    with a key to them below. The title and the runs' names are drawn as plain text (a
    ``$`` in a folder's name or a task id is no mathtext).

    Args:
        runs: The runs (at least one).
        title: The figure's title (default: the one run's ``title``, or what the runs
            share).

    Returns:
        The figure, ready to save (``FigureCanvasAgg(fig).print_png(...)``).
    """
    if not runs:
        raise UserError("runs must hold at least one RunCurve, got none; pass a run")
    runs = list(runs)
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    single = len(runs) == 1
    rated = any(np.isfinite(r.success_rate).any() or r.eval_steps.size for r in runs)
    fig = Figure(figsize=(9.0, 6.6 if rated else 4.8), dpi=100, layout="constrained")
    if rated:
        returns, success = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    else:  # no success rule: the returns alone
        returns, success = fig.subplots(1, 1), None
    lines = []
    for i, run in enumerate(runs):
        colour = _RETURN if single else _RUN_COLOURS[i % len(_RUN_COLOURS)]
        dot = "o" if run.env_steps.size == 1 else None  # one row: a point, not a line
        lines += returns.plot(run.env_steps, run.mean_return, color=colour, lw=1.8, marker=dot)
    returns.set_ylabel("mean return")
    bottom = returns if success is None else success
    bottom.set_xlabel("env steps")
    bottom.xaxis.set_major_formatter(EngFormatter(sep=""))
    for ax in (returns, success):
        if ax is not None:
            ax.grid(True)
            ax.set_axisbelow(True)
            ax.margins(x=0.02)
            ax.spines["top"].set_visible(False)
            ax.tick_params(top=False)
    if single:
        _wall_clock_axis(returns, runs[0])
    if success is not None:
        _success_panel(success, runs)
    if not single:  # the runs' names as written: a leading "_" would hide one from a legend
        key = returns.legend(lines, [r.label for r in runs], loc="upper left",
                             bbox_to_anchor=(1.01, 1.0), borderaxespad=0, title="runs",
                             alignment="left")  # fmt: skip
        for label in key.get_texts():
            label.set_parse_math(False)  # "$x$" in a folder's name is text, not mathtext
    text = title if title is not None else _shared_title(runs)
    if text:
        fig.suptitle(text, fontsize=13, parse_math=False)  # a task id or folder, as written
    return fig


def _success_panel(ax: Axes, runs: list[RunCurve]) -> None:
    """Training and evaluated success rates, the target, and a key to them below."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import PercentFormatter

    single = len(runs) == 1
    for i, run in enumerate(runs):
        colour = _RUN_COLOURS[i % len(_RUN_COLOURS)]
        ax.plot(run.env_steps, run.success_rate, color=_SUCCESS if single else colour,
                lw=1.6, alpha=1.0 if single else 0.75,
                marker="o" if run.env_steps.size == 1 else None)  # fmt: skip
        at_most = _at_most(run)
        for shown, marker in ((~at_most, "o"), (at_most, "v")):
            if shown.any():
                ax.plot(run.eval_steps[shown], run.eval_rates[shown], ls="none",
                        marker=marker, ms=6, color=_EVAL if single else colour, mec="white",
                        mew=1.0, zorder=3)  # fmt: skip
    targets = sorted({r.target for r in runs if r.target is not None})
    for t in targets:
        ax.axhline(t, color=_TARGET, ls=(0, (5, 3)), lw=1.3, zorder=1)
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.04, 1.04)
    ax.set_yticks(np.linspace(0.0, 1.0, 6))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    keys = [
        Line2D(
            [],
            [],
            color=_SUCCESS if single else "#666666",
            lw=1.6,
            label="training episodes (with exploration noise)",
        ),  # fmt: skip
    ]
    if any(r.eval_steps.size for r in runs):
        keys.append(Line2D([], [], ls="none", marker="o", ms=6, mec="white",
                           color=_EVAL if single else "#666666",
                           label="evaluated (deterministic policy)"))  # fmt: skip
    if any(_at_most(r).any() for r in runs):
        keys.append(Line2D([], [], ls="none", marker="v", ms=6, mec="white",
                           color=_EVAL if single else "#666666",
                           label="evaluation stopped early: at most"))  # fmt: skip
    if targets:
        shown = ", ".join(f"{100 * t:.0f}%" for t in targets)
        keys.append(Line2D([], [], color=_TARGET, ls=(0, (5, 3)), lw=1.3,
                           label=f"target {shown}"))  # fmt: skip
    ax.legend(handles=keys, loc="upper left", bbox_to_anchor=(0, -0.32), ncols=3,
              borderaxespad=0, handlelength=2.4)  # fmt: skip


def _at_most(run: RunCurve) -> np.ndarray:
    """Which of the run's evaluations give a bound (all False when it says none)."""
    flags = np.asarray(run.eval_at_most, dtype=bool)
    if flags.shape != run.eval_steps.shape:
        return np.zeros(run.eval_steps.shape, dtype=bool)
    return flags


def _shared_title(runs: list[RunCurve]) -> str:
    if len(runs) == 1:
        return runs[0].title
    tasks = {r.title.split(" · ")[0] for r in runs if r.title}
    task = f"{tasks.pop()}: " if len(tasks) == 1 else ""
    return f"{task}{len(runs)} runs"


def _wall_clock_axis(ax: Axes, run: RunCurve) -> None:
    """Wall-clock time along the top of ``ax``, when the run's times allow it.

    Needs finite times that never go back as env steps grow; rows that add no env steps
    (``overlap_rollout``'s last, update-only row) are passed over.
    """
    steps, walls = run.env_steps, run.wall_time_s
    if (
        steps.size < 2
        or not np.isfinite(walls).all()
        or (np.diff(steps) < 0).any()
        or (np.diff(walls) < 0).any()
    ):
        return
    keep = np.concatenate(([True], (np.diff(steps) > 0) & (np.diff(walls) > 0)))
    steps, walls = steps[keep], walls[keep]
    if steps.size < 2:
        return
    span = float(walls[-1])
    unit, scale = ("s", 1.0) if span < 180 else ("min", 60.0) if span < 3 * 3600 else ("h", 3600.0)
    scaled = walls / scale

    def to_wall(x: np.ndarray) -> np.ndarray:
        return _interp(x, steps, scaled)

    def to_steps(x: np.ndarray) -> np.ndarray:
        return _interp(x, scaled, steps)

    ax.spines["top"].set_visible(True)
    top = ax.secondary_xaxis("top", functions=(to_wall, to_steps))
    top.set_xlabel(f"wall-clock time ({unit})", color="#444444")


def _interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Piecewise-linear ``xp -> fp``, extended past both ends along the end segments."""
    x = np.asarray(x, dtype=float)
    y = np.interp(x, xp, fp)
    lo = (fp[1] - fp[0]) / (xp[1] - xp[0])
    hi = (fp[-1] - fp[-2]) / (xp[-1] - xp[-2])
    y = np.where(x < xp[0], fp[0] + (x - xp[0]) * lo, y)
    return np.where(x > xp[-1], fp[-1] + (x - xp[-1]) * hi, y)


# ---------------------------------------------------------------------------- run logs
_NO_DETAILS = "the curve is drawn without the run's task, seed and success target"


def _run_meta(run_dir: Path) -> tuple[dict[str, Any], str | None]:
    """The run's ``latest`` (or ``best``) checkpoint JSON, and why none could be read.

    Reads at most :data:`_MAX_JSON_BYTES` of a file; JSON nested too deep to parse, an
    integer too long to convert or a file too large is a reason, never an exception.
    Returns ``({}, None)`` when neither file exists.
    """
    problem = None
    for name in ("latest.json", "best.json"):
        path = run_dir / name
        try:
            info = path.stat()
            if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read
                raise ValueError("is not a regular file")
            size = info.st_size
            if size > _MAX_JSON_BYTES:
                raise UserError(
                    f"is {size} bytes, more than a checkpoint's JSON can be ({_MAX_JSON_BYTES})"
                )
            with path.open("rb") as fh:
                raw = fh.read(_MAX_JSON_BYTES + 1)  # bounded: it may grow after stat
            if len(raw) > _MAX_JSON_BYTES:
                raise UserError(f"grew past {_MAX_JSON_BYTES} bytes while being read")
            try:
                loaded = json.loads(raw.decode("utf-8"))
            except RecursionError:
                raise UserError("is not valid JSON (nested deeper than the parser's "
                                 "recursion limit)") from None  # fmt: skip
            except ValueError as err:
                raise UserError(f"is not valid JSON ({err})") from None
            if not isinstance(loaded, dict):
                raise UserError(f"must hold a JSON object, got a {type(loaded).__name__}")
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            problem = problem or f"{path} {' '.join(reason.split())}"
            continue
        return loaded, None
    return {}, problem


def run_details(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The target and title of a run, from its ``latest`` (or ``best``) checkpoint JSON.

    A missing or unreadable JSON (also one over 4 MiB or nested too deep to parse) gives
    no target and an empty title: the curve is drawn from ``metrics.csv`` alone.

    Returns:
        ``{"target": float | None, "title": str}``.
    """
    return _details(Path(run_dir), _run_meta(Path(run_dir))[0])


def _details(run_dir: Path, meta: dict[str, Any]) -> dict[str, Any]:
    config = meta.get("train_config")
    target = config.get("success_target") if isinstance(config, dict) else None
    ok = isinstance(target, (int, float)) and not isinstance(target, bool)
    target = float(target) if ok and 0.0 <= target <= 1.0 else None
    task = meta.get("task")
    name = task.get("id") or task.get("class") if isinstance(task, dict) else None
    seed = meta.get("seed")
    parts = [str(name)] if isinstance(name, str) and name else []
    parts.append(f"run {run_dir.name}" + (f", seed {seed}" if isinstance(seed, int) else ""))
    return {"target": target, "title": " · ".join(parts)}


_MAX_BUCKETS = 1024
"""Spans a long log is cut into before :class:`_Envelope` merges them (two by two)."""
_MAX_LINE_BYTES = 64 * 1024  # a metrics.csv row is ~100 bytes
_BLOCK_BYTES = 1024 * 1024  # what a metrics.csv is read by
_RECENT_ITERATIONS = 4096  # an evaluation names an iteration logged shortly before it


class _Envelope:
    """The rows of a long series kept in bounded memory, with the shape of its curves.

    Rows are numbered as they come and cut into buckets of ``span`` consecutive rows; a
    bucket keeps its first and last rows and, for each value column, its lowest and
    highest row and its first empty (NaN) one, so the drawn curve keeps its ends, its
    peaks and troughs and its gaps. The span starts at 1 (every row is kept) and doubles
    whenever there would be more than ``2 * limit`` buckets, so at most ``2 * limit``
    buckets are held; keeping is exact at any span (the extremes of merged buckets are
    among the extremes of their parts).

    Example:
        >>> env = _Envelope(columns=(1,), limit=2)
        >>> for i in range(100):
        ...     env.add((float(i), 50.0 if i == 37 else float(i % 10)))
        >>> rows = env.rows()
        >>> len(rows) < 100, float(rows[0, 0]), float(rows[-1, 0]), float(rows[:, 1].max())
        (True, 0.0, 99.0, 50.0)
    """

    _CHUNK = 8192  # rows gathered before they are kept in one numpy pass

    def __init__(self, columns: tuple[int, ...], limit: int = _MAX_BUCKETS) -> None:
        self._columns = columns
        self._limit = limit
        self._span = 1  # rows per bucket
        self._count = 0  # rows added
        self._kept: np.ndarray | None = None  # the row's number, then its values
        self._pending: list[tuple[float, ...]] = []

    def add(self, row: tuple[float, ...]) -> None:
        """Add the next row (in order; the same number of values each time)."""
        self._pending.append(row)
        if len(self._pending) == self._CHUNK:
            self._flush()

    def rows(self) -> np.ndarray:
        """The rows kept, in the order they were added: ``(n, values)`` floats."""
        self._flush()
        return np.zeros((0, 0)) if self._kept is None else self._kept[:, 1:]

    def _flush(self) -> None:
        if not self._pending:
            return
        chunk = np.array(self._pending, dtype=float)
        numbers = np.arange(self._count, self._count + len(chunk), dtype=float)
        fresh = np.column_stack((numbers, chunk))
        kept = fresh if self._kept is None else np.concatenate((self._kept, fresh))
        self._count += len(chunk)
        self._pending = []
        while -(-self._count // self._span) > 2 * self._limit:
            self._span *= 2
        self._kept = kept if self._span == 1 else self._keep(kept)

    def _keep(self, rows: np.ndarray) -> np.ndarray:
        bucket = (rows[:, 0] // self._span).astype(np.int64)  # sorted: rows come in order
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        picked = [starts, np.r_[starts[1:], len(rows)] - 1]  # each bucket's first and last
        for c in self._columns:
            values = rows[:, 1 + c]
            empty = np.isnan(values)
            # sorted by bucket, then by the key: each bucket's first is its lowest (highest,
            # first empty) row, the earliest of equals (lexsort is stable)
            for key in (np.where(empty, np.inf, values), np.where(empty, np.inf, -values)):
                picked.append(np.lexsort((key, bucket))[starts])
            gap = np.lexsort((~empty, bucket))[starts]
            picked.append(gap[empty[gap]])
        return rows[np.unique(np.concatenate(picked))]


def read_run(run_dir: str | os.PathLike[str], label: str | None = None) -> RunCurve:
    """Read a run directory's ``metrics.csv`` (and its checkpoint's target) for a figure.

    The log is read a line at a time, in bounded memory whatever its size: up to about
    2,000 rows every row is kept; past that, the rows that keep the curve's shape (each
    stretch's first and last rows, its highest and lowest return and success rate, and
    its gaps), at most about 20,000.

    Args:
        run_dir: A ``kelab train`` run directory.
        label: The run's name in a legend (default: the directory's name and seed).

    Returns:
        The run's curves.

    Raises:
        UserError: A missing directory or log, or a log that is truncated or corrupt (the
            message names the file and line).

    Warns:
        UserWarning: When the run's ``latest.json`` (or ``best.json``) exists but cannot
            be read (too large, not JSON, nested too deep): one line naming it; the curve
            is drawn without the task, seed and target.
    """
    d = Path(run_dir)
    if not d.is_dir():
        what = "a file" if d.exists() else "no such directory"
        raise UserError(
            f"RUN_DIR must be a run directory, got '{d}' ({what}); pass the --run-dir of a "
            "kelab train run"
        )
    path = d / "metrics.csv"
    if not path.is_file():
        raise UserError(
            f"RUN_DIR must hold a metrics.csv, got '{d}' (none there); pass the --run-dir of "
            "a kelab train run that logged at least one iteration"
        )
    rows, evals = _parse_metrics(path)
    meta, problem = _run_meta(d)
    if problem is not None:
        warnings.warn(f"{problem}; {_NO_DETAILS}", UserWarning, stacklevel=2)
    details = _details(d, meta)
    title = details["title"]
    if label is None:
        label = title.split(" · ", 1)[-1].removeprefix("run ")
    columns = rows.reshape(-1, 4)
    evaluated = evals.reshape(-1, 3)
    return RunCurve(
        label=label,
        env_steps=columns[:, 0],
        mean_return=columns[:, 1],
        success_rate=columns[:, 2],
        wall_time_s=columns[:, 3],
        eval_steps=evaluated[:, 0],
        eval_rates=evaluated[:, 1],
        eval_at_most=evaluated[:, 2] == 1.0,
        target=details["target"],
        title=title,
    )


_COLUMNS = ("iteration", "env_steps", "wall_time_s", "mean_return", "success_rate",
            "eval_success_rate", "eval_iteration", "eval_stopped_early")  # fmt: skip
_FIX = "the log is truncated or corrupt; plot another run, or delete the bad rows"


def _lines(path: Path) -> Iterator[str]:
    """The lines of a metrics.csv (newline cut off), read 1 MiB at a time and checked.

    Every line must end with a newline, be at most :data:`_MAX_LINE_BYTES` long and be
    UTF-8; ValueError names the line that is not.
    """
    number = 0  # lines yielded
    rest = b""  # a line begun at the end of the last block
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK_BYTES):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            complete, rest = block[:cut], block[cut:]
            if len(rest) > _MAX_LINE_BYTES:
                _too_long(path, number + complete.count(b"\n") + 1, rest)
            if not complete:
                continue
            try:
                lines = complete.decode("utf-8").split("\n")
            except UnicodeDecodeError as err:
                line = number + complete.count(b"\n", 0, err.start) + 1
                column = err.start - complete.rfind(b"\n", 0, err.start)
                raise UserError(
                    f"{path} line {line} must be UTF-8 text, got byte "
                    f"{complete[err.start]:#04x} at column {column}; {_FIX}"
                ) from None
            lines.pop()  # the "" after the last newline
            if max(map(len, lines)) > _MAX_LINE_BYTES // 4:  # 4 bytes a character at most
                for k, line in enumerate(lines):
                    if len(line.encode("utf-8")) > _MAX_LINE_BYTES:
                        _too_long(path, number + k + 1, line.encode("utf-8"))
            yield from lines
            number += len(lines)
    if rest:
        raise UserError(
            f"{path} line {number + 1} must end with a newline, got a row cut short "
            f"({_shown(rest.decode('utf-8', 'replace'))}); {_FIX}"
        )


def _too_long(path: Path, line: int, raw: bytes) -> None:
    raise UserError(
        f"{path} line {line} must be at most {_MAX_LINE_BYTES} bytes, got a longer one "
        f"({_shown(raw[:60].decode('utf-8', 'replace'))}); {_FIX}"
    )


def _parse_metrics(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A metrics.csv, read a line at a time with every value checked; ValueError names a bad line.

    Returns:
        The rows kept (:class:`_Envelope`), ``(env_steps, mean_return, success_rate,
        wall_time_s)`` with NaN for an empty value, and the evaluations, ``(env_steps of
        the iteration judged, success_rate, 1.0 if that check stopped early else 0.0)``
        (those that stopped early kept apart, after the measured ones).
    """
    reader = csv.reader(_lines(path))
    try:
        header = next(reader, [])
        if "env_steps" not in header or "mean_return" not in header:
            raise UserError(
                f"{path} must start with a header naming env_steps and mean_return, got "
                f"{_shown(','.join(header))}; {_FIX}"
            )
        width = len(header)
        # a column the header lacks reads the "" appended to every row: empty
        index = [header.index(name) if name in header else width for name in _COLUMNS]
        texts_of = operator.itemgetter(*index)
        it, steps, wall, ret, rate, rated, judged_at, early = range(len(_COLUMNS))
        empty = math.nan  # one object: `is empty` tells an empty value from a NaN
        rows = _Envelope(columns=(1, 2))
        evals = _Envelope(columns=(1,))  # measured rates
        bounds = _Envelope(columns=(1,))  # rates of checks that stopped early: at most
        steps_at: dict[int, float] = {}  # the recent iterations' env steps
        count = 0
        for fields in reader:
            if len(fields) != width:
                raise UserError(
                    f"{path} line {reader.line_num} must hold {width} values like its header, "
                    f"got {len(fields)} ({_shown(','.join(fields))}); {_FIX}"
                )
            fields.append("")
            texts = texts_of(fields)
            try:
                values = [float(t) if t else empty for t in texts]
            except ValueError:
                values = []
            # a number that is no number: a text float() refuses, an infinity ("inf",
            # "1e999") or a NaN (the only texts float() reads as NaN hold an "a")
            joined = "".join(texts)
            if not values or math.inf in values or -math.inf in values or "a" in joined.lower():
                for name, text in zip(_COLUMNS, texts, strict=True):
                    _value(path, reader.line_num, name, text)  # raises, naming the value
            if values[steps] is empty:
                raise UserError(
                    f"{path} line {reader.line_num} must have env_steps, got none; {_FIX}"
                )
            count += 1
            rows.add((values[steps], values[ret], values[rate], values[wall]))
            if values[it] is not empty:
                steps_at[int(values[it])] = values[steps]
                if len(steps_at) > 2 * _RECENT_ITERATIONS:  # the recent ones, O(1) a row
                    steps_at = dict(list(steps_at.items())[-_RECENT_ITERATIONS:])
            if values[early] is not empty and values[early] not in (0.0, 1.0):
                raise UserError(
                    f"{path} line {reader.line_num}: eval_stopped_early must be 0 or 1, got "
                    f"{_shown(texts[early])}; {_FIX}"
                )
            if values[judged_at] is not empty and values[rated] is not empty:
                kept = bounds if values[early] == 1.0 else evals
                kept.add((steps_at.get(int(values[judged_at]), values[steps]), values[rated]))
    except csv.Error as err:
        raise UserError(f"{path} line {reader.line_num} must be CSV, got {err}; {_FIX}") from None
    if not count:
        raise UserError(
            f"{path} must hold at least one iteration's row, got only the header; plot the "
            "run once it has logged an iteration"
        )
    measured, at_most = evals.rows().reshape(-1, 2), bounds.rows().reshape(-1, 2)
    flags = np.repeat([0.0, 1.0], [len(measured), len(at_most)])[:, None]
    return rows.rows(), np.hstack([np.vstack([measured, at_most]), flags])


def _value(path: Path, line: int, name: str, text: str) -> float | None:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UserError(f"{path} line {line}: {name} must be a number, got {_shown(text)}; {_FIX}")
    return value


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")
