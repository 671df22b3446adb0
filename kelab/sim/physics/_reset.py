"""Packed resets that keep a copy's shapes and constraints in its space (internal).

:meth:`Shard.rebuild <kelab.sim.physics._shard.Shard.rebuild>` makes a copy fresh by
removing its constraints and shapes from the shard's space and adding them again. Each
``cpSpaceRemoveShape`` filters every cached arbiter of the space and each
``cpSpaceRemoveConstraint`` scans the constraint array, so a reset's cost grew with the
number of copies in the shard. :class:`KeptReset` leaves every structure in the space and
applies the net effect of that remove + re-add to each directly, in one C call per batch
(``_native.c``), with the same result byte for byte in every field Chipmunk reads
(``tests/sim/test_packed_reset.py`` steps both side by side):

- **cached arbiters** of the copy's shapes (with ``collision_persistence == 1``, exactly
  those threaded on its bodies' arbiter lists: every arbiter that collided in the last
  step and was processed): dropped in the order the per-shape filters dropped them (by
  shape, then in hash set order), each marked invalidated unless cached, unthreaded from
  both bodies' lists, deleted from ``space->arbiters`` (the last element into the hole),
  pushed onto the arbiter pool, its hash set bin unlinked and recycled.
- **constraint array**: removing a copy's constraints back to front fills the hole with
  the array's last block and re-adding appends the copy's block: the copy's block and the
  last block swap places (:attr:`KeptReset.block` tracks where each copy's block is).
- **constraints**: re-initialised in place, their bodies' constraint lists linked in the
  same order: every byte the Init functions, the collide-bodies switch, the error bias and
  the re-add write is restored from an image taken right after the first build (their
  arguments never change), and the accumulated impulse is zeroed. The fields the solver's
  pre-step computes before reading them (``r1``, ``k``, ``bias``, ...) are left as they
  were, as an Init leaves them.
- **bodies**: the rebuild's state calls (zero velocities and the initial pose with
  ``place``, else the re-add's realignment ``cpBodySetPosition(cpBodyGetPosition())``),
  then ``cpSpaceReindexShape`` per shape in the order the shapes were added: it removes
  the shape's handle and inserts one at the head of its chain, popping the same pooled
  handles as remove-all-then-add-all and hashing the shape into the same cells. Their
  shape lists and mass data are what the re-add recomputes (one shape per body: the same
  accumulation over the same list).
- **shape id counter**: where the last re-add left it.

It applies where that reasoning holds (:func:`eligible`): every moving body dynamic with
one shape of positive mass, not a sensor, ``collision_persistence`` 1, no sleeping, no
``separate`` callbacks, constraints of the types mirrored in ``_chipmunk.py``; and per
call (checked in C, else the shard rebuilds as before and
:meth:`KeptReset.resync` finds the blocks again): an unlocked space, no post-step callbacks or
roused bodies, every cached arbiter one the last step processed (sensors and ignored
pairs are cached without being on their bodies' lists), every reset copy's constraint
block where tracked.

Measured (benchmarks/README.md, "Stop 27"): the rebuild's Chipmunk scans were most of a
reset; a Python version of the same surgery (branch ``wt-reset``) was only 1.45x cheaper,
the pointer writes costing in Python what the scans cost in C.
"""

from __future__ import annotations

import math

import numpy as np
import pymunk

from kelab.sim.physics import _chipmunk as cp


def eligible(space: pymunk.Space, bodies: list[list[pymunk.Body]], shapes: list) -> bool:
    """Whether a shard's copies can be reset in place (see the module docstring).

    Args:
        space: The shard's space.
        bodies: Per copy, its moving bodies.
        shapes: Per copy, per moving body, its shapes.
    """
    if space.collision_persistence != 1 or cp.separate_callbacks(space):
        return False
    if space.sleep_time_threshold != math.inf:
        return False
    for own, per_body in zip(bodies, shapes, strict=True):
        for body, sh in zip(own, per_body, strict=True):
            if body.body_type != pymunk.Body.DYNAMIC or len(sh) != 1 or not sh[0].mass > 0:
                return False
            if sh[0].sensor:
                return False
    return True


