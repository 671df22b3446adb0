"""The Settings panel's model: what every page shows and every change it can make.

Both backends draw this one model (`kelab.app.panel.ui` with Dear ImGui), and tests and
scripts drive it directly. Every change goes through the public API a script uses
(`TimeRunner.hz`, `Binding.rebind` / ``enabled``, `Timeline.add_runner` /
`remove_runner`, `Recorder.rebind`, `App.set_time_mode`, ``app.live``...), so it is
validated with the same errors; a refused change returns False and leaves the reason in
`PanelModel.message` (the panel shows it). It is given a `kelab.app.ports.PanelContext`
(timeline, clock, live settings, World, recordings, history, stats), never the App: a
new page reads and changes the App through those. No imgui here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kelab._validate import check_bool, check_number, must
from kelab.app.attributes import ReadOnlyAttributes
from kelab.app.panel.recorder_page import RecorderPage, RecorderRow, RunningRecorder
from kelab.app.panel.settings import (
    PAGES,
    RECORDER_KINDS,
    BindingSettings,
    PanelSettings,
    RecorderSettings,
    SettingsError,
    default_settings_path,
    load_settings,
    save_settings,
)
from kelab.app.panel.signals import (
    FRAME_SIGNALS,
    MAX_PUBLISHED,
    SignalHistory,
    read_signal,
    world_signals,
)
from kelab.app.recorders import Recorder
from kelab.app.systems import TimeManagerRow
from kelab.timing.config import TimeMode
from kelab.timing.timeline import (
    DEFAULT_NEW_RUNNER_HZ,
    MAX_RUNNERS,
    Binding,
    ExecutionOrderRow,
    Phase,
    TimeRunner,
    to_fraction,
)

if TYPE_CHECKING:
    from kelab.app.ports import PanelContext

__all__ = [
    "FRAME_SIGNALS",
    "BindingRow",
    "PanelModel",
    "RecorderRow",
    "RunnerRow",
    "SignalHistory",
]


class RunnerRow(NamedTuple):
    """One row of the Time Runners page."""

    name: str
    hz: float
    bindings: int
    removable: bool
    why_not: str


class BindingRow(NamedTuple):
    """One row of the Scripts or Subsystems page."""

    id: str
    label: str
    runner: str
    phase: Phase
    priority: int
    enabled: bool
    ts: float


class PanelModel(RecorderPage, ReadOnlyAttributes):
    """The pages of the Settings panel over one App (see the module docstring).

    Args:
        app: What it configures of the App (`kelab.app.ports.PanelContext`), kept as
            ``app``.
        settings_path: The settings file (None: `default_settings_path` of the title, in
            the user's config folder, which a headless App neither reads nor writes: see
            `settings_file_used`).
    """

    _read_only = frozenset(
        {"app", "settings_path", "settings_given", "plots", "recorder_settings", "last_files"}
    )

    def __init__(
        self, app: PanelContext, settings_path: str | os.PathLike[str] | None = None
    ) -> None:
        self.app = app
        self.settings_given = settings_path is not None
        """Whether the App named its settings file (``App(settings=path)``)."""
        self.settings_path = (
            Path(settings_path)
            if settings_path is not None
            else default_settings_path(app.config.title)
        )
        self._said: set[str] = set()  # "read" / "saved": the lines said about the file
        self._page = "Time Runners"
        self.open = False
        self.message = ""
        """Why the last change was refused ("" after a change that worked)."""
        self.settings_error: str | None = None
        """The error of a settings file that could not be used (the App kept defaults)."""
        self.dirty = False
        self.plots: list[str] = []
        self.recorder_settings: dict[str, RecorderSettings] = {
            k: RecorderSettings() for k in RECORDER_KINDS
        }
        self.last_files: dict[str, str] = {}
        self._running: dict[str, RunningRecorder] = {}
        self._history: dict[str, SignalHistory] = {s: SignalHistory() for s in FRAME_SIGNALS}
        self._published: dict[str, SignalHistory] = {}
        self._script_names: dict[TimeRunner, str] = {}
        """Each runner's name as the script made it (a settings file renames from it)."""
        self._note_script_names()
        app.timeline.add_rename_hook(self._recorder_renamed)

    def _note_script_names(self) -> None:
        for name, runner in self.app.timeline.runners.items():
            self._script_names.setdefault(runner, name)

    # ------------------------------------------------------------------ helpers
    def _do(self, fn: Callable[..., object], *args: object) -> bool:
        try:
            fn(*args)
        except Exception as exc:  # any refused or failed edit: a message, never a crash
            text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            self.message = str(text) or type(exc).__name__
            return False
        self.message = ""
        self.dirty = True
        return True

    @property
    def page(self) -> str:
        """The page shown (settable: one of `PAGES`, else a ValueError)."""
        return self._page

    @page.setter
    def page(self, page: str) -> None:
        if page not in PAGES:
            raise ValueError(must("panel page", f"one of {list(PAGES)}", page))
        self._page = page

    def set_page(self, page: str) -> bool:
        """Show ``page`` (one of `PAGES`); False with a message for another."""
        if page not in PAGES:
            self.message = f"page must be one of {list(PAGES)}, got {page!r}"
            return False
        self.page = page
        return True

    def settings_status(self) -> str:
        """The settings file's state, as the panel's footer says it.

        Returns:
            ``"not used (see above)"`` after a bad file, ``"not used (headless)"`` for the
            default file of a headless App, ``"unsaved changes"``, ``"not saved yet"``
            when there is no file, else ``"saved"``.
        """
        if self.settings_error:
            return "not used (see above)"
        if not self.settings_file_used:
            return "not used (headless)"
        if self.dirty:
            return "unsaved changes"
        return "saved" if self.settings_path.is_file() else "not saved yet"

    # ------------------------------------------------------------------ time runners
    @property
    def time_mode(self) -> TimeMode:
        """The scene time mode."""
        return self.app.clock.time_mode

    def set_time_mode(self, mode: TimeMode | str) -> bool:
        """Change the time mode (`App.time_mode`)."""

        def apply() -> None:
            value = mode
            if isinstance(mode, str):
                if mode.upper() not in TimeMode.__members__:
                    raise ValueError(
                        must("time mode", f"one of {list(TimeMode.__members__)}", mode)
                    )
                value = TimeMode[mode.upper()]
            if value is not self.app.clock.time_mode:
                self.app.set_time_mode(value)

        return self._do(apply)

    def set_disable_viewport_rendering(self, value: bool) -> bool:
        """Skip drawing while running in SIM_HIGH_PERF ("Disable Viewport Rendering")."""

        def apply() -> None:
            self.app.live.disable_viewport_rendering = check_bool(
                value, "disable_viewport_rendering"
            )

        return self._do(apply)

    def set_free_step_scripts(self, value: bool) -> bool:
        """Run the App's ``free_update(dt)`` every frame ("Enable Free Step Update Scripts")."""

        def apply() -> None:
            self.app.live.free_step_scripts = check_bool(value, "free_step_scripts")

        return self._do(apply)

    def runner_rows(self) -> list[RunnerRow]:
        """One row per runner: name, rate, bindings, and whether it can be removed."""
        timeline = self.app.timeline
        runners = timeline.runners
        rows = []
        for name, runner in runners.items():
            bound = [b.name for b in timeline.bindings if b.runner == name]
            why = ""
            if len(runners) == 1:
                why = "the last runner cannot be removed"
            elif name == (self.app.clock.runner or self.app.config.runner):
                why = "the App's main runner (its fixed steps) cannot be removed"
            elif bound:
                why = f"still has bindings ({', '.join(bound)}); bind them elsewhere first"
            rows.append(RunnerRow(name, runner.hz_float, len(bound), not why, why))
        return rows

    def _physics_binding(self) -> Binding | None:
        for b in self.app.timeline.bindings:
            if b.name == "world.step" and self._is_subsystem(b):
                return b
        return None

    def _check_physics_dt(self, runner: str, hz: object, what: str) -> None:
        """Refuse a change that would step a World with sensors at another ``dt``.

        The sensor pipelines count their delay, filter and sample interval in whole steps
        of the ``dt`` the World first stepped with, so the World refuses another one
        (``World.step: dt changed``) and the App would stop at its next step.

        Raises:
            ValueError: Naming the change, the sensors and the fixed ``dt``.
        """
        world = self.app.world
        if world is None or not world.scene.sensors:
            return
        fixed = self.app.physics_dt()
        step = self._physics_binding()
        if fixed is None and step is not None and world.step_count > 0:
            fixed = self.app.timeline.runner(step.runner).ts  # stepped before the App
        if fixed is None:
            return
        try:
            ts = float(1 / to_fraction(hz, f"runner {runner!r} hz"))
        except (ValueError, ZeroDivisionError, TypeError):
            return  # not a rate: the change itself raises its own error
        if ts != fixed:
            names = ", ".join(s.name for s in world.scene.sensors)
            raise ValueError(
                f"{what} would step the World at dt = {ts:.6g} s, but its sensors ({names}) "
                f"run at a fixed dt of {fixed:.6g} s (their delay and filter are counted in "
                f"steps); keep world.step on a runner of {1 / fixed:.6g} Hz"
            )

    def set_runner_hz(self, name: str, hz: float | Fraction) -> bool:
        """Set a runner's rate (`TimeRunner.hz`: from its next boundary, exact).

        Refused when ``world.step`` runs on that runner and the World has sensors (their
        ``dt`` is fixed, see `_check_physics_dt`).
        """

        def apply() -> None:
            runner = self.app.timeline.runner(name)
            step = self._physics_binding()
            if step is not None and step.runner == name and hz != runner.hz:
                self._check_physics_dt(name, hz, f"runner {name!r} at {hz} Hz with world.step")
            runner.hz = hz

        return self._do(apply)

    def rename_runner(self, old: str, new: str) -> bool:
        """Rename a runner (`TimeRunner.name`): every binding and recorder follows.

        Refused (False, with the reason in `message`) for an unknown runner, an empty
        name or one another runner has.
        """
        return self._do(lambda: setattr(self.app.timeline.runner(old), "name", new))

    def add_runner(self, name: str | None = None, hz: float = DEFAULT_NEW_RUNNER_HZ) -> bool:
        """Add a runner at 60 Hz, up to eight (the "Add Time Runner" button)."""
        timeline = self.app.timeline
        if name is None:
            k = len(timeline.runners)
            while f"Runner {k}" in timeline.runners:
                k += 1
            name = f"Runner {k}"
        if len(timeline.runners) >= MAX_RUNNERS:
            self.message = f"a scene holds at most {MAX_RUNNERS} runners; remove one first"
            return False
        return self._do(timeline.add_runner, name, hz)

    def remove_runner(self, name: str) -> bool:
        """Remove a runner; refused for the last one, the main one, or one with bindings."""
        for row in self.runner_rows():
            if row.name == name and not row.removable:
                self.message = f"runner {name!r} cannot be removed: {row.why_not}"
                return False
        return self._do(self.app.timeline.remove_runner, name)

    # ------------------------------------------------------------------ bindings
    def _binding_ids(self) -> list[tuple[str, Binding]]:
        seen: dict[str, int] = {}
        out = []
        for b in self.app.timeline.bindings:
            k = seen.get(b.name, 0) + 1
            seen[b.name] = k
            out.append((b.name if k == 1 else f"{b.name}#{k}", b))
        return out

    def _is_recorder(self, b: Binding) -> bool:
        return isinstance(getattr(b.callback, "__self__", None), Recorder)

    def _is_subsystem(self, b: Binding) -> bool:
        return self.app.systems.owns(b)

    def _row(self, bid: str, b: Binding, label: str) -> BindingRow:
        ts = self.app.timeline.runner(b.runner).ts
        return BindingRow(bid, label, b.runner, b.phase, b.priority, b.enabled, ts)

    def script_rows(self) -> list[BindingRow]:
        """The script callbacks (``fixed_update``, ``late_update`` and any bound callback)."""
        return [
            self._row(bid, b, bid)
            for bid, b in self._binding_ids()
            if not (self._is_recorder(b) or self._is_subsystem(b))
        ]

    def subsystem_rows(self) -> list[BindingRow]:
        """The engine's own systems (`App.systems`): physics, drag spring, sync points..."""
        systems = self.app.systems
        return [
            self._row(bid, b, systems[b.name].label)
            for bid, b in self._binding_ids()
            if self._is_subsystem(b)
        ]

    def binding(self, binding_id: str) -> Binding:
        """The binding with this row id (its name; ``name#2`` for a second one).

        Raises:
            KeyError: Naming the known ids.
        """
        ids = dict(self._binding_ids())
        if binding_id not in ids:
            raise KeyError(f"no callback {binding_id!r}; the callbacks are {list(ids)}")
        return ids[binding_id]

    def set_binding(
        self,
        binding_id: str,
        *,
        runner: str | None = None,
        phase: Phase | str | None = None,
        priority: int | None = None,
        enabled: bool | None = None,
    ) -> bool:
        """Rebind a callback (`Binding.rebind`) and/or turn it on or off."""

        def apply() -> None:
            b = self.binding(binding_id)
            if enabled is not None:
                check_bool(enabled, f"binding {b.name!r} enabled")
            if runner is not None and b is self._physics_binding() and runner != b.runner:
                hz = self.app.timeline.runner(runner).hz
                self._check_physics_dt(runner, hz, f"world.step on runner {runner!r} ({hz} Hz)")
            if runner is not None or phase is not None or priority is not None:
                b.rebind(runner=runner, phase=phase, priority=priority)
            if enabled is not None:
                b.enabled = enabled

        return self._do(apply)

    def world_systems(self) -> list[tuple[str, str]]:
        """The World's sensors and actuators (they run inside ``world.step``)."""
        world = self.app.world
        if world is None:
            return []
        rows = [(s.name, f"{s.kind} sensor") for s in world.scene.sensors]
        for joint in world.scene.joints:
            act = getattr(joint.spec, "actuator", None)
            if act is not None:
                rows.append((joint.path, type(act).__name__))
        return rows

    # ------------------------------------------------------------------ execution order
    def execution_order(self) -> list[ExecutionOrderRow]:
        """Every enabled system by phase and priority (`App.execution_order`)."""
        return list(self.app.timeline.execution_order())

    def time_manager_rows(self) -> list[TimeManagerRow]:
        """What the engine itself runs, by phase and priority, with runner, rate and cost."""
        return self.app.systems.rows()

    # ------------------------------------------------------------------ plots
    def available_signals(self) -> list[str]:
        """Every signal that can be plotted."""
        world = self.app.world
        out = list(FRAME_SIGNALS) + (world_signals(world) if world is not None else [])
        return out + [f"app.{name}" for name in self._published]

    def add_plot(self, signal: str) -> bool:
        """Plot a signal (see `available_signals`; ``app.NAME`` for `App.plot` values)."""

        def apply() -> None:
            if signal in self.plots:
                return
            if not signal.startswith("app.") and signal not in self.available_signals():
                raise ValueError(
                    f"no signal {signal!r}; choose one of available_signals() or app.NAME"
                )
            self.plots.append(signal)
            if signal not in self._history and not signal.startswith("app."):
                self._history[signal] = SignalHistory()

        return self._do(apply)

    def remove_plot(self, signal: str) -> bool:
        """Stop plotting a signal."""

        def apply() -> None:
            if signal not in self.plots:
                raise ValueError(f"{signal!r} is not plotted; plotted: {self.plots}")
            self.plots.remove(signal)
            if signal not in FRAME_SIGNALS:
                self._history.pop(signal, None)

        return self._do(apply)

    def publish(self, name: str, value: float, x: float) -> None:
        """Record a value a script publishes (`App.plot`) at simulated time ``x``.

        Raises:
            ValueError: For a non-string name, a non-finite value, or more than 64 names.
        """
        hist = self._published.get(name)
        if hist is None:
            if not isinstance(name, str) or not name:
                raise ValueError(must("App.plot name", "a non-empty str", name))
            if len(self._published) >= MAX_PUBLISHED:
                raise ValueError(
                    f"App.plot keeps at most {MAX_PUBLISHED} signals; {name!r} would be one more"
                )
            hist = self._published[name] = SignalHistory()
        hist.add(x, check_number(value, f"App.plot({name!r}) value"))

    def history(self, signal: str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` samples of a signal, oldest first (x: simulated seconds)."""
        if signal.startswith("app."):
            hist = self._published.get(signal[4:])
        else:
            hist = self._history.get(signal)
        if hist is None:
            return np.zeros(0), np.zeros(0)
        return hist.arrays()

    def sample(self, frame_time_s: float, steps: int, rtf: float) -> None:
        """Sample the frame statistics and the plotted World signals (once per frame)."""
        t = self.app.clock.sim_time
        h = self._history
        h["frame.time_ms"].add(t, frame_time_s * 1e3)
        h["frame.steps_per_frame"].add(t, float(steps))
        h["frame.real_time_factor"].add(t, rtf)
        world = self.app.world
        wanted = [s for s in self.plots if s in h and s not in FRAME_SIGNALS]
        if world is None or not wanted:
            return
        cache: dict[str, np.ndarray] = {}
        for sig in wanted:
            value = read_signal(world, sig, cache)
            if value is not None:
                h[sig].add(t, value)

    # ------------------------------------------------------------------ settings
    def current_settings(self) -> PanelSettings:
        """What the settings file would hold now."""
        timeline = self.app.timeline
        bindings = {
            bid: BindingSettings(b.runner, b.phase, b.priority, b.enabled)
            for bid, b in self._binding_ids()
            if not self._is_recorder(b)
        }
        return PanelSettings(
            time_mode=self.app.clock.time_mode,
            disable_viewport_rendering=self.app.live.disable_viewport_rendering,
            free_step_scripts=self.app.live.free_step_scripts,
            history_s=self.app.time_travel.history_s,
            runners=tuple((n, r.hz) for n, r in timeline.runners.items()),
            renamed=tuple(
                (self._script_names[r], n)
                for n, r in timeline.runners.items()
                if self._script_names.get(r, n) != n
            ),
            bindings=bindings,
            recorders=dict(self.recorder_settings),
            plots=tuple(self.plots),
            open=self.open,
            page=self.page,
        )

    @property
    def settings_file_used(self) -> bool:
        """Whether the App reads its settings file at start and saves it when it closes.

        A file the App named (``App(settings=path)``) always. The default one (in the
        user's config folder) only in a window: a headless run computes the same whatever
        a window saved there, and leaves it as it was (``App(settings=app.panel.
        settings_path)`` applies it on purpose).
        """
        return self.settings_given or not self.app.config.headless

    def _say(self, what: str, line: str) -> None:
        """Say once per App where the default settings file was read or written (stderr)."""
        if not self.settings_given and what not in self._said:
            self._said.add(what)
            print(f"kelab: {line}", file=sys.stderr, flush=True)

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the settings file atomically (default: `settings_path`)."""
        out = save_settings(self.current_settings(), path or self.settings_path)
        self.dirty = False
        if path is None:
            self._say(
                "saved",
                f"panel settings saved to {out} (the next window of this scene applies "
                "them; delete the file to go back to the defaults)",
            )
        return out

    def load(self, path: str | os.PathLike[str] | None = None) -> bool:
        """Read and apply a settings file, all or nothing.

        A missing file is not an error (defaults stay). A bad file leaves everything as it
        was and sets `settings_error` (and `message`) naming the field.

        Returns:
            True when a file was applied.
        """
        p = Path(path) if path is not None else self.settings_path
        self._note_script_names()  # the runners setup() added keep their script names
        if not p.exists():
            return False
        if path is None and not self.settings_file_used:  # headless: the window's file
            self._say(
                "read",
                f"panel settings in {p} not applied: a headless run uses the App's "
                "defaults (pass settings=<that file> to apply them)",
            )
            return False
        try:
            settings = load_settings(p)
            self.apply(settings, source=p)
        except SettingsError as exc:
            self.settings_error = self.message = str(exc)
            return False
        except (ValueError, RecursionError, OSError) as exc:  # never stops the App
            self.settings_error = self.message = (
                f"settings file {p}: the file must be readable settings, got "
                f"{type(exc).__name__} ({exc}); fix it or delete the file"
            )
            return False
        self.settings_error = None
        self.dirty = False
        if path is None:
            self._say("read", f"panel settings read from {p} (delete it for the defaults)")
        return True

    def apply(self, s: PanelSettings, source: Path | None = None) -> None:
        """Apply settings to the App, all or nothing.

        Raises:
            SettingsError: Naming the field, when they do not fit this App (an unknown
                runner, too many runners, ...); nothing was changed then.
        """
        where = f"settings file {source}" if source else "settings"
        timeline = self.app.timeline
        current = timeline.runners
        renames = self._renames(s, current, where)
        kept = [renames.get(n, n) for n in current]
        names = kept + [n for n, _ in s.runners if n not in kept]
        if len(names) > MAX_RUNNERS:
            raise SettingsError(
                f"{where}: runners must hold at most {MAX_RUNNERS} runners with the App's own, "
                f"got {len(names)}; remove some"
            )
        ids = dict(self._binding_ids())
        for bid, b in s.bindings.items():
            if b.runner not in names:
                raise SettingsError(
                    f"{where}: bindings.{bid}.runner must be one of the runners {names}, "
                    f"got {b.runner!r}; fix it or delete the file"
                )
        for kind, r in s.recorders.items():
            if r.runner not in names:
                raise SettingsError(
                    f"{where}: recorders.{kind}.runner must be one of the runners {names}, "
                    f"got {r.runner!r}; fix it or delete the file"
                )
        step = self._physics_binding()
        if step is not None:  # a World with sensors keeps its dt
            step_set = s.bindings.get("world.step")
            runner = step_set.runner if step_set is not None else step.runner
            rates = dict(s.runners)
            hz = rates[runner] if runner in rates else timeline.runner(runner).hz
            try:
                self._check_physics_dt(runner, hz, f"world.step on runner {runner!r} ({hz} Hz)")
            except ValueError as exc:
                raise SettingsError(f"{where}: {exc}; the defaults were kept") from None
        undo = self._snapshot()
        try:
            if s.time_mode is not None and s.time_mode is not self.app.clock.time_mode:
                self.app.set_time_mode(s.time_mode)
            if s.disable_viewport_rendering is not None:
                self.app.live.disable_viewport_rendering = s.disable_viewport_rendering
            if s.free_step_scripts is not None:
                self.app.live.free_step_scripts = s.free_step_scripts
            for old, new in renames.items():
                timeline.runner(old).name = new
            for name, hz in s.runners:
                if name in timeline.runners:
                    timeline.runner(name).hz = hz
                else:
                    timeline.add_runner(name, hz)
            for bid, bs in s.bindings.items():
                b = ids.get(bid)
                if b is None or self._is_recorder(b):
                    continue  # a callback this script no longer binds
                b.rebind(runner=bs.runner, phase=bs.phase, priority=bs.priority)
                b.enabled = bs.enabled
        except (ValueError, KeyError, RuntimeError) as exc:
            self._restore(undo)
            raise SettingsError(f"{where}: {exc}; the defaults were kept") from None
        if s.history_s is not None:  # checked by the file's reader: it cannot fail
            self.app.time_travel.history_s = s.history_s
        self.recorder_settings.update(s.recorders)
        self.plots[:] = [p for p in s.plots if p.startswith("app.") or p in self._plottable()]
        for p in self.plots:
            if not p.startswith("app."):
                self._history.setdefault(p, SignalHistory())
        if s.page is not None:
            self.page = s.page
        if s.open is not None:
            self.open = s.open

    def _renames(self, s: PanelSettings, current: dict[str, Any], where: str) -> dict[str, str]:
        """The renames of ``s`` that apply to this App: current name -> new name."""
        by_script = {self._script_names.get(r, n): n for n, r in current.items()}
        out = {}
        for source, new in s.renamed:
            name = by_script.get(source)
            if name is None or name == new:
                continue  # the script no longer makes that runner, or it has the name
            if new in current and current[new] is not current[name]:
                raise SettingsError(
                    f"{where}: runners: cannot rename {source!r} to {new!r}, the App already "
                    f"has a runner {new!r}; fix the file or delete it"
                )
            out[name] = new
        if len(set(out.values())) < len(out):
            raise SettingsError(f"{where}: runners: two runners renamed to one name; fix it")
        return out

    def _plottable(self) -> set[str]:
        try:
            return set(self.available_signals())
        except Exception:  # a World that cannot be read yet: keep the frame signals
            return set(FRAME_SIGNALS)

    def _snapshot(self) -> tuple[Any, ...]:
        timeline = self.app.timeline
        return (
            self.app.clock.time_mode,
            (self.app.live.disable_viewport_rendering, self.app.live.free_step_scripts),
            {n: r.hz for n, r in timeline.runners.items()},
            {r: n for n, r in timeline.runners.items()},
            [
                (b, timeline.runner(b.runner), b.phase, b.priority, b.enabled)
                for b in timeline.bindings
            ],
        )

    def _restore(self, undo: tuple[Any, ...]) -> None:
        mode, dvr, rates, names, bindings = undo
        timeline = self.app.timeline
        for b, runner, phase, priority, enabled in bindings:  # runner: the TimeRunner
            b.rebind(runner=runner.name, phase=phase, priority=priority)
            b.enabled = enabled
        for runner in timeline.runners.values():
            if runner not in names:
                timeline.remove_runner(runner.name)
        for runner, name in names.items():  # the old names back (via free ones: a swap)
            if runner.name != name:
                runner.name = f"\0{name}"
        for runner, name in names.items():
            runner.name = name
        for name, hz in rates.items():
            timeline.runner(name).hz = hz
        if self.app.clock.time_mode is not mode:
            self.app.set_time_mode(mode)
        self.app.live.disable_viewport_rendering, self.app.live.free_step_scripts = dvr
