"""Scenery drawn in few calls: cached backdrop, text runs on one atlas, batched ticks."""

import numpy as np
import pytest
from render_helpers import BACKENDS

import kelab as ke
from kelab.render.scenery import PALETTE, draw_backdrop, draw_ground_marks
from kelab.render.text import SUPERSAMPLE, TextCache


@pytest.mark.parametrize("backend", BACKENDS)
def test_backdrop_copy_matches_clear_and_gradient(backend):
    with ke.create_renderer(backend, size=(120, 90), headless=True) as r:
        top, bottom = PALETTE["sky_top"], PALETTE["sky_bottom"]
        r.begin_frame()
        r.canvas.clear(bottom)
        r.canvas.vertical_gradient((0, 0, 120, 45), top, bottom)
        r.end_frame()
        drawn = r.read_rgb_pixels()
        for _ in range(2):  # made once, then copied
            r.begin_frame()
            r.canvas.circle((0, 0), 0.1, (255, 0, 0))  # painted over by the backdrop
            draw_backdrop(r.canvas)
            r.end_frame()
            assert np.array_equal(r.read_rgb_pixels(), drawn)
        assert tuple(drawn[-1, 0]) == bottom and tuple(drawn[0, 0]) != bottom


def test_text_coverage_is_the_4x_render_box_filtered():
    import pygame

    cache = TextCache()
    string, size = "ste ps/frame 12.5 m", 13
    big, _ = cache.font(size).render(string, (0, 0, 0))
    k = SUPERSAMPLE
    w, h = big.get_size()
    full = np.zeros((-(-h // k) * k, -(-w // k) * k))
    full[:h, :w] = pygame.surfarray.array_alpha(big).T
    expected = np.rint(full.reshape(full.shape[0] // k, k, -1, k).mean(axis=(1, 3)))
    assert np.array_equal(cache.coverage(string, size), expected.astype(np.uint8))
    surf = cache.surface(string, (10, 20, 30), size)
    assert np.array_equal(pygame.surfarray.array_alpha(surf).T, expected)


def test_gl_text_runs_are_one_draw_and_keep_painters_order():
    with ke.create_renderer("gl", size=(200, 100), headless=True) as r:
        r.camera.zoom, r.camera.center = 100.0, (1.0, 0.5)
        r.begin_frame()
        r.canvas.clear((255, 255, 255))
        before = r.canvas.draw_calls
        for i in range(8):
            r.canvas.text((4 + 20 * i, 4), f"{i} m", (0, 0, 0), size=14, screen_space=True)
        r.canvas.screen_rect((0, 0, 40, 30), (0, 200, 0))  # over the first labels
        r.canvas.text((150, 60), "top", (200, 0, 0), size=14, screen_space=True)
        r.end_frame()
        img = r.read_rgb_pixels()
        assert r.canvas.draw_calls - before == 3  # text run, shape run, text run
        assert (img[2:28, 2:38] == (0, 200, 0)).all()  # the rectangle hides the text
        assert img[4:20, 45:60].min() < 100  # a later label is drawn
        assert (img[60:76, 150:175, 0] > 150).any() and (img[60:76, 150:175, 1] < 60).any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_atlas_starts_over_when_full(backend):
    # many distinct strings (a status line per frame) never run out of room
    with ke.create_renderer(backend, size=(160, 60), headless=True) as r:
        if backend == "gl":
            from kelab.render.gl_canvas import TextAtlas

            with r.canvas._bind():  # a tiny atlas fills after a few frames
                r.canvas._atlas.release()
                r.canvas._atlas = TextAtlas(r.canvas._ctx, 64)
        for i in range(40):
            r.begin_frame()
            r.canvas.clear((255, 255, 255))
            r.canvas.text((2, 2), f"step {i}", (0, 0, 0), size=14, screen_space=True)
            r.canvas.text((2, 30), f"{i} m", (0, 0, 0), size=14, screen_space=True)
            r.end_frame()
            img = r.read_rgb_pixels()
            assert img[2:20, 2:60].min() < 100 and img[30:48, 2:40].min() < 100


@pytest.mark.parametrize("backend", BACKENDS)
def test_ground_marks_in_pixels_match_world_lines(backend):
    # the ticks land where world-space lines through the camera put them
    with ke.create_renderer(backend, size=(300, 120), headless=True) as r:
        r.camera.center, r.camera.zoom = (0.37, 0.4), 110.0
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        draw_ground_marks(r.canvas, 0.0)
        r.end_frame()
        marks = r.read_rgb_pixels()
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        xs = np.arange(-1.0, 2.0, 1.0)
        top = np.column_stack((xs, np.zeros(3)))
        depth = min(0.25, 14.0 / 110.0)
        r.canvas.lines(top, top - (0.0, depth), PALETTE["ground_mark"], width=2.0 / 110.0)
        r.end_frame()
        ticks = r.read_rgb_pixels()
        lit = ticks.max(axis=-1) > 0
        assert lit.any() and np.array_equal(marks[lit], ticks[lit])
