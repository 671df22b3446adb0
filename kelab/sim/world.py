"""World: a Scene compiled into pymunk, N independent copies, batched numpy state.

See docs/world.md. Two layouts share this class: "isolated" (one ``pymunk.Space`` per
copy, kelab/sim/_isolated.py) and "packed" (all copies of a thread shard in one space,
kelab/sim/_packed.py). The World owns everything that does not depend on the layout:
controls, efforts -> forces, joint state, sensors, contact sums and the snapshot log.
Reading and writing go through ``pymunk.batch`` iterators, never Python loops over bodies.

Why this module is over 800 lines: it is the one class that owns the per-copy arrays
(controls, held forces, friction regimes, joint and contact caches, the log epochs) and
the invariants between them that every write, step, reset, rebase and replay keeps.
What could leave without splitting those invariants has left: the layouts
(_isolated.py, _packed.py, behind the Backend protocol of _backend.py), the replay log
(replay_log.py), the joint kinematics (kinematics.py), RobotView (robot_view.py),
snapshot validation (_restore.py) and pymunk's internals (_chipmunk.py).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from kelab._validate import LAYOUTS as LAYOUTS  # re-exported: World(layout=...) values
from kelab._validate import (
    check_copies,
    check_int,
    check_number,
    check_positive,
    is_bool,
    is_int,
    must,
)
from kelab.sim._backend import Backend
from kelab.sim._compile import (
    SLIDE_SPEED_THRESHOLD,
    STATIC_SPEED_THRESHOLD,
    JointLayout,
    Layout,
    make_layout,
)
from kelab.sim._isolated import IsolatedBackend
from kelab.sim._packed import PackedBackend
from kelab.sim._restore import WorldSpec, check_snapshot
from kelab.sim._values import body_states_error as _body_states_error
from kelab.sim._values import float_array as _float_array
from kelab.sim._values import short as _short
from kelab.sim._values import vec2 as _vec2
from kelab.sim.kinematics import JointCache as _JointCache
from kelab.sim.kinematics import cog_world as _cog_world
from kelab.sim.kinematics import joint_state as _joint_state
from kelab.sim.replay_log import Kind, ReplayLog
from kelab.sim.robot_view import RobotView
from kelab.sim.scene import Scene
from kelab.sim.sensors import SensorPipeline
from kelab.sim.snapshot import Snapshot, rng_state, set_rng_state

#: Default of ``World(max_log_steps=...)``: one minute at 120 Hz.
MAX_LOG_STEPS = 7200

_SENSOR_WIDTH = {"imu": 4, "joint": 2, "contact": 2, "rangefinder": 1, "pose": 3}
#: What a snapshot saves besides the replay log, the sensor pipelines and the meta (rng,
#: time, dt): snapshot array name, World attribute, field of the parsed snapshot
#: (``_restore.Restore``) that restore writes back. Saved in this order (the bytes of a
#: snapshot depend on it).
_SNAPSHOT_ARRAYS = (
    ("controls/efforts", "_efforts", "efforts"),
    ("controls/targets", "_targets", "targets"),
    ("controls/external", "_ext", "external"),
    ("copies/epoch", "_epoch", "epoch"),
    ("imu/v_prev", "_v_prev", "v_prev"),
)


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
        max_log_steps: Bound of the replay log behind snapshots, in physics steps. A copy
            that has run this many steps since its last reset is *rebased* at the end of
            that step: reset to its own present state (bodies' poses and velocities written
            back, contact and joint warm starts dropped, held controls kept), which ends
            its log, so memory stays constant however long a copy runs and
            :meth:`restore` never re-simulates more than this many steps. Deterministic
            and logged (snapshots stay exact); it changes the physics slightly at those
            steps, which depend only on the copy's own history since its last reset
            (docs/world.md, "Snapshots").

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
        max_log_steps: int = MAX_LOG_STEPS,
    ) -> None:
        if not isinstance(scene, Scene):
            raise ValueError(must("World: scene", "a ke.Scene", scene))
        num_envs, seed, num_threads, layout = check_copies(num_envs, seed, num_threads, layout)
        env_spacing = check_number(env_spacing, "World: env_spacing")
        max_log_steps = check_int(
            max_log_steps,
            "World: max_log_steps",
            low=1,
            fix=f"it counts physics steps; the default is {MAX_LOG_STEPS}",
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
        self._all.flags.writeable = False  # logged and handed around without copies
        self._layout_name = layout
        self._backend: Backend
        if layout == "packed":
            packed = PackedBackend(scene, lay, num_envs, num_threads, float(env_spacing))
            self._spacing = packed.spacing
            self._backend = packed
        else:
            self._backend = IsolatedBackend(scene, lay, num_envs, num_threads)
        self._state_valid = np.zeros(num_envs, dtype=bool)
        self._touched = np.zeros(num_envs, dtype=bool)  # stepped since built (replay)
        self._contacts: np.ndarray | None = None  # (N, nb, 2) force, valid after a step
        self._normals = np.zeros((num_envs, self._nb))
        self._forces_dirty = True
        # joint state per copy, valid where _jvalid; every batch read of a copy refreshes
        # (computed right after the read once joints have been asked for) or invalidates it
        # (a separate object: the backend must not hold the World, no reference cycle)
        self._jc = _JointCache(lay, num_envs, self._backend)
        self._jpos, self._jvel, self._jvalid = self._jc.pos, self._jc.vel, self._jc.valid
        self._backend.on_read = self._jc.update
        self._efforts = np.zeros((num_envs, self._nj))
        self._targets = np.zeros((num_envs, self._nj))
        self._ext = np.zeros((num_envs, self._nb, 3))  # held external fx, fy, torque
        self._ext_any = False
        # state-read prediction: physics steps since a reader last asked for the state,
        # and the gap between its last two requests (the step reads the state
        # right after the step that is expected to be read; never changes results)
        self._since_read = 0
        self._read_period = 0
        self._steps = 0
        self._time_base = Fraction(0)  # exact time at the last dt change or restore
        self._time_steps = 0  # steps of dt taken since then (folded in only when read)
        self._dt: float | None = None
        self._fdt: tuple[float, Fraction] | None = None  # dt and Fraction(dt), cached
        self._threads = num_threads
        act = [j.actuator for j in lay.joints]
        self._pd = np.array([a == "pd" for a in act], dtype=bool)
        self._limit = np.array([j.limit for j in lay.joints], dtype=np.float64)
        self._kp = np.array([j.kp for j in lay.joints], dtype=np.float64)
        self._kd = np.array([j.kd for j in lay.joints], dtype=np.float64)
        self._actuated = np.array([a != "none" for a in act], dtype=bool)
        self._cols = np.arange(self._nj)
        self._bounds: tuple[np.ndarray, np.ndarray] | None = None
        self._any_pd = bool(self._pd.any())
        self._state_dependent = self._any_pd or any(
            j.kind == "prismatic" and j.parent >= 0 and j.actuator != "none" for j in lay.joints
        )
        self._rolling = bool((lay.roll_radius > 0).any())
        # static/dynamic friction without a callback: per moving body, stick (True) or
        # slide, decided after every step from its contacts with the main static material
        # (bodies whose two values differ; nothing to do without a main static material)
        self._fric_bodies = np.flatnonzero(lay.dynamic & (lay.stick_value != lay.slide_value))
        self._fric = bool(lay.needs_handler and self._fric_bodies.size and lay.main_static.any())
        self._stick = np.ones((num_envs, self._nb), dtype=bool)
        # per body: 1 if its regime is chosen, 2 if of the main static material, else 0
        self._fric_code = np.zeros(self._nb, dtype=np.int64)
        self._fric_code[self._fric_bodies] = 1
        self._fric_code[lay.main_static] = 2
        # whether a friction body's centre of gravity is off its origin (else r is simpler)
        self._fric_cog = bool(np.any(lay.cog[self._fric_bodies] != 0.0))
        self._speed = np.full(num_envs * self._nb, -1.0)  # scratch of _update_friction
        self._arb: tuple | None = None  # the last step's arbiters of every copy, cached
        # effort -> force terms of state-independent actuators: (joint, body, component,
        # coefficient), applied in joint order as out[:, body, component] += e * coefficient
        self._terms: list[tuple[int, int, int, float]] = []
        for k, jl in enumerate(lay.joints):
            if jl.actuator == "none":
                continue
            if jl.kind == "revolute":
                self._terms.append((k, jl.child, 2, 1.0))
                if jl.parent >= 0:
                    self._terms.append((k, jl.parent, 2, -1.0))
            elif jl.kind == "prismatic" and jl.parent < 0:
                # a zero component adds only +-0.0 to +0.0: left out (the same +0.0)
                for comp in (0, 1):
                    if jl.axis[comp] != 0.0:
                        self._terms.append((k, jl.child, comp, jl.axis[comp]))
        # sensors
        self._rngs = [
            np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(num_envs)
        ]
        self._sensor_specs = {s.name: s for s in scene.sensors}
        self._pipelines: dict[str, SensorPipeline] = {}
        self._need_contacts = self._rolling or any(s.kind == "contact" for s in scene.sensors)
        self._body_index = {p: i for i, p in enumerate(lay.body_paths)}
        self._joint_index = {p: i for i, p in enumerate(lay.joint_paths)}
        self._v_prev = np.zeros((num_envs, self._nb, 2))
        self._log = ReplayLog()  # docs/world.md, "Snapshots"
        self._epoch = np.zeros(num_envs, dtype=np.int64)
        self._log.append(0, Kind.BUILD, self._all.copy())
        # rebasing: the step of each copy's last rebuild, and when the oldest reaches the bound
        self._max_log = int(max_log_steps)
        self._epoch_step = np.zeros(num_envs, dtype=np.int64)
        self._rebase_at = self._max_log
        self._read_in_step = False
        self._read_in_step_ids = self._all[:0]
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
    def max_log_steps(self) -> int:
        """Physics steps a copy runs before it is rebased (bounds the replay log)."""
        return self._max_log

    @property
    def step_count(self) -> int:
        """Physics steps taken since the World was built (restored with snapshots)."""
        return self._steps

    @property
    def _time(self) -> Fraction:
        """Exact simulated time: a count of steps times Fraction(dt), summed only on read."""
        if self._time_steps:
            return self._time_base + self._time_steps * self._fdt[1]
        return self._time_base

    @_time.setter
    def _time(self, value: Fraction) -> None:
        self._time_base = value
        self._time_steps = 0

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

    def _ensure(self) -> None:
        if self._since_read:
            self._read_period = self._since_read
            self._since_read = 0
        if not self._state_valid.all():
            stale = np.flatnonzero(~self._state_valid)
            self._read(stale)
            self._check_finite(stale)

    def _check_finite(self, ids: np.ndarray | None = None) -> None:
        """Raise if the state just read (copies ``ids``, None: all) holds NaN or inf.

        One pass over the rows (no warnings, whatever the values); only when it fails are
        the rows searched for the bodies to name.

        Raises:
            FloatingPointError: Naming the copies and bodies whose state is not finite.
        """
        raw = self._backend.raw if ids is None or ids.size == self._n else self._raw()[ids]
        ok = np.isfinite(raw)
        if ok.all():
            return
        rows = np.arange(self._n) if ids is None or ids.size == self._n else ids
        bad = ~ok.all(axis=2)
        copies = rows[bad.any(axis=1)].tolist()
        pairs = [
            f"{self.body_names[b]!r} in copy {rows[k]}"
            for k, b in zip(*np.nonzero(bad), strict=True)
        ]
        shown = ", ".join(pairs[:6]) + (f" and {len(pairs) - 6} more" if len(pairs) > 6 else "")
        raise FloatingPointError(
            f"World: body state must stay finite, got NaN or inf after step {self._steps} in "
            f"copies {copies[:20]}{'...' if len(copies) > 20 else ''}: {shown}; the simulation "
            "diverged (extreme masses, sizes, forces or dt): reset those copies "
            "(reset_envs / set_body_states) before reading or stepping them again"
        )

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

    def body_state(self, body_index: int) -> np.ndarray:
        """One body's state in every copy, ``(num_envs, 6)``: x, y, angle, vx, vy, omega.

        The columns of :attr:`body_poses` and :attr:`body_velocities` for that body,
        without copying every body's (a new array).

        Raises:
            ValueError: If ``body_index`` is not an int in ``[0, n_bodies)``.
        """
        b = self._index_arg(body_index, len(self.body_names), "body_state: body_index")
        self._ensure()
        return self._raw()[:, b].copy()

    @property
    def joint_positions(self) -> np.ndarray:
        """Joint positions, ``(num_envs, n_joints)`` (rad or m from the initial pose)."""
        return self._joints()[0].copy()

    @property
    def joint_velocities(self) -> np.ndarray:
        """Joint velocities, ``(num_envs, n_joints)`` (rad/s or m/s)."""
        return self._joints()[1].copy()

    def _joints(self) -> tuple[np.ndarray, np.ndarray]:
        self._jc.wanted = True
        self._ensure()
        if not self._jvalid.all():
            bad = np.flatnonzero(~self._jvalid)
            rows: slice | np.ndarray = slice(None) if bad.size == self._n else bad
            self._jpos[rows], self._jvel[rows] = self._joint_state(self._raw()[rows])
            self._jvalid[rows] = True
        return self._jpos, self._jvel

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

    # ------------------------------------------------------------------ constants
    @property
    def body_masses(self) -> np.ndarray:
        """Mass of each body in kg, ``(n_bodies,)``, as pymunk computed it (0: not dynamic).

        Shapes share a body's mass in proportion to their areas (docs/scene.md); the
        same for every copy and constant for the World's life (a copy).
        """
        return self._layout.mass.copy()

    @property
    def body_centers_of_gravity(self) -> np.ndarray:
        """Centre of gravity of each body in its own frame (m), ``(n_bodies, 2)`` (a copy)."""
        return self._layout.cog.copy()

    @property
    def body_moments(self) -> np.ndarray:
        """Moment of inertia of each body about its centre of gravity (kg m^2), ``(n_bodies,)``.

        0 for static and kinematic bodies (a copy).
        """
        return self._layout.moment.copy()

    @property
    def initial_body_poses(self) -> np.ndarray:
        """Scene poses of the bodies (x, y, angle) in a copy's frame, ``(n_bodies, 3)``."""
        return self._layout.initial.copy()

    @property
    def joint_layouts(self) -> tuple[JointLayout, ...]:
        """Constant geometry of each joint (frozen), in :attr:`joint_names` order.

        kelab.sim's compiled form (parent/child body indices, anchors in the body frames,
        axis, initial relative angle, actuator); used by ``RobotView``'s kinematics.
        """
        return self._layout.joints

    def _joint_state(self, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _joint_state(self._layout, raw)

    # ------------------------------------------------------------------ writing
    def _ids(self, env_ids: npt.ArrayLike | None, repeats: bool = False) -> np.ndarray:
        """Copy indices from ``env_ids``: None (all), unique ints in range, or a bool mask.

        ``repeats``: for resets, where a copy listed twice is reset once (the repeats are
        dropped, the order of first appearance kept); elsewhere values come with the ids
        and a repeated id is refused (which row would win?).

        Raises:
            ValueError: For non-integer ids (floats, strings, a bool), ids out of range,
                repeated ids, or a mask of the wrong shape.
        """
        if env_ids is None:
            return self._all
        n = self._n
        if is_bool(env_ids):
            raise ValueError(
                f"env_ids must be copy indices (ints in [0, {n})) or a bool mask of shape "
                f"({n},), got the bool {bool(env_ids)}; pass e.g. [0] or None for every copy"
            )
        try:
            ids = np.asarray(env_ids)
        except (TypeError, ValueError):
            raise ValueError(
                f"env_ids must be copy indices (ints in [0, {n})) or a bool mask, got "
                f"{_short(env_ids)}"
            ) from None
        if ids.dtype == bool:
            if ids.shape != (n,):
                raise ValueError(f"env_ids mask must have shape ({n},), got {ids.shape}")
            return np.flatnonzero(ids)
        if isinstance(env_ids, (list, tuple)) and any(
            is_bool(x) for x in env_ids
        ):  # bools among ints: numpy would read them as 0 and 1
            raise ValueError(
                f"env_ids must be integer copy indices in [0, {n}) or a bool mask of shape "
                f"({n},), got bools mixed with other values: {_short(env_ids)}"
            )
        if ids.size == 0 and ids.ndim == 1:
            return ids.astype(np.int64)
        if ids.dtype.kind not in "iu" or ids.ndim > 1:
            raise ValueError(
                f"env_ids must be integer copy indices in [0, {n}) (a 1-D list or array) or a "
                f"bool mask of shape ({n},), got {_short(env_ids)} (dtype {ids.dtype}, shape "
                f"{ids.shape}); convert with np.asarray(ids, dtype=int) if they are whole numbers"
            )
        ids = ids.astype(np.int64).reshape(-1)
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= n or (ids.dtype.kind == "u" and hi < 0):
            raise ValueError(f"env_ids must be in [0, {n}), got min {lo} max {hi}")
        if ids.size > 1 and (
            len(set(ids.tolist())) != ids.size
            if ids.size <= 64  # a set is cheaper than a sort for a few ids
            else not (np.diff(np.sort(ids)) != 0).all()
        ):
            uniq, first, counts = np.unique(ids, return_index=True, return_counts=True)
            if repeats:
                return ids[np.sort(first)]
            raise ValueError(
                f"env_ids must be unique (each copy once), got {uniq[counts > 1].tolist()} "
                "more than once; pass each copy once (the last of repeated rows would win)"
            )
        return ids

    def _controls(
        self,
        kind: Kind,
        values: npt.ArrayLike,
        joint_ids: npt.ArrayLike | None = None,
        env_ids: npt.ArrayLike | None = None,
    ) -> None:
        ids = self._ids(env_ids)
        ncols = self._nj if joint_ids is None else np.size(joint_ids)
        vals = _float_array(values, "joint commands")
        try:
            if vals.shape != (ids.size, ncols):
                vals = np.broadcast_to(vals, (ids.size, ncols))
        except ValueError:
            raise ValueError(
                f"values must have shape ({ids.size}, {ncols}) (copies, joints), got {vals.shape}"
            ) from None
        # a finite sum means every value is finite (one pass); else look closer (overflow)
        if not (math.isfinite(vals.sum()) or np.isfinite(vals).all()):
            raise ValueError("joint commands must be finite numbers")
        target = self._efforts if kind == Kind.EFFORTS else self._targets
        if joint_ids is not None and ncols == self._nj and ids is self._all:
            cols = np.asarray(joint_ids, np.int64).reshape(-1)
            if len(set(cols.tolist())) == self._nj and 0 <= cols.min() and cols.max() < ncols:
                # every joint, in another order: put the columns in joint order (no
                # fancy indexing of rows below)
                ordered = np.empty((ids.size, self._nj))
                ordered[:, cols] = vals
                vals, joint_ids = ordered, None
        every = joint_ids is None and ids is self._all
        if not every:
            cols = np.asarray(self._cols if joint_ids is None else joint_ids, np.int64)
            cols = cols.reshape(-1)
        if kind == Kind.EFFORTS:
            if every:  # the common case: all copies, all joints (no fancy indexing)
                # limits broadcast to the full shape once: a (nj,) operand would make
                # numpy loop over rows of nj elements (same values as np.clip); the
                # bounds of joints without an actuator are [0, 0]: their effort is 0
                lo, hi = self._clip_bounds()
                full = np.maximum(vals, lo)
                np.minimum(full, hi, out=full)
            else:
                full = target[ids]
                lim = self._limit[cols]
                full[:, cols] = np.where(self._actuated[cols], np.clip(vals, -lim, lim), 0.0)
        elif every:
            full = np.array(vals)
        else:
            full = target[ids]
            full[:, cols] = vals
        if every:
            target[...] = full
        else:
            target[ids] = full
        self._forces_dirty = True
        # self._all is read-only: logged as is (other id arrays may be the caller's)
        self._log.append(self._steps, kind, ids if ids is self._all else ids.copy(), full, None)

    def _clip_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Effort bounds as contiguous ``(num_envs, n_joints)`` arrays (-limit, limit).

        A joint without an actuator gets [+0.0, +0.0]: its effort is always +0.0.
        """
        if self._bounds is None:
            limit = np.where(self._actuated, self._limit, 0.0)  # no actuator: [0, 0]
            hi = np.ascontiguousarray(np.broadcast_to(limit, (self._n, self._nj)))
            self._bounds = (np.where(self._actuated, -hi, 0.0), hi)
        return self._bounds

    def set_joint_efforts(
        self,
        efforts: npt.ArrayLike,
        env_ids: npt.ArrayLike | None = None,
        joint_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold joint efforts (N or N·m) until changed, clipped to each actuator's limit.

        Joints without an actuator ignore their column (effort 0).

        Args:
            efforts: ``(len(env_ids), len(joint_ids))`` (broadcastable).
            env_ids: Copies to command; None means all.
            joint_ids: World joint indices (unique ints in ``[0, n_joints)``, columns of
                ``efforts`` in that order); None means every joint. Other joints keep
                their held efforts.

        Raises:
            ValueError: On a wrong shape, non-finite values or bad ids.
        """
        self._controls(Kind.EFFORTS, efforts, self._joint_cols(joint_ids), env_ids)

    def set_joint_position_targets(
        self,
        targets: npt.ArrayLike,
        env_ids: npt.ArrayLike | None = None,
        joint_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold PD position targets (rad or m) until changed; used by PD actuators.

        Args:
            targets: ``(len(env_ids), len(joint_ids))`` (broadcastable).
            env_ids: Copies to command; None means all.
            joint_ids: World joint indices as in :meth:`set_joint_efforts`; None: all.

        Raises:
            ValueError: On a wrong shape, non-finite values or bad ids.
        """
        self._controls(Kind.TARGETS, targets, self._joint_cols(joint_ids), env_ids)

    def _joint_cols(self, joint_ids: npt.ArrayLike | None) -> np.ndarray | None:
        """World joint indices from ``joint_ids`` (None stays None: every joint).

        Raises:
            ValueError: For non-integers, a bool, indices out of range or repeats.
        """
        if joint_ids is None:
            return None
        nj = self._nj
        cols = None if is_bool(joint_ids) else np.asarray(joint_ids)
        if cols is None or (cols.dtype.kind not in "iu" and cols.size) or cols.ndim > 1:
            raise ValueError(
                f"joint_ids must be joint indices (ints in [0, {nj})) as one int or a 1-D "
                f"list, got {_short(joint_ids)}; find them with joint_names.index(path)"
            )
        cols = cols.reshape(-1).astype(np.int64)
        listed = cols.tolist()
        if listed and (min(listed) < 0 or max(listed) >= nj):
            raise ValueError(f"joint_ids must be in [0, {nj}), got {listed}")
        if len(set(listed)) != len(listed):
            raise ValueError(f"joint_ids must be unique, got {listed}; list each joint once")
        return cols

    def env_indices(self, env_ids: npt.ArrayLike | None, repeats: bool = False) -> np.ndarray:
        """Copy indices as every writer reads ``env_ids`` (None: every copy).

        Args:
            env_ids: None, one int, unique ints in ``[0, num_envs)`` or a bool mask of
                shape ``(num_envs,)``.
            repeats: Drop repeated ids (keeping the first) instead of refusing them, as
                resets do.

        Returns:
            int64 indices (read-only when they are every copy).

        Raises:
            ValueError: As the writers do (docs/world.md, "API").
        """
        return self._ids(env_ids, repeats)

    @property
    def external_forces(self) -> np.ndarray:
        """Held external forces per body, ``(num_envs, n_bodies, 3)``: fx, fy, torque.

        Set with :meth:`set_body_forces` / :meth:`apply_force_at_point`; zero after a reset.
        """
        return self._ext.copy()

    def set_body_forces(
        self,
        forces: npt.ArrayLike,
        torques: npt.ArrayLike | None = None,
        env_ids: npt.ArrayLike | None = None,
    ) -> None:
        """Hold external forces and torques on bodies until changed (like joint efforts).

        Each physics step they are added to the actuator forces: a force acts at the
        body's centre of mass, in world axes (the copy's frame). Resetting a copy clears
        its forces. The call is recorded in the replay log, so snapshots stay exact.
        Static bodies ignore theirs.

        Args:
            forces: ``(len(env_ids), n_bodies, 2)`` fx, fy in newtons.
            torques: ``(len(env_ids), n_bodies)`` in N·m; None means zero.
            env_ids: Copies to set (indices or a bool mask); None means all. Copies not
                listed keep their forces.

        Raises:
            ValueError: On a wrong shape (the message names the argument, the shape seen
                and the shape expected), non-finite values or bad ids.

        Example:
            >>> import numpy as np
            >>> import kelab as ke
            >>> b = ke.SceneBuilder()
            >>> _ = b.add(ke.Prop(ke.Circle(0.1), mass=2.0), at="/World/Ball")
            >>> world = ke.World(b.build(), num_envs=2)
            >>> world.set_body_forces(np.tile([0.0, 2.0 * 9.81], (2, 1, 1)))  # hovers
            >>> world.step(1 / 60)
            >>> float(world.body_velocities[0, 0, 1])
            0.0
        """
        ids = self._ids(env_ids)
        f = _float_array(forces, "set_body_forces: forces")
        want = (ids.size, self._nb, 2)
        if f.shape != want:
            raise ValueError(
                f"set_body_forces: forces must have shape {want} (copies, bodies, fx/fy), "
                f"got {f.shape}"
            )
        if torques is None:
            t = np.zeros(want[:2])
        else:
            t = _float_array(torques, "set_body_forces: torques")
            if t.shape != want[:2]:
                raise ValueError(
                    f"set_body_forces: torques must have shape {want[:2]} (copies, bodies), "
                    f"got {t.shape}"
                )
        if not (np.isfinite(f).all() and np.isfinite(t).all()):
            raise ValueError("set_body_forces: forces and torques must be finite numbers")
        full = np.empty((ids.size, self._nb, 3))
        full[:, :, 0:2] = f
        full[:, :, 2] = t
        full[:, ~self._layout.dynamic] = 0.0
        self._ext[ids] = full
        self._ext_any = bool(self._ext.any())
        self._forces_dirty = True
        self._log.append(self._steps, Kind.FORCES, ids.copy(), full, None)

    def apply_force_at_point(self, env_id: int, body_index: int, force: Any, point: Any) -> None:
        """Hold a force on one body, applied at a point: sets its force and torque r x F.

        Replaces that body's held external force in copy ``env_id`` (other bodies keep
        theirs) with ``force`` at its centre of mass plus the torque ``r x F``,
        ``r = point - centre of mass`` at the body's present pose. The lever arm is not
        updated as the body turns: call again every frame while dragging (App), and
        ``set_body_forces`` with zeros (or this with a zero force) to release.

        Args:
            env_id: The copy.
            body_index: Index into :attr:`body_names`; must be a moving body.
            force: ``(2,)`` fx, fy in newtons, world axes.
            point: ``(2,)`` application point in the copy's frame, metres.

        Raises:
            ValueError: On a bad index, a static body, wrong shapes or non-finite values.
        """
        env = self._index_arg(env_id, self._n, "env_id")
        b = self._index_arg(body_index, self._nb, "body_index")
        if not self._layout.dynamic[b]:
            raise ValueError(
                f"apply_force_at_point: body {b} ({self.body_names[b]!r}) is static; "
                "forces act on moving bodies only"
            )
        f = _vec2(force, "apply_force_at_point: force")
        p = _vec2(point, "apply_force_at_point: point")
        self._ensure()
        c = _cog_world(self._raw()[env : env + 1, b], self._layout.cog[b])[0]
        tau = (p[0] - c[0]) * f[1] - (p[1] - c[1]) * f[0]
        row = self._ext[env : env + 1].copy()
        row[0, b] = (f[0], f[1], tau)
        self.set_body_forces(row[:, :, 0:2], row[:, :, 2], [env])

    def body_at(self, point: Any, env_id: int = 0, tolerance: float = 0.0) -> int | None:
        """Index (into :attr:`body_names`) of the moving body under a point, or None.

        Uses pymunk's exact shapes at the bodies' present poses (a point query on each
        shape of the copy's moving bodies), in either layout. Static bodies are never
        returned. Among several hits the one the point is deepest in wins.

        Args:
            point: ``(2,)`` x, y in the copy's frame, metres.
            env_id: The copy.
            tolerance: Also accept shapes at most this far from the point (metres, >= 0).

        Raises:
            ValueError: On a bad point, copy index or tolerance.
        """
        env = self._index_arg(env_id, self._n, "env_id")
        p = _vec2(point, "body_at: point")
        tolerance = check_positive(tolerance, "body_at: tolerance", allow_zero=True)
        return self._backend.body_at(env, float(p[0]), float(p[1]), tolerance)

    @staticmethod
    def _index_arg(value: Any, size: int, name: str) -> int:
        if not (is_int(value) and 0 <= value < size):
            raise ValueError(must(name, f"an int in [0, {size})", value))
        return int(value)

    def set_body_states(
        self,
        env_ids: npt.ArrayLike | None,
        poses: npt.ArrayLike,
        velocities: npt.ArrayLike | None = None,
    ) -> None:
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
        poses = np.array(_float_array(poses, "set_body_states: poses"))
        vels = (
            np.zeros(shape)
            if velocities is None
            else np.array(_float_array(velocities, "set_body_states: velocities"))
        )
        for name, arr, what in (("poses", poses, "x, y, angle"), ("velocities", vels, "vx, vy, w")):
            if arr.shape != shape:
                raise ValueError(
                    f"set_body_states: {name} must have shape {shape} (copies, bodies, {what}), "
                    f"got {arr.shape}; read the present ones with body_poses / body_velocities "
                    "and change the rows to set"
                )
        problem = _body_states_error(poses, vels)
        if problem is not None:
            raise ValueError(
                f"set_body_states: poses and velocities {problem}; give a state the "
                "simulation can step from"
            )
        self._rebuild(ids, place=False)  # every moving body's state is written next
        self._write_states(ids, poses, vels)
        self._log.append(self._steps, Kind.STATES, ids.copy(), poses.copy(), vels.copy())
        self._after_reset(ids)

    def reset_envs(self, env_ids: npt.ArrayLike | None = None) -> None:
        """Reset copies to the scene's initial configuration (zero velocity, no history).

        Args:
            env_ids: Copies to reset (indices, a copy listed twice is reset once, or a
                bool mask); None means all.
        """
        ids = self._ids(env_ids, repeats=True)
        self._rebuild(ids)
        self._after_reset(ids)

    def _rebuild(self, ids: np.ndarray, place: bool = True) -> None:
        self._backend.rebuild(ids, place)
        self._forget(ids, ids)
        self._normals[ids] = 0.0
        self._log.append(self._steps, Kind.BUILD, ids.copy())
        self._epoch[ids] = len(self._log) - 1
        if ids.size:
            self._epoch_step[ids] = self._steps
            self._rebase_at = int(self._epoch_step.min()) + self._max_log
        self._contacts = None
        if self._epoch.min() > 0:
            self._log.prune(self._epoch)

    def _forget(self, rebuilt: np.ndarray, zeroed: np.ndarray) -> None:
        """The World's side of a rebuild (live resets and replays alike).

        Copies ``rebuilt`` were just rebuilt by the backend: their friction regimes stick
        again (the rebuilt shapes carry their sticking values), they have not stepped, no
        arbiters are cached and their state must be read. Copies ``zeroed`` lose their held
        controls (efforts, targets, external forces), as a reset's do.
        """
        self._stick[rebuilt] = True
        self._arb = None
        self._touched[rebuilt] = False
        self._state_valid[rebuilt] = False
        self._efforts[zeroed] = 0.0
        self._targets[zeroed] = 0.0
        self._ext[zeroed] = 0.0
        self._ext_any = bool(self._ext_any and self._ext.any())
        self._forces_dirty = True

    def _write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        self._backend.write_states(ids, poses, vels)
        self._state_valid[ids] = False

    def _after_reset(self, ids: np.ndarray) -> None:
        self._read(ids)
        self._v_prev[ids] = self._raw()[ids][:, :, 3:5]
        self._prime(ids)

    # ------------------------------------------------------------------ stepping
    def step(self, dt: float) -> None:
        """Advance every copy by one physics step of ``dt`` seconds.

        Args:
            dt: Step size in seconds, finite and > 0.

        Raises:
            ValueError: If ``dt`` is not a finite number > 0.
        """
        if dt.__class__ is not float or dt != self._dt:  # else: the dt checked before
            dt = self._new_dt(dt)
        self._advance(dt, self._all)
        self._steps += 1
        if self._fdt is None or self._fdt[0] != dt:
            self._time = self._time  # fold the steps taken at the old dt
            self._fdt = (dt, Fraction(dt))
        self._time_steps += 1
        if self._read_in_step:  # a state read during the step: checked before use
            self._check_finite(self._read_in_step_ids)
        if self._sensor_specs:
            self._update_sensors(dt)
        if self._steps >= self._rebase_at:
            self._rebase()

    def _rebase(self) -> None:
        """Rebase the copies that have run ``max_log_steps`` steps since their last rebuild.

        Each is reset to its own present state, as :meth:`set_body_states` would (rebuilt:
        no contact or joint warm starts, friction regimes sticking; its poses and
        velocities written back), but its held controls carry over and its sensors and
        IMU history are left alone. Logged as a rebuild, a state write and the controls,
        so a replay from there reproduces it bit for bit, and the rebuild ends the copy's
        log (entries older than every copy's last rebuild are dropped).
        """
        ids = np.flatnonzero(self._steps - self._epoch_step >= self._max_log)
        if ids.size == 0:
            self._rebase_at = int(self._epoch_step.min()) + self._max_log
            return
        if self._contacts is None:  # the step's contacts stay readable after the rebuild
            self._read_contacts(self._all)
        contacts = self._contacts
        stale = ids[~self._state_valid[ids]]
        if stale.size:
            self._jc.eager = False  # a read of the World's own (never changes physics)
            self._read(stale)
            self._jc.eager = True
        self._check_finite(ids)
        raw = self._raw()[ids]
        poses, vels = raw[:, :, 0:3].copy(), raw[:, :, 3:6].copy()
        held = [
            (Kind.EFFORTS, self._efforts, self._efforts[ids].copy()),
            (Kind.TARGETS, self._targets, self._targets[ids].copy()),
            (Kind.FORCES, self._ext, self._ext[ids].copy()),
        ]
        self._rebuild(ids, place=False)
        self._write_states(ids, poses, vels)
        self._log.append(self._steps, Kind.STATES, ids.copy(), poses, vels)
        for kind, target, values in held:
            if values.any():  # a rebuild zeroes them: only non-zero ones are logged
                target[ids] = values
                self._log.append(self._steps, kind, ids.copy(), values, None)
        self._ext_any = bool(self._ext.any())
        self._forces_dirty = True
        self._contacts = contacts

    def _new_dt(self, dt: Any) -> float:
        """Check a step's ``dt`` that differs from the last one; log a change of dt."""
        dt = check_positive(dt, "World.step: dt", unit="seconds")
        if dt != self._dt:
            if self._dt is not None and self._pipelines:
                raise ValueError(
                    f"World.step: dt changed from {self._dt} to {dt}; sensors need a fixed dt"
                )
            self._dt = dt
            self._log.append(self._steps, Kind.DT, self._all[:0], np.array([dt]), None)
            if not self._pipelines and self._sensor_specs:
                self._make_pipelines(dt)
        return dt

    def _advance(self, dt: float, ids: np.ndarray, replay: bool = False) -> None:
        """One physics step for copies ``ids`` (forces, step, contact bookkeeping).

        The packed layout steps every copy of its shared spaces; copies outside ``ids``
        (only during a replay: not yet started) then run with zero forces. The stepping
        threads also read the state after the step when it will be needed: before the next
        step (state-dependent forces), by the sensors, or by a reader that has been asking
        every ``_read_period`` steps (reading never changes the physics).
        """
        needs_state = self._state_dependent or self._rolling
        if needs_state:
            need = ids[~self._state_valid[ids]]
            if need.size:
                self._read(need)
        if self._forces_dirty or needs_state or ids.size != self._n:
            self._compute_forces(ids, dt)
            self._forces_dirty = ids.size != self._n
        if replay:
            read = needs_state
            self._jc.eager = False
        else:
            self._since_read += 1
            # the joint state is computed after a step's read only for the
            # read a reader is expected to follow; other reads just invalidate it
            self._jc.eager = expected = self._since_read == self._read_period
            read = needs_state or bool(self._sensor_specs) or expected
        done = self._backend.step(dt, ids, read)
        self._read_in_step = bool(done.size)
        self._read_in_step_ids = done
        self._jc.eager = True
        stepped = self._backend.stepped(ids)
        if stepped.size == self._n:  # every copy stepped: whole-array writes, no fancy indexing
            stepped = self._all
            self._touched[:] = True
            self._state_valid[:] = done.size == self._n  # all or none read
        else:
            stepped = ids
            self._touched[stepped] = True
            self._state_valid[stepped] = False
            self._state_valid[done] = True
        self._contacts = None
        self._arb = None
        self._last_dt = dt
        if self._fric:
            self._update_friction(stepped)
        if self._rolling:
            self._read_contacts(ids)

    def _compute_forces(self, ids: np.ndarray, dt: float) -> None:
        lay = self._layout
        out = np.zeros((ids.size, self._nb, 3))
        all_ids = ids.size == self._n
        effort = self._efforts if all_ids else self._efforts[ids]
        raw = None
        if self._state_dependent or self._rolling:
            raw = self._raw() if all_ids else self._raw()[ids]
        if self._any_pd:
            assert raw is not None
            pos, vel = self._joint_state(raw)
            pd = self._kp * (self._targets[ids] - pos) - self._kd * vel
            effort = effort.copy()
            effort[:, self._pd] = np.clip(pd, -self._limit, self._limit)[:, self._pd]
        terms = self._terms
        t = 0
        for k, jl in enumerate(lay.joints):
            if jl.actuator == "none":
                continue
            e = effort[:, k]
            if not (jl.kind == "prismatic" and jl.parent >= 0):
                # constant directions (precomputed terms, applied in joint order)
                while t < len(terms) and terms[t][0] == k:
                    _, b, comp, coef = terms[t]
                    if coef == 1.0:
                        out[:, b, comp] += e
                    elif coef == -1.0:
                        out[:, b, comp] -= e
                    else:
                        out[:, b, comp] += e * coef
                    t += 1
                continue
            if jl.kind == "prismatic":
                assert raw is not None
                pa = raw[:, jl.parent, 2]
                ca, sa = np.cos(pa), np.sin(pa)
                ax = ca * jl.axis[0] - sa * jl.axis[1]
                ay = sa * jl.axis[0] + ca * jl.axis[1]
                fx, fy = e * ax, e * ay
                out[:, jl.child, 0] += fx
                out[:, jl.child, 1] += fy
                if jl.parent >= 0:
                    assert raw is not None
                    cc = _cog_world(raw[:, jl.child], lay.cog[jl.child])
                    pc = _cog_world(raw[:, jl.parent], lay.cog[jl.parent])
                    rx, ry = cc[:, 0] - pc[:, 0], cc[:, 1] - pc[:, 1]
                    out[:, jl.parent, 0] -= fx
                    out[:, jl.parent, 1] -= fy
                    out[:, jl.parent, 2] -= rx * fy - ry * fx
        if self._rolling:
            assert raw is not None
            round_ = lay.roll_radius > 0
            w = raw[:, round_, 5]
            cap = np.abs(w) * lay.moment[round_] / dt
            tau = np.minimum(
                lay.roll_mu[round_] * self._normals[ids][:, round_] * lay.roll_radius[round_], cap
            )
            out[:, round_, 2] -= np.sign(w) * tau
        if self._ext_any:
            out += self._ext[ids]
        if ids.size != self._n and self._layout_name == "packed":
            full = np.zeros((self._n, self._nb, 3))  # the others run without forces
            full[ids] = out
            self._backend.set_forces(self._all, full)
        else:
            self._backend.set_forces(ids, out)

    # ------------------------------------------------------------------ contacts
    def _arbiters(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last step's arbiters of copies ``ids`` (read once per step for all copies)."""
        if ids.size != self._n:
            return self._backend.arbiters(ids)
        if self._arb is None:
            self._arb = self._backend.arbiters(self._all)
        return self._arb

    def _update_friction(self, ids: np.ndarray) -> None:
        """Choose static or dynamic friction per moving body for the next step (batched).

        A moving body sticks (its shapes carry the static combination with the main static
        material) while the tangential speed at its contacts with that material stays at
        most ``SLIDE_SPEED_THRESHOLD``; it slides (dynamic combination) above that, until
        the speed drops below ``STATIC_SPEED_THRESHOLD``. A body without such a contact
        in the last step sticks (as after a reset). The speed is that of the body's point
        at each contact point of the last step, from its velocities after the step, so the
        choice lags the contact by one step (docs/world.md, "Materials"). Only bodies whose
        regime changed get new values (one C call per shape).
        """
        lay = self._layout
        nb = self._nb
        rows, count, f = self._backend.friction_arbiters(ids, self._fric_code)
        speed = self._speed  # -1 where no contact was seen (reset to -1 below)
        if rows.size:
            # the body states after this step, x in the shard's space (contact points are)
            fresh = None if self._state_valid.all() else self._backend.contact_states(rows)
            if fresh is not None:  # the rows alone, fresh (reading never changes physics)
                st = fresh
                x = st[:, 0]
            else:
                copies = np.unique(rows // nb)
                stale = copies[~self._state_valid[copies]]
                if stale.size:
                    self._jc.eager = False  # the joint state is not needed here
                    self._read(stale)
                    self._jc.eager = True
                st = self._backend.raw.reshape(-1, 6)[rows]
                x = st[:, 0] + self._backend.origin_x[rows // nb]
            if self._fric_cog:  # r = contact point - centre of gravity (world)
                b = rows % nb
                ca, sa = np.cos(st[:, 2]), np.sin(st[:, 2])
                cog = lay.cog[b]
                cx = x + ca * cog[:, 0] - sa * cog[:, 1]
                cy = st[:, 1] + sa * cog[:, 0] + ca * cog[:, 1]
            else:  # every friction body has its centre of gravity at its origin
                cx, cy = x, st[:, 1]
            rx = f[:, 4::2] - cx[:, None]
            ry = f[:, 5::2] - cy[:, None]
            w = st[:, 5:6]
            vx = st[:, 3:4] - w * ry
            vy = st[:, 4:5] + w * rx
            # tangential speed |v - (v.n) n| = |v x n| for the unit normal n
            sp = np.abs(vx * f[:, 3:4] - vy * f[:, 2:3])
            # the larger of the two points' speeds where there are two (np.maximum of the
            # columns: the same values as sp.max(axis=1), without an axis reduction)
            best = np.where(count > 1, np.maximum(sp[:, 0], sp[:, 1]), sp[:, 0])
            np.maximum.at(speed, rows, best)
        stick = self._stick.reshape(-1)
        cand = (speed >= 0.0) | ~stick  # seen this step, or sliding (sticks when unseen)
        if ids.size != self._n:
            inside = np.zeros(self._n, dtype=bool)
            inside[ids] = True
            cand &= np.repeat(inside, nb)
        cand = np.flatnonzero(cand)
        if cand.size:
            sp = speed[cand]
            was = stick[cand]
            now = np.where(was, sp <= SLIDE_SPEED_THRESHOLD, sp < STATIC_SPEED_THRESHOLD)
            now |= sp < 0.0
            flip = now != was
            changed = cand[flip]
            if changed.size:
                stick[changed] = now[flip]
                b = changed % nb
                self._backend.set_friction(
                    changed, np.where(now[flip], lay.stick_value[b], lay.slide_value[b])
                )
        if rows.size:
            speed[rows] = -1.0

    def _read_contacts(self, ids: np.ndarray) -> None:
        """Sum the last step's contact impulses per body (force = impulse / dt)."""
        dt = getattr(self, "_last_dt", None)
        contacts = np.zeros((self._n, self._nb, 2))
        normals = np.zeros((self._n, self._nb))
        if dt is not None:
            ra, rb, _, fl = self._arbiters(ids)
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
        """Create the sensor pipelines (they need dt) primed with the current state."""
        for s in self._scene.sensors:
            self._pipelines[s.name] = SensorPipeline(
                s.config, self._n, _SENSOR_WIDTH[s.kind], dt, self._rngs
            )
        self._prime(self._all)

    def _prime(self, ids: np.ndarray) -> None:
        """Reset the pipelines of copies ``ids`` primed with their present ideal values."""
        if not self._pipelines or ids.size == 0:
            return
        ideals = self._ideals(ids, after_step=False)
        for name, p in self._pipelines.items():
            p.reset(ids, ideal=ideals[name])

    def _update_sensors(self, dt: float) -> None:
        ideals = self._ideals(self._all, after_step=True, dt=dt)
        for name, p in self._pipelines.items():
            p.update(ideals[name])
        self._v_prev[:] = self._raw()[:, :, 3:5]

    def _ideals(
        self, ids: np.ndarray, after_step: bool, dt: float | None = None
    ) -> dict[str, np.ndarray]:
        """Ideal (true) value of every sensor for copies ``ids``, ``{name: (len(ids), k)}``.

        ``after_step``: the values right after a physics step of ``dt`` (IMU acceleration
        from the velocity change, contact forces of that step). Otherwise the values of
        the present state as if it had been held: zero linear acceleration (the IMU reads
        -gravity in its frame) and no contact force (nothing has touched since a rebuild).
        """
        if not self._state_valid[ids].all():
            self._read(ids[~self._state_valid[ids]])
        all_ids = ids.size == self._n
        raw = self._raw() if all_ids else self._raw()[ids]
        index, jindex = self._body_index, self._joint_index
        jstate = None
        g = np.asarray(self._scene.gravity, dtype=np.float64)
        out: dict[str, np.ndarray] = {}
        for s in self._scene.sensors:
            if s.kind == "imu":
                b = index[s.target]
                a = raw[:, b, 2]
                if after_step:
                    assert dt is not None
                    acc = (raw[:, b, 3:5] - self._v_prev[ids, b]) / dt - g
                else:
                    acc = np.broadcast_to(-g, (ids.size, 2))
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
                if after_step:
                    ideal = self.contact_forces[ids, index[s.target], :]
                else:
                    ideal = np.zeros((ids.size, 2))
            elif s.kind == "pose":
                ideal = raw[:, index[s.target], 0:3]
            else:
                ideal = self._rangefinder(s, raw, index[s.target], ids)
            out[s.name] = ideal
        return out

    def _rangefinder(self, s: Any, raw: np.ndarray, b: int, ids: np.ndarray) -> np.ndarray:
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
            b, np.stack([sx, sy], axis=1), np.stack([ex, ey], axis=1), ids
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
        if pipe is None:  # no step yet (the pipelines need dt): the ideal present value
            return np.array(self._ideals(self._all, after_step=False)[name], dtype=np.float64)
        return pipe.read()

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record everything that affects the future; the live World is not changed.

        Physics state is stored as the replay log since each copy's last rebuild (reset):
        restoring rebuilds the spaces and re-simulates, which is exact (docs/world.md).
        """
        arrays = {name: getattr(self, attr).copy() for name, attr, _ in _SNAPSHOT_ARRAYS}
        arrays.update(self._log.encode())
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

        All or nothing: the whole snapshot is validated first (arrays, their dtypes,
        shapes and finite values, the replay log, ids, exact time, sensor and Generator
        states; kelab/sim/_restore.py), and a refused snapshot leaves the World exactly as
        it was. A snapshot whose log would re-simulate ``max_log_steps`` steps or more is
        refused: a World's own log never spans that many (docs/snapshots.md).

        Raises:
            ValueError: If the snapshot comes from another scene (both fingerprints are
                named) or from a World with another number of copies, or if anything in
                it is malformed or inconsistent (the message names it).
        """
        if not isinstance(snap, Snapshot):
            raise ValueError(f"World.restore: expected a ke.Snapshot, got {type(snap).__name__}")
        snap.check_fingerprint(self._fingerprint)
        plan = check_snapshot(snap, self._restore_spec())
        # nothing below can fail on the snapshot's content
        self._replay(plan.log, plan.epoch, plan.step_count)
        self._log = ReplayLog(plan.log)
        self._epoch_step = plan.epoch_step.astype(np.int64)
        self._rebase_at = int(self._epoch_step.min()) + self._max_log
        for _, attr, field in _SNAPSHOT_ARRAYS:
            getattr(self, attr)[...] = getattr(plan, field)
        self._ext_any = bool(self._ext.any())
        self._steps = plan.step_count
        self._time = plan.time
        self._dt = plan.dt
        self._pipelines = plan.pipelines
        for name, p in self._pipelines.items():
            p.set_state(plan.sensor_states[name])
        for g, st in zip(self._rngs, plan.rng_states, strict=True):
            set_rng_state(g, st)
        self._contacts = None
        self._state_valid[:] = False

    def _restore_spec(self) -> WorldSpec:
        """What a snapshot must match to be restored here (see ``_restore.check_snapshot``)."""
        lo, hi = self._clip_bounds()

        def pipelines(dt: float) -> dict[str, SensorPipeline]:
            if self._pipelines and self._dt == dt:
                return self._pipelines
            return {
                s.name: SensorPipeline(s.config, self._n, _SENSOR_WIDTH[s.kind], dt, self._rngs)
                for s in self._scene.sensors
            }

        return WorldSpec(
            num_envs=self._n,
            n_bodies=self._nb,
            n_joints=self._nj,
            effort_bound=hi[0],
            dynamic=self._layout.dynamic,
            max_log_steps=self._max_log,
            rng_types=tuple(type(g.bit_generator) for g in self._rngs),
            pipelines=pipelines,
        )

    def _replay(self, log: list, epoch: np.ndarray, end_step: int) -> None:
        """Rebuild every copy and re-simulate its logged history up to ``end_step``.

        A copy starts at its last rebuild (``epoch``). The packed layout steps the copies
        that have not started yet too (they share a space); each is rebuilt fresh at its
        start, which makes it exactly the copy the live World rebuilt there.
        """
        self._backend.rebuild(self._all)
        self._forget(self._all, self._all)
        self._normals[:] = 0.0
        self._last_dt = None
        active = np.zeros(self._n, dtype=bool)
        dt = None
        step = log[0][0] if log else end_step
        for index, (at, kind, ids, a, b) in enumerate(log):
            while step < at:
                self._replay_step(active, dt)
                step += 1
            if kind == Kind.DT:
                dt = float(a[0])
                continue
            if kind == Kind.BUILD:
                start = ids[epoch[ids] == index]
                again = start[self._touched[start]]
                if again.size:
                    self._backend.rebuild(again)
                active[start] = True
                self._forget(again, ids)
                continue
            live = ids[active[ids]]
            sel = active[ids]
            if kind == Kind.EFFORTS:
                self._efforts[live] = a[sel]
            elif kind == Kind.TARGETS:
                self._targets[live] = a[sel]
            elif kind == Kind.STATES and live.size:
                self._write_states(live, a[sel], b[sel])
            elif kind == Kind.FORCES:
                self._ext[live] = a[sel]
                self._ext_any = bool(self._ext.any())
            self._forces_dirty = True
        while step < end_step:
            self._replay_step(active, dt)
            step += 1
        self._forces_dirty = True

    def _replay_step(self, active: np.ndarray, dt: float | None) -> None:
        ids = np.flatnonzero(active)
        if ids.size and dt is not None:
            self._advance(dt, ids, replay=True)

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
