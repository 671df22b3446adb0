"""``kelab train``: build the envs, train with PPO, save checkpoints, print the summary.

``train`` needs the train extra (torch), imported only when it runs; without
it, it says in one line how to install it (exit status 2). ``--workers K`` runs the
copies in K Ray workers (docs/scale.md).
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from kelab.cli.args import NUM_ENVS_MAX, folder_path, positive_float, positive_int
from kelab.cli.config_options import ConfigOptions
from kelab.cli.progress import ProgressBar
from kelab.cli.tasks import ENV_EXCLUDED, Command, add_task_subcommand, start_command
from kelab.errors import UserError
from kelab.rl.config import EnvConfig
from kelab.train.config import TrainConfig, training_config_of

if TYPE_CHECKING:
    from kelab.train.curve_process import CurveProcess

__all__ = [
    "TRAIN_ENV_OPTIONS",
    "TRAIN_OPTIONS",
    "add_train_parser",
    "import_trainer",
    "run_train",
    "summary_line",
]

TRAIN_OPTIONS = ConfigOptions(
    TrainConfig,
    excluded={
        "max_iterations": "--iterations gives this run's iterations; the field is its "
        "default (a task's own setting, not this run's)",
        "observation_shape": "the trainer sets it from the task's image observation space",
    },
    overrides=True,
    highs={"num_envs": (NUM_ENVS_MAX, "more copies than a World holds")},
)
"""``kelab train``'s options for every `TrainConfig` field (``--learning-rate``...): each
one given replaces the task's training config's value."""

TRAIN_ENV_OPTIONS = ConfigOptions(
    EnvConfig,
    excluded={
        **ENV_EXCLUDED,
        "num_envs": "--num-envs, TrainConfig's, sets it",
        "layout": "--layout, TrainConfig's, sets it",
        "num_threads": "--num-threads, TrainConfig's, sets it",
        "seed": "--seed seeds PPO too, not only the env",
        "render_mode": "training draws nothing (kelab play shows the policy)",
        "render_backend": "training draws nothing (kelab play shows the policy)",
    },
)
"""``kelab train``'s env has no option of its own (`EnvConfig`): these are the reasons."""


def import_trainer() -> None:
    """Import the trainer and its learner (torch) for the command.

    These imports are most of ``kelab train``'s start. The first time in a process they
    run with the garbage collector paused: torch makes a few hundred thousand objects,
    and each collection during the imports walks all of them (about a fifth of the
    imports' CPU time). Those objects live as long as
    the process, so they are then frozen (``gc.freeze``): later collections, the forked
    helpers' copy-on-write pages and the collections at interpreter exit (over a second)
    skip them. A collector the caller turned off stays off.
    """
    if "kelab.train.trainer" in sys.modules:
        return
    enabled = gc.isenabled()
    gc.collect()  # cheap before torch: no garbage of the caller's is frozen with it
    gc.disable()
    try:
        import kelab.train.trainer  # noqa: F401
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _sigterm_stops_like_ctrl_c() -> None:
    """``kill`` (SIGTERM) and Ctrl-C both save ``latest`` and end the run cleanly."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: object) -> None:
        if callable(signal.getsignal(signal.SIGINT)):
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C: train() stops at a safe point
        else:  # SIGINT ignored or set to the default by the program running this
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started with `&` by a shell
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_train(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``kelab train``: build the env, train, save checkpoints, print the summary.

    Args:
        args: The parsed arguments of ``kelab train``.
        out: Where results go (default: stdout).
        err: Where progress and problems go (default: stderr).

    Returns:
        The exit code: 0 done, 2 without the train extra or Ray, 130 interrupted (``latest`` saved).
    """
    cmd = start_command(args, out, err)
    if cmd is None:
        return 2
    from kelab.train.curve_process import start_curve_process

    drawer = start_curve_process()  # imports matplotlib on the other core while torch loads
    try:
        return _train(args, cmd, drawer)
    finally:
        if drawer is not None:
            drawer.close()


def _resumed_config(spec: str, task_config: TrainConfig) -> TrainConfig:
    """The config a resumed run was trained with (its checkpoint's), as RLTrainer takes it.

    The options given on the command line then go on top of it, not of the task's own
    config (a run trained with ``--share-cnn`` resumes with it). A checkpoint without one
    (an older or a policy-only one) leaves the task's: RLTrainer then says what is wrong.
    """
    from kelab.train.checkpoint import read_meta

    trained = read_meta(spec).get("train_config")
    return TrainConfig.from_dict(trained) if isinstance(trained, dict) else task_config


