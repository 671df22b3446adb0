"""The Ray side of a RayLearningEnv: its actors, their step channels, and their faults.

A :class:`WorkerPool` starts ``len(ranges)`` :class:`~kelab.rl.ray_worker.EnvWorker`
actors (worker ``k`` holding copies ``ranges[k]``), sends each step's rows of the actions
to every worker at once (through a same-machine
:class:`~kelab.rl.ray_channel.StepChannel` where it can, else through Ray) and hands each
worker's reply to the caller as it arrives. It owns what can go wrong on the way: a
worker that died is named in a :class:`WorkerDiedError` or, with ``restart``, waited for
while Ray restarts it, after which the caller's ``cut_short(k)`` supplies the reply its
copies give for that step; a task error raised in a worker is re-raised as itself, once
every worker's reply is read. What the replies mean (the Gymnasium contract, the
episode bookkeeping, snapshots) is :class:`~kelab.rl.ray_env.RayLearningEnv`'s.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab.rl.config import EnvConfig
from kelab.rl.ray_channel import OK, ChannelClosedError, StepChannel, StepReply, channel_supported
from kelab.rl.ray_start import wait_for_workers
from kelab.rl.ray_worker import (
    EnvWorker,
    FreshWorkerError,
    WorkerDescription,
    node_id,
    worker_config,
)
from kelab.rl.success import SuccessRule
from kelab.rl.task import Task

if TYPE_CHECKING:  # ray is optional: imported when an env is made
    from ray import ObjectRef
    from ray.actor import ActorHandle

__all__ = ["WorkerDiedError", "WorkerPool"]


class WorkerDiedError(RuntimeError):
    """A Ray worker of a ``RayLearningEnv`` died (process killed, node lost).

    Attributes:
        worker: Index of the worker.
        copies: ``(first, end)``: the global copy indices ``[first, end)`` it held.
        host: Host name and address of the node it ran on.
        pid: Its process id.
    """

    def __init__(self, message: str, worker: int, copies: tuple[int, int], host: str, pid: int):
        super().__init__(message)
        self.worker = worker
        self.copies = copies
        self.host = host
        self.pid = pid


class WorkerPool:
    """``len(ranges)`` EnvWorker actors holding copies ``ranges[k]`` of one task.

    Construction starts the actors, waits until each has built its ``LearningEnv`` and
    described it (:attr:`described`), and opens a step channel to every worker on this
    machine when ``shared_memory``. On any error it closes what it started and raises.

    Args:
        ray: The ``ray`` module (already initialised).
        task: The task (each actor gets a copy).
        ranges: Each worker's copies ``(first, end)`` of the env's.
        config: The whole env's config (worker ``k`` runs ``worker_config(config,
            ranges[k])``).
        success: The success rule every worker's env judges with (None: the task's).
        restart: Ray restarts dead actors (else a death is a :class:`WorkerDiedError`).
        cpus_per_worker: CPUs Ray reserves per actor.
        start_timeout_s: Seconds to wait for the actors to start (and a channel to attach).
        shared_memory: Step workers on this machine through a StepChannel.
        pin_workers: Pin worker ``k`` to the ``k``-th CPU it may use.

    Raises:
        TimeoutError: Ray could not place every worker within ``start_timeout_s``.
        Exception: A worker's own error building its env (the task's, as itself).
    """

    def __init__(
        self,
        ray: ModuleType,
        task: Task,
        ranges: Sequence[tuple[int, int]],
        config: EnvConfig,
        success: SuccessRule | None,
        *,
        restart: bool,
        cpus_per_worker: float,
        start_timeout_s: float,
        shared_memory: bool,
        pin_workers: bool,
    ) -> None:
        self.ray = ray
        self.ranges = list(ranges)
        self.restart = restart
        self.restarts = 0  # worker restarts seen so far
        self.start_timeout_s = start_timeout_s
        n = len(self.ranges)
        actor = ray.remote(EnvWorker).options(
            num_cpus=float(cpus_per_worker),
            max_restarts=-1 if restart else 0,
            max_task_retries=0,
            scheduling_strategy="SPREAD",
        )
        self.actors: list[ActorHandle] = [
            actor.remote(task, worker_config(config, r), success, k if pin_workers else None)
            for k, r in enumerate(self.ranges)
        ]
        self.channels: list[StepChannel | None] = [None] * n
        self._serving: list[ObjectRef | None] = [None] * n  # each channel's serve() call
        self._send_order = list(range(n))  # collect() sets it (last reply first)
        self.hosts = ["(starting)"] * n
        self.pids = [-1] * n
        #: Replies owed by workers restarted outside a step (the next step reports them).
        self.held: dict[int, StepReply] = {}
        #: ``cut_short(k)``: the reply of worker ``k``'s copies after Ray restarted it, or
        #: None before any episode (the env sets it; it resets the worker via :meth:`retry`).
        self.cut_short: Callable[[int], StepReply | None] | None = None
        #: Calls that set a worker's state beyond its constructor arguments (method name ->
        #: arguments, the latest of each): repeated on every worker Ray restarts, which is
        #: built from those arguments alone.
        self.after_restart: dict[str, tuple] = {}
        try:
            refs = [w.describe.remote() for w in self.actors]
            needs = f"each needs cpus_per_worker={cpus_per_worker} CPUs"
            late = wait_for_workers(ray, refs, float(start_timeout_s), needs)
            if late:
                raise TimeoutError(
                    f"RayLearningEnv: Ray did not start workers {late} of {n} within "
                    f"{start_timeout_s} s; each needs cpus_per_worker={cpus_per_worker} CPUs and "
                    f"the cluster has {ray.available_resources().get('CPU', 0)} free of "
                    f"{ray.cluster_resources().get('CPU', 0)}: lower cpus_per_worker, close "
                    "other envs, or add nodes"
                )
            self.described: list[WorkerDescription] = self.call_all("describe")
            for k, d in enumerate(self.described):
                self.hosts[k], self.pids[k] = d.host, d.pid
            if shared_memory and channel_supported():
                self._open_channels()
        except BaseException:
            self.close()  # no actors left behind
            raise

    def _open_channels(self) -> None:
        """A StepChannel for every worker on this machine (the others step through Ray)."""
        here = node_id()
        d0 = self.described[0]
        obs_dim = d0.single_observation_space.shape[0]
        act_dim = d0.single_action_space.shape[0]
        for k, (d, (a, b)) in enumerate(zip(self.described, self.ranges, strict=True)):
            if here and d.node_id == here:
                try:
                    self.channels[k] = StepChannel(b - a, obs_dim, act_dim)
                except OSError:  # no memfd or Unix sockets here (a sandbox): through Ray
                    pass

    def __len__(self) -> int:
        return len(self.actors)

    # ------------------------------------------------------------------ faults
    def died(self, k: int, err: BaseException, doing: str) -> WorkerDiedError:
        """The error naming worker ``k`` (its copies, host, pid), dead during ``doing``."""
        a, b = self.ranges[k]
        hint = (
            "Ray could not restart it; check the node's logs (/tmp/ray/session_latest/logs)"
            if self.restart
            else "pass restart=True to RayLearningEnv to restart dead workers and go on"
        )
        detail = ""
        if self.pids[k] < 0:  # it never answered: it could not unpack its task, or crashed
            # its last lines, without the caret rows under Python's traceback lines
            text = [line.strip() for line in str(err).strip().splitlines()]
            text = [line for line in text if line.strip("^~ ")]
            detail = " (Ray says: " + " | ".join(text[-6:]) + ")"
            hint = (
                "the worker failed to start: most likely the task class cannot be imported "
                "on the node (install your package there, or pass "
                "ray_init={'runtime_env': ...}); an error building its LearningEnv would "
                "have been raised as itself"
            )
        return WorkerDiedError(
            f"Ray worker {k} of {len(self)} (copies [{a}, {b}), host "
            f"{self.hosts[k]}, pid {self.pids[k]}) died during {doing}: "
            f"{type(err).__name__}{detail}; {hint}",
            k,
            (a, b),
            self.hosts[k],
            self.pids[k],
        )

    def _raise_cause(self, k: int, err: BaseException) -> None:
        """Re-raise an exception the worker's LearningEnv raised, saying where."""
        cause = getattr(err, "cause", None)
        if not isinstance(cause, BaseException):
            raise err
        a, b = self.ranges[k]
        note = (
            f"(raised in Ray worker {k}, which holds copies [{a}, {b}): its copy j is "
            f"copy {a} + j of this RayLearningEnv)"
        )
        if hasattr(cause, "add_note"):
            cause.add_note(note)
        raise cause from None

    def get(self, k: int, ref: ObjectRef) -> tuple[bool, Any]:
        """``(True, value)``, or ``(False, error)`` when the actor died.

        Also when the call reached an actor Ray had already restarted
        (:class:`FreshWorkerError`): a death the pool had not seen.

        Raises:
            Exception: The worker's own error (a task error), as itself.
        """
        ray = self.ray
        try:
            return True, ray.get(ref)
        except (
            ray.exceptions.RayActorError,  # the process died (killed, crashed, node lost)
            ray.exceptions.OutOfMemoryError,  # Ray's memory monitor killed it
            ray.exceptions.WorkerCrashedError,
        ) as err:
            return False, err
        except ray.exceptions.RayTaskError as err:
            if isinstance(getattr(err, "cause", None), FreshWorkerError):
                return False, err
            self._raise_cause(k, err)
            raise  # unreachable: _raise_cause always raises

    def call_all(
        self, method: str, args: Sequence[tuple] | None = None, *, sets_state: bool = False
    ) -> list[Any]:
        """Call ``method`` on every worker at once and return the replies in order.

        A dead worker raises WorkerDiedError unless ``restart``. With ``sets_state``
        (reset, restore: the call sets every copy's state) the call is then repeated on the
        restarted actor. Otherwise the restarted actor's copies first start fresh episodes
        (``cut_short(k)``: their reply, held for the next step; None before any episode),
        and then the call is repeated. A task error is raised once every reply is read.
        """
        args = args or [()] * len(self)
        self.stop_serving()
        refs = [getattr(w, method).remote(*a) for w, a in zip(self.actors, args, strict=True)]
        out = []
        task_error: BaseException | None = None  # raised once every reply is read
        dead: WorkerDiedError | None = None  # likewise (restart=False)
        for k, ref in enumerate(refs):
            try:
                ok, value = self.get(k, ref)
            except Exception as err:  # noqa: BLE001 - the task's own error, re-raised below
                task_error = task_error or err
                continue
            if not ok:
                if not self.restart:  # raised once every reply is read, before task errors
                    dead = dead or self.died(k, value, method)
                    continue
                held = None
                if not sets_state and k not in self.held and self.cut_short is not None:
                    held = self.cut_short(k)  # resets the restarted actor's copies
                if held is not None:
                    self.held[k] = held
                    ok, value = self.get(k, getattr(self.actors[k], method).remote(*args[k]))
                    if not ok:
                        raise self.died(k, value, f"{method} after a restart")
                else:
                    value = self.retry(k, method, args[k])
            out.append(value)
        if dead is not None:
            raise dead
        if task_error is not None:
            raise task_error
        if sets_state:  # every copy's state was just set: nothing held is owed any more
            self.held.clear()
            if self.restart:
                self._notice_restarts()
        return out

    def _notice_restarts(self) -> None:
        """Count the restarts Ray made before a reset or restore reached a worker.

        Such a call succeeds on the new actor (it sets every copy's state), so only its
        process id tells: a worker whose pid changed was restarted (one describe call
        each, after the rare calls that set state).
        """
        refs = [w.describe.remote() for w in self.actors]
        for k, ref in enumerate(refs):
            ok, d = self.get(k, ref)
            if ok and d.pid != self.pids[k]:
                self._restarted(k, d)

    def _restarted(self, k: int, described: WorkerDescription | None = None) -> None:
        """Count worker ``k``'s restart, note its host and pid, repeat ``after_restart``.

        A call that finds the new actor dead again is left to the next call to notice.
        """
        self.restarts += 1
        if described is None:
            ok, described = self.get(k, self.actors[k].describe.remote())
            if not ok:
                return
        self.hosts[k], self.pids[k] = described.host, described.pid
        for method, args in self.after_restart.items():
            if not self.get(k, getattr(self.actors[k], method).remote(*args))[0]:
                return

    def retry(self, k: int, method: str, args: tuple, timeout_s: float = 120.0) -> Any:
        """Call ``method`` on worker ``k`` until its restarted actor answers."""
        deadline = time.monotonic() + timeout_s
        err: BaseException | None = None
        while time.monotonic() < deadline:
            ok, value = self.get(k, getattr(self.actors[k], method).remote(*args))
            if ok:
                self._restarted(k)
                return value
            err = value
            time.sleep(0.1)
        raise self.died(k, err or TimeoutError(), f"{method} after a restart")

    # ------------------------------------------------------------------ stepping
    def stop_serving(self) -> None:
        """End every worker's serve() loop, so its next Ray call runs (calls run in order)."""
        for k, channel in enumerate(self.channels):
            if channel is not None and channel.connected:
                channel.disconnect(quit_worker=True)
            self._serving[k] = None

    def _serve(self, k: int) -> bool:
        """Start worker ``k``'s serve() loop on its channel; False if it could not attach.

        A worker that died returns False (this step goes through Ray, which reports it);
        one that cannot reach the channel (OSError: another container on the same node)
        steps through Ray from now on.
        """
        channel = self.channels[k]
        assert channel is not None
        ref = self.actors[k].serve.remote(channel.address)
        ray = self.ray
        if channel.connect(lambda: bool(ray.wait([ref], timeout=0)[0]), self.start_timeout_s):
            self._serving[k] = ref
            return True
        try:
            ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            if isinstance(getattr(err, "cause", None), OSError):
                channel.close()
                self.channels[k] = None
        except ray.exceptions.RayError:
            pass  # died: the Ray step reports it
        return False

    def send(self, actions: np.ndarray) -> list[ObjectRef | None]:
        """Send every worker its rows of ``actions``; return each worker's Ray call.

        None for a worker stepping through its channel, or sent nothing (a reply is held
        for it).
        """
        pending: list[ObjectRef | None] = [None] * len(self)
        for k in self._send_order:
            if k in self.held:  # restarted outside a step: this step reports its copies
                continue
            lo, hi = self.ranges[k]
            channel = self.channels[k]
            if channel is not None and (channel.connected or self._serve(k)):
                try:
                    channel.send_step(actions[lo:hi])
                    continue
                except ChannelClosedError:  # died since its last step: Ray says how
                    channel.disconnect()
            pending[k] = self.actors[k].step.remote(actions[lo:hi])
        return pending

    def _arrivals(self, ks: list[int]) -> Iterator[int]:
        """Workers ``ks`` (steps sent through their channels) in the order they reply."""
        if len(ks) <= 1:
            yield from ks
            return
        poller = select.poll()
        waiting = {}
        for k in ks:
            channel = self.channels[k]
            assert channel is not None
            fd = channel.fileno()
            waiting[fd] = k
            poller.register(fd, select.POLLIN)
        while waiting:
            for fd, _ in poller.poll():
                k = waiting.pop(fd, None)
                if k is not None:
                    poller.unregister(fd)  # before receive() may close it
                    yield k

    def collect(
        self, pending: list[ObjectRef | None], put: Callable[[int, StepReply], None]
    ) -> None:
        """Hand every worker's reply to the step :meth:`send` sent to ``put(k, reply)``.

        Held replies first, then each channel's as it arrives (``put`` joins it while
        the slower workers still step; its arrays are views of the shared memory, valid
        until the next step), then the Ray calls'. A worker that died raises
        :class:`WorkerDiedError`, or with ``restart`` gets ``cut_short(k)``'s reply; a
        task error is raised once every reply is read.
        """
        ray = self.ray
        got = [False] * len(self)

        def give(k: int, reply: StepReply) -> None:
            put(k, reply)
            got[k] = True

        for k in list(self.held):  # restarted since the last step (see call_all)
            give(k, self.held.pop(k))
        arrived: list[int] = []
        channel_steps = [k for k, ref in enumerate(pending) if ref is None and not got[k]]
        for k in self._arrivals(channel_steps):
            arrived.append(k)
            channel = self.channels[k]
            assert channel is not None
            try:
                status, ends = channel.receive()
            except ChannelClosedError:
                continue
            if status == OK:
                r = channel.arrays
                give(k, StepReply(r.obs, r.rewards, r.terminated, r.truncated, ends))
        through_ray = [k for k, ref in enumerate(pending) if ref is not None]
        if through_ray:
            try:  # one call for every Ray reply (the common case)
                for k, value in zip(
                    through_ray, ray.get([pending[k] for k in through_ray]), strict=True
                ):
                    give(k, value)
            except ray.exceptions.RayError:
                pass  # found and reported below, worker by worker
        # a task error is raised once every worker's reply is read (an unread failed call
        # is echoed by Ray as an "Unhandled error"): the first worker's, noting where
        task_error: BaseException | None = None
        dead: WorkerDiedError | None = None
        for k in range(len(self)):
            if got[k]:
                continue
            try:
                if pending[k] is None:  # its serve() call says what happened
                    serving, self._serving[k] = self._serving[k], None
                    ok, value = self.get(k, serving)
                    if ok:  # the loop ended without an error: its process is going away
                        ok, value = False, ChannelClosedError("the worker's step channel closed")
                else:
                    ok, value = self.get(k, pending[k])
            except Exception as err:  # noqa: BLE001 - the task's own error, re-raised below
                task_error = task_error or err
                continue
            if ok:
                give(k, value)
                continue
            reply = self.cut_short(k) if self.restart and self.cut_short is not None else None
            if reply is None:  # raised once every reply is read, before task errors
                dead = dead or self.died(k, value, "step")
                continue
            give(k, reply)
        if dead is not None:
            raise dead
        if task_error is not None:
            raise task_error
        # the next step goes first to the worker that replied last: its CPU has just
        # gone idle, so the OS wakes it there and the others where they ran, rather than
        # swapping workers between CPUs (each swap starts a step with cold caches)
        self._send_order = arrived[::-1] + [k for k in range(len(self)) if k not in arrived]

    def drain(self, pending: list[ObjectRef | None]) -> None:
        """Wait for the step ``pending`` (its replies are dropped)."""
        for k, ref in enumerate(pending):
            channel = self.channels[k]
            if ref is None and channel is not None:
                try:
                    channel.receive()
                except ChannelClosedError:
                    pass
        through_ray = [ref for ref in pending if ref is not None]
        if through_ray:
            self.ray.wait(through_ray, num_returns=len(through_ray))

    def close(self) -> None:
        """Close the channels and kill the actors."""
        for channel in self.channels:
            if channel is not None:
                channel.close()
        self.channels = [None] * len(self.channels)
        for w in self.actors:
            try:
                self.ray.kill(w, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass
        self.actors = []
