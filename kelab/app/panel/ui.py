"""Draws the Settings panel's pages with Dear ImGui and ImPlot (imgui-bundle).

Every widget reads the `PanelModel` and calls it on change; the drawing keeps no state of
its own besides text being edited. `PanelUI.rows` records the row labels each page drew
in the last frame, so tests can check what a page showed without reading pixels.
"""

from __future__ import annotations

from typing import Any

from imgui_bundle import imgui, implot

from kelab.app.overlays import panel_rect
from kelab.app.panel.history import HistoryStrip
from kelab.app.panel.model import BindingRow, PanelModel
from kelab.app.panel.settings import PAGES, RECORDER_KINDS
from kelab.app.panel.signals import FRAME_SIGNALS, signal_groups
from kelab.timing.config import TimeMode
from kelab.timing.timeline import MAX_RUNNERS, Phase

__all__ = ["PanelUI"]

TIME_MODE_LABELS = {
    TimeMode.GAME_REALTIME: "Game Realtime (Non-Deterministic)",
    TimeMode.SIM_REALTIME: "Sim Realtime (Deterministic Capped)",
    TimeMode.SIM_HIGH_PERF: "Sim High Perf. (Deterministic Uncapped)",
}
PHASES = [p.name.capitalize() for p in Phase]
_RED = imgui.ImVec4(1.0, 0.45, 0.4, 1.0)
_GREY = imgui.ImVec4(0.65, 0.67, 0.7, 1.0)
_PHASE = imgui.ImVec4(0.55, 0.75, 1.0, 1.0)
_ENTER = imgui.InputTextFlags_.enter_returns_true.value
_AUTO = implot.AxisFlags_.auto_fit.value
PLOT_REFRESH_S = 0.1
"""The Plots page (its data, values and frame statistics) is redrawn 10 times a second."""
IDLE_REFRESH_S = 0.5
"""The other pages are rebuilt at least this often when nothing they show changed."""
_NO_LEGEND = (implot.Flags_.no_legend | implot.Flags_.no_menus).value


