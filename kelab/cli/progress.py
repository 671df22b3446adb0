"""The progress lines of ``kelab train`` and ``kelab eval`` (on stderr).

On a terminal, one live line redrawn in place; otherwise (a log file, a pipe) a line
about every 10 s, so a long run shows where it is without flooding the log.
"""

from __future__ import annotations

import io
import math
import os
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["EvalProgress", "ProgressBar", "format_duration"]


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

    Shows the iteration, mean return, success rate, env-steps/s and the ETA. ``close()``
    prints the last iteration's line when it was not printed yet, so a run that stops at
    its target, is interrupted or ends always shows where it ended.
    """

    def __init__(self, total: int, start_iteration: int, out: TextIO) -> None:
        self.total = total
        self.start_iteration = start_iteration
        self.out = out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last_print = -math.inf
        self.evaluated: float | None = None  # the latest evaluation's success rate
        self._unprinted: str | None = None  # the latest line, when not printed yet
        self._first: float | None = None  # seconds to the end of the first iteration

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
        evaluated = "" if self.evaluated is None else f"eval {self.evaluated:4.2f}  "
        text = (
            f"it {row['iteration']:>5} ({done}/{self.total})  "
            f"return {ret:8.2f}  "
            f"success {'  -  ' if rate is None else f'{rate:5.2f}'}  {evaluated}"
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
            self.out.write("\r" + text[:cols] + "\x1b[K")
            self.out.flush()
        elif elapsed - self.last_print >= 10.0 or done == self.total:
            self.last_print = elapsed
            self._unprinted = None
            print(text, file=self.out, flush=True)
        else:
            self._unprinted = text

    def _columns(self) -> int:
        """Usable columns of the terminal this line goes to (``COLUMNS`` first)."""
        env = os.environ.get("COLUMNS", "")
        if env.isdigit() and int(env) > 0:
            return max(int(env) - 1, 20)
        try:
            return max(os.get_terminal_size(self.out.fileno()).columns - 1, 20)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return 99

    def close(self) -> None:
        """End the live line (on a terminal) or print the last line if it is not out yet."""
        if self.tty:
            self.out.write("\n")
            self.out.flush()
        elif self._unprinted is not None:
            print(self._unprinted, file=self.out, flush=True)
            self._unprinted = None


class EvalProgress:
    """``kelab eval``'s progress: a live line on a terminal, a line every ~10 s otherwise.

    Shows the episodes judged, their pace and the ETA, as ``train``'s progress line does;
    a short evaluation that is not on a terminal prints nothing.

    Args:
        total: Episodes asked for.
        out: Where the line goes (stderr).
        clock: Seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self, total: int, out: TextIO, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.total = total
        self.out = out
        self.clock = clock
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = clock()
        self.last_print = self.t0 if not self.tty else -math.inf
        self._live = False  # a live line is on the terminal

    def __call__(self, done: int) -> None:
        """Show that ``done`` episodes are judged (printed when its time has come)."""
        now = self.clock()
        every = 0.2 if self.tty else 10.0
        if now - self.last_print < every and not (self.tty and done == self.total):
            return
        self.last_print = now
        elapsed = now - self.t0
        pace = done / elapsed if elapsed > 0 else math.inf
        eta = (self.total - done) / pace if done and math.isfinite(pace) else math.nan
        text = (
            f"eval: {done:,}/{self.total:,} episodes  {pace:,.1f} episodes/s  "
            f"ETA {format_duration(eta)}"
        )
        if self.tty:
            self.out.write("\r" + text + "\x1b[K")
            self.out.flush()
            self._live = True
        else:
            print(text, file=self.out, flush=True)

    def close(self) -> None:
        """End the live line on a terminal."""
        if self._live:
            self.out.write("\n")
            self.out.flush()
            self._live = False
