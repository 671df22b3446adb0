"""Which shapes collide: :class:`CollisionFilter`, pymunk's ``ShapeFilter`` as scene data.

A body's filter (``BodySpec.collision``, ``Prop.collision``) applies to all its shapes.
The World composes it with its own rules (a robot without self-collision, copies never
touching): two shapes touch only when both allow it. See docs/scene.md, "Collision
filtering". Re-exported by :mod:`kelab.sim.scene`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kelab._validate import is_int
from kelab.sim.scene.fields import set_field, short_repr

__all__ = ["ALL_CATEGORIES", "CollisionFilter"]

ALL_CATEGORIES = 0xFFFFFFFF
"""Every one of the 32 category bits: the default ``categories`` and ``mask``."""


@dataclass(frozen=True)
class CollisionFilter:
    """Which shapes a body's shapes collide with (pymunk's ``ShapeFilter`` meaning).

    Shapes of the same non-zero ``group`` never collide. Otherwise shapes A and B collide
    only when ``A.categories & B.mask`` and ``B.categories & A.mask`` are both non-zero.
    The default collides with everything.

    Attributes:
        group: 0 (no group) or a group number, an int in [0, 2**32 - 1].
        categories: The 32-bit set of categories the shapes belong to.
        mask: The 32-bit set of categories the shapes collide with.

    Example:
        >>> FORK, BALL = 0b01, 0b10
        >>> fork = CollisionFilter(categories=FORK, mask=ALL_CATEGORIES & ~BALL)
        >>> ball = CollisionFilter(categories=BALL)
        >>> fork.collides_with(ball), fork.collides_with(CollisionFilter())
        (False, True)
        >>> CollisionFilter(group=3).collides_with(CollisionFilter(group=3))
        False
    """

    group: int = 0
    categories: int = ALL_CATEGORIES
    mask: int = ALL_CATEGORIES

    def __post_init__(self) -> None:
        for name, what in (
            ("group", "0 (no group) or a group number"),
            ("categories", "a 32-bit set of category bits"),
            ("mask", "a 32-bit set of category bits"),
        ):
            value = getattr(self, name)
            if not (is_int(value) and 0 <= value <= ALL_CATEGORIES):
                raise ValueError(
                    f"CollisionFilter.{name} must be an int in [0, 2**32 - 1] ({what}), got "
                    f"{short_repr(value)}; combine bits like 0b101 or 1 << 3"
                )
            set_field(self, name, int(value))

    def collides_with(self, other: CollisionFilter) -> bool:
        """Whether shapes with this filter and shapes with ``other`` may collide.

        Args:
            other: The other shapes' filter.
        """
        if self.group != 0 and self.group == other.group:
            return False
        return bool(self.categories & other.mask) and bool(other.categories & self.mask)