class PanelUI:
    """The ImGui drawing of a `PanelModel`.

    Call `draw` once per frame, between ``imgui.new_frame()`` and ``imgui.render()``.

    Args:
        model: The model shown and changed.
        width: Panel width in pixels (it opens at the window's top right; drag to move).
    """

    def __init__(self, model: PanelModel, width: int = 440) -> None:
        self.model = model
        self.width = width
        self.rect = (0, 0, 0, 0)
        """The panel window ``(x, y, w, h)`` in pixels, as drawn last frame."""
        self.rows: dict[str, list[str]] = {}
        """Row labels each page drew last frame (only the shown page draws)."""
        self._paths: dict[str, str] = {}
        self._plot_time = self._stats_time = -1.0
        self._plot_data: dict[str, Any] = {}
        self._stats_text = ""
        self._new_name = ""
        self._names: dict[str, str] = {}  # runner names being edited
        self.checkbox_rects: dict[str, tuple[int, int, int, int]] = {}
        """Where the page's own checkboxes were drawn (setting -> rect), for tests."""
        self.combo_rects: dict[str, tuple[int, int, int, int]] = {}
        """Each binding row's runner combo (``"<binding id>.runner"`` -> rect), for tests."""
        self.combo_item_rects: dict[str, tuple[int, int, int, int]] = {}
        """The open runner combo's items (runner name -> rect), for tests."""
        self.name_rects: dict[str, tuple[int, int, int, int]] = {}
        """Each runner's name field ``(x0, y0, x1, y1)`` on the Time Runners page."""
        self.elided: dict[str, str] = {}
        """Texts shown shortened last frame (shown -> full text, which hovering shows)."""
        self.elided_rects: dict[str, tuple[int, int, int, int]] = {}
        """Where each elided text was drawn ``(x0, y0, x1, y1)`` (full text -> rect)."""
        self.overflow: list[str] = []
        """Texts drawn past the panel's edge last frame (always empty: a check for tests)."""
        self.tooltip = ""
        """The tooltip shown last frame ("" for none)."""
        self.tabs: dict[str, tuple[int, int, int, int]] = {}
        """Each page tab's screen rectangle ``(x0, y0, x1, y1)`` as drawn last frame."""
        self.footer = ""
        """The footer's file line as drawn last frame (``name (saved)``...)."""
        self.history = HistoryStrip(model)
        """The timeline slider under the tabs (scrubs the App's history; docs/app.md)."""

    # ------------------------------------------------------------------ change
    def shown_key(self) -> tuple[Any, ...]:
        """What the current page shows, as a comparable value (cheap: no drawing).

        The host rebuilds the ImGui frame when it changes; the Plots page's scrolling
        data is not part of it (it is redrawn every `PLOT_REFRESH_S` instead).
        """
        m = self.model
        page = m.page
        common = (page, m.message, m.settings_status(), m.settings_error, m.settings_path)
        common += self.history.key()
        shown: tuple[Any, ...]
        if page == "Time Runners":
            shown = (m.time_mode, m.app.live.disable_viewport_rendering, tuple(m.runner_rows()))
        elif page == "Scripts":
            shown = (m.app.live.free_step_scripts, tuple(m.script_rows()))
        elif page == "Subsystems":
            shown = (tuple(m.subsystem_rows()), tuple(m.world_systems()), m.app.world is None)
        elif page == "Recorder":
            shown = (
                tuple(m.recorder_settings.items()),
                tuple(m.recording(k) for k in RECORDER_KINDS),
                tuple(m.last_files.items()),
                tuple(m.recorder_rows()),
                str(m.app.config.recording_dir),
            )
        elif page == "Execution Order":
            shown = tuple(m.execution_order())
        elif page == "Time Manager":  # the costs refresh every IDLE_REFRESH_S
            shown = tuple(r[:7] for r in m.time_manager_rows())
        else:
            shown = tuple(m.plots)
        return common + shown

    def refresh_s(self) -> float:
        """The longest the current page goes without being rebuilt (seconds)."""
        return PLOT_REFRESH_S if self.model.page == "Plots" else IDLE_REFRESH_S

    # ------------------------------------------------------------------ frame
    def draw(self, display: tuple[int, int]) -> None:
        """Draw the panel window for this frame."""
        m = self.model
        # top right, about 60 % of the height: the scene stays visible on the left
        x0, y0, x1, y1 = panel_rect(display, self.width)
        first = imgui.Cond_.first_use_ever.value
        imgui.set_next_window_pos(imgui.ImVec2(x0, y0), first)
        imgui.set_next_window_size(imgui.ImVec2(x1 - x0, y1 - y0), first)
        flags = imgui.WindowFlags_.no_collapse.value
        imgui.begin("Settings (F2)", None, flags)
        pos, size = imgui.get_window_pos(), imgui.get_window_size()
        self.rect = (int(pos.x), int(pos.y), int(size.x + 0.999), int(size.y + 0.999))
        if m.settings_error:
            imgui.push_text_wrap_pos(0.0)
            imgui.text_colored(_RED, f"Settings file not used: {m.settings_error}")
            imgui.pop_text_wrap_pos()
        col = (imgui.get_content_region_avail().x - 16) / 3
        for i, page in enumerate(PAGES):
            if i % 3:
                imgui.same_line()
            if imgui.selectable(page, m.page == page, 0, imgui.ImVec2(col, 0))[0]:
                m.set_page(page)
            lo, hi = imgui.get_item_rect_min(), imgui.get_item_rect_max()
            self.tabs[page] = (int(lo.x), int(lo.y), int(hi.x), int(hi.y))
        imgui.separator()
        self.history.draw()
        imgui.separator()
        page = m.page
        self.rows[page] = []
        self.elided, self.elided_rects, self.overflow, self.tooltip = {}, {}, [], ""
        # the footer (a wrapped message above the file line) keeps the room it needs
        footer_h = imgui.get_frame_height_with_spacing() + 4
        if m.message:
            wrap = imgui.get_content_region_avail().x
            footer_h += imgui.calc_text_size(m.message, False, wrap).y
            footer_h += imgui.get_style().item_spacing.y
        imgui.begin_child("page", imgui.ImVec2(0, -footer_h))
        getattr(self, "_" + page.lower().replace(" ", "_"))()
        imgui.end_child()
        if m.message:
            self._wrapped(m.message, _RED)
        self.footer = f"{m.settings_path.name} ({m.settings_status()})"
        imgui.align_text_to_frame_padding()
        self._fit(self.footer, _GREY, reserve=imgui.calc_text_size("Save").x + 24)
        imgui.same_line()
        if imgui.small_button("Save"):
            try:
                m.save()
            except OSError as exc:
                m.message = f"could not save {m.settings_path}: {exc}"
        imgui.end()

    # ------------------------------------------------------------------ text that fits
    def _check_edge(self, text: str, right: float) -> None:
        if imgui.get_item_rect_max().x > right + 1.0:
            self.overflow.append(text)

    def _wrapped(self, text: str, color: imgui.ImVec4 | None = None) -> None:
        """Text wrapped at the panel's edge (messages)."""
        right = imgui.get_cursor_screen_pos().x + imgui.get_content_region_avail().x
        imgui.push_text_wrap_pos(0.0)
        if color is None:
            imgui.text(text)
        else:
            imgui.text_colored(color, text)
        imgui.pop_text_wrap_pos()
        self._check_edge(text, right)

    def _fit(self, text: str, color: imgui.ImVec4 | None = None, reserve: float = 0.0) -> None:
        """Text on one line, shortened with "..." when it does not fit (full on hover)."""
        avail = imgui.get_content_region_avail().x - reserve
        right = imgui.get_cursor_screen_pos().x + avail
        shown = text
        if imgui.calc_text_size(text).x > avail:
            lo, hi = 0, len(text)
            while lo < hi:  # the longest prefix that fits with the "..."
                mid = (lo + hi + 1) // 2
                if imgui.calc_text_size(text[:mid] + "...").x <= avail:
                    lo = mid
                else:
                    hi = mid - 1
            shown = text[:lo] + "..."
            self.elided[shown] = text
        if color is None:
            imgui.text(shown)
        else:
            imgui.text_colored(color, shown)
        if shown is not text:
            lo_, hi_ = imgui.get_item_rect_min(), imgui.get_item_rect_max()
            self.elided_rects[text] = (int(lo_.x), int(lo_.y), int(hi_.x), int(hi_.y))
            if imgui.is_item_hovered():
                self._tooltip(text)
        self._check_edge(shown, right)

    def _tooltip(self, text: str) -> None:
        """A tooltip wrapped at about the panel's width."""
        self.tooltip = text
        imgui.begin_tooltip()
        imgui.push_text_wrap_pos(imgui.get_font_size() * 30)
        imgui.text(text)
        imgui.pop_text_wrap_pos()
        imgui.end_tooltip()

    @staticmethod
    def _item_rect() -> tuple[int, int, int, int]:
        lo, hi = imgui.get_item_rect_min(), imgui.get_item_rect_max()
        return (int(lo.x), int(lo.y), int(hi.x), int(hi.y))

    def _row(self, label: str) -> None:
        self.rows[self.model.page].append(label)

    def _runner_combo(self, label: str, current: str, key: str | None = None) -> str | None:
        """A runner combo: the runner picked in it, or None (``key``: record its rects)."""
        picked = None
        opened = imgui.begin_combo(label, current)
        if key is not None and not opened:  # while open the last item is the popup's
            self.combo_rects[key] = self._item_rect()
        if opened:
            for name in self.model.app.timeline.runners:
                if imgui.selectable(name, name == current)[0] and name != current:
                    picked = name
                self.combo_item_rects[name] = self._item_rect()
            imgui.end_combo()
        return picked

    def _phase_combo(self, label: str, current: Phase) -> Phase | None:
        changed, new = imgui.combo(label, int(current), PHASES)
        return Phase(new) if changed else None

    # ------------------------------------------------------------------ pages
    def _time_runners(self) -> None:
        m = self.model
        modes = list(TIME_MODE_LABELS)
        imgui.text("Scene Time Mode")
        imgui.set_next_item_width(-1)
        changed, idx = imgui.combo(
            "##mode", modes.index(m.time_mode), list(TIME_MODE_LABELS.values())
        )
        if changed:
            m.set_time_mode(modes[idx])
        if m.time_mode is TimeMode.SIM_HIGH_PERF:
            changed, value = imgui.checkbox(
                "Disable Viewport Rendering", m.app.live.disable_viewport_rendering
            )
            if changed:
                m.set_disable_viewport_rendering(value)
        imgui.separator()
        for i, row in enumerate(m.runner_rows()):
            self._row(f"Runner {i}: {row.name}")
            imgui.push_id(f"runner{i}")
            imgui.align_text_to_frame_padding()
            start = imgui.get_cursor_pos_x()  # "Runner i", then the name, editable (Enter)
            imgui.text(f"Runner {i}")
            imgui.same_line(start + 62)
            imgui.set_next_item_width(94)
            text = self._names.get(row.name, row.name)
            changed, text = imgui.input_text("##name", text, _ENTER)
            self.name_rects[row.name] = self._item_rect()
            if changed:
                self._names.pop(row.name, None)
                m.rename_runner(row.name, text)
            elif imgui.is_item_active():
                self._names[row.name] = text
            else:
                self._names.pop(row.name, None)
            if imgui.is_item_hovered() and not imgui.is_item_active():
                self._tooltip(f"{row.name}: click to rename, Enter to apply")
            imgui.same_line(start + 162)
            imgui.set_next_item_width(80)
            changed, hz = imgui.input_float("Hz", row.hz, 0.0, 0.0, "%.2f", _ENTER)
            if changed:
                m.set_runner_hz(row.name, float(hz))
            imgui.same_line()
            imgui.text_colored(_GREY, f"{1000.0 / row.hz:5.1f} ms")
            imgui.same_line()
            imgui.begin_disabled(not row.removable)
            if imgui.small_button("Remove"):
                m.remove_runner(row.name)
            imgui.end_disabled()
            if not row.removable and imgui.is_item_hovered(
                imgui.HoveredFlags_.allow_when_disabled.value
            ):
                self._tooltip(f"{row.name} cannot be removed: {row.why_not}")
            imgui.pop_id()
        n = len(m.app.timeline.runners)
        if imgui.button(f"Add Time Runner ({n}/{MAX_RUNNERS})"):
            m.add_runner()

    def _binding_rows(self, rows: list[BindingRow]) -> None:
        m = self.model
        for row in rows:
            self._row(row.label)
            imgui.push_id(row.id)
            changed, on = imgui.checkbox("##on", row.enabled)
            if changed:
                m.set_binding(row.id, enabled=on)
            imgui.same_line()
            self._fit(row.label)
            imgui.indent()
            imgui.set_next_item_width(120)
            runner = self._runner_combo("TimeRunner", row.runner, key=f"{row.id}.runner")
            if runner is not None:
                m.set_binding(row.id, runner=runner)
            imgui.same_line()
            imgui.set_next_item_width(120)
            phase = self._phase_combo("Phase", row.phase)
            if phase is not None:
                m.set_binding(row.id, phase=phase)
            imgui.set_next_item_width(120)
            changed, prio = imgui.input_int("Priority", row.priority, 0, 0, _ENTER)
            if changed:
                m.set_binding(row.id, priority=int(prio))
            imgui.same_line()
            imgui.text_colored(_GREY, f"ts = {row.ts * 1000:.2f} ms")
            imgui.unindent()
            imgui.pop_id()

    def _scripts(self) -> None:
        m = self.model
        changed, on = imgui.checkbox(
            "Enable Free Step Update Scripts", m.app.live.free_step_scripts
        )
        self.checkbox_rects["free_step_scripts"] = self._item_rect()
        if changed:
            m.set_free_step_scripts(on)
        if imgui.is_item_hovered():
            self._tooltip("free_update(dt): once per frame, with the frame's own dt")
        imgui.separator()
        self._binding_rows(m.script_rows())

    def _subsystems(self) -> None:
        m = self.model
        self._binding_rows(m.subsystem_rows())
        systems = m.world_systems()
        if systems:
            imgui.separator()
            imgui.text_colored(_GREY, "Sensors and actuators (run inside World.step):")
            for name, kind in systems:
                self._row(name)
                imgui.bullet_text(f"{name}  ({kind})")
        elif m.app.world is None:
            imgui.text_colored(_GREY, "No World: the App steps no physics.")

    def _recorder(self) -> None:
        m = self.model
        for kind in RECORDER_KINDS:
            cfg = m.recorder_settings[kind]
            self._row(f"{kind} recorder")
            imgui.push_id(kind)
            imgui.separator_text(f"{kind.capitalize()} recorder")
            imgui.set_next_item_width(120)
            runner = self._runner_combo("TimeRunner", cfg.runner)
            if runner is not None:
                m.set_recorder(kind, runner=runner)
            imgui.same_line()
            imgui.set_next_item_width(120)
            phase = self._phase_combo("Phase", cfg.phase)
            if phase is not None:
                m.set_recorder(kind, phase=phase)
            text = self._paths.get(kind, cfg.path)
            imgui.set_next_item_width(-80)
            hint = f"default: {m.app.config.recording_dir}/<title>-{kind}-NNN"
            changed, text = imgui.input_text_with_hint("Output", hint, text, _ENTER)
            self._paths[kind] = text
            if changed:
                m.set_recorder(kind, path=text)
            running = m.recording(kind)
            if imgui.button("Stop" if running else "Start"):
                if running:
                    m.stop_recorder(kind)
                else:
                    m.start_recorder(kind)
            imgui.same_line()
            last = m.last_files.get(kind)
            self._fit("recording..." if running else f"last file: {last or '-'}", _GREY)
            imgui.pop_id()
        rows = m.recorder_rows()
        if rows:
            imgui.separator_text("Attached recorders")
            for r in rows:
                label = f"{r.kind}: {r.path}"
                self._row(label)
                imgui.bullet()
                self._fit(f"{label}  [{r.runner}, {r.phase.name}] {r.count}")

    def _execution_order(self) -> None:
        flags = (imgui.TableFlags_.row_bg | imgui.TableFlags_.borders_inner_h).value
        if imgui.begin_table("order", 5, flags):
            fixed = imgui.TableColumnFlags_.width_fixed.value
            stretch = imgui.TableColumnFlags_.width_stretch.value
            rows = self.model.execution_order()
            cells = [
                (r.phase.name.capitalize(), str(r.priority), r.name, r.runner, f"{r.hz:g}")
                for r in rows
            ]
            # the narrow columns fit their content (a long runner name is shortened at a
            # third of the panel); the System column takes the rest, names shortened to fit
            third = imgui.get_content_region_avail().x / 3
            for k, h in enumerate(("Phase", "Prio", "System", "Runner", "Hz")):
                if h == "System":
                    imgui.table_setup_column(h, stretch, 1.0)
                    continue
                width = max(imgui.calc_text_size(c[k]).x for c in [(h,) * 5, *cells])
                imgui.table_setup_column(h, fixed, min(width + 10, third))
            imgui.table_headers_row()
            for r, row in zip(rows, cells, strict=True):
                self._row(r.name)
                imgui.table_next_row()
                for cell in row:
                    imgui.table_next_column()
                    self._fit(cell)
            imgui.end_table()

    def _time_manager(self) -> None:
        rows = self.model.time_manager_rows()
        self._wrapped("What the engine itself runs in each phase, and its time per call:", _GREY)
        flags = (imgui.TableFlags_.row_bg | imgui.TableFlags_.borders_inner_h).value
        heads = ("System", "Runner", "Hz", "Last", "Mean")
        cells = {
            r.name: (r.label, r.runner, f"{r.hz:g}", _cost(r.last_s), _cost(r.mean_s)) for r in rows
        }
        if not imgui.begin_table("time_manager", len(heads), flags):
            return
        fixed = imgui.TableColumnFlags_.width_fixed.value
        imgui.table_setup_column(heads[0], imgui.TableColumnFlags_.width_stretch.value, 1.0)
        third = imgui.get_content_region_avail().x / 3
        for k, h in enumerate(heads[1:], 1):  # the narrow columns fit their content
            width = max(imgui.calc_text_size(c[k]).x for c in [heads, *cells.values()])
            imgui.table_setup_column(h, fixed, min(width + 10, third))
        imgui.table_headers_row()
        for phase in Phase:
            mine = [r for r in rows if r.phase is phase]
            imgui.table_next_row()
            imgui.table_next_column()
            imgui.text_colored(_PHASE, phase.name.capitalize())
            if not mine:
                imgui.same_line()
                imgui.text_colored(_GREY, "(none)")
            for r in mine:
                self._row(" | ".join((r.name, *cells[r.name][1:])))
                imgui.table_next_row()
                for k, cell in enumerate(cells[r.name]):
                    imgui.table_next_column()
                    if k == 0:
                        imgui.indent(12)
                    self._fit(cell, None if r.enabled else _GREY)
                    if k == 0:
                        imgui.unindent(12)
        imgui.end_table()

    def _plots(self) -> None:
        m = self.model
        if imgui.get_time() - self._stats_time >= PLOT_REFRESH_S:
            stats = m.app.stats()
            self._stats_time = imgui.get_time()
            self._stats_text = (
                f"{stats.fps:5.1f} fps   {stats.steps_per_frame} steps/frame   "
                f"real-time x{stats.real_time_factor:.2f}"
            )
        imgui.text(self._stats_text)
        if imgui.begin_combo("Add signal", "choose..."):
            for group, names in signal_groups(m.available_signals()).items():
                imgui.text_colored(_GREY, group)
                for name in names:
                    if name in m.plots or name in FRAME_SIGNALS:
                        continue
                    if imgui.selectable(name, False)[0]:
                        m.add_plot(name)
            imgui.end_combo()
        height = 90
        # the plotted data is refreshed 10 times a second (PLOT_REFRESH_S): in between the
        # panel's pixels stay the same, so they are shown from the renderer's cache
        now = imgui.get_time()
        if now - self._plot_time >= PLOT_REFRESH_S or set(self._plot_data) != {
            *FRAME_SIGNALS,
            *m.plots,
        }:
            self._plot_time = now
            self._plot_data = {s: m.history(s) for s in (*m.plots, *FRAME_SIGNALS)}
        for sig in (*m.plots, *FRAME_SIGNALS):
            self._row(sig)
            x, y = self._plot_data[sig]
            imgui.push_id(sig)
            if sig not in FRAME_SIGNALS:
                if imgui.small_button("x"):
                    m.remove_plot(sig)
                imgui.same_line()
            imgui.text(f"{sig} = {y[-1]:.4g}" if y.size else sig)
            if implot.begin_plot("##plot", imgui.ImVec2(-1, height), _NO_LEGEND):
                implot.setup_axes("", "", _AUTO, 0)
                if y.size:  # y limits with a margin; a flat signal gets +-1 around it
                    lo, hi = float(y.min()), float(y.max())
                    pad = 0.08 * (hi - lo) if hi - lo > 1e-9 * max(1.0, abs(hi)) else 1.0
                    implot.setup_axis_limits(
                        implot.ImAxis_.y1.value, lo - pad, hi + pad, implot.Cond_.always.value
                    )
                if x.size:
                    implot.plot_line(sig, x, y)
                implot.end_plot()
            imgui.pop_id()


def _cost(seconds: float | None) -> str:
    """A time per call as the Time Manager shows it (``-`` before the first call)."""
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.2f} ms"
