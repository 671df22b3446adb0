"""Shared command line for the demos: ``--headless --frames N --out FILE.png --backend --layout``.

Windowed runs use the real wall clock. Headless runs are scripted and deterministic: a
frame clock advances exactly 1/60 s per frame (so the fixed-step clock still runs 50 Hz
steps against 60 fps frames, with a varying interpolation alpha), and each demo may
inject synthetic input events before a frame.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no banner on the command line

import kelab as ke  # noqa: E402


class FrameClock:
    """A wall clock for headless runs: advances exactly one frame per `advance`."""

    def __init__(self, fps: float = 60.0) -> None:
        self.now = 0.0
        self.frame_dt = 1.0 / fps

    def __call__(self) -> float:
        return self.now

    def advance(self) -> None:
        self.now += self.frame_dt


def _frames(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--frames must be an integer >= 1, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"--frames must be >= 1, got {value}; 0 frames would draw nothing to save"
        )
    return value


def _png_file(text: str) -> str:
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(
            f"--out must name a .png file, got the folder {text!r}; add a file name, e.g. "
            f"{str(path / 'shot.png')!r}"
        )
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"--out must end in .png, got {text!r}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"--out folder {str(path.parent)!r} does not exist; create it first"
        )
    return text


def parse_args(
    description: str, default_frames: int = 240, records: bool = False
) -> argparse.Namespace:
    """Parse the demo command line.

    Args:
        description: What ``--help`` says the demo is.
        default_frames: The frames of a ``--headless`` run without ``--frames``.
        records: The demo writes recordings (into ``--record-dir``): a ``--headless`` run
            keeps those, so it may leave ``--out`` out. Otherwise ``--headless`` without
            ``--out`` would draw and keep nothing, and is refused in one line (exit 2).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--headless", action="store_true", help="draw offscreen, scripted input")
    parser.add_argument(
        "--frames",
        type=_frames,
        default=None,
        help=f"stop after N >= 1 frames (default: {default_frames} with --headless; "
        "a window runs until it is closed)",
    )
    parser.add_argument(
        "--out", type=_png_file, default=None, help="write the last frame to this PNG"
    )
    parser.add_argument("--backend", default="pygame", choices=["pygame", "gl"])
    parser.add_argument("--record-dir", default="recordings", help="where recordings go")
    parser.add_argument(
        "--layout",
        default="isolated",
        choices=["isolated", "packed"],
        help="World layout (docs/world.md, 'Layouts')",
    )
    args = parser.parse_args()
    if args.headless and args.out is None and not records:  # it would keep nothing
        parser.exit(
            2,
            f"{parser.prog}: --headless needs --out to keep what it draws; add --out shot.png "
            "(the last frame), or drop --headless to watch it in a window\n",
        )
    if args.headless and args.frames is None:
        args.frames = default_frames
    return args


def world_options(args: argparse.Namespace) -> dict:
    """World keyword arguments for the command line (the layout)."""
    return {"layout": args.layout}


def app_options(args: argparse.Namespace) -> dict:
    """App keyword arguments for the command line (a frame clock when headless)."""
    options: dict = {"backend": args.backend, "headless": args.headless}
    if args.headless:
        args.frame_clock = FrameClock()
        options["clock"] = args.frame_clock
        options["render_hz"] = None
    return options


def run(
    app: ke.App,
    args: argparse.Namespace,
    script: Callable[[ke.App, int], None] | None = None,
) -> None:
    """Run the App: ``start()`` in a window, a scripted frame loop when headless."""
    if args.headless:
        clock = args.frame_clock  # set by app_options
        try:
            for frame in range(args.frames):
                if script is not None:
                    script(app, frame)
                clock.advance()
                if not app.renderFrameOnce():
                    break
        finally:
            app.close()
    else:
        app.start(max_frames=args.frames)
    if args.out:
        path = app.write_pixels_png(args.out)
        print(f"wrote {path}")


def click(app: ke.App, point: tuple[float, float], button: int = 1) -> None:
    """Inject a press at a world point (the release comes with `release`)."""
    pos = tuple(int(round(v)) for v in app.camera.world_to_screen(point))
    app.inject_events(
        [ke.InputEvent("mouse_move", pos=pos), ke.InputEvent("mouse_down", button=button, pos=pos)]
    )


def move(app: ke.App, point: tuple[float, float]) -> None:
    """Inject a pointer move to a world point."""
    pos = tuple(int(round(v)) for v in app.camera.world_to_screen(point))
    app.inject_event(ke.InputEvent("mouse_move", pos=pos))


def release(app: ke.App, point: tuple[float, float], button: int = 1) -> None:
    """Inject a button release at a world point."""
    pos = tuple(int(round(v)) for v in app.camera.world_to_screen(point))
    app.inject_event(ke.InputEvent("mouse_up", button=button, pos=pos))


def key(app: ke.App, name: str, down: bool = True) -> None:
    """Inject a key press (or release)."""
    app.inject_event(ke.InputEvent("key_down" if down else "key_up", key=name))
