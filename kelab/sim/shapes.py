"""Leaf types of a scene description: poses, shapes, materials and render hints.

Everything here is a small frozen dataclass; numbers are stored as ``float`` so that
equal descriptions have equal fingerprints. Re-exported by :mod:`kelab.sim.scene`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Vec2 = tuple[float, float]


def _number(owner: str, name: str, value: object, fix: str = "") -> float:
    """Return ``value`` as a finite float or raise ValueError naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        hint = f"; {fix}" if fix else ""
        raise ValueError(f"{owner}.{name} must be a finite number, got {value!r}{hint}")
    return float(value) + 0.0  # + 0.0 turns -0.0 into 0.0 (stable fingerprints)


def _positive(owner: str, name: str, value: object, *, allow_zero: bool = False) -> float:
    number = _number(owner, name, value)
    if number < 0.0 or (number == 0.0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{owner}.{name} must be a finite number {bound}, got {value!r}")
    return number


def _vec2(owner: str, name: str, value: object) -> Vec2:
    """Return ``value`` as a ``(float, float)`` tuple or raise ValueError naming the field."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:  # type: ignore[arg-type]
        raise ValueError(f"{owner}.{name} must be a pair (x, y) of finite numbers, got {value!r}")
    x, y = value  # type: ignore[misc]
    return (_number(owner, f"{name}[0]", x), _number(owner, f"{name}[1]", y))


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class Pose:
    """A 2D rigid transform: position in metres and angle in radians, counter-clockwise.

    Attributes:
        x: Position along +X (right), metres.
        y: Position along +Y (up), metres.
        angle: Rotation in radians, counter-clockwise.

    Example:
        >>> Pose(1.0, 0.0, 0.0).compose(Pose(0.5, 0.0, 0.0))
        Pose(x=1.5, y=0.0, angle=0.0)
    """

    x: float = 0.0
    y: float = 0.0
    angle: float = 0.0

    def __post_init__(self) -> None:
        for name in ("x", "y", "angle"):
            _set(self, name, _number("Pose", name, getattr(self, name)))

    @staticmethod
    def identity() -> Pose:
        """Return the identity pose (0, 0, 0)."""
        return Pose(0.0, 0.0, 0.0)

    def compose(self, other: Pose) -> Pose:
        """Return ``other`` expressed in this pose's parent frame (``self * other``).

        Args:
            other: A pose given in the frame of ``self``.

        Returns:
            The same pose expressed in the frame that ``self`` is given in.
        """
        x, y = self.transform_point((other.x, other.y))
        return Pose(x, y, self.angle + other.angle)

    def transform_point(self, point: tuple[float, float]) -> tuple[float, float]:
        """Map a point from this pose's frame to its parent frame.

        Args:
            point: ``(x, y)`` in this pose's frame.

        Returns:
            ``(x, y)`` in the parent frame.
        """
        c, s = math.cos(self.angle), math.sin(self.angle)
        px, py = point
        return (self.x + c * px - s * py + 0.0, self.y + s * px + c * py + 0.0)

    def rotate_vector(self, vector: tuple[float, float]) -> tuple[float, float]:
        """Rotate a direction by this pose's angle (no translation).

        Args:
            vector: ``(x, y)`` direction in this pose's frame.

        Returns:
            The direction in the parent frame.
        """
        c, s = math.cos(self.angle), math.sin(self.angle)
        vx, vy = vector
        return (c * vx - s * vy + 0.0, s * vx + c * vy + 0.0)

    def inverse(self) -> Pose:
        """Return the inverse transform, so that ``p.compose(p.inverse())`` is the identity."""
        c, s = math.cos(self.angle), math.sin(self.angle)
        return Pose(-(c * self.x + s * self.y), s * self.x - c * self.y, -self.angle)


@dataclass(frozen=True)
class Circle:
    """A solid circle.

    Attributes:
        radius: Radius in metres, > 0.
        offset: The circle centre's pose in the body frame.
    """

    radius: float
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        _set(self, "radius", _positive("Circle", "radius", self.radius))
        _check_offset("Circle", self.offset)

    def area(self) -> float:
        """Return the area in square metres."""
        return math.pi * self.radius * self.radius

    def local_points(self) -> tuple[Vec2, ...]:
        """Return the circle centre in the body frame (for extent computations)."""
        return (self.offset.transform_point((0.0, 0.0)),)


@dataclass(frozen=True)
class Box:
    """A solid axis-aligned box (rotated by ``offset.angle``), centred on ``offset``.

    Attributes:
        width: Size along the local X axis in metres, > 0.
        height: Size along the local Y axis in metres, > 0.
        offset: The box centre's pose in the body frame.
    """

    width: float
    height: float
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        _set(self, "width", _positive("Box", "width", self.width))
        _set(self, "height", _positive("Box", "height", self.height))
        _check_offset("Box", self.offset)

    def area(self) -> float:
        """Return the area in square metres."""
        return self.width * self.height

    def vertices(self) -> tuple[Vec2, ...]:
        """Return the four corners, counter-clockwise, in the shape's own frame."""
        w, h = self.width / 2.0, self.height / 2.0
        return ((-w, -h), (w, -h), (w, h), (-w, h))

    def local_points(self) -> tuple[Vec2, ...]:
        """Return the four corners in the body frame."""
        return tuple(self.offset.transform_point(v) for v in self.vertices())


@dataclass(frozen=True)
class Polygon:
    """A solid convex polygon.

    Attributes:
        vertices: At least three ``(x, y)`` points, convex and counter-clockwise, in the
            shape's frame.
        offset: The shape frame's pose in the body frame.
    """

    vertices: tuple[Vec2, ...]
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        verts = tuple(
            _vec2("Polygon", f"vertices[{i}]", v) for i, v in enumerate(tuple(self.vertices))
        )
        if len(verts) < 3:
            raise ValueError(
                f"Polygon.vertices needs at least 3 points, got {len(verts)}: {verts!r}"
            )
        n = len(verts)
        for i in range(n):
            (ax, ay), (bx, by), (cx, cy) = verts[i], verts[(i + 1) % n], verts[(i + 2) % n]
            cross = (bx - ax) * (cy - by) - (by - ay) * (cx - bx)
            if cross <= 0.0:
                raise ValueError(
                    f"Polygon.vertices must be convex and counter-clockwise; the turn at vertex "
                    f"{(i + 1) % n} {verts[(i + 1) % n]!r} is not a left turn (cross={cross!r}) "
                    f"in {verts!r}; reverse the order if clockwise, drop collinear or concave "
                    "points, or split a concave outline into convex pieces"
                )
        _set(self, "vertices", verts)
        _check_offset("Polygon", self.offset)

    def area(self) -> float:
        """Return the area in square metres (shoelace formula)."""
        v = self.vertices
        return 0.5 * sum(
            v[i][0] * v[(i + 1) % len(v)][1] - v[(i + 1) % len(v)][0] * v[i][1]
            for i in range(len(v))
        )

    def local_points(self) -> tuple[Vec2, ...]:
        """Return the vertices in the body frame."""
        return tuple(self.offset.transform_point(p) for p in self.vertices)


@dataclass(frozen=True)
class Segment:
    """A line segment with an optional rounded thickness (a capsule when ``radius > 0``).

    Attributes:
        a: First end point in the shape's frame.
        b: Second end point in the shape's frame; must differ from ``a``.
        radius: Rounding radius in metres, >= 0.
        offset: The shape frame's pose in the body frame.
    """

    a: Vec2
    b: Vec2
    radius: float = 0.0
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        a, b = _vec2("Segment", "a", self.a), _vec2("Segment", "b", self.b)
        if a == b:
            raise ValueError(f"Segment.b must differ from Segment.a, both are {a!r}")
        _set(self, "a", a)
        _set(self, "b", b)
        _set(self, "radius", _positive("Segment", "radius", self.radius, allow_zero=True))
        _check_offset("Segment", self.offset)

    def length(self) -> float:
        """Return the distance between the end points in metres."""
        return math.hypot(self.b[0] - self.a[0], self.b[1] - self.a[1])

    def area(self) -> float:
        """Return the capsule area in square metres (0 for a zero-radius segment)."""
        return 2.0 * self.radius * self.length() + math.pi * self.radius * self.radius

    def local_points(self) -> tuple[Vec2, ...]:
        """Return both end points in the body frame."""
        return (self.offset.transform_point(self.a), self.offset.transform_point(self.b))


Shape = Circle | Box | Polygon | Segment
SHAPE_TYPES = (Circle, Box, Polygon, Segment)


def _check_offset(owner: str, offset: object) -> None:
    if not isinstance(offset, Pose):
        raise ValueError(f"{owner}.offset must be a Pose, got {offset!r}; use Pose(x, y, angle)")


def shape_lowest_point(shape: Shape, body_pose: Pose) -> float:
    """Return the lowest world Y reached by ``shape`` on a body at ``body_pose``.

    Args:
        shape: The shape, with its offset in the body frame.
        body_pose: The body's pose in the world.

    Returns:
        The minimum Y over the shape's outline, in metres.
    """
    points = [body_pose.transform_point(p) for p in shape.local_points()]
    pad = shape.radius if isinstance(shape, (Circle, Segment)) else 0.0
    return min(p[1] for p in points) - pad


@dataclass(frozen=True)
class Material:
    """Surface and bulk properties of a body.

    When two shapes touch, friction combines as ``sqrt(a * b)`` and restitution as
    ``max(a, b)`` (the Box2D rules).

    Attributes:
        static_friction: Coefficient that resists the start of sliding, >= 0.
        dynamic_friction: Coefficient while sliding, >= 0 and <= static_friction.
        rolling_friction: Rolling resistance coefficient, >= 0.
        restitution: Bounciness in [0, 1]; 0 = no bounce, 1 = perfectly elastic.
        density: kg per square metre (2D), > 0; used when a body's mass is None.

    Example:
        >>> Material(static_friction=0.9, dynamic_friction=0.7).restitution
        0.0
    """

    static_friction: float = 0.6
    dynamic_friction: float = 0.5
    rolling_friction: float = 0.0
    restitution: float = 0.0
    density: float = 1000.0

    def __post_init__(self) -> None:
        for name in ("static_friction", "dynamic_friction", "rolling_friction"):
            _set(self, name, _positive("Material", name, getattr(self, name), allow_zero=True))
        restitution = _number("Material", "restitution", self.restitution)
        if not 0.0 <= restitution <= 1.0:
            raise ValueError(
                f"Material.restitution must be in [0, 1], got {self.restitution!r}; "
                "use 0 for no bounce and 1 for a perfectly elastic bounce"
            )
        _set(self, "restitution", restitution)
        _set(self, "density", _positive("Material", "density", self.density))
        if self.dynamic_friction > self.static_friction:
            raise ValueError(
                f"Material.dynamic_friction ({self.dynamic_friction!r}) must be <= "
                f"static_friction ({self.static_friction!r}): sliding friction cannot exceed "
                "the friction that resists the start of sliding; lower dynamic_friction or "
                "raise static_friction"
            )


@dataclass(frozen=True)
class RenderHint:
    """How the renderer should draw a body. Has no effect on physics.

    Attributes:
        color: ``(r, g, b)`` integers in 0..255.
        layer: Draw order; higher layers are drawn on top.
        visible: False hides the body.
    """

    color: tuple[int, int, int] = (200, 200, 200)
    layer: int = 0
    visible: bool = True

    def __post_init__(self) -> None:
        color = tuple(self.color) if isinstance(self.color, (tuple, list)) else None
        if (
            color is None
            or len(color) != 3
            or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in color
            )
        ):
            raise ValueError(
                f"RenderHint.color must be three integers (r, g, b) in 0..255, got {self.color!r}"
            )
        _set(self, "color", color)
        if isinstance(self.layer, bool) or not isinstance(self.layer, int):
            raise ValueError(f"RenderHint.layer must be an int, got {self.layer!r}")
        if not isinstance(self.visible, bool):
            raise ValueError(f"RenderHint.visible must be True or False, got {self.visible!r}")
