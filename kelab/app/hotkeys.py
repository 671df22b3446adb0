"""The App's default hotkeys: the table (`HOTKEYS`) and what each key does.

`apply_hotkey` is given a `HotkeyContext`, never the App: the App's controls, the input
(Shift), the live settings, the view and the time-travel keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kelab.app.config import LiveSettings
    from kelab.app.input import Input
    from kelab.app.ports import Controls
    from kelab.app.view import ViewController
    from kelab.render.camera import Camera

__all__ = ["HOTKEYS", "HotkeyContext", "apply_hotkey"]

#: The default hotkeys (``hotkeys=False`` turns them all off).
HOTKEYS = {
    "return": "play / pause",
    "space": "pause, or one step while paused",
    "f1": "show / hide the HUD",
    "f2": "show / hide the Settings panel",
    "f9": "start / stop video recording (a red REC badge shows; the file is printed)",
    "escape": "quit (App(escape_quits=False) turns it off)",
    "home": "reset the view (also 'c'); wheel zooms, middle/Shift+left drag pans; "
    "while paused: back to the oldest step of the history",
    "left": "while paused: one fixed step back (Shift: one second)",
    "right": "while paused: one fixed step forward, redoing the recorded future (Shift: 1 s)",
    "f": "follow the App's follow body on / off",
    "j": "show / hide joint pivots",
    "k": "show / hide contact forces",
}


@dataclass(frozen=True)
class HotkeyContext:
    """What `apply_hotkey` is given: what the keys act on."""

    controls: Controls
    """Pause, step, the panel, the video, quit."""
    input: Input
    """``mods``: Shift makes Left / Right jump one second."""
    live: LiveSettings
    """``show_hud``, ``escape_quits``, ``show_joints``, ``show_contacts``."""
    view: ViewController
    """Follow and reset the view."""
    camera: Callable[[], Camera | None]
    """The window's camera (None before the window opens)."""
    seek_key: Callable[[str | None, bool], bool]
    """Left / Right / Home while paused (``TimeTravel.hotkey``): whether it was one."""


def apply_hotkey(context: HotkeyContext, key: str | None) -> None:
    """Do what ``key`` does in `HOTKEYS` (through the App's public controls).

    Args:
        context: What the keys act on (`HotkeyContext`).
        key: The pressed key's name (others are ignored).
    """
    c, live, view = context.controls, context.live, context.view
    if c.paused() and context.seek_key(key, "shift" in context.input.mods):
        return  # a seek (docs/app.md, "Time travel")
    if key == "return":
        c.toggle_pause()
    elif key == "space":
        if c.paused():
            c.step_once()
        else:
            c.pause()
    elif key == "f1":
        live.show_hud = not live.show_hud
    elif key == "f2":
        c.toggle_panel()
    elif key == "f9":
        c.toggle_video_recording()
    elif key == "escape" and live.escape_quits:
        c.request_close()
    elif key in ("home", "c") and (camera := context.camera()) is not None:
        view.reset(camera)
    elif key == "f" and view.follow is not None:
        view.following = not view.following
    elif key == "j":
        live.show_joints = not live.show_joints
    elif key == "k":
        live.show_contacts = not live.show_contacts
