"""Where a training run lives, and what its checkpoints say about where they came from.

A run directory is claimed when a trainer is built (a ``.kelab-run`` file, before any
checkpoint), so two trainers never share one; a directory that holds a run is refused
unless that run is being resumed from its latest state. A trainer that keeps nothing (its
constructor failed, or it closed before its first checkpoint or logged iteration)
withdraws its claim: the directory is left as it was found.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import os
import platform
import re
import time as _time
from pathlib import Path
from typing import TYPE_CHECKING

from kelab.errors import UserError

try:  # POSIX: the claim is an OS lock
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from kelab.rl.task import Task
    from kelab.train.checkpoint import Checkpoint

__all__ = [
    "builtin_task_id",
    "claim_run_dir",
    "library_versions",
    "RunDirClaim",
    "remove_stale_temps",
    "task_class_path",
]


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version()}
    for dist in ("kelab", "torch", "safetensors", "numpy", "gymnasium", "pymunk"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return tuple(out.items())  # looked up once: each look-up scans site-packages


def library_versions() -> dict[str, str]:
    """Versions of the libraries a checkpoint depends on."""
    return dict(_versions())


def task_class_path(task: Task) -> str:
    """``"module:Class"`` of a task (how a checkpoint names it)."""
    cls = type(task)
    return f"{cls.__module__}:{cls.__qualname__}"


def builtin_task_id(task: Task) -> str | None:
    """The built-in Gymnasium id of ``task``'s class (None for any other class).

    Only the class itself counts, not a subclass of a built-in task.

    >>> from kelab.tasks.cartpole import CartPoleTask
    >>> builtin_task_id(CartPoleTask())
    'kelab/CartPole-v0'
    """
    from kelab.tasks import TASK_IDS

    path = task_class_path(task)
    return next((env_id for env_id, cls in TASK_IDS.items() if cls == path), None)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 where the platform has none (Windows)
_CLAIM = ".kelab-run"
"""Written into a run directory when a trainer takes it (before any checkpoint)."""
# what a trainer writes into its run directory: a write in progress is a temp file
# ".<name>.<random>.tmp" beside it (kelab._files.atomic_file)
_RUN_FILES = ("latest", "best", "metrics.csv", "metrics.old.csv", "training_curve.png")
_STALE_S = 60.0  # no save takes this long: an older temp file is a killed trainer's
_MAX_CLAIM_BYTES = 4096  # a claim file is one short line


def claim_run_dir(
    run_dir: str | os.PathLike[str] | None,
    task_name: str,
    resume: Checkpoint | None,
    cli_task: str = "<Task>",
) -> tuple[Path, RunDirClaim]:
    """The run directory, claimed: a new one, or the resumed run's own from its ``latest``.

    The claim (:class:`RunDirClaim`) is taken before anything is checked or written and
    held until the trainer releases it, so two trainers never share a run directory,
    even when built at the same moment. A refused directory is left as it was (the claim
    withdrawn), and so is one whose trainer keeps nothing (:meth:`RunDirClaim.withdraw`).
    ``cli_task`` is the task as ``kelab train`` takes it, for the command an error suggests.

    Returns:
        ``(path, claim)``: release the claim when the trainer closes.

    Raises:
        UserError: When ``run_dir`` is empty or a file, when another trainer holds it,
            when it already holds a run that is not being resumed, or when the resumed
            checkpoint is older than that run's ``latest`` (which it would overwrite).
    """
    if run_dir is None:
        base = Path.cwd() / "runs" / task_name / _utc_stamp()
        path, n = base, 1
        while True:
            made = _missing_folders(path)
            try:
                path.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:  # another run started within the same second
                n += 1
                path = base.with_name(f"{base.name}-{n}")
        return path, _claim(path, made, stamp=True)
    path = _run_dir_path(run_dir)
    made = _missing_folders(path)
    path.mkdir(parents=True, exist_ok=True)
    try:
        _refuse_links(path)  # before the claim: a refused run dir is left as it was
    except BaseException:
        _remove_empty(made)
        raise
    claim = _claim(path, made, stamp=False)  # refuses a run directory another trainer holds
    try:
        _check_run_dir(path, resume, cli_task, not claim.created)
        claim.stamp()
    except BaseException:
        claim.withdraw()
        raise
    return path, claim


def _claim(path: Path, made: tuple[Path, ...], stamp: bool) -> RunDirClaim:
    """``RunDirClaim(path)``; the folders ``made`` for it are removed if it fails."""
    try:
        return RunDirClaim(path, stamp=stamp, made=made)
    except BaseException:
        _remove_empty(made)
        raise


def _missing_folders(path: Path) -> tuple[Path, ...]:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    for folder in (path, *path.parents):
        if os.path.lexists(folder):
            break
        missing.append(folder)
    return tuple(missing)


def _remove_empty(folders: tuple[Path, ...]) -> None:
    """Remove ``folders`` (deepest first) while they are empty; one that is not stays."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (something else was put there), or gone: stop here
            return


