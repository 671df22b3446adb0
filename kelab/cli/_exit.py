"""CPython's exit without its teardown, behind one door (#38).

:func:`exit_now` ends the process the way Python's own exit would, less its last stage:
the ``atexit`` handlers run (multiprocessing's, logging's, a user task's), the standard
streams are flushed, and the process exits without tearing down every module and
object one by one. After ``kelab train`` that teardown (torch's thousands of objects)
took 0.15-0.18 s of a 3.5 s CartPole run and wrote nothing (benchmarks/README.md, "The
``kelab`` executable exits without the interpreter's teardown"). Running the handlers
takes CPython's private ``atexit._run_exitfuncs``, so this is done only on the
interpreters it was written for (:data:`VERIFIED`, checked at import: their exit waits
for non-daemon threads, runs the ``atexit`` handlers, flushes the streams, then tears
down) and while no non-daemon thread still runs; anywhere else the exit is Python's own
(``sys.exit``), the public path.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["PROMPT_EXIT", "VERIFIED", "exit_now", "prompt_exit_fits"]

VERIFIED = ((3, 10), (3, 11), (3, 12), (3, 13))
"""The CPython releases (major, minor) whose exit this module repeats (tested on 3.11)."""


def prompt_exit_fits(implementation: str, version: tuple[int, int]) -> bool:
    """Whether this module was written for the interpreter and its release.

    Args:
        implementation: ``sys.implementation.name``.
        version: ``sys.version_info[:2]``.

    Example:
        >>> prompt_exit_fits("cpython", (3, 11)), prompt_exit_fits("pypy", (3, 11))
        (True, False)
    """
    return implementation == "cpython" and tuple(version) in VERIFIED


PROMPT_EXIT: bool = prompt_exit_fits(
    sys.implementation.name, (sys.version_info.major, sys.version_info.minor)
) and callable(getattr(atexit, "_run_exitfuncs", None))
"""True where :func:`exit_now` may skip the teardown; False: it is ``sys.exit``."""


def exit_now(code: int) -> NoReturn:
    """End the process with exit status ``code``, skipping the teardown where it may.

    While a non-daemon thread still runs, or where :data:`PROMPT_EXIT` is False, this is
    ``sys.exit(code)``: Python's exit, which waits for the thread and tears down.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if not PROMPT_EXIT or any(not t.daemon and t.is_alive() for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()  # the handlers Python's exit would run
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to write
            pass
    os._exit(code)
