"""The per-scene settings file of the Settings panel: JSON, validated field by field.

The file holds what a person set in the panel: the time mode, the runners and their
rates, each callback's runner, phase, priority and on/off state, the recorders' runner,
phase and output path, the plotted signals and which page was open. `load_settings`
validates the whole file before anything is applied, and raises `SettingsError` naming
the field, the value and the fix; `save_settings` writes atomically (temp file, fsync,
rename). No imgui here: an App reads its settings without the panel's toolkit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from kelab._files import atomic_write_bytes
from kelab._validate import check_int, is_number, must
from kelab.app.config import MAX_HISTORY_S
from kelab.timing.config import TimeMode
from kelab.timing.timeline import MAX_HZ, MAX_RUNNERS, MIN_HZ, Phase

__all__ = [
    "PAGES",
    "RECORDER_KINDS",
    "BindingSettings",
    "PanelSettings",
    "RecorderSettings",
    "SettingsError",
    "default_settings_path",
    "load_settings",
    "save_settings",
    "user_config_folder",
]

#: The panel's pages, in tab order.
PAGES = (
    "Time Runners",
    "Scripts",
    "Subsystems",
    "Recorder",
    "Execution Order",
    "Time Manager",
    "Plots",
)
#: The recorders the panel starts and configures.
RECORDER_KINDS = ("data", "video", "lidar")
SETTINGS_VERSION = 1
_MAX_FILE_BYTES = 1 << 20


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the field and the fix."""


_MAX_DIGITS = 100  # no field holds a longer integer (rates <= 1000, priorities <= 1e6)


