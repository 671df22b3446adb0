"""Keep the PPO update's large tensors out of fresh ``mmap`` pages while training (glibc).

glibc serves allocations above its mmap threshold (128 kB, raised as such blocks are freed)
with a fresh ``mmap`` and unmaps them on ``free``; it also returns free memory at the top
of the heap to the system past a trim threshold. A PPO update allocates and frees the same
few-megabyte activations and gradients every mini-batch, and depending on where the
dynamic threshold settled, each one comes back as new zeroed pages: measured on Humanoid-v0
(2 x 128x128 MLPs, mini-batches of 3072), 63-98k page faults and 820-890 ms per update
against 1-6 faults and 710-760 ms with the thresholds fixed. Nothing else changes: the
numbers computed are the same.

The thresholds are process-wide, so :func:`heap_reuse` sets them only while a trainer
trains and, when the outermost such block ends, puts glibc's default sizes back (128 kB
each; its dynamic adjustment stays off) and returns the freed memory to the system.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

__all__ = ["heap_reuse"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_TRAINING = (32 << 20, 256 << 20)  # mmap (glibc's largest: 4 MiB * sizeof(long)), trim
_DEFAULT = (128 << 10, 128 << 10)  # glibc's initial values

_libc: ctypes.CDLL | None | bool = False  # False: not looked up yet
_depth = 0


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is False:
        _libc = None
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL("libc.so.6")
                lib.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
                lib.mallopt.restype = ctypes.c_int
                lib.malloc_trim.argtypes = (ctypes.c_size_t,)
                lib.malloc_trim.restype = ctypes.c_int
                _libc = lib
            except (OSError, AttributeError):
                _libc = None
    return _libc  # type: ignore[return-value]


def _set(mmap: int, trim: int) -> bool:
    lib = _glibc()
    if lib is None:
        return False
    ok_mmap = bool(lib.mallopt(_M_MMAP_THRESHOLD, mmap))
    ok_trim = bool(lib.mallopt(_M_TRIM_THRESHOLD, trim))
    return ok_mmap and ok_trim


@contextlib.contextmanager
def heap_reuse() -> Iterator[bool]:
    """Within the block, blocks under 32 MiB come from the heap and freed memory stays.

    Yields:
        Whether the thresholds are set (False off Linux or without glibc's ``mallopt``).

    Example:
        >>> with heap_reuse() as active:
        ...     isinstance(active, bool)
        True
    """
    global _depth
    active = _set(*_TRAINING) if _depth == 0 else _glibc() is not None
    _depth += 1
    try:
        yield active
    finally:
        _depth -= 1
        if _depth == 0 and active:
            _set(*_DEFAULT)
            lib = _glibc()
            if lib is not None:
                lib.malloc_trim(0)  # hand what the training kept back to the system
