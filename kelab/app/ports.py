"""The contexts the App hands to collaborators that several modules read (never the App).

Each collaborator of the App is given a small, typed context holding only what it uses,
and the App (`kelab.app.app`) builds them and wires the collaborators to each other:

- the ones one module reads live beside it: `~kelab.app.dragging.DragContext`,
  `~kelab.app.recordings.RecordingContext`, `~kelab.app.time_travel.TimeTravelContext`,
  `~kelab.app.sync.SyncContext`, `~kelab.app.hotkeys.HotkeyContext`;
- the ones here are read by several: `Controls` (the App's public controls, as the menu
  bar and the hotkeys call them) and `PanelContext` (the Settings panel's view of the
  App, read by every page of `kelab.app.panel`).

So no collaborator imports `kelab.app.app`, none holds the App, and each runs without
one (tests/app/test_collaborators.py builds them from fake contexts). To give a
collaborator more, add a field to its context and let the App fill it in.

Example:
    >>> import kelab as ke
    >>> app = ke.App(headless=True, size=(64, 48), render_hz=None)
    >>> context = app.panel.app  # the panel's PanelContext
    >>> list(context.timeline.runners), context.clock is app.clock
    (['Robot', 'Capture', 'Sync'], True)
    >>> app.close()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kelab.app.config import AppConfig, LiveSettings
    from kelab.app.hud import AppStats
    from kelab.app.recordings import Recordings
    from kelab.app.systems import EngineSystems
    from kelab.app.time_travel import TimeTravel
    from kelab.sim.world import World
    from kelab.timing.clock import FixedStepClock
    from kelab.timing.config import TimeMode
    from kelab.timing.timeline import Timeline

__all__ = ["Controls", "PanelContext"]


@dataclass(frozen=True)
class Controls:
    """The App's public controls, as its menu bar and hotkeys call them.

    The App fills each field with its own method (``App.toggle_pause``...), so a subclass
    that overrides one is called from the menu and the keys alike.
    """

    paused: Callable[[], bool]
    """Whether simulated time is paused."""
    pause: Callable[[], None]
    """Pause simulated time."""
    toggle_pause: Callable[[], None]
    """Pause or resume."""
    step_once: Callable[[], None]
    """One fixed step while paused."""
    panel_open: Callable[[], bool]
    """Whether the Settings panel is shown."""
    toggle_panel: Callable[[], None]
    """Show or hide the Settings panel."""
    recording: Callable[[], bool]
    """Whether the F9 video recording is on."""
    toggle_video_recording: Callable[[], None]
    """Start or stop the F9 video."""
    request_close: Callable[[], None]
    """Stop after this frame."""


@dataclass(frozen=True)
class PanelContext:
    """The App as the Settings panel (`kelab.app.panel`) sees it: every page's home.

    A page reads and changes the App only through these: the timeline (runners,
    bindings, execution order), the clock (time mode, scale, pause and step: the time
    settings' home), the live settings (drawing and interaction), the World (read only),
    the recorders, the engine's systems, the history and the frame statistics.
    """

    config: AppConfig
    """The start values: ``title``, ``runner`` (the main runner), ``recording_dir``."""
    live: LiveSettings
    """The live settings the panel edits (``disable_viewport_rendering``...)."""
    clock: FixedStepClock
    """The fixed-step clock: the home of the time settings."""
    timeline: Timeline
    """Runners and bindings."""
    world: World | None
    """The World (signals, sensors, actuators), if any."""
    recordings: Recordings
    """The attached recorders and the video (the Recorder page)."""
    systems: EngineSystems
    """The engine's own systems (the Subsystems and Time Manager pages)."""
    time_travel: TimeTravel
    """The history the timeline slider scrubs."""
    physics_dt: Callable[[], float | None]
    """The ``dt`` the World was last stepped with (None before its first step)."""
    stats: Callable[[], AppStats]
    """Frame statistics now (FPS, real-time factor...)."""
    set_time_mode: Callable[[TimeMode], None]
    """Switch the time mode (the clock restarts from now)."""
