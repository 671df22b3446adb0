import numpy as np
import pytest

import kelab as ke


def _half_frame(r: ke.Renderer, color) -> None:
    r.begin_frame()
    r.canvas.clear((0, 0, 0))
    w, h = r.size
    r.canvas.polygon([(0, 0), (w, 0), (w, h / 2), (0, h / 2)], color, width=0)
    r.end_frame()


def test_read_rgb_pixels_shape_dtype_and_flip(headless):
    headless.camera.zoom = 1.0
    headless.camera.center = (100.0, 75.0)  # world == pixels, with +Y up
    _half_frame(headless, (0, 200, 0))  # covers world y in [0, 75]: the BOTTOM half
    img = headless.read_rgb_pixels()
    assert img.shape == (150, 200, 3) and img.dtype == np.uint8 and img.flags.writeable
    assert (img[100:] == (0, 200, 0)).all() and (img[:70] == 0).all()
    gl_order = headless.read_rgb_pixels(flip_y=False)
    assert (gl_order[:70] == (0, 200, 0)).all()
    np.testing.assert_array_equal(gl_order, img[::-1])


def test_reads_return_the_last_finished_frame(headless):
    with pytest.raises(RuntimeError, match="no finished frame"):
        headless.read_rgb_pixels()
    headless.begin_frame()
    headless.canvas.clear((255, 0, 0))
    headless.end_frame()
    headless.begin_frame()
    headless.canvas.clear((0, 0, 255))  # not finished yet
    assert tuple(headless.read_rgb_pixels()[10, 10]) == (255, 0, 0)
    headless.end_frame()
    assert tuple(headless.read_rgb_pixels()[10, 10]) == (0, 0, 255)
    assert headless.frame_count == 2


def test_frame_protocol_errors_and_idempotent_close(headless):
    with pytest.raises(RuntimeError, match="without begin_frame"):
        headless.end_frame()
    headless.begin_frame()
    with pytest.raises(RuntimeError, match="twice"):
        headless.begin_frame()
    headless.end_frame()
    assert headless.poll_events() == [] and not headless.should_close
    headless.close()
    headless.close()
    assert headless.closed and headless.should_close
    with pytest.raises(RuntimeError, match="closed"):
        headless.begin_frame()


def test_write_png_round_trips(headless, tmp_path):
    import pygame

    headless.begin_frame()
    headless.canvas.clear((12, 34, 56))
    headless.canvas.circle((0, 0), 0.3, (250, 10, 10))
    headless.end_frame()
    path = headless.write_png(tmp_path / "sub" / "frame.png")
    loaded = pygame.surfarray.array3d(pygame.image.load(str(path))).transpose(1, 0, 2)
    np.testing.assert_array_equal(loaded, headless.read_rgb_pixels())


def test_factory_validates_and_replaces_camera():
    with pytest.raises(ValueError, match="backend"):
        ke.create_renderer("vulkan", headless=True)
    with pytest.raises(ValueError, match="size"):
        ke.create_renderer("pygame", size=(0, 10), headless=True)
    with ke.create_renderer("pygame", size=(64, 48), headless=True) as r:
        r.camera = ke.Camera(center=(5.0, 5.0), zoom=10.0, size=(1, 1))
        assert r.camera.size == (64, 48) and r.canvas.camera is r.camera
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        r.canvas.circle((5.0, 5.0), 0.5, (0, 0, 255))
        r.end_frame()
        assert tuple(r.read_rgb_pixels()[24, 32]) == (0, 0, 255)


def test_headless_needs_no_display(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    for backend in ("pygame", "gl"):
        with ke.create_renderer(backend, size=(32, 32), headless=True) as r:
            r.begin_frame()
            r.canvas.clear((1, 2, 3))
            r.end_frame()
            assert tuple(r.read_rgb_pixels()[0, 0]) == (1, 2, 3)


def test_window_without_display_explains_the_fix(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    for backend in ("pygame", "gl"):
        with pytest.raises(RuntimeError, match="headless=True"):
            ke.create_renderer(backend, size=(32, 32))
