"""Recordings: the recorders an App has attached, and its F9 video recording.

The App owns one (``app.recordings``); the App's ``add_recorder``,
``start_video_recording``... are its public face, and the Settings panel uses it
directly. It is given a `RecordingContext`, never the App: the timeline, the World, the
window's renderer and where videos go. Recorders bind to the App's timeline and read its
World and its drawn frames; `close` closes them all (files complete); none can be added
after. The App tells it a time-travel branch with `set_branch`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import must
from kelab.app.hud import Rect, draw_recording_badge
from kelab.app.recorders import DataRecorder, Recorder, VideoRecorder

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas
    from kelab.render.renderer import Renderer
    from kelab.sim.world import World
    from kelab.timing.timeline import Timeline

__all__ = ["RecordingContext", "Recordings", "default_video_path"]


def default_video_path(folder: Path, title: str) -> Path:
    """``folder/<title>-NNN.mp4`` with the first free number (the title made file-safe)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", title).strip("-") or "kelab"
    n = 0
    while (folder / f"{slug}-{n:03d}.mp4").exists():
        n += 1
    return folder / f"{slug}-{n:03d}.mp4"


@dataclass(frozen=True)
class RecordingContext:
    """What `Recordings` is given: where recorders bind, what they read, where videos go."""

    timeline: Timeline
    """Where recorders bind."""
    world: World | None
    """What data recorders read."""
    renderer: Callable[[], Renderer | None]
    """The window's renderer, where video frames come from (None before it opens)."""
    recording_dir: Path
    """The folder of the F9 video (``AppConfig.recording_dir``)."""
    title: str
    """The App's title, which names the F9 video's file."""


class Recordings:
    """The App's attached recorders and its video recording.

    Args:
        context: The timeline, World and frames recorded (`RecordingContext`).
    """

    def __init__(self, context: RecordingContext) -> None:
        self._ctx = context
        self._recorders: list[Recorder] = []
        self._video: VideoRecorder | None = None
        self._closed = False
        self._branch = 0
        context.timeline.add_rename_hook(self._runner_renamed)

    @property
    def branch(self) -> int:
        """The time-travel branch the data recorders' ``branch`` column shows (0 first).

        Every attached `DataRecorder` and each one added later write it in their rows;
        `set_branch` changes it.
        """
        return self._branch

    def set_branch(self, branch: int) -> None:
        """A rewind branched: the data recorders write ``branch`` from now on.

        The App wires it to its time travel's branch event (``TimeTravelContext.on_branch``).
        """
        for rec in self._recorders:
            if isinstance(rec, DataRecorder):
                rec.branch = branch
        self._branch = branch

    def _runner_renamed(self, old: str, new: str) -> None:
        """A renamed runner: the attached recorders' ``runner`` follows (their bindings do)."""
        for rec in self._recorders:
            if rec.runner == old:
                rec.runner = new

    @property
    def recorders(self) -> tuple[Recorder, ...]:
        """The attached recorders."""
        return tuple(self._recorders)

    @property
    def video(self) -> VideoRecorder | None:
        """The video recording (F9), while one runs."""
        return self._video

    def add(self, recorder: Recorder) -> Recorder:
        """Attach ``recorder`` to the App's timeline, World and frames; return it.

        Raises:
            RuntimeError: After `close` (the App closed).
        """
        if self._closed:
            raise RuntimeError("the App is closed; recorders can no longer be added")
        if not isinstance(recorder, Recorder):
            raise ValueError(
                must(
                    "App.add_recorder(recorder)",
                    "a recorder (ke.DataRecorder, ke.VideoRecorder, ke.LidarRecorder or a "
                    "Recorder subclass)",
                    recorder,
                    fix="make one, e.g. app.add_recorder(ke.DataRecorder('run.csv', "
                    "bodies=['/World/Ball']))",
                )
            )
        ctx = self._ctx
        if isinstance(recorder, DataRecorder) and recorder.branch is None:
            recorder.branch = self._branch  # a branch column (docs/app.md "Time travel")
        recorder.attach(ctx.timeline, world=ctx.world, frame_source=self.frame_source)
        self._recorders.append(recorder)
        return recorder

    def remove(self, recorder: Recorder) -> None:
        """Close ``recorder`` and forget it (its file is complete)."""
        if recorder in self._recorders:
            self._recorders.remove(recorder)
        if recorder is self._video:
            self._video = None
        recorder.close()

    def start_video(
        self, path: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> VideoRecorder:
        """Start the video recording (see ``App.start_video_recording``)."""
        if self._video is not None:
            raise RuntimeError(f"already recording to {self._video.path}; stop it first")
        if path is None:
            path = default_video_path(self._ctx.recording_dir, self._ctx.title)
        video = VideoRecorder(path, **kwargs)
        self.add(video)
        self._video = video
        return video

    def stop_video(self) -> Path | None:
        """Stop the video recording; return its file (None if none was running)."""
        video, self._video = self._video, None
        if video is None:
            return None
        self.remove(video)
        return video.path

    def toggle_video(self) -> None:
        """Start or stop the video recording (F9), printing where the file goes."""
        if self._video is None:
            video = self.start_video()
            print(f"recording video to {video.path.resolve()} (F9 again to stop)", flush=True)
        else:
            frames = self._video.frames
            path = self.stop_video()
            if path is not None:
                print(f"saved video {path.resolve()} ({frames} frames)", flush=True)

    def frame_source(self) -> np.ndarray | None:
        """The last drawn frame as RGB (top row first), or None before the first one."""
        renderer = self._ctx.renderer()
        if renderer is None or renderer.closed or renderer.frame_count == 0:
            return None
        return renderer.read_rgb_pixels(flip_y=True)

    def draw_badge(self, canvas: Canvas, avoid: list[Rect]) -> None:
        """Draw the red REC badge (time, file) while the video records."""
        video = self._video
        if video is not None:
            seconds = video.frames / float(video.fps or 30.0)
            draw_recording_badge(canvas, seconds, video.path.name, avoid)

    def close(self) -> list[BaseException]:
        """Close every recorder (files complete); return the errors, closing all anyway."""
        errors: list[BaseException] = []
        self._video = None
        self._closed = True
        for rec in self._recorders:
            try:
                rec.close()
            except Exception as exc:
                errors.append(exc)
        return errors
