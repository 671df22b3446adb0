"""Ctrl-C during training: stop at the next safe point, not in the middle of anything.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be: inside a
message to the learner process, between copying the actor and the critic, half way
through a checkpoint's bookkeeping. :class:`StopRequest` replaces that, for one
``train()`` call, with a flag the loop reads where stopping is safe (between env steps,
after an iteration); a second Ctrl-C still interrupts at once (a wait for an update, say),
except once the call is saving its checkpoints (:meth:`StopRequest.hold`).

Example:
    >>> with StopRequest() as stop:
    ...     stop.requested
    False
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["StopRequest"]


class StopRequest:
    """For a ``with`` block: Ctrl-C (SIGINT) sets :attr:`requested` instead of raising.

    Installed only in the main thread, and only over Python's default handler (a handler
    of the application's own stays). A second Ctrl-C raises ``KeyboardInterrupt`` at once.
    """

    def __init__(self) -> None:
        self.requested = False
        """Ctrl-C was pressed; :meth:`check` raises ``KeyboardInterrupt`` from now on."""
        self._installed = False
        self._held = False

    def __enter__(self) -> StopRequest:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and not self._held:  # pressed twice: the user will not wait
            raise KeyboardInterrupt
        self.requested = True

    def hold(self) -> None:
        """From now on Ctrl-C never raises, only sets :attr:`requested`.

        For the last steps of a call, such as saving its checkpoints: they take a moment
        and must end.
        """
        self._held = True

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` here if Ctrl-C was pressed (a safe point)."""
        if self.requested:
            raise KeyboardInterrupt
