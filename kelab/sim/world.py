"""World: a Scene compiled into pymunk, N independent copies, batched numpy state.

See docs/world.md. Every environment copy lives in its own ``pymunk.Space`` in its own
frame, built by the same sequence of calls, so copy ``i`` of an N-copy World computes
bit-identically to a lone copy (contacts included). Reading and writing go through the
``pymunk.batch`` iterators (one C call per copy), never through Python loops over bodies.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any

import numpy as np
import pymunk
import pymunk.batch as pbatch
from pymunk._chipmunk_cffi import ffi, lib

from kelab.sim._compile import CopySpace, Layout, build_copy, make_layout
from kelab.sim.scene import Scene
from kelab.sim.sensors import SensorPipeline
from kelab.sim.snapshot import Snapshot, rng_state, set_rng_state

_READ = (
    pbatch.BodyFields.POSITION
    | pbatch.BodyFields.ANGLE
    | pbatch.BodyFields.VELOCITY
    | pbatch.BodyFields.ANGULAR_VELOCITY
).value
_FORCE = (pbatch.BodyFields.FORCE | pbatch.BodyFields.TORQUE).value
_ANGLE = pbatch.BodyFields.ANGLE.value
_POSVEL = (
    pbatch.BodyFields.POSITION | pbatch.BodyFields.VELOCITY | pbatch.BodyFields.ANGULAR_VELOCITY
).value
_ARB = (
    pbatch.ArbiterFields.BODY_A_ID
    | pbatch.ArbiterFields.BODY_B_ID
    | pbatch.ArbiterFields.TOTAL_IMPULSE
    | pbatch.ArbiterFields.NORMAL
)
_GET = ffi.addressof(lib, "pmSpaceBodyGetIteratorFuncBatched")
_SET = ffi.addressof(lib, "pmSpaceBodySetIteratorFuncBatched")

# replay log event kinds
_BUILD, _EFFORTS, _TARGETS, _STATES, _DT = range(5)
_SENSOR_WIDTH = {"imu": 4, "joint": 2, "contact": 2, "rangefinder": 1, "pose": 3}


class _Rows:
    """A float64 matrix with one row per copy and a pmFloatArray per row (for batch calls)."""

    def __init__(self, num_envs: int, width: int, fields: int) -> None:
        # two spare floats per row: pymunk's push grows an array when num reaches max - 1
        self.array = np.zeros((num_envs, width + 2), dtype=np.float64)
        self.width = width
        base = self.array.ctypes.data
        stride = self.array.strides[0]
        self._int = lib.pmIntArrayNew(0)
        self.floats = []
        self.data = []
        for c in range(num_envs):
            fa = ffi.new("pmFloatArray *")
            fa.arr = ffi.cast("cpFloat *", base + c * stride)
            fa.max = width + 2
            fa.num = 0
            d = ffi.new("pmBatchedData *")
            d.fields = fields
            d.floatArray = fa
            d.intArray = self._int
            self.floats.append(fa)
            self.data.append(d)

    @property
    def view(self) -> np.ndarray:
        return self.array[:, : self.width]


class World:
    """A Scene compiled into pymunk: ``num_envs`` independent copies stepped together.

    Args:
        scene: The immutable scene description.
        num_envs: Number of environment copies, >= 1.
        env_spacing: Distance in metres between copy origins along x (where a renderer
            draws copy ``i``: ``origin = (i * env_spacing, 0)``); physics never mixes copies.
        seed: Seed of the per-copy random Generators (sensor noise).
        num_threads: Threads that step the copies (each steps a shard of copies). Results
            are bit-identical for every value.

    Example:
        >>> import kelab as ke
        >>> b = ke.SceneBuilder()
        >>> _ = b.add(ke.Terrain.plane(), at="/")
        >>> _ = b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
        >>> world = ke.World(b.build(), num_envs=2)
        >>> for _ in range(60):
        ...     world.step(1 / 120)
        >>> world.body_poses.shape, world.step_count
        ((2, 2, 3), 60)
    """

    def __init__(
        self,
        scene: Scene,
        num_envs: int = 1,
        env_spacing: float = 4.0,
        seed: int = 0,
        num_threads: int = 1,
    ) -> None:
        if not isinstance(scene, Scene):
            raise ValueError(f"World: scene must be a ke.Scene, got {type(scene).__name__}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"World: num_envs must be an int >= 1, got {num_envs!r}")
        if not (isinstance(env_spacing, (int, float)) and math.isfinite(env_spacing)):
            raise ValueError(f"World: env_spacing must be a finite number, got {env_spacing!r}")
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"World: num_threads must be an int >= 1, got {num_threads!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"World: seed must be an int >= 0, got {seed!r}")
        self._scene = scene
        self._fingerprint = scene.fingerprint
        self._n = num_envs
        self._spacing = float(env_spacing)
        self._seed = seed
        self._layout: Layout = make_layout(scene)
        lay = self._layout
        self._nb = len(lay.body_paths)
        self._nj = len(lay.joint_paths)
        self._all = np.arange(num_envs)
        self._state = _Rows(num_envs, lay.n_rows * 6, _READ)
        self._force = _Rows(num_envs, lay.n_rows * 3, _FORCE)
        self._angles = _Rows(num_envs, lay.n_rows, _ANGLE)
        self._posvel = _Rows(num_envs, lay.n_rows * 5, _POSVEL)
        self._copies: list[CopySpace] = [build_copy(scene, lay) for _ in range(num_envs)]
        self._ptrs = [c.space._space for c in self._copies]
        self._state_valid = np.zeros(num_envs, dtype=bool)
        self._contacts: np.ndarray | None = None  # (N, nb, 2) force, valid after a step
        self._normals = np.zeros((num_envs, self._nb))
        self._ids_dirty = True
        self._forces_dirty = True
        self._jcache: tuple[np.ndarray, np.ndarray] | None = None
        self._efforts = np.zeros((num_envs, self._nj))
        self._targets = np.zeros((num_envs, self._nj))
        self._steps = 0
        self._time = Fraction(0)
        self._dt: float | None = None
        self._threads = num_threads
        self._pool = ThreadPoolExecutor(num_threads) if num_threads > 1 else None
        self._shards = np.array_split(self._all, num_threads)
        act = [j.actuator for j in lay.joints]
        self._pd = np.array([a == "pd" for a in act], dtype=bool)
        self._limit = np.array([j.limit for j in lay.joints], dtype=np.float64)
        self._kp = np.array([j.kp for j in lay.joints], dtype=np.float64)
        self._kd = np.array([j.kd for j in lay.joints], dtype=np.float64)
        self._actuated = np.array([a != "none" for a in act], dtype=bool)
        self._state_dependent = bool(self._pd.any()) or any(
            j.kind == "prismatic" and j.parent >= 0 and j.actuator != "none" for j in lay.joints
        )
        self._rolling = bool((lay.roll_radius > 0).any())
        # sensors
        self._rngs = [
            np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(num_envs)
        ]
        self._sensor_specs = {s.name: s for s in scene.sensors}
        self._pipelines: dict[str, SensorPipeline] = {}
        self._need_contacts = self._rolling or any(s.kind == "contact" for s in scene.sensors)
        self._v_prev = np.zeros((num_envs, self._nb, 2))
        # replay log: list of (step, kind, ids, a, b)
        self._log: list[tuple[int, int, np.ndarray, np.ndarray | None, np.ndarray | None]] = []
        self._epoch = np.zeros(num_envs, dtype=np.int64)
        self._log.append((0, _BUILD, self._all.copy(), None, None))
        self._read(self._all)
        self._v_prev[:] = self._raw()[:, :, 3:5]

    # ------------------------------------------------------------------ info
    @property
    def scene(self) -> Scene:
        """The scene this World was compiled from."""
        return self._scene

    @property
    def num_envs(self) -> int:
        """Number of environment copies."""
        return self._n

    @property
    def num_threads(self) -> int:
        """Threads used to step the copies."""
        return self._threads

    @property
    def env_spacing(self) -> float:
        """Metres between copy origins along x."""
        return self._spacing

    @property
    def env_origins(self) -> np.ndarray:
        """Origin of each copy in the shared display frame, shape ``(num_envs, 2)``."""
        return np.stack([self._all * self._spacing, np.zeros(self._n)], axis=1)

    @property
    def fingerprint(self) -> str:
        """The scene fingerprint (snapshots of other scenes are refused)."""
        return self._fingerprint

    @property
    def body_names(self) -> tuple[str, ...]:
        """Body paths in the fixed order of every body array."""
        return self._layout.body_paths

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joint paths in the fixed order of every joint array."""
        return self._layout.joint_paths

    @property
    def step_count(self) -> int:
        """Physics steps taken since the World was built (restored with snapshots)."""
        return self._steps

    @property
    def sim_time(self) -> float:
        """Simulation seconds: the exact sum of the step sizes (a Fraction), as a float."""
        return float(self._time)

    @property
    def sim_time_exact(self) -> Fraction:
        """Simulation seconds as an exact Fraction."""
        return self._time

    @property
    def rngs(self) -> list[np.random.Generator]:
        """One Generator per copy (seeded from ``seed``), saved by snapshots."""
        return self._rngs

    # ------------------------------------------------------------------ batch I/O
    def _read(self, ids: np.ndarray) -> None:
        """Batch-read position, angle, velocity and angular velocity of copies ``ids``."""
        floats, data, ptrs, each = (
            self._state.floats,
            self._state.data,
            self._ptrs,
            lib.cpSpaceEachBody,
        )
        for c in ids.tolist():
            floats[c].num = 0
            each(ptrs[c], _GET, data[c])
        self._state_valid[ids] = True
        self._jcache = None

    def _ensure(self) -> None:
        if not self._state_valid.all():
            self._read(np.flatnonzero(~self._state_valid))
            self._jcache = None

    def _raw(self) -> np.ndarray:
        """(N, nb, 6) raw state rows of the scene bodies (x, y, a, vx, vy, w)."""
        view = self._state.view.reshape(self._n, self._layout.n_rows, 6)
        return view[:, self._layout.body_rows, :]

    # ------------------------------------------------------------------ reading
    @property
    def body_poses(self) -> np.ndarray:
        """Body poses (x, y, angle) in each copy's frame, shape ``(num_envs, n_bodies, 3)``."""
        self._ensure()
        return self._raw()[:, :, 0:3].copy()

    @property
    def body_velocities(self) -> np.ndarray:
        """Body velocities (vx, vy of the centre of mass, omega), ``(num_envs, n_bodies, 3)``."""
        self._ensure()
        return self._raw()[:, :, 3:6].copy()

    @property
    def joint_positions(self) -> np.ndarray:
        """Joint positions, ``(num_envs, n_joints)`` (rad or m from the initial pose)."""
        return self._joints()[0].copy()

    @property
    def joint_velocities(self) -> np.ndarray:
        """Joint velocities, ``(num_envs, n_joints)`` (rad/s or m/s)."""
        return self._joints()[1].copy()

    def _joints(self) -> tuple[np.ndarray, np.ndarray]:
        self._ensure()
        if self._jcache is None:
            self._jcache = self._joint_state(self._raw())
        return self._jcache

    @property
    def contact_forces(self) -> np.ndarray:
        """Sum of contact forces on each body in the last step, ``(num_envs, n_bodies, 2)``.

        Computed from the contact impulses of the last physics step divided by its dt.
        """
        if self._contacts is None:
            self._read_contacts(self._all)
        assert self._contacts is not None  # for type checkers; set just above
        return self._contacts.copy()

    @property
    def joint_efforts(self) -> np.ndarray:
        """Effort commands held per joint (after clipping), ``(num_envs, n_joints)``."""
        return self._efforts.copy()

    @property
    def joint_position_targets(self) -> np.ndarray:
        """PD position targets held per joint, ``(num_envs, n_joints)``."""
        return self._targets.copy()

    def _joint_state(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = raw.shape[0]
        pos = np.zeros((m, self._nj))
        vel = np.zeros((m, self._nj))
        cog = self._layout.cog
        for k, jl in enumerate(self._layout.joints):
            c = raw[:, jl.child]
            if jl.parent >= 0:
                p = raw[:, jl.parent]
            else:
                p = np.zeros((m, 6))
            if jl.kind in ("revolute", "fixed"):
                pos[:, k] = (c[:, 2] - p[:, 2]) - jl.rel_angle0
                vel[:, k] = c[:, 5] - p[:, 5]
                continue
            q, vq = _point(c, jl.anchor_child, cog[jl.child])
            pcog = cog[jl.parent] if jl.parent >= 0 else np.zeros(2)
            r, vr = _point(p, jl.anchor_parent, pcog)
            u = q - r
            du = vq - vr
            if jl.kind == "prismatic":
                ca, sa = np.cos(p[:, 2]), np.sin(p[:, 2])
                # time derivative of R(-a) u: R(-a) (u' - w x u)
                wx = du[:, 0] + p[:, 5] * u[:, 1]
                wy = du[:, 1] - p[:, 5] * u[:, 0]
                ax, ay = jl.axis
                pos[:, k] = (ca * u[:, 0] + sa * u[:, 1]) * ax + (-sa * u[:, 0] + ca * u[:, 1]) * ay
                vel[:, k] = (ca * wx + sa * wy) * ax + (-sa * wx + ca * wy) * ay
            else:  # spring
                length = np.hypot(u[:, 0], u[:, 1])
                pos[:, k] = length - jl.rest_length
                safe = np.where(length > 0, length, 1.0)
                vel[:, k] = (u[:, 0] * du[:, 0] + u[:, 1] * du[:, 1]) / safe
        return pos, vel

    # ------------------------------------------------------------------ writing
    def _ids(self, env_ids: Any) -> np.ndarray:
        if env_ids is None:
            return self._all
        ids = np.asarray(env_ids)
        if ids.dtype == bool:
            if ids.shape != (self._n,):
                raise ValueError(f"env_ids mask must have shape ({self._n},), got {ids.shape}")
            return np.flatnonzero(ids)
        ids = ids.astype(np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self._n):
            raise ValueError(
                f"env_ids must be in [0, {self._n}), got min {ids.min()} max {ids.max()}"
            )
        return ids

    def _controls(self, kind: int, values: Any, joint_ids: Any = None, env_ids: Any = None) -> None:
        ids = self._ids(env_ids)
        cols = np.arange(self._nj) if joint_ids is None else np.asarray(joint_ids, np.int64)
        vals = np.asarray(values, dtype=np.float64)
        try:
            vals = np.broadcast_to(vals, (ids.size, cols.size))
        except ValueError:
            raise ValueError(
                f"values must have shape ({ids.size}, {cols.size}) (copies, joints), got "
                f"{vals.shape}"
            ) from None
        if not np.isfinite(vals).all():
            raise ValueError("joint commands must be finite numbers")
        target = self._efforts if kind == _EFFORTS else self._targets
        full = target[ids].copy()
        if kind == _EFFORTS:
            lim = self._limit[cols]
            full[:, cols] = np.where(self._actuated[cols], np.clip(vals, -lim, lim), 0.0)
        else:
            full[:, cols] = vals
        target[ids] = full
        self._forces_dirty = True
        self._log.append((self._steps, kind, ids.copy(), full.copy(), None))

    def set_joint_efforts(self, efforts: Any, env_ids: Any = None) -> None:
        """Hold joint efforts (N or N·m) until changed, clipped to each actuator's limit.

        Joints without an actuator ignore their column (effort 0).

        Args:
            efforts: ``(len(env_ids), n_joints)`` (broadcastable).
            env_ids: Copies to command; None means all.

        Raises:
            ValueError: On a wrong shape, non-finite values or bad ids.
        """
        self._controls(_EFFORTS, efforts, None, env_ids)

    def set_joint_position_targets(self, targets: Any, env_ids: Any = None) -> None:
        """Hold PD position targets (rad or m) until changed; used by PD actuators.

        Args:
            targets: ``(len(env_ids), n_joints)`` (broadcastable).
            env_ids: Copies to command; None means all.

        Raises:
            ValueError: On a wrong shape, non-finite values or bad ids.
        """
        self._controls(_TARGETS, targets, None, env_ids)

    def set_body_states(self, env_ids: Any, poses: Any, velocities: Any = None) -> None:
        """Reset copies to the given body poses and velocities (their frames).

        The copies' spaces are rebuilt first (no contact or joint history survives), their
        controls and sensor states are cleared; other copies stay bit-for-bit untouched.

        Args:
            env_ids: Copies to reset (indices or a bool mask).
            poses: ``(len(env_ids), n_bodies, 3)`` x, y, angle; static bodies are ignored.
            velocities: Same shape, vx, vy (centre of mass), omega; None means zero.

        Raises:
            ValueError: On wrong shapes or non-finite values.
        """
        ids = self._ids(env_ids)
        shape = (ids.size, self._nb, 3)
        poses = (
            np.array(poses, dtype=np.float64).reshape(shape) if np.size(poses) else np.zeros(shape)
        )
        vels = np.zeros(shape) if velocities is None else np.array(velocities, np.float64)
        if poses.shape != shape or vels.shape != shape:
            raise ValueError(f"poses and velocities must have shape {shape}")
        if not (np.isfinite(poses).all() and np.isfinite(vels).all()):
            raise ValueError("set_body_states: poses and velocities must be finite")
        self._rebuild(ids)
        self._write_states(ids, poses, vels)
        self._log.append((self._steps, _STATES, ids.copy(), poses.copy(), vels.copy()))
        self._after_reset(ids)

    def reset_envs(self, env_ids: Any = None) -> None:
        """Reset copies to the scene's initial configuration (zero velocity, no history).

        Args:
            env_ids: Copies to reset; None means all.
        """
        ids = self._ids(env_ids)
        self._rebuild(ids)
        self._after_reset(ids)

    def _rebuild(self, ids: np.ndarray) -> None:
        for c in ids.tolist():
            self._copies[c] = build_copy(self._scene, self._layout)
            self._ptrs[c] = self._copies[c].space._space
        self._efforts[ids] = 0.0
        self._targets[ids] = 0.0
        self._forces_dirty = True
        self._log.append((self._steps, _BUILD, ids.copy(), None, None))
        self._epoch[ids] = len(self._log) - 1
        self._ids_dirty = True
        self._state_valid[ids] = False
        self._contacts = None
        self._normals[ids] = 0.0
        if self._epoch.min() > 0 and ids.size == self._n:
            self._prune()

    def _write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        self._read(ids)
        rows = self._layout.body_rows[self._layout.dynamic]
        dyn = self._layout.dynamic
        nr = self._layout.n_rows
        ang = self._angles.view.reshape(self._n, nr)
        pv = self._posvel.view.reshape(self._n, nr, 5)
        cur = self._state.view.reshape(self._n, nr, 6)
        ang[ids] = cur[ids][:, :, 2]
        pv[ids] = cur[ids][:, :, [0, 1, 3, 4, 5]]
        sub_a = ang[ids]
        sub_a[:, rows] = poses[:, dyn, 2]
        ang[ids] = sub_a
        sub = pv[ids]
        sub[:, rows, 0:2] = poses[:, dyn, 0:2]
        sub[:, rows, 2:5] = vels[:, dyn, :]
        pv[ids] = sub
        each = lib.cpSpaceEachBody
        # angle first: setting the angle turns a body about its centre of gravity
        for c in ids.tolist():
            self._angles.floats[c].num = 0
            each(self._ptrs[c], _SET, self._angles.data[c])
            self._posvel.floats[c].num = 0
            each(self._ptrs[c], _SET, self._posvel.data[c])
        self._state_valid[ids] = False

    def _after_reset(self, ids: np.ndarray) -> None:
        self._read(ids)
        self._v_prev[ids] = self._raw()[ids][:, :, 3:5]
        for p in self._pipelines.values():
            p.reset(ids)

    def _prune(self) -> None:
        """Drop log entries older than every copy's last rebuild."""
        first = int(self._epoch.min())
        dt_events = [e for e in self._log[:first] if e[1] == _DT]
        keep = dt_events[-1:] + self._log[first:]
        shift = first - len(dt_events[-1:])
        self._log = keep
        self._epoch -= shift

    # ------------------------------------------------------------------ stepping
    def step(self, dt: float) -> None:
        """Advance every copy by one physics step of ``dt`` seconds.

        Args:
            dt: Step size in seconds, finite and > 0.

        Raises:
            ValueError: If ``dt`` is not a finite number > 0.
        """
        if (
            isinstance(dt, bool)
            or not isinstance(dt, (int, float))
            or not (math.isfinite(dt) and dt > 0)
        ):
            raise ValueError(f"World.step: dt must be a finite number > 0 seconds, got {dt!r}")
        dt = float(dt)
        if dt != self._dt:
            if self._dt is not None and self._pipelines:
                raise ValueError(
                    f"World.step: dt changed from {self._dt} to {dt}; sensors need a fixed dt"
                )
            self._dt = dt
            self._log.append((self._steps, _DT, self._all[:0], np.array([dt]), None))
            if not self._pipelines and self._sensor_specs:
                self._make_pipelines(dt)
        self._advance(dt, self._all)
        self._steps += 1
        self._time += Fraction(dt)
        if self._sensor_specs:
            self._update_sensors(dt)

    def _advance(self, dt: float, ids: np.ndarray) -> None:
        """One physics step for copies ``ids`` (forces, step, contact bookkeeping)."""
        if self._state_dependent or self._rolling:
            need = ids[~self._state_valid[ids]]
            if need.size:
                self._read(need)
        if self._forces_dirty or self._state_dependent or self._rolling or ids.size != self._n:
            self._compute_forces(ids, dt)
            self._forces_dirty = ids.size != self._n
        if self._pool is None or ids.size < 2 * self._threads:
            self._step_copies(ids, dt)
        else:
            shards = np.array_split(ids, self._threads)
            list(self._pool.map(self._step_copies, shards, [dt] * len(shards)))
        self._state_valid[ids] = False
        self._contacts = None
        self._last_dt = dt
        if self._rolling:
            self._read_contacts(ids)

    def _step_copies(self, ids: np.ndarray, dt: float) -> None:
        # cpSpaceStep directly: pymunk's Space.step only adds Python bookkeeping for
        # deferred add/remove and post-step callbacks, which the World never uses
        floats, data, ptrs = self._force.floats, self._force.data, self._ptrs
        each, step = lib.cpSpaceEachBody, lib.cpSpaceStep
        for c in ids.tolist():
            floats[c].num = 0
            each(ptrs[c], _SET, data[c])
            step(ptrs[c], dt)

    def _compute_forces(self, ids: np.ndarray, dt: float) -> None:
        lay = self._layout
        nr = lay.n_rows
        f = self._force.view.reshape(self._n, nr, 3)
        out = np.zeros((ids.size, nr, 3))
        rows = lay.body_rows
        effort = self._efforts[ids].copy()
        raw = None
        if self._state_dependent or self._rolling:
            raw = self._raw()[ids]
        if self._pd.any():
            assert raw is not None
            pos, vel = self._joint_state(raw)
            pd = self._kp * (self._targets[ids] - pos) - self._kd * vel
            effort[:, self._pd] = np.clip(pd, -self._limit, self._limit)[:, self._pd]
        for k, jl in enumerate(lay.joints):
            if jl.actuator == "none":
                continue
            e = effort[:, k]
            if jl.kind == "revolute":
                out[:, rows[jl.child], 2] += e
                if jl.parent >= 0:
                    out[:, rows[jl.parent], 2] -= e
            elif jl.kind == "prismatic":
                if jl.parent >= 0:
                    assert raw is not None
                    pa = raw[:, jl.parent, 2]
                    ca, sa = np.cos(pa), np.sin(pa)
                    ax = ca * jl.axis[0] - sa * jl.axis[1]
                    ay = sa * jl.axis[0] + ca * jl.axis[1]
                else:
                    ax = np.full(ids.size, jl.axis[0])
                    ay = np.full(ids.size, jl.axis[1])
                fx, fy = e * ax, e * ay
                out[:, rows[jl.child], 0] += fx
                out[:, rows[jl.child], 1] += fy
                if jl.parent >= 0:
                    assert raw is not None
                    cc = _cog_world(raw[:, jl.child], lay.cog[jl.child])
                    pc = _cog_world(raw[:, jl.parent], lay.cog[jl.parent])
                    rx, ry = cc[:, 0] - pc[:, 0], cc[:, 1] - pc[:, 1]
                    out[:, rows[jl.parent], 0] -= fx
                    out[:, rows[jl.parent], 1] -= fy
                    out[:, rows[jl.parent], 2] -= rx * fy - ry * fx
        if self._rolling:
            assert raw is not None
            round_ = lay.roll_radius > 0
            w = raw[:, round_, 5]
            cap = np.abs(w) * lay.moment[round_] / dt
            tau = np.minimum(
                lay.roll_mu[round_] * self._normals[ids][:, round_] * lay.roll_radius[round_], cap
            )
            out[:, rows[round_], 2] -= np.sign(w) * tau
        f[ids] = out

    # ------------------------------------------------------------------ contacts
    def _id_table(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ids_dirty:
            ids = np.array(
                [[b.id for b in c.bodies] for c in self._copies], dtype=np.uint64
            ).reshape(-1)
            order = np.argsort(ids, kind="stable")
            self._id_sorted = ids[order]
            self._id_order = order
            self._ids_dirty = False
        return self._id_sorted, self._id_order

    def _read_contacts(self, ids: np.ndarray) -> None:
        """Sum the last step's contact impulses per body (force = impulse / dt)."""
        dt = getattr(self, "_last_dt", None)
        contacts = np.zeros((self._n, self._nb, 2))
        normals = np.zeros((self._n, self._nb))
        if dt is not None:
            buf = pbatch.Buffer()
            for c in ids.tolist():
                pbatch.get_space_arbiters(self._copies[c].space, _ARB, buf)
            ints = np.frombuffer(buf.int_buf(), dtype=np.uintp).astype(np.uint64).reshape(-1, 2)
            fl = np.frombuffer(buf.float_buf(), dtype=np.float64).reshape(-1, 4)
            if ints.shape[0]:
                table, order = self._id_table()
                flat = contacts.reshape(-1, 2)
                nflat = normals.reshape(-1)
                jn = np.abs(fl[:, 0] * fl[:, 2] + fl[:, 1] * fl[:, 3])
                rows = []
                for col in (0, 1):
                    key = ints[:, col]
                    pos = np.clip(np.searchsorted(table, key), 0, table.size - 1)
                    rows.append(np.where(table[pos] == key, order[pos], -1))
                # pymunk iterates cached arbiters in a memory-address order: sort them so
                # that the float sums do not depend on where pymunk allocated them
                perm = np.lexsort((fl[:, 1], fl[:, 0], rows[1], rows[0]))
                for col, sign in ((0, 1.0), (1, -1.0)):
                    idx = rows[col][perm]
                    hit = idx >= 0
                    np.add.at(flat, idx[hit], sign * fl[perm][hit, 0:2] / dt)
                    np.add.at(nflat, idx[hit], jn[perm][hit] / dt)
        self._normals[ids] = normals[ids]
        if ids.size == self._n:
            self._contacts = contacts

    # ------------------------------------------------------------------ sensors
    def _make_pipelines(self, dt: float) -> None:
        for s in self._scene.sensors:
            self._pipelines[s.name] = SensorPipeline(
                s.config, self._n, _SENSOR_WIDTH[s.kind], dt, self._rngs
            )

    def _update_sensors(self, dt: float) -> None:
        self._ensure()
        raw = self._raw()
        index = {p: i for i, p in enumerate(self._layout.body_paths)}
        jindex = {p: i for i, p in enumerate(self._layout.joint_paths)}
        jstate = None
        g = np.asarray(self._scene.gravity, dtype=np.float64)
        for s in self._scene.sensors:
            if s.kind == "imu":
                b = index[s.target]
                a = raw[:, b, 2]
                acc = (raw[:, b, 3:5] - self._v_prev[:, b]) / dt - g
                ca, sa = np.cos(a), np.sin(a)
                ideal = np.stack(
                    [
                        raw[:, b, 5],
                        ca * acc[:, 0] + sa * acc[:, 1],
                        -sa * acc[:, 0] + ca * acc[:, 1],
                        a,
                    ],
                    axis=1,
                )
            elif s.kind == "joint":
                if jstate is None:
                    jstate = self._joint_state(raw)
                k = jindex[s.target]
                ideal = np.stack([jstate[0][:, k], jstate[1][:, k]], axis=1)
            elif s.kind == "contact":
                ideal = self.contact_forces[:, index[s.target], :]
            elif s.kind == "pose":
                ideal = raw[:, index[s.target], 0:3]
            else:
                ideal = self._rangefinder(s, raw, index[s.target])
            self._pipelines[s.name].update(ideal)
        self._v_prev[:] = raw[:, :, 3:5]

    def _rangefinder(self, s: Any, raw: np.ndarray, b: int) -> np.ndarray:
        """Ray casts, one ``segment_query_first`` per copy (pymunk has no batched query)."""
        offset = s.param("offset")
        max_range = float(s.param("max_range"))
        ang = float(s.param("angle"))
        a = raw[:, b, 2]
        ca, sa = np.cos(a), np.sin(a)
        sx = raw[:, b, 0] + ca * offset.x - sa * offset.y
        sy = raw[:, b, 1] + sa * offset.x + ca * offset.y
        d = a + offset.angle + ang
        ex = sx + max_range * np.cos(d)
        ey = sy + max_range * np.sin(d)
        out = np.full((self._n, 1), max_range)
        filt = pymunk.ShapeFilter(group=int(self._layout.groups[b]))
        for c in range(self._n):
            hit = self._copies[c].space.segment_query_first(
                (sx[c], sy[c]), (ex[c], ey[c]), 0.0, filt
            )
            if hit is not None:
                out[c, 0] = hit.alpha * max_range
        return out

    def read_sensor(self, name: str) -> np.ndarray:
        """Return what sensor ``name`` reports now, shape ``(num_envs, k)``.

        Widths k: imu 4 (omega, ax, ay in the body frame incl. -gravity, angle), joint 2
        (position, velocity), contact 2 (fx, fy), rangefinder 1 (distance), pose 3.

        Raises:
            KeyError: If no sensor has that name (the message lists the known ones).
        """
        spec = self._sensor_specs.get(name)
        if spec is None:
            raise KeyError(f"no sensor {name!r}; known sensors: {sorted(self._sensor_specs)}")
        pipe = self._pipelines.get(name)
        if pipe is None:
            return np.zeros((self._n, _SENSOR_WIDTH[spec.kind]))
        return pipe.read()

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record everything that affects the future; the live World is not changed.

        Physics state is stored as the replay log since each copy's last rebuild (reset):
        restoring rebuilds the spaces and re-simulates, which is exact (docs/world.md).
        """
        arrays: dict[str, np.ndarray] = {
            "controls/efforts": self._efforts.copy(),
            "controls/targets": self._targets.copy(),
            "copies/epoch": self._epoch.copy(),
            "imu/v_prev": self._v_prev.copy(),
        }
        steps, kinds, id_off, val_off = [], [], [0], [0]
        ids_all, vals_all = [], []
        for step, kind, ids, a, b in self._log:
            steps.append(step)
            kinds.append(kind)
            ids_all.append(ids.astype(np.int64))
            id_off.append(id_off[-1] + ids.size)
            parts = [x.reshape(-1) for x in (a, b) if x is not None]
            flat = np.concatenate(parts) if parts else np.zeros(0)
            vals_all.append(flat)
            val_off.append(val_off[-1] + flat.size)
        arrays["log/step"] = np.array(steps, dtype=np.int64)
        arrays["log/kind"] = np.array(kinds, dtype=np.int64)
        arrays["log/ids"] = np.concatenate(ids_all) if ids_all else np.zeros(0, np.int64)
        arrays["log/id_off"] = np.array(id_off, dtype=np.int64)
        arrays["log/vals"] = np.concatenate(vals_all) if vals_all else np.zeros(0)
        arrays["log/val_off"] = np.array(val_off, dtype=np.int64)
        for name, p in self._pipelines.items():
            for key, value in p.get_state().items():
                arrays[f"sensor/{name}/{key}"] = value
        meta = {
            "rng": [rng_state(g) for g in self._rngs],
            "time": [self._time.numerator, self._time.denominator],
            "dt": self._dt,
            "num_envs": self._n,
        }
        return Snapshot(self._fingerprint, self._steps, float(self._time), arrays, meta)

    def restore(self, snap: Snapshot) -> None:
        """Return to the moment ``snap`` was taken; stepping on is bit-identical.

        Raises:
            ValueError: If the snapshot comes from another scene (both fingerprints are
                named) or from a World with another number of copies.
        """
        snap.check_fingerprint(self._fingerprint)
        if snap.meta.get("num_envs") != self._n:
            raise ValueError(
                f"snapshot has {snap.meta.get('num_envs')} copies, this World {self._n}"
            )
        ar = snap.arrays
        log = []
        nb, nj = self._nb, self._nj
        for e in range(ar["log/step"].size):
            kind = int(ar["log/kind"][e])
            ids = np.array(ar["log/ids"][ar["log/id_off"][e] : ar["log/id_off"][e + 1]])
            vals = np.array(ar["log/vals"][ar["log/val_off"][e] : ar["log/val_off"][e + 1]])
            a = b = None
            if kind in (_EFFORTS, _TARGETS):
                a = vals.reshape(ids.size, nj)
            elif kind == _STATES:
                half = ids.size * nb * 3
                a = vals[:half].reshape(ids.size, nb, 3)
                b = vals[half:].reshape(ids.size, nb, 3)
            elif kind == _DT:
                a = vals
            log.append((int(ar["log/step"][e]), kind, ids, a, b))
        epoch = np.array(ar["copies/epoch"], dtype=np.int64)
        self._replay(log, epoch, snap.step_count)
        self._log = log
        self._epoch = epoch
        self._efforts[:] = ar["controls/efforts"]
        self._targets[:] = ar["controls/targets"]
        self._v_prev[:] = ar["imu/v_prev"]
        self._steps = snap.step_count
        num, den = snap.meta["time"]
        self._time = Fraction(int(num), int(den))
        self._dt = snap.meta["dt"]
        if self._dt is not None and not self._pipelines and self._sensor_specs:
            self._make_pipelines(self._dt)
        for name, p in self._pipelines.items():
            prefix = f"sensor/{name}/"
            p.set_state({k[len(prefix) :]: v for k, v in ar.items() if k.startswith(prefix)})
        for g, st in zip(self._rngs, snap.meta["rng"], strict=True):
            set_rng_state(g, st)
        self._contacts = None
        self._state_valid[:] = False

    def _replay(self, log: list, epoch: np.ndarray, end_step: int) -> None:
        """Rebuild every copy and re-simulate its logged history up to ``end_step``."""
        for c in range(self._n):
            self._copies[c] = build_copy(self._scene, self._layout)
            self._ptrs[c] = self._copies[c].space._space
        self._ids_dirty = True
        self._normals[:] = 0.0
        self._efforts[:] = 0.0
        self._targets[:] = 0.0
        self._state_valid[:] = False
        self._last_dt = None
        active = np.zeros(self._n, dtype=bool)
        dt = None
        step = log[0][0] if log else end_step
        for index, (at, kind, ids, a, b) in enumerate(log):
            while step < at:
                self._replay_step(active, dt)
                step += 1
            if kind == _DT:
                dt = float(a[0])
                continue
            if kind == _BUILD:
                start = ids[epoch[ids] == index]
                active[start] = True
                self._efforts[ids] = 0.0
                self._targets[ids] = 0.0
                continue
            live = ids[active[ids]]
            sel = active[ids]
            if kind == _EFFORTS:
                self._efforts[live] = a[sel]
            elif kind == _TARGETS:
                self._targets[live] = a[sel]
            elif kind == _STATES and live.size:
                self._write_states(live, a[sel], b[sel])
        while step < end_step:
            self._replay_step(active, dt)
            step += 1

    def _replay_step(self, active: np.ndarray, dt: float | None) -> None:
        ids = np.flatnonzero(active)
        if ids.size and dt is not None:
            self._advance(dt, ids)

    # ------------------------------------------------------------------ robots
    def robot(self, path: str) -> RobotView:
        """Return the runtime articulation view of the robot at ``path``.

        Raises:
            KeyError: If no robot has that path (the message lists them).
        """
        for r in self._scene.robots:
            if r.path == path:
                return RobotView(self, r)
        raise KeyError(f"no robot at {path!r}; robots: {[r.path for r in self._scene.robots]}")

    def close(self) -> None:
        """Stop the stepping threads (if any)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _cog_world(state: np.ndarray, cog: np.ndarray) -> np.ndarray:
    a = state[:, 2]
    ca, sa = np.cos(a), np.sin(a)
    return np.stack(
        [state[:, 0] + ca * cog[0] - sa * cog[1], state[:, 1] + sa * cog[0] + ca * cog[1]], axis=1
    )


def _point(
    state: np.ndarray, local: tuple[float, float], cog: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World position and velocity of a body-frame point (velocity of the COG + w x r)."""
    a = state[:, 2]
    ca, sa = np.cos(a), np.sin(a)
    px = state[:, 0] + ca * local[0] - sa * local[1]
    py = state[:, 1] + sa * local[0] + ca * local[1]
    c = _cog_world(state, cog)
    rx, ry = px - c[:, 0], py - c[:, 1]
    w = state[:, 5]
    vx = state[:, 3] - w * ry
    vy = state[:, 4] + w * rx
    return np.stack([px, py], axis=1), np.stack([vx, vy], axis=1)


class RobotView:
    """Runtime view of one robot in a World (Isaac-Lab style articulation access).

    Indices returned by :meth:`find_joints` are local to this robot.

    Args:
        world: The World.
        robot: The scene's RobotInstance.
    """

    def __init__(self, world: World, robot: Any) -> None:
        self._world = world
        self._robot = robot
        self.path: str = robot.path
        jn = world.joint_names
        bn = world.body_names
        self._jidx = np.array([jn.index(p) for p in robot.joint_paths], dtype=np.int64)
        self._bidx = np.array([bn.index(p) for p in robot.body_paths], dtype=np.int64)
        self.joint_names: tuple[str, ...] = tuple(p.rsplit("/", 1)[1] for p in robot.joint_paths)
        self.body_names: tuple[str, ...] = tuple(p.rsplit("/", 1)[1] for p in robot.body_paths)

    @property
    def num_joints(self) -> int:
        """Joints of this robot."""
        return int(self._jidx.size)

    def find_joints(self, name_or_names: str | Sequence[str]) -> np.ndarray:
        """Return local joint indices of names (exact names or full-match regexes).

        Raises:
            ValueError: If a name matches no joint (the message lists the joints).
        """
        names = [name_or_names] if isinstance(name_or_names, str) else list(name_or_names)
        out: list[int] = []
        for name in names:
            hits = [i for i, j in enumerate(self.joint_names) if j == name or re.fullmatch(name, j)]
            if not hits:
                raise ValueError(f"no joint matches {name!r}; joints: {self.joint_names}")
            out.extend(h for h in hits if h not in out)
        return np.array(out, dtype=np.int64)

    @property
    def joint_pos(self) -> np.ndarray:
        """Joint positions ``(num_envs, n)``."""
        return self._world.joint_positions[:, self._jidx]

    @property
    def joint_vel(self) -> np.ndarray:
        """Joint velocities ``(num_envs, n)``."""
        return self._world.joint_velocities[:, self._jidx]

    def set_joint_effort_target(
        self, efforts: Any, joint_ids: Any = None, env_ids: Any = None
    ) -> None:
        """Hold efforts for some joints of some copies (clipped to the actuator limits)."""
        cols = self._jidx if joint_ids is None else self._jidx[np.asarray(joint_ids, np.int64)]
        self._world._controls(_EFFORTS, efforts, cols, env_ids)

    def set_joint_position_target(
        self, targets: Any, joint_ids: Any = None, env_ids: Any = None
    ) -> None:
        """Hold PD position targets for some joints of some copies."""
        cols = self._jidx if joint_ids is None else self._jidx[np.asarray(joint_ids, np.int64)]
        self._world._controls(_TARGETS, targets, cols, env_ids)

    @property
    def root_pose(self) -> np.ndarray:
        """Pose (x, y, angle) of the robot's first body, ``(num_envs, 3)``."""
        return self._world.body_poses[:, self._bidx[0]]

    def get_body_pose_in_base_frame(self, body_name: str) -> tuple[np.ndarray, np.ndarray]:
        """Return a body's position ``(num_envs, 2)`` and angle ``(num_envs,)`` in the root frame.

        Raises:
            ValueError: If the robot has no such body.
        """
        if body_name not in self.body_names:
            raise ValueError(f"no body {body_name!r}; bodies: {self.body_names}")
        poses = self._world.body_poses
        root = poses[:, self._bidx[0]]
        b = poses[:, self._bidx[self.body_names.index(body_name)]]
        ca, sa = np.cos(root[:, 2]), np.sin(root[:, 2])
        dx, dy = b[:, 0] - root[:, 0], b[:, 1] - root[:, 1]
        pos = np.stack([ca * dx + sa * dy, -sa * dx + ca * dy], axis=1)
        return pos, b[:, 2] - root[:, 2]

    def reset(self, env_ids: Any = None) -> None:
        """Put this robot back to its initial pose with zero velocity in some copies.

        Other bodies keep their current poses and velocities (the copies are rebuilt,
        see :meth:`World.set_body_states`).
        """
        w = self._world
        ids = w._ids(env_ids)
        poses = w.body_poses[ids]
        vels = w.body_velocities[ids]
        poses[:, self._bidx] = w._layout.initial[self._bidx]
        vels[:, self._bidx] = 0.0
        efforts = w._efforts[ids].copy()
        targets = w._targets[ids].copy()
        w.set_body_states(ids, poses, vels)
        efforts[:, self._jidx] = 0.0
        targets[:, self._jidx] = 0.0
        w._controls(_EFFORTS, efforts, None, ids)
        w._controls(_TARGETS, targets, None, ids)
