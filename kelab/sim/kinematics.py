"""Joint kinematics of a compiled scene: joint state from body states, batched (numpy).

The World computes its joint positions and velocities here after every read (through
:class:`JointCache`); :class:`kelab.sim.robot_view.RobotView` uses the point helpers for
forward kinematics. Every function works on rows of body states ``(m, n_bodies, 6)``
(x, y, angle, vx, vy of the centre of mass, omega) in copy frames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kelab.sim.physics._compile import JointLayout, Layout
from kelab.sim.physics._guard import native_module
from kelab.sim.physics._shard import JointTables

if TYPE_CHECKING:
    from kelab.sim.physics._backend import Backend


def cross(w: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Planar cross product ``w x r`` of angular velocities ``(m,)`` and vectors ``(m, 2)``."""
    return np.stack([-w * r[:, 1], w * r[:, 0]], axis=1)


def cog_world(state: np.ndarray, cog: np.ndarray) -> np.ndarray:
    """World positions ``(m, 2)`` of a body's centre of gravity ``cog`` (body frame)."""
    a = state[:, 2]
    ca, sa = np.cos(a), np.sin(a)
    return np.stack(
        [state[:, 0] + ca * cog[0] - sa * cog[1], state[:, 1] + sa * cog[0] + ca * cog[1]], axis=1
    )


