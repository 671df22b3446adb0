"""``kelab preview <Id>``: open a task in a PACED window with zero or random actions.

Preview a task before training it, and after every task or robot change: the window
shows copy 0 at real-time pace (``SimulationPacer``), and every finished episode is
printed with how it ended. On a machine without a screen, ``--headless --out F.png``
(the last frame) or ``--out F.mp4`` / ``F.gif`` (every step) draws offscreen instead.
`kelab.cli` calls :func:`add_preview_parser`.

This module belongs to the command-line layer (it resolves built-in ids through
``kelab.tasks``, which sits above ``kelab.rl``).
"""

from __future__ import annotations

import argparse
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._files import atomic_write_bytes, make_parent, publish, temp_beside
from kelab.cli.args import KelabUsageError, positive_float, seed_int
from kelab.cli.config_options import ConfigOptions
from kelab.cli.tasks import ENV_EXCLUDED, import_task_class
from kelab.errors import UserError
from kelab.rl.config import EnvConfig

if TYPE_CHECKING:
    from kelab.rl.task import Task

__all__ = [
    "OUT_SUFFIXES",
    "PREVIEW_ENV_OPTIONS",
    "add_preview_parser",
    "check_out_path",
    "load_task_class",
    "run_preview",
]

OUT_SUFFIXES = (".png", ".mp4", ".gif")
"""What ``--out`` can write: the last frame (PNG) or a video of every step."""

PREVIEW_ENV_OPTIONS = ConfigOptions(
    EnvConfig,
    names={"render_backend": "backend"},
    excluded={
        **ENV_EXCLUDED,
        "num_envs": "preview shows one copy (a DirectRLEnv)",
        "seed": "--seed seeds the random actions too, not only the env",
        "render_mode": "--headless draws offscreen (rgb_array), else a window (human)",
        "layout": "the default (isolated): the one copy at full precision",
        "num_threads": "one copy: one thread",
    },
)
"""``kelab preview``'s option of `EnvConfig`: ``--backend`` (``render_backend``)."""

HEADLESS_DEFAULT_S = 5.0
"""Simulated seconds of a headless preview without ``--seconds``."""


def load_task_class(task_id: str) -> type[Task]:
    """Return the Task class of a built-in id or a ``"module:TaskClass"``.

    Raises:
        UserError: For an unknown id, a module that does not import (or raises while it
            is imported), a missing class or something that is not a ``ke.Task``
            subclass; the message says what to fix.
    """
    from kelab.tasks.registry import resolve_task

    return import_task_class(resolve_task(task_id)[1])


def check_out_path(out: str | os.PathLike[str]) -> Path:
    """Validate an ``--out`` file: a ``.png``/``.mp4``/``.gif`` path that is not a folder.

    Args:
        out: The output path.

    Returns:
        It as a Path.

    Raises:
        UserError: For a folder, another suffix, or a folder that cannot be created.
    """
    path = Path(out)
    if path.is_dir() or str(out).endswith(("/", os.sep)):
        raise UserError(
            f"--out must name a file, got the folder {str(out)!r}; add a file name, e.g. "
            f"{str(path / 'preview.png')!r}"
        )
    if path.suffix.lower() not in OUT_SUFFIXES:
        raise UserError(
            f"--out must end in {', '.join(OUT_SUFFIXES)}, got {str(out)!r}; .png saves the "
            "last frame, .mp4/.gif a video of every step"
        )
    return make_parent(path, "--out")  # a missing folder is created, as play --video does


class _FrameSink:
    """Collects frames to ``path`` atomically: a PNG of the last frame, or a video."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = path
        self.fps = fps
        self.frames = 0
        self._last: np.ndarray | None = None
        self._writer: Any = None
        self._tmp: Path | None = None

    def add(self, frame: np.ndarray) -> None:
        self.frames += 1
        if self.path.suffix.lower() == ".png":
            self._last = frame
            return
        if self._writer is None:
            import imageio.v2 as imageio

            self._tmp = temp_beside(self.path, suffix=self.path.suffix)  # the encoder reads it
            if self.path.suffix.lower() == ".gif":
                self._writer = imageio.get_writer(
                    self._tmp, mode="I", duration=1000.0 / self.fps, loop=0
                )
            else:
                self._writer = imageio.get_writer(
                    self._tmp,
                    fps=self.fps,
                    codec="libx264",
                    quality=7,
                    macro_block_size=1,
                    pixelformat="yuv420p",
                    ffmpeg_log_level="error",
                )
        h, w = frame.shape[:2]
        if h % 2 or w % 2:  # H.264 needs even sizes
            frame = np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)))
        self._writer.append_data(frame)

    def close(self, keep: bool = True) -> Path | None:
        """Finish the file (renamed into place only when ``keep``); returns it or None."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()
            assert self._tmp is not None
            if keep:
                return publish(self._tmp, self.path)
            self._tmp.unlink(missing_ok=True)
            return None
        if keep and self._last is not None:
            _write_png_atomic(self._last, self.path)
            return self.path
        return None


