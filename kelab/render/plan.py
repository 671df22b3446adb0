"""Compiled draw plans: what ``Canvas.draw_world`` draws, prepared once per scene and zoom.

A :class:`WorldLayout` is compiled once per (scene, body order): which bodies are drawn,
in which order, with which colours. For one zoom and one number of environment copies it
expands into a list of :class:`Primitive` (filled convex polygons and one-pixel lines)
whose points are in *body-frame pixels*: the shape geometry, tessellated and scaled by the
zoom but not yet moved. Backends turn that list into a :class:`DrawPlan` once (pygame
insets the polygons, GL triangulates them) and every frame only moves the points: one
gather of the body poses and a handful of numpy operations for all vertices of all
bodies of all copies (:meth:`WorldLayout.screen_points`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kelab.render.geometry import (
    circle_segments,
    inset_polygons,
    thick_line_quads,
    unit_circle,
)

if TYPE_CHECKING:
    from kelab.render.camera import Camera
    from kelab.sim.scene import BodyInstance, Scene
    from kelab.sim.scene.shapes import Shape

__all__ = ["DrawPlan", "Primitive", "WorldLayout"]

Color = tuple[int, int, int]

#: Plans kept per layout (zoom levels x copy counts); the App zooms in steps.
_PLAN_CACHE = 16
#: Width of body outlines in pixels, and the smallest shape (pixels across) that gets one.
OUTLINE_PX = 1.5
OUTLINE_MIN_PX = 6.0
#: An outline is the body colour times this (a darker shade of the same hue).
OUTLINE_SHADE = 0.55


@dataclass(frozen=True)
class Primitive:
    """One thing to draw, in body-frame pixels (+Y up, not yet placed).

    Attributes:
        fill: True for a filled convex polygon, False for a one-pixel line (2 points).
        points: ``(k, 2)`` points in pixels relative to the body origin.
        color: ``(r, g, b)`` ints.
        instance: Row of the per-frame instance pose table that places the points.
    """

    fill: bool
    points: np.ndarray
    color: Color
    instance: int


@dataclass
class DrawPlan:
    """A backend-ready plan: body-frame points, their instances, and backend data.

    Attributes:
        local: ``(P, 2)`` body-frame pixel points.
        instance: ``(P,)`` instance row of each point.
        data: Whatever the backend needs to draw the moved points (commands, indices).
        src: ``(I,)`` row of each instance's pose in the per-frame pose table (set by
            :meth:`WorldLayout.plan`).
        origin: ``(I,)`` row of each instance's copy origin (the last row is ``(0, 0)``).
    """

    local: np.ndarray
    instance: np.ndarray
    data: Any = None
    src: np.ndarray = field(init=False)
    origin: np.ndarray = field(init=False)
    lx: np.ndarray = field(init=False)
    ly: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.lx = np.ascontiguousarray(self.local[:, 0])
        self.ly = np.ascontiguousarray(self.local[:, 1])


def _shade(color: Color, factor: float = 0.45) -> Color:
    return (int(color[0] * factor), int(color[1] * factor), int(color[2] * factor))


def _circle(center: np.ndarray, radius_px: float) -> np.ndarray:
    r = max(radius_px, 0.5)
    return center + r * unit_circle(circle_segments(r))


def _shape_parts(
    shape: Shape, zoom: float, color: Color, outline: bool = False
) -> list[tuple[bool, np.ndarray, Color]]:
    """The primitives of one shape in body-frame pixels, in drawing order.

    With ``outline``, boxes, polygons and circles at least :data:`OUTLINE_MIN_PX` across
    are drawn as a darker shape with the body colour inset by :data:`OUTLINE_PX` on top
    (the plan is compiled once per zoom, so this costs only the extra points per frame).
    """
    from kelab.sim.scene.shapes import Box, Circle, Polygon, Segment

    off = shape.offset
    c, s = np.cos(off.angle), np.sin(off.angle)
    rot = np.array([[c, -s], [s, c]])
    shift = np.array([off.x, off.y])

    def place(pts: npt.ArrayLike) -> np.ndarray:
        return (np.asarray(pts, dtype=np.float64) @ rot.T + shift) * zoom

    if isinstance(shape, (Box, Polygon)):
        verts = shape.vertices() if isinstance(shape, Box) else shape.vertices
        pts = place(verts)
        if outline:
            span = pts.max(axis=0) - pts.min(axis=0)
            if span.min() >= OUTLINE_MIN_PX:
                inner = inset_polygons(pts[None], OUTLINE_PX)[0]
                return [(True, pts, _shade(color, OUTLINE_SHADE)), (True, inner, color)]
        return [(True, pts, color)]
    if isinstance(shape, Circle):
        center, rim = place([[0.0, 0.0], [shape.radius, 0.0]])
        r_px = shape.radius * zoom
        if outline and 2.0 * r_px >= OUTLINE_MIN_PX:
            parts = [
                (True, _circle(center, r_px), _shade(color, OUTLINE_SHADE)),
                (True, _circle(center, r_px - OUTLINE_PX), color),
            ]
        else:
            parts = [(True, _circle(center, r_px), color)]
        width = max(1.0, 0.12 * shape.radius * zoom)
        parts.append(_line(center, rim, width, _shade(color)))
        return parts
    if isinstance(shape, Segment):
        a, b = place([shape.a, shape.b])
        width = 2.0 * shape.radius * zoom
        parts = [_line(a, b, width, color)]
        if width >= 1.5:
            parts += [
                (True, _circle(a, 0.5 * width), color),
                (True, _circle(b, 0.5 * width), color),
            ]
        return parts
    raise TypeError(
        f"cannot draw shape of type {type(shape).__name__}; expected Circle, Box, Polygon or "
        "Segment"
    )


def _line(
    a: np.ndarray, b: np.ndarray, width: float, color: Color
) -> tuple[bool, np.ndarray, Color]:
    """A butt-ended line: a filled quad, or a one-pixel line when thinner than 1.5 px."""
    if width < 1.5:
        return (False, np.stack([a, b]), color)
    return (True, thick_line_quads(a[None], b[None], width)[0], color)


@dataclass(frozen=True)
class _Body:
    layer: int
    order: int
    per_env: bool
    column: int  # column inside its group
    shapes: tuple[Shape, ...]
    color: Color


class WorldLayout:
    """What a World's scene draws, independent of the poses, zoom and camera.

    Args:
        scene: The World's scene.
        body_names: ``world.body_names`` (the column order of ``world.body_poses``).
        validate_color: Called on each ``RenderHint.color`` (raises ValueError).
    """

    def __init__(
        self,
        scene: Scene,
        body_names: tuple[str, ...],
        validate_color: Callable[[object, str], Color],
    ) -> None:
        self.scene = scene
        self.body_names = body_names
        index = {name: i for i, name in enumerate(body_names)}
        groups: dict[bool, list[BodyInstance]] = {True: [], False: []}
        bodies: list[_Body] = []
        for order, inst in enumerate(scene.bodies):
            hint = inst.spec.render
            if not hint.visible or not inst.spec.shapes:
                continue
            group = groups[bool(inst.per_environment)]
            color = validate_color(hint.color, f"{inst.path}: render.color")
            bodies.append(
                _Body(
                    int(hint.layer),
                    order,
                    bool(inst.per_environment),
                    len(group),
                    tuple(inst.spec.shapes),
                    color,
                )
            )
            group.append(inst)
        bodies.sort(key=lambda b: (b.layer, b.order))
        self._bodies = bodies
        nb = len(body_names)
        per_env, shared = groups[True], groups[False]
        self.n_per_env = len(per_env)
        self.n_shared = len(shared)
        # pose source table per frame: [poses[ids] (E*nb) | poses[0] (nb) | static (B1+B2)]
        statics = [(i.pose.x, i.pose.y, i.pose.angle) for i in per_env + shared]
        self.static_poses = np.array(statics, dtype=np.float64).reshape(-1, 3)
        self._col_env = np.array([index.get(i.path, -1) for i in per_env], dtype=np.intp)
        self._col_shared = np.array([index.get(i.path, -1) for i in shared], dtype=np.intp)
        self._nb = nb
        self._plans: dict[tuple[Any, ...], DrawPlan] = {}

    def _instance_sources(self, n_env: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the pose source table and of the origin table for every instance."""
        nb, b1 = self._nb, self.n_per_env
        e = np.repeat(np.arange(n_env), b1)
        col = np.tile(self._col_env, n_env)
        static_row = n_env * nb + nb + np.tile(np.arange(b1), n_env)
        src_env = np.where(col >= 0, e * nb + col, static_row)
        col2 = self._col_shared
        src_shared = np.where(
            col2 >= 0, n_env * nb + col2, n_env * nb + nb + b1 + np.arange(self.n_shared)
        )
        origin = np.concatenate([e, np.full(self.n_shared, n_env)])  # row n_env = (0, 0)
        return np.concatenate([src_env, src_shared]).astype(np.intp), origin.astype(np.intp)

    def primitives(self, zoom: float, n_env: int, outline: bool = False) -> list[Primitive]:
        """Expand the scene into primitives for ``n_env`` copies at ``zoom`` px per metre.

        Args:
            zoom: Pixels per metre.
            n_env: Number of copies drawn.
            outline: Give bodies a darker outline (see ``_shape_parts``).

        Returns:
            Primitives in painter's order: by layer, then scene order; per shape part,
            all copies.
        """
        out: list[Primitive] = []
        b1 = self.n_per_env
        for body in self._bodies:
            if body.per_env:
                instances = [e * b1 + body.column for e in range(n_env)]
            else:
                instances = [n_env * b1 + body.column]
            for shape in body.shapes:
                for fill, pts, color in _shape_parts(shape, zoom, body.color, outline):
                    out.extend(Primitive(fill, pts, color, i) for i in instances)
        return out

    def plan(
        self,
        zoom: float,
        n_env: int,
        build: Callable[[list[Primitive]], DrawPlan],
        style: Hashable,
        outline: bool = False,
    ) -> DrawPlan:
        """Return the cached plan for ``(zoom, n_env)``, building it with ``build`` once.

        Args:
            zoom: Pixels per metre.
            n_env: Number of copies drawn.
            build: ``build(primitives) -> DrawPlan`` (the backend's compiler).
            style: Hashable backend settings the plan depends on (e.g. antialiasing).
            outline: Outline the bodies (``Canvas.outlines``).

        Returns:
            The plan, with ``instance`` rows already mapped to pose-table sources.
        """
        key = (zoom, n_env, style, outline)
        plan = self._plans.get(key)
        if plan is None:
            plan = build(self.primitives(zoom, n_env, outline))
            plan.src, plan.origin = self._instance_sources(n_env)
            if len(self._plans) >= _PLAN_CACHE:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return plan

    def screen_points(
        self,
        plan: DrawPlan,
        poses: np.ndarray,
        shared_poses: np.ndarray,
        origins: np.ndarray,
        camera: Camera,
        shift: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Move a plan's points to the screen for this frame.

        Args:
            plan: From :meth:`plan`.
            poses: ``(E, nb, 3)`` poses of the drawn copies (already interpolated).
            shared_poses: ``(nb, 3)`` poses of copy 0 (shared bodies listed in
                ``body_names`` follow it).
            origins: ``(E, 2)`` origins of the drawn copies.
            camera: The camera (its zoom must be the plan's).
            shift: Added to both pixel coordinates (backend pixel-centre convention).

        Returns:
            ``(xs, ys)``, each ``(P,)`` float64 screen pixels (+Y down).
        """
        # each instance's transform once, then every point through its instance's
        table = np.concatenate((poses.reshape(-1, 3), shared_poses, self.static_poses))
        p = table[plan.src]
        org = np.concatenate((origins, np.zeros((1, 2))))[plan.origin]
        c, s = np.cos(p[:, 2]), np.sin(p[:, 2])
        z = camera.zoom
        w, h = camera.size
        cx, cy = camera.center
        tx = (p[:, 0] + org[:, 0]) * z + (0.5 * w + shift - cx * z)
        ty = (0.5 * h + shift + cy * z) - (p[:, 1] + org[:, 1]) * z
        i, lx, ly = plan.instance, plan.lx, plan.ly
        c, s = c[i], s[i]
        xs = tx[i] + (c * lx - s * ly)
        ys = ty[i] - (s * lx + c * ly)
        return xs, ys
