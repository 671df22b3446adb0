"""The ``kelab`` command.

``kelab demo`` runs KELab's main job headless and prints what it did: a cartpole balanced
by a state-feedback controller on the Robot runner (50 Hz), physics at 120 Hz, and a
30 Hz Capture runner sampling the state, all on one exact timeline.
``kelab preview`` lives in `kelab.cli_preview`; ``train``/``play``/``eval`` register
themselves from `kelab.train.cli`, ``plot`` from `kelab.train.curve`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no pygame banner on the command line

import numpy as np

__all__ = [
    "KelabArgumentParser",
    "KelabUsageError",
    "build_parser",
    "main",
    "positive_int",
    "run_demo",
]

# State feedback for the cartpole (cart 1 kg, pole 0.1 kg, 1 m): force = gains @ (x, v, theta,
# omega), theta counter-clockwise. Pole leaning left (theta > 0): push the cart left.
_BALANCE_GAINS = np.array([1.0, 2.0, -30.0, -6.0])


def run_demo(seconds: float = 10.0, num_envs: int = 4, seed: int = 0) -> dict[str, float]:
    """Balance ``num_envs`` cartpoles for ``seconds`` of simulated time, headless.

    Each copy starts with its pole tilted by a different angle. The Robot runner (50 Hz)
    computes the controller, the physics runs at 120 Hz on its own runner, and the Capture
    runner (30 Hz) samples the pole angles, so the demo exercises the timeline too.

    Returns:
        A summary: steps per runner, the largest pole angle in the last second, wall time.
    """
    import kelab as ke

    builder = ke.SceneBuilder()
    builder.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    robot = ke.Robot(asset=ke.Asset.from_registry("kelab/robot/cartpole:v1"))
    builder.add(robot, at="/World/Robot")
    scene = builder.build()
    world = ke.World(scene, num_envs=num_envs, seed=seed)
    slider = world.joint_names.index("/World/Robot/slider_to_cart")
    hinge = world.joint_names.index("/World/Robot/cart_to_pole")

    # tilt each copy's pole by its own angle
    tilt = np.linspace(0.05, 0.2, num_envs)
    poses = world.body_poses.copy()
    velocities = np.zeros_like(world.body_velocities)
    pole = world.body_names.index("/World/Robot/pole")
    cart = world.body_names.index("/World/Robot/cart")
    # rotate the pole about its hinge, the joint's anchor in the cart frame
    anchor = scene.joint("/World/Robot/cart_to_pole").spec.anchor
    hinge_xy = poses[:, cart, :2] + np.asarray(anchor)
    rel = poses[:, pole, :2] - hinge_xy
    c, s = np.cos(tilt), np.sin(tilt)
    poses[:, pole, 0] = hinge_xy[:, 0] + c * rel[:, 0] - s * rel[:, 1]
    poses[:, pole, 1] = hinge_xy[:, 1] + s * rel[:, 0] + c * rel[:, 1]
    poses[:, pole, 2] += tilt
    world.set_body_states(np.arange(num_envs), poses, velocities)

    timeline = ke.Timeline()
    timeline.add_runner("Physics", 120)
    efforts = np.zeros((num_envs, len(world.joint_names)))
    samples: list[np.ndarray] = []

    def control(ts: float) -> None:
        state = np.stack(
            [
                world.joint_positions[:, slider],
                world.joint_velocities[:, slider],
                world.joint_positions[:, hinge],
                world.joint_velocities[:, hinge],
            ],
            axis=1,
        )
        efforts[:, slider] = state @ _BALANCE_GAINS
        world.set_joint_efforts(efforts)

    def physics(ts: float) -> None:
        world.step(ts)

    def capture(ts: float) -> None:
        samples.append(world.joint_positions[:, hinge].copy())

    timeline.bind(control, runner="Robot", priority=ke.timing.ON_UPDATE_PRIORITY)
    timeline.bind(physics, runner="Physics", phase=ke.Phase.PHYSICS)
    timeline.bind(capture, runner="Capture", phase=ke.Phase.ACQUISITION)

    start = time.perf_counter()
    timeline.advance(seconds)
    wall = time.perf_counter() - start
    last_second = np.abs(np.array(samples[-30:]))
    return {
        "simulated_s": float(timeline.time),
        "wall_s": wall,
        "robot_steps": timeline.runner("Robot").steps,
        "physics_steps": timeline.runner("Physics").steps,
        "capture_samples": len(samples),
        "initial_tilt_max_rad": float(tilt.max()),
        "final_tilt_max_rad": float(last_second.max()),
        "balanced": bool(last_second.max() < 0.05),
    }


class KelabUsageError(ValueError):
    """A mistake on the command line: ``main`` prints it as one ``kelab: error:`` line."""


#: Exceptions that mean "the user asked for something that cannot be done" (exit 2, one
#: line); anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    KelabUsageError,
    ValueError,
    ImportError,
    OSError,
)


from kelab._cli_args import NUM_ENVS_MAX, positive_float, positive_int, seed_int  # noqa: E402


class _DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to an option's help, unless it has none worth showing.

    Skipped for a None or False default (nothing to show) and for help that already says
    its default in words (``"(default: the task's)"``).
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return text
        return super()._get_help_string(action)


class KelabArgumentParser(argparse.ArgumentParser):
    """The ``kelab`` parser: argument errors are one line, and ``--help`` shows defaults.

    Every subcommand's parser is one too (``add_subparsers`` makes parsers of the same
    class), so ``kelab train --iterations 0`` prints
    ``kelab train: error: argument --iterations: ...; see kelab train --help`` and exits 2.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print ``PROG: error: MESSAGE; see PROG --help`` on one line and exit 2."""
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {text}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``kelab`` argument parser with every subcommand registered."""
    import kelab

    parser = KelabArgumentParser(prog="kelab", description="KELab command line")
    parser.add_argument("--version", action="version", version=f"kelab {kelab.__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run the headless cartpole balancing demo",
        description="Balance cartpoles headless on a multi-rate timeline; exit 0 when every "
        "pole is upright (< 0.05 rad) over the last simulated second, 1 otherwise.",
    )
    demo.add_argument(
        "--seconds", type=positive_float("seconds"), default=10.0, help="simulated seconds (> 0)"
    )
    demo.add_argument(
        "--num-envs",
        type=positive_int("num-envs", high=NUM_ENVS_MAX, why="more copies than a World holds"),
        default=4,
        help="cartpole copies (>= 1)",
    )
    demo.add_argument(
        "--seed", type=seed_int, default=0, help="seed of the world, an int from 0 to 2**64 - 1"
    )
    demo.set_defaults(func=_demo_main)
    from kelab.cli_preview import add_preview_parser

    add_preview_parser(sub)
    from kelab.train.cli import add_training_parsers  # train/play/eval (torch loads lazily)

    add_training_parsers(sub)
    from kelab.train.curve import add_plot_parser  # matplotlib loads when a figure is drawn

    add_plot_parser(sub)
    from kelab.train.export import add_export_parser  # onnx loads when a file is written

    add_export_parser(sub)
    return parser


