"""The held controls of a World's copies and the forces they make (kelab.sim internal).

:class:`Controls` holds what the writers set and every physics step applies until it is
changed: joint efforts (clipped to each actuator's limit), PD position targets and
external body forces, and, in ``"held"`` controller updates (``World.controller_updates``),
the PD torques computed at the last update (:meth:`Controls.pd_torques`). It validates
new values (:meth:`Controls.command`, :meth:`Controls.set_body_forces`) and turns the
held values into the per-body forces of a step (:meth:`Controls.forces`: actuators, PD,
rolling resistance, external forces).
The World logs what it returns (docs/world.md, "Snapshots") and hands the forces to its
backend; nothing here reads pymunk.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from kelab.sim._values import float_array, forces_error
from kelab.sim.kinematics import cog_world, joint_state
from kelab.sim.physics._compile import Layout
from kelab.sim.physics._guard import native_module
from kelab.sim.replay_log import Kind

#: The setter and argument each command kind is named by in errors.
COMMAND_NAMES: dict[Kind, str] = {
    Kind.EFFORTS: "set_joint_efforts: efforts",
    Kind.TARGETS: "set_joint_position_targets: targets",
}


def _non_finite(name: str, vals: np.ndarray, ids: np.ndarray) -> str:
    """The error for ``(len(ids), k)`` command rows ``vals`` holding NaN or inf."""
    rows = np.flatnonzero(~np.isfinite(vals).all(axis=1))
    bad = ids[rows].tolist()
    shown = f"{bad[:5]}" if len(bad) <= 5 else f"{bad[:5]} and {len(bad) - 5} more"
    return (
        f"{name} must be finite numbers, got NaN or inf for copies {shown}; pass finite "
        "values (find where they came from, e.g. a policy that diverged; np.nan_to_num "
        "replaces them)"
    )


class Controls:
    """Held efforts, PD targets and external forces of every copy, with their limits.

    Args:
        layout: The compiled scene.
        num_envs: Copies.
    """

    def __init__(self, layout: Layout, num_envs: int) -> None:
        self.layout = layout
        self.n = num_envs
        self.nb = nb = len(layout.body_paths)
        self.nj = nj = len(layout.joint_paths)
        self.efforts = np.zeros((num_envs, nj))
        self.targets = np.zeros((num_envs, nj))
        self.external = np.zeros((num_envs, nb, 3))  # held external fx, fy, torque
        self.external_any = False
        #: PD torques held between controller updates (used when :attr:`pd_held`).
        self.pd_efforts = np.zeros((num_envs, nj))
        #: ``"held"`` controller updates: PD joints apply :attr:`pd_efforts`, not a
        #: torque recomputed from the state in every step.
        self.pd_held = False
        #: The held values changed since the forces were last handed to the backend.
        self.dirty = True
        # per-copy parameters (kelab/sim/_params.py keeps these tables, set here by it):
        #: ``(num_envs, nj)`` actuator strength: each actuator's effort (held, clipped or
        #: PD) is multiplied by it; used once :attr:`strength_any`.
        self.strength = np.ones((num_envs, nj))
        self.strength_any = False
        #: ``(num_envs, 2)`` each copy's gravity minus the space's, applied as the force
        #: ``mass * difference`` on every body (layouts whose copies share a space); used
        #: once :attr:`gravity_any`.
        self.gravity_delta = np.zeros((num_envs, 2))
        self.gravity_any = False
        #: ``(num_envs, nb)`` body masses, moments and rolling friction per copy (the
        #: scene's until changed; read once :attr:`per_copy_rolling` / gravity_any).
        self.masses = np.tile(layout.mass, (num_envs, 1))
        self.moments = np.tile(layout.moment, (num_envs, 1))
        self.roll_mu = np.tile(layout.roll_mu, (num_envs, 1))
        self.per_copy_rolling = False
        act = [j.actuator for j in layout.joints]
        self._pd = np.array([a == "pd" for a in act], dtype=bool)
        self._limit = np.array([j.limit for j in layout.joints], dtype=np.float64)
        self._kp = np.array([j.kp for j in layout.joints], dtype=np.float64)
        self._kd = np.array([j.kd for j in layout.joints], dtype=np.float64)
        self._actuated = np.array([a != "none" for a in act], dtype=bool)
        self._cols = np.arange(nj)
        self._bounds: tuple[np.ndarray, np.ndarray] | None = None
        # per (kind, joint columns' bytes): the columns' order when they list every joint
        # (else None), once _check_takes passed: a task sends the same columns every step
        # (Humanoid-v0 x256: ~12 us of its ~75 us command a step)
        self._col_orders: dict[tuple[Kind, bytes], np.ndarray | None] = {}
        self._any_pd = bool(self._pd.any())
        #: Whether the forces depend on the body states (PD actuators, sliders between
        #: two bodies): then they are computed again before every step.
        self.state_dependent = self._any_pd or any(
            j.kind == "prismatic" and j.parent >= 0 and j.actuator != "none" for j in layout.joints
        )
        #: Whether some body has rolling resistance (its torque needs the contacts).
        self.rolling = bool((layout.roll_radius > 0).any())
        # effort -> force terms of state-independent actuators: (joint, body, component,
        # coefficient), applied in joint order as out[:, body, component] += e * coefficient
        self._terms: list[tuple[int, int, int, float]] = []
        for k, jl in enumerate(layout.joints):
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
        self._layers = self._term_layers(layout)
        # the layers' terms end to end, for the C helper's term_forces (a slot's terms in
        # layer order: the same sums; Humanoid-v0 x256, ~30 -> ~4 us a step)
        self._flat_terms = (
            tuple(np.concatenate(cols) for cols in zip(*self._layers, strict=True))
            if self._layers
            else None
        )

    def _term_layers(
        self, layout: Layout
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
        """The constant terms as layers of one fancy ``+=`` each, or None (use the loop).

        Layer ``j`` holds the ``j``-th term of every ``(body, component)`` slot, in joint
        order, so each slot adds its terms in the order of the loop in :meth:`forces`
        (``x - e`` is ``x + e * -1.0`` bit for bit): the same sums in ~3 numpy calls a
        layer instead of ~3 a term (#42.1: a humanoid's 11 terms cost ~25 us a step of
        one copy). Only where every actuator's force is a constant term (no slider
        between two bodies, whose force is computed from the state in joint order).
        """
        if any(
            j.actuator != "none" and j.kind == "prismatic" and j.parent >= 0 for j in layout.joints
        ):
            return None
        depth: dict[int, int] = {}
        layers: list[list[tuple[int, int, float]]] = []
        for k, b, comp, coef in self._terms:
            slot = 3 * b + comp
            j = depth.get(slot, 0)
            depth[slot] = j + 1
            if j == len(layers):
                layers.append([])
            layers[j].append((slot, k, coef))
        return [
            (
                np.array([t[0] for t in layer], dtype=np.int64),
                np.array([t[1] for t in layer], dtype=np.int64),
                np.array([t[2] for t in layer], dtype=np.float64),
            )
            for layer in layers
        ]

    def clip_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Effort bounds as contiguous ``(num_envs, n_joints)`` arrays (-limit, limit).

        A joint without an actuator gets [+0.0, +0.0]: its effort is always +0.0.
        """
        if self._bounds is None:
            limit = np.where(self._actuated, self._limit, 0.0)  # no actuator: [0, 0]
            hi = np.ascontiguousarray(np.broadcast_to(limit, (self.n, self.nj)))
            self._bounds = (np.where(self._actuated, -hi, 0.0), hi)
        return self._bounds

    def command(
        self,
        kind: Kind,
        values: npt.ArrayLike,
        joint_ids: np.ndarray | None,
        ids: np.ndarray,
        every_copy: bool,
    ) -> np.ndarray:
        """Hold new efforts (clipped) or PD targets; return the rows now held for ``ids``.

        Args:
            kind: ``Kind.EFFORTS`` or ``Kind.TARGETS``.
            values: ``(len(ids), len(joint_ids))``, broadcastable.
            joint_ids: Checked World joint indices, int64 1-D (the columns of ``values``); None:
                every joint.
            ids: Checked copy indices.
            every_copy: ``ids`` is the World's every-copy array (whole-array writes).

        Returns:
            ``(len(ids), n_joints)``: every joint's held value for those copies, as the
            replay log records it.

        Raises:
            ValueError: On a wrong shape or non-finite values.
        """
        order = None if joint_ids is None else self._column_order(kind, joint_ids)
        ncols = self.nj if joint_ids is None else joint_ids.size
        name = COMMAND_NAMES[kind]
        vals = float_array(values, name)
        try:
            if vals.shape != (ids.size, ncols):
                vals = np.broadcast_to(vals, (ids.size, ncols))
        except ValueError:
            raise ValueError(
                f"{name} must have shape ({ids.size}, {ncols}) (copies, joints), got {vals.shape}"
            ) from None
        # a finite sum means every value is finite (one pass); else look closer (overflow)
        if not (math.isfinite(vals.sum()) or np.isfinite(vals).all()):
            raise ValueError(_non_finite(name, vals, ids))
        target = self.efforts if kind == Kind.EFFORTS else self.targets
        if order is not None and every_copy:
            # every joint, in another order: put the columns in joint order (no fancy
            # indexing of rows below)
            ordered = np.empty((ids.size, self.nj))
            ordered[:, order] = vals
            vals, joint_ids = ordered, None
        every = joint_ids is None and every_copy
        if not every:
            cols = np.asarray(self._cols if joint_ids is None else joint_ids, np.int64)
            cols = cols.reshape(-1)
        if kind == Kind.EFFORTS:
            if every:  # the common case: all copies, all joints (no fancy indexing)
                # limits broadcast to the full shape once: a (nj,) operand would make
                # numpy loop over rows of nj elements (same values as np.clip); the
                # bounds of joints without an actuator are [0, 0]: their effort is 0
                lo, hi = self.clip_bounds()
                full = np.maximum(vals, lo)
                np.minimum(full, hi, out=full)
            else:
                # every copy: a whole-array copy, not a gather of rows (#42.1)
                full = target.copy() if every_copy else target[ids]
                lim = self._limit[cols]
                # np.clip's values (vals are finite) without its Python wrapper
                clipped = np.minimum(np.maximum(vals, -lim), lim)
                full[:, cols] = np.where(self._actuated[cols], clipped, 0.0)
        elif every:
            full = np.array(vals)
        else:
            full = target.copy() if every_copy else target[ids]
            full[:, cols] = vals
        if every_copy:
            target[...] = full
        else:
            target[ids] = full
        self.dirty = True
        return full

    def _column_order(self, kind: Kind, joint_ids: np.ndarray) -> np.ndarray | None:
        """Checked columns ``joint_ids`` (int64, 1-D): as an order of every joint, or None.

        Refuses what :meth:`_check_takes` refuses; remembered per kind and columns (the
        verdict depends on nothing else), so the same columns cost one lookup a step.
        """
        key = (kind, joint_ids.tobytes())
        if key in self._col_orders:
            return self._col_orders[key]
        self._check_takes(kind, joint_ids)
        every = joint_ids.size == self.nj and len(set(joint_ids.tolist())) == self.nj
        order = joint_ids.copy() if every else None
        if len(self._col_orders) >= 64:  # a caller cycling through many column lists
            self._col_orders.clear()
        self._col_orders[key] = order
        return order

    def _check_takes(self, kind: Kind, joint_ids: np.ndarray) -> None:
        """Refuse a command that every listed joint ignores (it would do nothing).

        Efforts drive effort actuators, position targets PD actuators; a joint of the
        other kind, or without an actuator, ignores its column. A call that lists only
        such joints is a mistake (a new user's crane held a target on its effort-driven
        rail and saw nothing move): refused, naming the first joint and what it takes.
        A call that lists some joints that take it writes those (the others ignore
        theirs: docs/world.md, "API").
        """
        cols = np.asarray(joint_ids, np.int64).reshape(-1)
        takes = self._pd if kind == Kind.TARGETS else self._actuated & ~self._pd
        if cols.size == 0 or takes[cols].any():
            return
        path = self.layout.joint_paths[int(cols[0])]
        actuator = self.layout.joints[int(cols[0])].actuator
        what, fix = {
            ("pd", Kind.EFFORTS): (
                "a PD actuator (it follows position targets)",
                "use set_joint_position_targets / RobotView.set_joint_position_target",
            ),
            ("effort", Kind.TARGETS): (
                "an effort actuator (it takes efforts)",
                "use set_joint_efforts / RobotView.set_joint_effort_target",
            ),
        }.get(
            (actuator, kind),
            ("no actuator", "give the joint an EffortActuator or a PDActuator in the scene"),
        )
        command = "position targets" if kind == Kind.TARGETS else "efforts"
        others = "" if cols.size == 1 else f" (nor do the other {cols.size - 1} listed)"
        raise ValueError(
            f"joint {path!r} has {what}: {command} to it would do nothing{others}; {fix}"
        )

    def pd_torques(self, ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """PD torques of copies ``ids`` from their body states ``rows``, ``(len(ids), nj)``.

        ``kp * (target - q) - kd * qd`` clipped to each actuator's limit, 0 for joints
        without a PD actuator: what every step applies in ``"every_step"`` updates.
        """
        pos, vel = joint_state(self.layout, rows)
        pd = self._kp * (self.targets[ids] - pos) - self._kd * vel
        return np.where(self._pd, np.clip(pd, -self._limit, self._limit), 0.0)

    def set_body_forces(
        self,
        ids: np.ndarray,
        forces: npt.ArrayLike,
        torques: npt.ArrayLike | None,
    ) -> np.ndarray:
        """Hold external forces of copies ``ids``; return the ``(len(ids), nb, 3)`` held.

        Static bodies get zeros (they ignore forces).

        Raises:
            ValueError: On a wrong shape (naming the argument, the shape seen and the
                shape expected), non-finite values or values beyond ``±FORCE_MAX``.
        """
        f = float_array(forces, "set_body_forces: forces")
        want = (ids.size, self.nb, 2)
        if f.shape != want:
            raise ValueError(
                f"set_body_forces: forces must have shape {want} (copies, bodies, fx/fy), "
                f"got {f.shape}"
            )
        if torques is None:
            t = np.zeros(want[:2])
        else:
            t = float_array(torques, "set_body_forces: torques")
            if t.shape != want[:2]:
                raise ValueError(
                    f"set_body_forces: torques must have shape {want[:2]} (copies, bodies), "
                    f"got {t.shape}"
                )
        full = np.empty((ids.size, self.nb, 3))
        full[:, :, 0:2] = f
        full[:, :, 2] = t
        problem = forces_error(full)
        if problem is not None:
            raise ValueError(
                f"set_body_forces: forces and torques {problem}; hold forces a scene's "
                "bodies can take (a larger one flings any body out of the world's limits)"
            )
        full[:, ~self.layout.dynamic] = 0.0
        self.external[ids] = full
        self.external_any = bool(self.external.any())
        self.dirty = True
        return full

    def held(self, ids: np.ndarray) -> list[tuple[Kind, np.ndarray]]:
        """Copies of the efforts, targets and external forces held by copies ``ids``."""
        return [
            (Kind.EFFORTS, self.efforts[ids].copy()),
            (Kind.TARGETS, self.targets[ids].copy()),
            (Kind.FORCES, self.external[ids].copy()),
            (Kind.PD_EFFORTS, self.pd_efforts[ids].copy()),
        ]

    def hold(self, kind: Kind, ids: np.ndarray, values: np.ndarray) -> None:
        """Write held values of ``kind`` (efforts, targets, forces, PD torques) for ``ids``.

        Checked values only: a replay of the log or a rebase puts back what was held.
        """
        if kind == Kind.EFFORTS:
            self.efforts[ids] = values
        elif kind == Kind.TARGETS:
            self.targets[ids] = values
        elif kind == Kind.PD_EFFORTS:
            self.pd_efforts[ids] = values
        else:
            self.external[ids] = values
            self.external_any = bool(self.external.any())
        self.dirty = True

    def rows(self) -> tuple[np.ndarray, ...]:
        """The arrays whose rows :meth:`clear` zeroes (one per copy a row)."""
        return (self.efforts, self.targets, self.external, self.pd_efforts)

    def clear(self, ids: np.ndarray, zeroed: bool = False) -> None:
        """Zero the held controls of copies ``ids`` (a reset).

        ``zeroed``: their rows of :meth:`rows` are zero already (the caller wrote them,
        with a reset's other rows, in one batch).
        """
        if not zeroed:
            self.efforts[ids] = 0.0
            self.targets[ids] = 0.0
            self.external[ids] = 0.0
            self.pd_efforts[ids] = 0.0
        self.external_any = bool(self.external_any and self.external.any())
        self.dirty = True

    def forces(
        self, ids: np.ndarray, raw: np.ndarray, normals: np.ndarray, dt: float
    ) -> np.ndarray:
        """Per-body forces ``(len(ids), nb, 3)`` (fx, fy, torque) for the next step.

        Args:
            ids: Copies to step.
            raw: ``(num_envs, nb, 6)`` body states, fresh for ``ids`` where the forces
                depend on them (:attr:`state_dependent`, :attr:`rolling`).
            normals: ``(num_envs, nb)`` normal contact force sums of the last step
                (rolling resistance).
            dt: The step size (rolling resistance never reverses a spin within a step).
        """
        lay = self.layout
        out = np.zeros((ids.size, self.nb, 3))
        all_ids = ids.size == self.n
        effort = self.efforts if all_ids else self.efforts[ids]
        rows = None
        if self.state_dependent or self.rolling:
            rows = raw if all_ids else raw[ids]
        if self._any_pd and self.pd_held:
            effort = effort.copy()
            effort[:, self._pd] = self.pd_efforts[ids][:, self._pd]
        elif self._any_pd:
            assert rows is not None
            pos, vel = joint_state(lay, rows)
            pd = self._kp * (self.targets[ids] - pos) - self._kd * vel
            effort = effort.copy()
            effort[:, self._pd] = np.clip(pd, -self._limit, self._limit)[:, self._pd]
        if self.strength_any:
            effort = effort * (self.strength if all_ids else self.strength[ids])
        if self._layers is not None:
            flat = out.reshape(ids.size, 3 * self.nb)
            native = native_module()
            if native is not None and self._flat_terms and effort.flags.c_contiguous:
                # the same products and sums, in C
                native.term_forces(effort, self.nj, flat, 3 * self.nb, *self._flat_terms)
            else:
                for slots, joints, coefs in self._layers:
                    flat[:, slots] += effort[:, joints] * coefs
        else:
            self._add_terms(out, effort, rows)
        if self.rolling:
            assert rows is not None
            round_ = lay.roll_radius > 0
            w = rows[:, round_, 5]
            moment, mu = lay.moment[round_], lay.roll_mu[round_]
            if self.per_copy_rolling:
                moment, mu = self.moments[ids][:, round_], self.roll_mu[ids][:, round_]
            cap = np.abs(w) * moment / dt
            tau = np.minimum(mu * normals[ids][:, round_] * lay.roll_radius[round_], cap)
            out[:, round_, 2] -= np.sign(w) * tau
        if self.external_any:
            out += self.external[ids]
        if self.gravity_any:  # each body's weight difference from the space's gravity
            out[:, :, 0:2] += self.masses[ids][:, :, None] * self.gravity_delta[ids][:, None, :]
        return out

    def _add_terms(self, out: np.ndarray, effort: np.ndarray, rows: np.ndarray | None) -> None:
        """Add every actuator's force to ``out``, joint by joint (sliders between bodies)."""
        lay = self.layout
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
                assert rows is not None
                pa = rows[:, jl.parent, 2]
                ca, sa = np.cos(pa), np.sin(pa)
                ax = ca * jl.axis[0] - sa * jl.axis[1]
                ay = sa * jl.axis[0] + ca * jl.axis[1]
                fx, fy = e * ax, e * ay
                out[:, jl.child, 0] += fx
                out[:, jl.child, 1] += fy
                if jl.parent >= 0:
                    cc = cog_world(rows[:, jl.child], lay.cog[jl.child])
                    pc = cog_world(rows[:, jl.parent], lay.cog[jl.parent])
                    rx, ry = cc[:, 0] - pc[:, 0], cc[:, 1] - pc[:, 1]
                    out[:, jl.parent, 0] -= fx
                    out[:, jl.parent, 1] -= fy
                    out[:, jl.parent, 2] -= rx * fy - ry * fx
