"""``kelab train``, ``kelab play`` and ``kelab eval`` (registered by ``kelab/cli.py``).

``<Task>`` is a built-in id with or without ``kelab/`` (``CartPole-v0``), or
``module:TaskClass`` of your own task. ``train`` needs the train extra (torch), imported
only when it runs; without it, it says in one line how to install it (exit status 2).
``play`` and ``eval`` run the policy in numpy and need no extra.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from kelab._cli_args import NUM_ENVS_MAX, folder_path, positive_float, positive_int, seed_int

if TYPE_CHECKING:
    from kelab.rl.task import Task

__all__ = [
    "POLICY_DIR",
    "EvalProgress",
    "add_training_parsers",
    "import_task_class",
    "resolve_task",
    "run_eval",
    "run_play",
    "run_train",
    "shipped_policy",
]

POLICY_DIR = Path(__file__).resolve().parent / "policies"
"""Where the shipped policies live (``<TaskClass>.json`` + its safetensors)."""


def resolve_task(spec: str) -> tuple[str | None, str]:
    """Return ``(gymnasium id or None, "module:TaskClass")`` for a task spec.

    The one resolution of every subcommand (:func:`kelab.tasks.registry.resolve_task`).

    Raises:
        ValueError: For an unknown id, listing the built-in ones.
    """
    from kelab.tasks.registry import resolve_task as resolve

    return resolve(spec)


@dataclass(frozen=True)
class _Command:
    """What ``train``, ``play`` and ``eval`` start from: the streams and the task."""

    out: TextIO
    err: TextIO
    task_id: str | None
    class_path: str
    cls: type[Task]

    @property
    def task_name(self) -> str:
        """The Gymnasium id, or ``module:TaskClass`` of a task of your own."""
        return self.task_id or self.class_path


def _start(
    args: argparse.Namespace, out: TextIO | None, err: TextIO | None, *, extra: bool = True
) -> _Command | None:
    """The shared start of a subcommand: None (after saying so) without the train extra.

    ``extra=False`` (play, eval): the policy runs in numpy, no extra is needed.
    """
    out, err = out or sys.stdout, err or sys.stderr
    if extra and _missing_extra(err):
        return None
    task_id, class_path = resolve_task(args.task)
    return _Command(out, err, task_id, class_path, import_task_class(class_path))


def import_task_class(class_path: str) -> type[Task]:
    """The task class of ``"module:Class"`` for a command (``train``/``play``/``eval``/``preview``).

    :func:`kelab.tasks.registry.task_class`, except that a module that raises while it is
    imported (its own bug) is one line naming the module and its error, not a traceback.

    Raises:
        ValueError: ``cannot import module 'broken' of task 'broken:Task': RuntimeError:
            boom`` (``--debug`` shows the module's traceback: it is the cause).
    """
    from kelab.tasks.registry import task_class

    try:
        return task_class(class_path)
    except ValueError:
        raise  # already worded for the command line (a missing module, a bad name...)
    except Exception as err:  # the module's own code failed while importing
        module = class_path.partition(":")[0]
        what = " ".join(f"{type(err).__name__}: {err}".split())
        raise ValueError(
            f"cannot import module {module!r} of task {class_path!r}: {what}; fix the "
            f"error in {module} (kelab --debug ... shows where it was raised)"
        ) from err


def shipped_policy(class_path: str) -> Path | None:
    """The shipped checkpoint of a task class, or None when KELab ships none."""
    name = class_path.rpartition(":")[2]
    path = POLICY_DIR / f"{name}.json"
    return path if path.is_file() else None


def _missing_extra(out: TextIO) -> bool:
    from kelab.train._deps import INSTALL_HINT, missing_training_packages

    missing = missing_training_packages()
    if missing:
        print(f"kelab: {', '.join(missing)} not installed; {INSTALL_HINT}", file=out)
        return True
    return False


def _fmt_time(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class ProgressBar:
    """One live line per iteration on a terminal (a line every ~10 s otherwise).

    Shows the iteration, mean return, success rate, env-steps/s and the ETA. ``close()``
    prints the last iteration's line when it was not printed yet, so a run that stops at
    its target, is interrupted or ends always shows where it ended.
    """

    def __init__(self, total: int, start_iteration: int, out: TextIO) -> None:
        self.total = total
        self.start_iteration = start_iteration
        self.out = out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last_print = -math.inf
        self.evaluated: float | None = None  # the latest evaluation's success rate
        self._unprinted: str | None = None  # the latest line, when not printed yet
        self._first: float | None = None  # seconds to the end of the first iteration

    def __call__(self, row: dict[str, Any]) -> None:
        """Show one training iteration's row."""
        done = row["iteration"] - self.start_iteration
        elapsed = time.perf_counter() - self.t0
        if done <= 1 or self._first is None:  # the first iteration also starts things up
            self._first = elapsed
            eta = elapsed * (self.total - done)
        else:  # the pace since the first iteration
            eta = (elapsed - self._first) / (done - 1) * (self.total - done)
        rate = row["success_rate"]
        ret = row["mean_return"]
        if row.get("eval_success_rate") is not None:
            self.evaluated = row["eval_success_rate"]
        evaluated = "" if self.evaluated is None else f"eval {self.evaluated:4.2f}  "
        text = (
            f"it {row['iteration']:>5} ({done}/{self.total})  "
            f"return {ret:8.2f}  "
            f"success {'  -  ' if rate is None else f'{rate:5.2f}'}  {evaluated}"
            f"{row['env_steps_per_s'] / 1000:6.1f}k steps/s  ETA {_fmt_time(eta)}"
        ) if math.isfinite(ret) else (
            f"it {row['iteration']:>5} ({done}/{self.total})  (no episode finished yet)"
            f"  {row['env_steps_per_s'] / 1000:6.1f}k steps/s  ETA {_fmt_time(eta)}"
        )  # fmt: skip
        # a bar where the terminal has room for it; under 80 columns, single spaces; then
        # the middle fields go, never the iteration or the ETA
        cols = self._columns() if self.tty else 123
        if len(text) + 27 <= cols:
            filled = int(24 * done / max(self.total, 1))
            text = f"[{'#' * filled}{'-' * (24 - filled)}] {text}"
        elif len(text) > cols:
            text = " ".join(text.split())
            head, _, eta = text.rpartition(" ETA ")
            while len(text) > cols and " " in head:
                head = head.rsplit(" ", 2)[0] if head.count(" ") >= 2 else head.split(" ")[0]
                text = f"{head} ETA {eta}"
        if self.tty:  # one line that fits the terminal, clearing what a longer one left
            self.out.write("\r" + text[:cols] + "\x1b[K")
            self.out.flush()
        elif elapsed - self.last_print >= 10.0 or done == self.total:
            self.last_print = elapsed
            self._unprinted = None
            print(text, file=self.out, flush=True)
        else:
            self._unprinted = text

    def _columns(self) -> int:
        """Usable columns of the terminal this line goes to (``COLUMNS`` first)."""
        env = os.environ.get("COLUMNS", "")
        if env.isdigit() and int(env) > 0:
            return max(int(env) - 1, 20)
        try:
            return max(os.get_terminal_size(self.out.fileno()).columns - 1, 20)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return 99

    def close(self) -> None:
        """End the live line (on a terminal) or print the last line if it is not out yet."""
        if self.tty:
            self.out.write("\n")
            self.out.flush()
        elif self._unprinted is not None:
            print(self._unprinted, file=self.out, flush=True)
            self._unprinted = None


# ---------------------------------------------------------------------------- train
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
    """``kelab train``: build the env, train, save checkpoints, print the summary."""
    cmd = _start(args, out, err)
    if cmd is None:
        return 2
    out, err, cls = cmd.out, cmd.err, cmd.cls
    import kelab as ke
    from kelab.train.trainer import RLTrainer, training_config_of

    config = training_config_of(cls)
    if args.num_envs is not None:
        config = config.replace(num_envs=args.num_envs)
    iterations = config.max_iterations if args.iterations is None else args.iterations
    if args.stop_at_target is not None:
        config = config.replace(stop_at_target=args.stop_at_target)
    _sigterm_stops_like_ctrl_c()
    workers = getattr(args, "workers", None)
    address = getattr(args, "ray_address", None)
    start_timeout = getattr(args, "ray_start_timeout", None)
    if workers is None and (address is not None or start_timeout is not None):
        flag = "--ray-address" if address is not None else "--ray-start-timeout"
        print(f"kelab: {flag} needs --workers K (Ray workers to start)", file=err)
        return 2
    if workers is not None:  # the copies in K Ray actors (docs/scale.md)
        import importlib.util

        # a Ray driver does not fork: the evaluations run in this process
        config = config.replace(eval_process=False)

        if importlib.util.find_spec("ray") is None:
            print("kelab: --workers needs Ray; pip install 'kelab[ray]'", file=err)
            return 2
        if workers > config.num_envs:
            print(
                f"kelab: --workers must be <= the {config.num_envs} copies (--num-envs), got "
                f"{workers}; every worker needs at least one copy: lower --workers or raise "
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
            raise ValueError(
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
            bar = ProgressBar(iterations, trainer.iteration, err)
            try:
                stats = trainer.train(iterations, callback=bar)
            finally:
                bar.close()
    finally:
        env.close()
    print(_summary(stats, start_iteration=bar.start_iteration), file=out)
    if stats["eval_success_rate"] is not None:
        print(
            f"last evaluation (deterministic policy): success rate "
            f"{_percent(stats['eval_success_rate'])}",
            file=out,
        )
    if stats["stopped_at_target"]:
        judged = trainer.best_iteration
        by = f" (by the policy of iteration {judged}, saved as best)" if judged else ""
        print(f"target met at iteration {stats['target_reached_at']}{by}", file=out)
    print(f"best:   {stats['checkpoints']['best']}", file=out)
    print(f"latest: {stats['checkpoints']['latest']}", file=out)
    print(f"play it: kelab play {args.task} --checkpoint {stats['run_dir']}:best", file=out)
    return 130 if stats["interrupted"] else 0


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _percent(rate: float) -> str:
    return f"{100 * rate:.0f}%"


def _summary(stats: dict[str, Any], start_iteration: int = 0) -> str:
    """The ``done:`` line of ``kelab train``: rounded numbers, ``n/a`` with its reason.

    Example:
        ``done: 12 iterations, 9,600 env steps in 3.2 s (3,000 steps/s); mean return
        98.0, success rate 2% (training episodes, with exploration noise)``
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
        episodes = (
            f"mean return {mean}, success rate {success} "
            "(training episodes, with exploration noise)"
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


# ---------------------------------------------------------------------------- play / eval
def _checkpoint_spec(args: argparse.Namespace, class_path: str) -> str:
    if args.checkpoint is not None:
        from kelab.train.checkpoint import refuse_weights_file

        refuse_weights_file(args.checkpoint)  # before any window or warning
        return args.checkpoint
    shipped = shipped_policy(class_path)
    if shipped is None:
        raise ValueError(
            f"KELab ships no policy for {args.task}; train one with `kelab train {args.task}` "
            "and pass --checkpoint RUN_DIR:best"
        )
    return str(shipped)


def _print_episode(
    out: TextIO, i: int, ret: float, length: int, end: object, ok: bool | None
) -> None:
    verdict = "" if ok is None else ("  success" if ok else "  failure")
    print(
        f"episode {i}: return {float(ret):.2f}, {int(length)} steps, ended by {end}{verdict}",
        file=out,
        flush=True,
    )


def run_play(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kelab play``: watch a checkpoint in a window, in an App, or record a video."""
    cmd = _start(args, out, err, extra=False)
    if cmd is None:
        return 2
    spec = _checkpoint_spec(args, cmd.class_path)
    from kelab.render.renderer import display_available
    from kelab.rl.direct import DirectRLEnv
    from kelab.train.player import RLPlayer

    render_mode = "rgb_array" if args.video else (None if args.interactive else "human")
    if args.video and args.interactive:
        raise ValueError("--video and --interactive cannot be combined; pick one")
    if args.interactive and not display_available():  # the App's advice is for Python
        from kelab.render.renderer import DisplayUnavailableError

        raise DisplayUnavailableError(
            "--interactive needs a display for its window (DISPLAY and WAYLAND_DISPLAY are "
            f"unset); record the episodes offscreen instead (kelab play {args.task} --video "
            f"play.mp4), or run under a virtual display (xvfb-run -a kelab play {args.task} "
            "--interactive)"
        )
    with warnings.catch_warnings():
        if render_mode == "human" and not display_available():
            # one warning that says what to do here, instead of the env's generic one
            warnings.filterwarnings(
                "ignore", message="render_mode='human' but no display", category=RuntimeWarning
            )
            warnings.warn(
                "no display (DISPLAY and WAYLAND_DISPLAY are unset): the episodes play "
                "offscreen with no window; --video out.mp4 records them (or run under "
                "xvfb-run -a to watch)",
                RuntimeWarning,
                stacklevel=1,
            )
        env = DirectRLEnv(cmd.cls(), render_mode=render_mode, seed=args.seed)
        episodes = args.episodes if args.episodes or args.interactive else 3

        def report(i: int, info: dict) -> None:  # interactive: each episode as it ends
            ok = info.get("is_success")
            _print_episode(
                cmd.out, i, info["episode_return"], info["episode_length"], info["ended_by"], ok
            )

        try:
            with RLPlayer(spec, env=env) as player:
                result = player.play(
                    episodes=episodes,
                    video=args.video,
                    seed=args.seed,  # the first episode's reset (the player's own is 0)
                    interactive=args.interactive,
                    on_episode=report if args.interactive else None,
                )
        finally:
            env.close()
    if not args.interactive:
        for i, row in enumerate(
            zip(
                result["returns"],
                result["lengths"],
                result["ended_by"],
                result["successes"],
                strict=True,
            ),
            start=1,
        ):
            _print_episode(cmd.out, i, *row)
    if result["video"]:
        print(f"video: {result['video']}", file=cmd.out)
    return 0


def run_eval(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kelab eval``: the evaluation report of a checkpoint (episodes run in parallel)."""
    cmd = _start(args, out, err, extra=False)
    if cmd is None:
        return 2
    spec = _checkpoint_spec(args, cmd.class_path)
    import kelab as ke
    from kelab.rl.evaluation import EvaluationInterrupted
    from kelab.train.player import RLPlayer

    player = RLPlayer(spec, render_mode=None)
    env = ke.LearningEnv(cmd.cls(), num_envs=min(args.episodes, args.num_envs), seed=args.seed)
    interrupted = False
    try:
        player.check_env(env)
        bar = EvalProgress(args.episodes, cmd.err)
        try:
            report = ke.evaluate(
                env, player.policy, episodes=args.episodes, seed=args.seed, on_episode=bar
            )
        except EvaluationInterrupted as stop:  # Ctrl-C: the report of the finished ones
            report, interrupted = stop.report, True
        finally:
            bar.close()
    finally:
        env.close()
    if interrupted and report.episodes == 0:
        print("kelab: interrupted before any episode finished", file=cmd.err)
        return 130
    if interrupted:
        print(
            f"interrupted after {report.episodes:,} of {args.episodes:,} episodes; the "
            "report of the episodes finished:",
            file=cmd.err,
        )
    if args.json:
        data = report.to_dict()
        data["checkpoint"] = str(player.checkpoint.path)
        data["task"] = cmd.task_name
        if interrupted:
            data["interrupted"] = {"episodes_asked": args.episodes}
        print(json.dumps(data, indent=2), file=cmd.out)
    else:
        print(f"{cmd.task_name}  checkpoint {player.checkpoint.path}", file=cmd.out)
        print(report.table(), file=cmd.out)
    return 130 if interrupted else 0


class EvalProgress:
    """``kelab eval``'s progress: a live line on a terminal, a line every ~10 s otherwise.

    Shows the episodes judged, their pace and the ETA, as ``train``'s progress line does;
    a short evaluation that is not on a terminal prints nothing.

    Args:
        total: Episodes asked for.
        out: Where the line goes (stderr).
        clock: Seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self, total: int, out: TextIO, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.total = total
        self.out = out
        self.clock = clock
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.t0 = clock()
        self.last_print = self.t0 if not self.tty else -math.inf
        self._live = False  # a live line is on the terminal

    def __call__(self, done: int) -> None:
        """Show that ``done`` episodes are judged (printed when its time has come)."""
        now = self.clock()
        every = 0.2 if self.tty else 10.0
        if now - self.last_print < every and not (self.tty and done == self.total):
            return
        self.last_print = now
        elapsed = now - self.t0
        pace = done / elapsed if elapsed > 0 else math.inf
        eta = (self.total - done) / pace if done and math.isfinite(pace) else math.nan
        text = (
            f"eval: {done:,}/{self.total:,} episodes  {pace:,.1f} episodes/s  ETA {_fmt_time(eta)}"
        )
        if self.tty:
            self.out.write("\r" + text + "\x1b[K")
            self.out.flush()
            self._live = True
        else:
            print(text, file=self.out, flush=True)

    def close(self) -> None:
        """End the live line on a terminal."""
        if self._live:
            self.out.write("\n")
            self.out.flush()
            self._live = False


# ---------------------------------------------------------------------------- parsers
def _subcommand(
    sub: argparse._SubParsersAction,
    name: str,
    summary: str,
    run: Callable[[argparse.Namespace], int],
    seed: int,
    seed_help: str,
) -> argparse.ArgumentParser:
    """A subcommand taking a task and ``--seed`` (and ``--checkpoint`` unless training).

    ``--help`` shows each option's default (the ``kelab`` parser's formatter).
    """
    p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
    p.add_argument(
        "task",
        help="built-in id (CartPole-v0, kelab/CartPole-v0) or module:TaskClass of your own "
        "task (imported from the current folder or PYTHONPATH)",
    )
    p.add_argument(
        "--seed", type=seed_int, default=seed, help=f"{seed_help}, an int from 0 to 2**64 - 1"
    )
    if name != "train":
        p.add_argument(
            "--checkpoint",
            default=None,
            metavar="SPEC",
            help="RUN_DIR:best, RUN_DIR:latest or a checkpoint .json (default: the task's "
            "shipped policy)",
        )
    p.set_defaults(func=run)
    return p


def add_training_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``train``, ``play`` and ``eval`` to the ``kelab`` command's subparsers."""
    train = _subcommand(
        sub,
        "train",
        "train a policy for a task with PPO (rsl-rl-lib)",
        run_train,
        seed=42,
        seed_help="seed of the envs and of PPO",
    )
    train.add_argument(
        "--num-envs",
        type=positive_int("num-envs", high=NUM_ENVS_MAX, why="more copies than a World holds"),
        default=None,
        metavar="N",
        help="copies run side by side (default: the task's training config)",
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
    train.add_argument(
        "--stop-at-target",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stop once the task's success target is met (by an evaluation of the "
        "deterministic policy when the config has eval_every, else by the recent training "
        "episodes); --no-stop-at-target trains all the iterations (default: the task's "
        "training config)",
    )

    play = _subcommand(
        sub,
        "play",
        "watch a trained policy (window, App, or video)",
        run_play,
        seed=0,
        seed_help="seed of the first episode's reset",
    )
    play.add_argument(
        "--episodes",
        type=positive_int("episodes"),
        default=None,
        metavar="N",
        help="episodes to play (default: 3; with --interactive, until the window is closed)",
    )
    play.add_argument(
        "--video",
        default=None,
        metavar="OUT",
        help="record the episodes offscreen to OUT (.mp4 or .gif) instead of a window",
    )
    play.add_argument(
        "--interactive", action="store_true", help="play in an App: pause, step, drag"
    )

    ev = _subcommand(
        sub,
        "eval",
        "evaluation report of a checkpoint",
        run_eval,
        seed=1000,
        seed_help="seed of the evaluation episodes",
    )
    ev.add_argument(
        "--episodes",
        type=positive_int("episodes"),
        default=100,
        metavar="N",
        help="episodes judged",
    )
    ev.add_argument(
        "--num-envs",
        type=positive_int("num-envs", high=NUM_ENVS_MAX, why="more copies than a World holds"),
        default=100,
        metavar="N",
        help="copies run in parallel (at most --episodes)",
    )
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
