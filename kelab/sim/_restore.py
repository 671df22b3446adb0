"""Validation of a World snapshot before anything is restored (internal).

:func:`check_snapshot` reads a :class:`~kelab.sim.snapshot.Snapshot` against what the
restoring World expects and returns everything ``World.restore`` applies, parsed, or
raises ``ValueError`` naming the first thing wrong. It changes nothing, so a refused
snapshot leaves the World exactly as it was (docs/snapshots.md, "Restoring").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from kelab._validate import check_int, check_number_or_none
from kelab.sim._params import NOISE_SCALE_MAX, ParamRules
from kelab.sim._values import body_states_error, forces_error
from kelab.sim.physics._limits import DT_MAX, STATE_SPEED_MAX
from kelab.sim.physics._warm import WarmFormat, unpack
from kelab.sim.replay_log import Kind, LogEntry
from kelab.sim.sensors import SensorPipeline
from kelab.sim.snapshot import Snapshot, set_rng_state

# replay log event kinds (the World's)
BUILD, EFFORTS, TARGETS, STATES, DT, FORCES, PD_EFFORTS, PD_MODE, WARM = list(Kind)[:9]
LAST_KIND = max(Kind)
KIND_NAMES = tuple(k.name.lower() for k in Kind)

_FIX = "take snapshots with World.snapshot() and restore them unchanged"


@dataclass(frozen=True)
class WorldSpec:
    """What a snapshot must match to be restored into a World."""

    num_envs: int
    """Copies."""
    n_bodies: int
    """Bodies per copy."""
    n_joints: int
    """Joints per copy."""
    effort_bound: np.ndarray
    """``(n_joints,)`` largest held effort magnitude (0 for joints without an actuator)."""
    dynamic: np.ndarray
    """``(n_bodies,)`` bool: moving bodies (static ones never hold a force)."""
    max_log_steps: int
    """Steps a replay may re-simulate (the World's ``max_log_steps``)."""
    rng_types: tuple[type, ...]
    """Bit generator type of each copy's Generator."""
    pipelines: Callable[[float], dict[str, SensorPipeline]]
    """Sensor pipelines for a dt (the World's own, or new ones), by sensor name."""
    warm: WarmFormat | None = None
    """How the layout's copies carry warm starts over a rebase (None: rebases are cold)."""
    params: ParamRules | None = None
    """What per-copy parameters the World takes (None: a snapshot may hold none)."""


@dataclass(frozen=True)
class Restore:
    """A validated snapshot, parsed for ``World.restore``."""

    log: list[LogEntry]
    epoch: np.ndarray
    epoch_step: np.ndarray
    efforts: np.ndarray
    targets: np.ndarray
    external: np.ndarray
    v_prev: np.ndarray
    pd_efforts: np.ndarray
    rebase_sums: np.ndarray
    noise_scale: np.ndarray
    step_count: int
    time: Fraction
    dt: float | None
    pipelines: dict[str, SensorPipeline]
    sensor_states: dict[str, dict[str, np.ndarray]]
    rng_states: list[Mapping[str, Any]]


def _fail(what: str) -> ValueError:
    return ValueError(f"World.restore: {what}; {_FIX}")


def _array(
    arrays: Mapping[str, np.ndarray], name: str, dtype: type, shape: tuple[int | None, ...]
) -> np.ndarray:
    """The array ``name``, checked for dtype and shape (None: any length on that axis)."""
    if name not in arrays:
        raise _fail(f"snapshot array {name!r} is missing")
    value = arrays[name]
    if not isinstance(value, np.ndarray) or value.dtype != np.dtype(dtype):
        got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise _fail(f"snapshot array {name!r} must have dtype {np.dtype(dtype)}, got {got}")
    if value.ndim != len(shape) or any(
        w is not None and w != g for w, g in zip(shape, value.shape, strict=True)
    ):
        want = tuple("k" if w is None else w for w in shape)
        raise _fail(f"snapshot array {name!r} must have shape {want}, got {value.shape}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise _fail(f"snapshot array {name!r} must hold finite values, got NaN or inf")
    return value


def _offsets(value: np.ndarray, name: str, entries: int, total: int) -> np.ndarray:
    if value.shape != (entries + 1,):
        raise _fail(f"snapshot array {name!r} must have shape ({entries + 1},), got {value.shape}")
    if value[0] != 0 or value[-1] != total or (np.diff(value) < 0).any():
        raise _fail(
            f"snapshot array {name!r} must rise from 0 to {total} (offsets into the log), got "
            f"first {value[0]}, last {value[-1]}"
        )
    return value


def _efforts_ok(values: np.ndarray, bound: np.ndarray, where: str) -> None:
    """Held efforts are clipped to each actuator's limit (0 without an actuator)."""
    over = np.abs(values) > bound
    if over.any():
        row, col = (int(v[0]) for v in np.nonzero(over))
        raise _fail(
            f"{where}: efforts must lie within each joint's limit (a World clips them), got "
            f"{values[row, col]!r} for joint {col} (limit {bound[col]!r})"
        )


def _forces_ok(values: np.ndarray, dynamic: np.ndarray, where: str) -> None:
    problem = forces_error(values)
    if problem is not None:
        raise _fail(f"{where}: external forces and torques {problem}")
    if values[:, ~dynamic].any():
        raise _fail(f"{where}: static bodies hold no external force (a World zeroes them)")


#: Largest accumulated impulse a warm start may hold, N s (as a force bound: FORCE_MAX N
#: over DT_MAX s would be 1e9; a real one is orders of magnitude smaller).
IMPULSE_MAX = 1e9


def _warm_ok(
    vals: np.ndarray, ids: np.ndarray, spec: WorldSpec, built: list[int], at: int, where: str
) -> None:
    """Check a WARM entry: right after its copies' rebuild, with a valid payload."""
    if spec.warm is None:
        raise _fail(f"{where}: this World's layout carries no warm starts over a rebase")
    if not ids.size or any(step != at for step in built):
        raise _fail(f"{where}: must follow a rebuild of its copies at the same step")
    nb = spec.n_bodies
    try:
        dt, extras, copies = unpack(vals, ids.size, 2 * nb, spec.warm)
    except ValueError as exc:
        raise _fail(f"{where}: {exc}") from None
    if not 0 < dt <= DT_MAX:
        raise _fail(f"{where}: dt must be in (0, {DT_MAX:g}] s, got {dt!r}")
    stick, normals = extras[:, :nb], extras[:, nb:]
    if not np.isin(stick, (0.0, 1.0)).all():
        raise _fail(f"{where}: friction regimes must be 0.0 (sliding) or 1.0 (sticking)")
    if not (np.isfinite(normals).all() and (normals >= 0).all()):
        raise _fail(f"{where}: normal force sums must be finite and >= 0")
    for c, parts in zip(ids.tolist(), copies, strict=True):
        if (np.abs(parts.bias) > STATE_SPEED_MAX).any():
            raise _fail(f"{where}: copy {c}: bias velocities must be within {STATE_SPEED_MAX:g}")
        big = max(
            np.abs(parts.impulses).max(initial=0.0), np.abs(parts.contacts[:, 4:]).max(initial=0.0)
        )
        if big > IMPULSE_MAX:
            raise _fail(
                f"{where}: copy {c}: impulses must be within {IMPULSE_MAX:g} N s, got {big:g}"
            )


def _parameter(
    vals: np.ndarray, copies: int, kind: Kind, spec: WorldSpec, where: str
) -> np.ndarray:
    """A per-copy parameter's (or a velocity write's) rows, checked as the setters check."""
    if spec.params is None:
        raise _fail(f"{where}: this World takes no per-copy parameters")
    a = vals.reshape(
        copies,
        *{
            Kind.MASSES: (spec.n_bodies,),
            Kind.MATERIALS: (spec.n_bodies, 4),
            Kind.GRAVITY: (2,),
            Kind.STRENGTH: (spec.n_joints,),
            Kind.VELOCITIES: (spec.n_bodies, 3),
        }[kind],
    ).copy()
    problem = spec.params.error(kind, a)
    if problem is None and kind == Kind.VELOCITIES and a[:, ~spec.dynamic].any():
        problem = "static bodies have no velocity (a World writes 0 for them)"
    if problem is not None:
        raise _fail(f"{where}: {problem}")
    return a


def _meta_int(value: Any, name: str) -> int:
    return check_int(value, f"World.restore: snapshot meta {name!r}", fix=_FIX)


def check_snapshot(snap: Snapshot, spec: WorldSpec) -> Restore:
    """Validate ``snap`` for a World described by ``spec``; change nothing.

    Checks, in this order: the copy count; the arrays present (no unknown ones), their
    dtypes, shapes and finiteness; the replay log (offsets, kinds, per-kind sizes, ids in
    range and unique, steps non-decreasing and at most ``step_count``, dt entries > 0,
    efforts within their limits, static bodies without forces); that each copy's epoch is
    its last rebuild in the log; the replay length (at most ``max_log_steps`` steps);
    exact time (integers, a positive denominator, consistent with ``step_count``, the dt
    and ``sim_time``); the sensor states for that dt; every Generator state.

    Returns:
        The parsed snapshot.

    Raises:
        ValueError: Naming the first thing wrong.
    """
    if not isinstance(snap, Snapshot):
        raise ValueError(f"World.restore: expected a ke.Snapshot, got {type(snap).__name__}")
    n, nb, nj = spec.num_envs, spec.n_bodies, spec.n_joints
    meta, ar = snap.meta, snap.arrays
    got_n = meta.get("num_envs")
    if isinstance(got_n, bool) or got_n != n:
        raise ValueError(f"World.restore: snapshot has {got_n!r} copies, this World {n}")
    # ---------------------------------------------------------------- arrays
    efforts = _array(ar, "controls/efforts", np.float64, (n, nj))
    _efforts_ok(efforts, spec.effort_bound, "controls/efforts")
    targets = _array(ar, "controls/targets", np.float64, (n, nj))
    if "controls/external" in ar:
        external = _array(ar, "controls/external", np.float64, (n, nb, 3))
        _forces_ok(external, spec.dynamic, "controls/external")
    else:  # snapshots from before external forces
        external = np.zeros((n, nb, 3))
    if "controls/pd_efforts" in ar:
        pd_efforts = _array(ar, "controls/pd_efforts", np.float64, (n, nj))
        _efforts_ok(pd_efforts, spec.effort_bound, "controls/pd_efforts")
    else:  # all zero (omitted: _history.OMITTED_WHILE_ZERO), or from before held updates
        pd_efforts = np.zeros((n, nj))
    rebase_sums = np.zeros((n, nb, 2))  # all zero: omitted (_history.OMITTED_WHILE_ZERO)
    if "contacts/rebase_sums" in ar:  # taken right after a rebase: that step's contact sums
        rebase_sums = _array(ar, "contacts/rebase_sums", np.float64, (n, nb, 2))
    noise_scale = np.ones(n)  # all one: omitted (_history.OMITTED_WHILE_ONE)
    if "sensors/noise_scale" in ar:
        noise_scale = _array(ar, "sensors/noise_scale", np.float64, (n,))
        if ((noise_scale < 0) | (noise_scale > NOISE_SCALE_MAX)).any():
            raise _fail(f"'sensors/noise_scale' must be in [0, {NOISE_SCALE_MAX:g}] per copy")
    epoch = _array(ar, "copies/epoch", np.int64, (n,))
    v_prev = _array(ar, "imu/v_prev", np.float64, (n, nb, 2))
    if (np.abs(v_prev) > STATE_SPEED_MAX).any():  # body velocities never leave that bound
        raise _fail(f"'imu/v_prev' must be within +-{STATE_SPEED_MAX:g} m/s (body velocities)")
    steps = _array(ar, "log/step", np.int64, (None,))
    kinds = _array(ar, "log/kind", np.int64, (None,))
    ids_all = _array(ar, "log/ids", np.int64, (None,))
    vals_all = _array(ar, "log/vals", np.float64, (None,))
    entries = steps.size
    if entries == 0:
        raise _fail("the replay log is empty (every copy's last rebuild is logged)")
    if kinds.size != entries:
        raise _fail(f"'log/kind' must have {entries} entries like 'log/step', got {kinds.size}")
    id_off = _offsets(
        _array(ar, "log/id_off", np.int64, (None,)), "log/id_off", entries, ids_all.size
    )
    val_off = _offsets(
        _array(ar, "log/val_off", np.int64, (None,)), "log/val_off", entries, vals_all.size
    )
    known = {
        "controls/efforts",
        "controls/targets",
        "controls/external",
        "controls/pd_efforts",
        "contacts/rebase_sums",
        "sensors/noise_scale",
        "copies/epoch",
        "imu/v_prev",
        "log/step",
        "log/kind",
        "log/ids",
        "log/id_off",
        "log/vals",
        "log/val_off",
    }
    # ---------------------------------------------------------------- time
    step_count = snap.step_count
    time_meta = meta.get("time")
    if not isinstance(time_meta, Sequence) or isinstance(time_meta, str) or len(time_meta) != 2:
        raise _fail(f"snapshot meta 'time' must be [numerator, denominator], got {time_meta!r}")
    num = _meta_int(time_meta[0], "time numerator")
    den = _meta_int(time_meta[1], "time denominator")
    if den <= 0 or num < 0:
        raise _fail(
            f"snapshot time must be a fraction >= 0 with a denominator > 0, got {num}/{den}"
        )
    time = Fraction(num, den)
    try:
        as_float = float(time)
    except OverflowError:
        as_float = math.inf
    if as_float != snap.sim_time:
        raise _fail(f"snapshot sim_time {snap.sim_time!r} must equal its exact time {time}")
    dt = meta.get("dt")
    dt = check_number_or_none(
        dt, "World.restore: snapshot meta 'dt'", low=0.0, low_open=True, high=DT_MAX, fix=_FIX
    )
    if (step_count == 0) != (time == 0):
        raise _fail(f"snapshot time {time} s is inconsistent with step_count {step_count}")
    if dt is None and step_count:
        raise _fail(f"snapshot meta 'dt' is None after {step_count} steps (a step sets it)")
    # ---------------------------------------------------------------- the log
    if steps[0] < 0 or (np.diff(steps) < 0).any() or steps[-1] > step_count:
        raise _fail(
            f"log steps must be non-decreasing in [0, step_count={step_count}], got first "
            f"{steps[0]}, last {steps[-1]}"
        )
    span = step_count - int(steps[0])
    if span >= spec.max_log_steps:
        raise ValueError(
            f"World.restore: a snapshot may replay fewer than max_log_steps="
            f"{spec.max_log_steps} steps (a World's log never spans more), got {span} (from "
            f"step {steps[0]} to {step_count}); restore it into a World with a larger "
            "max_log_steps if it is genuine"
        )
    if ((kinds < 0) | (kinds > LAST_KIND)).any():
        raise _fail(f"log kinds must be in [0, {LAST_KIND}], got {sorted(set(kinds.tolist()))}")
    if ids_all.size and (ids_all.min() < 0 or ids_all.max() >= n):
        raise _fail(f"log copy ids must be in [0, {n}), got [{ids_all.min()}, {ids_all.max()}]")
    log: list[LogEntry] = []
    last_build = np.full(n, -1, dtype=np.int64)
    last_warm = np.full(n, -1, dtype=np.int64)  # each copy's last WARM entry
    last_dt: tuple[int, float] | None = None
    per_row = {
        EFFORTS: nj,
        TARGETS: nj,
        STATES: 2 * nb * 3,
        FORCES: nb * 3,
        BUILD: 0,
        PD_EFFORTS: nj,
        Kind.MASSES: nb,
        Kind.MATERIALS: nb * 4,
        Kind.GRAVITY: 2,
        Kind.STRENGTH: nj,
        Kind.VELOCITIES: nb * 3,
    }
    for e, (at, kind, i0, i1, v0, v1) in enumerate(
        zip(
            steps.tolist(),
            kinds.tolist(),
            id_off[:-1].tolist(),
            id_off[1:].tolist(),
            val_off[:-1].tolist(),
            val_off[1:].tolist(),
            strict=True,
        )
    ):
        ids = ids_all[i0:i1].copy()
        vals = vals_all[v0:v1]
        where = f"log entry {e} ({KIND_NAMES[kind]} at step {at})"
        if ids.size > 1 and np.unique(ids).size != ids.size:
            raise _fail(f"{where}: copy ids must be unique, got {ids.tolist()}")
        a = b = None
        if kind == DT:
            if ids.size or vals.size != 1 or not 0 < vals[0] <= DT_MAX:
                raise _fail(f"{where}: must hold one dt in (0, {DT_MAX:g}] s and no copies")
            a = vals.copy()
            last_dt = (at, float(vals[0]))
        elif kind == PD_MODE:
            if ids.size or vals.size != 1 or vals[0] not in (0.0, 1.0):
                raise _fail(
                    f"{where}: must hold one mode, 0.0 (every_step) or 1.0 (held), and no copies"
                )
            a = vals.copy()
        elif kind == WARM:
            _warm_ok(
                vals, ids, spec, [log[i].step if i >= 0 else -1 for i in last_build[ids]], at, where
            )
            again = ids[last_warm[ids] > last_build[ids]]
            if again.size:
                raise _fail(
                    f"{where}: a rebuild carries one warm entry; copies {again[:5].tolist()} "
                    "have one already"
                )
            last_warm[ids] = e
            a = vals.copy()
        else:
            if vals.size != ids.size * per_row[kind]:
                raise _fail(
                    f"{where}: must hold {per_row[kind]} values per copy for {ids.size} copies, "
                    f"got {vals.size}"
                )
            if kind == BUILD:
                last_build[ids] = e
            elif kind in (EFFORTS, TARGETS, PD_EFFORTS):
                a = vals.reshape(ids.size, nj).copy()
                if kind != TARGETS:
                    _efforts_ok(a, spec.effort_bound, where)
            elif kind >= Kind.MASSES:
                a = _parameter(vals, ids.size, Kind(kind), spec, where)
            elif kind == STATES:
                half = ids.size * nb * 3
                a = vals[:half].reshape(ids.size, nb, 3).copy()
                b = vals[half:].reshape(ids.size, nb, 3).copy()
                problem = body_states_error(a, b, copies=ids)
                if problem is not None:
                    raise _fail(f"{where}: body states: {problem}")
            else:
                a = vals.reshape(ids.size, nb, 3).copy()
                _forces_ok(a, spec.dynamic, where)
        log.append(LogEntry(at, Kind(kind), ids, a, b))
    if (last_build < 0).any() or not np.array_equal(epoch, last_build):
        bad = np.flatnonzero(epoch != last_build)[:5].tolist()
        raise _fail(
            f"'copies/epoch' must give each copy's last rebuild in the log; copies {bad} "
            f"have {epoch[bad].tolist()}, the log says {last_build[bad].tolist()}"
        )
    if (dt is None) != (last_dt is None) or (last_dt is not None and last_dt[1] != dt):
        raise _fail(
            f"snapshot meta 'dt' {dt!r} must be the dt in effect, the log's last dt "
            f"{None if last_dt is None else last_dt[1]!r}"
        )
    # the exact time the log accounts for: each step takes the dt in effect
    logged, at, current = Fraction(0), int(steps[0]), None
    for entry in [*log, (step_count, -1, None, None, None)]:
        if entry[0] > at:
            if current is None:
                raise _fail(f"the log has steps {at}..{entry[0]} before any dt")
            logged += (entry[0] - at) * current
            at = entry[0]
        if entry[1] == DT:
            current = Fraction(float(entry[3][0]))
    first = int(steps[0])
    if time < logged or (first == 0 and time != logged) or (first > 0 and time == logged):
        raise _fail(
            f"snapshot time {time} s must be the sum of its steps' dt: the log accounts for "
            f"{logged} s from step {first} to step_count={step_count}"
            + (" (it starts at step 0: exactly)" if first == 0 else " (and earlier steps)")
        )
    epoch_step = steps[epoch]
    if rebase_sums.any() and not (epoch_step == step_count).any():
        raise _fail(
            "'contacts/rebase_sums' is held only right after a rebase, but no copy was "
            f"rebuilt at step_count={step_count}"
        )
    # ---------------------------------------------------------------- sensors
    pipelines = spec.pipelines(dt) if dt is not None else {}
    sensor_states: dict[str, dict[str, np.ndarray]] = {}
    for name, pipe in pipelines.items():
        prefix = f"sensor/{name}/"
        state = {k[len(prefix) :]: v for k, v in ar.items() if k.startswith(prefix)}
        try:
            sensor_states[name] = pipe.check_state(state)
        except ValueError as exc:
            raise _fail(f"sensor {name!r}: {exc}") from None
        known.update(prefix + k for k in state)
    unknown = sorted(set(ar) - known)
    if unknown:
        raise _fail(f"snapshot has arrays this World does not know: {unknown[:5]}")
    # ---------------------------------------------------------------- random Generators
    rng = meta.get("rng")
    if not isinstance(rng, Sequence) or isinstance(rng, str) or len(rng) != n:
        got = len(rng) if isinstance(rng, Sequence) else type(rng).__name__
        raise _fail(f"snapshot meta 'rng' must list {n} Generator states (one per copy), got {got}")
    for k, (state, kind_) in enumerate(zip(rng, spec.rng_types, strict=True)):
        probe = np.random.Generator(kind_(0))
        try:
            set_rng_state(probe, state)
        except ValueError as exc:
            raise _fail(f"snapshot meta 'rng'[{k}]: {exc}") from None
    return Restore(
        log=log,
        epoch=epoch.copy(),
        epoch_step=epoch_step,
        efforts=efforts,
        targets=targets,
        external=external,
        v_prev=v_prev,
        pd_efforts=pd_efforts,
        rebase_sums=rebase_sums,
        noise_scale=noise_scale,
        step_count=step_count,
        time=time,
        dt=dt,
        pipelines=pipelines,
        sensor_states=sensor_states,
        rng_states=list(rng),
    )