def _write_png_atomic(img: np.ndarray, path: Path) -> None:
    from kelab.render.pygame_door import pygame

    h, w = img.shape[:2]
    surf = pygame.image.frombuffer(np.ascontiguousarray(img).tobytes(), (w, h), "RGB")
    png = io.BytesIO()
    pygame.image.save(surf, png, "PNG")
    atomic_write_bytes(path, png.getvalue())


def run_preview(
    task_id: str,
    actions: str = "zero",
    seconds: float | None = None,
    seed: int = 0,
    render_mode: str | None = "human",
    print_fn: Callable[[str], Any] = print,
    out: str | os.PathLike[str] | None = None,
    backend: str = "pygame",
) -> dict[str, Any]:
    """Run a task in one copy with zero or random actions and report the episodes.

    Args:
        task_id: ``"CartPole-v0"``, ``"kelab/CartPole-v0"`` or ``"module:TaskClass"``.
        actions: ``"zero"`` or ``"random"`` (uniform in [-1, 1], seeded).
        seconds: Simulated seconds to run; None runs until the window is closed
            (headless: :data:`HEADLESS_DEFAULT_S`).
        seed: Seed of the env and of the random actions.
        render_mode: ``"human"`` (PACED window), ``"rgb_array"`` (offscreen frames, as
            fast as possible) or None (no drawing, for scripted checks).
        print_fn: Where episode lines go.
        out: Optional ``.png`` (the last frame) or ``.mp4``/``.gif`` (a frame per step,
            played at the control rate) file, written atomically; needs a render mode.
        backend: ``"pygame"`` or ``"gl"``.

    Returns:
        ``{"steps", "episodes", "ended_by": {name: count}, "out": path or None}``.

    Raises:
        UserError: For an unknown task, action mode or ``out`` path.
    """
    from kelab.render.renderer import BACKENDS, require_display
    from kelab.rl.config import EnvConfig
    from kelab.rl.direct import DirectRLEnv

    if actions not in ("zero", "random"):
        raise UserError(f"actions must be 'zero' or 'random', got {actions!r}")
    if backend not in BACKENDS:
        raise UserError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if seconds is not None and not (np.isfinite(seconds) and seconds > 0):
        raise UserError(f"seconds must be a number > 0 or None, got {seconds!r}")
    out_path = None if out is None else check_out_path(out)
    if out_path is not None and render_mode is None:
        raise UserError("out needs render_mode 'human' or 'rgb_array' (frames to write)")
    cls = load_task_class(task_id)
    if render_mode == "human":
        require_display(backend)
    elif seconds is None:
        seconds = HEADLESS_DEFAULT_S
    config = EnvConfig(render_mode=render_mode, render_backend=backend)
    env = DirectRLEnv(cls(), seed=seed, config=config)
    rng = np.random.default_rng(seed)
    max_steps = None if seconds is None else max(1, round(seconds / env.step_dt))
    sink = None if out_path is None else _FrameSink(out_path, env.timing.control_hz)
    ended: dict[str, int] = {}
    steps = episodes = 0
    stop = "close the window to stop" if max_steps is None else f"{seconds:g} s"
    gx, gy = env.world.scene.gravity  # a top-down task sets (0, 0) in build(scene)
    print_fn(
        f"previewing {cls.__name__}: {env.timing.physics_hz:.0f} Hz physics, "
        f"{env.timing.decimation} steps/action, {env.timing.control_hz:.0f} Hz control, "
        f"gravity ({gx:g}, {gy:g}) m/s^2, {actions} actions; {stop}"
    )
    if env.randomizer is not None:  # the task's domain randomization (docs/tasks.md)
        print_fn("randomized: " + "; ".join(env.randomizer.describe()))

    def grab() -> None:
        if sink is None:
            return
        frame = env.render()
        if frame is None and env.renderer is not None:  # human: the window's frame
            frame = env.renderer.read_rgb_pixels()
        if frame is not None:
            sink.add(frame)

    written: Path | None = None
    ok = False
    try:
        env.reset(seed=seed)
        grab()
        while (max_steps is None or steps < max_steps) and not env.window_closed:
            if actions == "zero":
                action = np.zeros(env.action_space.shape, dtype=np.float32)
            else:
                action = rng.uniform(-1.0, 1.0, env.action_space.shape).astype(np.float32)
            _, _, terminated, truncated, info = env.step(action)
            steps += 1
            if terminated or truncated:
                episodes += 1
                ended[info["ended_by"]] = ended.get(info["ended_by"], 0) + 1
                ok_text = "" if "is_success" not in info else f", success={info['is_success']}"
                length = info["episode_length"]
                plural = "" if length == 1 else "s"
                print_fn(
                    f"episode {episodes}: ended by {info['ended_by']!r} after {length} "
                    f"step{plural}, return {info['episode_return']:.2f}{ok_text}"
                )
                if "randomization" in info:  # the values this episode ran with
                    drawn = ", ".join(f"{k} {v:.4g}" for k, v in info["randomization"].items())
                    print_fn(f"  randomized: {drawn}")
                env.reset()
            grab()
        ok = True
    finally:
        if sink is not None:
            written = sink.close(keep=ok or sink.frames > 0)
        env.close()
    if written is not None:
        what = "the last of" if written.suffix.lower() == ".png" else "a video of"
        print_fn(f"wrote {written} ({what} {sink.frames if sink else 0} frames)")
    return {"steps": steps, "episodes": episodes, "ended_by": ended, "out": written}


