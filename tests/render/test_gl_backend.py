"""GL specifics: batching, and real glfw windows (needs an X display or Xvfb)."""

import os

import glfw
import numpy as np
import pytest
from render_helpers import cartpole_world

import kelab as ke
from kelab.render.gl_backend import rgbx_to_rgb


def test_world_draws_in_one_draw_call():
    world = cartpole_world(num_envs=16, spacing=1.0)
    with ke.create_renderer("gl", size=(320, 200), headless=True) as r:
        r.camera.zoom = 20.0
        r.camera.center = (7.5, 0.5)
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        r.canvas.draw_world(world)
        r.canvas.circle((0, 2), 0.2, (255, 255, 255))
        before = r.canvas.draw_calls
        r.end_frame()
        assert r.canvas.draw_calls - before == 1
        r.begin_frame()
        r.canvas.text((2, 2), "a", (255, 255, 255), screen_space=True)
        r.end_frame()
        assert r.canvas.draw_calls - before == 2  # text is one textured quad


def test_two_headless_contexts_interleave():
    a = ke.create_renderer("gl", size=(16, 16), headless=True)
    b = ke.create_renderer("gl", size=(24, 8), headless=True)
    try:
        for color_a, color_b in (((255, 0, 0), (0, 255, 0)), ((0, 0, 255), (9, 9, 9))):
            a.begin_frame()
            b.begin_frame()
            a.canvas.clear(color_a)
            b.canvas.clear(color_b)
            b.end_frame()
            a.end_frame()
            assert tuple(a.read_rgb_pixels()[3, 3]) == color_a
            assert tuple(b.read_rgb_pixels()[3, 3]) == color_b
    finally:
        a.close()
        b.close()


def test_window_draws_presents_and_reads(real_window_env):
    with ke.create_renderer("gl", size=(320, 240), title="kelab gl") as r:
        assert not r.headless
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        r.canvas.circle((0.0, 0.0), 0.2, (255, 0, 0))
        r.canvas.text((4, 4), "gl", (255, 255, 255), screen_space=True)
        r.end_frame()
        img = r.read_rgb_pixels()
        assert tuple(img[120, 160]) == (255, 0, 0) and img[4:20, 4:20].max() > 200
        screen = np.frombuffer(r._ctx.screen.read(components=3), np.uint8).reshape(240, 320, 3)
        assert tuple(screen[::-1][120, 160]) == (255, 0, 0)  # presented to the window
        r.poll_events()
        assert not r.should_close


def test_window_events_resize_and_close(real_window_env):
    with ke.create_renderer("gl", size=(200, 100)) as r:
        r.poll_events()
        win = r._window
        r._on_key(win, glfw.KEY_SPACE, 0, glfw.PRESS, glfw.MOD_CONTROL)
        r._on_key(win, glfw.KEY_ENTER, 0, glfw.RELEASE, 0)
        r._on_button(win, glfw.MOUSE_BUTTON_RIGHT, glfw.PRESS, 0)
        events = r.poll_events()
        assert events[0] == ke.InputEvent("key_down", key="space", mods=frozenset({"ctrl"}))
        assert events[1].kind == "key_up" and events[1].key == "return"
        assert events[2].kind == "mouse_down" and events[2].button == 3
        glfw.set_window_size(win, 300, 160)
        resize = []
        for _ in range(50):
            resize += [e for e in r.poll_events() if e.kind == "resize"]
            if resize:
                break
            glfw.wait_events_timeout(0.02)
        assert resize and resize[-1].size == (300, 160) and r.size == (300, 160)
        r.begin_frame()
        r.canvas.clear((5, 6, 7))
        r.end_frame()
        assert r.read_rgb_pixels().shape == (160, 300, 3)
        r._on_close(win)  # what glfw calls when the close button is pressed
        assert [e.kind for e in r.poll_events()] == ["quit"] and r.should_close


def test_gl_and_pygame_windows_together(real_window_env):
    with (
        ke.create_renderer("gl", size=(64, 64)) as g,
        ke.create_renderer("pygame", size=(64, 64)) as p,
    ):
        for r in (g, p):
            r.begin_frame()
            r.canvas.clear((0, 128, 255))
            r.end_frame()
            assert tuple(r.read_rgb_pixels()[1, 1]) == (0, 128, 255)


