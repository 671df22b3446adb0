"""Warm starts: what a rebased copy keeps of Chipmunk's memory between steps (internal).

A rebuild makes a copy fresh (a reset): new space, no contact or joint history. A rebase
only has to bound the replay log behind snapshots, so it should not change the motion.
Chipmunk's solver carries four things from one step to the next, and a *warm* rebuild
carries them over into the fresh space:

- per moving body, its bias velocities (the last step's position correction, which the
  next position update adds);
- per constraint, its accumulated impulse ``jAcc`` (the joint warm start);
- per contact of the last step, its accumulated normal and tangent impulses (the contact
  warm start), found again by the contact's shapes and feature hash;
- the last step's dt (the next step scales the cached impulses by dt / previous dt).

:func:`capture` reads them into one float64 vector per copy (:class:`WarmFormat` says
what is where). :func:`apply`, run on a copy just rebuilt at the same body states, takes
one step at rest (zero velocities, the last dt): nothing moves (``p + 0 * dt``), and the
pairs touching at those positions get their arbiters, with the contacts the last step
had. Then it writes the velocities back, and the bias velocities, joint impulses and
contact impulses from the vector. A World with ``collision_persistence = 1`` caches only
the arbiters of the last step, so nothing else is lost. A replay repeats exactly the same
calls from the same vector, so a rebased copy replays bit for bit (docs/world.md,
"Snapshots").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import CopySpace

#: Floats per contact in a warm-start vector: shape a, shape b (indices into the copy's
#: shapes), the contact's feature hash as two 32-bit halves (high, low), jnAcc, jtAcc.
CONTACT = 6
_HALF = 1 << 32


class WarmParts(NamedTuple):
    """A parsed warm-start vector."""

    bias: np.ndarray
    """``(moving bodies, 3)`` v_bias x, y and w_bias."""
    impulses: np.ndarray
    """``(n_impulses,)`` the constraints' jAcc, one after the other."""
    contacts: np.ndarray
    """``(k, CONTACT)`` per contact (see :data:`CONTACT`)."""


@dataclass(frozen=True)
class WarmFormat:
    """Where things are in one copy's warm-start vector.

    ``[bias: moving * 3][impulses: n_impulses][k][contacts: k * CONTACT]``.
    """

    moving: np.ndarray
    """Indices of the moving bodies (scene order)."""
    sizes: tuple[int, ...]
    """Floats of each constraint's impulse (0 for a spring)."""
    n_shapes: int
    """Shapes of a copy."""

    @classmethod
    def of(cls, copy: CopySpace, dynamic: np.ndarray) -> WarmFormat:
        """The format of a copy's vectors (``dynamic``: the layout's moving bodies)."""
        sizes = tuple(cp.WARM_IMPULSES[t][1] for t in copy.constraint_types)
        return cls(np.flatnonzero(dynamic), sizes, len(copy.shape_ptrs))

    @property
    def head(self) -> int:
        """Floats before the contacts: bias, impulses and the contact count."""
        return self.moving.size * 3 + sum(self.sizes) + 1

    def parse(self, vec: np.ndarray) -> WarmParts:
        """Split one copy's vector; raise ``ValueError`` saying what is wrong with it."""
        head = self.head
        if vec.ndim != 1 or vec.size < head:
            raise ValueError(f"must hold at least {head} floats, got {vec.size}")
        if not np.isfinite(vec).all():
            raise ValueError("must be finite")
        k = vec[head - 1]
        if k != int(k) or k < 0 or vec.size != head + int(k) * CONTACT:
            raise ValueError(
                f"must hold {head} floats, then a contact count k and k * {CONTACT} floats; "
                f"got k = {k!r} and {vec.size - head} contact floats"
            )
        nb = self.moving.size * 3
        contacts = vec[head:].reshape(-1, CONTACT)
        ints = contacts[:, 0:4]
        if (ints != np.floor(ints)).any() or (ints < 0).any():
            raise ValueError("contact shapes and hash halves must be integers >= 0")
        if (contacts[:, 0:2] >= self.n_shapes).any():
            raise ValueError(f"contact shapes must be in [0, {self.n_shapes})")
        if (contacts[:, 2:4] >= _HALF).any():
            raise ValueError("contact hash halves must be below 2**32")
        return WarmParts(vec[:nb].reshape(-1, 3), vec[nb : head - 1], contacts)

    def split(self, flat: np.ndarray, count: int) -> tuple[list[np.ndarray], int]:
        """Cut ``count`` vectors off the front of ``flat``; returns them and floats used."""
        out, at, head = [], 0, self.head
        for _ in range(count):
            if flat.size < at + head:
                raise ValueError(f"ends inside a copy's vector (needs {head} floats more)")
            k = flat[at + head - 1]
            if not (np.isfinite(k) and k == int(k) and 0 <= k <= flat.size):
                raise ValueError(f"contact count must be an integer >= 0, got {k!r}")
            end = at + head + int(k) * CONTACT
            if flat.size < end:
                raise ValueError(f"ends inside a copy's contacts (needs {end - flat.size} more)")
            out.append(flat[at:end])
            at = end
        return out, at


def _shape_index(copy: CopySpace) -> dict[int, int]:
    """Each shape's address -> its index among the copy's shapes (how vectors name them)."""
    return {cp.address(sp): k for k, sp in enumerate(copy.shape_ptrs)}