class KeptReset:
    """In-place resets of one shard's copies (see the module docstring).

    Args:
        module: The configured C helper (:func:`kelab.sim.physics._guard.native_module`).
        space: The shard's ``cpSpace *``.
        adds: Per local copy, per moving body: (``cpBody *``, initial angle, initial
            position, its one ``cpShape *`` in a tuple), in the order they were added.
        constraints: Per local copy, its constraints (array order) with their C types;
            taken as they are now, right after the first build.
        frictions: ``(copies, moving bodies)`` float64, per local copy and moving body the
            friction its shape gets back; None where the layout has no friction handler.
            Held as it is, not copied: the shard's table, which it changes with a copy's
            materials (``Shard.set_reset_friction``), read at each reset.
        stride: Moving shapes per copy (the hash ids of copy ``c`` start at ``c * stride``).
    """

    def __init__(
        self,
        module: object,
        space: object,
        adds: list[list[tuple]],
        constraints: list[list[tuple[object, str]]],
        frictions: np.ndarray | None,
        stride: int,
    ) -> None:
        self._c = module
        self._space = cp.address(space)
        self._stride = stride
        n = len(adds)
        self._bodies = np.array([[cp.address(a[0]) for a in own] for own in adds], np.uint64)
        self._shapes = np.array([[cp.address(a[3][0]) for a in own] for own in adds], np.uint64)
        self._pose = np.array([[(a[1], *a[2]) for a in own] for own in adds], np.float64)
        self._fric = frictions if frictions is not None else np.zeros(0)
        k = len(constraints[0]) if n else 0
        self._cons = np.array(
            [[cp.address(c) for c, _ in own] for own in constraints], np.uint64
        ).reshape(n, k)
        #: the block of the constraint array each local copy's constraints are in
        self.block = np.arange(n, dtype=np.int64)
        #: the local copy whose constraints are in each block
        self.owner = np.arange(n, dtype=np.int64)
        # per constraint: (its image's offset in images, the image's size, the impulse's
        # offset in the struct, its size, the mirror struct's size: all within it)
        m = cp.mirror_ffi()
        images, rows, at = [], [], 0
        for own in constraints:
            for con, ctype in own:
                base = cp.CONSTRAINT_MIRRORS[ctype].rstrip(" *")
                prefix = _live_prefix(m, base)
                images.append(bytes(m.buffer(m.cast("char *", cp.address(con)), prefix)))
                impulse = dict(m.typeof(base).fields)["j_acc"].type
                rows.append(
                    (at, prefix, m.offsetof(base, "j_acc"), m.sizeof(impulse), m.sizeof(base))
                )
                at += prefix
        self._images = b"".join(images)
        self._rows = np.array(rows, np.int64).reshape(n * k, 5)

    def reset(self, locals_: np.ndarray, place: bool, then: tuple | None = None) -> bool:
        """Make local copies ``locals_`` (int64, ascending, distinct) fresh in place.

        ``place``: put the bodies at their initial pose at rest (else the caller writes
        every moving body's state next). ``then``: that write and its read-back, done in
        the same C call (a ``_shard.StateWrite``). False, with nothing changed, where the
        space is not as tracked (then rebuild them and call :meth:`resync`).
        """
        ls = np.ascontiguousarray(locals_, dtype=np.int64)
        return self._c.reset(
            self._space, ls, place, self._bodies, self._shapes, self._pose, self._cons,
            self.block, self.owner, self._images, self._rows, self._fric, self._stride, then,
        )  # fmt: skip

    def resync(self) -> None:
        """Find each copy's constraint block in the space's array again.

        After a rebuild ran instead of :meth:`reset` (which moved the blocks). Where the
        array is not whole blocks of the copies' constraints, nothing is found and every
        later :meth:`reset` declines.
        """
        n, k = self._cons.shape
        if not k:
            return
        arr = cp.constraint_addresses(self._space)
        if arr.size != n * k:
            return
        firsts = self._cons[:, 0]
        order = np.argsort(firsts)
        pos = np.minimum(np.searchsorted(firsts[order], arr[::k]), n - 1)
        owner = order[pos]
        if not np.array_equal(firsts[owner], arr[::k]) or np.unique(owner).size != n:
            return
        self.owner[:] = owner
        self.block[owner] = np.arange(n)


def _live_prefix(m: object, struct: str) -> int:
    """Bytes from a constraint struct's start through the last field its Init writes.

    The fields after them, up to the impulse ``j_acc``, are computed by the solver's
    pre-step before they are read, and an Init leaves them as they are.
    """
    first_dead = {
        "struct kl_pivot_joint": "r1",
        "struct kl_groove_joint": "grv_tn",
        "struct kl_gear_joint": "i_sum",
        "struct kl_rotary_limit_joint": "i_sum",
        "struct kl_damped_spring": "target_vrn",
    }[struct]
    return m.offsetof(struct, first_dead)
