"""Ctrl-C during training: stop at the next safe point, not in the middle of anything.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be: inside a
message from the learner process, between copying the actor and the critic, half way
through a checkpoint's bookkeeping. :class:`StopRequest` replaces that, for one
``train()`` call, with a flag the loop reads where stopping is safe (between env steps,
after an iteration). A second Ctrl-C still interrupts a wait (for an update, for a
verdict) at once, but never a block under :func:`uninterrupted` (reading and applying a
message: short, and all or nothing), nor anything after :meth:`StopRequest.hold` (the
call's final saves).

Example:
    >>> with StopRequest() as stop:
    ...     with uninterrupted():
    ...         pass
    ...     stop.requested
    False
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["StopRequest", "uninterrupted"]

_active: StopRequest | None = None  # the request whose handler is installed, if any


class StopRequest:
    """For a ``with`` block: Ctrl-C (SIGINT) sets :attr:`requested` instead of raising.

    Installed only in the main thread, and only over Python's default handler (a handler
    of the application's own stays, and then nothing here changes how Ctrl-C acts). From
    the second Ctrl-C on, a press raises ``KeyboardInterrupt`` at once, except inside
    :func:`uninterrupted` blocks and after :meth:`hold`.
    """

    def __init__(self) -> None:
        self.presses = 0
        """Ctrl-C presses seen since the block began."""
        self._installed = False
        self._held = False
        self._deferring = 0  # depth of uninterrupted() blocks

    @property
    def requested(self) -> bool:
        """Ctrl-C was pressed; :meth:`check` raises ``KeyboardInterrupt`` from now on."""
        return self.presses > 0

    def __enter__(self) -> StopRequest:
        global _active
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
            _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        if self._installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self._installed = False
            _active = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        if self.presses >= 2 and not self._held and not self._deferring:
            raise KeyboardInterrupt  # pressed again: the user will not wait

    def hold(self) -> None:
        """From now on Ctrl-C never raises, only counts.

        For the last steps of a call, such as saving its checkpoints: they take a moment
        and must end.
        """
        self._held = True

    def release(self) -> None:
        """Undo :meth:`hold`: a second Ctrl-C raises again (for a wait worth cutting short)."""
        self._held = False

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` here if Ctrl-C was pressed (a safe point)."""
        if self.presses:
            raise KeyboardInterrupt


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C only counts during the block (under an active :class:`StopRequest`).

    For short steps that must happen whole, such as reading a message off a pipe and
    applying it; the next safe point acts on the presses.
    """
    stop = _active
    if stop is None:
        yield
        return
    stop._deferring += 1
    try:
        yield
    finally:
        stop._deferring -= 1
