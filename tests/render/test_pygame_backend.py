"""Real SDL windows (needs an X display: $DISPLAY, or Xvfb started by the fixture)."""

import pygame

import kelab as ke


def test_window_draws_presents_and_reads(real_window_env):
    with ke.create_renderer("pygame", size=(320, 240), title="kelab test") as r:
        assert not r.headless and pygame.display.get_surface() is not None
        assert pygame.display.get_caption()[0] == "kelab test"
        assert pygame.display.get_driver() == "x11"
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        r.canvas.circle((0.0, 0.0), 0.2, (255, 0, 0))
        r.end_frame()
        assert tuple(r.read_rgb_pixels()[120, 160]) == (255, 0, 0)
        assert tuple(pygame.display.get_surface().get_at((160, 120)))[:3] == (255, 0, 0)
        r.poll_events()  # window-manager noise, if any
        assert not r.should_close
    assert pygame.display.get_surface() is None


def test_events_are_normalised(real_window_env):
    with ke.create_renderer("pygame", size=(200, 100)) as r:
        r.poll_events()
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_SPACE, mod=0))
        pygame.event.post(pygame.event.Event(pygame.KEYUP, key=pygame.K_F1, mod=pygame.KMOD_LSHIFT))
        pygame.event.post(pygame.event.Event(pygame.MOUSEBUTTONDOWN, button=3, pos=(12, 34)))
        pygame.event.post(
            pygame.event.Event(pygame.MOUSEMOTION, pos=(5, 6), rel=(1, 1), buttons=(0, 0, 0))
        )
        pygame.event.post(pygame.event.Event(pygame.VIDEORESIZE, w=300, h=150, size=(300, 150)))
        events = [e for e in r.poll_events() if e.kind != "mouse_move" or e.pos == (5, 6)]
        kinds = [e.kind for e in events]
        assert kinds[:3] == ["key_down", "key_up", "mouse_down"]
        assert events[0].key == "space" and events[1].key == "f1" and "shift" in events[1].mods
        assert events[2].button == 3 and events[2].pos == (12, 34)
        assert ke.InputEvent("mouse_move", pos=(5, 6)) in events
        resize = [e for e in events if e.kind == "resize"]
        assert resize and resize[-1].size == (300, 150) and r.camera.size == (300, 150)
        r.begin_frame()
        r.canvas.clear((9, 9, 9))
        r.end_frame()
        assert r.read_rgb_pixels().shape == (150, 300, 3)
        pygame.event.post(pygame.event.Event(pygame.QUIT))
        assert [e.kind for e in r.poll_events()][-1] == "quit"
        assert r.should_close


def test_only_one_pygame_window(real_window_env):
    import pytest

    with ke.create_renderer("pygame", size=(64, 64)):
        with pytest.raises(RuntimeError, match="already open"):
            ke.create_renderer("pygame", size=(64, 64))
        with ke.create_renderer("pygame", size=(64, 64), headless=True) as off:
            assert off.headless  # offscreen ones are always fine