def _refuse_links(path: Path) -> None:
    """Refuse a run directory with a symbolic link where the trainer writes a file.

    The trainer never writes through a link (its files are opened ``O_NOFOLLOW`` or
    renamed into place), so a link there would only fail later, or hide a run's file.

    Raises:
        UserError: Naming the link and where it points.
    """
    try:
        names = os.listdir(path)
    except OSError:
        return  # the claim reports an unreadable run directory
    links = [n for n in sorted(names) if _written_by_trainer(n) and os.path.islink(path / n)]
    if links:
        shown = ", ".join(f"{n} -> {os.readlink(path / n)}" for n in links[:3])
        raise UserError(
            f"run_dir {str(path)!r} has a symbolic link where the trainer writes ({shown}"
            f"{', ...' if len(links) > 3 else ''}); the trainer never writes through a "
            "link: remove it, or choose a new run_dir"
        )


def _written_by_trainer(name: str) -> bool:
    """Whether the trainer writes a file of this name into its run directory."""
    base = name[1:] if name.startswith(".") and name.endswith(".tmp") else name  # a temp
    stem = re.split(r"[.-]", base, maxsplit=1)[0]  # latest.json, best-<sha>.safetensors...
    return (
        name == _CLAIM
        or stem in ("latest", "best", "metrics", "training_curve")
        or name.startswith("events.out.tfevents.")  # TensorBoard's event files
    )


def _run_dir_path(run_dir: str | os.PathLike[str]) -> Path:
    """``run_dir`` as a Path, refused when empty (the current folder) or a file."""
    text = os.fspath(run_dir)
    if not str(text).strip():
        raise UserError(
            f"run_dir must be a folder path, got {text!r}; name a folder (e.g. runs/my-run), "
            "or give None for runs/<TaskClass>/<UTC time> (an empty path would train into "
            "the current folder)"
        )
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise UserError(
            f"run_dir must be a folder, got the file {str(path)!r}; name a new folder (or "
            "the run being resumed) instead of a file"
        )
    return path


def _check_run_dir(
    path: Path, resume: Checkpoint | None, cli_task: str, taken_before: bool
) -> None:
    """Refuse a claimed ``path`` that holds another run (see :func:`claim_run_dir`)."""
    held = [n for n in ("latest.json", "best.json", "metrics.csv") if os.path.lexists(path / n)]
    if taken_before:
        held.append(_CLAIM)
    if not held:
        return
    if resume is not None and resume.path.parent.resolve() == path.resolve():
        latest = _iteration_of(path / "latest.json")
        if latest is None or int(resume.meta.get("iteration", 0)) >= latest:
            remove_stale_temps(path)
            return  # continuing this run from its latest state
        raise UserError(
            f"cannot resume {resume.path} in place: run_dir {str(path)!r} has a later "
            f"latest (iteration {latest}) that this run would overwrite; resume "
            f"'{path}:latest', or resume this checkpoint into a new run_dir"
        )
    if not (path / "latest.json").exists():  # a run that ended before its first save
        raise UserError(
            f"run_dir {str(path)!r} already holds the start of a run that saved no "
            f"checkpoint ({', '.join(held)}); choose a new run_dir, or delete this one"
        )
    raise UserError(
        f"run_dir {str(path)!r} already holds a run ({', '.join(held)}); continue it with "
        f"resume='{path}:latest' (kelab train {cli_task} --resume {path}:latest --run-dir "
        f"{path}), or choose a new run_dir (or delete this one)"
    )


def remove_stale_temps(run_dir: Path, older_than_s: float = _STALE_S) -> list[Path]:
    """Delete the temp files of saves that never finished (a trainer killed mid-write).

    Only a run file's temp files (``.latest-*.tmp``, ``.best.json.*.tmp``, ...) last
    modified more than ``older_than_s`` ago: a save in progress is never touched.

    Returns:
        The files deleted.

    Example:
        >>> import os, tempfile, time
        >>> d = Path(tempfile.mkdtemp())
        >>> old = d / ".latest.json.k2j4x.tmp"
        >>> _ = old.write_bytes(b"half a checkpoint")
        >>> os.utime(old, (time.time() - 3600,) * 2)
        >>> _ = (d / ".best.json.q8w1e.tmp").write_bytes(b"a save in progress")
        >>> [p.name for p in remove_stale_temps(d)]
        ['.latest.json.k2j4x.tmp']
    """
    cutoff = _time.time() - older_than_s
    removed = []
    for tmp in run_dir.glob(".*.tmp"):
        if not tmp.name[1:].startswith(_RUN_FILES):
            continue
        try:
            if tmp.is_file() and tmp.stat().st_mtime < cutoff:
                tmp.unlink()
                removed.append(tmp)
        except OSError:  # gone meanwhile, or not ours to delete: leave it
            continue
    return removed


