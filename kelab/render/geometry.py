"""Batched numpy geometry shared by the render backends (pixel space, +Y down).

Everything here works on whole arrays of shapes at once; no per-vertex Python math.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "circle_segments",
    "feathered_circles",
    "feathered_lines",
    "circle_polygons",
    "convex_widths",
    "fan_triangles",
    "feathered_polygons",
    "feathered_rings",
    "inset_polygons",
    "PolygonRing",
    "polygon_ring",
    "ring_triangles",
    "span_outlines",
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


def circle_polygons(centers: np.ndarray, radii: np.ndarray, inset: float = 0.0) -> np.ndarray:
    """Tessellate circles into convex polygons.

    Args:
        centers: ``(N, 2)`` centres in pixels.
        radii: ``(N,)`` radii in pixels.
        inset: Move every edge in by this many pixels, corners stopping at the centre:
            ``inset_polygons(circle_polygons(centers, radii), inset)``, computed from
            the radii (a regular polygon's inset is the same polygon scaled).

    Returns:
        ``(N, n, 2)`` polygon vertices, n chosen for the largest radius.
    """
    n = circle_segments(float(np.max(radii)) if len(radii) else 1.0)
    u = unit_circle(n)
    if inset:
        scale = math.hypot(*u[0])  # circumradius per unit radius
        travel = inset / math.cos(math.pi / n)  # how far each corner moves
        radii = radii - np.minimum(travel, radii * scale) / scale
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


def thick_line_quads(
    a: np.ndarray, b: np.ndarray, width: float, grow: float | np.ndarray = 0.0
) -> np.ndarray:
    """Rectangles covering thick line segments (butt ends).

    Args:
        a: ``(N, 2)`` start points in pixels.
        b: ``(N, 2)`` end points in pixels.
        width: Line width in pixels.
        grow: Move every side out by this many pixels (negative: in), one for all or
            ``(N,)``: ``inset_polygons(thick_line_quads(a, b, width), -grow)``, which for
            a rectangle needs no general inset (and its corners never reach the centre
            while ``-grow`` is at most half the narrower side).

    Returns:
        ``(N, 4, 2)`` quads (convex, consistent winding).
    """
    d = b - a
    length = np.hypot(d[:, 0], d[:, 1])
    safe = np.where(length > 1e-12, length, 1.0)
    ux = np.where(length > 1e-12, d[:, 0] / safe, 1.0)
    uy = np.where(length > 1e-12, d[:, 1] / safe, 0.0)
    u = np.stack([ux, uy], axis=1)
    nrm = np.stack([-uy, ux], axis=1)
    if np.ndim(grow):
        g = np.asarray(grow, dtype=np.float64)[:, None]
        a, b, nrm = a - u * g, b + u * g, nrm * (0.5 * width + g)
    elif grow:
        a, b, nrm = a - u * grow, b + u * grow, nrm * (0.5 * width + grow)
    else:
        nrm = nrm * (0.5 * width)
    return np.stack([a + nrm, b + nrm, b - nrm, a - nrm], axis=1)


def feathered_lines(
    a: np.ndarray, b: np.ndarray, width: float, feather: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`feathered_polygons` of ``thick_line_quads(a, b, width)``, without the insets.

    Args:
        a: ``(N, 2)`` start points in pixels.
        b: ``(N, 2)`` end points in pixels.
        width: Line width in pixels.
        feather: Half the width of the ramp, in pixels.

    Returns:
        ``(tris, alpha)`` as :func:`feathered_polygons`.
    """
    widths = np.minimum(width, np.hypot(*(b - a).T))  # the rectangles' narrower sides
    inner = thick_line_quads(a, b, width, -np.minimum(feather, 0.5 * widths))
    outer = thick_line_quads(a, b, width, feather)
    return _feather_mesh(inner, outer, _coverage_peak(widths / (2.0 * feather)))


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


def inset_polygons(
    polys: np.ndarray, distance: float | np.ndarray, clamp: bool = True
) -> np.ndarray:
    """Move every edge of convex polygons inwards by ``distance`` (mitred corners).

    Works for either winding. With ``clamp``, corners move at most as far as the
    polygon's centroid, so thin shapes collapse towards their middle instead of turning
    inside out. A negative distance pushes the edges outwards. The vertices are treated
    as complex numbers (x + iy): half the numpy calls of separate x and y arrays, which
    is what an immediate-mode shape of a few vertices costs.

    Args:
        polys: ``(N, k, 2)`` convex polygons.
        distance: Inset in the polygons' units, one for all or ``(N,)`` per polygon.
        clamp: Stop corners at the centroid (for insets; pass False to grow).

    Returns:
        ``(N, k, 2)`` inset polygons.
    """
    k = polys.shape[1]
    idx = _ROLL_CACHE.get(k)
    if idx is None:
        r = np.arange(k)
        idx = _ROLL_CACHE[k] = ((r + 1) % k, (r - 1) % k)
    nxt, prv = idx
    z = np.ascontiguousarray(polys, dtype=np.float64).view(np.complex128)[..., 0]
    zn = z[:, nxt]
    e = zn - z  # edge i: vertex i -> i + 1
    length = np.abs(e)
    length[length < 1e-12] = 1.0
    area2 = (z.conj() * zn).imag.sum(axis=1, keepdims=True)  # twice the signed area
    n = e * (np.where(area2 >= 0.0, 1j, -1j) / length)  # unit inward normal of each edge
    p = n[:, prv]  # edge i - 1 ends at vertex i
    dist = np.asarray(distance, dtype=np.float64)
    if dist.ndim:
        dist = dist[:, None]
    # the mitre: along p + n, long enough that both edges move by dist
    m = (p + n) * (dist / np.maximum(1.0 + (p.conj() * n).real, 0.25))
    if clamp:
        to_centroid = np.abs(np.add.reduce(z, axis=1, keepdims=True) / k - z)
        m *= np.minimum(1.0, to_centroid / np.maximum(np.abs(m), 1e-12))
    return (z + m)[..., None].view(np.float64)


class PolygonRing(NamedTuple):
    """How the vertices of polygons stored one after another link up (for :func:`span_outlines`)."""

    starts: np.ndarray  # (N + 1,) polygon p is vertices starts[p]:starts[p + 1]
    pair: np.ndarray  # (2, P) each vertex and the next vertex of its polygon (its edge)
    owner: np.ndarray  # (P,) each vertex's polygon
    last: np.ndarray  # (N,) each polygon's last vertex


def polygon_ring(starts: np.ndarray) -> PolygonRing:
    """The :class:`PolygonRing` of polygons stored one after another.

    Args:
        starts: ``(N + 1,)`` int: polygon ``p`` is vertices ``starts[p]:starts[p + 1]``
            (at least 2 each).

    Returns:
        The links, to pass to :func:`span_outlines` for any vertices of that layout.
    """
    starts = np.asarray(starts, dtype=np.intp)
    count = int(starts[-1]) if len(starts) else 0
    last = starts[1:] - 1
    nxt = np.arange(1, count + 1)
    nxt[last] = starts[:-1]
    owner = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    return PolygonRing(starts, np.stack((np.arange(count), nxt)), owner, last)


def span_outlines(
    x: np.ndarray, y: np.ndarray, ring: PolygonRing, size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Whole-pixel outlines that cover exactly the pixels whose centres are inside polygons.

    Pixel ``(i, j)`` has its centre at ``(i, j)`` here (the canvas's pixel space shifted
    by -0.5). A rasteriser that takes whole-pixel vertices and fills each row between
    its two crossings, both ends included (``pygame.draw.polygon``, which truncates
    sub-pixel vertices, so a polygon handed to it directly comes out up to a pixel off
    on each side), fills exactly those pixels from these outlines: each convex polygon
    becomes the staircase of its rows' spans ``[ceil(x_left), floor(x_right)]`` (one
    vertex per row and side, collinear steps merged). A row with no pixel centre inside
    (the tips of a shape, thin slanted shapes) gets both its ends at ``x = width``, off
    the frame, so it fills nothing there and the rows around it stay exact.

    All polygons at once: each edge yields its crossings of the pixel rows (half-open
    in y, so each side of a convex polygon crosses each of its rows once) in the
    polygon's cyclic order, which is already the staircase's order; the other side's
    crossing of the same row is found by its position in that order.

    Args:
        x: ``(P,)`` vertex x of convex polygons, one polygon after another (either winding).
        y: ``(P,)`` vertex y.
        ring: :func:`polygon_ring` of the layout (at least 2 vertices per polygon).
        size: ``(width, height)`` of the target: rows outside it are left out and x is
            clipped to ``[-1, width]``.

    Returns:
        ``(verts, bounds)``: ``(V, 2)`` int outline vertices; polygon ``p``'s outline is
        ``verts[bounds[p]:bounds[p + 1]]`` (empty when none of its rows is in the frame,
        2 vertices for a single row).
    """
    w, h = size
    n = len(ring.starts) - 1
    if n <= 0 or x.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.intp), np.zeros(max(n, 0) + 1, dtype=np.intp)
    ex, ey = x[ring.pair], y[ring.pair]  # (2, P): each edge's two ends
    r = ey.clip(0.0, h)
    np.ceil(r, out=r)  # edge e crosses the rows from ceil(y0) to ceil(y1), half-open
    d = r[1] - r[0]
    cnt = np.abs(d).astype(np.intp)
    cum = cnt.cumsum()
    total = int(cum[-1])
    ends = cum[ring.last]  # polygon p's crossings: ends[p - 1] <= g < ends[p]
    c0 = ends - np.add.reduceat(cnt, ring.starts[:-1])
    owner = ring.owner
    # Crossing g of edge e: row = base + step g, x = x_at + slope_g g (an edge going up
    # crosses its rows bottom first). In a polygon's cyclic order one side descends its
    # rows and the other climbs them, so the other side's crossing of the same row is
    # c0 + (turn - g) mod (the polygon's crossings), turn = 2 g0 - c0 - step (1 + 2 (row0
    # - top row)), g0 and row0 the edge's first crossing and its row.
    e = np.empty((7, x.shape[0]))
    step, base, x_at, slope_g, turn, count, start = e
    np.sign(d, out=step)
    g0 = cum - cnt
    row0 = r[0] + 0.5 * (step - 1.0)
    np.subtract(row0, step * g0, out=base)
    dy = ey[1] - ey[0]
    dy[cnt == 0] = 1.0  # (no crossings: any slope)
    slope = (ex[1] - ex[0]) / dy
    np.multiply(step, slope, out=slope_g)
    np.subtract(ex[0] + (row0 - ey[0]) * slope, slope_g * g0, out=x_at)
    top = np.minimum.reduceat(np.minimum(r[0], r[1]), ring.starts[:-1])
    start[:] = c0[owner]
    np.subtract(2 * g0 - start, step * (1.0 + 2.0 * (row0 - top[owner])), out=turn)
    count[:] = (ends - c0)[owner]
    step, base, x_at, slope_g, turn, count, start = e.repeat(cnt, axis=1)
    g = np.arange(total, dtype=np.float64)
    row = base + step * g
    xc = x_at + slope_g * g
    other = (turn - g) % count
    other += start
    xp = xc[other.astype(np.intp)]
    left = np.minimum(xc, xp)
    right = np.maximum(xc, xp)
    np.ceil(left, out=left)
    np.floor(right, out=right)
    v = np.where(xc > xp, right, left)
    v[left > right] = w  # no pixel centre on this row: both ends off the frame
    v.clip(-1.0, w, out=v)
    bounds = np.append(c0, total)
    if total > 64:  # merge collinear steps (each polygon's first and last vertex stay)
        key = row * (4.0 * (w + 2)) + v  # one number per vertex: same steps, same deltas
        dk = key[1:] - key[:-1]
        keep = np.empty(total, dtype=bool)
        keep[0] = keep[-1] = True
        np.not_equal(dk[1:], dk[:-1], out=keep[1:-1])
        keep[np.minimum(c0, total - 1)] = True
        keep[np.maximum(ends - 1, 0)] = True
        idx = np.flatnonzero(keep)
        v, row = v[idx], row[idx]
        bounds = idx.searchsorted(bounds)
    verts = np.empty((v.shape[0], 2), dtype=np.intp)
    verts[:, 0] = v
    verts[:, 1] = row
    return verts, bounds


def convex_widths(polys: np.ndarray) -> np.ndarray:
    """Minimum widths of convex polygons (the narrowest gap between parallel supporting lines).

    For a convex polygon the minimum is reached with one edge flush, so this is, over the
    edges, the smallest of the largest vertex distances to the edge's line.

    Args:
        polys: ``(N, k, 2)`` convex polygons.

    Returns:
        ``(N,)`` widths in the polygons' units (0 for degenerate ones).
    """
    x, y = polys[..., 0], polys[..., 1]
    nxt = (np.arange(polys.shape[1]) + 1) % polys.shape[1]
    ex, ey = x[:, nxt] - x, y[:, nxt] - y
    length = np.hypot(ex, ey)
    ok = length > 1e-12
    dx = x[:, None, :] - x[:, :, None]  # (N, edge, vertex)
    dy = y[:, None, :] - y[:, :, None]
    dist = np.abs(ex[..., None] * dy - ey[..., None] * dx) / np.where(ok, length, 1.0)[..., None]
    far = np.where(ok, dist.max(axis=2), np.inf)
    width = far.min(axis=1)
    return np.where(np.isfinite(width), width, 0.0)


def _coverage_peak(width: np.ndarray) -> np.ndarray:
    # a shape thinner than a pixel: a tent of base width + 1 with the true integral
    return np.minimum(1.0, 2.0 * width / (width + 1.0))


def feathered_polygons(
    polys: np.ndarray, widths: np.ndarray | None = None, feather: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """Triangulate convex polygons with an analytic antialiased edge (a feathered fringe).

    Each polygon becomes an opaque core, inset by ``feather``, and a strip along its
    outline from the core (alpha 1) to the outline pushed out by ``feather`` (alpha 0).
    Blended over the background, a pixel whose centre is ``d`` pixels outside the true
    edge gets alpha ``0.5 - d`` (clamped): the box-filtered coverage of a straight edge.
    Pixels at least ``feather`` inside keep the exact colour. Polygons thinner than
    ``2 * feather`` collapse to their middle line with a lower peak alpha that keeps
    their total ink.

    Args:
        polys: ``(N, k, 2)`` convex polygons in pixels, either winding.
        widths: ``(N,)`` minimum widths if known (else :func:`convex_widths`).
        feather: Half the width of the ramp, in pixels.

    Returns:
        ``(tris, alpha)``: ``(N * (k - 2) * 3 + N * k * 6, 2)`` triangle vertices
        (cores first, then fringes) and their ``(M,)`` alphas in [0, 1].
    """
    if widths is None:
        widths = convex_widths(polys)
    widths = np.asarray(widths, dtype=np.float64)
    peak = _coverage_peak(widths / (2.0 * feather))
    inner = inset_polygons(polys, np.minimum(feather, 0.5 * widths))
    outer = inset_polygons(polys, -feather, clamp=False)
    return _feather_mesh(inner, outer, peak)


def feathered_circles(
    centers: np.ndarray, radii: np.ndarray, feather: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`feathered_polygons` of ``circle_polygons(centers, radii)`` (widths ``2 r``).

    The tessellation is a regular polygon, so its insets are the same polygon scaled
    about the centre: computed from the radii alone, without the general inset (what a
    single circle drawn per call mostly cost).

    Args:
        centers: ``(N, 2)`` centres in pixels.
        radii: ``(N,)`` radii in pixels.
        feather: Half the width of the ramp, in pixels.

    Returns:
        ``(tris, alpha)`` as :func:`feathered_polygons`.
    """
    radii = np.asarray(radii, dtype=np.float64)
    n = circle_segments(float(np.max(radii)) if len(radii) else 1.0)
    u = unit_circle(n)
    scale = math.hypot(*u[0])  # the polygon's circumradius per unit radius
    mitre = 1.0 / math.cos(math.pi / n)  # corner travel per unit of edge travel
    peak = _coverage_peak(radii / feather)
    # edges in by min(feather, r), corners stopping at the centre (the clamp of the inset)
    r_in = radii - np.minimum(np.minimum(feather, radii) * mitre, radii * scale) / scale
    r_out = radii + feather * mitre / scale
    c = centers[:, None, :]
    return _feather_mesh(c + r_in[:, None, None] * u, c + r_out[:, None, None] * u, peak)


_MESH_CACHE: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _feather_mesh(
    inner: np.ndarray, outer: np.ndarray, peak: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cores (fans of ``inner``, alpha ``peak``) then fringe strips out to ``outer`` (alpha 0).

    One gather from the ``2k`` vertices of each polygon through an index template cached
    per ``k`` (the cores' fans, then per edge ``in_i, in_i+1, out_i+1, in_i, out_i+1,
    out_i``), and one product for the alphas.
    """
    n, k = inner.shape[0], inner.shape[1]
    template = _MESH_CACHE.get(k)
    if template is None:
        i = np.arange(1, k - 1)
        fan = np.stack([np.zeros_like(i), i, i + 1], axis=1).reshape(-1)
        e = np.arange(k)
        e1 = (e + 1) % k
        strip = np.stack([e, e1, k + e1, e, k + e1, k + e], axis=1).reshape(-1)
        index = np.concatenate([fan, strip])
        template = _MESH_CACHE[k] = (index, (index < k).astype(np.float64))
    index, weight = template
    verts = np.concatenate([inner, outer], axis=1)  # (N, 2k, 2)
    tris = verts[:, index].reshape(-1, 2)
    alpha = (peak[:, None] * weight).reshape(-1)
    if n > 1:  # cores of every polygon first, then every fringe
        per = (k - 2) * 3
        order = np.concatenate(
            [
                (np.arange(n)[:, None] * index.size + np.arange(per)).reshape(-1),
                (np.arange(n)[:, None] * index.size + np.arange(per, index.size)).reshape(-1),
            ]
        )
        tris, alpha = tris[order], alpha[order]
    return tris, alpha


def feathered_rings(
    centers: np.ndarray, r_outer: np.ndarray, width: float, feather: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """Triangles of antialiased circle outlines (annuli), fringed on both rims.

    Args:
        centers: ``(N, 2)`` centres in pixels.
        r_outer: ``(N,)`` outer radii in pixels.
        width: Ring width in pixels.
        feather: Half the width of the ramps, in pixels.

    Returns:
        ``(tris, alpha)`` as :func:`feathered_polygons`.
    """
    n = circle_segments(float(np.max(r_outer)) + feather if len(r_outer) else 1.0)
    u = unit_circle(n)
    w = np.minimum(width, r_outer)
    peak = _coverage_peak(w / (2.0 * feather))
    mid = r_outer - 0.5 * w
    half_core = np.maximum(0.5 * w - feather, 0.0)
    half_out = 0.5 * w + feather
    radii = np.stack(
        [mid + half_out, mid + half_core, np.maximum(mid - half_core, 0.0), mid - half_out],
        axis=1,
    )  # (N, 4): outer rim (alpha 0), core out, core in, inner rim (alpha 0)
    radii = np.maximum(radii, 0.0)
    rings = centers[:, None, None, :] + radii[:, :, None, None] * u[None, None]  # (N, 4, n, 2)
    a = rings[:, :3]
    b = rings[:, 1:]
    a1 = np.roll(a, -1, axis=2)
    b1 = np.roll(b, -1, axis=2)
    tris = np.stack([a, a1, b1, a, b1, b], axis=3)  # (N, 3 bands, n, 6, 2)
    band_a = np.array([0.0, 1.0, 1.0])  # alpha (relative to the peak) at the band's rims
    band_b = np.array([1.0, 1.0, 0.0])
    per = np.stack([band_a, band_a, band_b, band_a, band_b, band_b], axis=1)  # (3 bands, 6)
    alpha = peak[:, None, None, None] * per[None, :, None, :]
    alpha = np.broadcast_to(alpha, tris.shape[:-1])
    return tris.reshape(-1, 2), alpha.reshape(-1)
