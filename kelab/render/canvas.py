"""Canvas: the drawing interface shared by every render backend, and ``draw_world``.

Public drawing calls take world units (metres, +Y up); the camera maps them to pixels.
Backends implement a handful of batched pixel-space hooks (``_fill_polygons`` ...), so
``draw_world`` transforms all bodies of all environment copies with a few numpy
operations and hands whole arrays to the backend.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kelab.render.camera import Camera
from kelab.render.geometry import thick_line_quads, transform_points, wrap_angle
from kelab.sim.shapes import Box, Circle, Polygon, Segment

__all__ = ["Canvas", "Color", "validate_color"]

Color = tuple[int, int, int]


def validate_color(color: Any, name: str = "color") -> Color:
    """Check a colour and return it as a tuple of three ints.

    Args:
        color: ``(r, g, b)`` with integer channels in 0..255 (Python or numpy ints).
        name: The argument name used in the error message.

    Returns:
        ``(r, g, b)`` as plain ints.

    Raises:
        ValueError: If ``color`` is not three integers in 0..255.
    """
    try:
        channels = tuple(color)
    except TypeError:
        channels = ()
    ok = len(channels) == 3 and all(
        isinstance(c, numbers.Integral) and not isinstance(c, bool) and 0 <= int(c) <= 255
        for c in channels
    )
    if not ok:
        raise ValueError(
            f"{name} must be (r, g, b) with integer channels in 0..255, got {color!r}; "
            "convert floats in [0, 1] with round(c * 255)"
        )
    return (int(channels[0]), int(channels[1]), int(channels[2]))


def _shade(color: Color, factor: float = 0.45) -> Color:
    return (int(color[0] * factor), int(color[1] * factor), int(color[2] * factor))


def _finite_number(name: str, value: Any, minimum: float = 0.0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not np.isfinite(v) or v < minimum:
        raise ValueError(f"{name} must be a finite number >= {minimum}, got {value!r}")
    return v


@dataclass(frozen=True)
class _ShapeDraw:
    """One shape of one body, as a slice of the batched local point array."""

    kind: str  # "poly" | "circle" | "segment"
    start: int  # first row in the group's point array
    count: int  # rows: k vertices (poly), 2 (circle: centre, rim point), 2 (segment: a, b)
    radius: float  # circle radius or segment half-thickness, metres
    color: Color
    accent: Color  # radius line colour of circles


@dataclass(frozen=True)
class _BodyDraw:
    layer: int
    order: int  # position in scene.bodies (stable tie-break inside a layer)
    column: int  # column in the group's pose array
    shapes: tuple[_ShapeDraw, ...]


@dataclass
class _Group:
    """Bodies transformed together: all per-environment bodies, or all shared ones."""

    local: np.ndarray  # (M, 2) body-frame points
    owner: np.ndarray  # (M,) column of each point
    bodies: list[_BodyDraw]
    world_columns: np.ndarray  # (B,) column in world.body_poses, -1 when absent
    static_poses: np.ndarray  # (B, 3) scene poses (used where world_columns == -1)


@dataclass
class _Compiled:
    scene: Any
    body_names: tuple[str, ...]
    per_env: _Group
    shared: _Group


def _shape_points(shape: Any) -> tuple[str, np.ndarray, float]:
    """Return (kind, body-frame points, radius) of one scene shape."""
    off = shape.offset
    c, s = np.cos(off.angle), np.sin(off.angle)
    rot = np.array([[c, -s], [s, c]])
    if isinstance(shape, Circle):
        pts = np.array([[0.0, 0.0], [shape.radius, 0.0]])
        kind, radius = "circle", float(shape.radius)
    elif isinstance(shape, Box):
        pts = np.array(shape.vertices(), dtype=np.float64)
        kind, radius = "poly", 0.0
    elif isinstance(shape, Polygon):
        pts = np.array(shape.vertices, dtype=np.float64)
        kind, radius = "poly", 0.0
    elif isinstance(shape, Segment):
        pts = np.array([shape.a, shape.b], dtype=np.float64)
        kind, radius = "segment", float(shape.radius)
    else:
        raise TypeError(
            f"cannot draw shape of type {type(shape).__name__}; expected Circle, Box, "
            "Polygon or Segment"
        )
    return kind, pts @ rot.T + np.array([off.x, off.y]), radius


def _compile_group(instances: list[tuple[int, Any]], name_index: dict[str, int]) -> _Group:
    local: list[np.ndarray] = []
    owner: list[np.ndarray] = []
    bodies: list[_BodyDraw] = []
    world_columns: list[int] = []
    static_poses: list[tuple[float, float, float]] = []
    row = 0
    for column, (order, inst) in enumerate(instances):
        hint = inst.spec.render
        color = validate_color(hint.color, f"{inst.path}: render.color")
        shapes = []
        for shape in inst.spec.shapes:
            kind, pts, radius = _shape_points(shape)
            shapes.append(_ShapeDraw(kind, row, len(pts), radius, color, _shade(color)))
            local.append(pts)
            owner.append(np.full(len(pts), column, dtype=np.intp))
            row += len(pts)
        bodies.append(_BodyDraw(int(hint.layer), order, column, tuple(shapes)))
        world_columns.append(name_index.get(inst.path, -1))
        p = inst.pose
        static_poses.append((p.x, p.y, p.angle))
    return _Group(
        local=np.concatenate(local) if local else np.zeros((0, 2)),
        owner=np.concatenate(owner) if owner else np.zeros(0, dtype=np.intp),
        bodies=bodies,
        world_columns=np.array(world_columns, dtype=np.intp),
        static_poses=np.array(static_poses, dtype=np.float64).reshape(-1, 3),
    )


def _compile(scene: Any, body_names: Sequence[str]) -> _Compiled:
    name_index = {name: i for i, name in enumerate(body_names)}
    per_env: list[tuple[int, Any]] = []
    shared: list[tuple[int, Any]] = []
    for order, inst in enumerate(scene.bodies):
        if not inst.spec.render.visible or not inst.spec.shapes:
            continue
        (per_env if inst.per_environment else shared).append((order, inst))
    return _Compiled(
        scene=scene,
        body_names=tuple(body_names),
        per_env=_compile_group(per_env, name_index),
        shared=_compile_group(shared, name_index),
    )


class Canvas(ABC):
    """Draws shapes, text and whole Worlds, in world units through a :class:`Camera`.

    Coordinates are metres with +Y up unless a call says ``screen_space``; widths and
    radii are metres too (a width of 0 means "filled" for circles and polygons and
    "one pixel" for lines). Colours are ``(r, g, b)`` integer tuples in 0..255.
    Get a canvas from a renderer (``create_renderer(...).canvas``); draw between
    ``renderer.begin_frame()`` and ``renderer.end_frame()``.

    Example:
        >>> from kelab.render import create_renderer
        >>> r = create_renderer("pygame", size=(64, 48), headless=True)
        >>> r.begin_frame(); r.canvas.clear((0, 0, 0))
        >>> r.canvas.circle((0.0, 0.0), 0.1, (255, 0, 0)); r.end_frame()
        >>> tuple(r.read_rgb_pixels()[24, 32])
        (255, 0, 0)
        >>> r.close()
    """

    def __init__(self, camera: Camera) -> None:
        self._camera = camera
        self._compiled: _Compiled | None = None

    @property
    def camera(self) -> Camera:
        """The camera that maps world units to this canvas's pixels."""
        return self._camera

    # -- public primitives (world units) ---------------------------------------------------
    def clear(self, color: Color) -> None:
        """Fill the whole frame with one colour.

        Args:
            color: ``(r, g, b)`` ints in 0..255.
        """
        self._clear(validate_color(color))

    def circle(
        self, center: Sequence[float], radius: float, color: Color, width: float = 0.0
    ) -> None:
        """Draw a circle.

        Args:
            center: ``(x, y)`` in metres.
            radius: Radius in metres (>= 0).
            color: ``(r, g, b)`` ints in 0..255.
            width: 0 fills the disc; > 0 draws an outline this thick (metres, inwards).
        """
        rgb = validate_color(color)
        r = _finite_number("radius", radius)
        w = _finite_number("width", width)
        cam = self._camera
        c = cam.world_to_screen_batch(np.asarray(center, dtype=np.float64).reshape(1, 2))
        r_px = np.array([r * cam.zoom])
        if w == 0.0 or w >= r:
            self._fill_circles(c, r_px, rgb)
        else:
            self._ring(c, r_px, max(1.0, w * cam.zoom), rgb)

    def polygon(self, points: Sequence[Sequence[float]], color: Color, width: float = 0.0) -> None:
        """Draw a convex polygon.

        Args:
            points: At least three ``(x, y)`` vertices in metres, convex, in order.
            color: ``(r, g, b)`` ints in 0..255.
            width: 0 fills it; > 0 draws the outline this thick (metres) with round joins.
        """
        rgb = validate_color(color)
        w = _finite_number("width", width)
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] < 3:
            raise ValueError(
                f"points must be at least three (x, y) pairs, got an array of shape {pts.shape}"
            )
        px = self._camera.world_to_screen_batch(pts)
        if w == 0.0:
            self._fill_polygons(px[None], rgb)
        else:
            self._thick_lines(px, np.roll(px, -1, axis=0), w * self._camera.zoom, rgb, True)

    def line(
        self, a: Sequence[float], b: Sequence[float], color: Color, width: float = 0.0
    ) -> None:
        """Draw a straight line with butt ends.

        Args:
            a: Start ``(x, y)`` in metres.
            b: End ``(x, y)`` in metres.
            color: ``(r, g, b)`` ints in 0..255.
            width: Thickness in metres; 0 (or anything thinner than 1.5 px) draws a
                one-pixel antialiased line.
        """
        rgb = validate_color(color)
        w = _finite_number("width", width)
        pts = self._camera.world_to_screen_batch(np.array([a, b], dtype=np.float64))
        self._thick_lines(pts[:1], pts[1:], w * self._camera.zoom, rgb, False)

    def text(
        self,
        pos: Sequence[float],
        string: str,
        color: Color,
        size: int = 16,
        screen_space: bool = False,
    ) -> None:
        """Draw a line of text; ``pos`` is its top-left corner.

        Args:
            pos: ``(x, y)`` in metres, or in pixels when ``screen_space`` is True.
            string: The text (one line).
            color: ``(r, g, b)`` ints in 0..255.
            size: Font size in pixels (> 0), independent of the zoom.
            screen_space: Interpret ``pos`` as pixels from the top-left corner.
        """
        rgb = validate_color(color)
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size <= 0:
            raise ValueError(f"size must be a positive integer font size in pixels, got {size!r}")
        if not string:
            return
        p = (float(pos[0]), float(pos[1]))
        if not screen_space:
            p = self._camera.world_to_screen(p)
        self._text((int(round(p[0])), int(round(p[1]))), str(string), rgb, int(size))

    # -- worlds -----------------------------------------------------------------------------
    def draw_world(
        self,
        world: Any,
        alpha: float = 1.0,
        previous_poses: np.ndarray | None = None,
        env_ids: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Draw every visible body of a World, read-only, ordered by ``RenderHint.layer``.

        Per-environment bodies are drawn once per copy (copy ``i`` offset by
        ``world.env_origins[i]``); shared bodies (``per_environment=False``, e.g.
        terrain) are drawn once. Inside a layer, bodies keep the scene order.

        Args:
            world: A ``kelab.World`` (anything with ``scene``, ``body_names``,
                ``body_poses`` of shape ``(num_envs, n_bodies, 3)``, ``num_envs`` and
                ``env_origins`` or ``env_spacing``).
            alpha: Interpolation factor in [0, 1] between ``previous_poses`` (0) and the
                current poses (1); positions are lerped, angles take the shortest arc.
            previous_poses: Poses one physics step earlier, same shape as
                ``world.body_poses``; ignored when None or ``alpha == 1``.
            env_ids: The copies to draw (default: all).
        """
        a = _finite_number("alpha", alpha)
        if a > 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        scene = world.scene
        names = tuple(world.body_names)
        comp = self._compiled
        if comp is None or comp.scene is not scene or comp.body_names != names:
            comp = self._compiled = _compile(scene, names)
        poses = np.asarray(world.body_poses, dtype=np.float64)
        num_envs = int(world.num_envs)
        if poses.shape != (num_envs, len(names), 3):
            raise ValueError(
                f"world.body_poses must have shape (num_envs, n_bodies, 3) = "
                f"({num_envs}, {len(names)}, 3), got {poses.shape}"
            )
        if previous_poses is not None and a < 1.0:
            prev = np.asarray(previous_poses, dtype=np.float64)
            if prev.shape != poses.shape:
                raise ValueError(
                    f"previous_poses must have the shape of world.body_poses {poses.shape}, "
                    f"got {prev.shape}"
                )
            mixed = prev + a * (poses - prev)
            mixed[..., 2] = prev[..., 2] + a * wrap_angle(poses[..., 2] - prev[..., 2])
            poses = mixed
        ids = np.arange(num_envs) if env_ids is None else np.asarray(env_ids, dtype=np.intp)
        if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= num_envs)):
            raise ValueError(
                f"env_ids must be a 1-D list of copy indices in [0, {num_envs}), got {env_ids!r}"
            )
        origins = _env_origins(world, num_envs)[ids]  # (E, 2)

        items: list[tuple[int, int, _Group, _BodyDraw, np.ndarray]] = []
        for group, group_poses in (
            (comp.per_env, self._group_poses(comp.per_env, poses[ids], origins)),
            (comp.shared, self._group_poses(comp.shared, poses[:1], np.zeros((1, 2)))),
        ):
            if not group.bodies or group_poses.shape[0] == 0:
                continue
            world_pts = transform_points(group.local, group.owner, group_poses)
            screen = self._camera.world_to_screen_batch(world_pts)  # (E, M, 2)
            for body in group.bodies:
                items.append((body.layer, body.order, group, body, screen))
        items.sort(key=lambda it: (it[0], it[1]))
        zoom = self._camera.zoom
        for _, _, _, body, screen in items:
            for sh in body.shapes:
                pts = screen[:, sh.start : sh.start + sh.count]
                if sh.kind == "poly":
                    self._fill_polygons(pts, sh.color)
                elif sh.kind == "circle":
                    r_px = np.full(pts.shape[0], sh.radius * zoom)
                    self._fill_circles(pts[:, 0], r_px, sh.color)
                    w = max(1.0, 0.12 * sh.radius * zoom)
                    self._thick_lines(pts[:, 0], pts[:, 1], w, sh.accent, False)
                else:
                    w = 2.0 * sh.radius * zoom
                    self._thick_lines(pts[:, 0], pts[:, 1], w, sh.color, True)

    @staticmethod
    def _group_poses(group: _Group, poses: np.ndarray, origins: np.ndarray) -> np.ndarray:
        """(E, B, 3) world poses of a group's bodies for the selected copies."""
        n_env = poses.shape[0]
        out = np.broadcast_to(group.static_poses, (n_env,) + group.static_poses.shape).copy()
        has = group.world_columns >= 0
        if has.any():
            out[:, has] = poses[:, group.world_columns[has]]
        out[..., :2] += origins[:, None, :]
        return out

    # -- composite helpers -----------------------------------------------------------------
    def _thick_lines(
        self, a: np.ndarray, b: np.ndarray, width_px: float, color: Color, round_caps: bool
    ) -> None:
        """Lines in pixels; rectangles plus optional round caps, or hairlines if thin."""
        if width_px < 1.5:
            self._hairlines(a, b, color)
            return
        self._fill_polygons(thick_line_quads(a, b, width_px), color)
        if round_caps:
            r = np.full(a.shape[0] * 2, 0.5 * width_px)
            self._fill_circles(np.concatenate([a, b]), r, color)

    # -- backend hooks (pixels, batched) -----------------------------------------------------
    @abstractmethod
    def _clear(self, color: Color) -> None:
        """Fill the frame."""

    @abstractmethod
    def _fill_polygons(self, polys: np.ndarray, color: Color) -> None:
        """Fill ``(N, k, 2)`` convex polygons given in pixels."""

    @abstractmethod
    def _fill_circles(self, centers: np.ndarray, radii: np.ndarray, color: Color) -> None:
        """Fill ``(N,)`` discs: centres ``(N, 2)`` and radii ``(N,)`` in pixels."""

    @abstractmethod
    def _ring(self, centers: np.ndarray, radii: np.ndarray, width: float, color: Color) -> None:
        """Circle outlines from ``radii - width`` to ``radii`` (pixels)."""

    @abstractmethod
    def _hairlines(self, a: np.ndarray, b: np.ndarray, color: Color) -> None:
        """One-pixel antialiased lines from ``a[i]`` to ``b[i]`` (pixels)."""

    @abstractmethod
    def _text(self, pos: tuple[int, int], string: str, color: Color, size: int) -> None:
        """Text with its top-left corner at integer pixel ``pos``."""


def _env_origins(world: Any, num_envs: int) -> np.ndarray:
    origins = getattr(world, "env_origins", None)
    if origins is not None:
        o = np.asarray(origins, dtype=np.float64)
        if o.shape == (num_envs, 2):
            return o
        raise ValueError(f"world.env_origins must have shape ({num_envs}, 2), got {o.shape}")
    spacing = float(getattr(world, "env_spacing", 0.0))
    o = np.zeros((num_envs, 2))
    o[:, 0] = np.arange(num_envs) * spacing
    return o
