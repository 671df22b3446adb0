"""Where the panel's settings file lives, and who reads it (#42 item 4).

Changing a runner in a window wrote ``<title>.kelab.json`` next to the script (into a
source tree) with no message, and every later ``--headless`` run silently applied it.
Now the default file is in the user's config folder, a line on stderr says where it was
read or written, and a headless run never applies it unless asked.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import pytest
from app_helpers import FakeClock, make_app

import kelab as ke
from kelab.app.panel.settings import PanelSettings, save_settings


@pytest.fixture
def places(tmp_path, monkeypatch) -> dict[str, Path]:
    """The running script's folder and the user's config folder, both under tmp_path."""
    script = tmp_path / "project" / "scene.py"
    script.parent.mkdir()
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return {"script": script.parent, "config": tmp_path / "config" / "kelab"}


def _json_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json")) if folder.exists() else []


def test_the_default_file_is_in_the_user_s_config_folder_not_beside_the_script(places):
    app = make_app(FakeClock(), title="Physics playground!")
    path = app.panel.settings_path
    assert path.parent == places["config"] / "settings"
    assert path.name.startswith("Physics-playground-") and path.name.endswith(".kelab.json")
    assert not path.is_relative_to(places["script"])
    app.close()
    # the platforms' conventions
    from kelab.app.panel.settings import user_config_folder

    home = Path("/home/ada")
    assert user_config_folder({}, "linux", home) == home / ".config" / "kelab"
    assert user_config_folder({"XDG_CONFIG_HOME": "rel"}, "linux", home) == home / ".config/kelab"
    mac = user_config_folder({"XDG_CONFIG_HOME": "/x"}, "darwin", home)
    assert mac == home / "Library" / "Application Support" / "kelab"
    assert user_config_folder({"APPDATA": "/A"}, "win32", home) == Path("/A") / "kelab"
    assert user_config_folder({}, "win32", home) == home / "AppData" / "Roaming" / "kelab"


def test_a_window_saves_and_reads_the_default_file_saying_where(places, real_window, capsys):
    app = ke.App(size=(160, 120), render_hz=None, title="Scene")
    assert app.panel.set_runner_hz("Capture", 25)
    app.start(max_frames=2)  # closes: the change is saved
    path = app.panel.settings_path
    assert _json_files(places["script"]) == []  # nothing in the source tree
    assert _json_files(places["config"]) == [path]
    err = capsys.readouterr().err
    assert err.count("kelab: panel settings saved to ") == 1, err
    assert f"kelab: panel settings saved to {path} (" in err

    again = ke.App(size=(160, 120), render_hz=None, title="Scene")
    again.start(max_frames=1)
    assert again.timeline.runner("Capture").hz == 25
    assert capsys.readouterr().err.splitlines() == [
        f"kelab: panel settings read from {path} (delete it for the defaults)"
    ]


def test_a_headless_run_does_not_apply_the_window_s_file_and_says_so(places, capsys):
    saved = PanelSettings(runners=(("Capture", Fraction(25)),), open=True)
    probe = make_app(FakeClock(), title="Scene")
    path = probe.panel.settings_path
    probe.close()
    save_settings(saved, path)
    before = path.read_bytes()

    app = make_app(FakeClock(), title="Scene")
    default_hz = app.timeline.runner("Capture").hz
    app.start(max_frames=3)
    assert default_hz != 25 and app.timeline.runner("Capture").hz == default_hz
    assert not app.panel.open and app.panel.settings_status() == "not used (headless)"
    assert capsys.readouterr().err.splitlines() == [
        f"kelab: panel settings in {path} not applied: a headless run uses the App's "
        "defaults (pass settings=<that file> to apply them)"
    ]
    # a change made headless is not saved over the window's file either
    app = make_app(FakeClock(), title="Scene")
    assert app.panel.set_runner_hz("Capture", 40)
    app.start(max_frames=1)
    assert path.read_bytes() == before and _json_files(places["script"]) == []

    # asked for by name, the file is applied (and nothing is said: the caller chose it)
    capsys.readouterr()
    asked = make_app(FakeClock(), title="Scene", settings=path)
    asked.start(max_frames=1)
    assert asked.timeline.runner("Capture").hz == 25 and asked.panel.open
    assert capsys.readouterr().err == ""
