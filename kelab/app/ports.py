"""What the App's collaborators know of it: one narrow Protocol each, never the App.

The App (`kelab.app.app.App`) owns collaborators (``app.dragging``, ``app.recordings``,
``app.panel``, ``app.panel_window``, the hotkeys) that need a little of it. Each one
is given the App typed as the Protocol below that lists only what it uses, so none of
them imports `kelab.app.app` (not even for typing) and the import graph has no circle:
``app.py`` sits on top, these ports under the collaborators, the data types under them.
The App satisfies every Protocol as it is (structural typing; no base class).

To give a collaborator more of the App, add the member to its Protocol here (a public
member of the App), never pass it the App class. This module imports nothing of KELab
at run time.

Example:
    >>> import kelab as ke
    >>> from kelab.app.ports import PanelApp
    >>> def runner_names(app: PanelApp) -> list[str]:
    ...     return list(app.timeline.runners)
    >>> runner_names(ke.App(headless=True))
    ['Robot', 'Capture', 'Sync']
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kelab.app.config import AppConfig, LiveSettings
    from kelab.app.hud import AppStats
    from kelab.app.input import Input
    from kelab.app.interaction import DragSpring, PickedBody
    from kelab.app.recorders import Recorder, VideoRecorder
    from kelab.app.systems import EngineSystems
    from kelab.app.view import ViewController
    from kelab.render.camera import Camera
    from kelab.render.renderer import Renderer
    from kelab.sim.world import World
    from kelab.timing.clock import FixedStepClock
    from kelab.timing.config import TimeMode
    from kelab.timing.timeline import Timeline

__all__ = [
    "DragHost",
    "DraggingPort",
    "HistoryPort",
    "HotkeyHost",
    "MenuHost",
    "PanelApp",
    "RecordingHost",
    "RecordingsPort",
    "StatsHost",
    "SyncHost",
    "SyncPort",
    "TimeKeysPort",
    "TimeTravelHost",
]


class DragHost(Protocol):
    """What `kelab.app.dragging.Dragging` uses: the World, the cursor, the hooks."""

    @property
    def world(self) -> World | None:
        """The World whose bodies are picked and dragged."""

    @property
    def input(self) -> Input:
        """The mouse state (``mouse_world``)."""

    @property
    def live(self) -> LiveSettings:
        """``interaction`` and ``drag_frequency_hz``."""

    @property
    def camera(self) -> Camera:
        """The view (its zoom sets the pick tolerance)."""

    def on_pick(self, body: PickedBody) -> None:
        """The pick hook."""

    def on_pick_hover(self, body: PickedBody) -> None:
        """The hover hook."""

    def on_drag_begin(self, body: PickedBody) -> None:
        """The drag-begin hook."""

    def on_drag_update(self, body: PickedBody, target: tuple[float, float]) -> None:
        """The drag-update hook."""

    def on_drag_end(self, body: PickedBody) -> None:
        """The drag-end hook."""


class RecordingHost(Protocol):
    """What `kelab.app.recordings.Recordings` uses: the timeline, World and frames."""

    @property
    def timeline(self) -> Timeline:
        """Where recorders bind."""

    @property
    def world(self) -> World | None:
        """What data recorders read."""

    @property
    def renderer(self) -> Renderer | None:
        """Where video frames come from (None before the window opens)."""

    @property
    def config(self) -> AppConfig:
        """``recording_dir`` and ``title`` (the F9 video's default path)."""


class HotkeyHost(Protocol):
    """What `kelab.app.hotkeys.apply_hotkey` uses: the App's public controls."""

    @property
    def time_travel(self) -> TimeKeysPort:
        """Left / Right / Home seek while paused."""

    @property
    def input(self) -> Input:
        """``mods``: Shift makes Left / Right jump one second."""

    @property
    def paused(self) -> bool:
        """Whether simulated time is paused."""

    @property
    def live(self) -> LiveSettings:
        """``show_hud``, ``escape_quits``, ``show_joints``, ``show_contacts``."""

    @property
    def view(self) -> ViewController:
        """Follow and reset the view."""

    @property
    def renderer(self) -> Renderer | None:
        """The window's camera (None before it opens)."""

    def pause(self) -> None:
        """Pause simulated time."""

    def toggle_pause(self) -> None:
        """Pause or resume."""

    def step_once(self) -> None:
        """One fixed step while paused."""

    def toggle_panel(self) -> None:
        """Show or hide the Settings panel."""

    def toggle_video_recording(self) -> None:
        """Start or stop the F9 video."""

    def request_close(self) -> None:
        """Stop after this frame."""


class SyncHost(Protocol):
    """What `kelab.app.sync.SyncPoints` uses: what submitted calls get, what it publishes."""

    @property
    def timeline(self) -> Timeline:
        """Where the sync points bind (the ``Sync`` runner)."""

    @property
    def clock(self) -> FixedStepClock:
        """``current_step`` and the time at its end (what a published state names)."""

    @property
    def world(self) -> World | None:
        """The body states published."""


class SyncPort(Protocol):
    """The App's sync points (`kelab.app.sync.SyncPoints`) as the panel sees them."""

    @property
    def pending(self) -> int:
        """Calls waiting for the next sync point."""

    def run(self, ts: float) -> None:
        """One sync point (the bound system)."""


class MenuHost(Protocol):
    """What `kelab.app.menu.MenuBar` uses: the App's controls and state."""

    @property
    def config(self) -> AppConfig:
        """``recording_dir`` and ``title`` (the screenshot's path)."""

    @property
    def paused(self) -> bool:
        """Whether simulated time is paused."""

    @property
    def panel_open(self) -> bool:
        """Whether the Settings panel is shown."""

    @property
    def recording(self) -> bool:
        """Whether the video recording is on."""

    def toggle_panel(self) -> None:
        """Show or hide the Settings panel."""

    def toggle_pause(self) -> None:
        """Pause or resume."""

    def step_once(self) -> None:
        """One fixed step while paused."""

    def toggle_video_recording(self) -> None:
        """Start or stop the video."""

    def write_pixels_png(self, path: str | os.PathLike[str]) -> Path:
        """Save the last frame."""

    def request_close(self) -> None:
        """Stop after this frame."""


class StatsHost(Protocol):
    """What `kelab.app.panel_window.PanelWindow` samples: the clock and the stats."""

    @property
    def clock(self) -> FixedStepClock:
        """``last_frame_steps``."""

    @property
    def stats(self) -> AppStats:
        """``real_time_factor``."""


class RecordingsPort(Protocol):
    """The recorders an App holds, as the Settings panel starts and stops them."""

    @property
    def recorders(self) -> tuple[Recorder, ...]:
        """The attached recorders."""

    @property
    def video(self) -> VideoRecorder | None:
        """The video recording, while one runs."""

    @property
    def branch(self) -> int:
        """The time-travel branch the data recorders write (settable)."""

    @branch.setter
    def branch(self, value: int) -> None: ...

    def add(self, recorder: Recorder) -> Recorder:
        """Attach a recorder."""

    def remove(self, recorder: Recorder) -> None:
        """Close a recorder and forget it."""

    def start_video(
        self, path: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> VideoRecorder:
        """Start the video recording."""

    def stop_video(self) -> Path | None:
        """Stop the video recording; its file."""


class PanelApp(Protocol):
    """The App as the Settings panel (`kelab.app.panel`) sees it; every page's home.

    A page reads and changes the App only through these: the timeline (runners,
    bindings, execution order), the clock (time mode, scale, pause and step: the
    time settings' home), the live settings (drawing and interaction), the World
    (read only), the recorders, and the frame statistics.
    """

    @property
    def config(self) -> AppConfig:
        """The start values: ``title``, ``runner`` (the main runner), ``recording_dir``."""

    @property
    def live(self) -> LiveSettings:
        """The live settings the panel edits (``disable_viewport_rendering``...)."""

    @property
    def clock(self) -> FixedStepClock:
        """The fixed-step clock: the home of the time settings."""

    @property
    def timeline(self) -> Timeline:
        """Runners and bindings."""

    @property
    def world(self) -> World | None:
        """The World (signals, sensors, actuators), if any."""

    @property
    def recordings(self) -> RecordingsPort:
        """The attached recorders."""

    @property
    def physics_dt(self) -> float | None:
        """The ``dt`` the World was last stepped with."""

    @property
    def sync(self) -> SyncPort:
        """The sync points (their binding is a subsystem)."""

    @property
    def systems(self) -> EngineSystems:
        """The engine's own systems (the Subsystems and Time Manager pages)."""

    @property
    def stats(self) -> AppStats:
        """Frame statistics (FPS, real-time factor...)."""

    @property
    def time_travel(self) -> HistoryPort:
        """The history the timeline slider scrubs."""

    def set_time_mode(self, mode: TimeMode) -> None:
        """Switch the time mode (the clock restarts from now)."""


class TimeTravelHost(Protocol):
    """What `kelab.app.time_travel.TimeTravel` uses: the state it saves and re-runs."""

    @property
    def config(self) -> AppConfig:
        """``runner``: the main runner (whose rate sets the history's length in steps)."""

    @property
    def world(self) -> World | None:
        """Snapshotted and restored; its bodies and controls are digested per step."""

    @property
    def timeline(self) -> Timeline:
        """Its time is saved; re-run steps run on it."""

    @property
    def clock(self) -> FixedStepClock:
        """Its simulated time is saved and restored."""

    @property
    def input(self) -> Input:
        """What each fixed step saw (`Input.step_view`), replayed."""

    @property
    def dragging(self) -> DraggingPort:
        """The user's drag (logged per step; released by a seek)."""

    @property
    def live(self) -> LiveSettings:
        """``drag_frequency_hz`` of a logged drag."""

    @property
    def recordings(self) -> RecordingsPort:
        """Recorders muted while a seek re-runs steps."""

    def on_drag_begin(self, body: PickedBody) -> None:
        """Called where a re-run or a redo passes a logged drag's start."""

    def on_drag_end(self, body: PickedBody) -> None:
        """Called where a replayed drag ends (its end logged, or a branch lets go)."""


class TimeKeysPort(Protocol):
    """The App's time travel (`kelab.app.time_travel.TimeTravel`) as the hotkeys use it."""

    def hotkey(self, key: str | None, shift: bool) -> bool:
        """Seek for Left / Right / Home; whether the key was one of them."""


class HistoryPort(Protocol):
    """The App's time travel (`kelab.app.time_travel.TimeTravel`) as the panel's slider sees it."""

    @property
    def fixed_step(self) -> int:
        """The fixed step the App stands at."""

    @property
    def history(self) -> range:
        """The steps one can seek to."""

    @property
    def branch(self) -> int:
        """The current branch (0: the first timeline)."""

    @property
    def branch_points(self) -> tuple[int, ...]:
        """Where the branches still in the history started."""

    @property
    def history_s(self) -> float:
        """Seconds of history kept (settable)."""

    @history_s.setter
    def history_s(self, value: float) -> None: ...

    def seek(self, step: int) -> None:
        """Return exactly to fixed step ``step``."""


class DraggingPort(Protocol):
    """The App's drag (`kelab.app.dragging.Dragging`) as time travel sees it."""

    @property
    def dragged(self) -> PickedBody | None:
        """The body dragged now."""

    @property
    def target(self) -> tuple[float, float] | None:
        """The drag target."""

    @property
    def spring(self) -> DragSpring | None:
        """The drag's spring (its frequency, the force it holds)."""

    def release(self) -> None:
        """End the drag."""
