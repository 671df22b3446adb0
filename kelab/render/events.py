"""InputEvent: window input normalised across the pygame and glfw backends."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kelab._validate import is_int, is_number, must
from kelab.errors import UserError

__all__ = ["EVENT_KINDS", "InputEvent", "MODIFIERS"]

EVENT_KINDS = frozenset(
    {"key_down", "key_up", "mouse_down", "mouse_up", "mouse_move", "mouse_wheel", "quit", "resize"}
)
MODIFIERS = frozenset({"shift", "ctrl", "alt", "meta"})


#: The kinds that carry each field (a field given to another kind is refused).
_KEY_KINDS = frozenset({"key_down", "key_up"})
_BUTTON_KINDS = frozenset({"mouse_down", "mouse_up"})
_POS_KINDS = frozenset({"mouse_down", "mouse_up", "mouse_move", "mouse_wheel"})
_WHEEL_BUTTONS = (4, 5)  # pygame's legacy wheel buttons: a wheel is a "mouse_wheel" event


@dataclass(frozen=True)
class InputEvent:
    """One input event from a window, the same for every backend.

    Every field is checked when the event is made (a wrong one raises ``UserError``, a
    ``ValueError``, naming the field and the fix), so an injected event cannot end the App
    at the next frame.

    Attributes:
        kind: One of "key_down", "key_up", "mouse_down", "mouse_up", "mouse_move",
            "mouse_wheel", "quit", "resize".
        key: Key name, required for key events and None otherwise: a non-empty str,
            lowercased here ("Space" is stored as "space", so hooks and hotkeys see one
            name), as pygame names keys: "a", "1", "space", "return", "escape", "tab",
            "backspace", "f1", "up", "left shift", "right ctrl", "[0]" (keypad 0),
            "enter" (keypad enter)...
        button: Mouse button, required for mouse_down/mouse_up and None otherwise: an
            int, 1 left, 2 middle, 3 right, 6 and up the side buttons (4 and 5 are the
            wheel: a "mouse_wheel" event).
        pos: Pointer position ``(x, y)`` in screen pixels (x right, y down from the
            top-left), two finite numbers stored as floats: required for "mouse_move",
            optional for mouse_down/mouse_up/mouse_wheel (None: where the pointer was),
            None for other kinds.
        size: New framebuffer ``(width, height)``, two ints >= 1, required for "resize"
            and None otherwise.
        wheel: ``(dx, dy)`` scroll amount, two finite numbers stored as floats, required
            for "mouse_wheel" and None otherwise (dy > 0: away from the user; one notch
            is 1.0).
        mods: Modifier keys held during key and mouse button events, a set (any
            iterable) of names from {"shift", "ctrl", "alt", "meta"}, stored as a
            frozenset.

    Example:
        >>> import kelab as ke
        >>> ke.InputEvent("key_down", key="Space").key
        'space'
        >>> ke.InputEvent("mouse_wheel", wheel=(0, 1), pos=(10, 20))
        InputEvent(kind='mouse_wheel', key=None, button=None, pos=(10.0, 20.0), size=None, \
wheel=(0.0, 1.0), mods=frozenset())
        >>> ke.InputEvent("mouse_wheel", wheel=1)
        Traceback (most recent call last):
        ...
        kelab.errors.UserError: InputEvent.wheel must be a pair (dx, dy) of finite numbers \
