"""Antialiased edges follow the exact (supersampled) coverage, in both backends.

A thin rectangle rotated by a few degrees is what showed the bug: pygame.draw.polygon
truncates its vertices to whole pixels, so the "pygame" backend's fills came out up to a
pixel off and hid the antialiased ramp behind hard one-pixel steps.
"""

import math

import numpy as np
import pytest
from render_helpers import BACKENDS, make_world, prop

import kelab as ke

W, H = 200, 60
WHITE, BLACK = (255, 255, 255), (0, 0, 0)


def _rect(cx: float, cy: float, length: float, thick: float, deg: float) -> np.ndarray:
    """Corners in pixels (+Y down) of a rectangle rotated by ``deg``."""
    a = math.radians(deg)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [0.5 * length, 0.5 * thick]
    return half @ rot.T + [cx, cy]


def _exact_coverage(poly: np.ndarray, ss: int = 16) -> np.ndarray:
    """Fraction of each pixel inside a convex polygon, by ss x ss supersampling."""
    ys, xs = np.mgrid[0 : H * ss, 0 : W * ss]
    px, py = (xs + 0.5) / ss, (ys + 0.5) / ss
    nxt = np.roll(poly, -1, axis=0)
    sign = np.sign(np.sum(poly[:, 0] * nxt[:, 1] - nxt[:, 0] * poly[:, 1]))
    inside = np.ones(px.shape, dtype=bool)
    for (x0, y0), (x1, y1) in zip(poly, nxt, strict=True):
        inside &= sign * ((x1 - x0) * (py - y0) - (y1 - y0) * (px - x0)) >= 0
    return inside.reshape(H, ss, W, ss).mean(axis=(1, 3))


def _frame(backend: str, draw, antialias: bool = True) -> np.ndarray:
    with ke.create_renderer(backend, size=(W, H), headless=True, antialias=antialias) as r:
        r.camera.zoom = 1.0  # one metre per pixel: world (x, y) = pixel (x, H - y)
        r.camera.center = (W / 2, H / 2)
        r.begin_frame()
        r.canvas.clear(BLACK)
        draw(r.canvas)
        r.end_frame()
        return r.read_rgb_pixels()[..., 0] / 255.0


def _away_from_corners(poly: np.ndarray, margin: float = 3.0) -> np.ndarray:
    ys, xs = np.mgrid[0:H, 0:W] + 0.5
    far = np.ones((H, W), dtype=bool)
    for cx, cy in poly:
        far &= np.hypot(xs - cx, ys - cy) > margin
    return far


def _check_edges(img: np.ndarray, exact: np.ndarray, poly: np.ndarray, tol: float) -> None:
    edge = (exact > 0.0) & (exact < 1.0) & _away_from_corners(poly)
    err = np.abs(img - exact)
    assert err[edge].max() <= tol, f"edge error {err[edge].max():.3f} > {tol}"
    assert err[edge].mean() <= tol / 3
    # a ramp, not steps: as many partly covered pixels as the exact picture has
    ramp = (img > 0.05) & (img < 0.95) & edge
    assert ramp.sum() >= 0.8 * ((exact > 0.05) & (exact < 0.95) & edge).sum()
    assert np.all(img[exact == 1.0] == 1.0)  # interiors keep the exact colour
    assert abs(img.sum() / exact.sum() - 1.0) < 0.03  # the same ink


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("deg", "tol"), [(4.0, 0.06), (86.0, 0.06), (30.0, 0.2)])
def test_thin_rotated_rectangle_edges_follow_exact_coverage(backend, deg, tol):
    poly = _rect(100.3, 30.2, 160.0 if deg != 30.0 else 60.0, 6.0, deg)
    img = _frame(backend, lambda c: c.polygon([(x, H - y) for x, y in poly], WHITE))
    _check_edges(img, _exact_coverage(poly), poly, tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_thin_rotated_body_of_a_world_is_smooth(backend):
    # the compiled draw_world path: CartPole's pole, a 6-pixel-wide box tilted by 4 degrees
    world = make_world(
        [(prop(ke.Box(160.0, 6.0), x=100.3, y=H - 30.2, angle=math.radians(-4.0)), "/Pole")]
    )
    img = _frame(backend, lambda c: c.draw_world(world))
    poly = _rect(100.3, 30.2, 160.0, 6.0, 4.0)
    _check_edges(img, _exact_coverage(poly), poly, 0.06)


@pytest.mark.parametrize("deg", [0.0, 4.0, 30.0, 45.0])
def test_hard_edges_cover_the_pixels_whose_centres_are_inside_in_both_backends(deg):
    poly = _rect(100.3, 30.2, 100.0, 6.0, deg)
    images = [
        _frame(b, lambda c: c.polygon([(x, H - y) for x, y in poly], WHITE), antialias=False)
        for b in BACKENDS
    ]
    centres = _exact_coverage(poly, ss=1)  # one sample per pixel, at its centre
    for backend, img in zip(BACKENDS, images, strict=True):
        assert set(np.unique(img)) <= {0.0, 1.0}
        # pygame's spans are exact; gl may differ by float32 rounding on the GPU side
        assert (img != centres).sum() <= (0 if backend == "pygame" else 2), backend
