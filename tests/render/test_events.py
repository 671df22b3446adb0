import pytest

import kelab as ke
from kelab.render.events import glfw_key_names


def test_event_fields_and_validation():
    ev = ke.InputEvent("key_down", key="space", mods=frozenset({"shift"}))
    assert (ev.kind, ev.key, ev.button, ev.pos) == ("key_down", "space", None, None)
    with pytest.raises(ValueError, match="kind"):
        ke.InputEvent("keydown")
    with pytest.raises(ValueError, match="mods"):
        ke.InputEvent("key_down", key="a", mods=frozenset({"hyper"}))


def test_glfw_names_match_pygame_names():
    import glfw
    import pygame

    names = glfw_key_names()
    pairs = {
        glfw.KEY_SPACE: pygame.K_SPACE,
        glfw.KEY_ENTER: pygame.K_RETURN,
        glfw.KEY_F1: pygame.K_F1,
        glfw.KEY_A: pygame.K_a,
        glfw.KEY_ESCAPE: pygame.K_ESCAPE,
        glfw.KEY_LEFT_SHIFT: pygame.K_LSHIFT,
        glfw.KEY_RIGHT_CONTROL: pygame.K_RCTRL,
        glfw.KEY_UP: pygame.K_UP,
        glfw.KEY_PAGE_DOWN: pygame.K_PAGEDOWN,
        glfw.KEY_KP_5: pygame.K_KP5,
        glfw.KEY_KP_ENTER: pygame.K_KP_ENTER,
        glfw.KEY_BACKSPACE: pygame.K_BACKSPACE,
        glfw.KEY_TAB: pygame.K_TAB,
        glfw.KEY_7: pygame.K_7,
        glfw.KEY_LEFT_SUPER: pygame.K_LSUPER,
    }
    for g, p in pairs.items():
        assert names[g] == pygame.key.name(p).lower()