def _disc_frame(antialias) -> np.ndarray:
    with ke.create_renderer("gl", size=(64, 64), headless=True, antialias=antialias) as r:
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        r.canvas.circle((0.0, 0.0), 0.2, (255, 255, 255))
        r.end_frame()
        return r.read_rgb_pixels()


def test_antialias_modes_fringe_msaa_and_hard():
    fringe, msaa, hard = (_disc_frame(aa) for aa in (True, "msaa", False))
    for img in (fringe, msaa, hard):
        assert tuple(img[32, 32]) == (255, 255, 255) and tuple(img[0, 0]) == (0, 0, 0)
    levels = [np.unique(img[..., 0]).size for img in (fringe, msaa, hard)]
    assert levels[2] == 2  # hard edges: only the two colours
    assert levels[0] > 5 and levels[1] > 2  # smooth edges
    # the fringe keeps the ink of the disc (radius 20 px): coverage sum ~ pi r^2
    assert abs(fringe[..., 0].sum() / 255.0 - np.pi * 20**2) < 0.01 * np.pi * 20**2
    # and agrees with 4x multisampling at the edges within a few levels
    assert np.abs(fringe.astype(int) - msaa.astype(int)).max() <= 80


def test_antialias_setting_is_validated():
    with pytest.raises(ValueError, match="antialias"):
        ke.create_renderer("gl", size=(8, 8), headless=True, antialias="fxaa")
    with pytest.raises(ValueError, match="only available with backend='gl'"):
        ke.create_renderer("pygame", size=(8, 8), headless=True, antialias="msaa")


def test_rgbx_to_rgb_packs_and_flips():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (7, 5, 4), dtype=np.uint8)
    out = rgbx_to_rgb(img)
    assert out.shape == (7, 5, 3) and out.flags.c_contiguous and out.flags.writeable
    np.testing.assert_array_equal(out, img[..., :3])
    np.testing.assert_array_equal(rgbx_to_rgb(img[::-1]), img[::-1, :, :3])


def test_unfinished_frame_never_shows_and_unclear_frame_restores():
    with ke.create_renderer("gl", size=(16, 16), headless=True) as r:
        for color in ((255, 0, 0), (0, 255, 0)):
            r.begin_frame()
            r.canvas.clear(color)
            r.end_frame()
        r.begin_frame()  # not cleared: starts from the finished green frame
        r.canvas.circle((0.0, 0.0), 0.02, (0, 0, 255))
        assert tuple(r.read_rgb_pixels()[0, 0]) == (0, 255, 0)
        r.end_frame()
        img = r.read_rgb_pixels()
        assert tuple(img[0, 0]) == (0, 255, 0) and tuple(img[8, 8]) == (0, 0, 255)


def test_headless_and_window_contexts_alternate(real_window_env):
    with (
        ke.create_renderer("gl", size=(32, 32), headless=True) as h,
        ke.create_renderer("gl", size=(32, 32)) as w,
    ):
        for i in range(3):
            for r, color in ((h, (i, 10, 20)), (w, (30, i, 40))):
                r.begin_frame()
                r.canvas.clear(color)
                r.canvas.circle((0.0, 0.0), 0.05, (255, 255, 255))
                r.end_frame()
                img = r.read_rgb_pixels()
                assert tuple(img[1, 1]) == color and tuple(img[16, 16]) == (255, 255, 255)


def test_small_headless_frames_ask_llvmpipe_for_no_threads_only_while_creating(monkeypatch):
    from kelab.render import gl_backend

    seen = []

    def create(**kw):
        seen.append(os.environ.get("LP_NUM_THREADS"))
        raise RuntimeError("no context in this test")

    monkeypatch.setattr(gl_backend.moderngl, "create_standalone_context", create)
    monkeypatch.delenv("LP_NUM_THREADS", raising=False)
    for size in ((600, 400), (1920, 1080)):
        with pytest.raises(RuntimeError, match="EGL"):
            ke.create_renderer("gl", size=size, headless=True)
    monkeypatch.setenv("LP_NUM_THREADS", "3")  # the user's choice wins
    with pytest.raises(RuntimeError, match="EGL"):
        ke.create_renderer("gl", size=(600, 400), headless=True)
    assert seen == ["0", None, "3"]
    assert os.environ["LP_NUM_THREADS"] == "3"
    monkeypatch.delenv("LP_NUM_THREADS")
    with pytest.raises(RuntimeError, match="EGL"):
        ke.create_renderer("gl", size=(600, 400), headless=True)
    assert "LP_NUM_THREADS" not in os.environ  # set only while creating
