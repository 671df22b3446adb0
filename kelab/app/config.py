"""AppConfig: every setting of an `App`, one frozen, validated dataclass.

``App(config=AppConfig(...))`` is the full form; ``App(title=..., headless=True, ...)``
is the shorthand: the keywords build an `AppConfig` (the same fields, the same checks).
The objects an App works with rather than settings (the ``world``, a ``camera``, a
``timeline``, the ``clock`` and ``sleep`` functions) are passed to `App` itself.

The config is what the App starts with (``app.config``, never changed). Each value that
may change while the App runs has one live home: the time settings (``time_mode``,
``time_scale``, ``max_steps_per_frame``, ``max_frame_delta``, ``steps_per_frame``) are the
App's clock's (``app.clock``), the drawing and interaction ones (`LIVE_SETTINGS`:
``render_hz``, ``show_hud``, ``hotkeys``...) are `LiveSettings` (``app.live``), checked
on every change with the same errors as the config.

Example:
    >>> from kelab.app.config import AppConfig
    >>> cfg = AppConfig(title="Cartpole", size=(640, 360), headless=True, render_hz=None)
    >>> cfg.size, cfg.max_frame_delta
    ((640, 360), 0.25)
    >>> AppConfig(render_hz=0)
    Traceback (most recent call last):
    ...
    ValueError: App.render_hz must be a finite number > 0 or None, got 0
    >>> live = LiveSettings(cfg)
    >>> live.show_hud = True
    >>> live.show_hud, live.render_hz
    (True, None)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kelab._validate import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_positive,
    is_int,
    is_number,
    must,
)
from kelab.render.renderer import BACKENDS
from kelab.timing.clock import MAX_TIME_SCALE
from kelab.timing.config import TimeMode

__all__ = ["LIVE_SETTINGS", "MAX_HISTORY_S", "AppConfig", "LiveSettings", "check_history_mb"]

#: The longest ``history_s`` an App keeps (an hour: ~2 GB at Cartpole's ~34 MB a minute).
MAX_HISTORY_S = 3600.0

_BOOLS = (
    "headless",
    "vsync",
    "disable_viewport_rendering",
    "hotkeys",
    "show_hud",
    "interaction",
    "escape_quits",
    "panel",
    "free_step_scripts",
)


def check_history_s(value: object, name: str) -> float:
    """Validate a history length: seconds > 0 and at most `MAX_HISTORY_S`.

    Raises:
        ValueError: Naming ``name``, the value and the range.
    """
    if is_number(value) and 0 < value <= MAX_HISTORY_S:
        return float(value)
    raise ValueError(
        must(name, f"seconds > 0 and <= {MAX_HISTORY_S:g}", value, "60 keeps the last minute")
    )


def check_history_mb(value: object, name: str) -> float:
    """Validate a history's memory budget: megabytes (2**20 bytes) > 0, finite.

    Raises:
        ValueError: Naming ``name``, the value and the range.
    """
    if is_number(value) and 0 < value < float("inf"):
        return float(value)
    raise ValueError(
        must(name, "megabytes > 0 (finite)", value, "512 keeps at most 512 MB of history")
    )


def _positive_or_none(value: object, name: str) -> float | None:
    if value is None:
        return None
    try:
        return check_positive(value, name)
    except ValueError:
        raise ValueError(must(name, "a finite number > 0 or None", value)) from None


def _colour(value: object, name: str) -> tuple[int, int, int]:
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 3
        or not all(is_int(c) and 0 <= c <= 255 for c in value)
    ):
        raise ValueError(must(name, "three ints 0..255 (r, g, b)", value))
    return (int(value[0]), int(value[1]), int(value[2]))


#: The settings that may change while an App runs (`LiveSettings`, ``app.live``), each
#: with its check (the same as `AppConfig`'s, so the errors read alike).
LIVE_SETTINGS: dict[str, Callable[[object, str], object]] = {
    "render_hz": _positive_or_none,
    "disable_viewport_rendering": check_bool,
    "hotkeys": check_bool,
    "show_hud": check_bool,
    "interaction": check_bool,
    "escape_quits": check_bool,
    "background": _colour,
    "drag_frequency_hz": check_positive,
    "show_joints": check_bool,
    "show_contacts": check_bool,
    "free_step_scripts": check_bool,
}


@dataclass(frozen=True)
class AppConfig:
    """The settings of an `App` (see docs/app.md); every field is checked on creation.

    Raises:
        ValueError: Naming the field, the value seen and what is allowed.
    """

    title: str = "KELab"
    """Window title (also names the settings file and the F9 videos)."""
    size: tuple[int, int] = (960, 540)
    """Window size ``(width, height)`` in pixels (two ints >= 1; any sequence of two)."""
    backend: str = "pygame"
    """Renderer: ``"pygame"`` or ``"gl"``."""
    time_mode: TimeMode = TimeMode.SIM_REALTIME
    """How simulated time follows wall time (`TimeMode`; changeable while running)."""
    headless: bool = False
    """Draw offscreen, with no window."""
    render_hz: float | None = 60.0
    """Target frame rate (None: uncapped). Not applied in SIM_HIGH_PERF."""
    vsync: bool = False
    """Ask the window for vsync."""
    max_steps_per_frame: int = 8
    """The most fixed steps one frame runs in the real-time modes (an int >= 1)."""
    max_frame_delta: float | None = 0.25
    """Longest wall time one frame may add, in seconds (None: no clamp); the rest is
    added to ``App.dropped_wall_time`` and never simulated."""
    time_scale: float = 1.0
    """Simulated seconds per wall second (> 0)."""
    steps_per_frame: int = 1
    """Fixed steps per frame in SIM_HIGH_PERF (an int >= 1)."""
    disable_viewport_rendering: bool = False
    """In SIM_HIGH_PERF, skip drawing while running."""
    hotkeys: bool = True
    """The default hotkeys (``kelab.app.app.HOTKEYS``): Enter, Space, F1, F2, F9..."""
    show_hud: bool = False
    """Show the HUD (F1) from the start."""
    interaction: bool = True
    """Pick and drag bodies with the left mouse button."""
    follow: str | None = None
    """A body path the camera follows (None: a fixed camera)."""
    escape_quits: bool = True
    """Escape closes the App (False keeps Escape for your own use)."""
    background: tuple[int, int, int] = (24, 26, 32)
    """Backdrop colour (three ints 0..255): the lower half of the frame; the upper half
    shades towards a paler sky."""
    runner: str = "Robot"
    """The main runner of the timeline: fixed steps are its periods."""
    recording_dir: Path = Path("recordings")
    """Where F9 writes videos (a str or path)."""
    drag_frequency_hz: float = 4.0
    """Natural frequency of the drag spring (critically damped), Hz > 0."""
    panel: bool = False
    """Show the Settings panel from the start (F2 toggles it; needs imgui-bundle:
    ``pip install kelab[panel]``)."""
    free_step_scripts: bool = False
    """Run the App's ``free_update(dt)`` once per frame with the frame's variable ``dt``
    (the Scripts page's "Enable Free Step Update Scripts"; live: ``app.live``)."""
    menu_bar: bool | None = None
    """The window's menu bar (Edit -> Settings...); None: shown in a window, not headless."""
    history_s: float = 60.0
    """Simulated seconds of history the App keeps to rewind (`App.seek`, the panel's
    timeline slider; > 0; live: ``app.time_travel.history_s``, docs/app.md "Time travel")."""
    history_mb: float = 512.0
    """Most memory the history may take, in MB (2**20 bytes; > 0): past it the oldest
    steps are dropped, with a warning once, even within ``history_s`` (live:
    ``app.time_travel.history_mb``)."""
    settings: Path | None = None
    """The panel's settings file, applied after ``setup``, saved when the App closes if
    the panel changed something. None: a file named by the title in the user's config
    folder (``~/.config/kelab/settings/`` on Linux; ``app.panel.settings_path``), which
    only a window uses: a headless App neither applies nor saves it."""

    def __post_init__(self) -> None:
        put = object.__setattr__
        if not isinstance(self.title, str):
            raise ValueError(must("App.title", "a str", self.title))
        size = self.size
        if (
            isinstance(size, (str, bytes))
            or not hasattr(size, "__len__")
            or len(size) != 2
            or not all(is_int(v) and v > 0 for v in size)
        ):
            raise ValueError(must("App.size", "two positive ints (width, height)", size))
        put(self, "size", (int(size[0]), int(size[1])))
        check_choice(self.backend, "App.backend", BACKENDS)
        if not isinstance(self.time_mode, TimeMode):
            modes = ", ".join(m.name for m in TimeMode)
            raise ValueError(must("App.time_mode", f"a ke.TimeMode ({modes})", self.time_mode))
        for name in _BOOLS:
            check_bool(getattr(self, name), f"App.{name}")
        put(self, "render_hz", _positive_or_none(self.render_hz, "App.render_hz"))
        put(self, "max_frame_delta", _positive_or_none(self.max_frame_delta, "App.max_frame_delta"))
        check_int(self.max_steps_per_frame, "App.max_steps_per_frame", low=1)
        check_int(self.steps_per_frame, "App.steps_per_frame", low=1)
        check_number(
            self.time_scale,
            "App.time_scale",
            low=0.0,
            low_open=True,
            high=MAX_TIME_SCALE,
            fix="use pause() to stop time",
        )
        if self.follow is not None and not isinstance(self.follow, str):
            raise ValueError(must("App.follow", "a body path (str) or None", self.follow))
        put(self, "background", _colour(self.background, "App.background"))
        if not isinstance(self.runner, str) or not self.runner:
            raise ValueError(must("App.runner", "a runner name (a non-empty str)", self.runner))
        if not isinstance(self.recording_dir, (str, os.PathLike)):
            raise ValueError(must("App.recording_dir", "a folder path", self.recording_dir))
        put(self, "recording_dir", Path(self.recording_dir))
        check_positive(self.drag_frequency_hz, "App.drag_frequency_hz")
        put(self, "history_s", check_history_s(self.history_s, "App.history_s"))
        put(self, "history_mb", check_history_mb(self.history_mb, "App.history_mb"))
        if self.menu_bar is not None:
            check_bool(self.menu_bar, "App.menu_bar", fix="or None: shown in a window only")
        if self.settings is not None:
            if not isinstance(self.settings, (str, os.PathLike)):
                raise ValueError(must("App.settings", "a file path or None", self.settings))
            put(self, "settings", Path(self.settings))

    @classmethod
    def merged(cls, config: AppConfig | None, settings: dict[str, object]) -> AppConfig:
        """``config`` (default: the defaults) with ``settings`` replacing its fields.

        What ``App(config, **settings)`` uses.

        Raises:
            TypeError: ``config`` is not an AppConfig, or a key is not a field.
        """
        if config is not None and not isinstance(config, AppConfig):
            raise TypeError(
                f"App's only positional argument is an AppConfig, got "
                f"{type(config).__name__} {config!r:.60}; pass settings by keyword instead "
                "(App(title=...))"
            )
        names = cls.field_names()
        unknown = sorted(set(settings) - set(names))
        if unknown:
            raise TypeError(
                f"App() got unknown settings {unknown}; the settings are the AppConfig fields "
                f"({', '.join(names)}) and the objects world, camera, timeline, clock, sleep"
            )
        if config is None:
            return cls(**settings)  # type: ignore[arg-type]
        return dataclasses.replace(config, **settings) if settings else config

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the settings (what ``App(**settings)`` accepts besides objects)."""
        return tuple(f.name for f in dataclasses.fields(cls))


class LiveSettings:
    """The App's settings that may change while it runs (``app.live``; see docs/app.md).

    Made from the `AppConfig` the App starts with; every assignment is checked as the
    config checks that field (a bad value raises and changes nothing). The F1, J and K
    hotkeys and the Settings panel change them here, and the App reads them here.

    Args:
        config: The starting values.

    Raises:
        AttributeError: Assigning a name that is not a live setting (`LIVE_SETTINGS`).
        ValueError: A bad value, naming the setting.
    """

    __slots__ = tuple(LIVE_SETTINGS)

    render_hz: float | None
    """Target frame rate (None: uncapped). Not applied in SIM_HIGH_PERF."""
    disable_viewport_rendering: bool
    """In SIM_HIGH_PERF, skip drawing the World while running."""
    hotkeys: bool
    """The default hotkeys (``kelab.app.hotkeys.HOTKEYS``) are on."""
    show_hud: bool
    """The HUD (F1) is shown."""
    interaction: bool
    """Pick and drag bodies with the left mouse button."""
    escape_quits: bool
    """Escape closes the App."""
    background: tuple[int, int, int]
    """Backdrop colour (three ints 0..255)."""
    drag_frequency_hz: float
    """Natural frequency of the drag spring (Hz > 0), used by the next drag."""
    show_joints: bool
    """Mark revolute joint pivots over the bodies (J toggles it; starts off)."""
    show_contacts: bool
    """Draw each body's contact force as an arrow (K toggles it; starts off)."""
    free_step_scripts: bool
    """Run ``App.free_update(dt)`` once per frame (off by default)."""

    def __init__(self, config: AppConfig) -> None:
        for name in LIVE_SETTINGS:
            object.__setattr__(self, name, getattr(config, name, False))

    def __setattr__(self, name: str, value: object) -> None:
        check = LIVE_SETTINGS.get(name)
        if check is None:
            raise AttributeError(
                f"App.live has no setting {name!r}; the live settings are "
                f"{', '.join(LIVE_SETTINGS)} (time settings are app.clock's)"
            )
        object.__setattr__(self, name, check(value, f"App.{name}"))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in LIVE_SETTINGS)
        return f"LiveSettings({inner})"