def _train(args: argparse.Namespace, cmd: Command, drawer: CurveProcess | None) -> int:
    """``kelab train`` once the task is known (``drawer``: where the curve is drawn)."""
    out, err, cls = cmd.out, cmd.err, cmd.cls
    import kelab as ke

    config = training_config_of(cls)  # checked before torch loads: a mistake says so at once
    if args.resume is not None:  # a resumed run goes on with its own config
        config = _resumed_config(args.resume, config)
    try:  # the options given on top of the task's training config (a resumed run's own)
        config = config.replace(**TRAIN_OPTIONS.given(args))
    except UserError as error:  # a combination no option could refuse alone
        print(f"kelab: error: {error}; see kelab train --help", file=err)
        return 2
    import_trainer()
    from kelab.train.trainer import RLTrainer

    iterations = config.max_iterations if args.iterations is None else args.iterations
    _sigterm_stops_like_ctrl_c()
    workers = getattr(args, "workers", None)
    address = getattr(args, "ray_address", None)
    start_timeout = getattr(args, "ray_start_timeout", None)
    if workers is None and (address is not None or start_timeout is not None):
        flag = "--ray-address" if address is not None else "--ray-start-timeout"
        print(f"kelab: error: {flag} needs --workers K (Ray workers to start)", file=err)
        return 2
    if workers is not None:  # the copies in K Ray actors (docs/scale.md)
        import importlib.util

        # a Ray driver does not fork: the evaluations run in this process (unless asked)
        if args.eval_process is None:
            config = config.replace(eval_process=False)

        if importlib.util.find_spec("ray") is None:
            print("kelab: error: --workers needs Ray; pip install 'kelab[ray]'", file=err)
            return 2
        if workers > config.num_envs:
            print(
                f"kelab: error: --workers must be <= the {config.num_envs} copies (--num-envs), "
                f"got {workers}; every worker needs at least one copy: lower --workers or raise "
                "--num-envs",
                file=err,
            )
            return 2
        env = ke.RayLearningEnv(
            cls(),
            config.num_envs,
            workers,
            seed=args.seed,
            address=address,
            start_timeout_s=300.0 if start_timeout is None else start_timeout,
            layout=config.layout,
            num_threads=config.num_threads,
        )
    else:
        try:
            env = ke.LearningEnv(
                cls(),
                num_envs=config.num_envs,
                seed=args.seed,
                layout=config.layout,
                num_threads=config.num_threads,
            )
        except ValueError as err:
            cap = re.search(r"num_envs must be at most (\d+)", str(err))
            if cap is None:
                raise
            raise UserError(
                f"--num-envs {config.num_envs} is more copies than {cmd.task_name} fits "
                f"here; pass --num-envs {cap.group(1)} or fewer ({err})"
            ) from None
    try:
        trainer = RLTrainer(
            env,
            seed=args.seed,
            run_dir=args.run_dir,
            config=config,
            resume=args.resume,
            task_id=cmd.task_id,
            curve_process=drawer,
        )
        with trainer:
            print(
                f"training {cmd.task_name}: {env.num_envs} copies"
                f"{f' in {workers} Ray worker(s)' if workers else ''} x "
                f"{trainer.config.num_steps_per_env} steps per iteration, "
                f"{'up to ' if trainer.config.stop_at_target else ''}"
                f"{_plural(iterations, 'iteration')}"
                f"{' (stops at the target)' if trainer.config.stop_at_target else ''}, "
                f"seed {args.seed}; run dir {trainer.run_dir}",
                file=out,
                flush=True,
            )
            bar = ProgressBar(
                iterations, trainer.iteration, err, window=trainer.config.success_window
            )
            try:
                stats = trainer.train(iterations, callback=bar, progress=False)
            finally:
                bar.close()
            # printed while the curve is drawn: closing the trainer waits for it
            _print_summary(
                args, stats, trainer.best_iteration, bar.start_iteration, out, bar.window
            )
    finally:
        env.close()
    return 130 if stats["interrupted"] else 0


def _print_summary(
    args: argparse.Namespace,
    stats: dict[str, Any],
    best_iteration: int | None,
    start_iteration: int,
    out: TextIO,
    window: int | None = None,
) -> None:
    """The lines after a run: the summary, the last verdict, the target, the checkpoints."""
    print(summary_line(stats, start_iteration=start_iteration, window=window), file=out)
    evaluated = evaluation_line(stats)
    if evaluated is not None:
        print(evaluated, file=out)
    met = target_line(stats, best_iteration)
    if met is not None:
        print(met, file=out)
    print(f"best:   {stats['checkpoints']['best']}", file=out)
    print(f"latest: {stats['checkpoints']['latest']}", file=out)
    print(f"play it: kelab play {args.task} --checkpoint {stats['run_dir']}:best", file=out)
    out.flush()


def evaluation_line(stats: dict[str, Any]) -> str | None:
    """The line of ``kelab train`` giving the last evaluation's success rate (None: none).

    A check that stopped early (the target out of reach) measured no rate: the line
    gives the most it can be.

    Args:
        stats: What ``RLTrainer.train`` returned.

    Example:
        >>> evaluation_line({"eval_success_rate": 1.0, "eval_episodes": 100,
        ...                  "eval_stopped_early": False})
        'last evaluation (deterministic policy): success rate 100%'
        >>> evaluation_line({"eval_success_rate": 0.94, "eval_episodes": 100,
        ...                  "eval_stopped_early": True})  # doctest: +NORMALIZE_WHITESPACE
        'last evaluation (deterministic policy): success rate at most 94% of its 100
        episodes (the check stopped once the target was out of reach)'
    """
    rate = stats.get("eval_success_rate")
    if rate is None:
        return None
    line = "last evaluation (deterministic policy): success rate"
    if not stats.get("eval_stopped_early"):
        return f"{line} {_percent(rate)}"
    return (
        f"{line} at most {_percent(rate)} of its {stats.get('eval_episodes')} episodes (the "
        "check stopped once the target was out of reach)"
    )


