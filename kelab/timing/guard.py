"""Re-entrancy guard: marks the code running inside an App fixed step.

Some calls make no sense from inside a fixed step: pacing to wall time
(`SimulationPacer.wait`) or running another App frame (`App.renderFrameOnce`). The App
enters `fixed_step_scope()` around every fixed step it runs; those calls ask
`ensure_not_in_fixed_step()` first and fail with a message that says what to do instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ensure_not_in_fixed_step", "fixed_step_scope", "in_fixed_step"]

_state = threading.local()


def in_fixed_step() -> bool:
    """Return True while the current thread runs inside an App fixed step."""
    return getattr(_state, "depth", 0) > 0


@contextmanager
def fixed_step_scope() -> Iterator[None]:
    """Mark the enclosed code (on this thread) as running inside an App fixed step."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def ensure_not_in_fixed_step(what: str, advice: str) -> None:
    """Raise `RuntimeError` if called from inside an App fixed step.

    Args:
        what: The call being refused, e.g. ``"SimulationPacer.wait()"``.
        advice: What to do instead.

    Raises:
        RuntimeError: Inside a fixed step.
    """
    if in_fixed_step():
        raise RuntimeError(f"{what} was called from inside an App fixed step. {advice}")
