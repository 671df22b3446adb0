"""The Settings panel's Recorder page: the data, video and lidar recorders it runs.

A mixin of `kelab.app.panel.model.PanelModel` (which owns ``app``, ``message`` and the
all-or-nothing ``_do``); each change goes through the recorders' public API
(`Recorder.rebind`, ``app.recordings``), so it is validated with the same errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kelab._validate import check_choice
from kelab.app.panel.settings import RECORDER_KINDS, RecorderSettings
from kelab.app.recorders import DataRecorder, Recorder, VideoRecorder, check_phase
from kelab.timing.timeline import Phase

if TYPE_CHECKING:
    from kelab.app.ports import PanelContext

__all__ = ["RecorderPage", "RecorderRow", "RunningRecorder"]


class RecorderRow(NamedTuple):
    """One attached recorder on the Recorder page."""

    kind: str
    path: str
    runner: str
    phase: Phase
    count: int
    from_panel: bool


@dataclass
class RunningRecorder:
    """A recorder the panel started, and its kind."""

    recorder: Recorder
    kind: str


def _kind(rec: Recorder) -> str:
    name = type(rec).__name__
    if isinstance(rec, VideoRecorder):
        return "video"
    if isinstance(rec, DataRecorder):
        return "data"
    if name == "LidarRecorder":
        return "lidar"
    return name


def _count(rec: Recorder) -> int:
    for attr in ("frames", "scans", "rows"):
        value = getattr(rec, attr, None)
        if isinstance(value, int):
            return value
    return 0


class RecorderPage:
    """The Recorder page's rows and changes (mixed into `PanelModel`)."""

    app: PanelContext
    message: str
    recorder_settings: dict[str, RecorderSettings]
    last_files: dict[str, str]
    _running: dict[str, RunningRecorder]
    _do: Callable[..., bool]

    def _recorder_renamed(self, old: str, new: str) -> None:
        """A renamed runner: the recorder settings that name it follow."""
        for kind, cfg in self.recorder_settings.items():
            if cfg.runner == old:
                self.recorder_settings[kind] = RecorderSettings(new, cfg.phase, cfg.path)

    # ------------------------------------------------------------------ recorders
    def recorder_rows(self) -> list[RecorderRow]:
        """Every recorder attached to the App."""
        mine = {id(r.recorder) for r in self._running.values()}
        return [
            RecorderRow(_kind(r), str(r.path), r.runner, r.phase, _count(r), id(r) in mine)
            for r in self.app.recordings.recorders
        ]

    def recording(self, kind: str) -> bool:
        """Whether the panel's recorder of this kind runs."""
        return kind in self._running

    def set_recorder(
        self,
        kind: str,
        *,
        runner: str | None = None,
        phase: Phase | str | None = None,
        path: str | None = None,
    ) -> bool:
        """Set a recorder kind's runner, phase and output path.

        A running recorder of that kind moves to the new runner and phase at once
        (`Recorder.rebind`); a new path applies at the next start.
        """

        def apply() -> None:
            check_choice(kind, "recorder kind", RECORDER_KINDS)
            old = self.recorder_settings[kind]
            new_runner = old.runner if runner is None else runner
            self.app.timeline.runner(new_runner)
            new_phase = old.phase if phase is None else check_phase(phase)
            new_path = old.path if path is None else str(path)
            running = self._running.get(kind)
            if running is not None and (runner is not None or phase is not None):
                running.recorder.rebind(runner=new_runner, phase=new_phase)
            self.recorder_settings[kind] = RecorderSettings(new_runner, new_phase, new_path)

        return self._do(apply)

    def _default_path(self, kind: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.app.config.title).strip("-") or "kelab"
        suffix = {"data": ".csv", "video": ".mp4", "lidar": ".npz"}[kind]
        folder = self.app.config.recording_dir
        n = 0
        while (folder / f"{slug}-{kind}-{n:03d}{suffix}").exists():
            n += 1
        return folder / f"{slug}-{kind}-{n:03d}{suffix}"

    def start_recorder(self, kind: str) -> bool:
        """Start the panel's recorder of this kind (video, data or lidar)."""

        def apply() -> None:
            check_choice(kind, "recorder kind", RECORDER_KINDS)
            if kind in self._running:
                raise RuntimeError(f"the {kind} recorder already runs; stop it first")
            cfg = self.recorder_settings[kind]
            path = Path(cfg.path) if cfg.path else self._default_path(kind)
            opts = {"runner": cfg.runner, "phase": cfg.phase}
            rec: Recorder
            if kind == "video":
                rec = self.app.recordings.start_video(path, **opts)
            elif kind == "data":
                bodies = None if self.app.world is not None else ()
                rec = self.app.recordings.add(DataRecorder(path, bodies=bodies, **opts))
            else:
                from kelab.app.lidar_recorder import LidarRecorder

                rec = self.app.recordings.add(LidarRecorder(path, **opts))
            self._running[kind] = RunningRecorder(rec, kind)

        return self._do(apply)

    def stop_recorder(self, kind: str) -> bool:
        """Stop the panel's recorder of this kind; its file is complete (`last_files`)."""

        def apply() -> None:
            running = self._running.pop(kind, None)
            if running is None:
                raise RuntimeError(f"the {kind} recorder is not running")
            rec = running.recorder
            if kind == "video" and self.app.recordings.video is not None:
                self.app.recordings.stop_video()
            else:
                self.app.recordings.remove(rec)
            self.last_files[kind] = str(rec.path)

        ok = self._do(apply)
        return ok
