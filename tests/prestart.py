"""Subprocess checks that start with the session, on the core the suite leaves idle.

The suite runs in one process, so on a 2-core machine one core idles while a test waits
seconds for a subprocess of its own (a pytest run without the C helper, a command under a
memory limit, a demo drawing headless). Such a test declares its subprocess as a
`Prestart` at module level and marks itself ``@pytest.mark.prestart(JOB)``;
tests/conftest.py starts the jobs of the selected tests one at a time, in test order,
from the start of the session (never under ``--collect-only``), and the test reads the
result when it runs. A job no one started yet (the test run alone, or reached before its
turn) starts then, as the test's own subprocess did. What each test checks is unchanged:
the same command, environment and timeout, with the result read in the test.

A job runs in a new session (signals a test sends to its own process group miss it) and
ends with the test process (``PR_SET_PDEATHSIG``); its output goes to files, never pipes
(a pipe nobody reads would stall it). It runs in a folder of its own, empty when it starts
(its output files are kept elsewhere), removed with them when the session ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["Prestart", "close_all", "schedule", "start_next"]


def _die_with_parent() -> None:
    """In the child: ask Linux to end it when the test process dies, even by a crash."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: close_all() still ends it on a normal exit
        pass


class Prestart:
    """One subprocess a test needs, startable before the test.

    Args:
        command: The argv, or a function of the job's own folder that returns it (a
            command that writes files writes them there; the test reads them from
            ``result().folder``).
        timeout: Seconds from the start the test waits at most; past them the job is
            killed and ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` does.
        env: The environment, or a function of the job's folder that returns it
            (default: this process's when the job is declared, at collection, before any
            test changed it).
        cwd: The working folder (default: the job's own folder).
        preexec_fn: Run in the child before the command (a resource limit).
    """

    def __init__(
        self,
        command: Sequence[str] | Callable[[Path], Sequence[str]],
        *,
        timeout: float,
        env: Mapping[str, str] | Callable[[Path], Mapping[str, str]] | None = None,
        cwd: Path | str | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self._command = command
        self.timeout = timeout
        self._env = dict(os.environ) if env is None else env
        self._cwd = cwd
        self._preexec = preexec_fn
        self._proc: subprocess.Popen | None = None
        self._started_at = 0.0
        self._done: Finished | None = None
        self.folder: Path | None = None

    @property
    def started(self) -> bool:
        """Whether the subprocess was started (it may have ended since)."""
        return self._proc is not None

    def running(self) -> bool:
        """Whether the subprocess was started and has not ended."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the subprocess (once)."""
        if self._proc is not None:
            return
        if self not in _jobs:  # started by its test, not scheduled: cleaned up all the same
            _jobs.append(self)
        _running.append(self)
        self.folder = Path(tempfile.mkdtemp(prefix="kelab-prestart-"))
        self._logs = Path(tempfile.mkdtemp(prefix="kelab-prestart-logs-"))
        argv = self._command(self.folder) if callable(self._command) else self._command
        self._argv = list(argv)
        env = dict(self._env(self.folder) if callable(self._env) else self._env)

        def preexec() -> None:
            _die_with_parent()
            if self._preexec is not None:
                self._preexec()

        with open(self._logs / "stdout", "wb") as out, open(self._logs / "stderr", "wb") as err:
            self._proc = subprocess.Popen(
                self._argv,
                cwd=self._cwd if self._cwd is not None else self.folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=preexec,
            )
        self._started_at = time.monotonic()

    def result(self) -> Finished:
        """The finished subprocess: started now if it was not, waited for (once)."""
        if self._done is not None:
            return self._done
        self.start()
        assert self._proc is not None and self.folder is not None
        left = self.timeout - (time.monotonic() - self._started_at)
        try:
            self._proc.wait(timeout=max(left, 0.0))
        except subprocess.TimeoutExpired:
            self.kill()
            raise subprocess.TimeoutExpired(self._argv, self.timeout) from None
        self._done = Finished(
            self._argv,
            self._proc.returncode,
            (self._logs / "stdout").read_text(errors="replace"),
            (self._logs / "stderr").read_text(errors="replace"),
            self.folder,
        )
        return self._done

    def kill(self) -> None:
        """End the subprocess and its process group if it still runs."""
        if self.running():
            assert self._proc is not None
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()

    def close(self) -> None:
        """Kill the subprocess if it runs, and remove its folder."""
        self.kill()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            shutil.rmtree(self._logs, ignore_errors=True)


class Finished(subprocess.CompletedProcess):
    """A finished job: ``subprocess.run``'s result (text output), and the job's folder."""

    def __init__(
        self, args: list[str], returncode: int, stdout: str, stderr: str, folder: Path
    ) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.folder = folder


_queue: list[Prestart] = []  # scheduled, not started
_jobs: list[Prestart] = []  # every job scheduled or started, for close_all
_running: list[Prestart] = []  # started, not yet seen to end


def schedule(jobs: Iterable[Prestart]) -> None:
    """Queue the jobs (each once, in order) and start the first."""
    for job in jobs:
        if job not in _jobs:
            _jobs.append(job)
            _queue.append(job)
    start_next()


def start_next() -> None:
    """Start the next queued job when none of them runs (one at a time: one idle core)."""
    _running[:] = [job for job in _running if job.running()]
    while _queue and _queue[0].started:  # a test started it itself
        _queue.pop(0)
    if _queue and not _running:
        _queue.pop(0).start()


def close_all() -> None:
    """End every job still running and remove every job's folder (the session ends)."""
    _queue.clear()
    _running.clear()
    for job in _jobs:
        job.close()
    _jobs.clear()
