"""Batched numpy geometry shared by the render backends (pixel space, +Y down).

Everything here works on whole arrays of shapes at once; no per-vertex Python math.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "circle_segments",
    "circle_polygons",
    "fan_triangles",
    "inset_polygons",
    "ring_triangles",
    "thick_line_quads",
    "transform_points",
    "unit_circle",
    "wrap_angle",
]


def wrap_angle(angle: np.ndarray) -> np.ndarray:
    """Wrap angles to [-pi, pi).

    Args:
        angle: Angles in radians (any shape).

    Returns:
        The wrapped angles, same shape.
    """
    return (np.asarray(angle) + np.pi) % (2.0 * np.pi) - np.pi


def transform_points(local: np.ndarray, owner: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """Place body-frame points in the world for every environment copy at once.

    Args:
        local: ``(M, 2)`` points, each in the frame of its owning body.
        owner: ``(M,)`` int index of each point's body (a column of ``poses``).
        poses: ``(E, B, 3)`` body poses (x, y, angle) in the world.

    Returns:
        ``(E, M, 2)`` world points.
    """
    p = poses[:, owner, :]  # (E, M, 3)
    c, s = np.cos(p[..., 2]), np.sin(p[..., 2])
    lx, ly = local[:, 0], local[:, 1]
    out = np.empty(p.shape[:2] + (2,), dtype=np.float64)
    out[..., 0] = p[..., 0] + c * lx - s * ly
    out[..., 1] = p[..., 1] + s * lx + c * ly
    return out


def circle_segments(radius_px: float) -> int:
    """Number of polygon sides that keeps a tessellated circle within 0.2 px of round.

    Args:
        radius_px: Radius in pixels.

    Returns:
        A side count between 12 and 256.
    """
    if radius_px <= 0.2:
        return 12
    n = math.pi / math.acos(max(-1.0, 1.0 - 0.2 / radius_px))
    return int(min(256, max(12, math.ceil(n))))


_UNIT_CACHE: dict[int, np.ndarray] = {}


def unit_circle(n: int) -> np.ndarray:
    """Vertices of an ``n``-gon with the area of the unit circle (cached, do not modify).

    Args:
        n: Number of sides.

    Returns:
        ``(n, 2)`` vertices, counter-clockwise from angle 0; the edges straddle the
        unit circle so that filled tessellations keep the disc's area.
    """
    u = _UNIT_CACHE.get(n)
    if u is None:
        t = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
        # scale so the polygon's area equals the circle's (edges straddle the true circle)
        k = math.sqrt(2.0 * math.pi / (n * math.sin(2.0 * math.pi / n)))
        u = np.stack([np.cos(t), np.sin(t)], axis=1) * k
        _UNIT_CACHE[n] = u
    return u


def circle_polygons(centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Tessellate circles into convex polygons.

    Args:
        centers: ``(N, 2)`` centres in pixels.
        radii: ``(N,)`` radii in pixels.

    Returns:
        ``(N, n, 2)`` polygon vertices, n chosen for the largest radius.
    """
    n = circle_segments(float(np.max(radii)) if len(radii) else 1.0)
    u = unit_circle(n)
    return centers[:, None, :] + radii[:, None, None] * u[None, :, :]


def fan_triangles(polys: np.ndarray) -> np.ndarray:
    """Triangulate convex polygons as fans from their first vertex.

    Args:
        polys: ``(N, k, 2)`` convex polygons, k >= 3.

    Returns:
        ``(N * (k - 2) * 3, 2)`` triangle vertices.
    """
    n, k = polys.shape[0], polys.shape[1]
    i = np.arange(1, k - 1)
    idx = np.stack([np.zeros_like(i), i, i + 1], axis=1).reshape(-1)
    return polys[:, idx, :].reshape(n * (k - 2) * 3, 2)


def thick_line_quads(a: np.ndarray, b: np.ndarray, width: float) -> np.ndarray:
    """Rectangles covering thick line segments (butt ends).

    Args:
        a: ``(N, 2)`` start points in pixels.
        b: ``(N, 2)`` end points in pixels.
        width: Line width in pixels.

    Returns:
        ``(N, 4, 2)`` quads (convex, consistent winding).
    """
    d = b - a
    length = np.hypot(d[:, 0], d[:, 1])
    safe = np.where(length > 1e-12, length, 1.0)
    ux = np.where(length > 1e-12, d[:, 0] / safe, 1.0)
    uy = np.where(length > 1e-12, d[:, 1] / safe, 0.0)
    nrm = np.stack([-uy, ux], axis=1) * (0.5 * width)
    return np.stack([a + nrm, b + nrm, b - nrm, a - nrm], axis=1)


def ring_triangles(centers: np.ndarray, r_outer: np.ndarray, width: float) -> np.ndarray:
    """Triangles of circle outlines (annuli from ``r_outer - width`` to ``r_outer``).

    Args:
        centers: ``(N, 2)`` centres in pixels.
        r_outer: ``(N,)`` outer radii in pixels.
        width: Ring width in pixels.

    Returns:
        ``(N * n * 6, 2)`` triangle vertices.
    """
    n = circle_segments(float(np.max(r_outer)) if len(r_outer) else 1.0)
    u = unit_circle(n)
    r_in = np.maximum(r_outer - width, 0.0)
    outer = centers[:, None, :] + r_outer[:, None, None] * u[None]
    inner = centers[:, None, :] + r_in[:, None, None] * u[None]
    o1 = np.roll(outer, -1, axis=1)
    i1 = np.roll(inner, -1, axis=1)
    tris = np.stack([outer, o1, i1, outer, i1, inner], axis=2)  # (N, n, 6, 2)
    return tris.reshape(-1, 2)


_ROLL_CACHE: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def inset_polygons(polys: np.ndarray, distance: float) -> np.ndarray:
    """Move every edge of convex polygons inwards by ``distance`` (mitred corners).

    Works for either winding. Corners move at most as far as the polygon's centroid, so
    thin shapes collapse towards their middle instead of turning inside out.

    Args:
        polys: ``(N, k, 2)`` convex polygons.
        distance: Inset in the polygons' units.

    Returns:
        ``(N, k, 2)`` inset polygons.
    """
    k = polys.shape[1]
    idx = _ROLL_CACHE.get(k)
    if idx is None:
        r = np.arange(k)
        idx = _ROLL_CACHE[k] = ((r + 1) % k, (r - 1) % k)
    nxt, prv = idx
    x, y = polys[..., 0], polys[..., 1]
    ex, ey = x[:, nxt] - x, y[:, nxt] - y  # edge i: vertex i -> i + 1
    length = np.sqrt(ex * ex + ey * ey)
    length[length < 1e-12] = 1.0
    area2 = (x * y[:, nxt] - x[:, nxt] * y).sum(axis=1, keepdims=True)
    scale = np.where(area2 >= 0.0, 1.0, -1.0) / length  # inward normal = scale * (-ey, ex)
    nx, ny = -ey * scale, ex * scale
    px, py = nx[:, prv], ny[:, prv]  # edge i - 1 ends at vertex i
    factor = distance / np.maximum(1.0 + px * nx + py * ny, 0.25)
    mx, my = (px + nx) * factor, (py + ny) * factor
    cx = x.mean(axis=1, keepdims=True) - x
    cy = y.mean(axis=1, keepdims=True) - y
    step2 = mx * mx + my * my
    limit = np.sqrt(np.minimum(1.0, (cx * cx + cy * cy) / np.maximum(step2, 1e-24)))
    out = np.empty_like(polys, dtype=np.float64)
    out[..., 0] = x + mx * limit
    out[..., 1] = y + my * limit
    return out