class _HugeNumber:
    """A JSON integer too long to be any field's value (kept out of Python's int())."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"


def _parse_int(text: str) -> int | _HugeNumber:
    """``json``'s integer hook: Python's int-digit limit never raises from the parser."""
    return int(text) if len(text) <= _MAX_DIGITS else _HugeNumber(text)


@dataclass(frozen=True)
class BindingSettings:
    """Where one callback runs.

    Attributes:
        runner: The runner's name.
        phase: The phase.
        priority: Order inside the phase (lower first).
        enabled: Whether it runs.
    """

    runner: str
    phase: Phase
    priority: int
    enabled: bool = True


@dataclass(frozen=True)
class RecorderSettings:
    """How the panel runs one kind of recorder.

    Attributes:
        runner: The runner whose steps are recorded.
        phase: The phase it records in.
        path: The output file ("" for the default next to the recording folder).
    """

    runner: str = "Capture"
    phase: Phase = Phase.ACQUISITION
    path: str = ""


@dataclass(frozen=True)
class PanelSettings:
    """Everything the settings file holds (None / empty: leave the App's default).

    Attributes:
        time_mode: The scene time mode.
        disable_viewport_rendering: Skip drawing while running in SIM_HIGH_PERF.
        runners: ``(name, hz)`` in order; rates are exact Fractions.
        renamed: ``(script name, name)`` of each runner renamed from the name the
            script gave it (saved as the runner's ``renamed_from``).
        free_step_scripts: Run the App's ``free_update(dt)`` once per frame.
        history_s: Seconds of history the App keeps to rewind (``App.history_s``).
        bindings: Callback id -> where it runs.
        recorders: Recorder kind -> its settings.
        plots: Plotted signal names.
        open: Whether the panel is open at start.
        page: The page shown.
    """

    time_mode: TimeMode | None = None
    disable_viewport_rendering: bool | None = None
    runners: tuple[tuple[str, Fraction], ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    free_step_scripts: bool | None = None
    history_s: float | None = None
    bindings: dict[str, BindingSettings] = field(default_factory=dict)
    recorders: dict[str, RecorderSettings] = field(default_factory=dict)
    plots: tuple[str, ...] = ()
    open: bool | None = None
    page: str | None = None


def user_config_folder(
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> Path:
    """KELab's folder in the user's config folder, where the platform keeps such files.

    ``$XDG_CONFIG_HOME/kelab`` (an absolute one), else ``~/.config/kelab`` on Linux and
    other Unixes; ``~/Library/Application Support/kelab`` on macOS; ``kelab`` in
    ``%APPDATA%`` on Windows (else ``~/AppData/Roaming/kelab``).

    Args:
        environ: The environment (default: ``os.environ``).
        platform: ``sys.platform``'s value (default: this one).
        home: The home folder (default: ``Path.home()``).

    Example:
        >>> user_config_folder({}, "linux", Path("/home/ada")).as_posix()
        '/home/ada/.config/kelab'
        >>> user_config_folder({"XDG_CONFIG_HOME": "/cfg"}, "linux", Path("/h")).as_posix()
        '/cfg/kelab'
        >>> user_config_folder({}, "darwin", Path("/Users/ada")).as_posix()
        '/Users/ada/Library/Application Support/kelab'
        >>> user_config_folder({"APPDATA": "C:/Users/ada/AppData/Roaming"}, "win32").as_posix()
        'C:/Users/ada/AppData/Roaming/kelab'
    """
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    if platform == "win32":
        appdata = environ.get("APPDATA", "")
        return (Path(appdata) if appdata else home / "AppData" / "Roaming") / "kelab"
    if platform == "darwin":
        return home / "Library" / "Application Support" / "kelab"
    xdg = environ.get("XDG_CONFIG_HOME", "")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else home / ".config") / "kelab"


def default_settings_path(title: str) -> Path:
    """The default file: in the user's config folder, named by the scene.

    The scene is the App's title and the running script's folder (the current folder when
    there is no script): two scripts' scenes of one title in two folders keep two files,
    and nothing is written next to a script, into a source tree.

    Args:
        title: The App's title; ``"Multi rate!"`` gives ``Multi-rate-<8 hex>.kelab.json``.

    Returns:
        ``<user_config_folder()>/settings/<slug>-<hash of the folder>.kelab.json``.
    """
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    folder = Path(main).resolve().parent if main else Path.cwd()
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", title).strip("-.") or "kelab"  # "A - B": "A-B"
    where = hashlib.sha256(str(folder).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return user_config_folder() / "settings" / f"{slug}-{where}.kelab.json"


def _hz_to_json(hz: Fraction) -> float | str:
    as_float = float(hz)
    if Fraction(repr(as_float)) == hz:
        return int(as_float) if as_float.is_integer() else as_float
    return f"{hz.numerator}/{hz.denominator}"


def settings_to_json(s: PanelSettings) -> dict[str, Any]:
    """The JSON object a `PanelSettings` is saved as."""
    out: dict[str, Any] = {"version": SETTINGS_VERSION}
    if s.time_mode is not None:
        out["time_mode"] = s.time_mode.name
    if s.disable_viewport_rendering is not None:
        out["disable_viewport_rendering"] = s.disable_viewport_rendering
    if s.free_step_scripts is not None:
        out["free_step_scripts"] = s.free_step_scripts
    if s.history_s is not None:
        out["history_s"] = s.history_s
    sources = {new: old for old, new in s.renamed}
    out["runners"] = [
        {"name": n, "hz": _hz_to_json(hz)} | ({"renamed_from": sources[n]} if n in sources else {})
        for n, hz in s.runners
    ]
    out["bindings"] = {
        k: {"runner": b.runner, "phase": b.phase.name, "priority": b.priority, "enabled": b.enabled}
        for k, b in s.bindings.items()
    }
    out["recorders"] = {
        k: {"runner": r.runner, "phase": r.phase.name, "path": r.path}
        for k, r in s.recorders.items()
    }
    out["plots"] = list(s.plots)
    panel: dict[str, Any] = {}
    if s.open is not None:
        panel["open"] = s.open
    if s.page is not None:
        panel["page"] = s.page
    out["panel"] = panel
    return out


def save_settings(settings: PanelSettings, path: str | os.PathLike[str]) -> Path:
    """Write ``settings`` to ``path`` as indented JSON, atomically.

    Returns:
        The path written.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(settings_to_json(settings), indent=2) + "\n"
    atomic_write_bytes(out, text.encode("utf-8"))
    return out


class _Reader:
    """Validates one JSON document, naming each field by its path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, allowed: str, got: object, fix: str = "") -> SettingsError:
        fix = fix or "fix the value, or delete the file to start from the defaults"
        return SettingsError(f"settings file {self.path}: {must(where, allowed, got, fix)}")

    def obj(self, value: object, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "a JSON object", value)
        unknown = [k for k in value if k not in allowed]
        if unknown:
            raise self.fail(
                f"{where}.{unknown[0]}" if where else unknown[0],
                f"one of the known fields {list(allowed)}",
                unknown[0],
                "remove it",
            )
        return value

    def string(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, "a non-empty string", value)
        return value

    def boolean(self, value: object, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, "true or false", value)
        return value

    def phase(self, value: object, where: str) -> Phase:
        names = [p.name for p in Phase]
        if not isinstance(value, str) or value.upper() not in names:
            raise self.fail(where, f"a phase ({', '.join(names)})", value)
        return Phase[value.upper()]

    def priority(self, value: object, where: str) -> int:
        try:
            return check_int(value, where, low=-1_000_000, high=1_000_000)
        except ValueError:
            raise self.fail(where, "an integer priority (lower runs first)", value) from None

    def hz(self, value: object, where: str) -> Fraction:
        rate: Fraction | None = None
        if is_number(value):
            if isinstance(value, float) and not math.isfinite(value):
                rate = None
            else:
                rate = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
        elif isinstance(value, str) and re.fullmatch(r"\s*\d{1,30}\s*/\s*\d{1,30}\s*", value):
            num, den = (int(x) for x in value.split("/"))
            rate = Fraction(num, den) if den else None
        if rate is None or not MIN_HZ <= rate <= MAX_HZ:
            raise self.fail(where, "a rate from 0.01 to 1000 Hz (a number or 'p/q')", value)
        return rate


def _file_kind(mode: int) -> str:
    """What a path that is not a regular file is, for the message."""
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def load_settings(path: str | os.PathLike[str]) -> PanelSettings:
    """Read and validate a settings file (nothing is applied here).

    Args:
        path: The JSON file.

    Returns:
        The settings.

    Raises:
        SettingsError: When the file cannot be read or a field is wrong; the message
            names the field (``runners[1].hz``), the value and the fix.
        FileNotFoundError: When there is no file.
    """
    p = Path(path)
    r = _Reader(p)
    try:
        info = p.stat()
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            # a device or a FIFO (through a link too): never opened, /dev/zero has no end
            raise r.fail("the file", "a regular file", _file_kind(info.st_mode))
        if info.st_size > _MAX_FILE_BYTES:
            raise r.fail("the file", f"at most {_MAX_FILE_BYTES} bytes", f"{info.st_size} bytes")
        with p.open("rb") as fh:  # a folder raises IsADirectoryError here
            raw = fh.read(_MAX_FILE_BYTES + 1)  # bounded: the file may grow after stat
        if len(raw) > _MAX_FILE_BYTES:
            raise r.fail("the file", f"at most {_MAX_FILE_BYTES} bytes", "a file still growing")
    except FileNotFoundError:
        raise
    except OSError as exc:  # a folder, no permission, an I/O error
        raise SettingsError(
            f"settings file {p}: the file must be readable, got {type(exc).__name__} "
            f"({exc.strerror or exc}); fix its permissions or delete it"
        ) from None
    try:
        doc = json.loads(raw.decode("utf-8"), parse_int=_parse_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SettingsError(
            f"settings file {p}: the file must be JSON, got a parse error ({exc}); fix it or "
            "delete the file to start from the defaults"
        ) from None
    except RecursionError:
        raise SettingsError(
            f"settings file {p}: the file must be JSON nested at most a few hundred levels "
            "deep, got deeper nesting; fix it or delete the file to start from the defaults"
        ) from None
    top = r.obj(
        doc,
        "",
        (
            "version",
            "scene",
            "time_mode",
            "disable_viewport_rendering",
            "free_step_scripts",
            "history_s",
            "runners",
            "bindings",
            "recorders",
            "plots",
            "panel",
        ),
    )
    version = top.get("version", SETTINGS_VERSION)
    if version != SETTINGS_VERSION:
        raise r.fail("version", f"{SETTINGS_VERSION}", version)
    time_mode = None
    if "time_mode" in top:
        modes = [m.name for m in TimeMode]
        value = top["time_mode"]
        if not isinstance(value, str) or value.upper() not in modes:
            raise r.fail("time_mode", f"one of {modes}", value)
        time_mode = TimeMode[value.upper()]
    dvr = None
    if "disable_viewport_rendering" in top:
        dvr = r.boolean(top["disable_viewport_rendering"], "disable_viewport_rendering")
    free = None
    if "free_step_scripts" in top:
        free = r.boolean(top["free_step_scripts"], "free_step_scripts")
    history_s = None
    if "history_s" in top:
        value = top["history_s"]
        if not (is_number(value) and 0 < value <= MAX_HISTORY_S):
            raise r.fail("history_s", f"seconds > 0 and <= {MAX_HISTORY_S:g}", value)
        history_s = float(value)
    runners: list[tuple[str, Fraction]] = []
    renamed: list[tuple[str, str]] = []
    raw_runners = top.get("runners", [])
    if not isinstance(raw_runners, list):
        raise r.fail("runners", "a list of {name, hz} objects", raw_runners)
    if len(raw_runners) > MAX_RUNNERS:
        raise r.fail("runners", f"at most {MAX_RUNNERS} runners", f"{len(raw_runners)} runners")
    for i, item in enumerate(raw_runners):
        where = f"runners[{i}]"
        obj = r.obj(item, where, ("name", "hz", "renamed_from"))
        if "name" not in obj or "hz" not in obj:
            raise r.fail(where, "an object with 'name' and 'hz'", item)
        name = r.string(obj["name"], f"{where}.name")
        if any(name == n for n, _ in runners):
            raise r.fail(f"{where}.name", "unique", name, "rename or remove the duplicate")
        runners.append((name, r.hz(obj["hz"], f"{where}.hz")))
        if "renamed_from" in obj:
            source = r.string(obj["renamed_from"], f"{where}.renamed_from")
            if any(source == old for old, _ in renamed):
                raise r.fail(f"{where}.renamed_from", "unique", source, "remove the duplicate")
            renamed.append((source, name))
    bindings: dict[str, BindingSettings] = {}
    value = top.get("bindings", {})
    raw_bindings = r.obj(value, "bindings", tuple(value) if isinstance(value, dict) else ())
    for key, item in raw_bindings.items():
        where = f"bindings.{key}"
        obj = r.obj(item, where, ("runner", "phase", "priority", "enabled"))
        missing = [k for k in ("runner", "phase", "priority") if k not in obj]
        if missing:
            raise r.fail(f"{where}.{missing[0]}", "present", None, f"add '{missing[0]}'")
        bindings[key] = BindingSettings(
            r.string(obj["runner"], f"{where}.runner"),
            r.phase(obj["phase"], f"{where}.phase"),
            r.priority(obj["priority"], f"{where}.priority"),
            r.boolean(obj.get("enabled", True), f"{where}.enabled"),
        )
    recorders: dict[str, RecorderSettings] = {}
    raw_recorders = r.obj(top.get("recorders", {}), "recorders", RECORDER_KINDS)
    for kind, item in raw_recorders.items():
        where = f"recorders.{kind}"
        obj = r.obj(item, where, ("runner", "phase", "path"))
        path_value = obj.get("path", "")
        if not isinstance(path_value, str):
            raise r.fail(f"{where}.path", "a file path string", path_value)
        recorders[kind] = RecorderSettings(
            r.string(obj.get("runner", "Capture"), f"{where}.runner"),
            r.phase(obj.get("phase", "ACQUISITION"), f"{where}.phase"),
            path_value,
        )
    plots = top.get("plots", [])
    if not isinstance(plots, list) or not all(isinstance(x, str) and x for x in plots):
        raise r.fail("plots", "a list of signal names", plots)
    panel = r.obj(top.get("panel", {}), "panel", ("open", "page"))
    is_open = r.boolean(panel["open"], "panel.open") if "open" in panel else None
    page = panel.get("page")
    if page is not None and page not in PAGES:
        raise r.fail("panel.page", f"one of {list(PAGES)}", page)
    return PanelSettings(
        time_mode=time_mode,
        disable_viewport_rendering=dvr,
        runners=tuple(runners),
        renamed=tuple(renamed),
        free_step_scripts=free,
        history_s=history_s,
        bindings=bindings,
        recorders=recorders,
        plots=tuple(dict.fromkeys(plots)),
        open=is_open,
        page=page,
    )
