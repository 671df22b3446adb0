"""World: a Scene compiled into pymunk, N independent copies, batched numpy state.

See docs/world.md. Two layouts share this class: "isolated" (one ``pymunk.Space`` per
copy, kelab/sim/physics/_isolated.py) and "packed" (all copies of a thread shard in one
space, kelab/sim/physics/_packed.py). Reading and writing go through ``pymunk.batch``
iterators, never Python loops over bodies. This module is the facade: the public API, the
construction and the stepping loop. Its helpers are built from the compiled scene, the
backend and arrays (never the World: no reference cycle): _args.py (writers' argument
checks), _states.py (fresh body states, finiteness), _controls.py (held efforts, PD
targets, external forces, the PD torques), _contacts.py (contact sums, friction
regimes), _sensor_suite.py, sites.py (site poses), _history.py (the replay log, resets,
rebases, snapshots and their replay; _restore.py validates). Below them: the layouts
(kelab/sim/physics/ behind _backend.py's Backend; _warm.py: warm starts over a rebase),
kinematics.py, robot_view.py and pymunk's internals (_chipmunk.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from kelab._validate import LAYOUTS as LAYOUTS  # re-exported: World(layout=...) values
from kelab._validate import check_copies, check_int, check_number, check_positive, must
from kelab.errors import UserError
from kelab.sim._args import body_states, check_open, env_indices, index_arg, joint_columns
from kelab.sim._contacts import Contacts
from kelab.sim._controls import Controls
from kelab.sim._history import CONTROLLER_UPDATES, History, take
from kelab.sim._params import NOISE_SCALE_MAX, ParamRules, Params
from kelab.sim._restore import Restore, WorldSpec, check_snapshot
from kelab.sim._sensor_suite import SensorSuite
from kelab.sim._states import BodyStates, ReplayLimits
from kelab.sim._values import float_array
from kelab.sim._values import vec2 as _vec2
from kelab.sim.kinematics import cog_world as _cog_world
from kelab.sim.physics._backend import Backend, make_backend
from kelab.sim.physics._compile import JointLayout, Layout, make_layout
from kelab.sim.physics._limits import DT_MAX
from kelab.sim.physics._params import selector
from kelab.sim.replay_log import Kind, ReplayLog
from kelab.sim.robot_view import RobotView
from kelab.sim.scene.scene import Scene
from kelab.sim.sites import Sites
from kelab.sim.snapshot import Snapshot, set_rng_state

#: What a refused snapshot's message suggests.
_FIX_SNAPSHOT = "take snapshots with World.snapshot() and restore them unchanged"
#: Default of ``World(max_log_steps=...)``: one minute at 120 Hz.
MAX_LOG_STEPS = 7200
#: Most ``max_log_steps`` an RL env gives its World (docs/world.md, "Snapshots"): it keeps
#: whole episodes of up to this many physics steps in the log (every built-in task's; the
#: longest, Pi-Locomotion's, is 10,020) and rebases longer ones inside, so no episode
#: length makes the log, a snapshot or a restore grow with the run.
MAX_EPISODE_LOG_STEPS = 2**14
#: Most physics steps ``World.step`` hands the backend in one job (``steps`` beyond it take
#: several): Python sees a KeyboardInterrupt only between C calls, and a job of 64 steps
#: of Humanoid-v0 x256 lasts ~40 ms; the barrier and bookkeeping per job cost ~20 us.
STEPS_PER_JOB = 64
#: The per-copy parameter setters :meth:`World.check_parameter` checks values for: each
#: one's log kind (None: not logged) and the name of its values argument.
PARAMETER_SETTERS: dict[str, tuple[Kind | None, str]] = {
    "set_body_masses": (Kind.MASSES, "masses"),
    "set_body_friction": (Kind.MATERIALS, "friction"),
    "set_body_restitution": (Kind.MATERIALS, "restitution"),
    "set_gravity": (Kind.GRAVITY, "gravity"),
    "set_actuator_strength": (Kind.STRENGTH, "strength"),
    "set_sensor_noise_scale": (None, "scale"),
    "set_body_velocities": (Kind.VELOCITIES, "velocities"),
}


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
        max_log_steps: Bound of the replay log behind snapshots, in physics steps: a copy
            that has run this many steps since its last reset is *rebased* (rebuilt at its
            own present state, keeping its held controls and, in the isolated layout, its
            warm starts), so memory stays constant and :meth:`restore` never re-simulates
            more than this many steps (docs/world.md, "Snapshots").

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
        self._seed = seed
        self._layout: Layout = make_layout(scene)
        lay = self._layout
        self._nb = len(lay.body_paths)
        self._nj = len(lay.joint_paths)
        # the static and kinematic bodies (a velocity write gives them 0), None if none
        fixed = np.flatnonzero(~lay.dynamic)
        self._fixed: slice | np.ndarray | None = selector(fixed) if fixed.size else None
        self._layout_name = layout
        # first: the backends refuse copies that would not fit (memory, packed capacity)
        backend = make_backend(layout, scene, lay, num_envs, num_threads, env_spacing)
        self._backend: Backend = backend
        self._spacing = backend.spacing
        self._all = np.arange(num_envs)
        self._all.flags.writeable = False  # logged and handed around without copies
        self._threads = num_threads
        self._closed = False  # close() was called: changes are refused (check_open)
        self._steps = 0
        self._time_base = Fraction(0)  # exact time at the last dt change or restore
        self._time_steps = 0  # steps of dt taken since then (folded in only when read)
        self._dt: float | None = None
        self._fdt: tuple[float, Fraction] | None = None  # dt and Fraction(dt), cached
        self._rngs = [
            np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(num_envs)
        ]
        # the helpers (each holds the backend and arrays, never the World)
        self._states = BodyStates(lay, self._all, self._backend)
        self._state_valid = self._states.valid
        self._ctl = Controls(lay, num_envs)
        self._state_dependent = self._ctl.state_dependent
        self._rolling = self._ctl.rolling
        self._contacts = Contacts(lay, self._all, self._backend)
        self._fric = self._contacts.friction
        self._sensors = SensorSuite(scene, lay, self._rngs, self._backend)
        self._has_sensors = bool(self._sensors.specs)
        # whether World.step may hand several steps to the backend at once: nothing
        # between them needs Python (no sensor updates, forces not recomputed from the
        # state, friction regimes chosen in the step itself, in C)
        self._many = bool(
            self._backend.can_step_many
            and not (self._state_dependent or self._rolling or self._has_sensors)
            and (not self._fric or self._backend.friction_in_step)
        )
        self._sites = Sites(scene, lay.body_paths)
        self._rules = ParamRules.of(scene, lay)
        self._params = Params(
            self._rules, num_envs, self._backend, self._ctl, self._contacts, self._sensors
        )
        self._history = History(
            int(max_log_steps),
            self._backend,
            self._states,
            self._ctl,
            self._contacts,
            self._params,
        )
        # what a snapshot saves besides the log (by _history.SNAPSHOT_ARRAYS field)
        self._held = {
            **self._history.held(),
            "v_prev": self._sensors.v_prev,
            "noise_scale": self._params.noise_scale,
        }
        self._states.read(self._all)
        self._sensors.v_prev[:] = self._backend.raw[:, :, 3:5]

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
        """Physics steps a copy runs before it is rebased (bounds the replay log); settable.

        Lowering it rebases at once the copies past the new bound. The isolated layout's
        rebases keep the warm starts (the App's time travel rebases often: a seek then
        re-simulates few steps); the packed layout's drop them (docs/world.md, "Snapshots").
        """
        return self._history.max_log

    @max_log_steps.setter
    def max_log_steps(self, value: int) -> None:
        fix = f"it counts physics steps; the default is {MAX_LOG_STEPS}"
        value = check_int(value, "World.max_log_steps", low=1, fix=fix)
        check_open(self._closed)
        self._history.set_max_log(int(value), self._steps)

    @property
    def warm_rebases(self) -> bool:
        """Whether a rebase keeps the warm starts (True in the isolated layout)."""
        return self._backend.warm is not None

    @property
    def steps_in_one_job(self) -> bool:
        """Whether ``step(dt, steps=k)`` now takes its ``k`` steps in one job per thread.

        True where nothing between the steps needs the World's Python: the packed
        layout with the C helper built, no sensors, no forces recomputed from the state
        (PD actuators, in either :attr:`controller_updates` mode; sliders between two
        bodies; rolling resistance) and friction regimes chosen in C. Then each shard
        thread takes up to :data:`STEPS_PER_JOB` steps in one C call (a rebase due
        within the steps, ``max_log_steps``, ends a job at its step). Otherwise (and
        once closed) ``step`` loops over single steps. Either way the results are the
        same bits; only the cost differs (docs/world.md, "Threads").

        Example:
            >>> import kelab as ke
            >>> cartpole = ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1"))
            >>> b = ke.SceneBuilder()
            >>> b.add(cartpole, at="/World/Robot")
            '/World/Robot'
            >>> packed = ke.World(b.build(), num_envs=4, layout="packed")
            >>> packed.steps_in_one_job  # effort actuators only (and the C helper built)
            True
            >>> ke.World(b.build(), num_envs=4).steps_in_one_job  # the isolated layout loops
            False
        """
        return self._many and not self._closed

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

    @property
    def _log(self) -> ReplayLog:
        """The replay log since the copies' last rebuilds (docs/world.md, "Snapshots")."""
        return self._history.log

    # ------------------------------------------------------------------ reading
    @property
    def body_poses(self) -> np.ndarray:
        """Body poses (x, y, angle) in each copy's frame, shape ``(num_envs, n_bodies, 3)``."""
        self._states.ensure(self._steps)
        return self._backend.raw[:, :, 0:3].copy()

    @property
    def body_velocities(self) -> np.ndarray:
        """Body velocities (vx, vy of the centre of mass, omega), ``(num_envs, n_bodies, 3)``."""
        self._states.ensure(self._steps)
        return self._backend.raw[:, :, 3:6].copy()

    def body_state(self, body_index: int) -> np.ndarray:
        """One body's state in every copy, ``(num_envs, 6)``: x, y, angle, vx, vy, omega.

        The columns of :attr:`body_poses` and :attr:`body_velocities` for that body,
        without copying every body's (a new array).

        Raises:
            ValueError: If ``body_index`` is not an int in ``[0, n_bodies)``.
        """
        b = body_index
        # a plain int in range as is; anything else through index_arg (the same errors):
        # ~0.2 us a call less, 4 calls an env step of a locomotion task
        if b.__class__ is not int or not 0 <= b < self._nb:
            b = index_arg(body_index, self._nb, "body_state: body_index")
        self._states.ensure(self._steps)
        return self._backend.raw.take(b, axis=1)  # a new array (cheaper than [:, b].copy())

    @property
    def site_names(self) -> tuple[str, ...]:
        """Every site's name in scene order (a robot's: ``"<robot path>/<site name>"``)."""
        return self._sites.names

    def site_poses(self, names: str | Sequence[str]) -> np.ndarray:
        """Poses of sites in each copy's frame, ``(num_envs, len(names), 3)``: x, y, angle.

        The body's pose composed with the site's offset, batched over copies (the body
        pose is its frame's origin, where the offset is measured from; kelab/sim/sites.py).

        Args:
            names: A site name or a list of them (see :attr:`site_names`).

        Raises:
            KeyError: For a name that is no site (the message lists the sites).
            ValueError: For names that are not strings.
        """
        return self._sites.poses(self.body_poses, names)

    def site_positions(self, names: str | Sequence[str]) -> np.ndarray:
        """Positions of sites in each copy's frame, ``(num_envs, len(names), 2)``.

        Args:
            names: A site name or a list of them (see :attr:`site_names`).

        Raises:
            KeyError: For a name that is no site (the message lists the sites).
            ValueError: For names that are not strings.

        Example:
            >>> import kelab as ke
            >>> b = ke.SceneBuilder()
            >>> ball = ke.Prop(ke.Circle(0.1), body_type="kinematic", initial_pose=ke.Pose(1, 2))
            >>> _ = b.add(ball, at="/World/Ball")
            >>> b.site("ball.top", ball, ke.Pose(0.0, 0.1))
            >>> world = ke.World(b.build(), num_envs=2)
            >>> world.site_positions(["ball.top"]).round(6).tolist()
            [[[1.0, 2.1]], [[1.0, 2.1]]]
        """
        return self.site_poses(names)[..., :2]

    @property
    def joint_positions(self) -> np.ndarray:
        """Joint positions, ``(num_envs, n_joints)`` (rad or m from the initial pose)."""
        return self._states.joint_state(self._steps)[0].copy()

    @property
    def joint_velocities(self) -> np.ndarray:
        """Joint velocities, ``(num_envs, n_joints)`` (rad/s or m/s)."""
        return self._states.joint_state(self._steps)[1].copy()

    @property
    def contact_forces(self) -> np.ndarray:
        """Sum of contact forces on each body in the last step, ``(num_envs, n_bodies, 2)``.

        Computed from the contact impulses of the last physics step divided by its dt.
        """
        return self._contacts.forces().copy()

    @property
    def joint_efforts(self) -> np.ndarray:
        """Effort commands held per joint (after clipping), ``(num_envs, n_joints)``."""
        return self._ctl.efforts.copy()

    @property
    def joint_position_targets(self) -> np.ndarray:
        """PD position targets held per joint, ``(num_envs, n_joints)``."""
        return self._ctl.targets.copy()

    # ------------------------------------------------------------------ per-copy parameters
    @property
    def body_masses(self) -> np.ndarray:
        """Mass of each body in kg per copy, ``(num_envs, n_bodies)`` (0: static, kinematic).

        The scene's (as pymunk computed them: shapes share a body's mass in proportion to
        their areas, docs/scene.md) until :meth:`set_body_masses` changes a copy's (a copy).
        """
        return self._params.masses.copy()

    @property
    def body_centers_of_gravity(self) -> np.ndarray:
        """Centre of gravity of each body in its own frame (m), ``(n_bodies, 2)`` (a copy)."""
        return self._layout.cog.copy()

    @property
    def body_moments(self) -> np.ndarray:
        """Moment of inertia of each body about its centre of gravity (kg m^2) per copy.

        ``(num_envs, n_bodies)``; 0 for static and kinematic bodies; it scales with the
        body's mass (:meth:`set_body_masses`). A copy.
        """
        return self._params.moments.copy()

    def set_body_masses(self, masses: npt.ArrayLike, env_ids: npt.ArrayLike | None = None) -> None:
        """Give copies their own body masses; each body's moment of inertia scales with its.

        Each shape carries its share of the body's mass (by area, as the scene compiles
        it), so the centre of gravity stays and the moment is the scene's times the mass
        ratio. Held until set again, through the copies' resets; logged (snapshots and
        restores exact, docs/world.md "Per-copy parameters").

        Args:
            masses: ``(len(env_ids), n_bodies)`` kg: in [1e-6, 1e6] for the bodies with
                mass, 0 for static and kinematic bodies (any other value is refused).
            env_ids: Copies to set; None means all.

        Raises:
            UserError: On a wrong shape, a value out of range (naming the body) or bad ids.

        Example:
            >>> import kelab as ke
            >>> b = ke.SceneBuilder()
            >>> _ = b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at="/World/Ball")
            >>> world = ke.World(b.build(), num_envs=2)
            >>> world.set_body_masses([[2.0]], env_ids=[1])
            >>> ratio = world.body_moments[1, 0] / world.body_moments[0, 0]
            >>> world.body_masses.tolist(), float(ratio)
            ([[1.0], [2.0]], 2.0)
        """
        self._set_param(Kind.MASSES, masses, self._ids(env_ids), "World.set_body_masses: masses")

    @property
    def body_friction(self) -> np.ndarray:
        """Friction coefficients per copy and body, ``(num_envs, n_bodies, 3)`` (a copy).

        Static, dynamic and rolling friction of the body's material (all its shapes): the
        scene's until :meth:`set_body_friction` changes a copy's.
        """
        # the whole table copied (one memcpy), its three columns a view of that copy: a
        # strided copy of them costs ~5x as much
        return self._params.materials.copy()[:, :, 0:3]

    @property
    def body_restitution(self) -> np.ndarray:
        """Restitution per copy and body, ``(num_envs, n_bodies)`` (a copy)."""
        return self._params.materials[:, :, 3].copy()

    def set_body_friction(
        self, friction: npt.ArrayLike, env_ids: npt.ArrayLike | None = None
    ) -> None:
        """Give copies' bodies their own friction coefficients (all of a body's shapes).

        A contact combines the two bodies' coefficients as the scene's materials do
        (docs/world.md, "Materials"): ``sqrt(a * b)``, static while the body sticks and
        dynamic while it slides. Static bodies keep the scene's (the ground of the packed
        layout is shared by every copy). Held through resets; logged.

        Args:
            friction: ``(len(env_ids), n_bodies, 3)`` static, dynamic, rolling friction,
                each in [0, 100] with dynamic <= static. Where the scene has no static/
                dynamic model (every material with equal coefficients) static must equal
                dynamic; rolling friction changes only on bodies that roll in the scene.
            env_ids: Copies to set; None means all.

        Raises:
            UserError: On a wrong shape or a value the World cannot hold (naming it).
        """
        ids = self._ids(env_ids)
        name = "World.set_body_friction: friction"
        rows = self._friction_rows(friction, ids, name)
        self._rules.check(Kind.MATERIALS, rows, name)
        # the restitution column is the held one: the shapes' elasticity stays
        self._hold(Kind.MATERIALS, rows, ids, same_restitution=True)

    def _friction_rows(self, friction: npt.ArrayLike, ids: np.ndarray, name: str) -> np.ndarray:
        """The material rows of copies ``ids`` with ``friction`` in (its shape checked).

        A new array (the World's own: held and logged as it is), not yet checked.
        """
        f = float_array(friction, name)
        if f.shape != (ids.size, self._nb, 3):
            raise UserError(
                f"{name} must have shape {(ids.size, self._nb, 3)} (copies, bodies, static/"
                f"dynamic/rolling), got {f.shape}"
            )
        rows = self._params.materials[ids]  # a copy (indexed by an array)
        rows[:, :, 0:3] = f
        return rows

    def set_body_restitution(
        self, restitution: npt.ArrayLike, env_ids: npt.ArrayLike | None = None
    ) -> None:
        """Give copies' bodies their own restitution, ``(len(env_ids), n_bodies)`` in [0, 1].

        Combined by ``max`` in a contact; only in scenes whose materials' restitutions
        differ (else the World keeps the scene's one: docs/world.md, "Materials"). Static
        bodies keep the scene's. Held through resets; logged.

        Raises:
            UserError: On a wrong shape or a value the World cannot hold (naming it).
        """
        ids = self._ids(env_ids)
        name = "World.set_body_restitution: restitution"
        rows = self._restitution_rows(restitution, ids, name)
        self._rules.check(Kind.MATERIALS, rows, name)
        self._hold(Kind.MATERIALS, rows, ids)

    def _restitution_rows(
        self, restitution: npt.ArrayLike, ids: np.ndarray, name: str
    ) -> np.ndarray:
        """The material rows of copies ``ids`` with ``restitution`` in (its shape checked).

        A new array (the World's own: held and logged as it is), not yet checked.
        """
        e = float_array(restitution, name)
        if e.shape != (ids.size, self._nb):
            raise UserError(f"{name} must have shape {(ids.size, self._nb)}, got {e.shape}")
        rows = self._params.materials[ids]  # a copy (indexed by an array)
        rows[:, :, 3] = e
        return rows

    @property
    def gravity(self) -> np.ndarray:
        """Gravity of each copy, ``(num_envs, 2)`` m/s^2: the scene's until set (a copy)."""
        return self._params.gravity.copy()

    def set_gravity(self, gravity: npt.ArrayLike, env_ids: npt.ArrayLike | None = None) -> None:
        """Give copies their own gravity, ``(len(env_ids), 2)`` m/s^2 (within ±1e4).

        Isolated layout: the copy's space's gravity. Packed layout (copies share a space):
        the space keeps the scene's and each body of the copy gets the force ``m (g -
        g_scene)`` every step (docs/world.md, "Per-copy parameters"). The IMU reads the
        copy's gravity. Held through resets; logged.

        Raises:
            UserError: On a wrong shape or values out of range.
        """
        self._set_param(Kind.GRAVITY, gravity, self._ids(env_ids), "World.set_gravity: gravity")

    @property
    def actuator_strength(self) -> np.ndarray:
        """Each actuator's strength per copy, ``(num_envs, n_joints)`` (1: the scene's)."""
        return self._params.strength.copy()

    def set_actuator_strength(
        self, strength: npt.ArrayLike, env_ids: npt.ArrayLike | None = None
    ) -> None:
        """Scale what copies' actuators exert: the effort (held, clipped) or PD torque x strength.

        A motor's gain: ``strength * clip(effort, ±limit)``, ``strength * clip(kp (t - q)
        - kd qd, ±limit)``; the commands themselves (``joint_efforts``) are unchanged.

        Args:
            strength: ``(len(env_ids), n_joints)`` in [0, 100]; 1 for joints without an
                actuator.
            env_ids: Copies to set; None means all.

        Raises:
            UserError: On a wrong shape or values out of range.
        """
        name = "World.set_actuator_strength: strength"
        self._set_param(Kind.STRENGTH, strength, self._ids(env_ids), name)

    def _set_param(self, kind: Kind, values: npt.ArrayLike, ids: np.ndarray, name: str) -> None:
        """Check, hold, apply and log a per-copy parameter for copies ``ids`` (checked)."""
        self._hold(kind, self._rules.values(kind, values, ids.size, name), ids)

    def _hold(
        self, kind: Kind, rows: np.ndarray, ids: np.ndarray, same_restitution: bool = False
    ) -> None:
        """Hold, apply and log checked rows ``(len(ids), ...)`` of ``kind``.

        ``rows`` must be the World's own array (it is held and logged as it is);
        ``same_restitution``: materials rows whose restitution column is the held one
        (``Params.set``).
        """
        moved = self._params.set(kind, ids, rows, same_restitution)
        self._log.append(self._steps, kind, ids, rows, None)  # ids: _ids made them (a copy)
        if moved is not None:  # a new mass can move a body by a rounding
            self._state_valid[moved] = False

    def set_body_velocities(
        self, velocities: npt.ArrayLike, env_ids: npt.ArrayLike | None = None
    ) -> None:
        """Set body velocities without a reset: a push (contacts, joints and controls go on).

        Unlike :meth:`set_body_states` nothing is rebuilt. Logged (snapshots exact).

        Args:
            velocities: ``(len(env_ids), n_bodies, 3)`` vx, vy (centre of mass), omega;
                static bodies' rows are ignored.
            env_ids: Copies to set; None means all.

        Raises:
            UserError: On a wrong shape or values beyond ±1e7 (m/s, rad/s).
        """
        ids = self._ids(env_ids)
        name = "World.set_body_velocities: velocities"
        rows = self._rules.values(Kind.VELOCITIES, velocities, ids.size, name)
        if self._fixed is not None:
            rows[:, self._fixed] = 0.0
        self._history.set_velocities(ids, rows)
        self._log.append(self._steps, Kind.VELOCITIES, ids, rows, None)  # ids: a copy

    @property
    def sensor_noise_scale(self) -> np.ndarray:
        """Each copy's factor on every sensor's noise std, ``(num_envs,)`` (1: as configured)."""
        return self._params.noise_scale.copy()

    def set_sensor_noise_scale(
        self, scale: npt.ArrayLike, env_ids: npt.ArrayLike | None = None
    ) -> None:
        """Scale the noise of every sensor of copies, ``(len(env_ids),)`` in [0, 1000].

        Held through resets; a snapshot stores it (sensors are restored, not replayed).

        Raises:
            UserError: On a wrong shape or values out of range.
        """
        ids = self._ids(env_ids)
        self._params.set_noise_scale(ids, self._noise_scale(scale, ids))

    def _noise_scale(self, scale: npt.ArrayLike, ids: np.ndarray) -> np.ndarray:
        """``scale`` checked as the sensor noise scales of copies ``ids``."""
        name = "World.set_sensor_noise_scale: scale"
        s = float_array(scale, name)
        if s.shape != (ids.size,):
            raise UserError(f"{name} must have shape ({ids.size},) (copies), got {s.shape}")
        if not (np.isfinite(s).all() and (s >= 0).all() and (s <= NOISE_SCALE_MAX).all()):
            raise UserError(
                f"{name} must be finite and in [0, {NOISE_SCALE_MAX:g}], got {s.tolist()[:8]}"
            )
        return s

    def check_parameter(
        self, setter: str, values: npt.ArrayLike, env_ids: npt.ArrayLike | None = None
    ) -> None:
        """Check ``values`` as the per-copy parameter setter ``setter`` would; change nothing.

        For a caller that must know before it writes (a task's domain randomization checks
        the ends of its ranges when its env is made: docs/tasks.md).

        Args:
            setter: A key of :data:`PARAMETER_SETTERS` (``"set_gravity"``...).
            values: What the setter would be given.
            env_ids: Copies; None means all.

        Raises:
            UserError: The setter's own error (the same message) where it would refuse
                ``values``, or naming ``setter`` where it is not one of them.

        Example:
            >>> import kelab as ke
            >>> world = ke.World(ke.SceneBuilder().build(), num_envs=2)
            >>> world.check_parameter("set_gravity", [[0.0, -1.62]], env_ids=[1])
            >>> try:
            ...     world.check_parameter("set_gravity", [[0.0, 2e4]], env_ids=[1])
            ... except ke.UserError as err:
            ...     print(str(err)[:59])
            World.set_gravity: gravity components must be within ±10000
            >>> world.gravity.tolist()
            [[0.0, -9.81], [0.0, -9.81]]
        """
        if setter not in PARAMETER_SETTERS:
            raise UserError(
                f"World.check_parameter: setter must be one of {tuple(PARAMETER_SETTERS)}, got "
                f"{setter!r}; name the setter the values are for"
            )
        ids = self._ids(env_ids)
        kind, argument = PARAMETER_SETTERS[setter]
        name = f"World.{setter}: {argument}"
        if kind is None:  # the sensor noise scale
            self._noise_scale(values, ids)
            return
        if setter == "set_body_friction":
            values = self._friction_rows(values, ids, name)
        elif setter == "set_body_restitution":
            values = self._restitution_rows(values, ids, name)
        self._rules.values(kind, values, ids.size, name)

    # ------------------------------------------------------------------ constants
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

    # ------------------------------------------------------------------ writing
    def _ids(self, env_ids: npt.ArrayLike | None, repeats: bool = False) -> np.ndarray:
        """Copy indices from ``env_ids`` for a change: refused once closed (None: all)."""
        check_open(self._closed)
        return env_indices(env_ids, self._all, repeats)

    def _command(
        self,
        kind: Kind,
        values: npt.ArrayLike,
        joint_ids: npt.ArrayLike | None,
        env_ids: npt.ArrayLike | None,
    ) -> None:
        """Hold efforts or PD targets (checked, efforts clipped) and log them."""
        cols = joint_columns(joint_ids, self._nj)
        ids = self._ids(env_ids)
        full = self._ctl.command(kind, values, cols, ids, ids is self._all)
        # self._all is read-only: logged as is (other id arrays may be the caller's)
        self._log.append(self._steps, kind, ids if ids is self._all else ids.copy(), full, None)

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
        self._command(Kind.EFFORTS, efforts, joint_ids, env_ids)

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
        self._command(Kind.TARGETS, targets, joint_ids, env_ids)

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
        return env_indices(env_ids, self._all, repeats)

    @property
    def external_forces(self) -> np.ndarray:
        """Held external forces per body, ``(num_envs, n_bodies, 3)``: fx, fy, torque.

        Set with :meth:`set_body_forces` / :meth:`apply_force_at_point`; zero after a reset.
        """
        return self._ctl.external.copy()

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
                and the shape expected), non-finite values, values beyond ±1e9 N or
                N·m (docs/world.md, "Limits") or bad ids.

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
        full = self._ctl.set_body_forces(ids, forces, torques)
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
        env = index_arg(env_id, self._n, "env_id")
        b = index_arg(body_index, self._nb, "body_index")
        if not self._layout.dynamic[b]:
            raise ValueError(
                f"apply_force_at_point: body {b} ({self.body_names[b]!r}) is static; "
                "forces act on moving bodies only"
            )
        f = _vec2(force, "apply_force_at_point: force")
        p = _vec2(point, "apply_force_at_point: point")
        self._states.ensure(self._steps)
        c = _cog_world(self._backend.raw[env : env + 1, b], self._layout.cog[b])[0]
        tau = (p[0] - c[0]) * f[1] - (p[1] - c[1]) * f[0]
        row = self._ctl.external[env : env + 1].copy()
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
        env = index_arg(env_id, self._n, "env_id")
        p = _vec2(point, "body_at: point")
        tolerance = check_positive(tolerance, "body_at: tolerance", allow_zero=True)
        return self._backend.body_at(env, float(p[0]), float(p[1]), tolerance)

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
        poses, vels = body_states(ids, self._layout.body_paths, poses, velocities)
        if ids.size == 0:  # checked, and nothing to change (nor to log)
            return
        read = self._history.set_states(ids, poses, vels, self._steps)
        self._after_reset(ids, read)

    def reset_envs(self, env_ids: npt.ArrayLike | None = None) -> None:
        """Reset copies to the scene's initial configuration (zero velocity, no history).

        Args:
            env_ids: Copies to reset (indices, a copy listed twice is reset once, or a
                bool mask); None means all.
        """
        ids = self._ids(env_ids, repeats=True)
        if ids.size == 0:  # nothing to change (nor to log)
            return
        self._history.rebuild(ids, self._steps)
        self._after_reset(ids)

    def _after_reset(self, ids: np.ndarray, read: bool = False) -> None:
        """The reset copies' states (``read``: read back already), sensors and primes."""
        self._states.release(ids)
        if not read:
            self._states.read(ids)
        # the rows, then their columns (one fancy index, not two: ~2.5 us less)
        self._sensors.v_prev[ids] = self._backend.raw.take(ids, axis=0)[:, :, 3:5]
        self._prime(ids)

    # ------------------------------------------------------------------ controllers
    @property
    def controller_updates(self) -> str:
        """How PD actuators' torques are updated: ``"every_step"`` (default) or ``"held"``.

        ``"every_step"``: every physics step recomputes each PD joint's torque
        ``kp * (target - q) - kd * qd`` (clipped to its effort limit) from the present
        state. ``"held"``: a digital controller's zero-order hold, the torque computed at
        the last :meth:`update_controllers` call is applied until the next one. Setting
        ``"held"`` takes one update at once (the torque starts from the present state);
        the switch and every update are logged, so snapshots stay exact. A reset zeroes
        the reset copies' held torques (their joints go limp until the next update).

        Raises:
            ValueError: On setting anything but ``"every_step"`` or ``"held"``.

        Example:
            >>> import kelab as ke
            >>> world = ke.World(ke.SceneBuilder().build())
            >>> world.controller_updates = "held"
            >>> world.controller_updates
            'held'
        """
        return CONTROLLER_UPDATES[self._ctl.pd_held]

    @controller_updates.setter
    def controller_updates(self, mode: str) -> None:
        check_open(self._closed)
        if self._history.set_controller_updates(mode, self._steps):
            self.update_controllers()

    def update_controllers(self, env_ids: npt.ArrayLike | None = None) -> None:
        """Recompute the held PD torques of copies from their present state (``"held"``).

        One tick of the robots' joint controllers: each PD joint's torque
        ``kp * (target - q) - kd * qd`` is computed from the present joint state and
        targets, clipped to its effort limit, and held by every physics step until the
        next call (:attr:`controller_efforts`). Logged, so snapshots stay exact.

        Args:
            env_ids: Copies to update (indices or a bool mask); None means all.

        Raises:
            ValueError: If :attr:`controller_updates` is ``"every_step"``, or on bad ids.
        """
        ids = self._ids(env_ids)
        self._history.update_controllers(ids, self._states.fresh(ids), self._steps)

    @property
    def controller_efforts(self) -> np.ndarray:
        """PD torques held by the controllers, ``(num_envs, n_joints)`` (0: other joints).

        In ``"held"`` updates, what every step applies to the PD joints; set by
        :meth:`update_controllers`, zeroed by resets.
        """
        return self._ctl.pd_efforts.copy()

    # ------------------------------------------------------------------ stepping
    def step(self, dt: float, steps: int = 1) -> None:
        """Advance every copy by ``steps`` physics steps of ``dt`` seconds.

        ``steps`` physics steps of ``dt``, as that many calls, in one call: every counter,
        state, contact sum, sensor value, snapshot and error is the same, bit for bit, as
        after ``steps`` calls of ``step(dt)``. Where nothing between the steps needs
        Python (:attr:`steps_in_one_job`), a little cheaper: the packed layout's threads
        then take them in one job each (docs/world.md, "Threads"). An RL env steps
        ``decimation`` at once.

        Args:
            dt: Step size in seconds, finite and > 0.
            steps: How many physics steps, an int >= 1.

        After each step every copy's bodies are checked against the world's limits
        (docs/world.md, "Limits"): positions within ±1e7 m, speeds within ±1e7 m/s and
        rad/s, finite. A copy out of them is named, and no step runs until it is reset.

        Raises:
            ValueError: If ``dt`` is not a finite number in (0, 1] seconds, or ``steps``
                not an int >= 1 (nothing is stepped).
            FloatingPointError: If a body left the limits in a step (naming it: no later
                step is taken), or a copy that left them in an earlier step has not been
                reset since (naming them).
            RuntimeError: If the World is closed.

        Example:
            >>> import kelab as ke
            >>> world = ke.World(ke.SceneBuilder().build(), num_envs=2)
            >>> world.step(0.25, steps=4)
            >>> world.step_count, world.sim_time_exact
            (4, Fraction(1, 1))
        """
        check_open(self._closed)
        if steps.__class__ is not int or steps < 1:  # a bool is refused too
            steps = check_int(
                steps,
                "World.step: steps",
                low=1,
                fix="it counts physics steps of dt taken in this call",
            )
        if self._states.halted_any:  # a body out there would hang the step in C
            self._states.refuse()
        if dt.__class__ is not float or dt != self._dt:  # else: the dt checked before
            dt = self._new_dt(dt)
        while steps > 1 and self._many:
            # up to the next rebase, which the World's Python does after its step
            count = min(steps, self._history.rebase_at - self._steps, STEPS_PER_JOB)
            if count < 2:
                break
            steps -= self._step_many(dt, count)
        for _ in range(steps):  # the checks above hold for each of these too
            self._step_one(dt)

    def _step_one(self, dt: float) -> None:
        """One physics step of every copy and its bookkeeping (after ``step``'s checks)."""
        self._advance(dt, self._all)
        self._steps += 1
        if self._fdt is None or self._fdt[0] != dt:
            self._time = self._time  # fold the steps taken at the old dt
            self._fdt = (dt, Fraction(dt))
        self._time_steps += 1
        # every step reads the state: a body past the limits stops the World here
        states = self._states
        states.check_limits(self._steps, states.read_in_step, self._backend.read_within)
        if self._has_sensors:
            raw = self._states.fresh(self._all)  # read now if the step did not
            self._sensors.update(self._all, raw, dt, self._contacts.forces)
        if self._steps >= self._history.rebase_at:
            self._history.rebase(self._steps)

    def _step_many(self, dt: float, count: int) -> int:
        """Up to ``count`` steps in one job per shard thread (``backend.step_many``).

        Only where nothing between the steps needs the World's Python (``self._many``:
        no sensors, forces that do not depend on the state, friction regimes chosen in
        C) and no rebase is due before the last: each step's bookkeeping is then the
        same whatever step it follows, so it is done once, for the steps taken. The
        backend stops after a step whose read was not within the limits' fast bound: its
        check then runs here as after that step alone (the same error, step and state),
        and ``step`` takes the steps left. Returns the steps taken.
        """
        states = self._states
        if self._ctl.dirty:  # as _advance: the held forces, handed over once
            self._set_forces(self._all, dt)
            self._ctl.dirty = False
        jc = states.joints
        # the joint state is computed after the last read if a reader is expected then
        # (if the steps stop early it is computed from, or marked stale by, the state
        # of the last one taken: its values are the state's either way)
        jc.eager = states.since_read + count == states.read_period
        taken = self._backend.step_many(dt, count)
        jc.eager = True
        states.since_read += taken
        states.read_in_step = self._backend.stepped(self._all)
        self._history.touched[:] = True
        self._state_valid[:] = True
        self._contacts.stepped(dt)
        self._steps += taken
        if self._fdt is None or self._fdt[0] != dt:
            self._time = self._time  # fold the steps taken at the old dt
            self._fdt = (dt, Fraction(dt))
        self._time_steps += taken
        states.check_limits(self._steps, states.read_in_step, self._backend.read_within)
        if self._steps >= self._history.rebase_at:
            self._history.rebase(self._steps)
        return taken

    def _new_dt(self, dt: Any) -> float:
        """Check a step's ``dt`` that differs from the last one; log a change of dt."""
        dt = check_number(
            dt,
            "World.step: dt",
            low=0.0,
            low_open=True,
            high=DT_MAX,
            unit="seconds",
            fix=(
                "a longer physics step is not simulated; take several steps of a "
                "smaller dt in one call: step(dt, steps=k)"
            ),
        )
        if dt != self._dt:
            if self._dt is not None and self._sensors.pipelines:
                raise ValueError(
                    f"World.step: dt changed from {self._dt} to {dt}; sensors need a fixed dt"
                )
            self._dt = dt
            self._log.append(self._steps, Kind.DT, self._all[:0], np.array([dt]), None)
            if not self._sensors.pipelines and self._has_sensors:
                # the pipelines need dt: created now, primed with the present state
                self._sensors.pipelines = self._sensors.new_pipelines(dt)
                self._prime(self._all)
        return dt

    def _advance(self, dt: float, ids: np.ndarray, replay: bool = False) -> None:
        """One physics step for copies ``ids`` (forces, step, contact bookkeeping).

        The packed layout steps every copy of its shared spaces; copies outside ``ids``
        (only during a replay: not yet started) then run with zero forces. The stepping
        threads also read the state after every step (reading never changes the physics),
        so that its limits are checked before the next step; the joint state is computed
        from it only when a reader that has been asking every ``read_period`` steps is
        expected.
        """
        states, valid = self._states, self._state_valid
        needs_state = self._state_dependent or self._rolling
        if needs_state:
            need = ids[~valid[ids]]
            if need.size:
                states.read(need)
        if self._ctl.dirty or needs_state or ids.size != self._n:
            self._set_forces(ids, dt)
            self._ctl.dirty = ids.size != self._n
        jc = states.joints
        if replay:
            jc.eager = False
        else:
            states.since_read += 1
            # the joint state is computed after a step's read only for the
            # read a reader is expected to follow; other reads just invalidate it
            jc.eager = states.since_read == states.read_period
        # every step reads the state: its limits are checked before the next step
        done = self._backend.step(dt, ids)
        states.read_in_step = done
        jc.eager = True
        stepped = self._backend.stepped(ids)
        touched = self._history.touched
        if stepped.size == self._n:  # every copy stepped: whole-array writes, no fancy indexing
            stepped = self._all
            touched[:] = True
            valid[:] = done.size == self._n  # all or none read
        else:
            stepped = ids
            touched[stepped] = True
            valid[stepped] = False
            valid[done] = True
        self._contacts.stepped(dt)
        if self._fric:
            self._contacts.update_friction(stepped, valid, states.read_quiet)
        if self._rolling:
            self._contacts.read(ids)

    def _set_forces(self, ids: np.ndarray, dt: float) -> None:
        """Hand the held controls' forces of copies ``ids`` to the backend for a step."""
        out = self._ctl.forces(ids, self._backend.raw, self._contacts.normals, dt)
        if ids.size != self._n and self._layout_name == "packed":
            full = np.zeros((self._n, self._nb, 3))  # the others run without forces
            full[ids] = out
            self._backend.set_forces(self._all, full)
        else:
            self._backend.set_forces(ids, out)

    # ------------------------------------------------------------------ sensors
    def _prime(self, ids: np.ndarray) -> None:
        """Reset the pipelines of copies ``ids`` primed with their present ideal values."""
        if self._sensors.pipelines and ids.size:
            self._sensors.prime(ids, self._states.fresh(ids))

    def read_sensor(self, name: str, env_ids: npt.ArrayLike | None = None) -> np.ndarray:
        """Return what sensor ``name`` reports now, shape ``(num_envs, k)``.

        Widths k: imu 4 (omega, ax, ay in the body frame incl. -gravity, angle), joint 2
        (position, velocity), contact 2 (fx, fy), rangefinder 1 (distance), pose 3. A
        camera reports images instead, ``(num_envs, height, width, channels)`` uint8
        (docs/sensors.md, "Cameras").

        Args:
            name: The sensor.
            env_ids: Only these copies' rows, in this order (indices or a bool mask; a
                camera then draws only them); None: every copy.

        Raises:
            KeyError: If no sensor has that name (the message lists the known ones).
            ValueError: On bad copy indices.
        """
        ids = None if env_ids is None else env_indices(env_ids, self._all, False)
        return self._sensors.read(name, self._all, self._states.fresh, ids)

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record everything that affects the future; the live World is not changed.

        Physics state is stored as the replay log since each copy's last rebuild (reset):
        restoring rebuilds the spaces and re-simulates, which is exact (docs/world.md).
        """
        return take(
            self._fingerprint,
            self._steps,
            self._time,
            self._dt,
            self._held,
            self._log,
            self._sensors.pipelines,
            self._rngs,
        )

    def restore(self, snap: Snapshot) -> None:
        """Return to the moment ``snap`` was taken; stepping on is bit-identical.

        All or nothing: the whole snapshot is validated first (arrays, their dtypes,
        shapes and finite values, the replay log, ids, exact time, sensor and Generator
        states; kelab/sim/_restore.py), and a refused snapshot leaves the World exactly as
        it was. A snapshot whose log would re-simulate ``max_log_steps`` steps or more is
        refused: a World's own log never spans that many (docs/snapshots.md).

        Raises:
            ValueError: If the snapshot comes from another scene (both fingerprints are
                named) or from a World with another number of copies, if anything in it
                is malformed or inconsistent (the message names it), or if its replay
                leaves the world's limits before its last step (World put back).
        """
        check_open(self._closed)
        if not isinstance(snap, Snapshot):
            raise ValueError(f"World.restore: expected a ke.Snapshot, got {type(snap).__name__}")
        snap.check_fingerprint(self._fingerprint)
        plan = check_snapshot(snap, self._restore_spec())
        undo = self.snapshot()  # put back if the replay leaves the limits early
        out = self._apply(plan)
        if out is not None:
            self._apply(check_snapshot(undo, self._restore_spec()))
            raise ValueError(
                f"World.restore: the snapshot's log drives body {out[1][0]} out of the world's "
                f'limits (docs/world.md, "Limits") before its last step, where a World '
                f"stops (copies {out[0][:20]}); {_FIX_SNAPSHOT}"
            )

    def _apply(self, plan: Restore) -> tuple[list[int], list[str], bool] | None:
        """Restore a validated snapshot; return where its replay left the limits early.

        See ``_states.ReplayLimits``: at the snapshot's last step those copies are
        halted (as in the World that took it); earlier, the caller puts the World back.
        """
        guard = ReplayLimits(self._states, partial(self._advance, replay=True))
        self._history.restore(plan, self._held, guard.advance)
        early = guard.finish(plan.step_count)
        self._steps = plan.step_count
        self._time = plan.time
        self._dt = plan.dt
        self._sensors.restore(plan.pipelines, plan.sensor_states)
        self._params.set_noise_scale(self._all, plan.noise_scale)
        for g, st in zip(self._rngs, plan.rng_states, strict=True):
            set_rng_state(g, st)
        self._state_valid[:] = False
        return early

    def _restore_spec(self) -> WorldSpec:
        """What a snapshot must match to be restored here (see ``_restore.check_snapshot``)."""
        _, hi = self._ctl.clip_bounds()
        return WorldSpec(
            num_envs=self._n,
            n_bodies=self._nb,
            n_joints=self._nj,
            effort_bound=hi[0],
            dynamic=self._layout.dynamic,
            max_log_steps=self._history.max_log,
            warm=self._backend.warm,
            rng_types=tuple(type(g.bit_generator) for g in self._rngs),
            pipelines=partial(self._sensors.pipelines_for, current_dt=self._dt),
            params=self._rules,
        )

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
        """Stop the stepping threads; then steps, resets, restores and commands raise.

        A closed World stays readable (poses, contacts, snapshots). Calling it again is a no-op.
        """
        self._closed = True
        self._backend.close()
