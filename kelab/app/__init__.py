"""KELab app layer: the interactive App, input, picking and recorders (see docs/app.md)."""

from kelab.app.app import App
from kelab.app.config import AppConfig
from kelab.app.hud import AppStats
from kelab.app.input import Input, StepView
from kelab.app.interaction import DragSpring, PickedBody, pick_body
from kelab.app.recorders import DataRecorder, Recorder, VideoRecorder

__all__ = [
    "App",
    "AppConfig",
    "AppStats",
    "DataRecorder",
    "DragSpring",
    "Input",
    "PickedBody",
    "Recorder",
    "StepView",
    "VideoRecorder",
    "pick_body",
]
