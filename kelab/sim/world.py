"""World: a Scene compiled into pymunk, N independent copies, batched numpy state.

See docs/world.md. Two layouts share this class: "isolated" (one ``pymunk.Space`` per
copy, kelab/sim/_isolated.py) and "packed" (all copies of a thread shard in one space,
kelab/sim/_packed.py). The World owns everything that does not depend on the layout:
controls, efforts -> forces, joint state, sensors, contact sums and the snapshot log.
Reading and writing go through ``pymunk.batch`` iterators, never Python loops over bodies.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from kelab.sim._compile import Layout, make_layout
from kelab.sim._isolated import IsolatedBackend
from kelab.sim._packed import PackedBackend
from kelab.sim.scene import Scene
from kelab.sim.sensors import SensorPipeline
from kelab.sim.snapshot import Snapshot, rng_state, set_rng_state

#: Values of ``World(layout=...)``.
LAYOUTS = ("isolated", "packed")

# replay log event kinds
_BUILD, _EFFORTS, _TARGETS, _STATES, _DT = range(5)
_SENSOR_WIDTH = {"imu": 4, "joint": 2, "contact": 2, "rangefinder": 1, "pose": 3}


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
        layout: ``"isolated"`` (default): one pymunk Space per copy, copy ``i`` is
            bit-identical to a lone copy in every scene. ``"packed"``: one Space per thread
            shard holding its copies side by side (``env_spacing`` rounded up to a power
            of two), several times faster; exactness is listed in docs/world.md, "Layouts".

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
        layout: str = "isolated",
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
        if layout not in LAYOUTS:
            raise ValueError(
                f"World: layout must be one of {LAYOUTS}, got {layout!r} ('isolated': one "
                "pymunk space per copy, exact in every scene; 'packed': one space per thread, "
                "faster)"
            )
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
        self._layout_name = layout
        self._backend: IsolatedBackend | PackedBackend
        if layout == "packed":
            self._backend = PackedBackend(scene, lay, num_envs, num_threads, float(env_spacing))
            self._spacing = self._backend.spacing
        else:
            self._backend = IsolatedBackend(scene, lay, num_envs, num_threads)
        self._state_valid = np.zeros(num_envs, dtype=bool)
        self._touched = np.zeros(num_envs, dtype=bool)  # stepped since built (replay)
        self._contacts: np.ndarray | None = None  # (N, nb, 2) force, valid after a step
        self._normals = np.zeros((num_envs, self._nb))
        self._forces_dirty = True
        self._jcache: tuple[np.ndarray, np.ndarray] | None = None
        self._efforts = np.zeros((num_envs, self._nj))
        self._targets = np.zeros((num_envs, self._nj))
        self._steps = 0
        self._time = Fraction(0)
        self._dt: float | None = None
        self._threads = num_threads
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
        """Metres between copy origins along x (packed: rounded up to a power of two)."""
        return self._spacing

    @property
    def _copies(self) -> list | None:
        """Per-copy spaces of the isolated layout, None when packed (kelab.app's drag)."""
        return getattr(self._backend, "_copies", None)

    @property
    def layout(self) -> str:
        """``"isolated"`` or ``"packed"`` (see docs/world.md, "Layouts")."""
        return self._layout_name

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
        done = self._backend.read(ids)
        self._state_valid[done] = True
        self._jcache = None

    def _ensure(self) -> None:
        if not self._state_valid.all():
            self._read(np.flatnonzero(~self._state_valid))
            self._jcache = None

    def _raw(self) -> np.ndarray:
        """(N, nb, 6) state of the scene bodies in copy frames (x, y, a, vx, vy, w)."""
        return self._backend.raw

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
            if jl.parent >= 0:
                r, vr = _point(p, jl.anchor_parent, cog[jl.parent])
                u = q - r
                du = vq - vr
            else:  # the ground frame: a fixed point
                u = q - np.asarray(jl.anchor_parent)
                du = vq
            if jl.kind == "prismatic" and jl.parent < 0:
                ax, ay = jl.axis
                pos[:, k] = u[:, 0] * ax + u[:, 1] * ay
                vel[:, k] = du[:, 0] * ax + du[:, 1] * ay
            elif jl.kind == "prismatic":
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
        self._backend.rebuild(ids)
        self._touched[ids] = False
        self._efforts[ids] = 0.0
        self._targets[ids] = 0.0
        self._forces_dirty = True
        self._log.append((self._steps, _BUILD, ids.copy(), None, None))
        self._epoch[ids] = len(self._log) - 1
        self._state_valid[ids] = False
        self._contacts = None
        self._normals[ids] = 0.0
        if self._epoch.min() > 0 and ids.size == self._n:
            self._prune()

    def _write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        self._backend.write_states(ids, poses, vels)
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
        """One physics step for copies ``ids`` (forces, step, contact bookkeeping).

        The packed layout steps every copy of its shared spaces; copies outside ``ids``
        (only during a replay: not yet started) then run with zero forces.
        """
        if self._state_dependent or self._rolling:
            need = ids[~self._state_valid[ids]]
            if need.size:
                self._read(need)
        if self._forces_dirty or self._state_dependent or self._rolling or ids.size != self._n:
            self._compute_forces(ids, dt)
            self._forces_dirty = ids.size != self._n
        self._backend.step(dt, ids)
        stepped = self._all if self._layout_name == "packed" else ids
        self._touched[stepped] = True
        self._state_valid[stepped] = False
        self._contacts = None
        self._last_dt = dt
        if self._rolling:
            self._read_contacts(ids)

    def _compute_forces(self, ids: np.ndarray, dt: float) -> None:
        lay = self._layout
        out = np.zeros((ids.size, self._nb, 3))
        rows = np.arange(self._nb)
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
        if ids.size != self._n and self._layout_name == "packed":
            full = np.zeros((self._n, self._nb, 3))  # the others run without forces
            full[ids] = out
            self._backend.set_forces(self._all, full)
        else:
            self._backend.set_forces(ids, out)

    # ------------------------------------------------------------------ contacts
    def _read_contacts(self, ids: np.ndarray) -> None:
        """Sum the last step's contact impulses per body (force = impulse / dt)."""
        dt = getattr(self, "_last_dt", None)
        contacts = np.zeros((self._n, self._nb, 2))
        normals = np.zeros((self._n, self._nb))
        if dt is not None:
            ra, rb, fl = self._backend.arbiters(ids)
            if fl.shape[0]:
                flat = contacts.reshape(-1, 2)
                nflat = normals.reshape(-1)
                jn = np.abs(fl[:, 0] * fl[:, 2] + fl[:, 1] * fl[:, 3])
                # pymunk iterates cached arbiters in a memory-address order: sort them so
                # that the float sums do not depend on where pymunk allocated them
                perm = np.lexsort((fl[:, 1], fl[:, 0], rb, ra))
                for rows, sign in ((ra, 1.0), (rb, -1.0)):
                    idx = rows[perm]
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
        alpha = self._backend.segment_first(
            b, np.stack([sx, sy], axis=1), np.stack([ex, ey], axis=1)
        )
        return np.where(np.isnan(alpha), max_range, alpha * max_range)[:, None]

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
        """Rebuild every copy and re-simulate its logged history up to ``end_step``.

        A copy starts at its last rebuild (``epoch``). The packed layout steps the copies
        that have not started yet too (they share a space); each is rebuilt fresh at its
        start, which makes it exactly the copy the live World rebuilt there.
        """
        self._backend.rebuild(self._all)
        self._touched[:] = False
        self._normals[:] = 0.0
        self._efforts[:] = 0.0
        self._targets[:] = 0.0
        self._state_valid[:] = False
        self._forces_dirty = True
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
                again = start[self._touched[start]]
                if again.size:
                    self._backend.rebuild(again)
                    self._touched[again] = False
                    self._state_valid[again] = False
                active[start] = True
                self._efforts[ids] = 0.0
                self._targets[ids] = 0.0
                self._forces_dirty = True
                continue
            live = ids[active[ids]]
            sel = active[ids]
            if kind == _EFFORTS:
                self._efforts[live] = a[sel]
            elif kind == _TARGETS:
                self._targets[live] = a[sel]
            elif kind == _STATES and live.size:
                self._write_states(live, a[sel], b[sel])
            self._forces_dirty = True
        while step < end_step:
            self._replay_step(active, dt)
            step += 1
        self._forces_dirty = True

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
        self._backend.close()


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
    out = np.empty((state.shape[0], 2))
    vel = np.empty((state.shape[0], 2))
    out[:, 0] = state[:, 0] + ca * local[0] - sa * local[1]
    out[:, 1] = state[:, 1] + sa * local[0] + ca * local[1]
    # r = point - centre of gravity, rotated from the body frame
    dx, dy = local[0] - cog[0], local[1] - cog[1]
    rx = ca * dx - sa * dy
    ry = sa * dx + ca * dy
    w = state[:, 5]
    vel[:, 0] = state[:, 3] - w * ry
    vel[:, 1] = state[:, 4] + w * rx
    return out, vel


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
