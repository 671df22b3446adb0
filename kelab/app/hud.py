"""Frame statistics (FPS, real-time factor, runner rates) and the HUD that shows them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AppStats", "FrameStats", "draw_hud"]


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


def draw_hud(canvas: Any, stats: AppStats, size: int = 14) -> None:
    """Draw the stats as text over a dark box in the top-left corner.

    Args:
        canvas: The frame's canvas.
        stats: What to show.
        size: Font size in pixels.
    """
    lines = stats.lines()
    cam = canvas.camera
    line_h = size + 3
    w_px = 8 + int(0.6 * size) * max(len(s) for s in lines)
    h_px = 8 + line_h * len(lines)
    corners = [(0, 0), (w_px, 0), (w_px, h_px), (0, h_px)]
    canvas.polygon([cam.screen_to_world(c) for c in corners], (12, 14, 18))
    for i, text in enumerate(lines):
        canvas.text((6, 4 + i * line_h), text, (220, 230, 240), size=size, screen_space=True)
