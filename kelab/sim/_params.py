"""Per-copy physical parameters of a World: checked, held and applied (kelab.sim internal).

Each copy of a World can have its own body masses (moments of inertia scale with them),
materials (static, dynamic and rolling friction, restitution), gravity and actuator
strength (docs/world.md, "Per-copy parameters"). :class:`ParamRules` says which values a
World takes (the live setters and a snapshot's log are checked by the same rules, in one
wording); :class:`Params` holds the tables, one row per copy, and applies a change where
it acts: the layout's pymunk objects (shape masses, shape friction and elasticity, a
copy's space gravity), the contact rule's friction tables (``Contacts.stick_table`` /
``slide_table``), the held controls (strength, rolling friction, the gravity force of
copies that share a space) and the IMU's gravity. A change is logged by the World
(``replay_log.Kind.parameter``), outlives the copy's resets and is replayed by restores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from kelab.errors import UserError
from kelab.sim._contacts import Contacts
from kelab.sim._controls import Controls
from kelab.sim._sensor_suite import SensorSuite
from kelab.sim._values import float_array
from kelab.sim.physics._backend import Backend
from kelab.sim.physics._compile import Layout, shape_values
from kelab.sim.physics._guard import native_module
from kelab.sim.physics._limits import STATE_SPEED_MAX
from kelab.sim.physics._params import selector
from kelab.sim.replay_log import Kind
from kelab.sim.scene.scene import Scene
from kelab.sim.scene.shapes import FRICTION_MAX, GRAVITY_MAX, MASS_MAX, MASS_MIN

#: The columns of a copy's material row (``World.body_friction`` then restitution).
MATERIAL_COLUMNS = ("static_friction", "dynamic_friction", "rolling_friction", "restitution")
#: Largest actuator strength (a factor on each actuator's effort).
STRENGTH_MAX = 100.0
#: Largest sensor noise scale (a factor on every sensor's noise std).
NOISE_SCALE_MAX = 1000.0


@dataclass(frozen=True)
class ParamRules:
    """What per-copy parameters a World takes (the live setters and restores alike)."""

    layout: Layout
    """The compiled scene (its friction model)."""
    mass: np.ndarray
    """``(n_bodies,)`` the scene's masses; 0 for bodies without mass (static, kinematic)."""
    materials: np.ndarray
    """``(n_bodies, 4)`` the scene's material coefficients (:data:`MATERIAL_COLUMNS`)."""
    gravity: np.ndarray
    """``(2,)`` the scene's gravity."""
    actuated: np.ndarray
    """``(n_joints,)`` bool: joints with an actuator."""

    @classmethod
    def of(cls, scene: Scene, layout: Layout) -> ParamRules:
        """The rules of a World of ``scene``."""
        mats = [b.spec.material for b in scene.bodies]
        table = np.array(
            [[getattr(m, c) for c in MATERIAL_COLUMNS] for m in mats], dtype=np.float64
        ).reshape(len(mats), 4)
        return cls(
            layout=layout,
            mass=layout.mass.copy(),
            materials=table,
            gravity=np.asarray(scene.gravity, dtype=np.float64),
            actuated=np.array([j.actuator != "none" for j in layout.joints], dtype=bool),
        )

    def _body(self, b: int) -> str:
        return repr(self.layout.body_paths[b])

    def values(self, kind: Kind, value: npt.ArrayLike, copies: int, name: str) -> np.ndarray:
        """``value`` as the checked ``(copies, ...)`` rows of a parameter of ``kind``.

        ``name`` is ``"<caller>: <argument>"`` (``"World.set_gravity: gravity"``).

        Raises:
            UserError: ``"<caller>: ... must ..., got ...; ..."`` naming what is wrong.
        """
        arr = float_array(value, name)
        tail, what = self._rows[kind]
        if arr.shape != (copies, *tail):
            raise UserError(f"{name} must have shape {(copies, *tail)} {what}, got {arr.shape}")
        self.check(kind, arr, name)
        return arr.copy()

    def check(self, kind: Kind, a: np.ndarray, name: str) -> None:
        """Refuse float64 rows ``a`` of the kind's shape that :meth:`error` finds wrong.

        Raises:
            UserError: ``"<caller>: <what error says>"`` (``name`` as :meth:`values`'s).
        """
        problem = self.error(kind, a)
        if problem is not None:
            raise UserError(f"{name.split(':')[0]}: {problem}")

    @cached_property
    def _rows(self) -> dict[Kind, tuple[tuple[int, ...], str]]:
        """Per kind, the shape of one copy's row and how :meth:`values` says it."""
        nb, nj = self.mass.size, self.actuated.size
        return {
            Kind.MASSES: ((nb,), "(copies, bodies) kg"),
            Kind.MATERIALS: ((nb, 4), "(copies, bodies, 4)"),
            Kind.GRAVITY: ((2,), "(copies, 2) m/s^2"),
            Kind.STRENGTH: ((nj,), "(copies, joints)"),
            Kind.VELOCITIES: ((nb, 3), "(copies, bodies, 3): vx, vy, omega"),
        }

    def error(self, kind: Kind, a: np.ndarray) -> str | None:
        """Why rows ``a`` of a parameter of ``kind`` cannot be held, or None."""
        if kind == Kind.MATERIALS and self._materials_ok(a):  # the usual case, cheaply
            return None
        if kind == Kind.MASSES and self._masses_ok(a):  # likewise
            return None
        if kind == Kind.VELOCITIES and self._velocities_ok(a):  # likewise
            return None
        if not np.isfinite(a).all():
            return "values must be finite numbers, got NaN or inf; give real values"
        if kind == Kind.MASSES:
            return self._masses_error(a)
        if kind == Kind.MATERIALS:
            return self._materials_error(a)
        if kind == Kind.GRAVITY:
            big = float(np.abs(a).max(initial=0.0))
            if big > GRAVITY_MAX:
                return (
                    f"gravity components must be within ±{GRAVITY_MAX:g} m/s^2 (as a scene's), "
                    f"got {big:g}; give a smaller gravity"
                )
            return None
        if kind == Kind.STRENGTH:
            return self._strength_error(a)
        fast = float(np.abs(a).max(initial=0.0))
        if fast > STATE_SPEED_MAX:
            return (
                f"velocities must be within ±{STATE_SPEED_MAX:g} (m/s, rad/s), got {fast:g}; "
                "give velocities a body can have"
            )
        return None

    @cached_property
    def _mass_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per body the smallest and largest mass it takes (0 and 0 for the massless)."""
        has = self.mass > 0.0
        return np.where(has, MASS_MIN, 0.0), np.where(has, MASS_MAX, 0.0)

    @cached_property
    def _within(self) -> Callable[..., bool] | None:
        """The C helper's one-pass bounds check (``within``), or None: numpy's.

        ``within(rows, low, high, above=None)``: every value in its column's bounds (NaN
        fails) and, where ``above`` names a column, not above that column's value
        (kelab/sim/physics/_native_params.c). The same answer as the numpy comparisons
        it stands for, without a numpy call per comparison.
        """
        return getattr(native_module(), "within", None)

    def _masses_ok(self, a: np.ndarray) -> bool:
        """Whether masses rows pass every check of :meth:`_masses_error` (no message)."""
        low, high = self._mass_bounds
        within = self._within
        if within is not None and a.flags.c_contiguous:
            return within(a, low, high)
        return bool(((a >= low) & (a <= high)).all())  # NaN fails both comparisons

    @cached_property
    def _speed_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per body and column of a velocity row, the bounds ``±STATE_SPEED_MAX``."""
        high = np.full(self.mass.size * 3, STATE_SPEED_MAX)
        return -high, high

    def _velocities_ok(self, a: np.ndarray) -> bool:
        """Whether velocity rows are within ``±STATE_SPEED_MAX`` (NaN is not; no message)."""
        within = self._within
        if within is not None and a.flags.c_contiguous:
            return within(a, *self._speed_bounds)
        return bool(a.size) and bool(np.abs(a).max() <= STATE_SPEED_MAX)  # NaN: max is NaN

    def _masses_error(self, a: np.ndarray) -> str | None:
        has = self.mass > 0.0
        bad = np.argwhere(~has[None, :] & (a != 0.0))
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"the mass of {self._body(b)} must stay 0 (a static or kinematic body has no "
                f"mass), got {a[k, b]:g} in row {k}; give 0 for it"
            )
        bad = np.argwhere(has[None, :] & ((a < MASS_MIN) | (a > MASS_MAX)))
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"the mass of {self._body(b)} must be in [{MASS_MIN:g}, {MASS_MAX:g}] kg (as a "
                f"scene's), got {a[k, b]:g} in row {k}; give a mass in that range"
            )
        return None

    @cached_property
    def _fast(self) -> tuple[np.ndarray, np.ndarray, slice | np.ndarray, np.ndarray, np.ndarray]:
        """What :meth:`_materials_ok` compares, made once.

        Per body and column the smallest and largest value a row may hold (equal where it
        must stay the scene's: static bodies, the rolling friction of bodies that do not
        roll, the one restitution of a scene without the friction model), the moving
        bodies (a slice where they are consecutive), those whose regime is not tracked,
        and per body and column the column of the row it may not exceed (-1: none; a
        moving body's dynamic friction its static friction, and without the friction
        model also the reverse: the two equal), for :attr:`_within`.
        """
        lay, scene = self.layout, self.materials
        low = np.zeros_like(scene)
        high = np.tile(np.array([FRICTION_MAX, FRICTION_MAX, FRICTION_MAX, 1.0]), (len(scene), 1))
        fixed = ~lay.dynamic
        low[fixed], high[fixed] = scene[fixed], scene[fixed]
        still = lay.dynamic & (lay.roll_radius == 0)
        low[still, 2], high[still, 2] = scene[still, 2], scene[still, 2]
        if not lay.needs_handler and scene.size:
            low[lay.dynamic, 3] = high[lay.dynamic, 3] = scene[0, 3]
        one = np.flatnonzero(lay.dynamic & (lay.stick_value == lay.slide_value))
        moving = np.flatnonzero(lay.dynamic)
        above = np.full(scene.shape, -1, dtype=np.int64)
        above[moving, 1] = moving * 4  # dynamic <= static
        if not lay.needs_handler:
            above[moving, 0] = moving * 4 + 1  # and static <= dynamic
        return low, high, selector(moving), one, above.reshape(-1)

    def _materials_ok(self, a: np.ndarray) -> bool:
        """Whether materials rows pass every check of :meth:`_materials_error` (no message)."""
        lay = self.layout
        low, high, moving, one, above = self._fast
        if a.size == 0:
            return True
        within = self._within
        if within is not None and a.flags.c_contiguous:  # ranges, fixed values, order
            if not within(a, low, high, above):
                return False
            if not lay.needs_handler:  # no static/dynamic model: static == dynamic, checked
                return True
        else:
            if not ((a >= low) & (a <= high)).all():  # ranges and fixed values (NaN fails)
                return False
            m = a[:, moving]
            if not lay.needs_handler:  # no static/dynamic model: one coefficient
                return bool((m[:, :, 0] == m[:, :, 1]).all())
            if not (m[:, :, 1] <= m[:, :, 0]).all():
                return False
        if not one.size:
            return True
        gs, gd, _ = lay.main_material
        return bool((np.sqrt(a[:, one, 0] * gs) == np.sqrt(a[:, one, 1] * gd)).all())

    def _materials_error(self, a: np.ndarray) -> str | None:
        lay = self.layout
        scene = self.materials
        moving = lay.dynamic
        fixed = np.argwhere(~moving[None, :, None] & (a != scene[None]))
        if fixed.size:
            k, b, c = (int(v) for v in fixed[0])
            return (
                f"{MATERIAL_COLUMNS[c]} of {self._body(b)} must stay the scene's {scene[b, c]:g} "
                f"(a static body's material is shared by every copy), got {a[k, b, c]:g} in "
                f"row {k}; vary the moving bodies' (a contact combines both)"
            )
        fr = a[:, :, 0:3]
        bad = np.argwhere((fr < 0.0) | (fr > FRICTION_MAX))
        if bad.size:
            k, b, c = (int(v) for v in bad[0])
            return (
                f"{MATERIAL_COLUMNS[c]} of {self._body(b)} must be in [0, {FRICTION_MAX:g}], "
                f"got {a[k, b, c]:g} in row {k}"
            )
        bad = np.argwhere(a[:, :, 1] > a[:, :, 0])
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"dynamic_friction of {self._body(b)} must be <= its static_friction "
                f"{a[k, b, 0]:g}, got {a[k, b, 1]:g} in row {k}"
            )
        bad = np.argwhere((a[:, :, 3] < 0.0) | (a[:, :, 3] > 1.0))
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"restitution of {self._body(b)} must be in [0, 1], got {a[k, b, 3]:g} in row {k}"
            )
        rolls = lay.roll_radius > 0
        bad = np.argwhere(~rolls[None, :] & (a[:, :, 2] != scene[None, :, 2]))
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"rolling_friction of {self._body(b)} must stay the scene's {scene[b, 2]:g} (it "
                f"does not roll: no circle with rolling friction in the scene), got "
                f"{a[k, b, 2]:g} in row {k}; give it a rolling_friction > 0 in the scene"
            )
        if not lay.needs_handler:
            return self._plain_error(a)
        stick, slide, _ = shape_values(lay, a)
        one = moving & (lay.stick_value == lay.slide_value)  # no regime tracked
        bad = np.argwhere(one[None, :] & (stick != slide))
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"static_friction {a[k, b, 0]:g} and dynamic_friction {a[k, b, 1]:g} of "
                f"{self._body(b)} must make one contact friction (row {k}): the World tracks "
                "no sticking/sliding regime for it, as its scene material's make one; give "
                "it a material with static_friction > dynamic_friction in the scene"
            )
        return None

    def _plain_error(self, a: np.ndarray) -> str | None:
        """Without the friction model: static == dynamic, the scene's one restitution."""
        bad = np.argwhere(a[:, :, 0] != a[:, :, 1])
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"static_friction of {self._body(b)} must equal its dynamic_friction "
                f"{a[k, b, 1]:g} in this scene, got {a[k, b, 0]:g} in row {k}: every material "
                "of the scene has equal coefficients, so the World models no static friction "
                '(docs/world.md, "Materials"); give a scene material static_friction > '
                "dynamic_friction to vary them apart"
            )
        e = self.materials[0, 3] if self.materials.size else 0.0
        bad = np.argwhere(a[:, :, 3] != e)
        if bad.size:
            k, b = (int(v) for v in bad[0])
            return (
                f"restitution of {self._body(b)} must stay the scene's {e:g}, got "
                f"{a[k, b, 3]:g} in row {k}: every material of the scene has that restitution, "
                'so the World combines none by max (docs/world.md, "Materials"); give a scene '
                "material another restitution to vary it"
            )
        return None

    def _strength_error(self, a: np.ndarray) -> str | None:
        bad = np.argwhere(~self.actuated[None, :] & (a != 1.0))
        if bad.size:
            k, j = (int(v) for v in bad[0])
            return (
                f"the strength of joint {self.layout.joint_paths[j]!r} must stay 1 (it has no "
                f"actuator), got {a[k, j]:g} in row {k}; give 1 for it"
            )
        bad = np.argwhere((a < 0.0) | (a > STRENGTH_MAX))
        if bad.size:
            k, j = (int(v) for v in bad[0])
            return (
                f"the strength of joint {self.layout.joint_paths[j]!r} must be in "
                f"[0, {STRENGTH_MAX:g}] (a factor on its effort), got {a[k, j]:g} in row {k}"
            )
        return None


