"""Leaf types of a scene description: poses, shapes, materials and render hints.

Everything here is a small frozen dataclass; numbers are stored as ``float`` so that
equal descriptions have equal fingerprints. Re-exported by :mod:`kelab.sim.scene`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kelab._validate import check_bool, is_int, must
from kelab.errors import UserError
from kelab.sim.scene.fields import (
    Vec2,
    field_number,
    field_positive,
    field_vec2,
    set_field,
    short_repr,
)

# ------------------------------------------------------------------ documented ranges
# A scene is data that may come from a file, so every number is checked against a range
# that a 2D pymunk simulation stepped at 1/60..1/1000 s handles stably (docs/scene.md,
# "Validation"; tests/robustness/test_scene_data.py simulates the corners).
LENGTH_MIN = 1e-4
"""Smallest size in metres: radii, box sides, segment lengths, polygon edges."""
LENGTH_MAX = 1e4
"""Largest size in metres (a shape's extent, a spring's rest length, a ray's range)."""
COORD_MAX = 1e5
"""Largest magnitude of a coordinate in metres: pose x/y, anchors, vertices, limits."""
ANGLE_MAX = 1e4
"""Largest magnitude of an angle in radians (poses, revolute limits, ray angles)."""
MASS_MIN = 1e-6
"""Smallest mass of a dynamic body in kg (given, or computed from area and density)."""
MASS_MAX = 1e6
"""Largest mass of a dynamic body in kg."""
DENSITY_MAX = 1e6
"""Largest material density in kg/m² (2D); the smallest is any positive number."""
FRICTION_MAX = 100.0
"""Largest friction coefficient (static, dynamic or rolling)."""
EFFORT_MAX = 1e9
"""Largest actuator limit, PD gain, spring stiffness or damping (SI units)."""
GRAVITY_MAX = 1e4
"""Largest magnitude of a gravity component in m/s²."""
LAYER_MAX = 10**6
"""Largest magnitude of a RenderHint layer."""


@dataclass(frozen=True)
class Pose:
    """A 2D rigid transform: position in metres and angle in radians, counter-clockwise.

    Attributes:
        x: Position along +X (right), metres, within ±COORD_MAX (1e5).
        y: Position along +Y (up), metres, within ±COORD_MAX.
        angle: Rotation in radians, counter-clockwise, within ±ANGLE_MAX (1e4).

    Example:
        >>> Pose(1.0, 0.0, 0.0).compose(Pose(0.5, 0.0, 0.0))
        Pose(x=1.5, y=0.0, angle=0.0)
    """

    x: float = 0.0
    y: float = 0.0
    angle: float = 0.0

    def __post_init__(self) -> None:
        for name, limit in (("x", COORD_MAX), ("y", COORD_MAX), ("angle", ANGLE_MAX)):
            set_field(self, name, field_number("Pose", name, getattr(self, name), limit=limit))

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
        radius: Radius in metres, in [LENGTH_MIN, LENGTH_MAX] (1e-4..1e4).
        offset: The circle centre's pose in the body frame.
    """

    radius: float
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        set_field(self, "radius", _size("Circle", "radius", self.radius))
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
        width: Size along the local X axis in metres, in [LENGTH_MIN, LENGTH_MAX].
        height: Size along the local Y axis in metres, in [LENGTH_MIN, LENGTH_MAX].
        offset: The box centre's pose in the body frame.
    """

    width: float
    height: float
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        set_field(self, "width", _size("Box", "width", self.width))
        set_field(self, "height", _size("Box", "height", self.height))
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
            shape's frame; edges at least LENGTH_MIN long, extent at most LENGTH_MAX,
            area at least LENGTH_MIN².
        offset: The shape frame's pose in the body frame.
    """

    vertices: tuple[Vec2, ...]
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        if not isinstance(self.vertices, (tuple, list, np.ndarray)):
            raise UserError(
                "Polygon.vertices must be a sequence of (x, y) points, got "
                f"{short_repr(self.vertices)}"
            )
        verts = tuple(
            field_vec2("Polygon", f"vertices[{i}]", v, limit=COORD_MAX)
            for i, v in enumerate(self.vertices)
        )
        if len(verts) < 3:
            raise UserError(
                f"Polygon.vertices needs at least 3 points, got {len(verts)}: {short_repr(verts)}"
            )
        n = len(verts)
        for i in range(n):
            (ax, ay), (bx, by) = verts[i], verts[(i + 1) % n]
            if math.hypot(bx - ax, by - ay) < LENGTH_MIN:
                raise UserError(
                    f"Polygon.vertices[{i}] and [{(i + 1) % n}] must be at least {LENGTH_MIN:g} m "
                    f"apart, got {short_repr(verts[i])} and {short_repr(verts[(i + 1) % n])}; "
                    "merge them"
                )
        for i in range(n):
            (ax, ay), (bx, by), (cx, cy) = verts[i], verts[(i + 1) % n], verts[(i + 2) % n]
            cross = (bx - ax) * (cy - by) - (by - ay) * (cx - bx)
            if cross <= 0.0:
                raise UserError(
                    f"Polygon.vertices must be convex and counter-clockwise; the turn at vertex "
                    f"{(i + 1) % n} {verts[(i + 1) % n]!r} is not a left turn (cross={cross!r}) "
                    f"in {short_repr(verts)}; reverse the order if clockwise, drop collinear or "
                    "concave points, or split a concave outline into convex pieces"
                )
        xs, ys = [v[0] for v in verts], [v[1] for v in verts]
        extent = max(max(xs) - min(xs), max(ys) - min(ys))
        if extent > LENGTH_MAX:
            raise UserError(
                f"Polygon.vertices must span at most {LENGTH_MAX:g} m, got {extent:g} m; "
                "split a larger outline into several shapes or bodies"
            )
        set_field(self, "vertices", verts)
        if self.area() < LENGTH_MIN**2:
            raise UserError(
                f"Polygon area must be at least {LENGTH_MIN**2:g} m², got {self.area():g} m² "
                f"for {short_repr(verts)}; use a thicker polygon or a Segment"
            )
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
        a: First end point in the shape's frame (coordinates within ±COORD_MAX).
        b: Second end point; the length must be in [LENGTH_MIN, LENGTH_MAX].
        radius: Rounding radius in metres, 0 or in [LENGTH_MIN, LENGTH_MAX].
        offset: The shape frame's pose in the body frame.
    """

    a: Vec2
    b: Vec2
    radius: float = 0.0
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        a = field_vec2("Segment", "a", self.a, limit=COORD_MAX)
        b = field_vec2("Segment", "b", self.b, limit=COORD_MAX)
        if a == b:
            raise UserError(f"Segment.b must differ from Segment.a, both are {a!r}")
        set_field(self, "a", a)
        set_field(self, "b", b)
        if not LENGTH_MIN <= self.length() <= LENGTH_MAX:
            raise UserError(
                f"Segment length must be in [{LENGTH_MIN:g}, {LENGTH_MAX:g}] m, got "
                f"{self.length():g} m from a={a!r} to b={b!r}; "
                + (
                    "split a longer line into several segments"
                    if self.length() > LENGTH_MAX
                    else "move the end points apart or use a Circle"
                )
            )
        set_field(self, "radius", _size("Segment", "radius", self.radius, allow_zero=True))
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


def field_pose(owner: str, attr: str, value: object) -> Pose:
    """Return ``value`` if it is a Pose (a field check, worded like :mod:`~.fields`)."""
    if not isinstance(value, Pose):
        raise UserError(
            f"{owner}.{attr} must be a Pose, got {short_repr(value)}; use ke.Pose(x, y, angle)"
        )
    return value


def _check_offset(owner: str, offset: object) -> None:
    if not isinstance(offset, Pose):
        raise UserError(
            f"{owner}.offset must be a Pose, got {short_repr(offset)}; use Pose(x, y, angle)"
        )


def _size(owner: str, name: str, value: object, *, allow_zero: bool = False) -> float:
    """Return a length in metres within [LENGTH_MIN, LENGTH_MAX] (or 0 with allow_zero)."""
    return field_positive(
        owner, name, value, allow_zero=allow_zero, lo=LENGTH_MIN, hi=LENGTH_MAX, unit=" m"
    )


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
        static_friction: Coefficient that resists the start of sliding, in [0, FRICTION_MAX].
        dynamic_friction: Coefficient while sliding, >= 0 and <= static_friction.
        rolling_friction: Rolling resistance coefficient, in [0, FRICTION_MAX].
        restitution: Bounciness in [0, 1]; 0 = no bounce, 1 = perfectly elastic.
        density: kg per square metre (2D), in (0, DENSITY_MAX]; used when a body's mass is
            None (the resulting mass must be in [MASS_MIN, MASS_MAX]).

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
            value = getattr(self, name)
            set_field(
                self,
                name,
                field_positive("Material", name, value, allow_zero=True, hi=FRICTION_MAX),
            )
        restitution = field_number("Material", "restitution", self.restitution)
        if not 0.0 <= restitution <= 1.0:
            raise UserError(
                f"Material.restitution must be in [0, 1], got {short_repr(self.restitution)}; "
                "use 0 for no bounce and 1 for a perfectly elastic bounce"
            )
        set_field(self, "restitution", restitution)
        set_field(
            self,
            "density",
            field_positive("Material", "density", self.density, hi=DENSITY_MAX, unit=" kg/m²"),
        )
        if self.dynamic_friction > self.static_friction:
            raise UserError(
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
        layer: Draw order, an int within ±LAYER_MAX; higher layers are drawn on top.
        visible: False hides the body.
    """

    color: tuple[int, int, int] = (200, 200, 200)
    layer: int = 0
    visible: bool = True

    def __post_init__(self) -> None:
        color = tuple(self.color) if isinstance(self.color, (tuple, list)) else None
        if color is None or len(color) != 3 or not all(is_int(c) and 0 <= c <= 255 for c in color):
            raise UserError(
                must("RenderHint.color", "three integers (r, g, b) in 0..255", self.color)
            )
        set_field(self, "color", tuple(int(c) for c in color))
        if not (is_int(self.layer) and abs(self.layer) <= LAYER_MAX):  # type: ignore[arg-type]
            raise UserError(must("RenderHint.layer", f"an int within ±{LAYER_MAX}", self.layer))
        set_field(self, "layer", int(self.layer))  # type: ignore[call-overload]
        set_field(self, "visible", check_bool(self.visible, "RenderHint.visible"))
