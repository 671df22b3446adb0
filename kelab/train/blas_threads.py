"""One BLAS thread while KELab's numpy actor runs (``kelab play``, ``kelab eval``, RLPlayer).

numpy hands a matrix product to its BLAS (OpenBLAS in numpy's wheels), which splits a
large enough one over a thread per core. A policy's products come one after another and
are too small for that to pay: measured on a 2-core machine (trial of 2026-12-06),
``RLPlayer.act`` of a convolutional policy took 62-72 ms of CPU for 8-32 observations
against 1.5-5.5 ms on one thread, and ``kelab eval`` of it over 8 copies 6.3 s of wall
time against 1.8 s (benchmarks/README.md, "shipped_policies"). One thread also makes the
actions the same bits on any machine: a product split over threads sums some of its
blocks in another order, by a number of threads that depends on the core count (the last
bit of a float32 can differ).

:func:`one_blas_thread` limits every BLAS library loaded in the process to one thread for
the block and puts each one's own count back when it ends, through threadpoolctl's public
API (``ThreadpoolController.limit``: it minds threadpoolctl's rule that only one thread
at a time sets OpenBLAS's shared pool). Blocks in several threads take turns (one lock):
a limit is never ended under another thread's product. The libraries are found at the
first block (numpy's is loaded with numpy, imported here); nothing changes when kelab is
imported, nor outside a block. Where threadpoolctl knows no BLAS (a numpy on Apple's
Accelerate) the block changes nothing.

Setting the threads costs ~20-30 us a block, so the actor limits only products large
enough to be split: OpenBLAS 0.3.31 (numpy 2.4's wheels) ran none under
262,144 multiply-adds on more than one thread (measured: a matrix-vector product of
512x512, matrix products of 64x80x80 and 1100x32x8 used no worker thread; 20x128x128
and 1x1024x1024 did). :data:`SPLIT_FROM` is a quarter of that.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np  # noqa: F401  (loads numpy's BLAS before the libraries are looked up)

__all__ = ["SPLIT_FROM", "blas_controller", "one_blas_thread"]

SPLIT_FROM = 1 << 16
"""Multiply-adds from which a product is run under :func:`one_blas_thread` (below: as it is)."""

_lock = threading.RLock()
_controller: Any = None  # threadpoolctl's ThreadpoolController of the BLAS libraries


def blas_controller() -> Any:
    """The BLAS libraries in this process, as a threadpoolctl ``ThreadpoolController``.

    Found at the first call and kept (numpy's BLAS is loaded when numpy is imported).

    Example:
        >>> all(lib["user_api"] == "blas" for lib in blas_controller().info())
        True
    """
    global _controller
    with _lock:
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController().select(user_api="blas")
        return _controller


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Within the block, every BLAS library runs a matrix product on one thread.

    The libraries' own thread counts come back when the block ends. A block nests; blocks
    in other threads wait for it (one at a time).

    Example:
        >>> with one_blas_thread():
        ...     {lib["num_threads"] for lib in blas_controller().info()} <= {1}
        True
    """
    controller = blas_controller()
    with _lock, controller.limit(limits=1, user_api="blas"):
        yield
