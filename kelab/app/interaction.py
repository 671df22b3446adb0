"""Mouse interaction with a World: picking the body under the cursor and dragging it.

Picking is pure geometry on the World's public state (the scene's shapes and
``world.body_poses``), batched over every body and environment copy with numpy; the
topmost drawn body wins (highest ``RenderHint.layer``, then the later one in the scene).

Dragging pulls a dynamic body with a damped spring from the grab point (in the body's
frame) toward the cursor. The spring is a pymunk ``DampedSpring`` between the dragged
copy's static body and the body, so only that copy's space changes: every other copy
stays bit-identical to an undisturbed run. Its target is latched per fixed step (the App
calls `DragSpring.set_target` before each step), so the drag is frame-rate independent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kelab.sim.shapes import Box, Circle, Polygon, Segment

__all__ = ["DragSpring", "PickedBody", "pick_body"]


@dataclass(frozen=True)
class PickedBody:
    """A body found under a point.

    Attributes:
        path: The body's path, e.g. ``"/World/Robot/pole"``.
        index: Its column in ``world.body_names`` / ``world.body_poses``.
        env_id: The environment copy it belongs to.
        point: The picked point in the display frame (metres, copy origins included).
        local_point: The same point in the body's frame.
        dynamic: Whether the body moves (only dynamic bodies can be dragged).
    """

    path: str
    index: int
    env_id: int
    point: tuple[float, float]
    local_point: tuple[float, float]
    dynamic: bool


@dataclass
class _ShapeTable:
    """Every shape of a scene as arrays, by kind (body-frame geometry)."""

    circ_body: np.ndarray
    circ_center: np.ndarray
    circ_radius: np.ndarray
    seg_body: np.ndarray
    seg_a: np.ndarray
    seg_b: np.ndarray
    seg_radius: np.ndarray
    poly_body: np.ndarray
    poly_verts: np.ndarray  # (S, K, 2), short polygons padded with their last vertex
    per_env: np.ndarray  # (n_bodies,) bool
    rank: np.ndarray  # (n_bodies,) draw order key (layer, order) as one int
    dynamic: np.ndarray  # (n_bodies,) bool
    moves: np.ndarray  # (n_bodies,) bool: not static (dynamic or kinematic)
    static_poses: np.ndarray  # (n_bodies, 3) scene poses (bodies the World does not list)
    world_col: np.ndarray  # (n_bodies,) column in world.body_poses or -1
    paths: tuple[str, ...]


def _offset_points(shape: Any, pts: np.ndarray) -> np.ndarray:
    off = shape.offset
    c, s = math.cos(off.angle), math.sin(off.angle)
    rot = np.array([[c, -s], [s, c]])
    return pts @ rot.T + np.array([off.x, off.y])


def _table(scene: Any, body_names: tuple[str, ...]) -> _ShapeTable:
    cb, cc, cr, sb, sa, sbb, sr, pb, pv = [], [], [], [], [], [], [], [], []
    name_col = {n: i for i, n in enumerate(body_names)}
    per_env, rank, dynamic, static_poses, world_col, paths = [], [], [], [], [], []
    moves = []
    n = len(scene.bodies)
    for i, inst in enumerate(scene.bodies):
        spec = inst.spec
        paths.append(inst.path)
        per_env.append(bool(inst.per_environment))
        rank.append(int(spec.render.layer) * (n + 1) + i)
        dynamic.append(spec.body_type == "dynamic")
        moves.append(spec.body_type != "static")
        static_poses.append((inst.pose.x, inst.pose.y, inst.pose.angle))
        world_col.append(name_col.get(inst.path, -1))
        for shape in spec.shapes:
            if isinstance(shape, Circle):
                cb.append(i)
                cc.append(_offset_points(shape, np.zeros((1, 2)))[0])
                cr.append(float(shape.radius))
            elif isinstance(shape, Segment):
                ab = _offset_points(shape, np.array([shape.a, shape.b], dtype=np.float64))
                sb.append(i)
                sa.append(ab[0])
                sbb.append(ab[1])
                sr.append(float(shape.radius))
            elif isinstance(shape, (Box, Polygon)):
                verts = shape.vertices() if isinstance(shape, Box) else shape.vertices
                pb.append(i)
                pv.append(_offset_points(shape, np.asarray(verts, dtype=np.float64)))
    k = max((len(v) for v in pv), default=3)
    verts = np.zeros((len(pv), k, 2))
    for j, v in enumerate(pv):
        verts[j, : len(v)] = v
        verts[j, len(v) :] = v[-1]

    def arr(x: list, shape: tuple[int, ...] = (-1,), dtype: Any = np.float64) -> np.ndarray:
        return np.asarray(x, dtype=dtype).reshape(shape)

    return _ShapeTable(
        circ_body=arr(cb, dtype=np.intp),
        circ_center=arr(cc, (-1, 2)),
        circ_radius=arr(cr),
        seg_body=arr(sb, dtype=np.intp),
        seg_a=arr(sa, (-1, 2)),
        seg_b=arr(sbb, (-1, 2)),
        seg_radius=arr(sr),
        poly_body=arr(pb, dtype=np.intp),
        poly_verts=verts,
        per_env=arr(per_env, dtype=bool),
        rank=arr(rank, dtype=np.int64),
        dynamic=arr(dynamic, dtype=bool),
        moves=arr(moves, dtype=bool),
        static_poses=arr(static_poses, (-1, 3)),
        world_col=arr(world_col, dtype=np.intp),
        paths=tuple(paths),
    )


_TABLES: dict[int, tuple[Any, tuple[str, ...], _ShapeTable]] = {}


def _cached_table(world: Any) -> _ShapeTable:
    scene = world.scene
    names = tuple(world.body_names)
    hit = _TABLES.get(id(scene))
    if hit is None or hit[0] is not scene or hit[1] != names:
        if len(_TABLES) > 16:
            _TABLES.clear()
        hit = (scene, names, _table(scene, names))
        _TABLES[id(scene)] = hit
    return hit[2]


def _env_origins(world: Any) -> np.ndarray:
    origins = getattr(world, "env_origins", None)
    if origins is not None:
        return np.asarray(origins, dtype=np.float64).reshape(-1, 2)
    n = int(world.num_envs)
    out = np.zeros((n, 2))
    out[:, 0] = np.arange(n) * float(getattr(world, "env_spacing", 0.0))
    return out


def _local(points: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """Points (E, 1, 2) into body frames given poses (E, S, 3) -> (E, S, 2)."""
    dx = points[..., 0] - poses[..., 0]
    dy = points[..., 1] - poses[..., 1]
    c, s = np.cos(poses[..., 2]), np.sin(poses[..., 2])
    return np.stack([c * dx + s * dy, -s * dx + c * dy], axis=-1)


def pick_body(
    world: Any,
    point: tuple[float, float],
    tolerance: float = 0.0,
    env_ids: Any = None,
) -> PickedBody | None:
    """Return the topmost body whose shapes contain ``point``, or None.

    Args:
        world: A ``kelab.World`` (uses ``scene``, ``body_names``, ``body_poses``,
            ``num_envs`` and ``env_origins``).
        point: ``(x, y)`` in the display frame (the frame the renderer draws in:
            copy ``i`` is offset by ``world.env_origins[i]``).
        tolerance: Metres added to circle and segment radii (thin shapes stay pickable).
        env_ids: Copies to search (default all); shared bodies belong to copy 0.

    Returns:
        The body, or None when the point is over nothing.

    Example:
        >>> import kelab as ke
        >>> b = ke.SceneBuilder()
        >>> _ = b.add(ke.Prop(ke.Circle(0.5), initial_pose=ke.Pose(0.0, 2.0)), at="/Ball")
        >>> pick_body(ke.World(b.build()), (0.1, 2.2)).path
        '/Ball'
    """
    tab = _cached_table(world)
    n_env = int(world.num_envs)
    ids = np.arange(n_env) if env_ids is None else np.asarray(env_ids, dtype=np.intp).reshape(-1)
    nb = len(tab.paths)
    poses_w = np.asarray(world.body_poses, dtype=np.float64)
    poses = np.broadcast_to(tab.static_poses, (n_env, nb, 3)).copy()
    has = (tab.world_col >= 0) & tab.moves  # static bodies never move: scene poses
    poses[:, has] = poses_w[:, tab.world_col[has]]
    origins = _env_origins(world)
    # every copy sees the point in its own frame
    p = np.asarray(point, dtype=np.float64).reshape(1, 2) - origins[ids]  # (E, 2)
    p_shared = np.asarray(point, dtype=np.float64).reshape(1, 2)
    poses = poses[ids]
    hits = np.zeros((ids.size, nb), dtype=bool)

    def local_for(body_idx: np.ndarray) -> np.ndarray:
        bp = poses[:, body_idx]  # (E, S, 3)
        pts = np.where(tab.per_env[body_idx][None, :, None], p[:, None, :], p_shared[:, None, :])
        return _local(pts, bp)

    if tab.circ_body.size:
        q = local_for(tab.circ_body)
        d2 = ((q - tab.circ_center) ** 2).sum(-1)
        inside = d2 <= (tab.circ_radius + tolerance) ** 2
        np.logical_or.at(hits, (slice(None), tab.circ_body), inside)
    if tab.seg_body.size:
        q = local_for(tab.seg_body)
        ab = tab.seg_b - tab.seg_a
        t = ((q - tab.seg_a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-300)
        closest = tab.seg_a + np.clip(t, 0.0, 1.0)[..., None] * ab
        d2 = ((q - closest) ** 2).sum(-1)
        inside = d2 <= (tab.seg_radius + tolerance) ** 2
        np.logical_or.at(hits, (slice(None), tab.seg_body), inside)
    if tab.poly_body.size:
        q = local_for(tab.poly_body)[..., None, :]  # (E, S, 1, 2)
        v = tab.poly_verts  # (S, K, 2)
        e = np.roll(v, -1, axis=1) - v
        cross = e[..., 0] * (q[..., 1] - v[..., 1]) - e[..., 1] * (q[..., 0] - v[..., 0])
        inside = (cross >= 0).all(-1) | (cross <= 0).all(-1)
        np.logical_or.at(hits, (slice(None), tab.poly_body), inside)
    # shared bodies exist once: only copy 0 (or the first searched copy) may report them
    hits[1:, ~tab.per_env] = False
    if not hits.any():
        return None
    env_rows, bodies = np.nonzero(hits)
    best = int(np.argmax(tab.rank[bodies] * (n_env + 1) - env_rows))
    row, body = int(env_rows[best]), int(bodies[best])
    env = int(ids[row]) if tab.per_env[body] else 0
    pose = poses[row, body]
    src = p[row] if tab.per_env[body] else p_shared[0]
    local = _local(src.reshape(1, 1, 2), pose.reshape(1, 1, 3))[0, 0]
    return PickedBody(
        path=tab.paths[body],
        index=int(tab.world_col[body]) if tab.world_col[body] >= 0 else body,
        env_id=env,
        point=(float(point[0]), float(point[1])),
        local_point=(float(local[0]), float(local[1])),
        dynamic=bool(tab.dynamic[body]),
    )


class DragSpring:
    """A damped spring pulling a grabbed body toward a target point.

    The stiffness is set from the body's mass for a natural frequency ``frequency_hz``
    (``k = m * (2 pi f)^2``) and the damping for ``damping_ratio``; the force is capped
    at ``max_acceleration * m``. It lives in the grabbed copy's pymunk space only.

    Args:
        world: The ``kelab.World``.
        picked: The grabbed body (`pick_body`); must be dynamic.
        frequency_hz: Natural frequency of the spring-mass system (> 0).
        damping_ratio: 1 is critically damped (>= 0).
        max_acceleration: Force cap in m/s^2 times the body's mass (> 0).

    Note:
        This reaches into the World's per-copy pymunk spaces (``World._copies``): the
        World has no public external-force API yet. A drag is also not part of the
        World's replay log, so a snapshot taken during or after a drag restores the
        dragged copy without it (undragged copies restore exactly).
    """

    def __init__(
        self,
        world: Any,
        picked: PickedBody,
        frequency_hz: float = 4.0,
        damping_ratio: float = 0.7,
        max_acceleration: float = 200.0,
    ) -> None:
        import pymunk

        if not picked.dynamic:
            raise ValueError(f"cannot drag {picked.path!r}: only dynamic bodies can be dragged")
        for name, value, low in (
            ("frequency_hz", frequency_hz, 0.0),
            ("max_acceleration", max_acceleration, 0.0),
        ):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > low):
                raise ValueError(f"DragSpring.{name} must be a finite number > 0, got {value!r}")
        if not (isinstance(damping_ratio, (int, float)) and 0 <= damping_ratio < math.inf):
            raise ValueError(f"DragSpring.damping_ratio must be >= 0, got {damping_ratio!r}")
        copies = getattr(world, "_copies", None)
        if copies is None:
            raise TypeError(
                f"dragging needs a kelab.World (per-copy pymunk spaces); got {type(world).__name__}"
            )
        self.world = world
        self.picked = picked
        copy = copies[picked.env_id]
        self._space = copy.space
        self._body = copy.bodies[picked.index]
        self._origin = _env_origins(world)[picked.env_id]
        mass = float(self._body.mass)
        omega = 2.0 * math.pi * float(frequency_hz)
        target = self._to_copy(picked.point)
        self._spring = pymunk.DampedSpring(
            self._space.static_body,
            self._body,
            target,
            picked.local_point,
            0.0,
            mass * omega * omega,
            2.0 * float(damping_ratio) * mass * omega,
        )
        self._spring.max_force = mass * float(max_acceleration)
        self._space.add(self._spring)
        self._in_space = True
        self.target = picked.point
        """The current target in the display frame."""

    def _to_copy(self, point: tuple[float, float]) -> tuple[float, float]:
        return (float(point[0]) - self._origin[0], float(point[1]) - self._origin[1])

    @property
    def alive(self) -> bool:
        """False once the copy was reset or rebuilt (the spring went with its space)."""
        copies = getattr(self.world, "_copies", None)
        return (
            copies is not None
            and copies[self.picked.env_id].space is self._space
            and self._in_space
        )

    def set_target(self, point: tuple[float, float]) -> None:
        """Move the spring's free end to ``point`` (display frame, metres)."""
        self.target = (float(point[0]), float(point[1]))
        if self.alive:
            self._spring.anchor_a = self._to_copy(point)

    def anchor_world(self) -> tuple[float, float]:
        """The grab point on the body now, in the display frame."""
        pose = np.asarray(self.world.body_poses)[self.picked.env_id, self.picked.index]
        q = self.picked.local_point
        c, s = math.cos(pose[2]), math.sin(pose[2])
        return (
            float(pose[0] + c * q[0] - s * q[1] + self._origin[0]),
            float(pose[1] + s * q[0] + c * q[1] + self._origin[1]),
        )

    def remove(self) -> None:
        """Take the spring out of the space (idempotent)."""
        if self._in_space:
            self._in_space = False
            self._space.remove(self._spring)