def _main(args: argparse.Namespace) -> int:
    from kelab.render.renderer import DisplayUnavailableError, display_available

    if args.out is not None:
        check_out_path(args.out)
    load_task_class(args.task)  # a bad task id is the first thing to report
    if args.headless and args.out is None:  # it would simulate, draw, and keep nothing
        raise KelabUsageError(
            f"--headless needs --out to keep what it draws; add --out preview.png (the last "
            f"frame) or --out preview.mp4 (every step): kelab preview {args.task} --headless "
            "--out preview.png"
        )
    mode = "rgb_array" if args.headless else "human"
    if mode == "human" and not display_available(args.backend):
        raise DisplayUnavailableError(
            "no display for a preview window (DISPLAY and WAYLAND_DISPLAY are unset); run "
            f"'kelab preview {args.task} --headless --out preview.mp4' (or .png), or under "
            "a virtual display: xvfb-run -a kelab preview ..."
        )
    run_preview(
        args.task,
        actions=args.actions,
        seconds=args.seconds,
        seed=args.seed,
        render_mode=mode,
        out=args.out,
        backend=args.backend,
    )
    return 0


def add_preview_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``preview`` subcommand to the ``kelab`` command's subparsers.

    Args:
        subparsers: What ``parser.add_subparsers()`` returned.

    Returns:
        The new subparser (its ``func`` default runs the preview and returns an exit code).
    """
    p = subparsers.add_parser(
        "preview",
        help="open a task in a real-time window with zero or random actions",
        description="Watch a task with zero or random actions. Without a screen use "
        "--headless --out preview.png (last frame) or --out preview.mp4 (every step).",
    )
    p.add_argument("task", help="task id, e.g. CartPole-v0, Humanoid-v0, BallToGoal-v0")
    p.add_argument(
        "--actions",
        choices=("zero", "random"),
        default="zero",
        help="zero: every action 0 (the task left alone); random: uniform in [-1, 1], seeded",
    )
    p.add_argument(
        "--seconds",
        type=positive_float("seconds", fix="give the simulated seconds to run, e.g. --seconds 5"),
        default=None,
        help=f"simulated seconds (default: until closed; headless {HEADLESS_DEFAULT_S:g})",
    )
    p.add_argument(
        "--seed",
        type=seed_int,
        default=0,
        help="seed of the env and of the random actions, an int from 0 to 2**64 - 1",
    )
    p.add_argument(
        "--headless",
        action="store_true",
        help="draw offscreen, no window or display needed (needs --out: what to keep)",
    )
    p.add_argument("--out", default=None, help="write the last frame (.png) or a video (.mp4/.gif)")
    PREVIEW_ENV_OPTIONS.add_to(p)
    p.set_defaults(func=_main)
    return p
