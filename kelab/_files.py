"""Files written atomically: a temp file in the same folder, fsync, rename.

A bottom-layer helper (imports nothing of kelab but `kelab.errors`) for every file a
user cares about: checkpoints, settings, recordings, exported pictures and videos. A
crash at any moment leaves either the old file or the new one, never a mix.

No write follows a symbolic link: the temp file is created ``O_CREAT | O_EXCL |
O_NOFOLLOW`` (a name that exists, a link included, is never opened) and renamed over the
path (a link there is replaced, its target untouched); :func:`open_nofollow` opens a
file that is written in place (a log appended to) and refuses a link.

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
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from kelab.errors import UserError

__all__ = [
    "atomic_file",
    "atomic_write_bytes",
    "fsync_dir",
    "make_parent",
    "open_nofollow",
    "publish",
    "temp_beside",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 where the platform has none (Windows)
_TEMP_TRIES = 100


def make_parent(path: str | os.PathLike[str], name: str) -> Path:
    """Create the folder an output file goes in (the CLI's one rule for ``--out``/``--video``).

    Args:
        path: The file to be written.
        name: What the user called it (``"--out"``), for the message.

    Returns:
        ``path`` as a Path.

    Raises:
        UserError: ``"--out's folder 'x' cannot be created (...); choose a path in a
            writable folder"``.
    """
    out = Path(os.fspath(path))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{name}'s folder {str(out.parent)!r} cannot be created ({exc.strerror or exc}); "
            "choose a path in a writable folder"
        ) from None
    return out


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


def _create_temp(path: Path, suffix: str) -> tuple[int, Path]:
    """A new temp file ``.<name>.<random><suffix>`` beside ``path``, open for writing.

    Created ``O_CREAT | O_EXCL | O_NOFOLLOW`` with the usual mode (0666 less the umask):
    never an existing file or a link planted under the name.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TEMP_TRIES):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(5)}{suffix}"
        try:
            return os.open(tmp, flags, 0o666), tmp  # the umask applies, as for open()
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name beside {path} after {_TEMP_TRIES} tries")


def _keep_mode(fd: int, path: Path) -> None:
    """Give the temp file ``fd`` the permission bits of the regular file at ``path``, if any.

    A rewrite must not make a file more readable than the user set it (a 0600 settings
    file stays 0600); a new file, or a link at ``path`` (replaced, never followed), keeps
    the temp file's usual mode.
    """
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:  # no file there yet
        return
    if stat.S_ISREG(info.st_mode):
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o777)


def open_nofollow(path: str | os.PathLike[str], append: bool = True, truncate: bool = False) -> int:
    """Open ``path`` for writing in place without following a symbolic link.

    For a file written in place rather than replaced (``metrics.csv`` appended row by
    row): created when missing (never through a dangling link), and a link at ``path``
    is refused instead of writing into its target.

    Args:
        path: The file.
        append: Open for appending (else for writing at the start).
        truncate: Empty the file first (a stream that starts over).

    Returns:
        The file descriptor (``os.fdopen`` it).

    Raises:
        OSError: ``ELOOP`` (errno 40 on Linux) when ``path`` is a symbolic link, or
            another error of ``os.open``.
    """
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    flags |= (os.O_APPEND if append else 0) | (os.O_TRUNC if truncate else 0)
    return os.open(path, flags, 0o666)


def temp_beside(path: Path, suffix: str = ".tmp") -> Path:
    """Create an empty temp file in ``path``'s folder with the usual mode (not 0600).

    For writers that need a file name (a video encoder); finish with :func:`publish`.
    The file is created new (``O_EXCL | O_NOFOLLOW``), never through a link.

    Args:
        path: The file the temp file will become.
        suffix: The temp file's suffix (an encoder may choose its format by it).

    Returns:
        The temp file's path.
    """
    fd, tmp = _create_temp(path, suffix)
    os.close(fd)
    return tmp


def publish(tmp: Path, path: Path) -> Path:
    """Flush the finished temp file ``tmp`` to disk and rename it to ``path``.

    A regular file already at ``path`` lends the new one its permission bits.

    Returns:
        ``path``.
    """
    fd = os.open(tmp, os.O_RDONLY | _NOFOLLOW)  # fsync needs no write access
    try:
        _keep_mode(fd, path)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Write ``path`` atomically through the binary file this yields.

    The file is a temp file in the same folder (created with it if missing); when the
    ``with`` block ends normally it is flushed, given the permission bits of the regular
    file it replaces (if any), fsynced and renamed to ``path``; when the
    block raises, the temp file is removed and ``path`` is left as it was.

    Args:
        path: The file to write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path, ".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            _keep_mode(fh.fileno(), path)
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
