"""Batched geometry: convex widths, feathered (antialiased) polygons and rings."""

import numpy as np
import pytest

from kelab.render.geometry import (
    circle_polygons,
    convex_widths,
    feathered_circles,
    feathered_lines,
    feathered_polygons,
    feathered_rings,
    inset_polygons,
    thick_line_quads,
)


def _rect(x0, y0, x1, y1):
    return np.array([[[x0, y0], [x1, y0], [x1, y1], [x0, y1]]], dtype=float)


def test_convex_widths():
    polys = np.concatenate([_rect(0, 0, 10, 4), _rect(0, 0, 3, 3)])
    np.testing.assert_allclose(convex_widths(polys), [4.0, 3.0])
    disc = circle_polygons(np.zeros((1, 2)), np.array([5.0]))
    assert 9.8 < convex_widths(disc)[0] < 10.2
    assert convex_widths(np.zeros((1, 4, 2)))[0] == 0.0  # a point


def test_feathered_rectangle_core_and_fringe():
    tris, alpha = feathered_polygons(_rect(0, 0, 10, 4))
    assert tris.shape == (2 * 3 + 4 * 6, 2) and alpha.shape == (30,)
    core = tris[:6]
    assert np.all(alpha[:6] == 1.0)  # opaque core, inset by half a pixel
    assert core[:, 0].min() == 0.5 and core[:, 0].max() == 9.5
    fringe, fa = tris[6:], alpha[6:]
    outer = fringe[fa == 0.0]  # the outline pushed out by half a pixel, transparent
    assert outer[:, 0].min() == -0.5 and outer[:, 1].max() == 4.5
    assert set(np.unique(fa)) == {0.0, 1.0}


def test_thin_shapes_fade_instead_of_growing():
    # a 0.5 px thin bar: the core collapses to the middle line with a lower peak that
    # keeps its ink (integral of the tent = true area)
    tris, alpha = feathered_polygons(_rect(0, 0, 20, 0.5))
    peak = alpha.max()
    assert 0.5 < peak < 1.0
    np.testing.assert_allclose(peak * (0.5 + 1.0) / 2.0, 0.5)
    core = tris[:6]
    np.testing.assert_allclose(core[:, 1], 0.25)


def test_inset_accepts_per_polygon_distances_and_grows_without_clamp():
    polys = np.concatenate([_rect(0, 0, 10, 10), _rect(0, 0, 4, 4)])
    inner = inset_polygons(polys, np.array([1.0, 0.5]))
    assert inner[0, :, 0].min() == 1.0 and inner[1, :, 0].min() == 0.5
    tiny = _rect(0, 0, 0.2, 0.2)
    grown = inset_polygons(tiny, -0.5, clamp=False)
    np.testing.assert_allclose(grown[0, :, 0].min(), -0.5)


def test_feathered_ring_alphas():
    tris, alpha = feathered_rings(np.array([[0.0, 0.0]]), np.array([10.0]), 2.0)
    r = np.hypot(tris[:, 0], tris[:, 1])
    assert alpha.min() == 0.0 and alpha.max() == 1.0
    assert r[alpha == 0.0].max() > 10.4 and r[alpha == 0.0].min() < 7.6  # both rims fade
    opaque = r[alpha == 1.0]
    assert opaque.min() > 8.4 and opaque.max() < 9.7  # 9.5 (and 8.5), area-preserving n-gon


@pytest.mark.parametrize("radii", [[0.5, 0.8], [3.0, 40.0], [120.0]])
def test_feathered_circles_equal_the_feathered_tessellation(radii) -> None:
    r = np.array(radii)
    centers = np.stack([np.linspace(10.0, 300.0, r.size), np.full(r.size, 55.5)], axis=1)
    tris, alpha = feathered_circles(centers, r)
    want_tris, want_alpha = feathered_polygons(circle_polygons(centers, r), 2.0 * r)
    np.testing.assert_allclose(tris, want_tris, atol=1e-9)
    np.testing.assert_allclose(alpha, want_alpha, atol=1e-12)


