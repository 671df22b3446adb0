"""App: the interactive, fixed-step main loop with a window, input, picking and recorders.

One frame (`App.renderFrameOnce`, the body of `App.start`'s loop):

1. **input**: window events (and injected ones) update `App.input`; hotkeys; picking,
   hovering and dragging;
2. ``pre_update()``;
3. **fixed steps**: the `FixedStepClock` decides how many (0..n); each fixed step runs one
   period of the main runner (``Robot``, 50 Hz) on the `Timeline`: the Robot boundary at
   the start of the period and every other runner's boundaries before the next one,
   phase-interleaved (ACQUISITION recorders, CONTROL ``fixed_update`` at priority -200,
   PHYSICS ``world.step``, VALIDATION ``late_update``, EXPORT), all inside
   `kelab.timing.guard.fixed_step_scope`;
4. ``pre_render()``, draw (clear, the World interpolated by ``alpha``, ``render(canvas,
   alpha)``, drag line, HUD), present, ``post_render()``;
5. frame pacing to ``render_hz`` (absolute deadlines, `precise_sleep`).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import check_int, must
from kelab.app.attributes import ReadOnlyAttributes
from kelab.app.config import AppConfig, LiveSettings
from kelab.app.dragging import DRAG_PRIORITY, DragContext, Dragging, DragHooks
from kelab.app.free_step import FrameDelta
from kelab.app.hooks import call_hook, check_assigned_hook, check_hook_methods, name_in_message
from kelab.app.hotkeys import HOTKEYS, HotkeyContext, apply_hotkey
from kelab.app.hud import AppStats, FrameStats, draw_hud
from kelab.app.input import Input, event_batch
from kelab.app.interaction import PickedBody
from kelab.app.menu import MenuBar
from kelab.app.overlays import VIEWPORT_OFF_PERIOD_S, OverlayLayout, draw_viewport_off
from kelab.app.panel.model import PanelModel
from kelab.app.panel_window import PanelWindow, require_imgui
from kelab.app.ports import Controls, PanelContext
from kelab.app.recorders import Recorder, VideoRecorder
from kelab.app.recordings import RecordingContext, Recordings
from kelab.app.scene_layers import draw_scene
from kelab.app.sync import SyncContext, SyncPoints
from kelab.app.systems import EngineSystems, RobotControllers
from kelab.app.time_travel import StateHooks, TimeTravel, TimeTravelContext
from kelab.app.view import ViewController
from kelab.render.camera import Camera
from kelab.render.events import InputEvent
from kelab.render.renderer import Renderer, create_renderer
from kelab.render.scenery import Ground, find_ground
from kelab.timing.clock import FixedStepClock
from kelab.timing.config import TimeMode
from kelab.timing.guard import ensure_not_in_fixed_step
from kelab.timing.pacer import SimulationPacer, precise_sleep
from kelab.timing.timeline import ON_UPDATE_PRIORITY, ExecutionOrder, Phase, Timeline

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas
    from kelab.sim.world import World

__all__ = ["DRAG_PRIORITY", "HOTKEYS", "App", "AppConfig"]


class App(ReadOnlyAttributes):
    """An interactive simulation: a window, a fixed-step clock driving a Timeline, a World.

    Subclass it and override the lifecycle hooks: `setup` (once, after the window and
    renderer exist), then every frame `pre_update`, `fixed_update` / `late_update` (zero
    or more times, on the Robot runner's fixed steps), `pre_render`, `render`,
    `post_render`; the interaction hooks `on_pick`, `on_pick_hover`, `on_drag_begin`,
    `on_drag_update`, `on_drag_end`; and, for a subclass with state of its own that
    `seek` should rewind, `state_dict` / `load_state_dict`. Bind other callbacks to any
    runner, phase and priority with ``app.timeline.bind(...)``; `execution_order` shows
    the table.

    The App wires its parts: each collaborator (``dragging``, ``recordings``,
    ``time_travel``, ``sync``, ``menu``, ``panel``, ``panel_window``) is given a small
    context of what it uses (`kelab.app.ports`), never the App, and the App connects them
    (a time-travel branch reaches the recordings through ``on_branch``).

    Settings come as one `AppConfig` (``App(config=AppConfig(...))``) or, the shorthand,
    as keywords naming its fields (``App(title="Cartpole", headless=True)`` builds the
    same AppConfig); keywords given with a config replace those fields of it.
    ``app.config`` keeps what the App started with.

    Args:
        config: The settings (`AppConfig`; default: ``AppConfig()`` plus ``settings``).
        world: A ``kelab.World`` to step (main runner, PHYSICS phase) and draw.
        camera: The view (default: the scene's first camera, else centre (0, 1), zoom
            100 px/m).
        timeline: A Timeline to drive (default: a new one with Robot 50 Hz, Capture 30 Hz).
        clock: The wall clock in seconds (inject a fake one in tests).
        sleep: Sleeps for frame pacing (inject a fake one in tests).
        **settings: `AppConfig` fields (title, size, headless, render_hz...; see
            `AppConfig` for each).

    Raises:
        ValueError: A bad setting (naming it), or a ``world`` that is not a World.
        TypeError: A keyword that is no `AppConfig` field.

    Example:
        >>> import kelab as ke
        >>> class Counter(ke.App):
        ...     steps = 0
        ...     def fixed_update(self, ts):
        ...         self.steps += 1
        >>> app = Counter(headless=True, time_mode=ke.TimeMode.SIM_HIGH_PERF, render_hz=None)
        >>> app.start(max_frames=10)
        >>> app.steps, app.frame_count
        (10, 10)
    """

    _read_only = frozenset(
        "config live world view input timeline clock renderer overlays dragging recordings "
        "panel panel_window sync menu systems time_travel".split()
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's hooks must take their arguments: refused at the class statement."""
        super().__init_subclass__(**kwargs)
        check_hook_methods(cls)

    def __setattr__(self, name: str, value: object) -> None:
        """Set an attribute; a hook (`fixed_update`, `on_pick`...) must take its arguments.

        Raises:
            ValueError: ``app.fixed_update = 5`` (or a function of the wrong arguments),
                at the assignment rather than at the next frame (nothing is set).
            AttributeError: A read-only or held-for-life name (`reserved_names`).
        """
        check_assigned_hook(name, value)
        super().__setattr__(name, value)

    def __init__(
        self,
        config: AppConfig | None = None,
        *,
        world: World | None = None,
        camera: Camera | None = None,
        timeline: Timeline | None = None,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = precise_sleep,
        **settings: Any,
    ) -> None:
        cfg = AppConfig.merged(config, settings)
        if cfg.disable_viewport_rendering and cfg.time_mode is not TimeMode.SIM_HIGH_PERF:
            warnings.warn(
                "App.disable_viewport_rendering=True acts only in SIM_HIGH_PERF, and "
                f"time_mode is {cfg.time_mode.name}: the World is drawn until the mode "
                "switches (app.set_time_mode, the panel); pass "
                "time_mode=ke.TimeMode.SIM_HIGH_PERF, or leave it False",
                UserWarning,
                stacklevel=2,
            )
        if world is not None and not all(
            hasattr(world, a) for a in ("step", "body_poses", "body_names", "scene")
        ):
            raise ValueError(
                must("App.world", "a ke.World (step, body_poses, body_names, scene)", world)
            )
        if camera is not None and not isinstance(camera, Camera):
            raise ValueError(must("App.camera", "a ke.Camera", camera))
        if cfg.panel:
            require_imgui("App(panel=True)")
        self.config = cfg
        """The `AppConfig` the App was made with (never changed: the live values are in
        `live` and `clock`)."""
        self.live = LiveSettings(cfg)
        """The settings that change while the App runs (`LiveSettings`: ``render_hz``,
        ``show_hud``, ``hotkeys``, ``show_joints``...); the hotkeys and the panel edit them."""
        self.world = world
        view = ViewController(cfg.follow)
        if world is not None:
            view.check_follow(world)  # now, not at the first frame (without a World: unused)
        self.view = view
        """Camera follow, wheel zoom, drag-to-pan and reset (`ViewController`)."""
        self._last_draw_wall: float | None = None
        self._ground: Ground | None = None
        self.input = Input()
        """Keyboard and mouse state (`Input`)."""
        self._owns_timeline = timeline is None
        self.timeline = timeline if timeline is not None else Timeline()
        self.timeline.runner(cfg.runner)  # KeyError naming the runners
        self._wall = clock
        self._sleep = sleep
        self.clock = FixedStepClock.for_timeline(
            self.timeline,
            cfg.runner,
            time_mode=cfg.time_mode,
            max_steps_per_frame=cfg.max_steps_per_frame,
            clock=clock,
            steps_per_frame=cfg.steps_per_frame,
            time_scale=cfg.time_scale,
            max_frame_delta=cfg.max_frame_delta,
        )
        """The `FixedStepClock`, the home of the time settings (``time_scale``,
        ``max_frame_delta``, ``last_frame_steps``...): one fixed step = one period of the
        main runner, which it follows when that runner's rate changes; it clamps long
        frames. Change its mode with `set_time_mode`."""
        self._camera = camera
        self.renderer: Renderer | None = None
        """The renderer, once the window is open (`setup` and later)."""
        self._opened = False
        self._closed = False
        self._ran_order: ExecutionOrder | None = None  # the table as it was when closed
        self._close_requested = False
        self._close_after_frame = False  # close() was called from inside a frame
        self._frames = 0
        self._drawn = 0
        self._alpha = 1.0
        self._prev_poses: np.ndarray | None = None
        self._physics_dt: float | None = None
        self._last_off_frame: float | None = None
        self.overlays = OverlayLayout()
        """This frame's overlays: place your own with ``app.overlays.place(canvas, box)``
        in `render`; the App's (Settings panel, notices, HUD, REC badge) keep clear."""
        self._last_pixels: np.ndarray | None = None
        self._events: list[InputEvent] = []
        self._pacer: SimulationPacer | None = None
        self._stats = FrameStats()
        self._frame_dt = FrameDelta()
        # each hook read from the App when called: one assigned on the instance counts
        hooks = DragHooks(
            on_pick=lambda body: self.on_pick(body),
            on_pick_hover=lambda body: self.on_pick_hover(body),
            on_drag_begin=lambda body: self.on_drag_begin(body),
            on_drag_update=lambda body, target: self.on_drag_update(body, target),
            on_drag_end=lambda body: self.on_drag_end(body),
        )
        self.dragging = Dragging(
            DragContext(world, self.input, self.live, camera=lambda: self.camera, hooks=hooks)
        )
        """Picking, hovering and dragging bodies with the mouse (`Dragging`)."""
        self.recordings = Recordings(
            RecordingContext(
                self.timeline,
                world,
                renderer=lambda: self.renderer,
                recording_dir=cfg.recording_dir,
                title=cfg.title,
            )
        )
        """The attached recorders and the F9 video recording (`Recordings`)."""
        self.time_travel = TimeTravel(
            TimeTravelContext(
                world,
                self.timeline,
                self.clock,
                self.input,
                self.dragging,
                hooks=hooks,
                state=self._state_hooks(),
                recorders=lambda: self.recordings.recorders,
                on_branch=self.recordings.set_branch,
            ),
            cfg.history_s,
            cfg.history_mb,
        )
        """History, seek, redo and branches (`TimeTravel`; docs/app.md "Time travel")."""
        self._in_frame = False
        runner = cfg.runner
        self._bindings = [
            self.timeline.bind(
                self._fixed_update,
                runner,
                Phase.CONTROL,
                ON_UPDATE_PRIORITY,
                name="fixed_update",
            ),
            self.timeline.bind(self._late_update, runner, Phase.VALIDATION, 0, name="late_update"),
        ]
        self.systems = EngineSystems(self.timeline)
        """The engine's own systems, bound and timed per call (`EngineSystems`)."""
        self._controllers = RobotControllers(self.systems, world)
        if world is not None:
            self._bindings.append(
                self.systems.add(
                    "drag_spring",
                    "Mouse drag spring",
                    self._drag_step,
                    runner,
                    Phase.CONTROL,
                    DRAG_PRIORITY,
                )
            )
            self._bindings += self._controllers.bind(runner)
            self._bindings.append(
                self.systems.add(
                    "world.step", "Physics (World.step)", self._physics, runner, Phase.PHYSICS, 0
                )
            )
        self.sync = SyncPoints(
            SyncContext(
                self.timeline,
                self.clock,
                world,
                owner=self,
                on_calls_ran=self.time_travel.note_unreplayed_code,
            )
        )
        """Other threads' calls, run on the App's thread at its sync points (`SyncPoints`)."""
        self._bindings.append(self.sync.bind(self.systems, runner))
        controls = Controls(
            paused=lambda: self.paused,
            pause=self.pause,
            toggle_pause=self.toggle_pause,
            step_once=self.step_once,
            panel_open=lambda: self.panel_open,
            toggle_panel=self.toggle_panel,
            recording=lambda: self.recording,
            toggle_video_recording=self.toggle_video_recording,
            request_close=self.request_close,
        )
        self._hotkeys = HotkeyContext(
            controls,
            self.input,
            self.live,
            self.view,
            camera=lambda: None if self.renderer is None else self.renderer.camera,
            seek_key=self.time_travel.hotkey,
        )
        shown = cfg.menu_bar if cfg.menu_bar is not None else not cfg.headless
        self.menu = MenuBar(
            controls,
            shown,
            save_png=self.write_pixels_png,
            folder=cfg.recording_dir,
            title=cfg.title,
        )
        """The window's menu bar: Edit -> Settings (F2), pause, step, record... (`MenuBar`)."""
        self.panel = PanelModel(
            PanelContext(
                config=cfg,
                live=self.live,
                clock=self.clock,
                timeline=self.timeline,
                world=world,
                recordings=self.recordings,
                systems=self.systems,
                time_travel=self.time_travel,
                physics_dt=lambda: self.physics_dt,
                stats=lambda: self.stats,
                set_time_mode=self.set_time_mode,
            ),
            cfg.settings,
        )
        """The Settings panel's model: its pages and changes (F2 shows it; docs/app.md)."""
        self.panel.open = cfg.panel
        self.panel_window = PanelWindow(self.panel, clock, self.clock, lambda: self.stats)
        """Shows the panel in the window: its ImGui host and settings file (`PanelWindow`)."""

    def _state_hooks(self) -> StateHooks:
        """The `state_dict` / `load_state_dict` hooks as time travel calls them.

        Each is read from the App when called (one assigned on the instance counts). A
        subclass outside KELab that defines not both is named, with the hook it lacks,
        for seek's warning (its own attributes are not rewound).
        """
        return StateHooks(
            lambda: self.state_dict(),
            lambda state: self.load_state_dict(state),
            undeclared=self._undeclared_state_hooks,
        )

    def _undeclared_state_hooks(self) -> str | None:
        """What seek's warning says this App lacks of the state hooks (None: nothing)."""
        cls = type(self)
        if cls.__module__.startswith("kelab."):  # KELab's Apps keep no state but the World's
            return None
        has = {
            name: name in self.__dict__ or getattr(cls, name) is not getattr(App, name)
            for name in ("state_dict", "load_state_dict")
        }
        if all(has.values()):
            return None
        if not any(has.values()):
            return f"{cls.__name__} does not define state_dict()/load_state_dict()"
        lacks, only = sorted(has, key=has.get)
        return f"{cls.__name__} does not define {lacks}() (only {only}())"

    # ================================================================ lifecycle hooks
    def setup(self) -> None:
        """Called once, after the window and renderer exist, before the first frame."""

    def pre_update(self) -> None:
        """Called once per frame, after input, before the frame's fixed steps."""

    def fixed_update(self, ts: float) -> None:
        """Called on each fixed step (Robot runner, CONTROL phase, priority -200).

        Args:
            ts: The runner's step in seconds (0.02 at 50 Hz).
        """

    def late_update(self, ts: float) -> None:
        """Called after each fixed step's physics (Robot runner, VALIDATION phase).

        Args:
            ts: The runner's step in seconds.
        """

    def free_update(self, dt: float) -> None:
        """Called once per frame after its fixed steps, when `free_step_scripts` is on.

        Args:
            dt: This frame's own, variable step: its wall time (at most
                ``max_frame_delta``) times the time scale; 0.0 first and while paused.
        """

    def pre_render(self) -> None:
        """Called once per drawn frame, before drawing."""

    def render(self, canvas: Canvas, alpha: float) -> None:
        """Draw here (the World, if any, is already drawn).

        Args:
            canvas: The frame's `kelab.Canvas`.
            alpha: Interpolation fraction of a fixed step in [0, 1] (the clock's
                ``alpha`` in the real-time modes; 1.0 when paused or in SIM_HIGH_PERF).
        """

    def post_render(self) -> None:
        """Called once per drawn frame, after the frame was presented."""

    def state_dict(self) -> Any:
        """The subclass's own state, for `seek` to rewind (default: None, no state).

        Override it, with `load_state_dict`, in a subclass that keeps state of its own (a
        counter, a controller's integrator, a Generator): `seek` saves a deep copy with
        each keyframe, compares it by value every step (`kelab.app.state_values`) and
        hands it back to `load_state_dict`. Without both, `seek` warns once that the
        subclass's attributes are not rewound (docs/app.md, "Time travel").

        Returns:
            A value time travel can keep (a dict of numbers, arrays, Generators...), or
            None for no state.
        """
        return None

    def load_state_dict(self, state: Any) -> None:
        """Return the subclass to a `state_dict` (a deep copy of it); default: nothing.

        Args:
            state: What `state_dict` returned.
        """

    def on_pick(self, body: PickedBody) -> None:
        """Called when the left button is pressed over a body."""

    def on_pick_hover(self, body: PickedBody) -> None:
        """Called every frame while the cursor is over a body (and nothing is dragged)."""

    def on_drag_begin(self, body: PickedBody) -> None:
        """Called when a dynamic body is grabbed (left button pressed on it)."""

    def on_drag_update(self, body: PickedBody, target: tuple[float, float]) -> None:
        """Called every frame while dragging, with the spring's target (metres)."""

    def on_drag_end(self, body: PickedBody) -> None:
        """Called when the drag ends (button released, copy reset, or App closed)."""

    # ================================================================ properties
    @property
    def canvas(self) -> Canvas:
        """The renderer's canvas (after the window opened)."""
        if self.renderer is None:
            raise RuntimeError(
                "the App has no canvas yet: it opens in start() or renderFrameOnce()"
            )
        return self.renderer.canvas

    @property
    def camera(self) -> Camera:
        """The camera (pan and zoom it freely)."""
        if self.renderer is not None:
            return self.renderer.camera
        if self._camera is None:
            self._camera = self._default_camera()
        return self._camera

    @property
    def frame_count(self) -> int:
        """Loop iterations run so far (drawn or skipped)."""
        return self._frames

    @property
    def drawn_frames(self) -> int:
        """Frames actually drawn."""
        return self._drawn

    @property
    def alpha(self) -> float:
        """The interpolation fraction used for the last drawn frame."""
        return self._alpha

    @property
    def sim_time(self) -> float:
        """Simulated seconds: ``app.clock.sim_time``, kept for scripts that draw it."""
        return self.clock.sim_time

    @property
    def paused(self) -> bool:
        """Whether simulated time is paused: ``app.clock.paused``, kept for scripts."""
        return self.clock.paused

    def set_time_mode(self, mode: TimeMode) -> None:
        """Switch the clock's `TimeMode` while running; the clock restarts from now.

        Raises:
            ValueError: ``mode`` is not a TimeMode (the clock's error; nothing changed).
        """
        self.clock.time_mode = mode  # the clock's setter validates it
        self.clock.reset()

    @property
    def free_step_scripts(self) -> bool:
        """Whether `free_update` runs every frame (settable; ``app.live`` holds it)."""
        return self.live.free_step_scripts

    @free_step_scripts.setter
    def free_step_scripts(self, value: bool) -> None:
        self.live.free_step_scripts = value

    @property
    def physics_dt(self) -> float | None:
        """The ``dt`` the App last stepped the World with (None before its first step)."""
        return self._physics_dt

    @property
    def hovered(self) -> PickedBody | None:
        """The body under the cursor, if any."""
        return self.dragging.hovered

    @property
    def dragged(self) -> PickedBody | None:
        """The body being dragged, if any."""
        return self.dragging.dragged

    @property
    def drag_target(self) -> tuple[float, float] | None:
        """Where the drag spring pulls (metres), while dragging."""
        return self.dragging.target

    @property
    def stats(self) -> AppStats:
        """FPS, real-time factor, steps per frame and runner rates (what F1 shows)."""
        fps, rtf, rates = self._stats.rates()
        runners = list(self.timeline.runners.values())
        return AppStats(
            fps=fps,
            real_time_factor=rtf,
            steps_per_frame=self.clock.last_frame_steps,
            sim_time=self.clock.sim_time,
            frames=self._frames,
            paused=self.clock.paused,
            time_scale=self.clock.time_scale,
            time_mode=self.clock.time_mode.name,
            dropped_wall_time=self.clock.dropped_wall_time,
            runner_hz={r.name: r.hz_float for r in runners},
            runner_rates={r.name: v for r, v in zip(runners, rates, strict=False)},
            rewound=self.time_travel.rewound_at,
        )

    # ================================================================ controls
    def pause(self) -> None:
        """Pause simulated time (frames keep drawing)."""
        self.clock.pause()

    def resume(self) -> None:
        """Resume simulated time from now (the paused wall time is not simulated)."""
        self.clock.resume()

    def toggle_pause(self) -> None:
        """Pause if running, resume if paused."""
        if self.clock.paused:
            self.resume()
        else:
            self.pause()

    def step_once(self) -> None:
        """While paused, run exactly one fixed step on the next frame."""
        self.clock.step_once()

    # ================================================================ recorders (app.recordings)
    @property
    def recorders(self) -> tuple[Recorder, ...]:
        """The attached recorders (``app.recordings.recorders``)."""
        return self.recordings.recorders

    @property
    def recording(self) -> bool:
        """Whether the F9 video recording is on."""
        return self.recordings.video is not None

    def add_recorder(self, recorder: Recorder) -> Recorder:
        """Attach a recorder (bound to its runner and phase); the App closes it when it stops.

        Returns:
            The recorder.

        Raises:
            RuntimeError: After the App closed.
        """
        return self.recordings.add(recorder)

    def remove_recorder(self, recorder: Recorder) -> None:
        """Close a recorder and forget it (its file is complete)."""
        self.recordings.remove(recorder)

    def start_video_recording(
        self, path: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> VideoRecorder:
        """Start recording the drawn frames to a video (what F9 does).

        Args:
            path: ``.mp4`` or ``.gif``; default ``recording_dir/<title>-NNN.mp4`` (the
                first free number).
            **kwargs: More `VideoRecorder` options (runner, phase, fps...).

        Returns:
            The recorder.
        """
        return self.recordings.start_video(path, **kwargs)

    def stop_video_recording(self) -> Path | None:
        """Stop the video recording; return its file (None if none was running)."""
        return self.recordings.stop_video()

    def toggle_video_recording(self) -> None:
        """Start or stop the video recording (F9), saying where the file goes."""
        self.recordings.toggle_video()

    # ================================================================ time travel (app.time_travel)
    @property
    def fixed_step(self) -> int:
        """Fixed steps run since the start (after a `seek`: the step sought)."""
        return self.time_travel.fixed_step

    @property
    def history(self) -> range:
        """The fixed steps `seek` can return to (at least the last ``history_s`` seconds)."""
        return self.time_travel.history

    def seek(self, step: int) -> None:
        """Return exactly to fixed step ``step``: World, timeline, clock, inputs, state.

        The App subclass's own attributes come back through its `state_dict` /
        `load_state_dict` hooks (without them, a warning, once). Running on redoes the
        recorded future until a new input starts a branch (docs/app.md, "Time travel").

        A seek is all or nothing: where ``load_state_dict`` or a re-run step raises, the
        App is put back as it was (a drag in progress has ended) and the error propagates.

        Raises:
            TypeError: ``step`` is not an int.
            ValueError: ``step`` is not in `history`, or ``state_dict()`` returned a
                value time travel cannot keep (one that holds itself, for one).
            RuntimeError: Called from inside a fixed step, or after `close`.
        """
        self.time_travel.seek(step)

    # ================================================================ timeline
    def execution_order(self) -> ExecutionOrder:
        """Every bound callback grouped by phase and sorted by priority (a table).

        After `close` (also when `start` returns): the table as it was when the App
        closed, recorders included (closing detaches them from the timeline).
        """
        if self._ran_order is not None:
            return self._ran_order
        return self.timeline.execution_order()

    @property
    def panel_open(self) -> bool:
        """Whether the Settings panel is shown (settable; F2 toggles it)."""
        return self.panel.open

    @panel_open.setter
    def panel_open(self, value: bool) -> None:
        self.panel_window.open = value  # True or False; True needs imgui-bundle

    def toggle_panel(self) -> None:
        """Show or hide the Settings panel (what F2 does; without imgui-bundle: a warning)."""
        self.panel_window.toggle()

    def plot(self, name: str, value: float) -> None:
        """Publish a value to the panel's Plots page as ``app.NAME`` (at the timeline time).

        Cheap enough to call every fixed step; the last 1200 values per name are kept.

        Raises:
            ValueError: For a non-finite value or a non-string name.
        """
        self.panel.publish(name, value, self.timeline.time_s)

    def request_close(self) -> None:
        """Ask the loop to stop after the current frame."""
        self._close_requested = True

    def should_close(self) -> bool:
        """Whether the loop stops: window closed, `request_close`, or the App closed."""
        if self._closed or self._close_requested:
            return True
        return self.renderer is not None and self.renderer.should_close

    def inject_event(self, event: InputEvent) -> None:
        """Queue a synthetic input event; the next frame handles it like a window event."""
        if not isinstance(event, InputEvent):
            raise ValueError(must("App.inject_event(event)", "a ke.InputEvent", event))
        self._events.append(event)

    def inject_events(self, events: Iterable[InputEvent] | InputEvent) -> None:
        """Queue several synthetic events, oldest first (one `InputEvent` is also taken).

        Raises:
            ValueError: ``events`` is not an iterable of `InputEvent` (none is queued).
        """
        self._events.extend(event_batch(events, "App.inject_events(events)"))

    # ================================================================ pixels
    def read_rgb_pixels(self, flip_y: bool = True) -> np.ndarray:
        """Return the last drawn frame as a ``(height, width, 3)`` uint8 array.

        Works in both backends, windowed or headless, also after the App closed.

        Args:
            flip_y: True: the top row first (image order); False: the bottom row first.
        """
        if self.renderer is not None and not self.renderer.closed and self.renderer.frame_count:
            return self.renderer.read_rgb_pixels(flip_y=flip_y)
        if self._last_pixels is None:
            raise RuntimeError("no frame was drawn yet; call start() or renderFrameOnce() first")
        img = self._last_pixels
        return img.copy() if flip_y else np.ascontiguousarray(img[::-1])

    def write_pixels_png(self, path: str | os.PathLike[str]) -> Path:
        """Save the last drawn frame as a PNG file (parent folders are created).

        Returns:
            The path written.
        """
        from kelab.render.pygame_door import pygame

        img = self.read_rgb_pixels(flip_y=True)
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        h, w = img.shape[:2]
        pygame.image.save(pygame.image.frombuffer(img.tobytes(), (w, h), "RGB"), str(out), "PNG")
        return out

    # ================================================================ the loop
    def start(self, max_frames: int | None = None) -> None:
        """Run the loop until the window closes, `request_close`, or ``max_frames`` frames.

        The App closes when the loop ends (recorders flushed, window closed), also when
        a callback raised: the exception then propagates with the callback's name in
        its message.

        Args:
            max_frames: Stop after this many frames (None: no limit).
        """
        if max_frames is not None:
            check_int(max_frames, "App.start max_frames", low=0, fix="or None for no limit")
        ensure_not_in_fixed_step(
            "App.start()", "Start the App from the top level of your program, not a callback."
        )
        if self._closed:
            raise RuntimeError("this App was closed; create a new one to run again")
        try:
            self._open()
            frames = 0
            while not self.should_close() and (max_frames is None or frames < max_frames):
                self._frame()
                frames += 1
        except BaseException:
            self._close_after_error()
            raise
        self.close()

    def renderFrameOnce(self) -> bool:  # noqa: N802 - the reference API's name
        """Run exactly one loop iteration: input, frame scheduling (fixed steps), drawing.

        For manually driven loops. Despite the name it also processes input and advances
        the fixed-step clock; never call it from inside a fixed step.

        Returns:
            False once the App should close (then call `close`).

        Raises:
            RuntimeError: When called from inside a fixed step, or after `close`.
        """
        ensure_not_in_fixed_step(
            "App.renderFrameOnce()",
            "It runs a whole frame (input, fixed steps, drawing), which would nest a frame "
            "inside a fixed step. Keep per-step work in fixed_update() and call "
            "renderFrameOnce() from your own top-level loop.",
        )
        if self._in_frame:
            raise RuntimeError(
                "App.renderFrameOnce() was called from inside a frame callback (pre_update, "
                "render, ...); call it only from your own top-level loop"
            )
        if self._closed:
            raise RuntimeError("this App was closed; renderFrameOnce() can no longer run")
        try:
            self._open()
            if not self._close_after_frame:  # setup() may have closed the App
                self._frame()
        except BaseException:
            self._close_after_error()
            raise
        if self._close_after_frame:
            self.close()
        return not self.should_close()

    render_frame_once = renderFrameOnce

    def close(self) -> None:
        """Close recorders (files complete) and the window; calling it again does nothing.

        Called from inside a frame (a callback, a sync call), it refuses sync calls at
        once; the frame runs to its end, and the App closes before the frame returns.
        """
        if self._closed:
            return
        if self._in_frame:  # the frame still uses the window: close once it is done
            self._close_after_frame = self._close_requested = True
            self.sync.close()
            return
        self._closed = True
        self._ran_order = self.timeline.execution_order()  # before recorders detach
        errors: list[BaseException] = []
        if self.dragging.dragged is not None:
            try:
                self.dragging.release()
            except Exception as exc:  # keep closing; report after
                errors.append(exc)
        self.sync.close()
        self.time_travel.close()  # its history let go; seek() raises from now on
        errors += self.recordings.close()
        errors += self.panel_window.close()  # the settings file saved if changed
        if not self._owns_timeline:  # the caller's timeline outlives the App: unbind ours
            for binding in self._bindings:
                binding.unbind()
            self.sync.remove_runner()
        if self.renderer is not None:
            try:
                if not self.renderer.closed and self.renderer.frame_count:
                    self._last_pixels = self.renderer.read_rgb_pixels(flip_y=True)
            finally:
                self.renderer.close()
        if errors:
            raise errors[0]

    def _close_after_error(self) -> None:
        """Close everything while an exception propagates (never masks it)."""
        try:
            self.close()
        except Exception:  # the original error matters more
            pass

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._close_after_error()

    def __repr__(self) -> str:
        cfg = self.config
        state = "closed" if self._closed else ("open" if self._opened else "new")
        return (
            f"<{type(self).__name__} {cfg.title!r} {cfg.backend} "
            f"{'headless' if cfg.headless else 'window'} {state} frames={self._frames}>"
        )

    # ================================================================ internals
    def _default_camera(self) -> Camera:
        cams = getattr(getattr(self.world, "scene", None), "cameras", ()) if self.world else ()
        if cams:
            return Camera.from_spec(cams[0], self.config.size)
        return Camera(center=(0.0, 1.0), zoom=100.0, size=self.config.size)

    def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        c = self.config
        self.__dict__["renderer"] = create_renderer(
            c.backend, size=c.size, title=c.title, headless=c.headless, vsync=c.vsync
        )
        cam = self._camera if self._camera is not None else self._default_camera()
        self.renderer.camera = cam
        self.renderer.canvas.outlines = True  # bodies get a darker edge
        self.view.remember_home(cam)
        if self.world is not None:
            self._ground = find_ground(self.world.scene)
        self._camera = None
        self._in_frame = True
        try:
            call_hook("setup", self.setup)
        finally:
            self._in_frame = False
        self.panel_window.load()

    def _frame(self) -> None:
        self._in_frame = True
        try:
            self._process_input()
            call_hook("pre_update", self.pre_update)
            self._run_fixed_steps()
            dt = self._frame_dt.next(self._wall(), self.clock)
            if self.live.free_step_scripts:
                call_hook("free_update", self.free_update, dt)
            if self._draws():
                self._draw()
            else:
                self._draw_viewport_off()
            self._frames += 1
            self._stats.add(
                self._wall(),
                self.clock.sim_time,
                tuple(r.steps for r in self.timeline.runners.values()),
            )
            self._pace()
        except Exception as exc:
            name_in_message(exc, "frame")
            raise
        finally:
            self._in_frame = False

    def _pace(self) -> None:
        hz = self.live.render_hz
        if hz is None or self.clock.time_mode is TimeMode.SIM_HIGH_PERF:
            self._pacer = None
            return
        if self._pacer is None or self._pacer.step_dt != 1.0 / hz:
            self._pacer = SimulationPacer(1.0 / hz, clock=self._wall, sleep=self._sleep)
        self._pacer.wait()

    def _draws(self) -> bool:
        return not (
            self.live.disable_viewport_rendering
            and self.clock.time_mode is TimeMode.SIM_HIGH_PERF
            and not self.clock.paused
        )

    # -- input ------------------------------------------------------------------------------
    def _process_input(self) -> None:
        inp = self.input
        inp.begin_frame()
        assert self.renderer is not None
        events = self.renderer.poll_events()
        if self._events:
            events = events + self._events
            self._events = []
        for ev in events:
            if self.menu.feed(ev) or self.panel_window.feed(ev):
                continue  # the Settings panel consumed it
            inp.handle(ev)
            if self.view.handle(ev, self.renderer.camera, self.dragging.hovered is not None):
                continue  # a zoom or a pan, not a click
            if ev.kind == "quit":
                self.request_close()
            elif ev.kind == "key_down" and self.live.hotkeys:
                apply_hotkey(self._hotkeys, ev.key)
            elif ev.kind in ("mouse_down", "mouse_up", "mouse_move"):
                self._update_mouse_world()
                if ev.kind == "mouse_down" and ev.button == 1:
                    self.dragging.press()
                elif ev.kind == "mouse_up" and ev.button == 1:
                    self.dragging.release()
        self._update_mouse_world()
        self.dragging.frame()

    def _update_mouse_world(self) -> None:
        if self.input.mouse_pos is not None and self.renderer is not None:
            self.input.mouse_world = self.renderer.camera.screen_to_world(self.input.mouse_pos)

    # -- fixed steps ------------------------------------------------------------------------
    def _run_fixed_steps(self) -> None:
        self.clock.tick_timeline(self.timeline, before_step=self.time_travel.before_step)
        self.time_travel.close_step()

    def _fixed_update(self, ts: float) -> None:
        self.fixed_update(ts)

    def _late_update(self, ts: float) -> None:
        self.late_update(ts)

    def _drag_step(self, ts: float) -> None:
        self.dragging.step(ts)
        self.time_travel.drag_step(ts)

    def _physics(self, ts: float) -> None:
        self._prev_poses = self.world.body_poses
        self._controllers.sync()  # the PD update mode robot_controllers' binding asks for
        self.world.step(ts)
        self._physics_dt = ts

    # -- drawing ----------------------------------------------------------------------------
    def _draw(self) -> None:
        renderer = self.renderer
        assert renderer is not None
        interpolating = not (self.clock.paused or self.clock.time_mode is TimeMode.SIM_HIGH_PERF)
        self._alpha = float(self.clock.alpha) if interpolating else 1.0
        call_hook("pre_render", self.pre_render)
        renderer.begin_frame()
        canvas = renderer.canvas
        now = self._wall()
        dt = 0.0 if self._last_draw_wall is None else now - self._last_draw_wall
        self._last_draw_wall = now
        if self.world is not None:
            self.view.update(canvas.camera, self.world, dt, self._prev_poses, self._alpha)
        draw_scene(
            canvas,
            self.world,
            self._alpha,
            self._prev_poses,
            background=self.live.background,
            ground=self._ground,
            show_contacts=self.live.show_contacts,
            show_joints=self.live.show_joints,
        )
        self.overlays.begin_frame(self._keep_clear(renderer.size), top=self.menu.height)
        call_hook("render", self.render, canvas, self._alpha)
        self.dragging.draw(canvas)
        self._draw_overlays(canvas)
        if self.panel.open:
            self.panel_window.frame(renderer)  # sample the plots, build the ImGui frame
        renderer.end_frame()
        self.menu.after_frame()  # a screenshot asked for from the menu: this frame, menu closed
        self._drawn += 1
        call_hook("post_render", self.post_render)

    def _draw_viewport_off(self) -> None:
        """Viewport rendering is off: a plain frame saying so, now and then."""
        now = self._wall()
        last = self._last_off_frame
        period = VIEWPORT_OFF_PERIOD_S[self.panel.open]
        if self.renderer is None or (last is not None and now - last < period):
            return
        self._last_off_frame = now
        draw_viewport_off(
            self.renderer,
            self.overlays,
            self.live.background,
            self._keep_clear,
            self._draw_overlays,
            self.panel_window.frame if self.panel.open else None,
        )
        self.menu.after_frame()

    def _keep_clear(self, size: tuple[int, int]) -> list[tuple[int, int, int, int]]:
        """What the overlays keep clear of: the panel's window and the menu bar."""
        return self.panel_window.rects(size) + self.menu.rects(size)

    def _draw_overlays(self, canvas: Canvas) -> None:
        """The App's own text, each placed clear of the rest (`OverlayLayout`)."""
        lay = self.overlays
        self.menu.draw(canvas)
        notice = self.panel_window.notice()
        if notice is not None:
            lay.notice(canvas, [notice], (255, 200, 120))
        if self.live.show_hud:
            lay.add(draw_hud(canvas, self.stats, lay.rects))
        self.recordings.draw_badge(canvas, lay.rects)
