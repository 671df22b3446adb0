"""The "packed" layout: all copies of a shard in ONE pymunk Space (internal).

One ``pymunk.Space`` per thread shard holds its copies side by side along x. Copy ``i`` has
its origin at ``x = BASE_X + i * spacing`` in every shard (the same place whatever the
sharding), with ``spacing = env_spacing`` rounded up to a power of two. All those origins
and every body near them lie in one binade, ``[2**20, 2**21)``, where doubles are a fixed
grid of ``2**-32`` m, so adding or subtracting an origin is exact and translation-
equivariant. See docs/world.md, "Layouts", for what is exact and what is not.

The shards (the plan every shard shares, one shard's space and its copies, their resets,
and the constants of the packing) are in _shard.py; this module is the backend across
shards: their threads (:class:`ShardWorkers`), stepping, batched reads and writes, and the
queries.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
import weakref
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._batch import ArbiterBuffer, friction_contacts, lookup, nearest_body
from kelab.sim.physics._compile import Layout
from kelab.sim.physics._friction import FrictionTable
from kelab.sim.physics._guard import native_module
from kelab.sim.physics._memory import check_world_memory, estimate, memory_left
from kelab.sim.physics._params import (
    HeldMasses,
    MassWriter,
    ShapeRows,
    write_materials,
    write_velocities,
    writer_module,
)
from kelab.sim.physics._shard import (
    CAPACITY,
    JointTables,
    Plan,
    Shard,
    body_writes,
    packed_spacing,
)
from kelab.sim.physics._warm import WarmParts
from kelab.sim.scene.scene import Scene


def _work(jobs: queue.SimpleQueue, done: queue.SimpleQueue) -> None:
    """A shard thread: run ``(fn, k)`` jobs from ``jobs`` until ``None``.

    It holds its two queues only: between jobs nothing of the World it steps (so a World
    dropped without ``close()`` is collected, and its :class:`ShardWorkers`' finalizer
    stops this thread). An error is handed over with its frames' locals cleared, for the
    same reason (its traceback still says where it was raised).
    """
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            job[0](job[1])
            done.put(None)
        except BaseException as exc:  # handed to the caller
            traceback.clear_frames(exc.__traceback__)
            done.put(exc)
        del job


@dataclass
class BarrierClock:
    """Thread CPU seconds spent in the shard threads' barriers (for benchmarks; opt-in).

    Set :data:`CLOCK` to one to record every barrier of every :class:`ShardWorkers`: a
    barrier runs from the first :meth:`ShardWorkers.submit` to the :meth:`ShardWorkers.wait`
    that ends it. Everything else the calling thread runs is serial: the workers wait.
    Where each thread has a core of its own, a barrier lasts as long as the busier
    thread, so a stepping loop's wall time is about ``serial + critical``
    (``serial = the calling thread's CPU time - caller``), whatever other processes do
    to the wall clock (thread wake-ups are not counted: a lower bound).

    >>> clock = BarrierClock()
    >>> clock.add(caller=0.002, worker=0.003)
    >>> clock.barriers, clock.critical
    (1, 0.003)
    """

    barriers: int = 0
    """Barriers recorded."""
    caller: float = 0.0
    """The calling thread's CPU seconds inside them (its own shard, stores, the wait)."""
    worker: float = 0.0
    """The busiest worker thread's CPU seconds in each, added up."""
    critical: float = 0.0
    """``max(caller, worker)`` of each, added up."""

    def add(self, caller: float, worker: float) -> None:
        """Record one barrier: the calling thread's and the busiest worker's CPU seconds."""
        self.barriers += 1
        self.caller += caller
        self.worker += worker
        self.critical += max(caller, worker)


#: Where set, every ShardWorkers records its barriers here (benchmarks/contacts.py).
CLOCK: BarrierClock | None = None


def _timed(fn: Callable[[int], None], spent: list[float], k: int) -> None:
    """Run ``fn(k)`` in worker thread ``k``, adding its thread CPU seconds to ``spent[k-1]``."""
    t0 = time.thread_time()
    try:
        fn(k)
    finally:
        spent[k - 1] += time.thread_time() - t0


def _stop(jobs: list[queue.SimpleQueue]) -> None:
    """Tell every shard thread to end after its queued jobs (no join: any thread may call)."""
    for q in jobs:
        q.put(None)  # SimpleQueue.put is reentrant: safe in a finalizer


class ShardWorkers:
    """Persistent threads running one job per shard; the calling thread runs shard 0.

    The threads end on :meth:`close`, or when this object is garbage collected (a World
    dropped without ``close()``): they hold no reference to it.

    Args:
        count: Shards (threads including the caller).
    """

    def __init__(self, count: int) -> None:
        self._jobs: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(1, count)]
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._outstanding = 0  # jobs submitted and not yet waited for
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(target=_work, args=(q, self._done), daemon=True, name=f"kelab-{k}")
            for k, q in enumerate(self._jobs, start=1)
        ]
        self._stop = weakref.finalize(self, _stop, self._jobs)
        # the barrier being recorded (CLOCK): the calling thread's CPU clock at its
        # first submit, the worker threads' CPU seconds in it
        self._clock_start: float | None = None
        self._spent: list[float] = []
        for t in self._threads:
            t.start()

    def run(self, fn: Callable[[int], None], count: int) -> None:
        """Run ``fn(k)`` for k in range(count) concurrently; re-raise the first error."""
        try:
            self.submit(fn, count)
        finally:
            self.wait()

    def submit(self, fn: Callable[[int], None], count: int) -> None:
        """Queue ``fn(k)`` for k in 1..count-1, run ``fn(0)`` here; do not wait.

        Each thread runs its jobs in order; :meth:`wait` waits for them. After
        :meth:`close` every job runs here, in order (the same work, one thread).
        """
        closed = not self._threads
        queued = fn
        if CLOCK is not None and not closed:
            if self._clock_start is None:
                self._clock_start = time.thread_time()
                self._spent = [0.0] * len(self._jobs)
            queued = partial(_timed, fn, self._spent)
        for k in range(1, count):
            if not closed:
                self._jobs[k - 1].put((queued, k))
                self._outstanding += 1
        for k in range(count if closed else 1):
            try:
                fn(k)
            except BaseException as exc:
                if self._error is None:
                    self._error = exc

    @property
    def threaded(self) -> bool:
        """Whether the threads run (False after :meth:`close`: jobs run here, in order)."""
        return bool(self._threads)

    @property
    def ok(self) -> bool:
        """False once a job has failed (:meth:`wait` raises its error)."""
        return self._error is None

    @property
    def busy(self) -> bool:
        """Whether submitted jobs may still be running (call :meth:`wait`)."""
        return self._outstanding > 0 or self._error is not None

    def wait(self) -> None:
        """Wait for every submitted job; re-raise the first error of any of them."""
        while self._outstanding:
            got = self._done.get()
            self._outstanding -= 1
            if got is not None and self._error is None:
                self._error = got
        if self._clock_start is not None:
            if CLOCK is not None:
                CLOCK.add(time.thread_time() - self._clock_start, max(self._spent))
            self._clock_start = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        """Wait for the submitted jobs (errors dropped), then stop the threads.

        Jobs submitted later run in the calling thread.
        """
        try:
            self.wait()
        except BaseException:  # closing: nobody is left to handle it
            pass
        self._stop()  # once: later calls do nothing
        for t in self._threads:
            t.join()
        self._threads = []


