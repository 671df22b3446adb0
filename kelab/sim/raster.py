"""Batched rasterisation: one 2D shape drawn into many small images at once (numpy only).

A camera sensor (:mod:`kelab.sim.camera`) draws every copy's view in one call per shape:
for each shape it takes, per copy, the affine map from the image's pixel grid to the
shape's own frame, evaluates the shape's signed distance on a window of pixels around the
shape (the same window size for every copy, placed per copy), turns it into coverage
(``clip(0.5 - distance_px, 0, 1)``: anti-aliased edges, and shapes thinner than a pixel
still show at half strength or more) and blends the shape's colour into those pixels.
No loop over copies, no per-copy frame: a shape costs a few array operations over
``(num_envs, window_h, window_w)``.

Distances are in pixels. A convex polygon's is the largest of its edges' signed distances
(exact inside and along the edges, a little short outside corners); a circle's and a
capsule's are exact. Everything is float32/float64 arithmetic in a fixed order plus
``sqrt`` (correctly rounded), so the same numpy gives the same bits on every run; the
per-copy ``cos``/``sin`` are numpy's float64 ones, which may differ in the last bit
between CPUs whose SIMD paths differ (docs/sensors.md, "Cameras").

Example:
    >>> import numpy as np
    >>> disc = Primitive.circle(body=0, center=(0.0, 0.0), radius=1.0, color=(255,))
    >>> images = np.zeros((2, 8, 8, 1), np.uint8)
    >>> cam = np.zeros((2, 3))                       # camera at the origin, upright
    >>> bodies = np.array([[[0.0, 0.0, 0.0]], [[2.0, 0.0, 0.0]]])  # copy 1: 2 m right
    >>> draw(images, disc, cam, bodies, zoom=2.0)
    >>> int(images[0].max()), int(images[1, 4, 7, 0]) > 0, int(images[1, 4, 0, 0])
    (255, True, 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Primitive", "draw", "luma"]


def luma(color: tuple[int, int, int]) -> int:
    """A colour's grayscale value: ITU-R BT.601 luma, rounded (integers only).

    Example:
        >>> luma((255, 255, 255)), luma((255, 0, 0))
        (255, 76)
    """
    r, g, b = color
    return (299 * r + 587 * g + 114 * b + 500) // 1000


@dataclass(frozen=True)
class Primitive:
    """One shape of a body, in the body's frame (metres), ready to draw.

    Attributes:
        kind: ``"polygon"``, ``"circle"`` or ``"capsule"``.
        body: Column of its body in the poses handed to :func:`draw`.
        normals: A polygon's outward unit edge normals ``(E, 2)``.
        offsets: A polygon's edge offsets ``(E,)``: inside where ``normal . p <= offset``.
        points: A polygon's vertices ``(V, 2)``; a circle's centre ``(1, 2)``; a capsule's
            two ends ``(2, 2)``.
        mitres: Per polygon vertex, where it moves when every edge moves out by 1
            ``(V, 2)`` (what a pixel of coverage past the edges reaches); zeros otherwise.
        radius: A circle's or capsule's radius (a capsule's may be 0: a line).
        color: The colour drawn, one value per channel (0..255).
    """

    kind: str
    body: int
    normals: np.ndarray
    offsets: np.ndarray
    points: np.ndarray
    mitres: np.ndarray
    radius: float
    color: tuple[int, ...]

    @staticmethod
    def polygon(body: int, vertices: np.ndarray, color: tuple[int, ...]) -> Primitive:
        """A convex polygon from its counter-clockwise vertices ``(V, 2)`` in the body frame."""
        v = np.asarray(vertices, dtype=np.float64)
        edge = np.roll(v, -1, axis=0) - v
        length = np.hypot(edge[:, 0], edge[:, 1])
        normals = np.stack([edge[:, 1], -edge[:, 0]], axis=1) / length[:, None]
        offsets = np.einsum("ij,ij->i", normals, v)
        before = np.roll(normals, 1, axis=0)  # the edge ending at each vertex
        mitres = (before + normals) / (1.0 + np.einsum("ij,ij->i", before, normals))[:, None]
        return Primitive("polygon", body, normals, offsets, v, mitres, 0.0, color)

    @staticmethod
    def circle(
        body: int, center: tuple[float, float], radius: float, color: tuple[int, ...]
    ) -> Primitive:
        """A solid circle of ``radius`` centred on ``center`` (body frame)."""
        c = np.asarray(center, dtype=np.float64)[None]
        return Primitive(
            "circle", body, np.zeros((0, 2)), np.zeros(0), c, np.zeros_like(c), float(radius), color
        )

    @staticmethod
    def capsule(
        body: int, a: np.ndarray, b: np.ndarray, radius: float, color: tuple[int, ...]
    ) -> Primitive:
        """A segment ``a -> b`` thickened by ``radius`` (round ends; 0: a thin line)."""
        ends = np.stack([np.asarray(a, np.float64), np.asarray(b, np.float64)])
        none = np.zeros((0, 2))
        return Primitive(
            "capsule", body, none, np.zeros(0), ends, np.zeros_like(ends), float(radius), color
        )


_REACH = 0.51
"""Pixels past a shape's edge its coverage reaches (``0.5``; a hair more for rounding)."""


def _window(lo: np.ndarray, hi: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """Per copy, the first pixel of a window covering pixel centres in ``[lo, hi]``; its size.

    Only the part inside the image counts. The size is the largest any copy needs (0 when
    the shape is outside every copy's image); each window is moved inside the image, where
    it still covers the part of ``[lo, hi]`` the image holds.
    """
    first = np.clip(np.ceil(lo), 0, size)
    last = np.clip(np.floor(hi), -1, size - 1)
    need = last - first + 1.0
    span = int(max(0.0, float(need.max()))) if need.size else 0
    start = np.clip(first, 0, size - span).astype(np.int64)
    return start, span


def _affine(
    k: np.ndarray, dj: np.ndarray, di: np.ndarray, jj: np.ndarray, ii: np.ndarray
) -> np.ndarray:
    """``k + dj * j + di * i`` over the windows, ``(n, h, w)`` float32.

    ``k``, ``dj``, ``di``: per copy ``(n,)``; ``jj``: the windows' columns ``(n, w)``;
    ``ii``: their rows ``(n, h)``.
    """
    along = (k[:, None] + dj[:, None] * jj).astype(np.float32)  # (n, w)
    down = (di[:, None] * ii).astype(np.float32)  # (n, h)
    return along[:, None, :] + down[:, :, None]


def draw(
    images: np.ndarray,
    shape: Primitive,
    camera: np.ndarray,
    bodies: np.ndarray,
    zoom: float,
) -> None:
    """Blend ``shape`` into every copy's image, in place.

    Args:
        images: ``(n, H, W, C)`` uint8, row 0 at the top; ``C`` is ``len(shape.color)``.
        shape: What to draw.
        camera: ``(n, 3)`` each copy's camera pose (x, y, angle): the image centre and
            the direction of its +x (right) axis, in the frame of ``bodies``.
        bodies: ``(n, B, 3)`` body poses (x, y, angle); ``shape.body`` picks the column.
        zoom: Pixels per metre.
    """
    n, height, width, channels = images.shape
    if n == 0:
        return
    pose = bodies[:, shape.body, :]
    rel = pose[:, 2] - camera[:, 2]  # the body's angle in the camera's frame
    cr, sr = np.cos(rel), np.sin(rel)
    cp, sp = np.cos(camera[:, 2]), np.sin(camera[:, 2])
    dx, dy = pose[:, 0] - camera[:, 0], pose[:, 1] - camera[:, 1]
    bu = zoom * (cp * dx + sp * dy)  # the body's origin, camera pixels (x right, y up)
    bv = zoom * (cp * dy - sp * dx)
    # the shape's outline (grown by the coverage's reach), image pixels, for its windows
    px = shape.points[:, 0] * zoom + _REACH * shape.mitres[:, 0]
    py = shape.points[:, 1] * zoom + _REACH * shape.mitres[:, 1]
    cols = bu[:, None] + cr[:, None] * px - sr[:, None] * py + (0.5 * width - 0.5)
    rows = (0.5 * height - 0.5) - (bv[:, None] + sr[:, None] * px + cr[:, None] * py)
    pad = shape.radius * zoom + _REACH
    c0, w = _window(cols.min(axis=1) - pad, cols.max(axis=1) + pad, width)
    r0, h = _window(rows.min(axis=1) - pad, rows.max(axis=1) + pad, height)
    if w == 0 or h == 0:  # outside every copy's image
        return
    # every copy's window: its pixels' columns (n, w) and rows (n, h)
    jj = (c0[:, None] + np.arange(w, dtype=np.int64)).astype(np.float64)
    ii = (r0[:, None] + np.arange(h, dtype=np.int64)).astype(np.float64)
    # pixel (row i, column j) in the body's frame, pixels: q0 + j * (cr, -sr) + i * (-sr, -cr),
    # from the image's corner (not the window's): a pixel's value never depends on where
    # the window is, so a copy draws the same bits whatever the other copies are
    u0 = 0.5 - 0.5 * width - bu
    v0 = 0.5 * height - 0.5 - bv
    qx0 = cr * u0 + sr * v0
    qy0 = cr * v0 - sr * u0
    distance = _distance(shape, zoom, qx0, qy0, cr, sr, jj, ii)
    cover = np.clip(np.float32(0.5) - distance, np.float32(0.0), np.float32(1.0), out=distance)
    color = np.asarray(shape.color, dtype=np.float32)
    if h == height and w == width:  # the windows are the images: no gathering
        current = images.astype(np.float32)
        current += cover[..., None] * (color - current)
        current += np.float32(0.5)
        images[...] = current  # the same rounding as the windows' astype below
        return
    index = (
        (np.arange(n, dtype=np.int64)[:, None] * height + r0[:, None])[:, :, None] * width
        + (c0[:, None] + np.arange(h, dtype=np.int64)[None, :] * width)[:, :, None]
        + np.arange(w, dtype=np.int64)[None, None, :]
    )
    flat = images.reshape(n * height * width, channels)
    current = flat[index].astype(np.float32)  # (n, h, w, C)
    current += cover[..., None] * (color - current)
    current += np.float32(0.5)
    flat[index] = current.astype(np.uint8)


def _distance(
    shape: Primitive,
    zoom: float,
    qx0: np.ndarray,
    qy0: np.ndarray,
    cr: np.ndarray,
    sr: np.ndarray,
    jj: np.ndarray,
    ii: np.ndarray,
) -> np.ndarray:
    """The shape's signed distance in pixels over every copy's window, ``(n, h, w)`` float32."""
    if shape.kind == "polygon":
        out = None
        for (nx, ny), offset in zip(shape.normals, shape.offsets, strict=True):
            k = nx * qx0 + ny * qy0 - offset * zoom
            edge = _affine(k, nx * cr - ny * sr, -nx * sr - ny * cr, jj, ii)
            out = edge if out is None else np.maximum(out, edge, out=out)
        assert out is not None
        return out
    if shape.kind == "circle":
        cx, cy = shape.points[0] * zoom
        dx = _affine(qx0 - cx, cr, -sr, jj, ii)
        dy = _affine(qy0 - cy, -sr, -cr, jj, ii)
        return np.sqrt(dx * dx + dy * dy) - np.float32(shape.radius * zoom)
    (ax, ay), (bx, by) = shape.points * zoom
    ex, ey = bx - ax, by - ay
    px = _affine(qx0 - ax, cr, -sr, jj, ii)
    py = _affine(qy0 - ay, -sr, -cr, jj, ii)
    length2 = ex * ex + ey * ey
    if length2 > 0.0:
        t = (px * np.float32(ex) + py * np.float32(ey)) * np.float32(1.0 / length2)
        np.clip(t, np.float32(0.0), np.float32(1.0), out=t)
        px -= t * np.float32(ex)
        py -= t * np.float32(ey)
    return np.sqrt(px * px + py * py) - np.float32(shape.radius * zoom)