@pytest.mark.parametrize("radii", [[0.5, 0.8], [3.0, 40.0]])
def test_inset_circle_polygons_equal_the_general_inset(radii) -> None:
    r = np.array(radii)
    centers = np.stack([np.linspace(10.0, 300.0, r.size), np.full(r.size, 55.5)], axis=1)
    want = inset_polygons(circle_polygons(centers, r), 0.5)
    np.testing.assert_allclose(circle_polygons(centers, r, inset=0.5), want, atol=1e-9)


def test_feathered_lines_and_grown_quads_equal_the_general_insets() -> None:
    a = np.array([[10.0, 10.0], [50.0, 80.0]])
    b = np.array([[40.0, 60.0], [50.5, 80.2]])  # long; shorter than wide
    _, alpha = feathered_lines(np.array([[5.0, 5.0]]), np.array([[5.0, 5.0]]), 3.0)
    assert np.all(alpha == 0.0)  # an empty segment draws nothing
    for width in (3.0, 1.2):
        quads = thick_line_quads(a, b, width)
        widths = np.minimum(width, np.hypot(*(b - a).T))
        tris, alpha = feathered_lines(a, b, width)
        want_tris, want_alpha = feathered_polygons(quads, widths)
        np.testing.assert_allclose(tris, want_tris, atol=1e-9)
        np.testing.assert_allclose(alpha, want_alpha, atol=1e-12)
        grown = thick_line_quads(a, b, width, 0.7)
        np.testing.assert_allclose(grown, inset_polygons(quads, -0.7, clamp=False), atol=1e-9)


def test_span_outlines_fill_exactly_the_pixels_whose_centres_are_inside():
    import pygame

    from kelab.render.geometry import polygon_ring, span_outlines

    rng = np.random.default_rng(3)
    w, h = 48, 40
    polys = []
    for i in range(120):
        kind = i % 3
        if kind == 0:  # rotated rectangles, some slivers thinner than a pixel, some clipped
            length, thick, a = rng.uniform(1, 70), rng.uniform(0.2, 8), rng.uniform(0, np.pi)
            rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
            corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [length / 2, thick / 2]
            pts = corners @ rot.T + rng.uniform([-5, -5], [w + 5, h + 5])
        elif kind == 1:  # discs
            pts = circle_polygons(rng.uniform(0, w, (1, 2)), rng.uniform(0.3, 25, 1))[0]
        else:  # convex polygons of either winding
            t = np.sort(rng.uniform(0, 2 * np.pi, rng.integers(3, 8)))
            pts = np.stack([np.cos(t), np.sin(t)], 1) * rng.uniform(1, 25) + rng.uniform(0, w, 2)
            pts = pts[::-1] if i % 2 else pts
        polys.append(pts)
    starts = np.cumsum([0] + [len(p) for p in polys])
    flat = np.concatenate(polys)
    verts, bounds = span_outlines(flat[:, 0], flat[:, 1], polygon_ring(starts), (w, h))
    surf = pygame.Surface((w, h), 0, 24)
    ys, xs = np.mgrid[0:h, 0:w].astype(float)  # pixel centres at whole coordinates here
    for i, pts in enumerate(polys):
        surf.fill((0, 0, 0))
        outline = verts[bounds[i] : bounds[i + 1]].tolist()
        if outline:
            pygame.draw.polygon(surf, (255, 255, 255), outline + outline[-1:])
        filled = pygame.surfarray.array3d(surf)[..., 0].T > 0
        nxt = np.roll(pts, -1, axis=0)
        side = np.sign(np.sum(pts[:, 0] * nxt[:, 1] - nxt[:, 0] * pts[:, 1]))
        cross = [
            side * ((x1 - x0) * (ys - y0) - (y1 - y0) * (xs - x0))
            for (x0, y0), (x1, y1) in zip(pts, nxt, strict=True)
        ]
        inside = np.all([c > 1e-9 for c in cross], axis=0)
        on_or_in = np.all([c >= -1e-9 for c in cross], axis=0)
        assert np.all(filled[inside]), i  # every pixel whose centre is inside
        assert not np.any(filled & ~on_or_in), i  # and none whose centre is outside
