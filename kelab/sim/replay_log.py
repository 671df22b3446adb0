"""The World's replay log: every command, state write and dt change since the copies' resets.

A snapshot stores the physics as this log; restoring rebuilds the spaces and replays it
(docs/world.md, "Snapshots"). Entries are :class:`LogEntry` (step, :class:`Kind`, copy
ids, up to two value arrays); :meth:`ReplayLog.encode` flattens them into the six
``log/*`` arrays of a snapshot, and ``kelab.sim._restore`` parses and validates them
back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from typing import NamedTuple, overload

import numpy as np


class Kind(IntEnum):
    """What a log entry records (the integer is what snapshots store)."""

    BUILD = 0
    """Copies rebuilt fresh (a reset): their log starts here. No values."""
    EFFORTS = 1
    """Held efforts of the copies, ``a``: ``(copies, n_joints)`` (after clipping)."""
    TARGETS = 2
    """Held PD targets, ``a``: ``(copies, n_joints)``."""
    STATES = 3
    """Body states written, ``a``: poses, ``b``: velocities, each ``(copies, n_bodies, 3)``."""
    DT = 4
    """A new dt in effect from this step, ``a``: ``[dt]``; no copies."""
    FORCES = 5
    """Held external forces, ``a``: ``(copies, n_bodies, 3)`` (fx, fy, torque)."""
    PD_EFFORTS = 6
    """PD torques the controllers hold (``World.update_controllers``), ``a``:
    ``(copies, n_joints)`` (after clipping; used in ``"held"`` controller updates)."""
    PD_MODE = 7
    """How PD torques are updated from this step, ``a``: ``[0.0]`` every physics step,
    ``[1.0]`` held between updates (``World.controller_updates``); no copies."""
    WARM = 8
    """Warm starts a rebase carried over (it follows the rebase's BUILD and STATES
    entries), ``a``: the last dt, then per copy whether each body sticks (1.0) or slides,
    each body's normal force sum and its warm-start vector (kelab/sim/physics/_warm.py)."""
    MASSES = 9
    """Body masses of the copies (``World.set_body_masses``), ``a``: ``(copies, n_bodies)``
    kg (0 for static and kinematic bodies)."""
    MATERIALS = 10
    """Body materials of the copies (``World.set_body_friction`` / ``set_body_restitution``),
    ``a``: ``(copies, n_bodies, 4)``: static, dynamic and rolling friction, restitution."""
    GRAVITY = 11
    """Gravity of the copies (``World.set_gravity``), ``a``: ``(copies, 2)`` m/s²."""
    STRENGTH = 12
    """Actuator strength of the copies (``World.set_actuator_strength``), ``a``:
    ``(copies, n_joints)`` (1 for joints without an actuator)."""
    VELOCITIES = 13
    """Body velocities written without a rebuild (``World.set_body_velocities``: a push),
    ``a``: ``(copies, n_bodies, 3)`` vx, vy, omega (static bodies' rows 0)."""

    @property
    def setting(self) -> bool:
        """A World-wide setting in effect until the next entry of its kind (dt, PD mode)."""
        return self in (Kind.DT, Kind.PD_MODE)

    @property
    def parameter(self) -> bool:
        """A per-copy physical parameter: in effect until set again, across rebuilds."""
        return self in PARAMETERS


#: The per-copy parameter kinds (:attr:`Kind.parameter`), in the order a pruned log
#: keeps their entries at its head.
PARAMETERS = (Kind.MASSES, Kind.MATERIALS, Kind.GRAVITY, Kind.STRENGTH)


class LogEntry(NamedTuple):
    """One entry: at physics step ``step``, ``kind`` for copies ``ids`` with values a, b."""

    step: int
    kind: Kind
    ids: np.ndarray
    a: np.ndarray | None = None
    b: np.ndarray | None = None


#: Names of the snapshot arrays :meth:`ReplayLog.encode` writes, in order.
ARRAYS = ("log/step", "log/kind", "log/ids", "log/id_off", "log/vals", "log/val_off")


