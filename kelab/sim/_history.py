"""A World's history: the replay log, what rebuilds copies, snapshots and replay (internal).

A snapshot stores the physics as the replay log since each copy's last rebuild
(docs/world.md, "Snapshots"). :class:`History` keeps that log and each copy's epoch (its
last rebuild, an index into the log), rebuilds copies (resets, state writes) and rebases
copies that have run ``max_log_steps`` steps so the log stays bounded. :func:`take`
assembles a snapshot from the World's held arrays (:data:`SNAPSHOT_ARRAYS`), the log,
the sensor pipelines and the Generators. A restore validates it first
(kelab/sim/_restore.py); :meth:`History.restore` then rebuilds every copy and
re-simulates the log (:meth:`History.replay`) in the order :func:`schedule` gives
(:class:`Advance`, :class:`Start`, :class:`Write` events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from kelab.sim._contacts import Contacts
from kelab.sim._controls import Controls
from kelab.sim._params import Params
from kelab.sim._restore import Restore
from kelab.sim._states import BodyStates
from kelab.sim.physics._backend import Backend
from kelab.sim.physics._guard import native_module
from kelab.sim.physics._warm import pack, unpack
from kelab.sim.replay_log import Kind, LogEntry, ReplayLog
from kelab.sim.sensors import SensorPipeline
from kelab.sim.snapshot import Snapshot, rng_state

#: What a snapshot saves besides the replay log, the sensor pipelines and the meta (rng,
#: time, dt): snapshot array name and field of the parsed snapshot (``_restore.Restore``)
#: that restore writes back. Saved in this order (the bytes of a snapshot depend on it).
SNAPSHOT_ARRAYS = (
    ("controls/efforts", "efforts"),
    ("controls/targets", "targets"),
    ("controls/external", "external"),
    ("copies/epoch", "epoch"),
    ("imu/v_prev", "v_prev"),
    ("controls/pd_efforts", "pd_efforts"),
    ("contacts/rebase_sums", "rebase_sums"),
    ("sensors/noise_scale", "noise_scale"),
)

#: Arrays left out of a snapshot while all zero (restore reads "absent" as zeros), so a
#: World that never holds a PD torque writes the same bytes as before held updates existed.
OMITTED_WHILE_ZERO = frozenset({"controls/pd_efforts", "contacts/rebase_sums"})
#: Arrays left out while all one (restore reads "absent" as ones): the same for a World
#: whose sensor noise was never scaled.
OMITTED_WHILE_ONE = frozenset({"sensors/noise_scale"})

#: ``World.controller_updates`` values, by :attr:`Controls.pd_held`.
CONTROLLER_UPDATES = ("every_step", "held")


def take(
    fingerprint: str,
    step_count: int,
    time: Fraction,
    dt: float | None,
    held: Mapping[str, np.ndarray],
    log: ReplayLog,
    pipelines: Mapping[str, SensorPipeline],
    rngs: Sequence[np.random.Generator],
) -> Snapshot:
    """A snapshot of a World (its arrays copied; nothing of the World changes).

    Args:
        fingerprint: The scene's fingerprint.
        step_count: Physics steps taken since the World was built.
        time: Exact simulated time.
        dt: The step size in effect (None: no step yet).
        held: The World's arrays by field name of :data:`SNAPSHOT_ARRAYS`.
        log: The replay log.
        pipelines: The sensor pipelines by sensor name.
        rngs: One Generator per copy.
    """
    arrays = {
        name: held[field].copy()
        for name, field in SNAPSHOT_ARRAYS
        if (name not in OMITTED_WHILE_ZERO or held[field].any())
        and (name not in OMITTED_WHILE_ONE or (held[field] != 1.0).any())
    }
    arrays.update(log.encode())
    for name, p in pipelines.items():
        for key, value in p.get_state().items():
            arrays[f"sensor/{name}/{key}"] = value
    meta = {
        "rng": [rng_state(g) for g in rngs],
        "time": [time.numerator, time.denominator],
        "dt": dt,
        "num_envs": len(rngs),
    }
    return Snapshot(fingerprint, step_count, float(time), arrays, meta)


class Advance(NamedTuple):
    """One physics step of ``dt`` for the copies ``ids`` whose log has started."""

    ids: np.ndarray
    dt: float


class Start(NamedTuple):
    """A logged rebuild: copies ``start`` begin their replay here (fresh).

    ``ids`` are all the copies the entry rebuilt; each loses its held controls.
    """

    start: np.ndarray
    ids: np.ndarray


class Write(NamedTuple):
    """A logged write of ``kind`` for copies ``ids`` of an entry; ``sel`` picks their rows.

    ``ids`` are the entry's copies whose log has started, ``sel`` the mask of them among
    the entry's copies (rows of ``a`` and ``b``).
    """

    kind: Kind
    ids: np.ndarray
    sel: np.ndarray
    a: np.ndarray | None
    b: np.ndarray | None


def schedule(
    log: Sequence[LogEntry], epoch: np.ndarray, end_step: int
) -> Iterator[Advance | Start | Write]:
    """The events that re-simulate ``log`` up to ``end_step``, in order.

    A copy starts at its last rebuild (``epoch``: an index into ``log`` per copy) and steps
    from there on; the dt in effect comes from the log's dt entries. A per-copy parameter
    (:attr:`Kind.parameter`) is written for all its copies, started or not: it outlives
    their rebuilds.
    """
    active = np.zeros(epoch.size, dtype=bool)
    dt = None
    step = log[0][0] if log else end_step
    for index, (at, kind, ids, a, b) in enumerate(log):
        while step < at:
            yield from _advance(active, dt)
            step += 1
        if kind == Kind.DT:
            assert a is not None
            dt = float(a[0])
            continue
        if kind == Kind.BUILD:
            start = ids[epoch[ids] == index]
            yield Start(start, ids)
            active[start] = True
            continue
        sel = np.ones(ids.size, dtype=bool) if kind.parameter else active[ids]
        yield Write(kind, ids[sel], sel, a, b)
    while step < end_step:
        yield from _advance(active, dt)
        step += 1


def _advance(active: np.ndarray, dt: float | None) -> Iterator[Advance]:
    ids = np.flatnonzero(active)
    if ids.size and dt is not None:
        yield Advance(ids, dt)


class History:
    """The replay log of a World's copies and everything that rebuilds a copy.

    A rebuild makes copies fresh in the backend (no contact or joint history) and is
    logged: a copy's log starts at its last one (its epoch), entries older than every
    copy's epoch are dropped.

    Args:
        max_log: Steps a copy runs before it is rebased (``World(max_log_steps=...)``).
        backend: The World's layout.
        states: The World's body-state cache.
        controls: The World's held controls (a rebuild clears them).
        contacts: The World's contact bookkeeping (a rebuild forgets it).
        params: The World's per-copy parameters (a rebuild keeps them; a replay starts
            from the scene's and writes the logged ones).
    """

    def __init__(
        self,
        max_log: int,
        backend: Backend,
        states: BodyStates,
        controls: Controls,
        contacts: Contacts,
        params: Params,
    ) -> None:
        self.backend = backend
        self.states = states
        self.controls = controls
        self.contacts = contacts
        self.params = params
        self.every = every = states.every
        n = every.size
        self.log = ReplayLog()  # docs/world.md, "Snapshots"
        #: Each copy's last rebuild, an index into :attr:`log`.
        self.epoch = np.zeros(n, dtype=np.int64)
        self.log.append(0, Kind.BUILD, every.copy())
        # rebasing: the step of each copy's last rebuild, and when the oldest reaches the bound
        self.max_log = max_log
        self.epoch_step = np.zeros(n, dtype=np.int64)
        #: The step count at which the oldest copy is rebased.
        self.rebase_at = max_log
        #: Copies stepped since their last rebuild (a replay rebuilds those again).
        self.touched = np.zeros(n, dtype=bool)
        # the C helper's reset_rows: a rebuild's rows of the World's arrays in one call
        self._native = native_module()

    def held(self) -> dict[str, np.ndarray]:
        """The arrays of :data:`SNAPSHOT_ARRAYS` the history and its parts hold, by field."""
        c = self.controls
        return {
            "efforts": c.efforts,
            "targets": c.targets,
            "external": c.external,
            "epoch": self.epoch,
            "pd_efforts": c.pd_efforts,
            "rebase_sums": self.contacts.rebase_sums,
        }

    def rebuild(self, ids: np.ndarray, step: int, place: bool = True) -> None:
        """Rebuild copies ``ids`` fresh at step ``step`` and start their logs there.

        ``place``: at their initial poses (False: a state write follows).
        """
        self.backend.rebuild(ids, place)
        self._rebuilt(ids, step)

    def _rebuilt(self, ids: np.ndarray, step: int) -> None:
        """The World's side of :meth:`rebuild`, after the backend's: logged, forgotten."""
        index = len(self.log)  # of the BUILD entry, appended once the rows are written
        native, c, controls = self._native, self.contacts, self.controls
        first = None
        if native is not None and ids.size and ids.dtype == np.int64 and ids.flags.c_contiguous:
            # forget()'s rows, the normals and the epochs in one C call, the same values
            # (Humanoid-v0 x256, 2 threads, 12 copies a reset: ~12 us less an env step)
            zeros = (self.touched, self.states.valid, *controls.rows(), c.normals)
            first, oldest = native.reset_rows(
                ids, zeros, (c.stick,), self.epoch, index, self.epoch_step, step
            )
            c.rebuilt(ids, stuck=True)
            controls.clear(ids, zeroed=True)
            self.rebase_at = oldest + self.max_log
        else:
            self.forget(ids, ids)
            c.normals[ids] = 0.0
            self.epoch[ids] = index
            if ids.size:
                self.epoch_step[ids] = step
                self.rebase_at = int(self.epoch_step.min()) + self.max_log
        self.log.append(step, Kind.BUILD, ids.copy())
        c.sums = None
        self.log.prune(self.epoch, first)  # nothing to drop while a copy has not been rebuilt

    def forget(self, rebuilt: np.ndarray, zeroed: np.ndarray) -> None:
        """The World's side of a rebuild (live resets and replays alike).

        Copies ``rebuilt`` were just rebuilt by the backend: their friction regimes stick
        again (the rebuilt shapes carry their sticking values), they have not stepped, no
        arbiters are cached and their state must be read. Copies ``zeroed`` lose their held
        controls (efforts, targets, external forces), as a reset's do.
        """
        self.contacts.rebuilt(rebuilt)
        self.touched[rebuilt] = False
        self.states.valid[rebuilt] = False
        self.controls.clear(zeroed)

    def set_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray, step: int) -> bool:
        """Rebuild copies ``ids`` and write their checked body states (logged).

        ``poses`` and ``vels`` are the log's from then on (new arrays nobody changes).
        Returns whether their states were read back after the write (else they are stale).
        """
        read = self.backend.reset_states(ids, poses, vels)  # rebuilt, written (and read)
        self._rebuilt(ids, step)
        self.states.valid[ids] = read
        self.log.append(step, Kind.STATES, ids.copy(), poses, vels)
        return read

    def _write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        self.backend.write_states(ids, poses, vels)
        self.states.valid[ids] = False

    def set_velocities(self, ids: np.ndarray, vels: np.ndarray) -> None:
        """Write checked body velocities of copies ``ids`` without a rebuild (a push)."""
        self.backend.set_velocities(ids, vels)
        self.states.valid[ids] = False

    def set_max_log(self, max_log: int, step: int) -> None:
        """Change the bound (``World.max_log_steps``); copies past it are rebased now."""
        self.max_log = max_log
        self.rebase(step)

    def rebase(self, step: int) -> None:
        """Rebase the copies that have run ``max_log`` steps since their last rebuild.

        Each is rebuilt at its own present state, as ``World.set_body_states`` would,
        but its held controls carry over, its sensors and IMU history are left alone and,
        where the layout can (``backend.warm``), so do its warm starts, friction regimes
        and normal sums (kelab/sim/physics/_warm.py: the motion goes on as if nothing
        happened; a cold rebase drops them, as a reset does). Logged as a rebuild, a
        state write, the warm starts and the controls, so a replay from there reproduces
        it bit for bit, and the rebuild ends the copy's log (entries older than every
        copy's last rebuild are dropped).

        Raises:
            FloatingPointError: If a copy to rebase holds a state that is not finite.
        """
        ids = np.flatnonzero(step - self.epoch_step >= self.max_log)
        if ids.size == 0:
            self.rebase_at = int(self.epoch_step.min()) + self.max_log
            return
        contacts = self.contacts.forces()  # the step's contacts stay readable after
        stale = ids[~self.states.valid[ids]]
        if stale.size:
            self.states.read_quiet(stale)  # a read of the World's own (never changes physics)
        self.states.check_finite(step, ids)
        raw = self.states.raw[ids]
        poses, vels = raw[:, :, 0:3].copy(), raw[:, :, 3:6].copy()
        held = self.controls.held(ids)
        warm = self._warm_payload(ids)
        self.set_states(ids, poses, vels, step)
        if warm is not None:
            self._carry_warm(ids, warm, np.ones(ids.size, dtype=bool))
            self.log.append(step, Kind.WARM, ids.copy(), warm, None)
        for kind, values in held:
            if values.any():  # a rebuild zeroes them: only non-zero ones are logged
                self.controls.hold(kind, ids, values)
                self.log.append(step, kind, ids.copy(), values, None)
        self.controls.external_any = bool(self.controls.external.any())
        self.controls.dirty = True
        self.contacts.keep_sums(contacts)  # a snapshot now holds them too

    def _warm_payload(self, ids: np.ndarray) -> np.ndarray | None:
        """What a rebase of copies ``ids`` carries over (a :attr:`Kind.WARM` entry's values).

        None where the layout cannot carry warm starts or no step was taken yet.
        """
        dt = self.contacts.last_dt
        if self.backend.warm is None or dt is None:
            return None
        c = self.contacts
        extras = np.concatenate([c.stick[ids].astype(np.float64), c.normals[ids]], axis=1)
        return pack(dt, extras, self.backend.capture_warm(ids))

    def _carry_warm(self, live: np.ndarray, payload: np.ndarray, sel: np.ndarray) -> None:
        """Give copies ``live``, just rebuilt at their states, a WARM entry's warm starts.

        With their friction regimes and normal sums, from the entry's ``payload``; they
        are its copies ``sel`` picks.
        """
        backend, nb = self.backend, self.contacts.nb
        assert backend.warm is not None
        dt, extras, parts = unpack(payload, sel.size, 2 * nb, backend.warm)
        backend.apply_warm(live, [p for p, s in zip(parts, sel, strict=True) if s], dt)
        self.contacts.carried(live, extras[sel, :nb] > 0.5, extras[sel, nb:])
        self.states.valid[live] = False

    def set_controller_updates(self, mode: object, step: int) -> bool:
        """Switch how PD torques are updated (``World.controller_updates``); logged.

        Returns:
            Whether the World just switched to ``"held"`` (it then takes an update).

        Raises:
            ValueError: If ``mode`` is not one of :data:`CONTROLLER_UPDATES`.
        """
        if not isinstance(mode, str) or mode not in CONTROLLER_UPDATES:
            raise ValueError(
                f"World.controller_updates must be one of {CONTROLLER_UPDATES}, got {mode!r}; "
                "'every_step' recomputes PD torques in every physics step, 'held' holds "
                "them between World.update_controllers() calls"
            )
        held = mode == "held"
        if held == self.controls.pd_held:
            return False
        self.controls.pd_held = held
        self.controls.dirty = True
        self.log.append(step, Kind.PD_MODE, self.every[:0], np.array([float(held)]), None)
        return held

    def update_controllers(self, ids: np.ndarray, rows: np.ndarray, step: int) -> None:
        """Hold the PD torques of copies ``ids`` computed from their states ``rows``; logged.

        The torques are logged as values (like efforts), so a replay holds exactly them at
        this step whatever it reads.

        Raises:
            ValueError: In ``"every_step"`` updates (there is nothing to hold).
        """
        if not self.controls.pd_held:
            raise ValueError(
                "World.update_controllers: controller_updates is 'every_step' (PD torques "
                "are recomputed in every physics step); set world.controller_updates = "
                "'held' first"
            )
        values = self.controls.pd_torques(ids, rows)
        self.controls.hold(Kind.PD_EFFORTS, ids, values)
        self.log.append(step, Kind.PD_EFFORTS, ids.copy(), values, None)

    def replay(
        self,
        log: Sequence[LogEntry],
        epoch: np.ndarray,
        end_step: int,
        advance: Callable[[float, np.ndarray], None],
    ) -> None:
        """Rebuild every copy and re-simulate its logged history up to ``end_step``.

        A copy starts at its last rebuild (``epoch``). The packed layout steps the copies
        that have not started yet too (they share a space); each is rebuilt fresh at its
        start, which makes it exactly the copy the live World rebuilt there. ``advance``
        takes one replayed physics step of ``dt`` for copies ``ids``. The log itself is
        left to :meth:`restore`.
        """
        every, controls = self.every, self.controls
        self.params.reset(every)  # the scene's values, before the rebuild places the bodies
        self.backend.rebuild(every)
        self.forget(every, every)
        self.contacts.normals[:] = 0.0
        self.contacts.last_dt = None
        controls.pd_held = False  # the default until the log's PD mode entry says otherwise
        for event in schedule(log, epoch, end_step):
            if isinstance(event, Advance):
                advance(event.dt, event.ids)
            elif isinstance(event, Write) and event.kind == Kind.PD_MODE:
                assert event.a is not None
                controls.pd_held = bool(event.a[0])
                controls.dirty = True
            elif isinstance(event, Start):
                again = event.start[self.touched[event.start]]
                if again.size:
                    self.backend.rebuild(again)
                self.forget(again, event.ids)
            else:
                kind, live, sel, a, b = event
                assert a is not None
                if kind.parameter:
                    self.params.set(kind, live, a)
                    # a rebuild after it places the bodies with these values: a copy
                    # starting later is rebuilt again at its start, as the live one was
                    self.touched[live] = True
                elif kind == Kind.VELOCITIES:
                    if live.size:
                        self.set_velocities(live, a[sel])
                elif kind == Kind.STATES:
                    if live.size:
                        assert b is not None
                        self._write_states(live, a[sel], b[sel])
                elif kind == Kind.WARM:
                    if live.size:
                        self._carry_warm(live, a, sel)
                else:
                    controls.hold(kind, live, a[sel])
                controls.dirty = True
        controls.dirty = True

    def restore(
        self,
        plan: Restore,
        held: Mapping[str, np.ndarray],
        advance: Callable[[float, np.ndarray], None],
    ) -> None:
        """Re-simulate a validated snapshot and take its log and held arrays.

        Args:
            plan: The parsed snapshot (``_restore.check_snapshot``).
            held: The World's arrays by field name of :data:`SNAPSHOT_ARRAYS` (written
                in place; :attr:`epoch` is one of them).
            advance: As in :meth:`replay`.
        """
        self.replay(plan.log, plan.epoch, plan.step_count, advance)
        self.log = ReplayLog(plan.log)
        self.epoch_step = plan.epoch_step.astype(np.int64)
        self.rebase_at = int(self.epoch_step.min()) + self.max_log
        for _, field in SNAPSHOT_ARRAYS:
            held[field][...] = getattr(plan, field)
        self.contacts.sums = None  # read again from the replayed spaces, or:
        if plan.rebase_sums.any():  # taken right after a rebase: that step's contact sums
            self.contacts.keep_sums(plan.rebase_sums.copy())
        self.controls.external_any = bool(self.controls.external.any())
