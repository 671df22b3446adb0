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


@pytest.mark.parametrize(
    ("kind", "fields", "field"),
    [
        ("mouse_wheel", {"wheel": 1, "pos": (10, 10)}, "wheel"),  # a number, not (dx, dy)
        ("mouse_wheel", {"wheel": (0.0, float("inf"))}, "wheel"),
        ("mouse_wheel", {}, "wheel"),  # required
        ("key_down", {"key": 5}, "key"),
        ("key_up", {"key": ""}, "key"),
        ("key_down", {}, "key"),  # required
        ("mouse_move", {"pos": (float("nan"), 3)}, "pos"),
        ("mouse_move", {"pos": (1, 2, 3)}, "pos"),
        ("mouse_move", {"pos": "12"}, "pos"),
        ("mouse_move", {}, "pos"),  # required: it is the move
        ("mouse_down", {"button": 0}, "button"),
        ("mouse_down", {"button": 4}, "button"),  # pygame's wheel button
        ("mouse_up", {"button": 1.0}, "button"),
        ("mouse_up", {"button": True}, "button"),
        ("mouse_down", {}, "button"),  # required
        ("resize", {"size": (0, 100)}, "size"),
        ("resize", {}, "size"),
        ("key_down", {"key": "a", "pos": (1, 2)}, "pos"),  # a field the kind does not carry
        ("mouse_move", {"pos": (1, 2), "key": "a"}, "key"),
        ("quit", {"wheel": (0, 1)}, "wheel"),
        ("key_down", {"key": "a", "mods": "shift"}, "mods"),
        ("key_down", {"key": "a", "mods": ["hyper"]}, "mods"),
    ],
)
def test_every_field_is_checked_at_construction(kind, fields, field):
    with pytest.raises(ke.UserError, match=rf"^InputEvent\.{field} must be .*, got .*; ") as err:
        ke.InputEvent(kind, **fields)
    assert "\n" not in str(err.value)


def test_kind_must_be_a_known_str():
    with pytest.raises(ke.UserError, match="InputEvent.kind must be one of"):
        ke.InputEvent(["key_down"])  # unhashable: a clear line, not a TypeError


def test_fields_are_normalised():
    """Keys lowercase (one name for hooks and hotkeys), pairs as float tuples, mods a frozenset."""
    import numpy as np

    assert ke.InputEvent("key_down", key="Space").key == "space"
    assert ke.InputEvent("key_up", key="F1").key == "f1"
    ev = ke.InputEvent("mouse_wheel", wheel=[0, 1], pos=np.array([3, 4]))
    assert ev.wheel == (0.0, 1.0) and ev.pos == (3.0, 4.0)
    assert all(type(v) is float for v in ev.wheel + ev.pos)
    assert ke.InputEvent("mouse_wheel", wheel=(0, -1)).pos is None  # pos optional here
    ev = ke.InputEvent("mouse_down", button=np.int64(6), mods={"shift", "ctrl"})
    assert ev.button == 6 and type(ev.button) is int and ev.pos is None
    assert ev.mods == frozenset({"shift", "ctrl"}) and isinstance(ev.mods, frozenset)
    assert ke.InputEvent("resize", size=(np.int32(640), 480)).size == (640, 480)
