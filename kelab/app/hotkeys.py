"""The App's default hotkeys: the table (`HOTKEYS`) and what each key does."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kelab.app.ports import HotkeyHost

__all__ = ["HOTKEYS", "apply_hotkey"]

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


def apply_hotkey(app: HotkeyHost, key: str | None) -> None:
    """Do what ``key`` does in `HOTKEYS` to ``app`` (through its public API).

    Args:
        app: The App (as a `kelab.app.ports.HotkeyHost`: its public controls).
        key: The pressed key's name (others are ignored).
    """
    if app.paused and app.time_travel.hotkey(key, "shift" in app.input.mods):
        return  # a seek (docs/app.md, "Time travel")
    if key == "return":
        app.toggle_pause()
    elif key == "space":
        if app.paused:
            app.step_once()
        else:
            app.pause()
    elif key == "f1":
        app.live.show_hud = not app.live.show_hud
    elif key == "f2":
        app.toggle_panel()
    elif key == "f9":
        app.toggle_video_recording()
    elif key == "escape" and app.live.escape_quits:
        app.request_close()
    elif key in ("home", "c") and app.renderer is not None:
        app.view.reset(app.renderer.camera)
    elif key == "f" and app.view.follow is not None:
        app.view.following = not app.view.following
    elif key == "j":
        app.live.show_joints = not app.live.show_joints
    elif key == "k":
        app.live.show_contacts = not app.live.show_contacts
