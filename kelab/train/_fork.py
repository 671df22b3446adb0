"""Forked helper processes of the trainer (evaluation, learner), and what they inherit.

A forked child inherits every open descriptor of its parent, including the parent's end
of each pipe to the other helpers (and its own). A helper waiting on its pipe only sees
the end of it (and exits) when no process holds the parent's end any more: so each child
closes, first thing, every parent end this module handed out. Then killing the trainer
(even with SIGKILL) ends its helpers instead of leaving them waiting forever.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["HelperProcess", "can_fork", "fork_helper", "reply", "requests"]

_parent_ends: weakref.WeakSet[Connection] = weakref.WeakSet()


def _ray_driver() -> bool:
    """Whether this process is connected to Ray (its gRPC threads must not be forked)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def can_fork() -> bool:
    """Whether this process may fork a helper process.

    Needs the ``fork`` start method (Linux, macOS) and a process that is not a Ray driver
    (forking gRPC's threads is unsupported). Other threads may run, as when PyTorch's
    DataLoader forks its workers: the child only runs its own envs and networks, writes
    nothing to stdout or stderr, and exits without running ``atexit`` handlers.
    """
    return "fork" in multiprocessing.get_all_start_methods() and not _ray_driver()


def _child(target: Callable[..., None], conn: Connection, args: tuple[Any, ...]) -> None:
    code = 1
    try:
        for end in list(_parent_ends):  # the inherited copies: this process writes to none
            end.close()
        target(conn, *args)
        code = 0
    finally:
        # no interpreter shutdown: flushing stdio could wait on a lock that another
        # thread of the parent held at the fork, and atexit handlers are the parent's
        os._exit(code)


def fork_helper(
    target: Callable[..., None], args: tuple[Any, ...], name: str
) -> tuple[BaseProcess, Connection]:
    """Fork a daemon process running ``target(conn, *args)``; return it and this end.

    The pipe's end in this process is closed in every helper forked after it (see the
    module docstring), so a helper sees the pipe end when this process does.
    """
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    _parent_ends.add(parent)
    proc = ctx.Process(target=_child, args=(target, child, args), name=name, daemon=True)
    proc.start()
    child.close()
    return proc, parent


def _end(proc: BaseProcess, conn: Connection, parent: int) -> None:
    """End a helper nobody will talk to again (its owner was collected without close())."""
    if os.getpid() != parent:  # a forked copy of the owner: the helper is not its child
        return
    conn.close()
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5.0)


class HelperProcess:
    """A forked helper (:func:`fork_helper`) answering one request at a time.

    Subclasses name the helper (``what``) and the setting that avoids it (``fix``) for
    the error a vanished helper gives, send requests over ``_conn`` and keep ``_pending``
    true from a request until its answer is read.
    """

    what = "helper process"
    fix = "run it in this process instead"

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
        self._proc, self._conn = fork_helper(target, args, name)
        self._pending = False
        # an owner dropped without close(): the process ends with this object, not at exit
        self._finalizer = weakref.finalize(self, _end, self._proc, self._conn, os.getpid())

    @property
    def pending(self) -> bool:
        """A request was sent and its answer not read yet."""
        return self._pending

    def wait(self) -> None:
        """Wait until the answer (or the pipe's end) is there to read.

        Ctrl-C may cut the wait short; it reads nothing, so the answer stays whole.
        """
        try:
            self._conn.poll(None)
        except (EOFError, OSError):
            pass  # reading says what happened

    def _gone(self, err: BaseException) -> str:
        """The message for a helper that ended unexpectedly (``err``: what the pipe said)."""
        self._proc.join(timeout=1.0)
        return (
            f"the {self.what} (pid {self._proc.pid}) ended unexpectedly (exit code "
            f"{self._proc.exitcode}, {type(err).__name__}); {self.fix}"
        )

    def close(self) -> None:
        """Stop the process; a request in progress is dropped (the process is killed)."""
        self._finalizer.detach()
        if self._proc.pid is None or self._conn.closed:
            return
        if self._pending:  # nobody will read that answer
            self._proc.kill()
        else:
            try:
                self._conn.send_bytes(b"")
            except OSError:
                pass
        self._conn.close()
        self._pending = False
        self._proc.join(timeout=5.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=5.0)


def requests(conn: Connection) -> Iterator[bytes]:
    """A helper's requests from its pipe, until the trainer sends ``b""``, closes it or dies."""
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):  # the trainer is gone
            return
        if not data:
            return
        yield data


def reply(conn: Connection, answer: bytes) -> bool:
    """Send a helper's answer; False when the trainer is gone (the helper then stops)."""
    try:
        conn.send_bytes(answer)
    except OSError:  # BrokenPipeError included
        return False
    return True
