"""The trainer's window of recent finished episodes: mean return and success rate.

The trainer reports and judges ``best`` by the last ``success_window`` finished
episodes; the window is kept across ``train()`` calls and recorded in checkpoints, so a
resumed run goes on from the same statistics rather than from the few episodes that
end first after its envs restart.
"""

from __future__ import annotations

import math
import reprlib
from collections import deque
from typing import Any

import numpy as np

from kelab.errors import UserError

__all__ = ["RecentEpisodes", "finite_or_none"]


def finite_or_none(value: Any) -> float | None:
    """``float(value)`` where finite, else None (JSON has no NaN or infinity).

    Example:
        >>> finite_or_none(2), finite_or_none(float("nan")), finite_or_none(None)
        (2.0, None, None)
    """
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


class RecentEpisodes:
    """Recent finished episodes: returns and success flags (a bounded window).

    Example:
        >>> import numpy as np
        >>> window = RecentEpisodes(3)
        >>> info = {"_ended_by": np.array([True, False, True]),
        ...         "episode_return": np.array([1.0, 0.0, 3.0]),
        ...         "is_success": np.array([True, False, False])}
        >>> window.add(info)
        >>> window.mean_return, window.success_rate, window.total
        (2.0, 0.5, 2)
        >>> again = RecentEpisodes(3)
        >>> again.restore(window.to_json())
        >>> again.mean_return, again.success_rate, again.total
        (2.0, 0.5, 2)
    """

    def __init__(self, window: int) -> None:
        self.returns: deque[float] = deque(maxlen=window)
        self.successes: deque[bool] = deque(maxlen=window)
        self.judged = False
        self.total = 0

    def add(self, info: dict[str, Any]) -> None:
        """Add the episodes a ``LearningEnv`` step's ``info`` says ended."""
        if not info:
            return
        mask = info["_ended_by"]
        self.returns.extend(info["episode_return"][mask].tolist())
        if "is_success" in info:
            self.judged = True
            self.successes.extend(info["is_success"][mask].tolist())
        self.total += int(mask.sum())

    def to_json(self) -> dict[str, Any]:
        """The window as a checkpoint records it (``returns`` finite floats)."""
        return {
            "returns": [finite_or_none(r) for r in self.returns],
            "successes": list(self.successes) if self.judged else None,
            "total": self.total,
        }

    def restore(self, saved: Any) -> None:
        """Continue from :meth:`to_json`'s record (a resumed run's window).

        Raises:
            ValueError: For a record that is not what ``to_json`` writes; nothing changes.
        """
        try:
            returns, successes, total = _parse(saved)
        except (TypeError, ValueError, OverflowError, AttributeError):
            raise UserError(
                "'recent_episodes' must be {'returns': [finite numbers or null], "
                "'successes': [bools, no more than returns] or null, 'total': an int "
                f"from len(returns) to 2**53}}, got {reprlib.repr(saved)}"
            ) from None
        self.returns.clear()
        self.returns.extend(returns)
        self.successes.clear()
        self.judged = successes is not None
        if successes is not None:
            self.successes.extend(successes)
        self.total = total

    @property
    def mean_return(self) -> float:
        """Mean return of the window's episodes (NaN while empty)."""
        return float(np.mean(self.returns)) if self.returns else math.nan

    @property
    def success_rate(self) -> float | None:
        """Share of the window's episodes judged successful (None: no success rule)."""
        if not self.judged or not self.successes:
            return None
        return float(np.mean(self.successes))


def _parse(saved: Any) -> tuple[list[float], list[bool] | None, int]:
    """Check and convert a ``recent_episodes`` record; raises on anything else."""
    returns_in, successes, total = saved["returns"], saved["successes"], saved["total"]
    if not isinstance(returns_in, list) or not all(
        r is None or (isinstance(r, (int, float)) and not isinstance(r, bool)) for r in returns_in
    ):
        raise ValueError("returns")
    returns = [math.nan if r is None else float(r) for r in returns_in]  # OverflowError
    if not all(math.isfinite(r) or r != r for r in returns):  # no infinities
        raise ValueError("returns")
    if successes is not None and not (
        isinstance(successes, list)
        and len(successes) <= len(returns)
        and all(isinstance(v, bool) for v in successes)
    ):
        raise ValueError("successes")
    if not (
        isinstance(total, int) and not isinstance(total, bool) and len(returns) <= total <= 2**53
    ):
        raise ValueError("total")
    return returns, successes, total