class ReplayLog:
    """An append-only list of :class:`LogEntry`, pruned from the front.

    Args:
        entries: Initial entries (a parsed snapshot's), in step order.
    """

    __slots__ = ("_kept", "entries")

    def __init__(self, entries: Iterable[LogEntry] = ()) -> None:
        self.entries: list[LogEntry] = list(entries)
        # entries[:_kept] are known to stay whole through a prune (each of its own kind:
        # the settings and folded parameters at the head), so a prune up to there drops
        # nothing (only prune rewrites entries; append adds at the end)
        self._kept = 0

    def append(
        self,
        step: int,
        kind: Kind,
        ids: np.ndarray,
        a: np.ndarray | None = None,
        b: np.ndarray | None = None,
    ) -> None:
        """Record an entry (the arrays are kept as given: pass copies the caller won't change)."""
        self.entries.append(LogEntry(step, kind, ids, a, b))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(self.entries)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: slice) -> list[LogEntry]: ...

    def __getitem__(self, index: int | slice) -> LogEntry | list[LogEntry]:
        return self.entries[index]

    def prune(self, epoch: np.ndarray, first: int | None = None) -> None:
        """Drop entries older than every copy's last rebuild; what is in effect stays.

        ``epoch`` (each copy's last rebuild, an index into this log) is shifted in place;
        ``first``: its minimum where the caller has it (else computed).
        The dt and the PD mode in effect (:attr:`Kind.setting`) move up to the first kept
        entry (a replay starts there), and so do the per-copy parameters
        (:attr:`Kind.parameter`): the dropped entries of each kind fold into one entry
        holding, for every copy they set, its last value.
        """
        if first is None:
            first = int(epoch.min())
        if first <= self._kept:  # nothing to drop (a step's resets, mostly: ~40 us saved)
            return
        dropped = self.entries[:first]
        # the kinds scanned only where the head can be all kept kinds (more entries cannot
        # each be of its own kind): with _replace-free shifts below, ~4 -> ~2.5 us a prune
        if first <= len(_KEPT):
            kinds = [e.kind for e in dropped]
            if len(set(kinds)) == first and _KEPT.issuperset(kinds):
                return  # the head is what is in effect already: nothing to drop
        last: dict[Kind, LogEntry] = {}
        params: dict[Kind, list[LogEntry]] = {}
        for e in dropped:  # one pass: the settings' last entries, each parameter's entries
            if e.kind in _SETTINGS:
                last[e.kind] = e
            elif e.kind in _PARAMETER_SET and e.a is not None:
                params.setdefault(e.kind, []).append(e)
        kept = [last[k] for k in _SETTING_ORDER if k in last]  # DT first, as before
        kept += [_folded(params[k], dropped[0].step) for k in PARAMETERS if k in params]
        shift = first - len(kept)
        if shift <= 0:
            self._kept = first
            return
        step = self.entries[first].step  # (LogEntry(...): ~2 us cheaper than _replace)
        head = [LogEntry(step, e.kind, e.ids, e.a, e.b) for e in kept]
        self.entries = head + self.entries[first:]
        self._kept = len(head)
        epoch -= shift

    def encode(self) -> dict[str, np.ndarray]:
        """The log as the snapshot arrays :data:`ARRAYS`.

        ``log/step`` and ``log/kind`` per entry; each entry's copy ids concatenated in
        ``log/ids`` (entry ``e`` owns ``ids[id_off[e]:id_off[e + 1]]``) and its values
        ``a`` then ``b``, flattened, in ``log/vals`` (by ``log/val_off``).
        """
        steps, kinds, id_off, val_off = [], [], [0], [0]
        ids_all, vals_all = [], []
        for step, kind, ids, a, b in self.entries:
            steps.append(step)
            kinds.append(int(kind))
            ids_all.append(ids.astype(np.int64))
            id_off.append(id_off[-1] + ids.size)
            parts = [x.reshape(-1) for x in (a, b) if x is not None]
            flat = np.concatenate(parts) if parts else np.zeros(0)
            vals_all.append(flat)
            val_off.append(val_off[-1] + flat.size)
        return {
            "log/step": np.array(steps, dtype=np.int64),
            "log/kind": np.array(kinds, dtype=np.int64),
            "log/ids": np.concatenate(ids_all) if ids_all else np.zeros(0, np.int64),
            "log/id_off": np.array(id_off, dtype=np.int64),
            "log/vals": np.concatenate(vals_all) if vals_all else np.zeros(0),
            "log/val_off": np.array(val_off, dtype=np.int64),
        }


#: The kinds a pruned log keeps at its head (settings and parameters in effect).
_SETTINGS = frozenset(k for k in Kind if k.setting)
#: The settings in the order a pruned log keeps them at its head (by kind: DT first).
_SETTING_ORDER = tuple(sorted(_SETTINGS))
_PARAMETER_SET = frozenset(PARAMETERS)
_KEPT = _SETTINGS | _PARAMETER_SET


def _folded(parts: Sequence[LogEntry], step: int) -> LogEntry:
    """The entries ``parts`` (of one parameter kind, in log order) as one entry at ``step``.

    Its ids are every copy they set, ascending; its rows each copy's last value. One
    entry (a fold already) is kept as it is.
    """
    if len(parts) == 1:
        return parts[0]
    every = np.concatenate([e.ids for e in parts])
    n = int(every.max()) + 1  # copy indices: >= 0 (checked where they came from)
    table = np.empty((n, *parts[0].a.shape[1:]))
    for e in parts:  # in log order: the last value of each copy wins
        table[e.ids] = e.a
    seen = np.zeros(n, dtype=bool)
    seen[every] = True
    ids = np.flatnonzero(seen)
    return LogEntry(step, parts[0].kind, ids, table[ids])
