"""Mouse interaction with a World: picking the body under the cursor and dragging it.

Everything here uses the World's public API only, so it works in both World layouts
(``"isolated"`` and ``"packed"``):

- **Picking** (`pick_body`): moving bodies are found by `World.body_at` (pymunk's exact
  shapes at the present poses) in the copies whose bounding box holds the point, nearest
  copy origin first; static bodies (ground, walls), which `World.body_at` never returns,
  are found by batched numpy geometry on their scene poses (static bodies never move).
  A moving body under the point wins over a static one.
- **Dragging** (`DragSpring`): every fixed step the App computes a critically damped
  spring force that pulls the grab point (a point fixed in the body) toward the cursor and
  holds it with `World.apply_force_at_point`; releasing clears that body's force with
  `World.set_body_forces`. External forces are controls in the World's replay log, so a
  snapshot taken during or after a drag restores exactly, and only the dragged body's
  force changes: every other copy stays bit-identical to an undisturbed run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kelab._validate import check_number, check_positive, must
from kelab.sim.scene.shapes import Box, Circle, Polygon, Segment, Shape

if TYPE_CHECKING:
    from kelab.sim.scene import BodySpec, Scene
    from kelab.sim.world import World

__all__ = ["DragSpring", "PickedBody", "pick_body"]


@dataclass(frozen=True)
class PickedBody:
    """A body found under a point.

    Attributes:
        path: The body's path, e.g. ``"/World/Robot/pole"``.
        index: Its column in ``world.body_names`` / ``world.body_poses``.
        env_id: The environment copy it belongs to (0 for a shared body).
        point: The picked point in the display frame (metres, copy origins included).
        local_point: The same point in the body's frame.
        dynamic: Whether the body is dynamic (only dynamic bodies can be dragged).
    """

    path: str
    index: int
    env_id: int
    point: tuple[float, float]
    local_point: tuple[float, float]
    dynamic: bool


@dataclass
class _SceneTable:
    """A scene's bodies as arrays: static-body geometry, moving-body extents, kinds."""

    # static bodies only (geometry in the body frame; index into the static list)
    circ_body: np.ndarray
    circ_center: np.ndarray
    circ_radius: np.ndarray
    seg_body: np.ndarray
    seg_a: np.ndarray
    seg_b: np.ndarray
    seg_radius: np.ndarray
    poly_body: np.ndarray
    poly_verts: np.ndarray  # (S, K, 2), short polygons padded with their last vertex
    static_per_env: np.ndarray  # (n_static,) bool
    static_rank: np.ndarray  # (n_static,) draw order key (layer, order) as one int
    static_poses: np.ndarray  # (n_static, 3) scene poses
    static_col: np.ndarray  # (n_static,) column in world.body_names (-1: not listed)
    static_paths: tuple[str, ...]
    # every column of world.body_names
    col_dynamic: np.ndarray  # (n_bodies,) bool: body_type == "dynamic"
    col_per_env: np.ndarray  # (n_bodies,) bool
    moving_cols: np.ndarray  # (n_moving,) columns of the moving bodies
    moving_extent: np.ndarray  # (n_moving,) farthest shape point from the body origin, m


def _offset_points(shape: Shape, pts: np.ndarray) -> np.ndarray:
    off = shape.offset
    c, s = math.cos(off.angle), math.sin(off.angle)
    rot = np.array([[c, -s], [s, c]])
    return pts @ rot.T + np.array([off.x, off.y])


def _extent(spec: BodySpec) -> float:
    """Farthest distance of any shape point from the body origin (a bounding radius)."""
    far = 0.0
    for shape in spec.shapes:
        if isinstance(shape, Circle):
            centre = _offset_points(shape, np.zeros((1, 2)))[0]
            far = max(far, float(np.hypot(*centre)) + float(shape.radius))
        else:
            pts = np.asarray(shape.local_points(), dtype=np.float64).reshape(-1, 2)
            radius = float(shape.radius) if isinstance(shape, Segment) else 0.0
            far = max(far, float(np.hypot(pts[:, 0], pts[:, 1]).max()) + radius)
    return far


