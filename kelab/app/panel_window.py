"""PanelWindow: the App's Settings panel shown in its window.

The App owns one (``app.panel_window``) beside the panel's model (``app.panel``, a
`~kelab.app.panel.model.PanelModel`); ``App.panel_open`` and ``App.toggle_panel`` are
its public face. It checks that imgui-bundle is installed before the panel is shown,
applies the settings file when the window opens (`load`), offers each input event to
the panel before the App sees it (`feed`), samples the plots and builds the panel's
ImGui frame on every drawn frame while the panel is shown (`frame`), and on `close`
saves the settings file if the panel changed something and ends the ImGui context.

The ImGui host (`kelab.app.panel.host.PanelHost`) is created on the first frame the
panel is shown, so imgui-bundle is imported only then.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from kelab._validate import check_bool
from kelab.app.overlays import Rect, panel_rect

if TYPE_CHECKING:
    from kelab.app.hud import AppStats
    from kelab.app.panel.host import PanelHost
    from kelab.app.panel.model import PanelModel
    from kelab.render.events import InputEvent
    from kelab.render.renderer import Renderer
    from kelab.timing.clock import FixedStepClock

__all__ = ["PanelWindow", "require_imgui"]

#: How to get the Settings panel's toolkit (appended to the errors that need it).
INSTALL_HINT = "install it with pip install 'kelab[panel]'"
#: Seconds the window shows the notice after F2 without imgui-bundle.
NOTICE_S = 6.0


def require_imgui(what: str) -> None:
    """Raise unless imgui-bundle (the Settings panel's toolkit) can be imported.

    Args:
        what: What needs it, starting the message (``"App(panel=True)"``).

    Raises:
        RuntimeError: ``"<what> needs imgui-bundle for the Settings panel; install it
            with pip install 'kelab[panel]'"``.
    """
    if importlib.util.find_spec("imgui_bundle") is None:
        raise RuntimeError(f"{what} needs imgui-bundle for the Settings panel; {INSTALL_HINT}")


class PanelWindow:
    """Shows an App's `PanelModel` in the App's window (see the module docstring).

    Args:
        model: The panel's model (``app.panel``).
        wall: The App's wall clock in seconds (times the plots' samples).
        clock: The App's fixed-step clock (the plots sample its ``last_frame_steps``).
        stats: The App's frame statistics now (the plots sample the real-time factor).
    """

    def __init__(
        self,
        model: PanelModel,
        wall: Callable[[], float],
        clock: FixedStepClock,
        stats: Callable[[], AppStats],
    ) -> None:
        self._clock = clock
        self._stats = stats
        self._wall_clock = wall
        self.model = model
        """The panel's model (the App's ``panel``)."""
        self._host: PanelHost | None = None
        self._wall: float | None = None
        self._notice_since: float | None = None

    @property
    def host(self) -> PanelHost | None:
        """The ImGui host: None until the panel is first shown, and after `close`."""
        return self._host

    @property
    def open(self) -> bool:
        """Whether the panel is shown (settable; showing it needs imgui-bundle)."""
        return self.model.open

    @open.setter
    def open(self, value: bool) -> None:
        value = check_bool(value, "App.panel_open")
        if value:
            require_imgui("App.panel_open")
        self.model.open = value

    def toggle(self) -> None:
        """Show or hide the panel (F2).

        A missing imgui-bundle is a warning and, for `NOTICE_S` seconds, a one-line
        notice in the window (`notice`) naming the install command; never an error.
        """
        try:
            self.open = not self.model.open
        except RuntimeError as exc:
            warnings.warn(str(exc), stacklevel=3)
            self._notice_since = self._wall_clock()

    def notice(self) -> str | None:
        """The notice the window shows now (after F2 without imgui-bundle), or None."""
        since = self._notice_since
        if since is None or self._wall_clock() - since >= NOTICE_S:
            return None
        return "The Settings panel (F2) needs imgui-bundle: pip install 'kelab[panel]'"

    def load(self) -> None:
        """Apply the settings file (when the window opens); a bad file is a warning."""
        if not self.model.load() and self.model.settings_error:
            warnings.warn(self.model.settings_error, stacklevel=4)

    def rects(self, display: tuple[int, int]) -> list[Rect]:
        """The panel's window as an overlay to keep clear (none while it is hidden).

        Its last drawn rectangle (the user may have moved it), else where it opens.
        """
        if not self.model.open:
            return []
        if self._host is not None:
            x, y, w, h = self._host.ui.rect
            if w > 0 and h > 0:
                return [(x, y, x + w, y + h)]
        return [panel_rect(display)]

    def feed(self, event: InputEvent) -> bool:
        """Offer an input event to the panel; True if the panel consumed it."""
        return self._host is not None and self._host.feed(event)

    def frame(self, renderer: Renderer) -> None:
        """Sample the plots and build the panel's ImGui frame (drawn by ``end_frame``)."""
        now = self._wall_clock()
        dt = 1 / 60 if self._wall is None else now - self._wall
        self._wall = now
        self.model.sample(dt, self._clock.last_frame_steps, self._stats().real_time_factor)
        if self._host is None:
            from kelab.app.panel.host import PanelHost

            self._host = PanelHost(self.model, renderer)
        self._host.frame(dt, renderer.size)

    def close(self) -> list[BaseException]:
        """Save the settings file if the panel changed something, end the ImGui context.

        The file is saved where the App uses one (`PanelModel.settings_file_used`).

        Returns:
            The errors met (an unwritable settings file), for the App to raise after it
            closed everything else.
        """
        errors: list[BaseException] = []
        if self.model.dirty and self.model.settings_file_used:
            try:
                self.model.save()
            except OSError as exc:
                errors.append(exc)
        if self._host is not None:
            host, self._host = self._host, None
            host.close()
        return errors