def target_line(stats: dict[str, Any], judged: int | None) -> str | None:
    """The line of ``kelab train`` saying when the task's target was met (None: never).

    Printed whether the run stopped there or trained on (``--no-stop-at-target``).

    Args:
        stats: What ``RLTrainer.train`` returned.
        judged: The iteration whose policy met it (``trainer.best_iteration``), if known;
            a ``best`` chosen after ``reached`` (training went on) is not named.
    """
    reached = stats["target_reached_at"]
    if reached is None:
        return None
    if judged is not None and judged > reached:  # a better best found after: not the one
        judged = None
    by = f" (by the policy of iteration {judged}, saved as best)" if judged else ""
    line = f"target met at iteration {reached}{by}"
    if not stats["stopped_at_target"] and stats["iterations"] > reached:
        line += f"; trained on to iteration {stats['iterations']} (stopping at the target was off)"
    return line


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _percent(rate: float) -> str:
    return f"{100 * rate:.0f}%"


def summary_line(stats: dict[str, Any], start_iteration: int = 0, window: int | None = None) -> str:
    """The ``done:`` line of ``kelab train``: rounded numbers, ``n/a`` with its reason.

    The success rate and mean return say how many episodes they are over: the recent
    ``window`` (``TrainConfig.success_window``) of the ``stats["episodes"]`` that ended.

    Example:
        ``done: 12 iterations, 9,600 env steps in 3.2 s (3,000 steps/s); mean return
        98.0, success rate 2% over 40 training episodes (with exploration noise)``
    """
    total = int(stats["iterations"])
    ran = total - start_iteration
    iterations = _plural(ran, "iteration")
    if start_iteration:
        iterations += f" (resumed at iteration {start_iteration}, now {total})"
    if stats.get("episodes"):
        ret = stats["last_reward"]
        mean = "n/a (no finite return)" if ret is None else f"{ret:.1f}"
        rate = stats["success_rate"]
        success = "n/a (the task has no success rule)" if rate is None else _percent(rate)
        count = int(stats["episodes"])
        last = "the last " if window is not None and count > window else ""
        count = count if window is None else min(count, window)
        episodes = (
            f"mean return {mean}, success rate {success} over {last}"
            f"{_plural(count, 'training episode')} (with exploration noise)"
        )
    else:
        episodes = "mean return n/a, success rate n/a (no training episode ended in this run)"
    return (
        f"{'interrupted' if stats['interrupted'] else 'done'}: {iterations}, "
        f"{stats['env_steps']:,} env steps in {stats['wall_time_s']:.1f} s"
        f"{' in all' if start_iteration else ''} ({stats['env_steps_per_s']:,.0f} steps/s"
        f"{' since the resume' if start_iteration else ''}); "
        f"{episodes}"
    )


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``train`` to the ``kelab`` command's subparsers."""
    train = add_task_subcommand(
        sub,
        "train",
        "train a policy for a task with PPO (rsl-rl-lib's algorithm)",
        run_train,
        seed=42,
        seed_help="seed of the envs and of PPO",
    )
    train.add_argument(
        "--iterations",
        type=positive_int("iterations"),
        default=None,
        metavar="N",
        help="PPO iterations (default: the task's max_iterations)",
    )
    train.add_argument(
        "--run-dir",
        type=folder_path("run-dir"),
        default=None,
        metavar="D",
        help="the run directory, where checkpoints land; D:best plays the best (default: "
        "runs/<TaskClass>/<UTC time>)",
    )
    train.add_argument(
        "--resume",
        default=None,
        metavar="SPEC",
        help="go on from a checkpoint: RUN_DIR:latest, RUN_DIR:best or a checkpoint .json",
    )
    train.add_argument(
        "--workers",
        type=positive_int("workers", high=NUM_ENVS_MAX, why="a worker per copy at most"),
        default=None,
        metavar="K",
        help="run the copies in K Ray worker processes (needs kelab[ray]; docs/scale.md)",
    )
    train.add_argument(
        "--ray-address",
        default=None,
        metavar="A",
        help="join the Ray cluster at A ('auto', 'ray://head:10001'); default: a local Ray",
    )
    train.add_argument(
        "--ray-start-timeout",
        type=positive_float("ray-start-timeout"),
        default=None,
        metavar="S",
        help="seconds to wait for Ray to place the workers before giving up (default: 300)",
    )
    TRAIN_OPTIONS.add_to(
        train.add_argument_group(
            "training config",
            "Each option given replaces that field of the task's training config (TrainConfig, "
            "whose fields docs/training.md lists); the others keep the task's values.",
        )
    )