def capture(copy: CopySpace, fmt: WarmFormat) -> np.ndarray:
    """Read a copy's warm starts (nothing changes)."""
    bodies = copy.body_ptrs
    bias = [cp.body_bias(bodies[i]) for i in fmt.moving.tolist()]
    imp = [
        v
        for con, ctype in zip(copy.constraints, copy.constraint_types, strict=True)
        for v in cp.constraint_impulse(con, ctype)
    ]
    index = _shape_index(copy)
    rows: list[tuple[float, ...]] = []

    def visit(arb: object) -> None:
        a, b = index[cp.address(arb.a)], index[cp.address(arb.b)]
        for i in range(arb.count):
            c = arb.contacts[i]
            h = int(c.hash)
            rows.append((a, b, h >> 32, h & (_HALF - 1), c.jnAcc, c.jtAcc))

    cp.each_cached_arbiter(cp.space_ptr(copy.space), visit)
    parts = [np.asarray(bias, dtype=np.float64).reshape(-1), np.asarray(imp, dtype=np.float64)]
    parts.append(np.array([len(rows)], dtype=np.float64))
    table = np.asarray(rows, dtype=np.float64).reshape(-1, CONTACT)
    # Chipmunk visits cached arbiters in an order of memory addresses: sort the contacts
    # (shapes, hash, then impulses) so the same physics always gives the same vector
    order = np.lexsort(table.T[::-1])
    parts.append(table[order].reshape(-1))
    return np.concatenate(parts)


def apply(copy: CopySpace, fmt: WarmFormat, parts: WarmParts, dt: float) -> None:
    """Give a copy just rebuilt (at its body states) the warm starts ``parts``.

    See the module docstring: one step of ``dt`` at rest makes the arbiters, then the
    velocities, bias velocities and impulses are written. A contact the vector does not
    hold (by shapes and hash) starts from zero, as a new one would. ``parts`` come from
    :meth:`WarmFormat.parse` (checked).
    """
    bodies = [copy.body_ptrs[i] for i in fmt.moving.tolist()]
    vel = []
    for b in bodies:
        v = cp.body_get_velocity(b)
        vel.append(((v.x, v.y), cp.body_get_angular_velocity(b)))
    zero = (0.0, 0.0)
    for b in bodies:
        cp.body_set_velocity(b, zero)
        cp.body_set_angular_velocity(b, 0.0)
    cp.space_step(cp.space_ptr(copy.space), dt)
    for b, (v, w), (bx, by, bw) in zip(bodies, vel, parts.bias.tolist(), strict=True):
        cp.body_set_velocity(b, v)
        cp.body_set_angular_velocity(b, w)
        cp.body_set_force(b, zero)
        cp.body_set_torque(b, 0.0)
        cp.set_body_bias(b, bx, by, bw)
    imp = parts.impulses.tolist()
    at = 0
    for con, ctype, size in zip(copy.constraints, copy.constraint_types, fmt.sizes, strict=True):
        cp.set_constraint_impulse(con, ctype, tuple(imp[at : at + size]))
        at += size
    held: dict[tuple[int, int, int], tuple[float, float]] = {}
    for a, b, hi, lo, jn, jt in parts.contacts.tolist():
        held[(int(a), int(b), (int(hi) << 32) | int(lo))] = (jn, jt)
    index = _shape_index(copy)

    def visit(arb: object) -> None:
        a, b = index[cp.address(arb.a)], index[cp.address(arb.b)]
        for i in range(arb.count):
            c = arb.contacts[i]
            h = int(c.hash)
            # Chipmunk may order a pair's shapes either way from one step to the next
            jn, jt = held.get((a, b, h)) or held.get((b, a, h)) or (0.0, 0.0)
            c.jnAcc, c.jtAcc = jn, jt

    cp.each_cached_arbiter(cp.space_ptr(copy.space), visit)


def pack(dt: float, extras: np.ndarray, vectors: list[np.ndarray]) -> np.ndarray:
    """One flat array: ``dt``, then per copy its row of ``extras`` and its vector."""
    parts = [np.array([dt], dtype=np.float64)]
    for row, vec in zip(extras, vectors, strict=True):
        parts.append(np.asarray(row, dtype=np.float64).reshape(-1))
        parts.append(vec)
    return np.concatenate(parts)


def unpack(
    flat: np.ndarray, count: int, extra: int, fmt: WarmFormat
) -> tuple[float, np.ndarray, list[WarmParts]]:
    """Read :func:`pack`'s array of ``count`` copies with ``extra`` floats each.

    Returns ``dt``, ``extras`` ``(count, extra)`` and each copy's parsed warm starts
    (:meth:`WarmFormat.parse`, copied). Raises ``ValueError`` saying what is wrong.
    """
    if flat.ndim != 1 or flat.size < 1:
        raise ValueError("must start with the dt")
    dt = float(flat[0])
    extras = np.empty((count, extra))
    vectors = []
    at = 1
    for c in range(count):
        if flat.size < at + extra:
            raise ValueError(f"copy {c}: ends before its {extra} leading floats")
        extras[c] = flat[at : at + extra]
        at += extra
        (vec,), used = fmt.split(flat[at:], 1)
        try:
            vectors.append(fmt.parse(vec.copy()))
        except ValueError as exc:
            raise ValueError(f"copy {c}: warm starts {exc}") from None
        at += used
    if at != flat.size:
        raise ValueError(f"holds {flat.size - at} floats after the last copy")
    return dt, extras, vectors