def _table(scene: Scene, body_names: tuple[str, ...]) -> _SceneTable:
    cb, cc, cr, sb, sa, sbb, sr, pb, pv = [], [], [], [], [], [], [], [], []
    per_env, rank, poses, cols, paths = [], [], [], [], []
    name_col = {n: i for i, n in enumerate(body_names)}
    by_path = {inst.path: inst for inst in scene.bodies}
    n = len(scene.bodies)
    for i, inst in enumerate(scene.bodies):
        spec = inst.spec
        if spec.body_type != "static":
            continue
        k = len(paths)
        paths.append(inst.path)
        per_env.append(bool(inst.per_environment))
        rank.append(int(spec.render.layer) * (n + 1) + i)
        poses.append((inst.pose.x, inst.pose.y, inst.pose.angle))
        cols.append(name_col.get(inst.path, -1))
        for shape in spec.shapes:
            if isinstance(shape, Circle):
                cb.append(k)
                cc.append(_offset_points(shape, np.zeros((1, 2)))[0])
                cr.append(float(shape.radius))
            elif isinstance(shape, Segment):
                ab = _offset_points(shape, np.array([shape.a, shape.b], dtype=np.float64))
                sb.append(k)
                sa.append(ab[0])
                sbb.append(ab[1])
                sr.append(float(shape.radius))
            elif isinstance(shape, (Box, Polygon)):
                verts = shape.vertices() if isinstance(shape, Box) else shape.vertices
                pb.append(k)
                pv.append(_offset_points(shape, np.asarray(verts, dtype=np.float64)))
    k = max((len(v) for v in pv), default=3)
    verts = np.zeros((len(pv), k, 2))
    for j, v in enumerate(pv):
        verts[j, : len(v)] = v
        verts[j, len(v) :] = v[-1]
    insts = [by_path[p] for p in body_names]
    moving = [c for c, inst in enumerate(insts) if inst.spec.body_type != "static"]

    def arr(
        x: list, shape: tuple[int, ...] = (-1,), dtype: npt.DTypeLike = np.float64
    ) -> np.ndarray:
        return np.asarray(x, dtype=dtype).reshape(shape)

    return _SceneTable(
        circ_body=arr(cb, dtype=np.intp),
        circ_center=arr(cc, (-1, 2)),
        circ_radius=arr(cr),
        seg_body=arr(sb, dtype=np.intp),
        seg_a=arr(sa, (-1, 2)),
        seg_b=arr(sbb, (-1, 2)),
        seg_radius=arr(sr),
        poly_body=arr(pb, dtype=np.intp),
        poly_verts=verts,
        static_per_env=arr(per_env, dtype=bool),
        static_rank=arr(rank, dtype=np.int64),
        static_poses=arr(poses, (-1, 3)),
        static_col=arr(cols, dtype=np.intp),
        static_paths=tuple(paths),
        col_dynamic=arr([inst.spec.body_type == "dynamic" for inst in insts], dtype=bool),
        col_per_env=arr([bool(inst.per_environment) for inst in insts], dtype=bool),
        moving_cols=arr(moving, dtype=np.intp),
        moving_extent=arr([_extent(insts[c].spec) for c in moving]),
    )


_TABLES: dict[int, tuple[Scene, tuple[str, ...], _SceneTable]] = {}


def _cached_table(world: World) -> _SceneTable:
    scene = world.scene
    names = tuple(world.body_names)
    hit = _TABLES.get(id(scene))
    if hit is None or hit[0] is not scene or hit[1] != names:
        if len(_TABLES) > 16:
            _TABLES.clear()
        hit = (scene, names, _table(scene, names))
        _TABLES[id(scene)] = hit
    return hit[2]


