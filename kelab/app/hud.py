"""Frame statistics (FPS, real-time factor, runner rates) and the HUD that shows them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kelab.app.overlays import Rect, draw_notice, free_corner

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas

__all__ = [
    "AppStats",
    "FrameStats",
    "Rect",
    "draw_hud",
    "draw_recording_badge",
    "free_corner",
]


@dataclass(frozen=True)
class AppStats:
    """A snapshot of the App's timing, measured over the last half second of frames.

    Attributes:
        fps: Frames per wall second.
        real_time_factor: Simulated seconds per wall second (1.0: real time).
        steps_per_frame: Fixed steps the last frame ran.
        sim_time: Simulated seconds so far.
        frames: Frames so far.
        paused: Whether simulated time is paused.
        time_scale: The clock's time scale.
        time_mode: The clock's time mode name.
        dropped_wall_time: Wall seconds cut by the frame-delta clamp.
        runner_hz: Each runner's configured rate.
        runner_rates: Each runner's measured steps per wall second.
        rewound: ``(fixed_step, newest)`` while the App stands rewound (time travel).
    """

    fps: float
    real_time_factor: float
    steps_per_frame: int
    sim_time: float
    frames: int
    paused: bool
    time_scale: float
    time_mode: str
    dropped_wall_time: float
    runner_hz: dict[str, float] = field(default_factory=dict)
    runner_rates: dict[str, float] = field(default_factory=dict)
    rewound: tuple[int, int] | None = None

    def lines(self) -> list[str]:
        """The HUD's text lines."""
        state = "PAUSED" if self.paused else f"x{self.time_scale:g}"
        out = [
            f"FPS {self.fps:6.1f}   steps/frame {self.steps_per_frame}",
            f"sim {self.sim_time:9.3f} s   RTF {self.real_time_factor:5.2f}   {state}",
            f"{self.time_mode}   dropped {self.dropped_wall_time:.2f} s",
        ]
        for name, hz in self.runner_hz.items():
            out.append(f"{name:<10} {hz:7.2f} Hz  ({self.runner_rates.get(name, 0.0):6.1f}/s)")
        if self.rewound is not None:
            out.append(f"rewound: step {self.rewound[0]} of {self.rewound[1]}")
        return out


class FrameStats:
    """Keeps (wall, sim time, runner steps) of recent frames for rates over a window.

    Args:
        window_s: Seconds of wall time the rates are averaged over.
    """

    def __init__(self, window_s: float = 0.5) -> None:
        self.window_s = float(window_s)
        self._samples: deque[tuple[float, float, tuple[int, ...]]] = deque()

    def add(self, wall: float, sim_time: float, runner_steps: tuple[int, ...]) -> None:
        """Record one frame."""
        self._samples.append((wall, sim_time, runner_steps))
        while len(self._samples) > 2 and wall - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    def rates(self) -> tuple[float, float, tuple[float, ...]]:
        """Return (fps, real-time factor, runner steps per second)."""
        if len(self._samples) < 2:
            return 0.0, 0.0, ()
        w0, s0, r0 = self._samples[0]
        w1, s1, r1 = self._samples[-1]
        span = w1 - w0
        if span <= 0:
            return 0.0, 0.0, tuple(0.0 for _ in r1)
        fps = (len(self._samples) - 1) / span
        rates = tuple((b - a) / span for a, b in zip(r0, r1, strict=False))
        return fps, (s1 - s0) / span, rates


def draw_hud(
    canvas: Canvas, stats: AppStats, avoid: list[Rect] | None = None, size: int = 14
) -> Rect:
    """Draw the stats as text over a dark panel placed by the overlay rule.

    The App draws the HUD after the user's ``render``: the panel goes to the first free
    corner (top-right, top-left, bottom-right, bottom-left), else stacked past what is
    there (`kelab.app.overlays.free_corner`), clear of the text drawn so far this frame
    (``canvas.text_boxes()``) and of ``avoid`` (the Settings panel, other overlays).

    Args:
        canvas: The frame's canvas.
        stats: What to show.
        avoid: Rectangles to keep clear besides the frame's text.
        size: Font size in pixels.

    Returns:
        The panel's screen rectangle ``(x0, y0, x1, y1)``.
    """
    return draw_notice(canvas, stats.lines(), list(avoid or []), size=size)


def draw_recording_badge(
    canvas: Canvas, seconds: float, path: str, avoid: list[Rect] | None = None, size: int = 14
) -> Rect:
    """Draw the "recording" indicator: a red dot, REC, the elapsed time and the file name.

    Args:
        canvas: The frame's canvas.
        seconds: Seconds recorded so far.
        path: The file being written (its name is shown).
        avoid: Extra rectangles to keep clear (besides the frame's text).
        size: Font size in pixels.

    Returns:
        The badge's screen rectangle.
    """
    from kelab.render.scenery import PALETTE

    label = f"REC {seconds:5.1f} s  {path}"
    tw, th = canvas.text_size(label, size)
    dot = size // 2 + 1
    box = (tw + 3 * dot + 10, max(th, 2 * dot) + 8)
    rect = free_corner(canvas.camera.size, box, canvas.text_boxes() + list(avoid or []))
    canvas.screen_rect(rect, PALETTE["panel"])
    cx, cy = rect[0] + 5 + dot, (rect[1] + rect[3]) / 2
    canvas.circle(
        canvas.camera.screen_to_world((cx, cy)), dot / canvas.camera.zoom, PALETTE["accent"]
    )
    canvas.text(
        (rect[0] + 2 * dot + 10, rect[1] + (box[1] - th) // 2),
        label,
        PALETTE["panel_text"],
        size=size,
        screen_space=True,
    )
    return rect
