"""Shape filters of both layouts: the users' collision filters composed with the World's.

Chipmunk keeps two shapes apart when they share a non-zero group, or when the categories
of either miss the mask of the other. The World's own rules take the group (one per
robot without self-collision, else one per body: ``Layout.groups``) and, in the packed
layout, the category bits (copies never touch). A user's ``ke.CollisionFilter``
(``BodySpec.collision``) is composed with them through the category bits:

- the bodies' filters are sorted into *classes*: filters that collide with the same
  filters are one class, and ``touch[i, j]`` says whether classes ``i`` and ``j`` collide
  (the users' groups, categories and masks all decided once, :func:`filter_classes`);
- isolated: class ``i``'s shapes belong to category bit ``i`` and their mask holds the
  bits of the classes they touch; the group is the World's (at most 32 classes);
- packed: with ``K`` classes among the copies' shapes and ``G`` among the shared ground's,
  copy ``c`` takes slot ``c % P`` of ``P = (32 - G) // K`` slots (at least 2), class
  ``i``'s shapes in slot ``s`` belong to bit ``s * K + i``, each ground class has one of
  the top bits; copies of one slot are ``P * spacing`` apart.

A scene whose filters all collide with one another (every scene without filters) has one
class that touches itself: it gets exactly the filters it had before filters existed (the
same bits: saved results stay bit-identical). Rays (rangefinders) use their body's filter:
a ray sees the shapes its body collides with. See docs/scene.md, "Collision filtering".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymunk

from kelab.sim.scene.scene import Scene

__all__ = ["MAX_CLASSES", "MIN_SLOTS", "FilterClasses", "PackedFilters", "filter_classes"]

#: Most classes of collision filters a scene may have (pymunk's 32 category bits).
MAX_CLASSES = 32
#: Fewest copy slots of the packed layout: neighbouring copies never share a bit.
MIN_SLOTS = 2
#: The packed layout's ground bit and all bits, as before filters existed.
_GROUND_BIT = 1 << 31
_ALL = 0xFFFFFFFF
_LEGACY_SLOTS = 31


@dataclass(frozen=True)
class FilterClasses:
    """The users' collision filters of a scene's bodies, as classes that behave alike.

    Attributes:
        of_body: ``(n_bodies,)`` the class of each body's filter.
        touch: ``(k, k)`` bool, symmetric: whether shapes of classes ``i`` and ``j`` may
            collide (the World's own rules aside).
    """

    of_body: np.ndarray
    touch: np.ndarray

    @property
    def active(self) -> bool:
        """Whether the filters keep any shapes apart (False: the filters of old)."""
        return not bool(self.touch.all())


def filter_classes(scene: Scene) -> FilterClasses:
    """Sort the scene's bodies' collision filters into classes (see the module docstring).

    Raises:
        ValueError: If more than :data:`MAX_CLASSES` classes are needed.
    """
    filters = [b.spec.collision for b in scene.bodies]
    distinct = list(dict.fromkeys(filters))
    n = len(distinct)
    pairs = np.array(
        [[a.collides_with(b) for b in distinct] for a in distinct], dtype=bool
    ).reshape(n, n)
    rows: dict[bytes, int] = {}
    kind = [rows.setdefault(pairs[i].tobytes(), len(rows)) for i in range(n)]
    if len(rows) > MAX_CLASSES:
        raise ValueError(
            f"World: the bodies' collision filters must make at most {MAX_CLASSES} kinds of "
            f"shapes (filters that collide with different filters), got {len(rows)}; give "
            "bodies that should behave alike the same ke.CollisionFilter"
        )
    first = [kind.index(k) for k in range(len(rows))]
    index = dict(zip(distinct, kind, strict=True))
    return FilterClasses(
        of_body=np.array([index[f] for f in filters], dtype=np.int64),
        touch=pairs[np.ix_(first, first)],
    )


def isolated_filter(classes: FilterClasses, group: int, body: int) -> pymunk.ShapeFilter:
    """The filter of ``body``'s shapes in the isolated layout (World group ``group``).

    Without active filters: ``ShapeFilter(group=group)``, as before filters existed.
    """
    if not classes.active:
        return pymunk.ShapeFilter(group=group)
    k = int(classes.of_body[body])
    mask = sum(1 << int(j) for j in np.flatnonzero(classes.touch[k]))
    return pymunk.ShapeFilter(group=group, categories=1 << k, mask=mask)


class PackedFilters:
    """The packed layout's shape filters: copies apart, the users' filters within a copy.

    Args:
        classes: The scene's filter classes.
        groups: ``(n_bodies,)`` the World's collision group of each body (one copy).
        stride: Groups per copy (copy ``c``'s groups are ``c * stride + groups``).
        copy_bodies: Bodies with shapes built in every copy.
        ground_bodies: Shared static bodies with shapes built once per shard.

    Raises:
        ValueError: If the classes leave fewer than :data:`MIN_SLOTS` copy slots.
    """

    def __init__(
        self,
        classes: FilterClasses,
        groups: np.ndarray,
        stride: int,
        copy_bodies: list[int],
        ground_bodies: list[int],
    ) -> None:
        self._groups = groups
        self._stride = stride
        self._of_body = classes.of_body
        self._active = classes.active
        if not self._active:
            #: Copy slots: copies ``c`` and ``c + slots`` share category bits.
            self.slots = _LEGACY_SLOTS
            return
        touch = classes.touch
        copy = sorted({int(classes.of_body[b]) for b in copy_bodies})
        ground = sorted({int(classes.of_body[b]) for b in ground_bodies})
        k = max(1, len(copy))
        self.slots = (32 - len(ground)) // k
        if self.slots < MIN_SLOTS:
            raise ValueError(
                f"World: layout='packed' needs at most {(32 - len(ground)) // MIN_SLOTS} "
                f"kinds of collision filters among the copies' bodies, got {len(copy)} "
                f"(with {len(ground)} on the shared ground); give bodies that should "
                "behave alike the same ke.CollisionFilter, or use layout='isolated'"
            )
        self._k = k
        local = {cls: i for i, cls in enumerate(copy)}
        ground_bit = {cls: 1 << (31 - i) for i, cls in enumerate(ground)}
        in_slot = {  # per class: the bits (slot 0) of the copy classes it touches
            cls: sum(1 << local[j] for j in copy if touch[cls, j]) for cls in range(len(touch))
        }
        self._category = local
        self._mask = in_slot
        self._ground_mask = {
            cls: sum(bit for h, bit in ground_bit.items() if touch[cls, h])
            for cls in range(len(touch))
        }
        self._ground_bit = ground_bit

    def copy(self, c: int, body: int) -> pymunk.ShapeFilter:
        """Filter of copy ``c``'s shapes of ``body`` (global copy index)."""
        group = c * self._stride + int(self._groups[body])
        if not self._active:
            bit = 1 << (c % _LEGACY_SLOTS)
            return pymunk.ShapeFilter(group=group, categories=bit, mask=_GROUND_BIT | bit)
        cls = int(self._of_body[body])
        base = (c % self.slots) * self._k
        own = self._category.get(cls)  # None: a shared ground body (a ray cast from it)
        category = self._ground_bit[cls] if own is None else 1 << (base + own)
        return pymunk.ShapeFilter(
            group=group,
            categories=category,
            mask=(self._mask[cls] << base) | self._ground_mask[cls],
        )

    def ground(self, body: int) -> pymunk.ShapeFilter:
        """Filter of the shared ground's shapes of ``body`` (built once per shard)."""
        if not self._active:
            return pymunk.ShapeFilter(categories=_GROUND_BIT, mask=_ALL)
        cls = int(self._of_body[body])
        mask = sum(self._mask[cls] << (s * self._k) for s in range(self.slots))
        return pymunk.ShapeFilter(categories=self._ground_bit[cls], mask=mask)