class RunDirClaim:
    """A trainer's hold on its run directory: the claim file, open and locked.

    The claim file (``.kelab-run``) says when, by which process and on which host the
    run directory was taken; while a trainer holds it, an exclusive ``flock`` on it
    refuses every other trainer (another process's, or another in this process). The
    lock is the operating system's: it ends when the trainer releases it or its process
    ends, however it ends (a killed trainer leaves nothing to clean up). Where ``flock``
    does not exist (Windows) the claim is the file alone and nothing is refused.

    Raises:
        UserError: When another trainer holds the run directory (naming its claim).
    """

    def __init__(self, path: Path, stamp: bool = True, made: tuple[Path, ...] = ()) -> None:
        """Claim ``path`` (stamped at once with ``stamp``).

        ``made``: the folders created for it, deepest first (:meth:`withdraw` removes them).
        """
        self.path = path / _CLAIM
        self.created = False  # whether this claim made the claim file
        self._made = made
        try:  # what was there, so that withdraw() removes only what came after
            self._found: frozenset[str] | None = frozenset(os.listdir(path))
        except OSError:
            self._found = None  # the claim reports an unreadable run directory
        self._was: bytes | None = None  # the bytes of a claim file found (not made)
        flags = os.O_RDWR | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            try:  # never through a link: O_NOFOLLOW, and O_EXCL when it is made
                fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o666)
                self.created = True
            except FileExistsError:
                fd = os.open(self.path, flags)
        except OSError as err:
            what = (
                "is a symbolic link"
                if os.path.islink(self.path)
                else "cannot be opened for writing"
            )
            raise UserError(
                f"run_dir {str(path)!r} cannot be claimed: its {_CLAIM} {what} "
                f"({err.strerror or err}); choose a run_dir this user can write, with no "
                "link in it"
            ) from None
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise UserError(
                        f"run_dir {str(path)!r} is in use by a trainer that is still running "
                        f"({_read_claim(fd)}, per {self.path.name}); wait for it to end or "
                        "stop it, or choose a new run_dir"
                    ) from None
            if not self.created and os.fstat(fd).st_size <= _MAX_CLAIM_BYTES:
                self._was = os.pread(fd, _MAX_CLAIM_BYTES, 0)
        except BaseException:
            if self.created:
                self.path.unlink(missing_ok=True)
            os.close(fd)
            raise
        self._fd: int | None = fd
        self._stamp = ""
        if stamp:
            self.stamp()

    def stamp(self) -> None:
        """Write when, by which process and on which host the claim was taken."""
        assert self._fd is not None, "stamp() after release()"
        self._stamp = _utc_stamp()
        self._write(self._fd, f"{self._stamp} pid={os.getpid()} host={platform.node()}\n")

    @staticmethod
    def _write(fd: int, text: str | bytes) -> None:
        # in place (never replaced by a rename: the lock is on this file)
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode("utf-8") if isinstance(text, str) else text, 0)

    @property
    def held(self) -> bool:
        """Whether this claim still holds the run directory."""
        return self._fd is not None

    def release(self) -> None:
        """Let other trainers take the run directory (calling it again does nothing).

        The claim file stays, with the time the claim was taken: the directory holds a run.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._stamp:  # the time it was taken stays; no process holds it
                self._write(fd, self._stamp + "\n")
        except OSError:
            pass  # a run directory deleted meanwhile: nothing to say in it
        finally:
            os.close(fd)  # ends the lock

    def withdraw(self) -> None:
        """Release the claim and leave the run directory as it was found.

        For a run that kept nothing: the directory was refused, the trainer's constructor
        failed, or it closed with no checkpoint saved and no iteration logged. When this
        claim made the claim file, the file goes, with the run files that appeared since
        the claim was taken (a header-only ``metrics.csv``, TensorBoard's first events
        file...) and the folders made for the directory once empty; a claim file that was
        there keeps its old bytes. Nothing else is touched. Calling it again, or after
        :meth:`release`, does nothing.
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        folder = self.path.parent
        try:
            if self.created:
                if self._found is not None:
                    for name in sorted(set(os.listdir(folder)) - self._found):
                        if name != _CLAIM and _written_by_trainer(name):
                            (folder / name).unlink(missing_ok=True)
                self.path.unlink(missing_ok=True)  # before the lock ends: still ours
            elif self._stamp and self._was is not None:
                self._write(fd, self._was)
        except OSError:
            pass  # a run directory deleted meanwhile, or a file not ours to delete: kept
        finally:
            os.close(fd)  # ends the lock
        _remove_empty(self._made)


def _read_claim(fd: int) -> str:
    """``"claimed T, process N on host H"`` from an open claim file (what is readable)."""
    try:
        raw = os.pread(fd, 256, 0)
    except OSError:
        return "its claim cannot be read"
    fields = raw.decode("utf-8", "replace").split()
    if not fields:
        return "no details recorded"
    info = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
    who = f", process {info['pid']} on host {info.get('host', '?')}" if "pid" in info else ""
    return f"claimed {fields[0][:40]}{who[:120]}"


_MAX_LATEST_BYTES = 1 << 20  # a real latest.json is a few kB


def _iteration_of(latest: Path) -> int | None:
    """The iteration a ``latest.json`` records (None when absent or unreadable)."""
    try:
        with latest.open("rb") as f:
            raw = f.read(_MAX_LATEST_BYTES + 1)
        if len(raw) > _MAX_LATEST_BYTES:
            return None
        return int(json.loads(raw)["iteration"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # nested [[[...
        return None


def _utc_stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
