"""Where a training run lives, and what its checkpoints say about where they came from.

A run directory is claimed when a trainer is built (a ``.kelab-run`` file, before any
checkpoint), so two trainers never share one; a directory that holds a run is refused
unless that run is being resumed from its latest state.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import os
import platform
import time as _time
from pathlib import Path
from typing import TYPE_CHECKING

from kelab._files import atomic_write_bytes

if TYPE_CHECKING:
    from kelab.rl.task import Task
    from kelab.train.checkpoint import Checkpoint

__all__ = [
    "claim_run_dir",
    "library_versions",
    "release_run_dir",
    "remove_stale_temps",
    "task_class_path",
]


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version()}
    for dist in ("kelab", "torch", "rsl-rl-lib", "safetensors", "numpy", "gymnasium", "pymunk"):
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


_CLAIM = ".kelab-run"
# what a trainer writes into its run directory: a write in progress is a temp file
# ".<name>.<random>.tmp" beside it (kelab._files.atomic_file)
_RUN_FILES = ("latest", "best", "metrics.csv", "training_curve.png")
_STALE_S = 60.0  # no save takes this long: an older temp file is a killed trainer's
"""Written into a run directory when a trainer takes it (before any checkpoint)."""


def claim_run_dir(
    run_dir: str | os.PathLike[str] | None,
    task_name: str,
    resume: Checkpoint | None,
    cli_task: str = "<Task>",
    holder: str = "",
) -> Path:
    """The run directory, claimed: a new one, or the resumed run's own from its ``latest``.

    A new directory gets a claim file at once, so two trainers built before either trains
    never share one. ``cli_task`` is the task as ``kelab train`` takes it, for the
    command an error suggests; ``holder`` names the trainer in the claim, for
    :func:`release_run_dir`.

    Raises:
        ValueError: When ``run_dir`` already holds a run that is not being resumed, or the
            resumed checkpoint is older than that run's ``latest`` (which it would overwrite).
    """
    if run_dir is None:
        base = Path.cwd() / "runs" / task_name / _utc_stamp()
        path, n = base, 1
        while True:
            try:
                path.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:  # another run started within the same second
                n += 1
                path = base.with_name(f"{base.name}-{n}")
        _claim(path, holder)
        return path
    path = Path(run_dir)
    held = [n for n in ("latest.json", "best.json", "metrics.csv", _CLAIM) if (path / n).exists()]
    if not held:
        path.mkdir(parents=True, exist_ok=True)
        _claim(path, holder)
        return path
    live = _live_holder(path)
    if live is not None:
        raise ValueError(
            f"run_dir {str(path)!r} is in use by a trainer that is still running "
            f"({live}); wait for it to end (or stop it), or choose a new run_dir"
        )
    if resume is not None and resume.path.parent.resolve() == path.resolve():
        latest = _iteration_of(path / "latest.json")
        if latest is None or int(resume.meta.get("iteration", 0)) >= latest:
            remove_stale_temps(path)
            _claim(path, holder, again=True)  # this trainer holds the run now
            return path  # continuing this run from its latest state
        raise ValueError(
            f"cannot resume {resume.path} in place: run_dir {str(path)!r} has a later "
            f"latest (iteration {latest}) that this run would overwrite; resume "
            f"'{path}:latest', or resume this checkpoint into a new run_dir"
        )
    if not (path / "latest.json").exists():  # a run that ended before its first save
        raise ValueError(
            f"run_dir {str(path)!r} already holds the start of a run that saved no "
            f"checkpoint ({', '.join(held)}); choose a new run_dir, or delete this one"
        )
    raise ValueError(
        f"run_dir {str(path)!r} already holds a run ({', '.join(held)}); continue it with "
        f"resume='{path}:latest' (kelab train {cli_task} --resume {path}:latest --run-dir "
        f"{path}), or "
        "choose a new run_dir (or delete this one)"
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


def _claim(path: Path, holder: str, again: bool = False) -> None:
    """Write the claim file: the time, the process id and host, the trainer's name.

    The process id and host let :func:`_live_holder` tell a running trainer's run;
    ``again``: replace a claim (resuming in place), else fail if one exists.
    """
    text = f"{_utc_stamp()} pid={os.getpid()} host={platform.node()} holder={holder}\n"
    try:
        if again:
            atomic_write_bytes(path / _CLAIM, text.encode())
            return
        with open(path / _CLAIM, "x") as f:
            f.write(text)
    except FileExistsError:
        raise ValueError(
            f"run_dir {str(path)!r} was just taken by another trainer; choose a new run_dir"
        ) from None


def release_run_dir(path: Path, holder: str) -> None:
    """Say that the trainer ``holder`` no longer trains in ``path`` (it closed).

    The claim keeps its time but loses the process id, so another trainer may resume
    the run while this process goes on with something else. A claim another trainer
    has taken since is left alone.
    """
    claim = path / _CLAIM
    try:
        stamp, *fields = claim.read_text(encoding="utf-8").split()
        if f"pid={os.getpid()}" in fields and f"holder={holder}" in fields:
            atomic_write_bytes(claim, f"{stamp}\n".encode())
    except (OSError, ValueError):
        pass  # no claim, or not ours: nothing to release


def _live_holder(path: Path) -> str | None:
    """Who holds ``path`` while another live process on this machine claimed it.

    Returns:
        ``"process N on this machine, claimed T"``; None for no claim, an old claim
        without a process id, another machine's, this process's own, or a process that
        has ended.
    """
    try:
        stamp, *fields = (path / _CLAIM).read_text(encoding="utf-8").split()
        info = dict(f.split("=", 1) for f in fields if "=" in f)
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError):
        return None
    if pid == os.getpid() or pid <= 0 or info.get("host") != platform.node():
        return None
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return None
    except PermissionError:  # it exists, under another user
        pass
    except OSError:
        return None
    return f"process {pid} on this machine, claimed {stamp}"


def _iteration_of(latest: Path) -> int | None:
    """The iteration a ``latest.json`` records (None when absent or unreadable)."""
    try:
        return int(json.loads(latest.read_text(encoding="utf-8"))["iteration"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _utc_stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