def _demo_main(args: argparse.Namespace) -> int:
    summary = run_demo(args.seconds, args.num_envs, args.seed)
    print("KELab demo: balancing cartpoles headless on a multi-rate timeline")
    for key, value in summary.items():
        print(f"  {key:>22}: {value:.4g}" if isinstance(value, float) else f"  {key:>22}: {value}")
    if summary["balanced"]:
        return 0
    print(
        f"not balanced (exit 1): the largest pole angle over the last simulated second was "
        f"{summary['final_tilt_max_rad']:.3f} rad, the demo passes below 0.05 rad; the "
        "controller needs about 3 simulated seconds to settle the poles, so run "
        "--seconds 3 or more",
        file=sys.stderr,
    )
    return 1


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` of the command: ``kelab: warning: MESSAGE`` on one line."""
    text = " ".join(str(message).split()) or category.__name__
    stream = sys.stderr if file is None else file
    try:
        print(f"kelab: warning: {text}", file=stream, flush=True)
    except OSError:  # stderr closed: drop the warning, like warnings does
        pass


@contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Show warnings as ``kelab: warning: ...`` lines while a command runs (restored after).

    Only the command line does this: ``import kelab`` leaves Python's warnings as they are.
    """
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        yield


#: User errors whose traceback shows nothing useful: the message is the whole story, so
#: the error line does not offer ``--debug``.
_PLAIN_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kelab`` command (and of ``python -m kelab``).

    Every subcommand's user errors (an unknown task, no display, a bad ``module:Class``,
    a missing file, a bad value) print one ``kelab: error: ...`` line and return 2; an
    ImportError or another OSError adds ``(--debug shows the traceback)``, and with
    ``--debug`` (anywhere on the line) the traceback is shown instead. Argument errors
    print one ``kelab SUBCOMMAND: error: ...; see kelab SUBCOMMAND --help`` line and exit
    2 (``SystemExit``). Warnings print as ``kelab: warning: ...`` lines.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 success, 1 the command ran but failed its check, 2 user error.
    """
    from kelab.render.renderer import DisplayUnavailableError

    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    if debug:  # accepted anywhere, also after the subcommand
        args_list = [a for a in args_list if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        with _one_line_warnings():
            return int(args.func(args))
    except KeyboardInterrupt:
        print("kelab: interrupted", file=sys.stderr)
        return 130
    except (*USER_ERRORS, DisplayUnavailableError) as err:
        if debug:
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        if isinstance(err, OSError) and err.filename is not None and err.strerror:
            message = f"{err.strerror}: {err.filename}"
        plain = isinstance(err, (*_PLAIN_ERRORS, DisplayUnavailableError))
        hint = "" if plain else " (--debug shows the traceback)"
        print(f"kelab: error: {message}{hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
