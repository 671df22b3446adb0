"""The App's recorder controls: attach recorders and the F9 video (`RecordingControls`).

A base class of `kelab.app.app.App`: its public recorder methods, each a call on
``app.recordings`` (`kelab.app.recordings.Recordings`), which does the work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kelab.app.recorders import Recorder, VideoRecorder
    from kelab.app.recordings import Recordings

__all__ = ["RecordingControls"]


class RecordingControls:
    """The App's recorder methods (all delegate to ``self.recordings``)."""

    recordings: Recordings

    @property
    def recorders(self) -> tuple[Recorder, ...]:
        """The attached recorders."""
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