class Params:
    """The per-copy parameter tables of a World's copies, applied where each acts.

    Args:
        rules: The World's :class:`ParamRules`.
        num_envs: Copies.
        backend: The World's layout (pymunk objects).
        controls: The held controls (strength, gravity forces, rolling friction tables).
        contacts: The contact bookkeeping (the friction rule's tables).
        sensors: The sensors (the IMU's gravity, the noise scale).
    """

    def __init__(
        self,
        rules: ParamRules,
        num_envs: int,
        backend: Backend,
        controls: Controls,
        contacts: Contacts,
        sensors: SensorSuite,
    ) -> None:
        self.rules = rules
        self.backend = backend
        self.controls = controls
        self.contacts = contacts
        self.sensors = sensors
        lay = rules.layout
        n = num_envs
        #: ``(num_envs, nb)`` masses, moments (the controls' tables: rolling, gravity).
        self.masses = controls.masses
        self.moments = controls.moments
        #: ``(num_envs, nb, 4)`` materials (:data:`MATERIAL_COLUMNS`).
        self.materials = np.tile(rules.materials, (n, 1, 1))
        moving = np.flatnonzero(lay.dynamic)
        # the moving bodies (a slice where consecutive): only their materials vary
        self._mv = selector(moving)
        #: ``(num_envs, nb)`` the shapes' elasticity (what the backend holds).
        self._bounce = np.tile(lay.bounce_value, (n, 1))
        #: ``(num_envs, 2)`` gravity.
        self.gravity = np.tile(rules.gravity, (n, 1))
        #: ``(num_envs, nj)`` actuator strength (the controls' table).
        self.strength = controls.strength
        #: ``(num_envs,)`` the sensor noise scale.
        self.noise_scale = np.ones(n)
        # what _set_materials reads (the friction model's constants), made once:
        # shape_values' products and roots of the moving bodies, static and dynamic
        # friction side by side in fewer numpy calls (small arrays: the calls cost more
        # than the arithmetic)
        self._sides: tuple[np.ndarray, float] | None = None
        if lay.needs_handler:
            gs, gd, gr = lay.main_material
            self._sides = (np.array([gs, gd]), gr)
        self._rolls = lay.roll_radius > 0
        self._any_roll = bool(self._rolls.any())
        self._callbacks = bool(lay.callback_pairs)
        self.changed: set[Kind] = set()
        """The kinds set since the World was built or replayed from the scene's values."""

    def set(
        self, kind: Kind, ids: np.ndarray, a: np.ndarray, same_restitution: bool = False
    ) -> np.ndarray | None:
        """Hold checked rows ``a`` of parameter ``kind`` for copies ``ids`` and apply them.

        ``a`` is held as it is (the caller's own array, not changed afterwards).
        ``same_restitution``: materials rows whose restitution column is the one held for
        those copies (``World.set_body_friction``): the shapes' elasticity, a function of
        it alone, stays as it is.

        Returns the copies whose body states may have changed (a new mass realigns a
        body on its centre of gravity: its position can move by a rounding); their states
        must be read again; None where none did (and for the other kinds).
        """
        moved = None
        if kind == Kind.MASSES:
            held = self.backend.set_masses(ids, a)
            self.masses[ids] = held.masses
            self.moments[ids] = held.moments
            if held.moved is not None:
                moved = ids[held.moved]
            self.controls.per_copy_rolling |= self._any_roll
        elif kind == Kind.MATERIALS:
            self._set_materials(ids, a, same_restitution)
        elif kind == Kind.GRAVITY:
            self._set_gravity(ids, a)
        else:
            self.strength[ids] = a
            self.controls.strength_any = bool((self.strength != 1.0).any())
        self.controls.dirty = True
        self.changed.add(kind)
        return moved

    def _set_materials(self, ids: np.ndarray, a: np.ndarray, same_restitution: bool) -> None:
        self.materials[ids] = a
        c = self.contacts
        mv = self._mv
        at = (ids, mv) if isinstance(mv, slice) else (ids[:, None], mv)  # moving bodies
        bounce = None
        if self._sides is None:  # no friction model: shape_values as it is
            stick, slide, bounce = (v[:, mv] for v in shape_values(self.rules.layout, a))
            c.stick_table[at] = stick
            c.slide_table[at] = slide
            now = np.where(c.stick[at], stick, slide)
        else:  # static and dynamic side by side: one write of both tables
            gsd, gr = self._sides
            both = np.sqrt(a[:, mv, 0:2] * gsd)
            c.stick_slide[at] = both
            stick = both[..., 0]
            now = np.where(c.stick[at], stick, both[..., 1])
            if not same_restitution:
                bounce = np.maximum(a[:, mv, 3], gr)
        # static bodies keep the scene's values (checked): only the moving bodies' change.
        # The elasticity is a function of the restitution alone (the held one gives the
        # held elasticity): written only where it changes
        elasticity = None
        if bounce is not None and not (bounce == self._bounce[at]).all():
            elasticity = bounce
            self._bounce[at] = bounce
        coefficients = None
        if self._callbacks:  # the pre_solve callback's (sqrt static, sqrt dynamic, e)
            coefficients = np.stack([np.sqrt(a[..., 0]), np.sqrt(a[..., 1]), a[..., 3]], axis=-1)
        self.backend.set_materials(ids, now, stick, elasticity, coefficients)
        if self._any_roll:
            self.controls.roll_mu[ids] = np.where(self._rolls, a[..., 2], 0.0)
            self.controls.per_copy_rolling = True

    def _set_gravity(self, ids: np.ndarray, a: np.ndarray) -> None:
        g0 = self.rules.gravity
        self.gravity[ids] = a
        if self.backend.gravity_in_space:
            self.backend.set_gravity(ids, a, (a != g0).any(axis=1))
        else:  # copies share the space's gravity: the difference is a force on each body
            ctl = self.controls
            ctl.gravity_delta[ids] = a - g0
            ctl.gravity_any = bool(ctl.gravity_delta.any())
        own = (self.gravity != g0).any()
        self.sensors.copy_gravity = self.gravity if own else None

    def set_noise_scale(self, ids: np.ndarray, scale: np.ndarray) -> None:
        """Hold checked noise scales ``(len(ids),)`` of copies ``ids``.

        Not logged: sensors are restored, not replayed (a snapshot stores the scales).
        """
        self.noise_scale[ids] = scale
        ones = bool((self.noise_scale == 1.0).all())
        self.sensors.set_noise_scale(None if ones else self.noise_scale)

    def reset(self, every: np.ndarray) -> None:
        """Every copy back to the scene's values (a replay starts there)."""
        rules = self.rules
        n = every.size
        for kind in sorted(self.changed):
            if kind == Kind.MASSES:
                self.set(kind, every, np.tile(rules.mass, (n, 1)))
            elif kind == Kind.MATERIALS:
                self.set(kind, every, np.tile(rules.materials, (n, 1, 1)))
            elif kind == Kind.GRAVITY:
                self.set(kind, every, np.tile(rules.gravity, (n, 1)))
            else:
                self.set(kind, every, np.ones((n, rules.actuated.size)))
        self.changed.clear()