def _local(points: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """Points (..., 2) into body frames given poses (..., 3) -> (..., 2)."""
    dx = points[..., 0] - poses[..., 0]
    dy = points[..., 1] - poses[..., 1]
    c, s = np.cos(poses[..., 2]), np.sin(poses[..., 2])
    return np.stack([c * dx + s * dy, -s * dx + c * dy], axis=-1)


def _pick_moving(
    world: World,
    tab: _SceneTable,
    p: np.ndarray,
    ids: np.ndarray,
    origins: np.ndarray,
    tolerance: float,
) -> PickedBody | None:
    """The moving body under display point ``p`` (World.body_at in candidate copies)."""
    if tab.moving_cols.size == 0 or ids.size == 0:
        return None
    poses = np.asarray(world.body_poses, dtype=np.float64)[ids][:, tab.moving_cols]  # (E, M, 3)
    reach = tab.moving_extent + tolerance
    lo = (poses[..., :2] - reach[:, None]).min(axis=1)  # (E, 2) bounding box of each copy
    hi = (poses[..., :2] + reach[:, None]).max(axis=1)
    q = p[None, :] - origins[ids]  # the point in each copy's frame
    inside = ((q >= lo) & (q <= hi)).all(axis=1)
    rows = np.flatnonzero(inside)
    # nearest copy origin first (the copy drawn around the point), then the lower id
    rows = rows[np.lexsort((ids[rows], np.hypot(q[rows, 0], q[rows, 1])))]
    for row in rows.tolist():
        env = int(ids[row])
        col = world.body_at((float(q[row, 0]), float(q[row, 1])), env, tolerance)
        if col is None or (env != 0 and not tab.col_per_env[col]):
            continue  # a shared body is drawn once, in copy 0's frame
        pose = np.asarray(world.body_poses, dtype=np.float64)[env, col]
        local = _local(q[row], pose)
        return PickedBody(
            path=world.body_names[col],
            index=int(col),
            env_id=env,
            point=(float(p[0]), float(p[1])),
            local_point=(float(local[0]), float(local[1])),
            dynamic=bool(tab.col_dynamic[col]),
        )
    return None


def _pick_static(
    tab: _SceneTable, p: np.ndarray, ids: np.ndarray, origins: np.ndarray, tolerance: float
) -> PickedBody | None:
    """The topmost static body under display point ``p`` (batched over bodies and copies)."""
    ns = len(tab.static_paths)
    if ns == 0 or ids.size == 0:
        return None
    q = p[None, :] - origins[ids]  # (E, 2) per-copy frames; shared bodies use p itself
    hits = np.zeros((ids.size, ns), dtype=bool)

    def local_for(body_idx: np.ndarray) -> np.ndarray:
        pts = np.where(tab.static_per_env[body_idx][None, :, None], q[:, None, :], p)
        return _local(pts, tab.static_poses[body_idx][None])  # (E, S, 2)

    if tab.circ_body.size:
        d = local_for(tab.circ_body) - tab.circ_center
        inside = (d**2).sum(-1) <= (tab.circ_radius + tolerance) ** 2
        np.logical_or.at(hits, (slice(None), tab.circ_body), inside)
    if tab.seg_body.size:
        d = local_for(tab.seg_body)
        ab = tab.seg_b - tab.seg_a
        t = ((d - tab.seg_a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-300)
        closest = tab.seg_a + np.clip(t, 0.0, 1.0)[..., None] * ab
        inside = ((d - closest) ** 2).sum(-1) <= (tab.seg_radius + tolerance) ** 2
        np.logical_or.at(hits, (slice(None), tab.seg_body), inside)
    if tab.poly_body.size:
        d = local_for(tab.poly_body)[..., None, :]  # (E, S, 1, 2)
        v = tab.poly_verts  # (S, K, 2)
        e = np.roll(v, -1, axis=1) - v
        cross = e[..., 0] * (d[..., 1] - v[..., 1]) - e[..., 1] * (d[..., 0] - v[..., 0])
        inside = (cross >= 0).all(-1) | (cross <= 0).all(-1)
        np.logical_or.at(hits, (slice(None), tab.poly_body), inside)
    hits[1:, ~tab.static_per_env] = False  # shared bodies exist once: the first copy reports
    if not hits.any():
        return None
    env_rows, bodies = np.nonzero(hits)
    best = int(np.argmax(tab.static_rank[bodies] * (ids.size + 1) - env_rows))
    row, body = int(env_rows[best]), int(bodies[best])
    per_env = bool(tab.static_per_env[body])
    local = _local(q[row] if per_env else p, tab.static_poses[body])
    col = int(tab.static_col[body])
    return PickedBody(
        path=tab.static_paths[body],
        index=col,
        env_id=int(ids[row]) if per_env else 0,
        point=(float(p[0]), float(p[1])),
        local_point=(float(local[0]), float(local[1])),
        dynamic=False,
    )


def pick_body(
    world: World,
    point: tuple[float, float],
    tolerance: float = 0.0,
    env_ids: npt.ArrayLike | None = None,
) -> PickedBody | None:
    """Return the body under ``point`` (display frame), or None.

    Moving bodies are asked of the World (`World.body_at`: pymunk's exact shapes, either
    layout) in the copies whose bounding box holds the point, the copy with the nearest
    origin first; the deepest hit of that copy wins. Only when no moving body is under the
    point, static bodies are tested on their scene poses (the topmost drawn one wins:
    highest ``RenderHint.layer``, then the later one in the scene). Shared bodies
    (``per_environment=False``) are drawn once, in copy 0's frame, and reported as copy 0.

    Args:
        world: A ``kelab.World``.
        point: ``(x, y)`` in the display frame (the frame the renderer draws in: copy
            ``i`` is offset by ``world.env_origins[i]``).
        tolerance: Also accept shapes at most this far from the point (metres, >= 0;
            keeps thin shapes pickable).
        env_ids: Copies to search (default all).

    Returns:
        The body, or None when the point is over nothing.

    Raises:
        ValueError: On a negative or non-finite tolerance.

    Example:
        >>> import kelab as ke
        >>> b = ke.SceneBuilder()
        >>> _ = b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
        >>> _ = b.add(ke.Prop(ke.Circle(0.5), initial_pose=ke.Pose(0.0, 2.0)), at="/Ball")
        >>> world = ke.World(b.build(), num_envs=2, env_spacing=5.0)
        >>> hit = pick_body(world, (5.1, 2.2))
        >>> hit.path, hit.env_id, hit.dynamic
        ('/Ball', 1, True)
        >>> pick_body(world, (3.0, -0.5)).path
        '/ground'
    """
    tolerance = check_number(tolerance, "pick_body: tolerance", low=0.0, unit="metres")
    tab = _cached_table(world)
    n_env = int(world.num_envs)
    ids = np.arange(n_env) if env_ids is None else np.asarray(env_ids, dtype=np.intp).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= n_env):
        raise ValueError(must("pick_body: env_ids", f"copy indices in [0, {n_env})", ids.tolist()))
    p = np.asarray(point, dtype=np.float64).reshape(2)
    origins = np.asarray(world.env_origins, dtype=np.float64).reshape(-1, 2)
    hit = _pick_moving(world, tab, p, ids, origins, tolerance)
    return hit if hit is not None else _pick_static(tab, p, ids, origins, tolerance)


class DragSpring:
    """A critically damped spring that pulls a grabbed body's grab point toward a target.

    Each fixed step, `apply` computes the force from the body's state and holds it with
    ``world.apply_force_at_point`` at the grab point (a point fixed in the body). The
    spring acts on the grab point's effective mass ``M`` (the body's mass and moment seen
    at that point), so the point follows the target like a damped oscillator of natural
    frequency ``frequency_hz`` wherever the body was grabbed::

        F = clip(M (w^2 (target - grab) - 2 zeta w v_grab), max_acceleration * m),
        w = 2 pi frequency_hz,  v_grab = v + omega x r

    integrated implicitly over the step (``F = M (v' - v_grab) / dt`` with
    ``v' = (v_grab + dt w^2 (target - grab)) / (1 + 2 zeta w dt + (w dt)^2)``), so it is
    stable for any frequency and step; for small steps it is the formula above.

    Forces are controls in the World's replay log (snapshots stay exact) and only the
    dragged body's force changes (other copies stay bit-identical). `remove` clears it.

    Args:
        world: The ``kelab.World`` (either layout).
        picked: The grabbed body (`pick_body`); must be dynamic.
        frequency_hz: Natural frequency of the spring (> 0).
        damping_ratio: 1 is critically damped (> 0).
        max_acceleration: Force cap: this many m/s^2 times the body's mass (> 0).

    Raises:
        ValueError: On a body that is not dynamic, or a parameter out of range.

    Example:
        >>> import kelab as ke
        >>> b = ke.SceneBuilder()
        >>> _ = b.add(ke.Prop(ke.Circle(0.2), mass=1.0, initial_pose=ke.Pose(0.0, 1.0)), at="/B")
        >>> world = ke.World(b.build(), layout="packed")
        >>> drag = DragSpring(world, pick_body(world, (0.0, 1.0)))
        >>> drag.set_target((0.0, 2.0))
        >>> for _ in range(100):
        ...     drag.apply(0.02)
        ...     world.step(0.02)
        >>> round(float(world.body_poses[0, 0, 1]), 1)   # held ~1.5 cm below by gravity
        2.0
        >>> drag.remove()
    """

    def __init__(
        self,
        world: World,
        picked: PickedBody,
        frequency_hz: float = 4.0,
        damping_ratio: float = 1.0,
        max_acceleration: float = 200.0,
    ) -> None:
        if not picked.dynamic:
            raise ValueError(f"cannot drag {picked.path!r}: only dynamic bodies can be dragged")
        self.frequency_hz = check_positive(frequency_hz, "DragSpring.frequency_hz", unit="Hz")
        self.damping_ratio = check_positive(damping_ratio, "DragSpring.damping_ratio")
        self.max_acceleration = check_positive(
            max_acceleration, "DragSpring.max_acceleration", unit="m/s^2"
        )
        for attr in ("apply_force_at_point", "set_body_forces", "external_forces", "body_masses"):
            if not hasattr(world, attr):
                raise ValueError(
                    f"DragSpring needs a kelab.World (external forces); got {type(world).__name__}"
                )
        self.world = world
        self.picked = picked
        # the picked copy's body's mass properties (the World's own, per copy: a copy's
        # masses may be randomized, docs/world.md "Per-copy parameters"; both layouts)
        b, env = picked.index, picked.env_id
        self.mass = float(world.body_masses[env, b])
        cog = world.body_centers_of_gravity[b]
        self._cog = (float(cog[0]), float(cog[1]))
        self.moment = float(world.body_moments[env, b])
        self._origin = np.asarray(world.env_origins, dtype=np.float64)[picked.env_id]
        self.target: tuple[float, float] = (float(picked.point[0]), float(picked.point[1]))
        """The current target in the display frame."""
        self.force: tuple[float, float] = (0.0, 0.0)
        """The force held on the body since the last `apply` (newtons, world axes)."""
        self._held: np.ndarray | None = None  # the (fx, fy, torque) row this drag wrote
        self._removed = False

    @property
    def alive(self) -> bool:
        """False once removed, or once someone else changed the body's held force.

        Resetting the copy clears its forces, so a reset ends the drag. (A zero force
        component is held as ``-0.0``, which acts exactly like ``+0.0`` in the physics but
        is told apart from the ``+0.0`` a reset writes, so a body resting right at its
        target is seen being reset too.)
        """
        if self._removed:
            return False
        if self._held is None:
            return True
        now = self._current()
        return bool(
            np.array_equal(now, self._held)
            and np.array_equal(np.signbit(now), np.signbit(self._held))
        )

    def _current(self) -> np.ndarray:
        return np.asarray(self.world.external_forces[self.picked.env_id, self.picked.index])

    @property
    def held(self) -> tuple[float, float, float] | None:
        """The body's ``(fx, fy, torque)`` row `apply` last held (None before it did)."""
        if self._held is None:
            return None
        return (float(self._held[0]), float(self._held[1]), float(self._held[2]))

    def resume(self, held: tuple[float, float, float]) -> None:
        """Take ``held`` (an earlier spring's `held` on this body) as this spring's own.

        For a drag picked up again where a World was restored from a snapshot: the body
        still holds that row, so `alive` and `remove` treat it as written by `apply`.
        """
        self._held = np.array(held, dtype=np.float64)

    def set_target(self, point: tuple[float, float]) -> None:
        """Move the spring's free end to ``point`` (display frame, metres)."""
        self.target = (float(point[0]), float(point[1]))

    def _grab(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Grab point, its velocity and its lever arm from the centre of gravity (copy frame)."""
        env, b = self.picked.env_id, self.picked.index
        x, y, a = np.asarray(self.world.body_poses[env, b], dtype=np.float64)
        vx, vy, w = np.asarray(self.world.body_velocities[env, b], dtype=np.float64)
        c, s = math.cos(a), math.sin(a)
        q, g = self.picked.local_point, self._cog
        grab = np.array([x + c * q[0] - s * q[1], y + s * q[0] + c * q[1]])
        dx, dy = q[0] - g[0], q[1] - g[1]
        r = np.array([c * dx - s * dy, s * dx + c * dy])
        return grab, np.array([vx - w * r[1], vy + w * r[0]]), r

    def apply(self, dt: float) -> None:
        """Compute the spring force for the present state and hold it for the next step.

        Call once per physics step, before it (the App does, in the CONTROL phase).
        Does nothing once the drag is not `alive`.

        Args:
            dt: The coming physics step in seconds (> 0).
        """
        h = check_positive(dt, "DragSpring.apply: dt", unit="seconds")
        if not self.alive:
            return
        grab, v, r = self._grab()
        target = np.asarray(self.target) - self._origin
        w = 2.0 * math.pi * self.frequency_hz
        v_new = (v + h * w * w * (target - grab)) / (
            1.0 + 2.0 * self.damping_ratio * w * h + (w * h) ** 2
        )
        # effective mass of the grab point: inverse of K = I/m + [r_perp][r_perp]^T / moment
        rp = np.array([-r[1], r[0]])
        k = np.eye(2) / self.mass + np.outer(rp, rp) / self.moment
        force = np.linalg.solve(k, (v_new - v) / h)
        cap = self.max_acceleration * self.mass
        norm = float(np.hypot(force[0], force[1]))
        if norm > cap:
            force *= cap / norm
        force[force == 0.0] = -0.0  # exactly +0.0 in the physics; see `alive`
        self.world.apply_force_at_point(self.picked.env_id, self.picked.index, force, grab)
        self.force = (float(force[0]), float(force[1]))
        self._held = self._current().copy()

    def anchor_world(self) -> tuple[float, float]:
        """The grab point on the body now, in the display frame."""
        grab = self._grab()[0] + self._origin
        return (float(grab[0]), float(grab[1]))

    def remove(self) -> None:
        """Release: clear the body's held force (idempotent).

        When the drag is no longer `alive` (the copy was reset, or someone else set the
        body's force) the force is left as it is.
        """
        if self._removed:
            return
        alive = self.alive
        self._removed = True
        self.force = (0.0, 0.0)
        if not alive or self._held is None:
            return
        env = self.picked.env_id
        row = np.asarray(self.world.external_forces[env : env + 1], dtype=np.float64).copy()
        row[0, self.picked.index] = 0.0
        self.world.set_body_forces(row[:, :, 0:2], row[:, :, 2], env_ids=[env])
