"""The progress lines of ``kelab train`` and ``kelab eval`` (on stderr).

On a terminal, one live line redrawn in place; otherwise (a log file, a pipe) a line
about every 10 s, so a long run shows where it is without flooding the log. Training's
line is ``kelab.train.progress``'s (``RLTrainer.train()`` shows it too); ``kelab eval``'s
is here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TextIO

from kelab.train.progress import ProgressBar, format_duration

__all__ = ["EvalProgress", "ProgressBar", "format_duration"]


class EvalProgress:
    """``kelab eval``'s progress: a live line on a terminal, a line every ~10 s otherwise.

    Shows the episodes judged, their pace and the ETA, as ``train``'s progress line does;
    a short evaluation that is not on a terminal prints nothing. Fed every step
    (:meth:`step`, ``ke.evaluate``'s ``on_step``) it shows the steps too, so long
    episodes that all end together (fixed-length ones, many copies) show where they are
    before the first one ends; fed episodes only (``on_episode``) it shows those.

    Args:
        total: Episodes asked for.
        out: Where the line goes (stderr).
        clock: Seconds, monotonic (tests pass a fake one).
        most_steps: The most env steps the evaluation can take (each copy's share of
            episodes times the episode's step limit), for the ETA before any episode
            ended; None: not known.

    Example:
        >>> import io
        >>> now, out = [0.0], io.StringIO()
        >>> bar = EvalProgress(100, out, clock=lambda: now[0], most_steps=1000)
        >>> for steps in range(1, 201):
        ...     now[0] += 0.125  # 8 steps/s, no episode ended: a line every 10 s
        ...     bar.step(steps, 0)
        >>> print(out.getvalue(), end="")
        eval: 0/100 episodes  step 80/1,000  8.0 steps/s  ETA 1m55s
        eval: 0/100 episodes  step 160/1,000  8.0 steps/s  ETA 1m45s
    """

    def __init__(
        self,
        total: int,
        out: TextIO,
        clock: Callable[[], float] = time.perf_counter,
        most_steps: int | None = None,
    ) -> None:
        self.total = total
        self.out = out
        self.clock = clock
        self.most_steps = most_steps
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = clock()
        self.last_print = self.t0 if not self.tty else -math.inf
        self._live = False  # a live line is on the terminal
        self._shown = 0  # episodes judged on the last line shown

    def __call__(self, done: int) -> None:
        """Show that ``done`` episodes are judged (printed when its time has come)."""
        self._show(done, None)

    def step(self, steps: int, done: int) -> None:
        """Show that ``steps`` env steps are taken and ``done`` episodes judged."""
        self._show(done, steps)

    def _show(self, done: int, steps: int | None) -> None:
        now = self.clock()
        every = 0.2 if self.tty else 10.0
        # on a terminal, the last episode and the first ones judged are shown at once
        due = self.tty and (done == self.total or (done and not self._shown))
        if now - self.last_print < every and not due:
            return
        self.last_print = now
        self._shown = done
        elapsed = now - self.t0
        pace = done / elapsed if elapsed > 0 else math.inf
        eta = (self.total - done) / pace if done and math.isfinite(pace) else math.nan
        if steps is None:
            text = (
                f"eval: {done:,}/{self.total:,} episodes  {pace:,.1f} episodes/s  "
                f"ETA {format_duration(eta)}"
            )
        else:
            step_pace = steps / elapsed if elapsed > 0 else math.inf
            most = "" if self.most_steps is None else f"/{self.most_steps:,}"
            if self.most_steps is not None and steps and math.isfinite(step_pace):
                # at most this long: every copy's remaining episodes at their step limit
                bound = max(self.most_steps - steps, 0) / step_pace
                eta = bound if math.isnan(eta) else min(eta, bound)
            text = (
                f"eval: {done:,}/{self.total:,} episodes  step {steps:,}{most}  "
                f"{step_pace:,.1f} steps/s  ETA {format_duration(eta)}"
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
