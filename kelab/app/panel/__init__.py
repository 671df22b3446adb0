"""The in-app Settings panel (F2, ``App(panel=True)``): see docs/app.md.

`PanelModel` (pages, changes, settings file) and the settings helpers import no GUI
toolkit; `kelab.app.panel.host` and `kelab.app.panel.ui` import imgui-bundle, and only
when a panel is shown (``pip install kelab[panel]``).
"""

from kelab.app.panel.model import BindingRow, PanelModel, RecorderRow, RunnerRow
from kelab.app.panel.settings import (
    PAGES,
    PanelSettings,
    SettingsError,
    default_settings_path,
    load_settings,
    save_settings,
)

__all__ = [
    "PAGES",
    "BindingRow",
    "PanelModel",
    "PanelSettings",
    "RecorderRow",
    "RunnerRow",
    "SettingsError",
    "default_settings_path",
    "load_settings",
    "save_settings",
]