for a 'mouse_wheel' event, got 1; pass e.g. wheel=(0.0, 1.0) for one notch away from the user
    """

    kind: str
    key: str | None = None
    button: int | None = None
    pos: tuple[float, float] | None = None
    size: tuple[int, int] | None = None
    wheel: tuple[float, float] | None = None
    mods: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        kind = self.kind
        if not isinstance(kind, str) or kind not in EVENT_KINDS:
            raise UserError(must("InputEvent.kind", f"one of {sorted(EVENT_KINDS)}", kind))
        fields: dict[str, object] = {
            "key": _checked_key(kind, self.key),
            "button": _checked_button(kind, self.button),
            "pos": _checked_pos(kind, self.pos),
            "size": _checked_size(kind, self.size),
            "wheel": _checked_wheel(kind, self.wheel),
            "mods": _checked_mods(self.mods),
        }
        for name, value in fields.items():  # all checked first: nothing half-set
            object.__setattr__(self, name, value)


def _unused(kind: str, name: str, value: object, kinds: frozenset[str]) -> None:
    """Refuse ``value`` for a field that ``kind`` does not carry."""
    if value is not None:
        raise UserError(
            must(
                f"InputEvent.{name}",
                f"None for a {kind!r} event",
                value,
                fix=f"only {sorted(kinds)} events carry a {name}",
            )
        )


def _checked_key(kind: str, key: object) -> str | None:
    if kind not in _KEY_KINDS:
        _unused(kind, "key", key, _KEY_KINDS)
        return None
    if not isinstance(key, str) or not key.strip():
        raise UserError(
            must(
                "InputEvent.key",
                f"a non-empty str for a {kind!r} event",
                key,
                fix="pass a pygame key name such as 'a', 'space', 'return', 'left' or 'f1'",
            )
        )
    return key.lower()


def _checked_button(kind: str, button: object) -> int | None:
    if kind not in _BUTTON_KINDS:
        _unused(kind, "button", button, _BUTTON_KINDS)
        return None
    if is_int(button) and int(button) >= 1 and int(button) not in _WHEEL_BUTTONS:  # type: ignore[call-overload]
        return int(button)  # type: ignore[call-overload]
    raise UserError(
        must(
            "InputEvent.button",
            f"an int, 1 left, 2 middle, 3 right or >= 6 (side buttons), for a {kind!r} event",
            button,
            fix="4 and 5 are the wheel: send a 'mouse_wheel' event with wheel=(dx, dy)",
        )
    )


def _pair(value: object) -> tuple[object, object] | None:
    """``value`` as a 2-tuple when it is a tuple, list or array of two items, else None."""
    if isinstance(value, tuple | list | np.ndarray) and len(value) == 2:
        return (value[0], value[1])
    return None


def _finite_pair(value: object) -> tuple[float, float] | None:
    pair = _pair(value)
    if pair is None or not all(is_number(v) and math.isfinite(float(v)) for v in pair):  # type: ignore[arg-type]
        return None
    return (float(pair[0]), float(pair[1]))  # type: ignore[arg-type]


def _checked_pos(kind: str, pos: object) -> tuple[float, float] | None:
    if kind not in _POS_KINDS:
        _unused(kind, "pos", pos, _POS_KINDS)
        return None
    if pos is None and kind != "mouse_move":
        return None
    checked = _finite_pair(pos)
    if checked is None:
        allowed = "a pair (x, y) of finite numbers (screen pixels)"
        if kind != "mouse_move":
            allowed += " or None"
        raise UserError(
            must(
                "InputEvent.pos",
                f"{allowed} for a {kind!r} event",
                pos,
                fix="pass e.g. pos=(120, 40), x right and y down from the top-left",
            )
        )
    return checked


def _checked_size(kind: str, size: object) -> tuple[int, int] | None:
    if kind != "resize":
        _unused(kind, "size", size, frozenset({"resize"}))
        return None
    pair = _pair(size)
    if pair is None or not all(is_int(v) and int(v) >= 1 for v in pair):  # type: ignore[call-overload]
        raise UserError(
            must(
                "InputEvent.size",
                "a pair (width, height) of ints >= 1 for a 'resize' event",
                size,
                fix="pass the new framebuffer size in pixels, e.g. size=(640, 480)",
            )
        )
    return (int(pair[0]), int(pair[1]))  # type: ignore[call-overload]


def _checked_wheel(kind: str, wheel: object) -> tuple[float, float] | None:
    if kind != "mouse_wheel":
        _unused(kind, "wheel", wheel, frozenset({"mouse_wheel"}))
        return None
    checked = _finite_pair(wheel)
    if checked is None:
        raise UserError(
            must(
                "InputEvent.wheel",
                "a pair (dx, dy) of finite numbers for a 'mouse_wheel' event",
                wheel,
                fix="pass e.g. wheel=(0.0, 1.0) for one notch away from the user",
            )
        )
    return checked


def _checked_mods(mods: object) -> frozenset[str]:
    names = None
    if isinstance(mods, Iterable) and not isinstance(mods, str | bytes):
        names = tuple(mods)
    if names is None or not all(isinstance(m, str) and m in MODIFIERS for m in names):
        raise UserError(
            must(
                "InputEvent.mods",
                f"a set of names from {sorted(MODIFIERS)}",
                mods,
                fix='pass e.g. mods=frozenset({"shift"}), or leave it out for none',
            )
        )
    return frozenset(names)


def glfw_key_names() -> dict[int, str]:
    """Map glfw key codes to the pygame-style names used by :class:`InputEvent`.

    Returns:
        A dict from ``glfw.KEY_*`` values to lowercase names.
    """
    import glfw

    names: dict[int, str] = {}
    for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        names[getattr(glfw, f"KEY_{c}")] = c.lower()
    for d in range(10):
        names[getattr(glfw, f"KEY_{d}")] = str(d)
        names[getattr(glfw, f"KEY_KP_{d}")] = f"[{d}]"
    for f in range(1, 26):
        names[getattr(glfw, f"KEY_F{f}")] = f"f{f}"
    table = {
        "SPACE": "space", "APOSTROPHE": "'", "COMMA": ",", "MINUS": "-", "PERIOD": ".",
        "SLASH": "/", "SEMICOLON": ";", "EQUAL": "=", "LEFT_BRACKET": "[",
        "BACKSLASH": "\\", "RIGHT_BRACKET": "]", "GRAVE_ACCENT": "`", "ESCAPE": "escape",
        "ENTER": "return", "TAB": "tab", "BACKSPACE": "backspace", "INSERT": "insert",
        "DELETE": "delete", "RIGHT": "right", "LEFT": "left", "DOWN": "down", "UP": "up",
        "PAGE_UP": "page up", "PAGE_DOWN": "page down", "HOME": "home", "END": "end",
        "CAPS_LOCK": "caps lock", "SCROLL_LOCK": "scroll lock", "NUM_LOCK": "numlock",
        "PRINT_SCREEN": "print screen", "PAUSE": "break", "KP_DECIMAL": "[.]",
        "KP_DIVIDE": "[/]", "KP_MULTIPLY": "[*]", "KP_SUBTRACT": "[-]", "KP_ADD": "[+]",
        "KP_ENTER": "enter", "KP_EQUAL": "equals", "LEFT_SHIFT": "left shift",
        "LEFT_CONTROL": "left ctrl", "LEFT_ALT": "left alt", "LEFT_SUPER": "left meta",
        "RIGHT_SHIFT": "right shift", "RIGHT_CONTROL": "right ctrl", "RIGHT_ALT": "right alt",
        "RIGHT_SUPER": "right meta", "MENU": "menu",
    }  # fmt: skip
    for attr, name in table.items():
        names[getattr(glfw, f"KEY_{attr}")] = name
    return names


def modifier_names(bits: int, table: tuple[tuple[int, str], ...]) -> frozenset[str]:
    """Names of the modifier keys set in ``bits``, from a backend's ``(mask, name)`` table."""
    return frozenset(name for mask, name in table if bits & mask)