T = TypeVar("T")


def built_apart(makers: list[Callable[[], T]]) -> list[T]:
    """Call each of ``makers`` in a short-lived thread of its own, in order; their results.

    For the shards' spaces: a thread allocates from a malloc arena of its own (glibc), so
    each shard's Chipmunk bodies, shapes and constraints are laid out together, away from
    the main heap (where the first shard built took what a throwaway shard built first
    and kept would take instead: with one, the penalty below went; built and freed, or of
    16 copies, it stayed; glibc's huge-page tunable changed nothing). Built in the calling
    thread, the first shard's step ran ~9 % slower than the next one's
    for its whole life (Humanoid-v0 x256 on 2 threads, a fresh process: shard 0's two
    steps 1,117-1,199 against shard 1's 1,072-1,102 us of thread CPU an env step; built
    apart 1,060-1,084 against 1,078-1,102; one thread 2,329-2,383 -> 2,191-2,217): the
    calling thread's shard was the late one at every barrier. The same bits: a copy's
    results never depend on where its objects lie (tests/sim/test_determinism.py; 200
    Humanoid-v0 x256 env steps on 1 and 2 threads hash as before).

    Where no thread can be started, the makers run in the calling thread.

    Raises:
        BaseException: The first error of a maker, here (the later ones are not called).

    >>> built_apart([lambda: 1, lambda: 2])
    [1, 2]
    """
    out: list[T] = []
    for make in makers:
        box: list[tuple[bool, object]] = []

        def run(make: Callable[[], T] = make, box: list = box) -> None:
            try:
                box.append((True, make()))
            except BaseException as exc:  # raised in the calling thread below
                box.append((False, exc))

        thread = threading.Thread(target=run, name="kelab-build", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had (a process limit): built here instead
            run()
        else:
            thread.join()
        ok, value = box[0]
        if not ok:
            raise value  # type: ignore[misc]
        out.append(value)
    return out


#: The calling thread's shard holds this share of a worker's copies: as many. Every
#: physics step is a barrier (it reads the state, whose limits are checked before the next
#: step), so the workers cannot run ahead while the calling thread runs the World's and
#: the task's Python between steps: a step lasts that serial part plus the longer shard's
#: step. A smaller calling-thread shard (2/3, before) only left it waiting for the worker:
#: measured by the critical path (_packed.BarrierClock, benchmarks/README.md "contacts"),
#: Humanoid-v0 x256 1.46x -> 1.49x, 1024 cartpoles (world_throughput's loop) 1.56x ->
#: 1.64x. Results do not depend on it: a copy's bits are its own in any shard (tested
#: against one thread).
CALLER_SHARE = 1.0


#: Rebuilds of at least this many copies run each shard's part in its own thread: the C
#: reset releases the GIL, so the shards' Chipmunk work overlaps (Humanoid-v0 x256 on 2
#: threads, 12 copies a reset: 364 -> 311 us of the calling thread's CPU, 48: 1151 -> 710);
#: fewer are not worth the hand-over (waking a thread, ~20-150 us of wall time by the load).
PARALLEL_REBUILD = 8


def shard_split(num_envs: int, shards: int) -> list[np.ndarray]:
    """Copies ``0..num_envs-1`` in ``shards`` runs of consecutive copies, one per thread.

    The first (the calling thread's) holds :data:`CALLER_SHARE` of each other's; every run
    at least one copy.

    >>> [s.tolist() for s in shard_split(10, 2)]
    [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    >>> [s.tolist() for s in shard_split(7, 3)]
    [[0, 1], [2, 3, 4], [5, 6]]
    """
    if shards <= 1:
        return [np.arange(num_envs)]
    first = round(num_envs * CALLER_SHARE / (CALLER_SHARE + shards - 1))
    first = min(max(first, 1), num_envs - (shards - 1))
    return [np.arange(first), *np.array_split(np.arange(first, num_envs), shards - 1)]


class PackedBackend:
    """Copies packed in one pymunk Space per thread shard.

    Args:
        scene: The scene.
        layout: Its constant layout.
        num_envs: Copies.
        num_threads: Shards, stepped concurrently (bit-identical for every value).
        env_spacing: Requested spacing; rounded up to a power of two.

    Raises:
        ValueError: If ``env_spacing <= 0`` or ``num_envs * spacing > CAPACITY``.
    """

    name = "packed"
    #: Copies share a space (one gravity): the World applies a copy's own gravity as the
    #: difference ``m (g_copy - g_scene)``, a force on each body (docs/world.md, "Per-copy
    #: parameters").
    gravity_in_space = False
    #: None: copies share a space, so a rebase cannot step one alone to carry its warm
    #: starts over (kelab/sim/physics/_warm.py); rebases are cold.
    warm = None

    def __init__(
        self, scene: Scene, layout: Layout, num_envs: int, num_threads: int, env_spacing: float
    ) -> None:
        if env_spacing <= 0:
            raise ValueError(
                f"World: layout='packed' needs env_spacing > 0 metres, got {env_spacing!r}"
            )
        spacing = packed_spacing(env_spacing)
        if num_envs * spacing > CAPACITY:
            raise ValueError(
                f"World: num_envs must be at most {int(CAPACITY // spacing)} for "
                f"layout='packed' at spacing {spacing} m (env_spacing {env_spacing} rounded up "
                f"to a power of two; a shard spans {CAPACITY:g} m of copies), got "
                f"num_envs={num_envs}; lower env_spacing or use fewer copies "
                "(layout='isolated' has no such cap but needs far more memory per copy)"
            )
        shards = min(num_threads, num_envs)
        check_world_memory(
            num_envs, "packed", estimate(scene, layout, "packed", shards), memory_left()
        )
        self.spacing = spacing
        self._n = num_envs
        self._nb = len(layout.body_paths)
        self._layout = layout
        self._plan = Plan(scene, layout, num_envs, spacing)
        self._split = shard_split(num_envs, min(num_threads, num_envs))
        self._split_starts = [int(part[0]) for part in self._split[1:]]  # shards 1..
        self._parts = [slice(int(p[0]), int(p[-1]) + 1) for p in self._split]
        # shards whose held forces changed since their buffer was last written
        self._pending = [True] * len(self._split)
        #: Called as ``on_read(rows)`` (in the calling thread) after rows of ``raw`` are read;
        #: ``on_read(rows, True)`` where the step computed their joint state too
        #: (:meth:`bind_joints`).
        self.on_read: Callable[..., None] | None = None
        #: Whether the next step_many computes the joint state (:meth:`bind_joints`)
        self._joints_due: Callable[[], bool] | None = None
        #: The joint tables a reset's read computes its rows' joint state with (Backend).
        self.reset_joints: Callable[[], JointTables | None] | None = None
        self._every = np.arange(num_envs)
        self._all_shards = list(range(len(self._split)))
        self._every.flags.writeable = False  # handed out by step()
        self._shard_of = np.zeros(num_envs, dtype=np.int64)
        self._local = np.zeros(num_envs, dtype=np.int64)
        for k, part in enumerate(self._split):
            self._shard_of[part] = k
            self._local[part] = np.arange(part.size)
        self._workers = ShardWorkers(len(self._split)) if len(self._split) > 1 else None
        self.raw = np.zeros((num_envs, self._nb, 6))
        static = ~layout.dynamic
        self.raw[:, static, 0:3] = layout.initial[static]
        self._forces = np.zeros((num_envs, self._nb, 3))
        mv = self._plan.moving
        # the moving bodies as a slice when they are contiguous (cheaper numpy)
        self._mv: slice | np.ndarray = (
            slice(int(mv[0]), int(mv[-1]) + 1)
            if mv.size and np.array_equal(mv, np.arange(mv[0], mv[-1] + 1))
            else mv
        )
        # the moving bodies for the parameter writers (read-only: found by identity)
        self._moving_cols = mv.astype(np.int64)
        self._moving_cols.flags.writeable = False
        # position of each (moving) body in a copy's block of the shard buffers
        self._moving_index = np.full(self._nb, -1, dtype=np.int64)
        self._moving_index[mv] = np.arange(mv.size)
        self._jobs: dict[float, Callable[[int], None]] = {}
        #: Copy origins along x in their shard's space.
        self.origin_x = self._plan.origin_x
        self._fric_vals: np.ndarray | None = None
        #: the C helper (kelab/sim/physics/_native.c) for body reads and writes, or None
        self._native = native_module()
        #: Per shard: whether its last step's read found every value within the limits'
        #: fast bound (:meth:`_step_shard`)
        self._within = [False] * len(self._split)
        #: Whether the last step read every copy and found every moving body's value
        #: within ``_limits.STATE_BOUND`` (the Backend's ``read_within``)
        self.read_within = False
        #: Per shard: the steps its last :meth:`step_many` job took
        self._taken = [0] * len(self._split)
        #: Where the shard threads of a :meth:`step_many` meet after each step (in C)
        self._gang = (
            self._native.Gang(len(self._split))
            if self._native is not None and self._workers is not None
            else None
        )
        #: The friction model's table (kelab/sim/physics/_friction.py; None: not needed)
        self.friction = FrictionTable(layout, num_envs) if layout.needs_handler else None
        self._arb_buf = ArbiterBuffer()  # reused by every contact read
        self._mass_writer: MassWriter | None = None  # made at the first set_masses
        self._param_shapes: ShapeRows | None = None
        #: the C helper writing per-copy parameters in batches, or None (_params.py)
        self._param_writer = writer_module()
        self._direct = False
        self.rebuild(np.arange(num_envs))
        #: Whether ``_forces`` is what the shards' steps read: with the C helper, each
        #: Stepper reads its bodies' rows of it (:meth:`Shard.bind`); without, the one
        #: shard's force buffer itself where every body moves. Held forces are then
        #: written where the steps read them, with no second copy (Humanoid-v0 x256 on 2
        #: threads: copying each shard's share into its buffer before a step cost ~6 us).
        self._direct = self.can_step_many or (len(self._shards) == 1 and mv.size == self._nb)
        if self._direct:
            if not self.can_step_many:
                shard = self._shards[0]
                self._forces = shard.fbuf[: num_envs * self._nb * 3].reshape(num_envs, self._nb, 3)
            self._pending = [False] * len(self._split)

    # ------------------------------------------------------------------ state
    def read(self, ids: np.ndarray) -> np.ndarray:
        """Batch-read the shards holding ``ids`` (one C call each); returns the copies read.

        When every shard is needed and there are threads, each shard thread fetches its
        own (C only); the numpy work runs here once for all shards (:meth:`_store`).
        """
        if ids.size == 0:
            return ids
        self.sync()
        self.read_within = False  # says nothing of a read outside a step
        if ids.size < self._n:  # a few copies (after resets): store only their rows
            if self._native is not None:  # only their bodies, in C (the same getters)
                self._read_bodies(self._native, ids)
                return ids
            shards = self._shards_of(ids)
            for k in shards:
                self._shards[k].fetch()
            self._store_rows(ids, shards)
            return ids
        self._fetch_all(self._read_shard)
        return self._every

    def _read_bodies(self, native: object, ids: np.ndarray) -> None:
        """:meth:`_store_rows`'s result for copies ``ids``, their bodies read one by one."""
        rows, origins = self._read_tables
        native.read_rows(self._body_addrs[ids], self.raw, rows[ids].ravel(), origins[ids].ravel())
        if self.on_read is not None:
            self.on_read(ids)

    def _shards_of(self, ids: np.ndarray) -> list[int]:
        """The shards holding copies ``ids``, ascending."""
        if len(self._split) == 1:
            return self._all_shards
        return np.unique(self._shard_of[ids]).tolist()

    def _store_rows(self, ids: np.ndarray, shards: list[int]) -> None:
        """Copy copies ``ids`` from their shards' last fetch into ``raw``, then ``on_read``.

        The same values as :meth:`_store` for those rows (the same subtraction of the
        origin); the other rows of ``raw`` are left as they were.
        """
        mv, ox = self._mv, self._plan.origin_x
        shard_of, local = self._shard_of[ids], self._local[ids]
        for k in shards:
            shard = self._shards[k]
            mine = slice(None) if len(self._split) == 1 else shard_of == k
            sel, loc = ids[mine], local[mine]
            n, kd = shard.copies.size, shard.kd
            block = shard.rbuf[: n * kd * 6].reshape(n, kd, 6)
            rows = block[loc]
            rows[:, :, 0] -= ox[sel, None]
            if isinstance(mv, slice):
                self.raw[sel, mv, :] = rows
            else:
                self.raw[sel[:, None], mv] = rows
        if self.on_read is not None:
            self.on_read(ids)

    def stepped(self, ids: np.ndarray) -> np.ndarray:
        """The copies a step advances: every copy (they share their shards' spaces)."""
        return self._every

    def contact_states(self, rows: np.ndarray) -> np.ndarray:
        """Fresh states of body rows, x in the shard's frame (:meth:`body_rows`)."""
        return self.body_rows(rows, shard_frame=True)

    def body_rows(self, rows: np.ndarray, shard_frame: bool = False) -> np.ndarray:
        """Fresh state of body rows ``copy * nb + body`` (moving bodies), ``(m, 6)``.

        Fetches every shard but stores nothing into ``raw``: a few rows gathered from the
        shard buffers, x in the copy's frame (the subtraction :meth:`_store` makes), or
        with ``shard_frame`` as the shard's space holds it (``x + origin_x`` of the copy
        frame's x, exactly: both lie in one binade).
        """
        self.sync()
        if self._workers is not None:
            self._workers.run(self._fetch_shard, len(self._shards))
        else:
            self._shards[0].fetch()
        nb = self._nb
        copies, bodies = rows // nb, rows % nb
        out = np.empty((rows.size, 6))
        for k, shard in enumerate(self._shards):
            mine = slice(None) if len(self._shards) == 1 else self._shard_of[copies] == k
            c, b = copies[mine], bodies[mine]
            flat = shard.rbuf[: shard.copies.size * shard.kd * 6].reshape(-1, 6)
            st = flat[self._local[c] * shard.kd + self._moving_index[b]]
            if not shard_frame:
                st[:, 0] -= self._plan.origin_x[c]
            out[mine] = st
        return out

    def _fetch_shard(self, k: int) -> None:
        self._shards[k].fetch()

    def _read_shard(self, k: int) -> None:
        """Read shard ``k``'s bodies (in the shard's thread).

        With the C helper into ``raw`` directly (GIL released), else into the shard's
        buffer for :meth:`_store_shard`.
        """
        if self._native is not None:
            self._shards[k].read_into(self._native, self.raw)
        else:
            self._shards[k].fetch()

    def _store(self) -> None:
        """Copy every shard's last fetch into ``raw`` (copy frames), then ``on_read``.

        Runs in the calling thread, after the shard threads: numpy calls on small arrays
        hold the GIL between short releases, so two threads doing them at once mostly
        take turns (and pay for the hand-overs); done once for all shards they are fewer
        and larger.
        """
        for k in range(len(self._shards)):
            self._store_shard(k)
        if self.on_read is not None:
            self.on_read(slice(None))

    def _fetch_all(self, job: Callable[[int], None]) -> None:
        """Run ``job(k)`` (ending with a fetch) for every shard, then store them all.

        With threads, this thread stores its own shard (0), and ``on_read`` handles its
        rows, while the others finish (their threads run C only: no GIL contention).
        """
        workers = self._workers
        if workers is None:
            job(0)
            self._store()
            return
        workers.submit(job, len(self._shards))
        if workers.ok:
            self._store_shard(0)
            if self.on_read is not None:
                self.on_read(self._parts[0])
        workers.wait()
        for k in range(1, len(self._shards)):
            self._store_shard(k)
        if self.on_read is not None:
            self.on_read(slice(self._parts[1].start, self._n))

    def _store_shard(self, k: int) -> None:
        """Copy shard ``k``'s last fetch into its rows of ``raw`` (copy frames).

        A copy, then ``x -= origin``. (One pass, ``fetch - offsets`` with the origins in
        an array of raw's shape, runs ~2x faster with warm caches, but inside the stepping
        loop that array is cold: +3k simulated 2 MB-cache misses per control step of
        1024 cartpoles and no faster; benchmarks/README.md, "packed World vs bare".)
        """
        if self._native is not None:  # read into raw by _read_shard already
            return
        shard, part = self._shards[k], self._parts[k]
        raw, mv = self.raw, self._mv
        n, kd = shard.copies.size, shard.kd
        raw[part, mv, :] = shard.rbuf[: n * kd * 6].reshape(n, kd, 6)
        raw[part, mv, 0] -= self._plan.origin_x[part, None]

    def set_forces(self, ids: np.ndarray, forces: np.ndarray) -> None:
        """Hold body forces/torques ``(len(ids), n_bodies, 3)``, written before every step.

        They are copied into the shards' batch buffers at the next step.
        """
        if ids.size == self._n:  # every copy: a plain copy, no fancy indexing
            self._forces[...] = forces
            self._pending = [not self._direct] * len(self._split)
        else:
            self._forces[ids] = forces
            if self._direct:  # written into the shard's buffer already
                return
            for k in np.unique(self._shard_of[ids]).tolist():
                self._pending[k] = True

    def step(self, dt: float, ids: np.ndarray) -> np.ndarray:
        """One physics step of every copy (a shared space cannot step a subset), then a read.

        Changed forces are copied into the shards' batch buffers here; then each shard
        (in its own thread when there are several) writes them, steps and batch-reads its
        bodies: C calls only, which release the GIL, so the shards run truly in parallel.
        The read states are then stored into ``raw`` here (every step reads: the World
        checks the limits before the next one).

        Returns:
            The copies whose state was read after the step: all of them.
        """
        if True in self._pending:
            self._flush_forces()
        self.read_within = False
        if self._workers is None:  # one shard, stepped right here: no job to dispatch
            self._step_shard(dt, 0)
            self.read_within = self._within[0]
            self._store_shard(0)
            if self.on_read is not None:
                self.on_read(slice(None))
            return self._every
        job = self._jobs.get(dt)
        if job is None:
            if len(self._jobs) > 8:  # a varying dt: keep the cache small
                self._jobs.clear()
            job = self._jobs[dt] = partial(self._step_shard, dt)
        self._fetch_all(job)
        self.read_within = all(self._within)
        return self._every

    def _flush_forces(self) -> None:
        """Copy the changed held forces into their shards' batch buffers, jobs out done."""
        self.sync()  # a failed step's threads may still hold the old buffers
        pending = self._pending
        for k, shard in enumerate(self._shards):
            if pending[k]:
                pending[k] = False
                shard.set_forces(self._forces[self._parts[k], self._mv, :])

    def step_many(self, dt: float, count: int) -> int:
        """Up to ``count`` physics steps of every copy in one job per shard (one barrier).

        Only where :attr:`can_step_many`. Each step is :meth:`step`'s (the held forces
        written, the step, the friction regimes, the read with its fast check of the
        limits), all in C: the shard threads meet after each step but the last (a
        ``Gang`` of the C helper, without the GIL) and stop together after the first
        step whose read, in any shard, was not within ``STATE_BOUND``, so no copy steps
        past a state the World has not checked and every copy ends at the same step.
        :attr:`read_within` then says whether the last read was within.

        Returns:
            The steps taken (``count``, or fewer where a read was not within).
        """
        workers = self._workers
        if workers is not None and not workers.threaded:  # closed: one plain step
            self.step(dt, self._every)
            return 1
        if True in self._pending or (workers is not None and workers.busy):
            self._flush_forces()
        self.read_within = False
        joints = self._joints_due is not None and self._joints_due()
        job = partial(self._run_shard, dt, count, joints)
        if workers is not None and not joints:  # on_read of shard 0 while the others finish
            self._gang.arm()  # no job is out: every gate closed, no round begun
            self._fetch_all(job)
        else:  # nothing for the calling thread's Python between the jobs
            if workers is None:
                job(0)
            else:
                self._gang.arm()
                workers.run(job, len(self._shards))
            if self.on_read is not None and joints:
                self.on_read(slice(None), True)
            elif self.on_read is not None:
                self.on_read(slice(None))
        self.read_within = all(self._within)
        return self._taken[0]

    def bind_joints(self, tables: JointTables, due: Callable[[], bool]) -> bool:
        """Let :meth:`step_many` compute the joint state of the copies it reads, in C.

        Each shard's job then writes its copies' rows of ``tables.pos`` and ``tables.vel``
        (held: written in place) after its last read, without the GIL, with the C helper's
        ``joint_revs`` operations and tables (every joint revolute or fixed), whenever
        ``due()`` says so before the step;
        ``on_read(rows, True)`` then tells the owner. Before, the calling thread computed
        them, shard 0's rows inside the barrier and the others' after it (Humanoid-v0 x256
        on 2 threads, ~14 and ~11 us of its thread CPU an env step; A/B in one run: the
        serial part plus the barriers' critical path 15-24 us shorter an env step).

        Returns:
            Whether they are bound (only where :attr:`can_step_many`).
        """
        if not self.can_step_many:
            return False
        t = tables
        for shard in self._shards:
            shard.stepper.joints(t.pos, t.vel, self._nb, t.pos.shape[1], *t[2:])
        self._joints_due = due
        return True

    def _run_shard(self, dt: float, count: int, joints: bool, k: int) -> None:
        """Shard ``k``'s part of :meth:`step_many` (in the shard's thread).

        A job that fails lets the other shards go (``Gang.abort``): none waits for it.
        """
        try:
            self._taken[k], self._within[k] = self._shards[k].stepper.run(
                dt, count, self._gang, k, joints
            )
        except BaseException:
            if self._gang is not None:
                self._gang.abort()
            raise

    def _step_shard(self, dt: float, k: int) -> None:
        """Step shard ``k`` and read it (in the shard's thread).

        With the C helper one call does both (:meth:`Shard.bind`) and says whether every
        value it read is within the limits' fast bound (``_within[k]``).
        """
        shard = self._shards[k]
        if shard.stepper is not None:
            self._within[k] = shard.stepper.step(dt, True)
            return
        self._within[k] = False
        shard.step(dt)
        self._read_shard(k)

    def sync(self) -> None:
        """Wait until the shard threads have finished every job handed to them.

        A step waits for its shards itself (it reads them); this is the guard of
        everything else that touches a shard, for jobs still out (a failed step's: its
        error is raised here).
        """
        if self._workers is not None and self._workers.busy:
            self._workers.wait()

    def rebuild(self, ids: np.ndarray, place: bool = True) -> None:
        """Make copies ``ids`` (distinct) fresh, in place (the first call builds the shards).

        Also when every copy of a shard is reset: its copies are rebuilt in place like any
        others (each exactly a fresh copy), ~10x cheaper than building a new space (new
        pymunk bodies and shapes for every copy). ``place=False``: the caller writes every
        moving body's state next (see :meth:`Shard.rebuild`).
        """
        self.sync()
        if ids.size == 0:
            return
        fresh = getattr(self, "_shards", None) is None
        self.read_within = False
        if fresh:
            self._shards = built_apart(
                [partial(Shard, self._plan, part, self.friction) for part in self._split]
            )
            for shard in self._shards:  # one C call a step, reading into raw and the
                shard.bind(self.raw, self._forces)  # held forces where set_forces writes
            #: Whether each shard's step chooses its friction regimes (in C)
            self.friction_in_step = all(shard.chooses for shard in self._shards)
            #: Whether :meth:`step_many` runs (each shard steps in one C call)
            self.can_step_many = all(shard.stepper is not None for shard in self._shards)
            # per copy, its moving bodies' cpBody * (for the C state writes; fixed)
            self._body_addrs = np.concatenate([shard.body_addrs for shard in self._shards]).reshape(
                self._n, self._plan.moving.size
            )
            # per copy, its moving bodies' rows of raw (flat) and its origin's x, each body
            moving = self._plan.moving
            self._read_tables = (
                self._every[:, None] * self._nb + moving,
                np.repeat(self._plan.origin_x, moving.size).reshape(self._n, moving.size),
            )
            self._id_dirty = self._shapes_dirty = True
            self._fric_vals = None
        elif len(self._split) == 1:  # one shard: local indices are the copy indices
            self._shards[0].rebuild(np.sort(ids), place)
        else:
            hit = np.zeros(self._n, dtype=bool)
            hit[ids] = True
            todo = [self._local[part[hit[part]]] for part in self._split]
            job = partial(self._rebuild_shard, todo, place)
            if ids.size >= PARALLEL_REBUILD:
                self._workers.run(job, len(self._shards))
            else:
                for k in range(len(self._shards)):
                    job(k)
        self._forces[ids] = 0.0
        # a rebuilt shard has a fresh buffer, a partial rebuild moves blocks: rewrite all
        # (not when the held forces are the shard's buffer: the rows above were zeroed there)
        self._pending = [not self._direct] * len(self._split)

    def _rebuild_shard(self, todo: list[np.ndarray], place: bool, k: int) -> None:
        """Rebuild shard ``k``'s local copies ``todo[k]`` (in the shard's thread)."""
        if todo[k].size:  # the same bodies (same ids) re-added, also for all copies
            self._shards[k].rebuild(todo[k], place)

    def reset_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> bool:
        """:meth:`rebuild` copies ``ids`` (distinct), :meth:`write_states`, then read them.

        With the C helper each shard does all three for its copies in one job, in its own
        thread where there are several and at least :data:`PARALLEL_REBUILD` copies: the
        rebuild, the setters and the getters of :meth:`write_states` and :meth:`read`, the
        same calls per copy (copies in different shards never touch; in one shard, each
        copy's bodies only their own until the next step), so the same bits. The writes
        and reads then leave the calling thread (Humanoid-v0 x256 on 2 threads, 12 copies
        a reset: ~40 us less of its Python and C an env step).

        Returns:
            True: their rows of ``raw`` were read (``on_read`` called). False (no helper,
            or the first build): rebuilt and written only.
        """
        native = self._native
        if native is None or ids.size == 0 or getattr(self, "_shards", None) is None:
            self.rebuild(ids, place=False)
            self.write_states(ids, poses, vels)
            return False
        self.sync()
        poses = np.ascontiguousarray(poses, dtype=np.float64)  # as the C helper reads them
        vels = np.ascontiguousarray(vels, dtype=np.float64)
        listed = ids.tolist()
        ascending = sorted(listed)  # the copies in shard order (distinct ids)
        if listed == ascending:  # an env's resets: flatnonzero's ids, ascending
            sids = ids
        else:  # ascending: each shard's copies are one run of them
            order = np.argsort(ids, kind="stable")
            sids, poses, vels = ids[order], poses[order], vels[order]
        # each shard's run of the copies (views); the C reset composes the states it
        # writes from the shard's tables (#40: ~35 us less here for 12 Humanoids; the
        # runs cut in one loop: ~2.5 us less than cuts, then bounds, then the views)
        local = self._local[sids]
        jobs, a = [], 0
        for start in self._split_starts:
            b = bisect_left(ascending, start)
            jobs.append((local[a:b], poses[a:b], vels[a:b]))
            a = b
        jobs.append((local[a:], poses[a:], vels[a:]))
        # the held forces' rows zeroed and the joint state computed in the same C call
        # (#40: ~3.5 us less here a reset of 12 Humanoids)
        joints = self.reset_joints() if self.reset_joints is not None else None
        job = partial(self._reset_shard, jobs, joints)
        if len(self._split) > 1 and ids.size >= PARALLEL_REBUILD:
            self._workers.run(job, len(self._shards))
        else:
            for k in range(len(self._shards)):
                job(k)
        self.read_within = False
        self._pending = [not self._direct] * len(self._split)  # as rebuild()
        if self.on_read is not None:
            self.on_read(ids, joints is not None)
        return True

    def _reset_shard(
        self,
        jobs: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
        joints: JointTables | None,
        k: int,
    ) -> None:
        """Shard ``k``'s part of :meth:`reset_states` (in the shard's thread)."""
        local, poses, vels = jobs[k]
        if local.size:
            self._shards[k].reset_states(local, poses, vels, self._forces, joints)

    def write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        """Set poses/velocities of the moving bodies of (just rebuilt) copies ``ids``.

        Per-body Chipmunk setters (the calls of pymunk's property setters, without their
        Python wrappers); a batch write would rewrite every copy of the shard.
        """
        self.sync()
        self.read_within = False
        mv = self._plan.moving
        native = self._native
        if native is not None:  # the same setters, in the same order, looped in C
            states = body_writes(poses, vels, mv, self._plan.origin_x[ids])
            native.write_bodies(self._body_addrs[ids], states)
            return
        ox = self._plan.origin_x.tolist()
        set_angle, set_pos = cp.body_set_angle, cp.body_set_position
        set_vel, set_w = cp.body_set_velocity, cp.body_set_angular_velocity
        p = poses[:, mv.tolist()].tolist()
        v = vels[:, mv.tolist()].tolist()
        shards, shard_of, local = self._shards, self._shard_of.tolist(), self._local.tolist()
        for c, prow, vrow in zip(ids.tolist(), p, v, strict=True):
            ptrs = shards[shard_of[c]].recipe[local[c]].body_ptrs
            o = ox[c]
            # per body, angle first: setting the angle turns a body about its centre of
            # gravity (each setter touches only its body: no contacts since the rebuild)
            for ptr, (x, y, a), (vx, vy, w) in zip(ptrs, prow, vrow, strict=True):
                set_angle(ptr, a)
                set_pos(ptr, (o + x, y))
                set_vel(ptr, (vx, vy))
                set_w(ptr, w)

    def capture_warm(self, ids: np.ndarray) -> list[np.ndarray]:
        """Never called: :attr:`warm` is None (rebases are cold)."""
        raise NotImplementedError("the packed layout's rebases are cold")

    def apply_warm(self, ids: np.ndarray, parts: list[WarmParts], dt: float) -> None:
        """Never called: :attr:`warm` is None (rebases are cold)."""
        raise NotImplementedError("the packed layout's rebases are cold")

    def set_friction(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Set the friction of the shapes of bodies ``rows`` (flat ``copy * nb + body``)."""
        self.sync()
        table = self._shape_table()
        setf = cp.shape_set_friction
        if self._one_shape:  # a shape per body: its pointer, the calls looped in C by map
            deque(map(setf, self._single[rows], values.tolist()), maxlen=0)
            return
        for r, v in zip(rows.tolist(), values.tolist(), strict=True):
            for sp in table[r]:
                setf(sp, v)

    # ------------------------------------------------------------------ per-copy parameters
    def _shape_rows(self) -> ShapeRows:
        """Every body row's shapes (made once; waits for the shard threads)."""
        table = self._shape_table()
        if self._param_shapes is None:
            self._param_shapes = ShapeRows(table, self._nb, self._param_writer)
        return self._param_shapes

    def _body_ptr(self, c: int, b: int) -> object:
        shard = self._shards[self._shard_of[c]]
        return shard.recipe[self._local[c]].body_ptrs[self._moving_index[b]]

    def set_masses(self, ids: np.ndarray, masses: np.ndarray) -> HeldMasses:
        """Give copies ``ids`` body masses ``(len(ids), n_bodies)``; the moments scale.

        Returns what the bodies now hold (``_params.HeldMasses``).
        """
        shapes = self._shape_rows()
        if self._mass_writer is None:
            self._mass_writer = MassWriter(self._plan.scene, self._layout)
        return self._mass_writer.write(ids, masses, shapes, self._body_ptr)

    def set_materials(
        self,
        ids: np.ndarray,
        friction: np.ndarray,
        reset_friction: np.ndarray,
        elasticity: np.ndarray | None,
        coefficients: np.ndarray | None,
    ) -> None:
        """Give copies ``ids`` their moving shapes' friction values (see the isolated layout's)."""
        moving = self._plan.moving
        write_materials(ids, self._moving_cols, self._shape_rows(), friction, elasticity)
        if len(self._shards) == 1:  # one shard: local indices are the copy indices
            self._shards[0].set_reset_friction(ids, reset_friction)
        else:
            shard_of = self._shard_of[ids]
            for k, shard in enumerate(self._shards):
                mine = shard_of == k
                shard.set_reset_friction(self._local[ids[mine]], reset_friction[mine])
        if coefficients is not None:  # the pre_solve callback's, per shape
            for k, c in enumerate(ids.tolist()):
                shard, cl = self._shards[self._shard_of[c]], int(self._local[c])
                for j, b in enumerate(moving.tolist()):
                    for s in shard.parts[cl][1][j]:
                        shard.materials[s] = tuple(coefficients[k, b].tolist())
        if coefficients is not None and self.friction is not None:
            self.friction.set_pairs(ids, moving, coefficients)

    def set_gravity(self, ids: np.ndarray, gravity: np.ndarray, own: np.ndarray) -> None:
        """Never called: :attr:`gravity_in_space` is False (the copies share a space)."""
        raise NotImplementedError("the packed layout's copies share their space's gravity")

    def set_velocities(self, ids: np.ndarray, velocities: np.ndarray) -> None:
        """Set the moving bodies' velocities ``(len(ids), nb, 3)`` of copies ``ids`` (a push)."""
        self.sync()
        moving = self._plan.moving
        write_velocities(
            ids, moving, self._body_ptr, velocities, self._param_writer, lambda: self._body_addrs
        )

    def _shape_table(self) -> list[tuple]:
        """Shape pointers of every body row ``copy * nb + body`` (moving bodies; cached)."""
        self.sync()
        if self._shapes_dirty:
            nb = self._nb
            table: list[tuple] = [()] * (self._n * nb)
            for shard in self._shards:
                for cl, c in enumerate(shard.copies.tolist()):
                    for b, own in zip(self._plan.moving.tolist(), shard.parts[cl][1], strict=True):
                        table[c * nb + b] = tuple(map(cp.shape_ptr, own))
            self._shapes = table
            self._shapes_dirty = False
            self._one_shape = all(len(t) == 1 for t in table if t)
            # an object array: fancy indexing picks the pointers of many rows at once
            self._single = np.fromiter(
                (t[0] if len(t) == 1 else None for t in table), dtype=object, count=len(table)
            )
        return self._shapes

    # ------------------------------------------------------------------ contacts, rays
    def _id_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.sync()
        if self._id_dirty:
            keys, vals = [], []
            nb = self._nb
            for shard in self._shards:
                for cl, bodies in enumerate(shard.bodies):
                    c = int(shard.copies[cl])
                    for b, body in enumerate(bodies):
                        if body is not None:
                            keys.append(body.id)
                            vals.append(c * nb + b)
                for b, body in shard.shared.items():
                    keys.append(body.id)
                    vals.append(-2 - b)  # shared: belongs to the copy of the other body
            k = np.array(keys, dtype=np.uint64)
            order = np.argsort(k, kind="stable")
            self._table = (k[order], np.array(vals, dtype=np.int64)[order])
            self._id_dirty = False
        return self._table[0], self._table[1], np.zeros(0)

    def arbiters(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Last step's arbiters of all copies (rows ``c*nb+b`` of A and B, counts, floats).

        See ``sum_arbiters`` for the floats; -1 marks a body of no copy.
        """
        self.sync()
        ints, fl = self._arb_buf.read([shard.ptr for shard in self._shards])
        table, vals, _ = self._id_table()
        ra = lookup(table, vals, ints[:, 0])
        rb = lookup(table, vals, ints[:, 1])
        nb = self._nb
        # a shared body (encoded -2 - b) takes the copy of the body it touches
        for mine, other in ((ra, rb), (rb, ra)):
            shared = mine <= -2
            copy = np.where(other >= 0, other // nb, -1)
            ok = shared & (copy >= 0)
            mine[ok] = copy[ok] * nb + (-2 - mine[ok])
            mine[shared & ~ok] = -1
        return ra, rb, ints[:, 2].astype(np.int64), fl

    def friction_arbiters(
        self, ids: np.ndarray, codes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last step's contacts between friction bodies and the main static material.

        Args:
            ids: Copies (the packed layout reads every copy of its spaces).
            codes: ``(n_bodies,)`` per body: 1 for a moving body whose regime is chosen,
                2 for a body of the main static material, 0 otherwise (constant).

        Returns:
            ``(rows, count, floats)`` of those arbiters: the friction body's row
            ``copy * nb + body``, the contact count and the floats of ``sum_arbiters``.
        """
        self.sync()
        # fl views the reused buffer: friction_contacts returns copies
        ints, fl = self._arb_buf.read([shard.ptr for shard in self._shards], copy=False)
        table, _, _ = self._id_table()
        if self._fric_vals is None:
            nb = self._nb
            vals = self._table[1]
            shared = vals <= -2
            b = np.where(shared, -2 - vals, vals % nb)
            code = codes[b]
            self._fric_vals = np.where(code == 1, vals, np.where(code == 2, -2, -1))
        return friction_contacts(table, self._fric_vals, ints, fl)

    def segment_first(
        self, body: int, start: np.ndarray, end: np.ndarray, ids: np.ndarray
    ) -> np.ndarray:
        """Alpha of the first hit of one ray per copy of ``ids`` (NaN: none).

        Row ``k`` of ``start``/``end`` (copy frame) belongs to copy ``ids[k]``; shapes of
        ``body``'s collision group in that copy are ignored. A ray from a hash cell's
        edge finds what the isolated layout finds (:meth:`Shard.segment_first`).
        """
        self.sync()
        out = np.full(ids.size, np.nan)
        ox = self._plan.origin_x
        for k, c in enumerate(ids.tolist()):
            out[k] = self._shards[self._shard_of[c]].segment_first(
                (float(ox[c] + start[k, 0]), float(start[k, 1])),
                (float(ox[c] + end[k, 0]), float(end[k, 1])),
                self._plan.copy_filter(c, body),
            )
        return out

    def body_at(self, env: int, x: float, y: float, tolerance: float) -> int | None:
        """Index of the moving body of copy ``env`` whose shapes are nearest (x, y)."""
        self.sync()
        bodies = self._shards[self._shard_of[env]].bodies[self._local[env]]
        moving = {b: bodies[b] for b in self._plan.moving.tolist()}
        return nearest_body(moving, float(self._plan.origin_x[env] + x), y, tolerance)

    def close(self) -> None:
        """Stop the shard threads (if any), after the steps handed to them.

        Every shard is then stepped and read in the calling thread (the World refuses
        steps once closed; its state stays readable).
        """
        if self._workers is not None:
            self._workers.close()
