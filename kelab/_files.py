"""Files written atomically: a temp file in the same folder, fsync, rename.

A bottom-layer helper (imports nothing of kelab) for every file a user cares about:
checkpoints, settings, recordings, exported pictures and videos. A crash at any moment
leaves either the old file or the new one, never a mix.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_file(folder / "a.bin") as fh:
    ...     _ = fh.write(b"abc")
    >>> (folder / "a.bin").read_bytes(), sorted(p.name for p in folder.iterdir())
    (b'abc', ['a.bin'])
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_file", "atomic_write_bytes", "fsync_dir", "publish", "temp_beside"]


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry (a rename) to disk where the platform allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some file systems cannot open a directory: the rename still holds
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_beside(path: Path, suffix: str = ".tmp") -> Path:
    """Create an empty temp file in ``path``'s folder with the usual mode (not 0600).

    For writers that need a file name (a video encoder); finish with :func:`publish`.

    Args:
        path: The file the temp file will become.
        suffix: The temp file's suffix (an encoder may choose its format by it).

    Returns:
        The temp file's path.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
    finally:
        os.close(fd)
    return Path(tmp)


def publish(tmp: Path, path: Path) -> Path:
    """Flush the finished temp file ``tmp`` to disk and rename it to ``path``.

    Returns:
        ``path``.
    """
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Write ``path`` atomically through the binary file this yields.

    The file is a temp file in the same folder (created with it if missing); when the
    ``with`` block ends normally it is flushed, fsynced and renamed to ``path``; when the
    block raises, the temp file is removed and ``path`` is left as it was.

    Args:
        path: The file to write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; the usual mode
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_file`).

    Returns:
        The path written.
    """
    with atomic_file(path) as fh:
        fh.write(data)
    return Path(path)
