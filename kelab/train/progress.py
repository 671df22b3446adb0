"""Training's progress line: what ``RLTrainer.train()`` and ``kelab train`` show (on stderr).

On a terminal, one live line redrawn in place; otherwise (a log file, a pipe, a notebook)
a line about every 10 s, so a long run shows where it is without flooding the log.
``kelab.cli.progress`` adds ``kelab eval``'s line.
"""

from __future__ import annotations

import io
import math
import os
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["ProgressBar", "end_live_line", "format_duration"]

_live_bar: ProgressBar | None = None  # the bar whose line is live on a terminal now


def end_live_line() -> None:
    """End the live progress line on the terminal, if one is drawn (else do nothing).

    What is printed next then starts a line of its own instead of running on after the
    bar: the trainer calls it before it warns (`kelab.train.diagnose`). The bar's next
    row is drawn on a new line.
    """
    bar = _live_bar
    if bar is not None:
        bar.end_line()


def format_duration(seconds: float) -> str:
    """Seconds as ``42s``, ``3m07s`` or ``1h06m`` (``?`` when not finite or negative).

    Example:
        >>> format_duration(187.4), format_duration(3960), format_duration(float("nan"))
        ('3m07s', '1h06m', '?')
    """
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class ProgressBar:
    """One live line per iteration on a terminal (a line every ~10 s otherwise).

    Shows the iteration, mean return, success rate (with the number of episodes it is
    over: ``success  1.00 (1 ep)``), the last evaluation's success rate (``eval 1.00``;
    ``eval <=0.94`` for a check that stopped early, whose rate is only the most it can
    be), env-steps/s and the ETA. ``close()`` prints the last
    iteration's line when it was not printed yet, so a run that stops at its target, is
    interrupted or ends always shows where it ended.

    Args:
        total: Iterations this run plans.
        start_iteration: The trainer's iteration when the run starts.
        out: Where the lines go.
        window: ``TrainConfig.success_window``: the most recent episodes a rate is over
            (None: the row's episode count as it is).
    """

    def __init__(
        self, total: int, start_iteration: int, out: TextIO, window: int | None = None
    ) -> None:
        self.total = total
        self.window = window
        self.start_iteration = start_iteration
        self.out = out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last_print = -math.inf
        self.evaluated: float | None = None  # the latest evaluation's success rate
        self.evaluated_at_most = False  # that check stopped early: its rate is a bound
        self._unprinted: str | None = None  # the latest line, when not printed yet
        self._first: float | None = None  # seconds to the end of the first iteration
        self._live = False  # a live line is on the terminal

    def __call__(self, row: dict[str, Any]) -> None:
        """Show one training iteration's row."""
        done = row["iteration"] - self.start_iteration
        elapsed = time.perf_counter() - self.t0
        if done <= 1 or self._first is None:  # the first iteration also starts things up
            self._first = elapsed
            eta = elapsed * (self.total - done)
        else:  # the pace since the first iteration
            eta = (elapsed - self._first) / (done - 1) * (self.total - done)
        rate = row["success_rate"]
        ret = row["mean_return"]
        if row.get("eval_success_rate") is not None:
            self.evaluated = row["eval_success_rate"]
            self.evaluated_at_most = bool(row.get("eval_stopped_early"))
        bound = "<=" if self.evaluated_at_most else ""
        evaluated = "" if self.evaluated is None else f"eval {bound}{self.evaluated:4.2f}  "
        over = ""  # how many episodes the rate is over: 1.00 from one episode says so
        if rate is not None and row.get("episodes") is not None:
            count = row["episodes"] if self.window is None else min(row["episodes"], self.window)
            over = f" ({count} ep)"
        text = (
            f"it {row['iteration']:>5} ({done}/{self.total})  "
            f"return {ret:8.2f}  "
            f"success {'  -  ' if rate is None else f'{rate:5.2f}{over}'}  {evaluated}"
            f"{row['env_steps_per_s'] / 1000:6.1f}k steps/s  ETA {format_duration(eta)}"
        ) if math.isfinite(ret) else (
            f"it {row['iteration']:>5} ({done}/{self.total})  (no episode finished yet)"
            f"  {row['env_steps_per_s'] / 1000:6.1f}k steps/s  ETA {format_duration(eta)}"
        )  # fmt: skip
        # a bar where the terminal has room for it; under 80 columns, single spaces; then
        # the middle fields go, never the iteration or the ETA
        cols = self._columns() if self.tty else 123
        if len(text) + 27 <= cols:
            filled = int(24 * done / max(self.total, 1))
            text = f"[{'#' * filled}{'-' * (24 - filled)}] {text}"
        elif len(text) > cols:
            text = " ".join(text.split())
            head, _, eta = text.rpartition(" ETA ")
            while len(text) > cols and " " in head:
                head = head.rsplit(" ", 2)[0] if head.count(" ") >= 2 else head.split(" ")[0]
                text = f"{head} ETA {eta}"
        if self.tty:  # one line that fits the terminal, clearing what a longer one left
            global _live_bar
            self.out.write("\r" + text[:cols] + "\x1b[K")
            self.out.flush()
            self._live = True
            _live_bar = self
        elif elapsed - self.last_print >= 10.0 or done == self.total:
            self.last_print = elapsed
            self._unprinted = None
            print(text, file=self.out, flush=True)
        else:
            self._unprinted = text

    def then(
        self, callback: Callable[[dict[str, Any]], bool | None] | None
    ) -> Callable[[dict[str, Any]], bool | None]:
        """A ``train()`` callback that shows the row, then calls ``callback`` (if any).

        Example:
            >>> import io
            >>> bar = ProgressBar(2, 0, io.StringIO())
            >>> bar.then(lambda row: row["iteration"] == 1)({
            ...     "iteration": 1, "mean_return": 1.0, "success_rate": None,
            ...     "env_steps_per_s": 1000.0})
            True
        """

        def show(row: dict[str, Any]) -> bool | None:
            self(row)
            return None if callback is None else callback(row)

        return show

    def _columns(self) -> int:
        """Usable columns of the terminal this line goes to (``COLUMNS`` first)."""
        env = os.environ.get("COLUMNS", "")
        if env.isdigit() and int(env) > 0:
            return max(int(env) - 1, 20)
        try:
            return max(os.get_terminal_size(self.out.fileno()).columns - 1, 20)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return 99

    def end_line(self) -> None:
        """End the live line on the terminal (the next row starts a new one)."""
        global _live_bar
        if _live_bar is self:
            _live_bar = None
        if self._live:
            self.out.write("\n")
            self.out.flush()
            self._live = False

    def close(self) -> None:
        """End the live line (on a terminal) or print the last line if it is not out yet."""
        if self._live:
            self.end_line()
        elif self._unprinted is not None:
            print(self._unprinted, file=self.out, flush=True)
            self._unprinted = None
