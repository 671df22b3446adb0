r"""Training curves: ``training_curve.png`` and ``kelab plot`` (matplotlib, Agg, no window).

The trainer draws ``training_curve.png`` in its run directory: the mean return on the top
axes, the success rate (training episodes, with exploration noise) on the bottom one, the
evaluated success rate of the deterministic policy as points, the task's success target
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
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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
    target: float | None = None
    title: str = ""


def _floats(values: Sequence[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def write_training_curve(
    path: str | os.PathLike[str],
    history: Sequence[tuple[int, float, float | None]],
    evaluations: Sequence[tuple[int, float]] = (),
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
        evaluations: ``(env_steps, success_rate)`` of each evaluated deterministic policy.
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
    with a key to them below.

    Args:
        runs: The runs (at least one).
        title: The figure's title (default: the one run's ``title``, or what the runs
            share).

    Returns:
        The figure, ready to save (``FigureCanvasAgg(fig).print_png(...)``).
    """
    if not runs:
        raise ValueError("runs must hold at least one RunCurve, got none; pass a run")
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
    for i, run in enumerate(runs):
        colour = _RETURN if single else _RUN_COLOURS[i % len(_RUN_COLOURS)]
        dot = "o" if run.env_steps.size == 1 else None  # one row: a point, not a line
        returns.plot(
            run.env_steps, run.mean_return, color=colour, lw=1.8, marker=dot, label=run.label
        )
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
    if not single:
        returns.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                       title="runs", alignment="left")  # fmt: skip
    text = title if title is not None else _shared_title(runs)
    if text:
        fig.suptitle(text, fontsize=13)
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
        if run.eval_steps.size:
            ax.plot(run.eval_steps, run.eval_rates, ls="none", marker="o", ms=6,
                    color=_EVAL if single else colour, mec="white", mew=1.0,
                    zorder=3)  # fmt: skip
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
    if targets:
        shown = ", ".join(f"{100 * t:.0f}%" for t in targets)
        keys.append(Line2D([], [], color=_TARGET, ls=(0, (5, 3)), lw=1.3,
                           label=f"target {shown}"))  # fmt: skip
    ax.legend(handles=keys, loc="upper left", bbox_to_anchor=(0, -0.32), ncols=3,
              borderaxespad=0, handlelength=2.4)  # fmt: skip


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
def run_details(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The target and title of a run, from its ``latest`` (or ``best``) checkpoint JSON.

    A missing or unreadable JSON gives no target and an empty title: the curve is drawn
    from ``metrics.csv`` alone.

    Returns:
        ``{"target": float | None, "title": str}``.
    """
    meta: dict[str, Any] = {}
    for name in ("latest.json", "best.json"):
        path = Path(run_dir) / name
        try:
            if path.stat().st_size > _MAX_JSON_BYTES:
                continue
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict):
            meta = loaded
            break
    config = meta.get("train_config")
    target = config.get("success_target") if isinstance(config, dict) else None
    ok = isinstance(target, (int, float)) and not isinstance(target, bool)
    target = float(target) if ok and 0.0 <= target <= 1.0 else None
    task = meta.get("task")
    name = task.get("id") or task.get("class") if isinstance(task, dict) else None
    seed = meta.get("seed")
    parts = [str(name)] if isinstance(name, str) and name else []
    parts.append(f"run {Path(run_dir).name}" + (f", seed {seed}" if isinstance(seed, int) else ""))
    return {"target": target, "title": " · ".join(parts)}


def read_run(run_dir: str | os.PathLike[str], label: str | None = None) -> RunCurve:
    """Read a run directory's ``metrics.csv`` (and its checkpoint's target) for a figure.

    Args:
        run_dir: A ``kelab train`` run directory.
        label: The run's name in a legend (default: the directory's name and seed).

    Returns:
        The run's curves.

    Raises:
        ValueError: A missing directory or log, or a log that is truncated or corrupt (the
            message names the file and line).
    """
    d = Path(run_dir)
    if not d.is_dir():
        what = "a file" if d.exists() else "no such directory"
        raise ValueError(
            f"RUN_DIR must be a run directory, got '{d}' ({what}); pass the --run-dir of a "
            "kelab train run"
        )
    path = d / "metrics.csv"
    if not path.is_file():
        raise ValueError(
            f"RUN_DIR must hold a metrics.csv, got '{d}' (none there); pass the --run-dir of "
            "a kelab train run that logged at least one iteration"
        )
    rows = _parse_metrics(path)
    details = run_details(d)
    steps_at: dict[int, float] = {}
    evals: list[tuple[float, float]] = []
    for row in rows:
        if row["iteration"] is not None:
            steps_at[int(row["iteration"])] = row["env_steps"]
        judged, rate = row["eval_iteration"], row["eval_success_rate"]
        if judged is not None and rate is not None:
            evals.append((steps_at.get(int(judged), row["env_steps"]), rate))
    title = details["title"]
    if label is None:
        label = title.split(" · ", 1)[-1].removeprefix("run ")
    return RunCurve(
        label=label,
        env_steps=np.array([r["env_steps"] for r in rows], dtype=float),
        mean_return=_floats([r["mean_return"] for r in rows]),
        success_rate=_floats([r["success_rate"] for r in rows]),
        wall_time_s=_floats([r["wall_time_s"] for r in rows]),
        eval_steps=np.array([e[0] for e in evals], dtype=float),
        eval_rates=np.array([e[1] for e in evals], dtype=float),
        target=details["target"],
        title=title,
    )


_COLUMNS = ("iteration", "env_steps", "wall_time_s", "mean_return", "success_rate",
            "eval_success_rate", "eval_iteration")  # fmt: skip


def _parse_metrics(path: Path) -> list[dict[str, float | None]]:
    """The rows of a metrics.csv, every value checked; ValueError names a bad line."""
    fix = "the log is truncated or corrupt; plot another run, or delete the bad rows"
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} must be UTF-8 text, got byte {err.start}; {fix}") from None
    if text and not text.endswith("\n"):
        line = text.count("\n") + 1
        raise ValueError(
            f"{path} line {line} must end with a newline, got a row cut short "
            f"({_shown(text.rsplit(chr(10), 1)[-1])}); {fix}"
        )
    try:
        lines = list(csv.reader(text.splitlines()))
    except csv.Error as err:
        raise ValueError(f"{path} must be CSV, got {err}; {fix}") from None
    header = lines[0] if lines else []
    if "env_steps" not in header or "mean_return" not in header:
        raise ValueError(
            f"{path} must start with a header naming env_steps and mean_return, got "
            f"{_shown(','.join(header))}; {fix}"
        )
    where = {name: header.index(name) for name in _COLUMNS if name in header}
    rows: list[dict[str, float | None]] = []
    for number, fields in enumerate(lines[1:], start=2):
        if len(fields) != len(header):
            raise ValueError(
                f"{path} line {number} must hold {len(header)} values like its header, got "
                f"{len(fields)} ({_shown(','.join(fields))}); {fix}"
            )
        row: dict[str, float | None] = dict.fromkeys(_COLUMNS)
        for name, index in where.items():
            row[name] = _value(path, number, name, fields[index], fix)
        if row["env_steps"] is None:
            raise ValueError(f"{path} line {number} must have env_steps, got none; {fix}")
        rows.append(row)
    if not rows:
        raise ValueError(
            f"{path} must hold at least one iteration's row, got only the header; plot the "
            "run once it has logged an iteration"
        )
    return rows


def _value(path: Path, line: int, name: str, text: str, fix: str) -> float | None:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{path} line {line}: {name} must be a number, got {_shown(text)}; {fix}")
    return value


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")