def point_state(
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


class JointCache:
    """Joint state per copy, valid where ``valid``; refreshed or invalidated by every read.

    The backend calls :meth:`update` (in the thread that stored the read) after rows of its ``raw``
    array were read: once joints have been asked for (``wanted``) it computes their joint
    state there, else it marks them stale. A backend whose ``bind_joints`` takes them (the packed
    layout's multi-step jobs, with the C helper) computes it in its shard threads instead
    when :meth:`due` says so, and then only tells :meth:`update` which rows it did.
    """

    def __init__(self, layout: Layout, num_envs: int, backend: Backend) -> None:
        nj = len(layout.joint_paths)
        self.layout = layout
        self.backend = backend
        self.pos = np.zeros((num_envs, nj))
        self.vel = np.zeros((num_envs, nj))
        self.valid = np.zeros(num_envs, dtype=bool)
        self.wanted = False
        #: False while reads are not the ones a reader is expected to follow (the World
        #: clears it around reads for its own bookkeeping): those only invalidate.
        self.eager = True
        # every joint revolute or fixed, with the C helper: a backend whose steps can
        # compute the joint state in its shard threads (C, without the GIL) is handed
        # the arrays once; its on_read then says which rows it computed
        plan = _joint_plan(layout)
        tables = JointTables(self.pos, self.vel, *plan.rev_table)
        if nj and not plan.other and native_module() is not None:
            backend.bind_joints(tables, self.due)
        # and joint_revs with its fixed arguments, looked up once, for the other reads
        # (what joint_state and _joint_rows call for these rows, without their checks
        # each read: Humanoid-v0 x256, 2 threads, the 3 reads of an env step 36 -> 30 us
        # of thread CPU, before the steps computed theirs in their threads)
        native = native_module() if plan.rev.size and not plan.other else None
        self._revs = None
        self._tables: JointTables | None = None  # for reset_tables: one record, held
        if native is not None and backend.raw.flags.c_contiguous:
            self._revs = (native.joint_revs, backend.raw.shape[1], nj, *plan.rev_table)
            self._tables = tables

    def due(self) -> bool:
        """Whether the next read's rows get their joint state (else they are marked stale)."""
        return self.wanted and self.eager

    def reset_tables(self) -> JointTables | None:
        """The arrays a reset's C read computes its rows' joint state with, or None.

        This cache's arrays and ``joint_revs``' tables, where :meth:`update` would compute
        those rows with ``joint_revs`` (then call ``update(rows, True)``); None where it
        would not.
        """
        return self._tables if self.due() else None

    def update(self, rows: slice | np.ndarray, computed: bool = False) -> None:
        """Refresh (or invalidate) the joint state of ``rows`` after a batch read.

        ``computed``: the reader computed it already: the backend's step (``bind_joints``,
        when :meth:`due` said so before it) or a reset's read (:meth:`reset_tables`).
        """
        if computed:
            self.valid[rows] = True
        elif self.wanted and self.eager and self.pos.shape[1]:
            revs = self._revs
            if revs is not None and (
                rows.step is None if isinstance(rows, slice) else rows.dtype == np.int64
            ):
                revs_c, nb, nj, cols, child, parent, rel = revs
                raw, pos, vel = self.backend.raw, self.pos, self.vel
                if isinstance(rows, slice):  # rows of C-ordered arrays: views, in place
                    revs_c(raw[rows], nb, pos[rows], vel[rows], nj, cols, child, parent, rel)
                else:
                    at = np.ascontiguousarray(rows)
                    revs_c(raw, nb, pos, vel, nj, cols, child, parent, rel, at)
            elif isinstance(rows, slice):  # views: computed in place
                joint_state(self.layout, self.backend.raw[rows], (self.pos[rows], self.vel[rows]))
            elif not _joint_rows(self.layout, self.backend.raw, rows, self.pos, self.vel):
                self.pos[rows], self.vel[rows] = joint_state(self.layout, self.backend.raw[rows])
            self.valid[rows] = True
        else:
            self.valid[rows] = False


def _joint_rows(
    layout: Layout, raw: np.ndarray, rows: np.ndarray, pos: np.ndarray, vel: np.ndarray
) -> bool:
    """Write :func:`joint_state`'s values of rows ``rows`` into ``pos`` and ``vel`` in place.

    Only where every joint is revolute or fixed and the C helper is built (its
    ``joint_revs`` on those rows: the same operations, without gathering the rows and
    scattering the results, ~8 us less for a reset of 12 Humanoids); False, with nothing
    written, elsewhere (then use :func:`joint_state`).
    """
    plan = _joint_plan(layout)
    native = native_module() if plan.rev.size and not plan.other else None
    if (
        native is None
        or rows.dtype.kind not in "iu"
        or not (raw.flags.c_contiguous and pos.flags.c_contiguous and vel.flags.c_contiguous)
    ):
        return False
    at = np.ascontiguousarray(rows, dtype=np.int64)
    native.joint_revs(raw, raw.shape[1], pos, vel, pos.shape[1], *plan.rev_table, at)
    return True


def joint_state(
    layout: Layout, raw: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Joint positions and velocities ``(m, n_joints)`` from body states ``(m, nb, 6)``.

    ``out``: arrays ``(m, n_joints)`` to write them into (else new ones).

    Revolute/fixed joints are computed together (a few gathers of every such joint at
    once; with the C helper, its ``joint_revs``, the same operations), the others one by
    one with the fewest numpy calls; every value is the same sequence of float operations
    as the plain per-joint formulas (bit-identical).
    """
    m = raw.shape[0]
    plan = _joint_plan(layout)
    nj = len(layout.joint_paths)
    pos, vel = out if out is not None else (np.empty((m, nj)), np.empty((m, nj)))
    native = native_module() if plan.rev.size else None
    contiguous = raw.flags.c_contiguous and pos.flags.c_contiguous and vel.flags.c_contiguous
    if native is not None and contiguous:  # the same operations in C: ~1 us, not ~20 us
        native.joint_revs(raw, raw.shape[1], pos, vel, nj, *plan.rev_table)
    elif plan.rev.size:
        a, w = raw[:, :, 2], raw[:, :, 5]
        for k, ch, pa, rel in plan.rev_few:  # one or two: plain columns are cheaper
            if pa < 0:
                pos[:, k] = (a[:, ch] - 0.0) - rel
                vel[:, k] = w[:, ch] - 0.0
            else:
                pos[:, k] = (a[:, ch] - a[:, pa]) - rel
                vel[:, k] = w[:, ch] - w[:, pa]
        if plan.rev_root.size:  # parentless: child angle minus a zero parent angle
            rr = plan.rev_root
            pos[:, rr] = (a[:, plan.rev_root_child] - 0.0) - plan.rev_root_rel
            vel[:, rr] = w[:, plan.rev_root_child] - 0.0
        if plan.rev_pair.size:
            rp, rc, rpa = plan.rev_pair, plan.rev_pair_child, plan.rev_pair_parent
            pos[:, rp] = (a[:, rc] - a[:, rpa]) - plan.rev_pair_rel
            vel[:, rp] = w[:, rc] - w[:, rpa]
    cog = layout.cog
    for k in plan.other:
        jl = layout.joints[k]
        c = raw[:, jl.child]
        if jl.kind == "prismatic" and jl.parent < 0:
            _ground_slider(jl, cog[jl.child], c, pos[:, k], vel[:, k])
            continue
        p = raw[:, jl.parent] if jl.parent >= 0 else np.zeros((m, 6))
        q, vq = point_state(c, jl.anchor_child, cog[jl.child])
        if jl.parent >= 0:
            r, vr = point_state(p, jl.anchor_parent, cog[jl.parent])
            u = q - r
            du = vq - vr
        else:  # the ground frame: a fixed point
            u = q - np.asarray(jl.anchor_parent)
            du = vq
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


def _ground_slider(
    jl: JointLayout, cog: np.ndarray, c: np.ndarray, pos: np.ndarray, vel: np.ndarray
) -> None:
    """Position and velocity of a prismatic joint to the ground, written into pos, vel.

    ``point_state(c, anchor_child, cog)`` minus the ground anchor, projected on the axis:

        q = (x + cos a * lx - sin a * ly - px,  y + sin a * lx + cos a * ly - py)
        v = (vx - w * (sin a * dx + cos a * dy),  vy + w * (cos a * dx - sin a * dy))
        pos = q . axis,  vel = v . axis          (d = anchor - centre of gravity)

    evaluated in that order, with the terms whose constant factor is zero left out (a
    slider along x anchored at its body's origin is ``pos = x - px``: no cos, no sin),
    and factors of one not multiplied. Leaving out ``+ 0 * t`` can only change the sign
    of an exact zero result; every other bit is that of the full formula.
    """
    lx, ly = jl.anchor_child
    dx, dy = lx - cog[0], ly - cog[1]
    ax, ay = jl.axis
    px, py = jl.anchor_parent
    # the columns are taken where a term needs them (a slider along x at its body's
    # origin reads x and vx alone; unpacking all six views cost ~3 us a call, #42.1)
    trig: dict[str, np.ndarray] = {}

    def cos() -> np.ndarray:
        if "c" not in trig:
            trig["c"] = np.cos(c[:, 2])
        return trig["c"]

    def sin() -> np.ndarray:
        if "s" not in trig:
            trig["s"] = np.sin(c[:, 2])
        return trig["s"]

    def axis(fx: Any, fy: Any, out: np.ndarray) -> None:  # out = fx() * ax + fy() * ay
        tx = None if ax == 0.0 else (fx() if ax == 1.0 else fx() * ax)
        ty = None if ay == 0.0 else (fy() if ay == 1.0 else fy() * ay)
        if tx is None and ty is None:
            out[:] = 0.0
        elif ty is None:
            out[:] = tx
        elif tx is None:
            out[:] = ty
        else:
            np.add(tx, ty, out=out)

    def qx() -> np.ndarray:
        return _fold(_fold(_fold(c[:, 0], cos, lx, 1), sin, ly, -1), None, px, -1)

    def qy() -> np.ndarray:
        return _fold(_fold(_fold(c[:, 1], sin, lx, 1), cos, ly, 1), None, py, -1)

    def vx() -> np.ndarray:
        r = _fold(_fold(None, sin, dx, 1), cos, dy, 1)
        return c[:, 3] if r is None else c[:, 3] - c[:, 5] * r

    def vy() -> np.ndarray:
        r = _fold(_fold(None, cos, dx, 1), sin, dy, -1)
        return c[:, 4] if r is None else c[:, 4] + c[:, 5] * r

    axis(qx, qy, pos)
    axis(vx, vy, vel)


def _fold(acc: Any, factor: Any, const: float, sign: int) -> Any:
    """``acc + sign * factor() * const`` (``factor`` None: the constant alone), 0-terms left out.

    ``acc`` None stands for a sum with no term yet. The operations are those of the
    written formula (``acc + f * c`` or ``acc - f * c``), in the same order.
    """
    if const == 0.0:
        return acc
    term: Any = const if factor is None else factor() * const
    if acc is None:
        return term if sign > 0 else -term
    return acc + term if sign > 0 else acc - term


class _JointPlan:
    """Index arrays of a layout's joints, grouped by how their state is computed."""

    def __init__(self, layout: Layout) -> None:
        js = layout.joints
        rev = [k for k, j in enumerate(js) if j.kind in ("revolute", "fixed")]
        self.rev = np.array(rev, dtype=np.int64)
        # with one or two such joints, per-joint columns beat the gathers
        self.rev_few = [(k, js[k].child, js[k].parent, js[k].rel_angle0) for k in rev]
        if len(rev) > 2:
            self.rev_few = []
        else:
            rev = []
        root = [k for k in rev if js[k].parent < 0]
        pair = [k for k in rev if js[k].parent >= 0]
        self.rev_root = np.array(root, dtype=np.int64)
        self.rev_root_child = np.array([js[k].child for k in root], dtype=np.int64)
        self.rev_root_rel = np.array([js[k].rel_angle0 for k in root], dtype=np.float64)
        self.rev_pair = np.array(pair, dtype=np.int64)
        self.rev_pair_child = np.array([js[k].child for k in pair], dtype=np.int64)
        self.rev_pair_parent = np.array([js[k].parent for k in pair], dtype=np.int64)
        self.rev_pair_rel = np.array([js[k].rel_angle0 for k in pair], dtype=np.float64)
        self.other = [k for k, j in enumerate(js) if j.kind not in ("revolute", "fixed")]
        #: every revolute and fixed joint: (column, child, parent or -1, initial relative
        #: angle), the tables of the C helper's ``joint_revs``
        every = self.rev.tolist()
        self.rev_table = (
            self.rev,
            np.array([js[k].child for k in every], dtype=np.int64),
            np.array([js[k].parent if js[k].parent >= 0 else -1 for k in every], dtype=np.int64),
            np.array([js[k].rel_angle0 for k in every], dtype=np.float64),
        )


def _joint_plan(layout: Layout) -> _JointPlan:
    """The layout's joint plan, built once and kept on the (frozen) layout."""
    plan = layout.__dict__.get("_joint_plan")
    if plan is None:
        plan = _JointPlan(layout)
        object.__setattr__(layout, "_joint_plan", plan)
    return plan
