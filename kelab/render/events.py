"""InputEvent: window input normalised across the pygame and glfw backends."""

from __future__ import annotations

from dataclasses import dataclass

from kelab._validate import must

__all__ = ["EVENT_KINDS", "InputEvent", "MODIFIERS"]

EVENT_KINDS = frozenset(
    {"key_down", "key_up", "mouse_down", "mouse_up", "mouse_move", "mouse_wheel", "quit", "resize"}
)
MODIFIERS = frozenset({"shift", "ctrl", "alt", "meta"})


@dataclass(frozen=True)
class InputEvent:
    """One input event from a window, the same for every backend.

    Attributes:
        kind: One of "key_down", "key_up", "mouse_down", "mouse_up", "mouse_move",
            "mouse_wheel", "quit", "resize".
        key: Key name for key events, lowercase, as pygame names keys: "a", "1",
            "space", "return", "escape", "tab", "backspace", "f1", "up", "left shift",
            "right ctrl", "[0]" (keypad 0), "enter" (keypad enter)...; None otherwise.
        button: Mouse button for mouse_down/mouse_up: 1 left, 2 middle, 3 right,
            6 and 7 the side buttons; None otherwise.
        pos: Pointer position in screen pixels (x right, y down from the top-left) for
            mouse events; None otherwise.
        size: New framebuffer ``(width, height)`` in pixels for "resize"; None otherwise.
        wheel: ``(dx, dy)`` scroll amount for "mouse_wheel" (dy > 0: away from the user).
        mods: Modifier keys held during key and mouse button events, a subset of
            {"shift", "ctrl", "alt", "meta"}.
    """

    kind: str
    key: str | None = None
    button: int | None = None
    pos: tuple[int, int] | None = None
    size: tuple[int, int] | None = None
    wheel: tuple[float, float] | None = None
    mods: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(must("InputEvent.kind", f"one of {sorted(EVENT_KINDS)}", self.kind))
        if not self.mods <= MODIFIERS:
            raise ValueError(
                f"InputEvent.mods must be a subset of {sorted(MODIFIERS)}, got {set(self.mods)}"
            )


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
